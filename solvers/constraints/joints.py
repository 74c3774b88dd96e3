"""Joints in XPBD (Müller et al. 2020, 3.3-3.4): attachment, alignment, limits and drives as body constraints.

Each joint j connects its child body c to its parent p (or the world) through
the joint frames X_wp = pose_p X_p and X_wc = pose_c X_c (world). Per Jacobi
iteration one thread evaluates every row of the joint on the same iterate and
adds the corrections (``body_frames``' primitives, with mass splitting):

- **attachment** (all but free): the anchors coincide, d = origin(X_wc) -
  origin(X_wp) = 0, solved as three rows at once with the 3x3 inverse mass
  matrix K = sum_b s_b (1/m_b - [r_b]x I_b^-1 [r_b]x) (prismatic joints: only in
  the plane normal to the parent's axis). Müller et al. write it as one row
  along d / |d|; that row's generalized mass depends on the direction of d, so
  the correction is not differentiable where d passes through zero (every step
  of a joint that starts satisfied), while the 3x3 solve is smooth there.
  Compliance ``attach_compliance`` [m/N] (default 0: hard).
- **alignment** (rotational): fixed and prismatic joints keep the frames'
  orientations equal (error e = 2 vec(q_c q_p^-1)), revolute joints the two
  frames' axes (e = a_p x a_c, solved in the plane normal to the axis), ball
  and free joints nothing; three rows with the summed inverse inertias.
  Compliance ``angular_compliance`` [rad/(N m)] (default 0).
- **limits** (revolute angle, prismatic offset; ``joint_limit_lower/upper``):
  a hard inequality on the joint coordinate, acting only while it is outside.
- **drive** (revolute, prismatic, where ``joint_target_ke`` or ``_kd`` > 0):
  a compliant constraint C = q - ``Control.joint_target_pos`` with alpha =
  1/ke and XPBD's damping towards ``Control.joint_target_vel``: written with
  ke and kd multiplied through,

      dlambda = (-ke dt^2 C - lambda - kd dt (q - q_start - dt qd_target)) / ((ke dt^2 + kd dt) w + 1),

  which converges to the implicit PD force ke (q_target - q) + kd (qd_target - qd)
  (lambda / dt^2) and stays finite for ke = 0 (a pure velocity drive). q_start is
  the coordinate at the step's input poses, computed from ``state_in.body_q``
  (as ``eval_ik`` would; never read from ``State.joint_q``, so a step depends on
  the bodies alone and checkpointed rollouts restore all it needs). Revolute
  angles are measured in [-pi, pi] (``twist_angle``): targets belong in that range.

The multipliers are kept per iteration (attachment (3), alignment (3), limit,
drive: eight per joint); lambda / dt^2 is the row's force [N] or torque [N m]
(world). ``relaxation`` (omega) scales every row's increment. ``Control.joint_f``
is not a constraint: :func:`apply_joint_efforts` turns it into body wrenches
before the prediction. Differentiable (``wp.Tape``) through poses, masses,
targets and gains; a limit that engages within a step is a kink.
"""

import numpy as np
import warp as wp

from ...kinematics import JointTopology, body_pose, twist_angle
from ...types import JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE
from ..step_data import stage
from .body_frames import (
    add_angular,
    add_positional,
    angular_inv_mass,
    body_frame,
    point_inv_mass_matrix,
    positional_inv_mass,
    solve_rows,
)

# a joint's multipliers: attachment (3), alignment (3), limit, drive
vec8 = wp.types.vector(length=8, dtype=float)


@wp.func
def wrap_angle(a: float):
    if a > wp.pi:
        a = a - 2.0 * wp.pi
    elif a < -wp.pi:
        a = a + 2.0 * wp.pi
    return a


@wp.func
def limit_violation(q: float, lower: float, upper: float):
    """How far ``q`` lies outside [lower, upper] (signed; 0 inside)."""
    v = float(0.0)
    if q > upper:
        v = q - upper
    elif q < lower:
        v = q - lower
    return v


@wp.func
def drive_increment(C: float, rate_error: float, lam: float, ke: float, kd: float, w: float, dt: float):
    """The drive row's multiplier increment (module docstring); 0 without gains."""
    d = float(0.0)
    if ke > 0.0 or kd > 0.0:
        d = (-ke * dt * dt * C - lam - kd * dt * rate_error) / ((ke * dt * dt + kd * dt) * w + 1.0)
    return d


