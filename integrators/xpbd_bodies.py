"""XPBD's prediction and velocity update of rigid bodies, in step-local coordinates (``xpbd.py`` says why).

Rigid bodies: a body's motion since the step began is a transform ``(dc, dq)``: the displacement dc of its
centre of mass [m] and the rotation dq (world frame) that turns its starting orientation into the current
one, q = dq q_start. Its pose, for the geometry of contacts and joints, is rebuilt from the step's start
and the motion (:func:`pose_from_motion`) at every iterate. The prediction is the symplectic-Euler body
step of ``euler_bodies.py`` (the centre of mass as a particle, the rotation in angular-momentum form, in
float64), so XPBD and the SemiImplicitSolver mean the same by forces, torques and gravity. Its velocity (v*, w*)
is kept: the velocity update adds to it what the constraints changed,

    v' = v* + (dc_K - dc_0) / dt
    w' = I_w(q')^-1 I_w(q*) w* + 2 vec(e) / (e_w dt),    e = dq_K dq_0^-1  (e_w >= 0)

written relative to the prediction (a free body gets w* back exactly, so the prediction's conservation of
angular momentum survives); vec(e) / e_w inverts the prediction's first-order rotation update exactly, and
the constraints' angular impulse I_w dtheta / dt is added to the predicted momentum I_w(q*) w* before it is
expressed in the final orientation's inertia (the gyroscopic part stays in momentum form).
"""

import warp as wp

from ..autodiff.backward_code import on_demand
from .euler import world_gravity
from .euler_bodies import (
    com_velocity_after,
    momentum_step,
    quat_d,
    quat_f,
    rotate_by_d,
    to_d,
    to_f,
    world_inertia_times_d,
)

on_demand(__name__)  # backward code compiled once gradients are wanted


# ---------------------------------------------------------------------------------------------- rigid bodies
@wp.func
def pose_from_motion(X_start: wp.transform, com: wp.vec3, motion: wp.transform):
    """The pose of a body that began the step at ``X_start`` and has since moved by ``motion`` = (centre of mass
    displacement [m], rotation dq in world): its centre of mass at c_start + dc, its orientation dq q_start."""
    c = wp.transform_point(X_start, com) + wp.transform_get_translation(motion)
    q = wp.normalize(wp.transform_get_rotation(motion) * wp.transform_get_rotation(X_start))
    return wp.transform(c - wp.quat_rotate(q, com), q)


@wp.kernel
def predict_body_motion_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    # In:
    dt: float,
    # Data out:
    motion_out: wp.array(dtype=wp.transform),
    pose_out: wp.array(dtype=wp.transform),
    qd_out: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    pose = body_q[b]
    com = body_com[b]
    v = wp.spatial_top(body_qd[b])
    w = wp.spatial_bottom(body_qd[b])
    m_inv = inv_mass[b]
    one = wp.float64(1.0)
    # the rotation of the step, dq = normalize(1 + dt/2 [w, 0]): euler_bodies.rotate_by's update applied to 1
    dq = wp.quat_identity()
    if m_inv > 0.0:
        f = body_f[b]
        v = com_velocity_after(v, wp.spatial_top(f), m_inv, world_gravity(gravity, body_world[b]), dt)
        # the rotation in float64 and momentum form, as euler_bodies.integrate_bodies_kernel
        q64, i64_inv, L = momentum_step(wp.transform_get_rotation(pose), inertia[b], w, wp.spatial_bottom(f), dt)
        dq64 = rotate_by_d(wp.quatd(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), one),
                           world_inertia_times_d(q64, i64_inv, L), wp.float64(dt))
        w = to_f(world_inertia_times_d(wp.normalize(dq64 * q64), i64_inv, L))
        dq = quat_f(dq64)
    else:
        dq = wp.normalize(wp.quat(w[0] * (0.5 * dt), w[1] * (0.5 * dt), w[2] * (0.5 * dt), 1.0))
    motion = wp.transform(dt * v, dq)
    motion_out[b] = motion
    pose_out[b] = pose_from_motion(pose, com, motion)
    qd_out[b] = wp.spatial_vector(v, w)


def predict_bodies(model, state_in, body_f, dt: float, motion_out, pose_out, qd_out) -> None:
    """Each body's predicted motion over ``dt`` [s] (``motion_out``), the pose it reaches (``pose_out``) and its
    velocity (v*, w*) (``qd_out``) under ``body_f`` [N, N m] and gravity."""
    if model.body_count == 0:
        return
    wp.launch(predict_body_motion_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inertia, model.body_world, model.gravity,
                      state_in.body_q, state_in.body_qd, body_f, dt],
              outputs=[motion_out, pose_out, qd_out])


@wp.kernel
def update_body_velocities_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    inertia: wp.array(dtype=wp.mat33),
    # Data in:
    motion_pred: wp.array(dtype=wp.transform),
    pose_pred: wp.array(dtype=wp.transform),
    qd_pred: wp.array(dtype=wp.spatial_vector),
    motion_solved: wp.array(dtype=wp.transform),
    pose_solved: wp.array(dtype=wp.transform),
    # In:
    dt: float,
    # Data out:
    pose_out: wp.array(dtype=wp.transform),
    qd_out: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    M0 = motion_pred[b]
    M1 = motion_solved[b]
    v = wp.spatial_top(qd_pred[b]) + (wp.transform_get_translation(M1) - wp.transform_get_translation(M0)) / dt
    w = wp.spatial_bottom(qd_pred[b])
    if inv_mass[b] > 0.0:
        e = quat_d(wp.transform_get_rotation(M1)) * wp.quat_inverse(quat_d(wp.transform_get_rotation(M0)))
        if e[3] < wp.float64(0.0):
            e = -e
        dw = wp.vec3d(e[0], e[1], e[2]) * (wp.float64(2.0) / (e[3] * wp.float64(dt)))
        i64 = wp.mat33d(inertia[b])
        q0 = wp.normalize(quat_d(wp.transform_get_rotation(pose_pred[b])))
        q1 = wp.normalize(quat_d(wp.transform_get_rotation(pose_solved[b])))
        L = world_inertia_times_d(q0, i64, to_d(w))
        w = to_f(world_inertia_times_d(q1, wp.inverse(i64), L) + dw)
    pose_out[b] = pose_solved[b]
    qd_out[b] = wp.spatial_vector(v, w)


def update_body_velocities(model, motion_pred, pose_pred, qd_pred, motion_solved, pose_solved, dt: float, pose_out,
                           qd_out) -> None:
    """The solved poses into ``pose_out`` and the velocities their motion implies into ``qd_out``."""
    if model.body_count == 0:
        return
    wp.launch(update_body_velocities_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_inv_mass, model.body_inertia, motion_pred, pose_pred, qd_pred, motion_solved,
                      pose_solved, dt],
              outputs=[pose_out, qd_out])
