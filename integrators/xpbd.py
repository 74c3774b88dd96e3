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

Rigid bodies: a body's motion since the step began is a transform ``(dc, dq)``: the displacement dc of its
centre of mass [m] and the rotation dq (world frame) that turns its starting orientation into the current
one, q = dq q_start. Its pose, for the geometry of contacts and joints, is rebuilt from the step's start
and the motion (:func:`pose_from_motion`) at every iterate. The prediction is the symplectic-Euler body
step of ``euler.py`` (the centre of mass as a particle, the rotation in angular-momentum form, in float64),
so XPBD and the SemiImplicitSolver mean the same by forces, torques and gravity. Its velocity (v*, w*)
is kept: the velocity update adds to it what the constraints changed,

    v' = v* + (dc_K - dc_0) / dt
    w' = I_w(q')^-1 I_w(q*) w* + 2 vec(e) / (e_w dt),    e = dq_K dq_0^-1  (e_w >= 0)

written relative to the prediction (a free body gets w* back exactly, so the prediction's conservation of
angular momentum survives); vec(e) / e_w inverts the prediction's first-order rotation update exactly, and
the constraints' angular impulse I_w dtheta / dt is added to the predicted momentum I_w(q*) w* before it is
expressed in the final orientation's inertia (the gyroscopic part stays in momentum form).
"""

import warp as wp

from ..types import PARTICLE_FLAG_ACTIVE
from .euler import rotate_by_d, to_d, velocity_after, world_gravity, world_inertia_times_d


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


# ---------------------------------------------------------------------------------------------- rigid bodies
@wp.func
def pose_from_motion(X_start: wp.transform, com: wp.vec3, motion: wp.transform):
    """The pose of a body that began the step at ``X_start`` and has since moved by ``motion`` = (centre of mass
    displacement [m], rotation dq in world): its centre of mass at c_start + dc, its orientation dq q_start."""
    c = wp.transform_point(X_start, com) + wp.transform_get_translation(motion)
    q = wp.normalize(wp.transform_get_rotation(motion) * wp.transform_get_rotation(X_start))
    return wp.transform(c - wp.quat_rotate(q, com), q)


@wp.func
def quat_d(q: wp.quat):
    return wp.quatd(wp.float64(q[0]), wp.float64(q[1]), wp.float64(q[2]), wp.float64(q[3]))


@wp.func
def quat_f(q: wp.quatd):
    return wp.quat(float(q[0]), float(q[1]), float(q[2]), float(q[3]))


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
    # the rotation of the step, dq = normalize(1 + dt/2 [w, 0]): euler.rotate_by's update, applied to the identity
    dq = wp.quat_identity()
    if m_inv > 0.0:
        f = body_f[b]
        v = v + dt * (wp.spatial_top(f) * m_inv + world_gravity(gravity, body_world[b]))
        # the rotation in float64 and momentum form, as euler.integrate_bodies_kernel
        q64 = wp.normalize(quat_d(wp.transform_get_rotation(pose)))
        i64 = wp.mat33d(inertia[b])
        i64_inv = wp.inverse(i64)
        dt64 = wp.float64(dt)
        L = world_inertia_times_d(q64, i64, to_d(w)) + dt64 * to_d(wp.spatial_bottom(f))
        dq64 = rotate_by_d(wp.quatd(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), one),
                           world_inertia_times_d(q64, i64_inv, L), dt64)
        w64 = world_inertia_times_d(wp.normalize(dq64 * q64), i64_inv, L)
        w = wp.vec3(float(w64[0]), float(w64[1]), float(w64[2]))
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
        w64 = world_inertia_times_d(q1, wp.inverse(i64), L) + dw
        w = wp.vec3(float(w64[0]), float(w64[1]), float(w64[2]))
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
