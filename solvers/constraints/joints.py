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
  (lambda / dt^2) and stays finite for ke = 0 (a pure velocity drive). q - q_start,
  how far the coordinate moved since the step began, comes from the bodies'
  step-local motion (``integrators/xpbd_bodies.py``: the child's rotation relative to the
  parent's about the axis, or the anchors' separation along it) and the input
  poses (never from ``State.joint_q``, so a step depends on the bodies alone and
  checkpointed rollouts restore all it needs). Revolute angles are measured in
  [-pi, pi] (``twist_angle``): targets belong in that range.

**Far from the origin.** The anchors' separation d is the one at the step's start
(the input poses' positions subtracted before the joint frames' offsets are added,
:func:`anchor_separation`) plus how far each anchor moved since (``point_motion``):
never the difference of two world positions rounded to float32's spacing, so a
chain behaves the same at any distance from the origin and its error shrinks with
the step (a world position tens of metres out is spaced 2e-6 m; over dt = 1e-4 s
that was a velocity error of 0.02 m/s per step, and a passive 7-DoF arm's error
grew as dt shrank). Compliant rows are solved in a form that stays finite for any
compliance and step (:func:`solve_compliant_rows`).

The multipliers are kept per iteration (attachment (3), alignment (3), limit,
drive: eight per joint); lambda / dt^2 is the row's force [N] or torque [N m]
(world). ``relaxation`` (omega) scales every row's increment. ``Control.joint_f``
is not a constraint: :func:`apply_joint_efforts` turns it into body wrenches
before the prediction. Differentiable (``wp.Tape``) through poses, masses,
targets and gains; a limit that engages within a step is a kink.
"""

import numpy as np
import warp as wp

from ...autodiff.backward_code import on_demand
from ...kinematics import JointTopology, body_pose, twist_angle
from ...types import JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE
from ..step_data import stage
from .body_frames import (
    add_angular,
    add_positional,
    angular_inv_mass,
    body_frame,
    point_inv_mass_matrix,
    point_motion,
    positional_inv_mass,
    solve_rows,
)

on_demand(__name__)  # backward code compiled once gradients are wanted

# a joint's multipliers: attachment (3), alignment (3), limit, drive
vec8 = wp.types.vector(length=8, dtype=float)


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
def anchor_separation(X_p: wp.transform, J_p: wp.transform, X_c: wp.transform, J_c: wp.transform):
    """origin(X_c J_c) - origin(X_p J_p) for body poses X and joint frames J, summed so that the bodies' world
    positions cancel before the (small) rotated offsets are added: as precise far from the origin as near it
    (for the world as parent, X_p is the identity and J_p's origin cancels the child's position instead)."""
    base = wp.transform_get_translation(X_c) - wp.transform_get_translation(X_p)
    return (base - wp.transform_vector(X_p, wp.transform_get_translation(J_p))) + wp.transform_vector(
        X_c, wp.transform_get_translation(J_c))


@wp.func
def body_rotation(motion: wp.array(dtype=wp.transform), b: int):
    """Body ``b``'s rotation since the step began (world frame; the world: none)."""
    if b < 0:
        return wp.quat_identity()
    return wp.transform_get_rotation(motion[b])


@wp.func
def solve_compliant_rows(K: wp.mat33, compliance: float, dt2: float, error: wp.vec3, lam: wp.vec3, axis: wp.vec3,
                         in_plane: bool):
    """The multiplier increment x of three rows with error ``error``, multipliers ``lam`` and ``compliance``:
    (K + alpha~ 1) x = -error - alpha~ lam, alpha~ = compliance / dt^2 (``in_plane``: see ``solve_rows``).

    Multiplied through by beta = 1 / alpha~ where alpha~ > 1, (beta K + 1) x = -beta error - lam: finite for any
    compliance and step (a tiny dt would overflow alpha~; see ``compliance.py``)."""
    x = wp.vec3(0.0)
    if compliance <= dt2:
        alpha = compliance / dt2  # <= 1 (0 when hard; dt2 > 0 here unless both are 0)
        if dt2 == 0.0:
            alpha = 0.0
        x = solve_rows(K, alpha, -error - lam * alpha, axis, in_plane)
    else:
        beta = dt2 / compliance  # < 1
        x = solve_rows(K * beta, 1.0, -error * beta - lam, axis, in_plane)
    return x


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
    body_motion: wp.array(dtype=wp.transform),
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
        # the joint frames at the step's start (the input poses)
        X_p0 = body_pose(body_q_start, p)
        X_c0 = body_pose(body_q_start, c)
        X_wp0 = X_p0 * joints.X_p[j]

        # attachment: the anchors coincide (prismatic: off the axis only); three rows at once. Their separation
        # is the one at the step's start plus how far each anchor moved since (step-local: the world positions
        # of the anchors, rounded to float32's spacing tens of metres out, never enter it)
        sep0 = anchor_separation(X_p0, joints.X_p[j], X_c0, joints.X_c[j])
        d = sep0 + (point_motion(body_motion, fc, c, anchor_c) - point_motion(body_motion, fp, p, anchor_p))
        prismatic = t == JOINT_PRISMATIC
        lam_attach = wp.vec3(lam[0], lam[1], lam[2])
        K = point_inv_mass_matrix(fc, r_c) + point_inv_mass_matrix(fp, r_p)
        d_attach = relaxation * solve_compliant_rows(K, attach_compliance, dt2, d, lam_attach, a_w, prismatic)
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
            lam_align = wp.vec3(lam[3], lam[4], lam[5])
            A = fc.inv_inertia + fp.inv_inertia
            d_align = relaxation * solve_compliant_rows(A, angular_compliance, dt2, e, lam_align, a_w,
                                                        t == JOINT_REVOLUTE)
            add_angular(delta, c, fc, split, d_align)
            add_angular(delta, p, fp, split, -d_align)

        # limits and drive act on the joint coordinate q along / about a_w
        if t == JOINT_REVOLUTE or t == JOINT_PRISMATIC:
            ds = joints.qd_start[j]
            a_w0 = wp.transform_vector(X_wp0, axis)  # the axis at the step's start
            q = float(0.0)
            moved = float(0.0)  # how far q moved since the step began, from the bodies' motion (step-local)
            w = float(0.0)
            if t == JOINT_REVOLUTE:
                q = twist_angle(wp.quat_inverse(q_p) * q_c, axis)
                # the child's rotation relative to the parent's since the step began, about the axis
                moved = twist_angle(wp.quat_inverse(body_rotation(body_motion, p)) * body_rotation(body_motion, c),
                                    a_w0)
                w = angular_inv_mass(fc, a_w) + angular_inv_mass(fp, a_w)
            else:
                q = wp.dot(a_w, d)
                moved = q - wp.dot(a_w0, sep0)
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
                      target_pos, target_vel, rows.body_q[k], rows.body_motion[k], data.buffers.split,
                      rows.joint_lambda[k],
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
