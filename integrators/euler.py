"""Symplectic (semi-implicit) Euler for particles.

    v' = v + dt * (f / m + g - c v)      x' = x + dt * v'

Kinematic particles (inverse mass 0) ignore forces and gravity and move with
their own velocity (zero by default, so pinned particles stay put); inactive
particles are copied unchanged.
"""

import warp as wp

from ..types import PARTICLE_FLAG_ACTIVE


@wp.func
def velocity_after(v0: wp.vec3, f: wp.vec3, w: float, gravity: wp.vec3, damping: float, dt: float):
    """v + dt (f w + g - c v); kinematic particles (w = 0) ignore gravity and damping too."""
    dynamic = wp.where(w > 0.0, 1.0, 0.0)
    return v0 + dt * (f * w + dynamic * (gravity - damping * v0))


@wp.kernel
def integrate_particles_kernel(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    damping: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    x0 = x[tid]
    v0 = v[tid]
    if (flags[tid] & PARTICLE_FLAG_ACTIVE) == 0:
        x_out[tid] = x0
        v_out[tid] = v0
        return
    v1 = velocity_after(v0, f[tid], inv_mass[tid], gravity[0], damping, dt)
    x_out[tid] = x0 + dt * v1
    v_out[tid] = v1


def integrate_particles(model, state_in, particle_f, dt: float, state_out) -> None:
    """Advance particle positions and velocities of ``state_in`` by ``dt`` [s] into ``state_out``."""
    if model.particle_count == 0:
        return
    wp.launch(
        integrate_particles_kernel,
        dim=model.particle_count,
        inputs=[
            state_in.particle_q, state_in.particle_qd, particle_f, model.particle_inv_mass, model.particle_flags,
            model.gravity, model.particle_damping, dt,
        ],
        outputs=[state_out.particle_q, state_out.particle_qd],
        device=model.device,
    )
