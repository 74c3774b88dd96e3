"""XPBD's two integration stages: predict positions, then recover velocities from the solved positions.

    predict:   v* = v + dt (f / m + g - c v),   x* = x + dt v*
    update:    v' = (x' - x) / dt               (x' = x* after the constraint iterations)

Kinematic particles (inverse mass 0) keep their own velocity and ignore forces
and gravity (per world, ``gravity[world]``, as in ``euler.py``); inactive
particles are copied unchanged. Rigid bodies: see the
section below (prediction = the symplectic-Euler body step; kinematic bodies
keep their velocity).
"""

import warp as wp

from ..types import PARTICLE_FLAG_ACTIVE
from .euler import integrate_bodies, integrate_particles, to_d, world_inertia_times_d

# the prediction is the symplectic Euler step (the same velocity as the SemiImplicitSolver's, so both solvers
# mean the same by forces, gravity, damping), its velocity kept aside
predict_positions = integrate_particles
predict_bodies = integrate_bodies


@wp.kernel
def update_velocities_kernel(
    # Model:
    flags: wp.array(dtype=wp.int32),
    # Data in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    x_solved: wp.array(dtype=wp.vec3),
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
    x1 = x_solved[tid]
    x_out[tid] = x1
    v_out[tid] = (x1 - x[tid]) / dt


def update_velocities(model, state_in, x_solved, dt: float, x_out, v_out) -> None:
    """The solved positions into ``x_out`` and the velocities they imply, (x' - x) / dt, into ``v_out``."""
    if model.particle_count == 0:
        return
    wp.launch(update_velocities_kernel, dim=model.particle_count, device=model.device,
              inputs=[model.particle_flags, state_in.particle_q, state_in.particle_qd, x_solved, dt],
              outputs=[x_out, v_out])


# ---------------------------------------------------------------------------------------------- rigid bodies
# Bodies: the prediction is the symplectic-Euler body step of ``euler.py`` (the centre of mass as a
# particle, the rotation in angular-momentum form, in float64), so XPBD and the SemiImplicitSolver mean
# the same by forces, torques and gravity. Its output velocity (v*, w*) is kept: the velocity update
# adds to it what the constraints changed,
#
#     v' = v* + (x' - x*) / dt
#     w' = I_w(q')^-1 I_w(q*) w* + 2 vec(dq) / (dq_w dt),    dq = q' q*^-1  (dq_w >= 0)
#
# which is (x' - x) / dt and the quaternion difference of the whole step written relative to the
# prediction: identical in exact arithmetic, but float32 rounding of the stored poses now only touches
# the constraint part (a free body gets w* back exactly, so the predict's conservation of angular
# momentum survives; recovering w from the full q' q^-1 of float32 poses loses ~1e-5 per step).
# vec(dq) / dq_w inverts the predict's first-order rotation update exactly, and the constraints' angular
# impulse I_w dtheta / dt is added to the predicted momentum I_w(q*) w* before it is expressed in the
# final orientation's inertia (the gyroscopic part stays in momentum form).


@wp.func
def quat_d(q: wp.quat):
    return wp.quatd(wp.float64(q[0]), wp.float64(q[1]), wp.float64(q[2]), wp.float64(q[3]))


@wp.kernel
def update_body_velocities_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    inertia: wp.array(dtype=wp.mat33),
    # Data in:
    pose_pred: wp.array(dtype=wp.transform),
    qd_pred: wp.array(dtype=wp.spatial_vector),
    pose_solved: wp.array(dtype=wp.transform),
    # In:
    dt: float,
    # Data out:
    pose_out: wp.array(dtype=wp.transform),
    qd_out: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    X0 = pose_pred[b]
    X1 = pose_solved[b]
    com = body_com[b]
    v = wp.spatial_top(qd_pred[b]) + (wp.transform_point(X1, com) - wp.transform_point(X0, com)) / dt
    w = wp.spatial_bottom(qd_pred[b])
    if inv_mass[b] > 0.0:
        q0 = wp.normalize(quat_d(wp.transform_get_rotation(X0)))
        q1 = wp.normalize(quat_d(wp.transform_get_rotation(X1)))
        dq = q1 * wp.quat_inverse(q0)
        if dq[3] < wp.float64(0.0):
            dq = -dq
        dt64 = wp.float64(dt)
        dw = wp.vec3d(dq[0], dq[1], dq[2]) * (wp.float64(2.0) / (dq[3] * dt64))
        i64 = wp.mat33d(inertia[b])
        L = world_inertia_times_d(q0, i64, to_d(w))
        w64 = world_inertia_times_d(q1, wp.inverse(i64), L) + dw
        w = wp.vec3(float(w64[0]), float(w64[1]), float(w64[2]))
    pose_out[b] = X1
    qd_out[b] = wp.spatial_vector(v, w)


def update_body_velocities(model, pose_pred, qd_pred, pose_solved, dt: float, pose_out, qd_out) -> None:
    """The solved poses into ``pose_out`` and the velocities they imply into ``qd_out``."""
    if model.body_count == 0:
        return
    wp.launch(update_body_velocities_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inertia, pose_pred, qd_pred, pose_solved, dt],
              outputs=[pose_out, qd_out])
