"""Forward kinematics in PyTorch: body poses from joint coordinates, differentiable by torch autograd.

    poses = inertia.body_poses(model, joint_q)          # joint_q (..., joint_coord_count) -> (..., B, 7)
    loss = ((poses[..., hand, :3] - goal) ** 2).sum()  # an end-effector loss is one call

The same conventions as the solvers and :func:`inertia.eval_fk` (:mod:`inertia.builder.bodies`): a body's
pose is its joint's parent body pose, times the joint frame in the parent (``joint_X_p``), times the
joint's own transform (revolute: a rotation about ``joint_axis`` by the angle; prismatic: a translation
along it; ball: the quaternion; free: position and quaternion; fixed: none), times the inverse of the
joint frame in the child (``joint_X_c``). Poses are ``(position, quaternion (x, y, z, w))``. Ball and free
quaternions are normalized (so their gradient is tangent to the unit sphere). Bodies that are the child
of no joint keep ``body_q`` (default: the model's initial poses).

Joints are evaluated level by level (all joints at the same depth of their trees at once), so the cost
is a few tensor operations per tree level, whatever the number of worlds. Leading dimensions of
``joint_q`` (a trajectory, a batch) are kept.
"""

from __future__ import annotations

import numpy as np
import torch

from ..types import JOINT_BALL, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a * b of (x, y, z, w) quaternions (broadcasting)."""
    ax, ay, az, aw = a.unbind(-1)
    bx, by, bz, bw = b.unbind(-1)
    return torch.stack([aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx,
                        aw * bz + ax * by - ay * bx + az * bw,
                        aw * bw - ax * bx - ay * by - az * bz], dim=-1)


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v rotated by unit quaternion q."""
    u, w = q[..., :3], q[..., 3:]
    u, v = torch.broadcast_tensors(u, v)
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


def transform_mul(pa, qa, pb, qb):
    """(pa, qa) * (pb, qb): pose b expressed in a's frame, mapped to a's parent."""
    return pa + quat_rotate(qa, pb), quat_mul(qa, qb)


class _Levels:
    """Per tree depth: the joints there and their constant data as tensors (made once per model and device)."""

    def __init__(self, model, device):
        jt = model.joint_type.numpy()
        parent = model.joint_parent.numpy()
        child = model.joint_child.numpy()
        depth = np.zeros(len(jt), np.int64)
        joint_of = {int(c): j for j, c in enumerate(child)}
        for j in model.joint_fk_order.numpy():  # parents first
            p = parent[j]
            depth[j] = 0 if p < 0 or p not in joint_of else depth[joint_of[p]] + 1
        X_p = model.joint_X_p.numpy().astype(np.float64)
        X_c = model.joint_X_c.numpy().astype(np.float64)
        q_start = model.joint_q_start.numpy()
        self.levels = []

        def t(x, dtype=torch.float32):
            return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)

        for d in range(int(depth.max()) + 1 if len(jt) else 0):
            js = np.flatnonzero(depth == d)
            inv_q = X_c[js, 3:] * np.array([-1.0, -1.0, -1.0, 1.0])  # conjugate of a unit quaternion
            inv_p = -_rotate_np(inv_q, X_c[js, :3])
            # coordinate indices per joint: the first and, for ball / free, the quaternion's
            qs = q_start[js].astype(np.int64)
            quat0 = np.where(jt[js] == JOINT_FREE, qs + 3, qs)
            self.levels.append(dict(
                child=t(child[js], torch.int64), parent=t(np.maximum(parent[js], 0), torch.int64),
                has_parent=t(parent[js] >= 0, torch.bool)[:, None], type=t(jt[js], torch.int64)[:, None],
                p_p=t(X_p[js, :3]), q_p=t(X_p[js, 3:]), p_c=t(inv_p), q_c=t(inv_q),
                axis=t(model.joint_axis.numpy()[js]),
                first=t(qs, torch.int64), quat=t(quat0[:, None] + np.arange(4), torch.int64),
                pos=t(qs[:, None] + np.arange(3), torch.int64)))


