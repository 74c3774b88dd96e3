"""XPBD's two integration stages in step-local coordinates: predict the motion, recover velocities from it.

The XPBDSolver iterates on what moved since the step began, not on positions:

    predict:   v* = v + dt (f / m + g - c v),   dx_0 = dt v*      (x* = x + dx_0)
    update:    v' = dx_K / dt,                  x' = x + dx_K    (dx_K after the constraint iterations)

Why: a step moves a particle by dt v (1e-3 m or less), while its position can be tens of metres out
(``replicate`` puts worlds metres apart), where float32 positions are spaced by ~2e-6 m. Positions
iterated in world coordinates round every correction to that spacing and recover velocities from the
difference of two rounded positions, so a friction correction of 1e-6 m per step vanished 30 m out
(a sliding box stopped 3x later than at the origin) and velocities carried a rounding error of
spacing / dt, which grows as dt shrinks (an arm's error grew as the step shrank). Displacements keep
float32's relative precision of the motion itself: friction, contacts and joints behave the same at
any distance from the origin, and the one rounding of x + dx_K per step no longer feeds the velocity.

Kinematic particles (inverse mass 0) keep their own velocity and ignore forces and gravity (per world,
``gravity[world]``, as in ``euler.py``); inactive particles are copied unchanged.

Rigid bodies: ``xpbd_bodies.py`` (a module of its own, so a particle scene compiles no body kernels).
"""

import warp as wp

from ..autodiff.backward_code import on_demand
from ..types import PARTICLE_FLAG_ACTIVE
from .euler import velocity_after, world_gravity

on_demand(__name__)  # backward code compiled once gradients are wanted


# ---------------------------------------------------------------------------------------------- particles
@wp.kernel
def predict_particle_motion_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    damping: float,
    # Data in:
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    # In:
    dt: float,
    # Data out:
    dx_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    v0 = v[tid]
    if (flags[tid] & PARTICLE_FLAG_ACTIVE) == 0:
        dx_out[tid] = wp.vec3(0.0)
        v_out[tid] = v0
        return
    v1 = velocity_after(v0, f[tid], inv_mass[tid], world_gravity(gravity, particle_world[tid]), damping, dt)
    dx_out[tid] = dt * v1
    v_out[tid] = v1


def predict_positions(model, state_in, particle_f, dt: float, dx_out, v_out) -> None:
    """The predicted motion dt v* of every particle into ``dx_out`` and v* into ``v_out`` (the symplectic Euler
    step of ``euler.integrate_particles``, as a displacement)."""
    if model.particle_count == 0:
        return
    wp.launch(predict_particle_motion_kernel, dim=model.particle_count, device=model.device,
              inputs=[model.particle_inv_mass, model.particle_flags, model.particle_world, model.gravity,
                      model.particle_damping, state_in.particle_qd, particle_f, dt],
              outputs=[dx_out, v_out])


@wp.kernel
def update_velocities_kernel(
    # Model:
    flags: wp.array(dtype=wp.int32),
    inv_mass: wp.array(dtype=float),
    # Data in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    dx_solved: wp.array(dtype=wp.vec3),
    # In:
    dt: float,
    # Data out:
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    if (flags[tid] & PARTICLE_FLAG_ACTIVE) == 0:
        x_out[tid] = x[tid]
        v_out[tid] = v[tid]
        return
    dx = dx_solved[tid]
    x_out[tid] = x[tid] + dx
    if inv_mass[tid] > 0.0:
        v_out[tid] = dx / dt
    else:
        v_out[tid] = v[tid]  # kinematic: nothing moved it but its own velocity


def update_velocities(model, state_in, dx_solved, dt: float, x_out, v_out) -> None:
    """The solved positions x + dx into ``x_out`` and the velocities they imply, dx / dt, into ``v_out``."""
    if model.particle_count == 0:
        return
    wp.launch(update_velocities_kernel, dim=model.particle_count, device=model.device,
              inputs=[model.particle_flags, model.particle_inv_mass, state_in.particle_q, state_in.particle_qd,
                      dx_solved, dt],
              outputs=[x_out, v_out])
