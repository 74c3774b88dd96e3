"""Symplectic (semi-implicit) Euler for particles:

    v' = v + dt * (f / m + g - c v)      x' = x + dt * v'

Kinematic particles (inverse mass 0) ignore forces and gravity and move with
their own velocity (zero by default, so pinned particles stay put); inactive
particles are copied unchanged. Rigid bodies: ``euler_bodies.py`` (a module of
its own, so a particle scene compiles no body kernels).

Gravity is per world: an entity reads ``model.gravity[world]`` (its
``particle_world`` / ``body_world``; an index below 0 reads world 0's).
"""

import warp as wp

from ..autodiff.backward_code import on_demand
from ..types import PARTICLE_FLAG_ACTIVE

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def velocity_after(v0: wp.vec3, f: wp.vec3, w: float, gravity: wp.vec3, damping: float, dt: float):
    """v + dt (f w + g - c v); kinematic particles (w = 0) ignore gravity and damping too."""
    dynamic = wp.where(w > 0.0, 1.0, 0.0)
    return v0 + dt * (f * w + dynamic * (gravity - damping * v0))


@wp.func
def world_gravity(gravity: wp.array(dtype=wp.vec3), world: int):
    """Gravity of ``world`` (world 0's for an entity outside every world)."""
    return gravity[wp.max(world, 0)]


@wp.kernel
def integrate_particles_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    damping: float,
    # Data in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    # In:
    dt: float,
    # Data out:
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
    v1 = velocity_after(v0, f[tid], inv_mass[tid], world_gravity(gravity, particle_world[tid]), damping, dt)
    x_out[tid] = x0 + dt * v1
    v_out[tid] = v1


def integrate_particles(model, state_in, particle_f, dt: float, x_out, v_out) -> None:
    """Particle positions and velocities of ``state_in`` after ``dt`` [s] under ``particle_f`` [N] and gravity."""
    if model.particle_count == 0:
        return
    wp.launch(integrate_particles_kernel, dim=model.particle_count, device=model.device,
              inputs=[model.particle_inv_mass, model.particle_flags, model.particle_world, model.gravity,
                      model.particle_damping, state_in.particle_q, state_in.particle_qd, particle_f, dt],
              outputs=[x_out, v_out])