@wp.kernel
def solve_joints_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    joints: JointTopology,
    limit_lower: wp.array(dtype=float),
    limit_upper: wp.array(dtype=float),
    target_ke: wp.array(dtype=float),
    target_kd: wp.array(dtype=float),
    # Data in:
    body_q_start: wp.array(dtype=wp.transform),
    target_pos: wp.array(dtype=float),
    target_vel: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    split: wp.array(dtype=float),
    lambda_in: wp.array(dtype=vec8),
    # In:
    attach_compliance: float,
    angular_compliance: float,
    relaxation: float,
    dt: float,
    # Data out:
    delta: wp.array(dtype=wp.spatial_vector),
    lambda_out: wp.array(dtype=vec8),
):
    j = wp.tid()
    lam = lambda_in[j]
    d_attach = wp.vec3(0.0)
    d_align = wp.vec3(0.0)
    dl_limit = float(0.0)
    dl_drive = float(0.0)
    t = joints.type[j]
    if t != JOINT_FREE:
        p = joints.parent[j]
        c = joints.child[j]
        fp = body_frame(body_q, body_com, body_inv_mass, body_inv_inertia, split, p)
        fc = body_frame(body_q, body_com, body_inv_mass, body_inv_inertia, split, c)
        X_wp = fp.pose * joints.X_p[j]
        X_wc = fc.pose * joints.X_c[j]
        anchor_p = wp.transform_get_translation(X_wp)
        anchor_c = wp.transform_get_translation(X_wc)
        r_p = anchor_p - fp.com
        r_c = anchor_c - fc.com
        axis = joints.axis[j]
        a_w = wp.transform_vector(X_wp, axis)
        dt2 = dt * dt

        # attachment: the anchors coincide (prismatic: off the axis only); three rows at once
        d = anchor_c - anchor_p
        prismatic = t == JOINT_PRISMATIC
        alpha = attach_compliance / dt2
        lam_attach = wp.vec3(lam[0], lam[1], lam[2])
        K = point_inv_mass_matrix(fc, r_c) + point_inv_mass_matrix(fp, r_p)
        d_attach = relaxation * solve_rows(K, alpha, -d - lam_attach * alpha, a_w, prismatic)
        add_positional(delta, c, fc, split, r_c, d_attach)
        add_positional(delta, p, fp, split, r_p, -d_attach)

        # alignment: the child's frame is rotated by e from where it belongs (revolute: only off the axis)
        q_p = wp.transform_get_rotation(X_wp)
        q_c = wp.transform_get_rotation(X_wc)
        e = wp.vec3(0.0)
        if t == JOINT_FIXED or t == JOINT_PRISMATIC:
            dq = q_c * wp.quat_inverse(q_p)
            if dq[3] < 0.0:
                dq = -dq
            e = 2.0 * wp.vec3(dq[0], dq[1], dq[2])
        elif t == JOINT_REVOLUTE:
            e = wp.cross(a_w, wp.transform_vector(X_wc, axis))
        d_align = wp.vec3(0.0)
        if t == JOINT_FIXED or t == JOINT_PRISMATIC or t == JOINT_REVOLUTE:
            alpha = angular_compliance / dt2
            lam_align = wp.vec3(lam[3], lam[4], lam[5])
            A = fc.inv_inertia + fp.inv_inertia
            d_align = relaxation * solve_rows(A, alpha, -e - lam_align * alpha, a_w, t == JOINT_REVOLUTE)
            add_angular(delta, c, fc, split, d_align)
            add_angular(delta, p, fp, split, -d_align)

        # limits and drive act on the joint coordinate q along / about a_w
        if t == JOINT_REVOLUTE or t == JOINT_PRISMATIC:
            ds = joints.qd_start[j]
            # the coordinate at the step's start, from the input poses
            X_wp0 = body_pose(body_q_start, p) * joints.X_p[j]
            X_wc0 = body_pose(body_q_start, c) * joints.X_c[j]
            q0 = float(0.0)
            if t == JOINT_REVOLUTE:
                q0 = twist_angle(wp.quat_inverse(wp.transform_get_rotation(X_wp0)) * wp.transform_get_rotation(X_wc0),
                                 axis)
            else:
                q0 = wp.dot(wp.transform_vector(X_wp0, axis),
                            wp.transform_get_translation(X_wc0) - wp.transform_get_translation(X_wp0))
            q = float(0.0)
            moved = float(0.0)
            w = float(0.0)
            if t == JOINT_REVOLUTE:
                q = twist_angle(wp.quat_inverse(q_p) * q_c, axis)
                moved = wrap_angle(q - q0)
                w = angular_inv_mass(fc, a_w) + angular_inv_mass(fp, a_w)
            else:
                q = wp.dot(a_w, anchor_c - anchor_p)
                moved = q - q0
                w = positional_inv_mass(fc, r_c, a_w) + positional_inv_mass(fp, r_p, a_w)
            if w > 0.0:
                violation = limit_violation(q, limit_lower[ds], limit_upper[ds])
                if violation != 0.0:
                    dl_limit = relaxation * (-violation / w)
                dl_drive = relaxation * drive_increment(q - target_pos[ds], moved - dt * target_vel[ds], lam[7],
                                                     target_ke[ds], target_kd[ds], w, dt)
                # always added, also when zero (a drive at its target): its derivative must reach the tape
                push = dl_limit + dl_drive
                if t == JOINT_REVOLUTE:
                    add_angular(delta, c, fc, split, a_w * push)
                    add_angular(delta, p, fp, split, -a_w * push)
                else:
                    add_positional(delta, c, fc, split, r_c, a_w * push)
                    add_positional(delta, p, fp, split, r_p, -a_w * push)
    lambda_out[j] = lam + vec8(d_attach[0], d_attach[1], d_attach[2], d_align[0], d_align[1], d_align[2], dl_limit,
                               dl_drive)


