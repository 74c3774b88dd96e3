"""Joint kinematics: body poses from joint coordinates (forward) and joint coordinates from bodies (inverse).

The solvers simulate bodies in maximal coordinates (``body_q``, ``body_qd``);
joint coordinates are a view of them. :func:`eval_ik` computes ``joint_q`` /
``joint_qd`` from the bodies (``model.state()`` and every ``solver.step()``
call it), :func:`eval_fk` places the bodies of every joint tree from given
joint coordinates (parent before child, one thread per tree).

Layout per joint type (``inertia.builder.bodies``): prismatic and revolute
one coordinate (along / about the joint axis, [m] / [rad]); ball a quaternion
(x, y, z, w) and the relative angular velocity in the parent joint frame;
free the child frame's pose (position, quaternion) and the child's
``body_qd``; fixed nothing. A revolute angle is reported in [-pi, pi]. ``eval_ik`` is differentiable (``wp.Tape``;
a revolute angle's gradient is undefined where it wraps at +-pi);
``eval_fk`` sets up states and is not: it raises while a tape records.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .autodiff.backward_code import on_demand
from .autodiff.tape import gradients_if_recording
from .kernel_args import ArgBundle
from .types import JOINT_BALL, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.struct
class JointTopology:
    """The model's joints as kernels read them (``model.joint_*`` topology and frames; not differentiated).

    Built by :func:`joint_topology`. The gains, limits and targets (differentiable) stay separate arrays.
    """

    type: wp.array(dtype=wp.int32)  # JOINT_* of inertia.types
    parent: wp.array(dtype=wp.int32)  # parent body (-1: world)
    child: wp.array(dtype=wp.int32)  # child body
    X_p: wp.array(dtype=wp.transform)  # joint frame in the parent body frame (world if parent -1)
    X_c: wp.array(dtype=wp.transform)  # joint frame in the child body frame
    axis: wp.array(dtype=wp.vec3)  # axis in the joint frame (revolute, prismatic)
    q_start: wp.array(dtype=wp.int32)  # offset into State.joint_q
    qd_start: wp.array(dtype=wp.int32)  # offset into State.joint_qd (and the per-dof arrays)


# joint_topology(model): the JointTopology of model.joint_*
joint_topology = ArgBundle(JointTopology, "joint_")


@wp.func
def body_pose(body_q: wp.array(dtype=wp.transform), b: int):
    """Pose of body ``b`` in world; the identity for the world (-1)."""
    if b < 0:
        return wp.transform_identity()
    return body_q[b]


@wp.func
def point_velocity(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                   body_com: wp.array(dtype=wp.vec3), b: int, x: wp.vec3):
    """World velocity of the material point of body ``b`` at world position ``x`` (zero for the world)."""
    if b < 0:
        return wp.vec3(0.0)
    qd = body_qd[b]
    com = wp.transform_point(body_q[b], body_com[b])
    return wp.spatial_top(qd) + wp.cross(wp.spatial_bottom(qd), x - com)


@wp.func
def body_angular_velocity(body_qd: wp.array(dtype=wp.spatial_vector), b: int):
    if b < 0:
        return wp.vec3(0.0)
    return wp.spatial_bottom(body_qd[b])


@wp.func
def twist_angle(q: wp.quat, axis: wp.vec3):
    """Rotation angle of ``q`` about unit ``axis`` (its twist component), in [-pi, pi]."""
    s = wp.dot(wp.vec3(q[0], q[1], q[2]), axis)
    w = q[3]
    if w < 0.0:
        s = -s
        w = -w
    return 2.0 * wp.atan2(s, w)


@wp.kernel
def eval_ik_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    joints: JointTopology,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # Data out:
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
):
    j = wp.tid()
    p = joints.parent[j]
    c = joints.child[j]
    X_wp = body_pose(body_q, p) * joints.X_p[j]
    X_wc = body_q[c] * joints.X_c[j]
    X_pc = wp.transform_inverse(X_wp) * X_wc
    qs = joints.q_start[j]
    ds = joints.qd_start[j]
    t = joints.type[j]
    axis = joints.axis[j]
    axis_w = wp.transform_vector(X_wp, axis)
    w_rel = body_angular_velocity(body_qd, c) - body_angular_velocity(body_qd, p)
    if t == JOINT_REVOLUTE:
        joint_q[qs] = twist_angle(wp.transform_get_rotation(X_pc), axis)
        joint_qd[ds] = wp.dot(axis_w, w_rel)
    elif t == JOINT_PRISMATIC:
        joint_q[qs] = wp.dot(wp.transform_get_translation(X_pc), axis)
        # rate of the offset seen from the (moving) parent frame: the two bodies' velocities at the child anchor
        x = wp.transform_get_translation(X_wc)
        v_rel = point_velocity(body_q, body_qd, body_com, c, x) - point_velocity(body_q, body_qd, body_com, p, x)
        joint_qd[ds] = wp.dot(axis_w, v_rel)
    elif t == JOINT_BALL:
        r = wp.transform_get_rotation(X_pc)
        for k in range(4):
            joint_q[qs + k] = r[k]
        w_local = wp.quat_rotate_inv(wp.transform_get_rotation(X_wp), w_rel)
        for k in range(3):
            joint_qd[ds + k] = w_local[k]
    elif t == JOINT_FREE:
        pos = wp.transform_get_translation(X_pc)
        r = wp.transform_get_rotation(X_pc)
        for k in range(3):
            joint_q[qs + k] = pos[k]
        for k in range(4):
            joint_q[qs + 3 + k] = r[k]
        for k in range(6):
            joint_qd[ds + k] = body_qd[c][k]


@wp.func
def joint_transform(t: int, axis: wp.vec3, q: wp.array(dtype=float), qs: int):
    """X_pc: the child joint frame in the parent joint frame at coordinates ``q[qs:]`` (``axis`` in the joint
    frame; the identity for a fixed joint). Shared by :func:`eval_fk` and the FeatherstoneSolver."""
    if t == JOINT_REVOLUTE:
        return wp.transform(wp.vec3(0.0), wp.quat_from_axis_angle(axis, q[qs]))
    if t == JOINT_PRISMATIC:
        return wp.transform(axis * q[qs], wp.quat_identity())
    if t == JOINT_BALL:
        return wp.transform(wp.vec3(0.0), wp.normalize(wp.quat(q[qs], q[qs + 1], q[qs + 2], q[qs + 3])))
    if t == JOINT_FREE:
        return wp.transform(wp.vec3(q[qs], q[qs + 1], q[qs + 2]),
                            wp.normalize(wp.quat(q[qs + 3], q[qs + 4], q[qs + 5], q[qs + 6])))
    return wp.transform_identity()


@wp.kernel
def eval_fk_kernel(
    # Model:
    articulation_start: wp.array(dtype=wp.int32),
    joint_fk_order: wp.array(dtype=wp.int32),
    joints: JointTopology,
    body_com: wp.array(dtype=wp.vec3),
    # In:
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    # Data out:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    a = wp.tid()
    for i in range(articulation_start[a], articulation_start[a + 1]):
        j = joint_fk_order[i]
        p = joints.parent[j]
        c = joints.child[j]
        t = joints.type[j]
        qs = joints.q_start[j]
        ds = joints.qd_start[j]
        axis = joints.axis[j]
        X_wp = body_pose(body_q, p) * joints.X_p[j]
        axis_w = wp.transform_vector(X_wp, axis)
        w_joint = wp.vec3(0.0)  # angular velocity of the child relative to the parent (world)
        v_joint = wp.vec3(0.0)  # sliding velocity of the child relative to the parent (world)
        if t == JOINT_REVOLUTE:
            w_joint = axis_w * joint_qd[ds]
        elif t == JOINT_PRISMATIC:
            v_joint = axis_w * joint_qd[ds]
        elif t == JOINT_BALL:
            w_joint = wp.quat_rotate(wp.transform_get_rotation(X_wp),
                                     wp.vec3(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2]))
        X_wc = X_wp * joint_transform(t, axis, joint_q, qs)
        pose = X_wc * wp.transform_inverse(joints.X_c[j])
        body_q[c] = pose
        if t == JOINT_FREE:
            body_qd[c] = wp.spatial_vector(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2],
                                           joint_qd[ds + 3], joint_qd[ds + 4], joint_qd[ds + 5])
        else:
            x_com = wp.transform_point(pose, body_com[c])
            anchor = wp.transform_get_translation(X_wc)
            v = point_velocity(body_q, body_qd, body_com, p, x_com) + v_joint + wp.cross(w_joint, x_com - anchor)
            w = body_angular_velocity(body_qd, p) + w_joint
            body_qd[c] = wp.spatial_vector(v, w)


def _as_array(values, n: int, name: str, device) -> wp.array:
    """A checked float array on ``device`` (a host read: eval_fk sets up states, it is not a hot path)."""
    if isinstance(values, wp.array):
        if values.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {values.shape}")
        if str(values.device) != str(device):
            raise ValueError(f"{name} is on {values.device}, the model on {device}")
        if not np.isfinite(values.numpy()).all():
            raise ValueError(f"{name} contains NaN or inf")
        return values
    a = np.asarray(values, dtype=np.float32).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"{name} must have {n} entries, got {a.size}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf")
    return wp.array(a, dtype=float, device=device)


def _check_quaternions(model, q: wp.array) -> None:
    """Ball and free joint coordinates hold quaternions: refuse zero ones (they are normalized otherwise)."""
    types, starts = model.joint_type.numpy(), model.joint_q_start.numpy()
    values = q.numpy()
    for j, t in enumerate(types):
        if t in (JOINT_BALL, JOINT_FREE):
            k = starts[j] + (3 if t == JOINT_FREE else 0)
            if np.linalg.norm(values[k:k + 4]) < 1e-9:
                raise ValueError(f"joint_q of joint {j} ('{model.joint_label[j]}') holds a zero quaternion at "
                                 f"entries {k}..{k + 3}")


def eval_fk(model, joint_q, joint_qd, state) -> None:
    """Set ``state.body_q`` / ``body_qd`` of every jointed body from joint coordinates.

    Args:
        joint_q: ``model.joint_coord_count`` coordinates (``wp.array`` or anything NumPy reads).
        joint_qd: ``model.joint_dof_count`` rates (same).
    Bodies that are the child of no joint keep their pose; ``state.joint_q`` /
    ``joint_qd`` are then recomputed from the new poses.
    """
    from .autodiff.tape import recording_tape

    if recording_tape() is not None:
        raise RuntimeError("eval_fk is not differentiable: call it before recording a wp.Tape, not under one")
    if model.joint_count == 0:
        return
    q = _as_array(joint_q, model.joint_coord_count, "joint_q", model.device)
    qd = _as_array(joint_qd, model.joint_dof_count, "joint_qd", model.device)
    _check_quaternions(model, q)
    joints = joint_topology(model)
    wp.launch(eval_fk_kernel, dim=model.articulation_count, device=model.device,
              inputs=[model.articulation_start, model.joint_fk_order, joints, model.body_com, q, qd],
              outputs=[state.body_q, state.body_qd])
    eval_ik(model, state, joints)


def eval_ik(model, state, joints: JointTopology | None = None) -> None:
    """``state.joint_q`` / ``joint_qd`` from ``state.body_q`` / ``body_qd``.

    ``joints``: the model's :class:`JointTopology` when the caller keeps one (built here otherwise).
    """
    if model.joint_count == 0:
        return
    gradients_if_recording()
    wp.launch(eval_ik_kernel, dim=model.joint_count, device=model.device,
              inputs=[model.body_com, joints if joints is not None else joint_topology(model), state.body_q,
                      state.body_qd],
              outputs=[state.joint_q, state.joint_qd])
