"""SemiImplicitSolver joint forces: stiff springs on the constrained directions, drives and limits on the free one.

Each joint compares its parent anchor frame X_wp = body_q[parent] * X_p (the
world when the parent is -1) with its child anchor frame X_wc = body_q[child]
* X_c. Coordinates and rates are computed here from the bodies (as
:func:`inertia.kinematics.eval_ik` does), never read from ``State.joint_q``.

Constrained directions (per type):

    translation   all three (revolute, ball, fixed); the two orthogonal to the axis (prismatic)
    rotation      all three (fixed, prismatic); the two orthogonal to the axis (revolute); none (ball)

Attachment springs are scaled by the joint's effective mass, so that one
setting behaves the same for light and heavy links: with d = x_c - x_p the
anchor separation [m] and v the child's velocity relative to the parent's
material point at x_c,

    F = -M (ke d + kd v),   M = (K_p(x_c) + K_c(x_c))^-1

on the child at x_c and -F on the parent at x_c (K: a body's inverse mass
matrix at a point, rotation included; prismatic: d, v and F projected off the
axis). Alone, a joint's separation then obeys d'' = -ke d - kd d', so
``model.joint_attach_ke`` is in [1/s^2] (the squared angular frequency at which
a displaced joint springs back) and ``joint_attach_kd`` in [1/s], whatever the
masses; under a steady load the anchors part by load / (ke m_eff). Rotations are
held likewise with the pair's effective inertia A = (I_p^-1 + I_c^-1)^-1
(world, about the centres of mass): torque on the child -A (ke e + kd w_rel),
the parent takes the opposite. e is sin(angle) times the rotation axis of the
child anchor frame relative to the parent's (fixed, prismatic), or the parent's
joint axis crossed with the child's (revolute: the swing only). Both forces
act at the same point and the torques are opposite, so joints conserve linear
and angular momentum exactly. Explicit integration is stable while
sqrt(ke) dt stays below about 1 (measured on a falling 32-link chain: ke = 1e6
holds at dt = 1 ms, diverges at 1.5 ms; a chain's modes reach about 2 ke).

The free degree of freedom of a revolute or prismatic joint (angle q about /
offset q along the axis, rate qd) takes a torque / force along the world axis

    clamp(target_ke (target_pos - q) + target_kd' (target_vel - qd) + joint_f, +-effort_limit)
    - damping' qd - friction (smoothed Coulomb, never reversing qd within a step)
    + max(limit_ke (lower - q) - limit_kd' qd, 0)    if q < lower
    + min(limit_ke (upper - q) - limit_kd' qd, 0)    if q > upper

where a primed damping c' = c / sqrt(1 + (dt c w)^2) never overshoots along the axis (w: the pair's
inverse inertia or mass about it), so a drive of any damping is stable at any step;
``model.joint_damping`` / ``joint_friction`` / ``joint_effort_limit`` are per degree of freedom
(URDF ``<dynamics>`` / ``<limit effort>``, MJCF ``damping`` / ``frictionloss``).

with the gains in absolute units (N m/rad, N m s/rad; N/m, N s/m) from
``model.joint_target_*`` / ``joint_limit_*`` and the targets and effort from
:class:`inertia.Control` (per degree of freedom, at ``model.joint_qd_start``).
A limit's stiffness is stable while dt < 2 sqrt(I / limit_ke) (I the link's
inertia about the joint). A revolute angle wraps at +-pi (as ``eval_ik``
reports it), so drive targets and limits are meant within (-pi, pi).

A world or kinematic side takes no force. Differentiable through ``wp.Tape``
(poses, velocities, masses, gains, targets); the limit switches on and off
where q crosses a bound, and there the gradient jumps.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...kinematics import JointTopology, body_angular_velocity, body_pose, point_velocity, twist_angle
from ...types import JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE
from ..step_data import stage
from .body_dynamics import body_inverse_mass_at, inverse_mass_of, world_inverse_inertia, wrench_at

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def drive_and_limit(q: float, qd: float, target_pos: float, target_vel: float, effort: float, target_ke: float,
                    target_kd: float, lower: float, upper: float, limit_ke: float, limit_kd: float, damping: float,
                    friction: float, effort_limit: float, w_axis: float, dt: float):
    """Generalized force [N m or N] on a free degree of freedom: PD drive and effort (clamped to the effort
    limit), passive damping and Coulomb friction, one-sided limit springs.

    Damping never overshoots along the axis (``w_axis``: the pair's inverse inertia or mass about it): a
    damping coefficient c acts as c / sqrt(1 + (dt c w_axis)^2) (explicit damping for small dt c w_axis, at
    most the rate that stops the dof in one step for large), so no gain is unstable at any dt; friction is
    smoothed over 1e-3 [rad/s or m/s] and never reverses the rate within a step.
    """
    drive_damping = target_kd + damping
    x = dt * drive_damping * w_axis
    s = 1.0 / wp.sqrt(1.0 + x * x)
    actuator = target_ke * (target_pos - q) + s * target_kd * (target_vel - qd) + effort
    actuator = wp.clamp(actuator, -effort_limit, effort_limit)
    f = actuator - s * damping * qd
    if friction > 0.0:
        speed = wp.abs(qd)
        stop = speed / wp.max(dt * w_axis, 1.0e-30)  # the force that stops the rate in one step
        f = f - wp.min(friction * speed / wp.sqrt(qd * qd + 1.0e-6), stop) * wp.sign(qd)
    xl = dt * limit_kd * w_axis
    sl = 1.0 / wp.sqrt(1.0 + xl * xl)
    if q < lower:
        f = f + wp.max(limit_ke * (lower - q) - sl * limit_kd * qd, 0.0)
    elif q > upper:
        f = f + wp.min(limit_ke * (upper - q) - sl * limit_kd * qd, 0.0)
    return f


@wp.kernel
def joint_force_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    joints: JointTopology,
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_friction: wp.array(dtype=float),
    joint_effort_limit: wp.array(dtype=float),
    attach_ke: float,
    attach_kd: float,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    target_pos: wp.array(dtype=float),
    target_vel: wp.array(dtype=float),
    effort: wp.array(dtype=float),
    # In:
    dt: float,
    # Data out:
    body_f: wp.array(dtype=wp.spatial_vector),
):
    j = wp.tid()
    jt = joints.type[j]
    if jt == JOINT_FREE:
        return
    p = joints.parent[j]
    c = joints.child[j]
    dynamic_p = inverse_mass_of(body_inv_mass, p) > 0.0
    dynamic_c = body_inv_mass[c] > 0.0
    if not dynamic_p and not dynamic_c:
        return
    X_wp = body_pose(body_q, p) * joints.X_p[j]
    X_wc = body_q[c] * joints.X_c[j]
    x_c = wp.transform_get_translation(X_wc)
    q_p = wp.transform_get_rotation(X_wp)
    q_c = wp.transform_get_rotation(X_wc)
    axis = joints.axis[j]
    a = wp.quat_rotate(q_p, axis)  # the joint axis in world, carried by the parent
    prismatic = jt == JOINT_PRISMATIC

    # translation: a spring-damper on the anchor separation, scaled by the pair's effective mass
    d = x_c - wp.transform_get_translation(X_wp)
    v = point_velocity(body_q, body_qd, body_com, c, x_c) - point_velocity(body_q, body_qd, body_com, p, x_c)
    k = body_inverse_mass_at(body_q, body_com, body_inv_mass, body_inv_inertia, p, x_c)
    k = k + body_inverse_mass_at(body_q, body_com, body_inv_mass, body_inv_inertia, c, x_c)
    e = attach_ke * d + attach_kd * v
    if prismatic:
        e = e - a * wp.dot(a, e)
    force = -(wp.inverse(k) * e)
    if prismatic:
        force = force - a * wp.dot(a, force)

    # rotation: the constrained directions, scaled by the pair's effective inertia
    w_rel = body_angular_velocity(body_qd, c) - body_angular_velocity(body_qd, p)
    torque = wp.vec3(0.0)
    if jt == JOINT_REVOLUTE or jt == JOINT_FIXED or prismatic:
        inertia = wp.inverse(world_inverse_inertia(body_q, body_inv_inertia, p)
                             + world_inverse_inertia(body_q, body_inv_inertia, c))
        if jt == JOINT_REVOLUTE:
            swing = wp.cross(a, wp.quat_rotate(q_c, axis))  # sin(angle) x the axis turning a onto the child's
            torque = -(inertia * (attach_ke * swing + attach_kd * (w_rel - a * wp.dot(a, w_rel))))
            torque = torque - a * wp.dot(a, torque)  # leave the hinge's own rotation free
        else:
            dq = q_c * wp.quat_inverse(q_p)  # the child frame's rotation relative to the parent's (world)
            err = 2.0 * dq[3] * wp.vec3(dq[0], dq[1], dq[2])  # sin(angle) x axis, the same for dq and -dq
            torque = -(inertia * (attach_ke * err + attach_kd * w_rel))

    # the free degree of freedom: drive, effort, limits
    if jt == JOINT_REVOLUTE or prismatic:
        ds = joints.qd_start[j]
        X_pc = wp.transform_inverse(X_wp) * X_wc
        q = float(0.0)
        qd = float(0.0)
        w_axis = float(0.0)  # the pair's inverse mass / inertia about the axis (implicit damping)
        if prismatic:
            q = wp.dot(wp.transform_get_translation(X_pc), axis)
            qd = wp.dot(a, v)
            w_axis = wp.dot(a, k * a)
        else:
            q = twist_angle(wp.transform_get_rotation(X_pc), axis)
            qd = wp.dot(a, w_rel)
            w_axis = wp.dot(a, (world_inverse_inertia(body_q, body_inv_inertia, p)
                                + world_inverse_inertia(body_q, body_inv_inertia, c)) * a)
        tau = drive_and_limit(q, qd, target_pos[ds], target_vel[ds], effort[ds], joint_target_ke[ds],
                              joint_target_kd[ds], joint_limit_lower[ds], joint_limit_upper[ds],
                              joint_limit_ke[ds], joint_limit_kd[ds], joint_damping[ds], joint_friction[ds],
                              joint_effort_limit[ds], w_axis, dt)
        if prismatic:
            force = force + a * tau
        else:
            torque = torque + a * tau

    # equal and opposite, both at x_c
    couple = wp.spatial_vector(wp.vec3(0.0), torque)
    if dynamic_c:
        wp.atomic_add(body_f, c, wrench_at(body_q, body_com, c, force, x_c) + couple)
    if dynamic_p:
        wp.atomic_sub(body_f, p, wrench_at(body_q, body_com, p, force, x_c) + couple)


@stage("joints", writes=lambda data: {"body_f": data.state_out.body_f})
def eval_joint_forces(model, data) -> None:
    """Stage: joint springs, drives and limits from the bodies of ``state_in``, into ``state_out.body_f``.

    Drive targets and efforts per joint degree of freedom from the Control (``joint_target_pos`` /
    ``joint_target_vel`` / ``joint_f``; zero without one).
    """
    if model.joint_count == 0:
        return
    state = data.state_in
    wp.launch(joint_force_kernel, dim=model.joint_count, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inv_inertia, data.joints, model.joint_target_ke,
                      model.joint_target_kd, model.joint_limit_lower, model.joint_limit_upper, model.joint_limit_ke,
                      model.joint_limit_kd, model.joint_damping, model.joint_friction, model.joint_effort_limit,
                      model.joint_attach_ke, model.joint_attach_kd, state.body_q, state.body_qd,
                      *data.joint_controls(), data.dt],
              outputs=[data.state_out.body_f])
