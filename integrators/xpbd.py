"""XPBD's two integration stages: predict positions, then recover velocities from the solved positions.

    predict:   v* = v + dt (f / m + g - c v),   x* = x + dt v*
    update:    v' = (x' - x) / dt               (x' = x* after the constraint iterations)

Kinematic particles (inverse mass 0) keep their own velocity and ignore forces
and gravity; inactive particles are copied unchanged.
"""

import warp as wp

from ..types import PARTICLE_FLAG_ACTIVE
from .euler import velocity_after


@wp.kernel
def predict_positions_kernel(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    damping: float,
    dt: float,
    x_pred: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    x0 = x[tid]
    if (flags[tid] & PARTICLE_FLAG_ACTIVE) == 0:
        x_pred[tid] = x0
        return
    # the same velocity as symplectic Euler's, so both solvers mean the same by forces, gravity, damping
    x_pred[tid] = x0 + dt * velocity_after(v[tid], f[tid], inv_mass[tid], gravity[0], damping, dt)


@wp.kernel
def update_velocities_kernel(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    x_solved: wp.array(dtype=wp.vec3),
    flags: wp.array(dtype=wp.int32),
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    if (flags[tid] & PARTICLE_FLAG_ACTIVE) == 0:
        x_out[tid] = x[tid]
        v_out[tid] = v[tid]
        return
    x1 = x_solved[tid]
    x_out[tid] = x1
    v_out[tid] = (x1 - x[tid]) / dt


def predict_positions(model, state_in, external_f, dt: float, x_pred) -> None:
    """Stage: unconstrained positions after ``dt`` [s] under gravity and external forces [N]."""
    if model.particle_count == 0:
        return
    wp.launch(
        predict_positions_kernel,
        dim=model.particle_count,
        inputs=[state_in.particle_q, state_in.particle_qd, external_f, model.particle_inv_mass, model.particle_flags,
                model.gravity, model.particle_damping, dt],
        outputs=[x_pred],
        device=model.device,
    )


def update_velocities(model, state_in, x_solved, dt: float, state_out) -> None:
    """Stage: write the solved positions and the velocities they imply into ``state_out``."""
    if model.particle_count == 0:
        return
    wp.launch(
        update_velocities_kernel,
        dim=model.particle_count,
        inputs=[state_in.particle_q, state_in.particle_qd, x_solved, model.particle_flags, dt],
        outputs=[state_out.particle_q, state_out.particle_qd],
        device=model.device,
    )