def _rotate_np(q, v):
    u, w = q[..., :3], q[..., 3:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def body_poses(model, joint_q: torch.Tensor, body_q: torch.Tensor | None = None) -> torch.Tensor:
    """Poses ``(..., model.body_count, 7)`` (position [m], quaternion (x, y, z, w)) from ``joint_q``.

    Args:
        model: the :class:`inertia.Model`.
        joint_q: joint coordinates ``(..., model.joint_coord_count)`` (float; any leading dimensions),
            e.g. a rollout's ``joint_q`` trajectory ``(T + 1, n)``.
        body_q: poses ``(model.body_count, 7)`` (or with ``joint_q``'s leading dimensions) for the
            bodies that are the child of no joint; default the model's initial ``body_q``.

    Differentiable with respect to ``joint_q`` (and ``body_q``) by torch autograd; the model's joint
    frames and axes are constants.
    """
    if not isinstance(joint_q, torch.Tensor) or not joint_q.is_floating_point():
        raise TypeError(f"joint_q must be a floating-point torch.Tensor, got {type(joint_q).__name__}")
    n = model.joint_coord_count
    if joint_q.shape[-1:] != (n,):
        raise ValueError(f"joint_q must end in the model's {n} joint coordinates, got shape {tuple(joint_q.shape)}")
    dev, dtype = joint_q.device, joint_q.dtype
    cache = model.__dict__.setdefault("_torch_fk_levels", {})
    levels = cache.get(str(dev))
    if levels is None:
        levels = cache[str(dev)] = _Levels(model, dev)
    lead = joint_q.shape[:-1]
    if body_q is None:
        from warp import to_torch

        body_q = to_torch(model.body_q).detach().clone().reshape(model.body_count, 7)
    body_q = body_q.to(device=dev, dtype=dtype)
    if body_q.shape[-2:] != (model.body_count, 7):
        raise ValueError(f"body_q must be ({model.body_count}, 7), got {tuple(body_q.shape)}")
    poses = body_q.expand(*lead, model.body_count, 7)
    q = torch.cat([joint_q, joint_q.new_zeros(lead + (1,))], dim=-1)  # one spare entry: joints without coordinates
    for lv in levels.levels:
        typ = lv["type"]
        first = q[..., lv["first"].clamp(max=n)].unsqueeze(-1)  # revolute angle / prismatic offset
        quat = q[..., lv["quat"].clamp(max=n)]
        pos = q[..., lv["pos"].clamp(max=n)]
        axis = lv["axis"].to(dtype)
        half = 0.5 * first
        q_rev = torch.cat([axis * torch.sin(half), torch.cos(half)], dim=-1)
        is_quat = (typ == JOINT_BALL) | (typ == JOINT_FREE)
        safe = torch.where(is_quat, quat, torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=dtype, device=dev))
        q_joint = torch.where(typ == JOINT_REVOLUTE, q_rev, safe / torch.linalg.norm(safe, dim=-1, keepdim=True))
        p_joint = torch.where(typ == JOINT_PRISMATIC, axis * first, torch.where(typ == JOINT_FREE, pos, 0.0 * pos))
        parent = poses[..., lv["parent"], :]
        ident = torch.tensor([0, 0, 0, 0, 0, 0, 1.0], dtype=dtype, device=dev)
        parent = torch.where(lv["has_parent"], parent, ident)
        p, r = transform_mul(parent[..., :3], parent[..., 3:], lv["p_p"].to(dtype), lv["q_p"].to(dtype))
        p, r = transform_mul(p, r, p_joint, q_joint)
        p, r = transform_mul(p, r, lv["p_c"].to(dtype), lv["q_c"].to(dtype))
        poses = poses.index_copy(-2, lv["child"], torch.cat([p, r], dim=-1))
    return poses