@stage("joints")
def solve_joints(model, data, k: int) -> None:
    """Stage: every joint's rows on body iterate k."""
    if model.joint_count == 0:
        return
    solver, rows = data.solver, data.buffers.rows
    target_pos, target_vel, _ = data.joint_controls()
    wp.launch(solve_joints_kernel, dim=model.joint_count, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inv_inertia, data.joints, model.joint_limit_lower,
                      model.joint_limit_upper, model.joint_target_ke, model.joint_target_kd, data.state_in.body_q,
                      target_pos, target_vel, rows.body_q[k], data.buffers.split, rows.joint_lambda[k],
                      solver.joint_linear_compliance, solver.joint_angular_compliance, solver.relaxation, data.dt],
              outputs=[rows.body_delta[k], rows.joint_lambda[k + 1]])


def joint_rows_per_body(model) -> wp.array:
    """Per body, the joint rows acting on it (host side, once): attachment, alignment, limit, drive.

    A drive counts where its gains are > 0 when this is called (the solver's construction).
    """
    rows = np.zeros(max(model.body_count, 1), dtype=np.float32)
    if model.joint_count:
        types = model.joint_type.numpy()
        parent, child = model.joint_parent.numpy(), model.joint_child.numpy()
        ds = model.joint_qd_start.numpy()
        lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
        ke, kd = model.joint_target_ke.numpy(), model.joint_target_kd.numpy()
        for j, t in enumerate(types):
            n = 0
            if t != JOINT_FREE:
                n += 1  # attachment
            if t in (JOINT_FIXED, JOINT_PRISMATIC, JOINT_REVOLUTE):
                n += 1  # alignment
            if t in (JOINT_PRISMATIC, JOINT_REVOLUTE):
                d = ds[j]
                n += int(np.isfinite(lower[d]) or np.isfinite(upper[d]))
                n += int(ke[d] > 0.0 or kd[d] > 0.0)
            for b in (parent[j], child[j]):
                if b >= 0:
                    rows[b] += n
    return wp.array(rows, dtype=float, device=model.device)


@wp.kernel
def apply_joint_efforts_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    joints: JointTopology,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    joint_f: wp.array(dtype=float),
    # Data out:
    body_f: wp.array(dtype=wp.spatial_vector),
):
    j = wp.tid()
    t = joints.type[j]
    if t != JOINT_REVOLUTE and t != JOINT_PRISMATIC:
        return
    p = joints.parent[j]
    c = joints.child[j]
    X_wp = body_pose(body_q, p) * joints.X_p[j]
    a_w = wp.transform_vector(X_wp, joints.axis[j])
    effort = joint_f[joints.qd_start[j]]
    if t == JOINT_REVOLUTE:
        tau = a_w * effort
        wp.atomic_add(body_f, c, wp.spatial_vector(wp.vec3(0.0), tau))
        if p >= 0:
            wp.atomic_sub(body_f, p, wp.spatial_vector(wp.vec3(0.0), tau))
    else:
        # equal and opposite forces at the two anchors
        f = a_w * effort
        x_c = wp.transform_get_translation(body_q[c] * joints.X_c[j])
        r_c = x_c - wp.transform_point(body_q[c], body_com[c])
        wp.atomic_add(body_f, c, wp.spatial_vector(f, wp.cross(r_c, f)))
        if p >= 0:
            r_p = wp.transform_get_translation(X_wp) - wp.transform_point(body_q[p], body_com[p])
            wp.atomic_sub(body_f, p, wp.spatial_vector(f, wp.cross(r_p, f)))


@stage("joint efforts")
def apply_joint_efforts(model, data) -> None:
    """Stage: ``Control.joint_f`` into ``state_out.body_f``: torque [N m] about a revolute axis, force [N] along a
    prismatic one."""
    control = data.control
    if model.joint_count == 0 or control is None or control.joint_f is None:
        return
    wp.launch(apply_joint_efforts_kernel, dim=model.joint_count, device=model.device,
              inputs=[model.body_com, data.joints, data.state_in.body_q, control.joint_f],
              outputs=[data.state_out.body_f])
