"""The rigid part of ``finalize()``: bodies, joints and shape properties copied into ``wp.array``s.

Attribute names follow Newton/warp.sim; conventions (frames, the order of
``body_qd``, joint coordinates) are in :mod:`inertia.builder.bodies`.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_SPHERE


def _bounding_radius(geo_type: int, scale, mesh) -> float:
    """Radius [m] of a sphere about the shape's origin that contains it (0 for planes: infinite)."""
    if geo_type == GEO_SPHERE:
        return scale[0]
    if geo_type == GEO_BOX:
        return float(np.linalg.norm(scale))
    if geo_type == GEO_CAPSULE:
        return scale[0] + scale[1]
    if geo_type == GEO_CYLINDER:
        return float(np.hypot(scale[0], scale[1]))
    if geo_type == GEO_MESH:
        return float(np.linalg.norm(mesh[0], axis=1).max())
    return 0.0


def _body_exclusions(b) -> tuple[np.ndarray, np.ndarray]:
    """Per-body sorted CSR lists of bodies it never collides with (a joint's parent and child by default)."""
    parent = np.asarray(b.joint_parent, dtype=np.int64)
    child = np.asarray(b.joint_child, dtype=np.int64)
    keep = (parent >= 0) & ~np.asarray(b.joint_collide_parent, dtype=bool).reshape(-1)
    n = max(b.body_count, 1)
    pairs = np.unique(np.concatenate([parent[keep] * n + child[keep], child[keep] * n + parent[keep]]))
    offsets = np.zeros(b.body_count + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(np.bincount(pairs // n, minlength=b.body_count))
    flat = (pairs % n).astype(np.int32)
    return offsets, flat if len(flat) else np.zeros(1, np.int32)


def _bounding_radii(b) -> np.ndarray:
    memo, out = {}, []
    for t, s, mesh in zip(b.shape_type, b.shape_scale, b.shape_mesh):
        key = (t, s, id(mesh))
        r = memo.get(key)
        if r is None:
            r = memo[key] = _bounding_radius(t, s, mesh)
        out.append(r)
    return np.array(out, dtype=np.float32)


def add_rigid_arrays(m, b) -> None:
    """Give model ``m`` the bodies, joints and shape properties of builder ``b``."""
    dev, g = m.device, m.requires_grad

    def arr(data, dtype, grad=False):
        return wp.array(data, dtype=dtype, device=dev, requires_grad=grad and g)

    def ints(data):
        return wp.array(np.asarray(data, dtype=np.int32).reshape(-1), dtype=wp.int32, device=dev)

    # ---------------------------------------------------------------- bodies
    props = b._body_mass_properties()
    nb = b.body_count
    m.body_count = nb
    m.body_label = list(b.body_label)
    m.body_q = wp.array(b.body_q, dtype=wp.transform, device=dev, requires_grad=g)
    m.body_qd = arr(np.asarray(b.body_qd, dtype=np.float32).reshape(nb, 6), wp.spatial_vector, True)
    m.body_com = arr(np.array([p[1] for p in props], dtype=np.float32).reshape(nb, 3), wp.vec3)
    m.body_mass = arr(np.array([p[0] for p in props], dtype=np.float32), wp.float32, True)
    m.body_inv_mass = arr(np.array([p[3] for p in props], dtype=np.float32), wp.float32, True)
    m.body_inertia = arr(np.array([p[2] for p in props], dtype=np.float32).reshape(nb, 3, 3), wp.mat33, True)
    m.body_inv_inertia = arr(np.array([p[4] for p in props], dtype=np.float32).reshape(nb, 3, 3), wp.mat33, True)
    m.body_world = ints(b.body_world)
    m.body_exclusion_offsets, flat = (ints(a) for a in _body_exclusions(b))
    m.body_exclusions = flat

    # ---------------------------------------------------------------- joints
    nj = b.joint_count
    m.joint_count = nj
    m.joint_label = list(b.joint_label)
    m.joint_type = ints(b.joint_type)
    m.joint_parent = ints(b.joint_parent)
    m.joint_child = ints(b.joint_child)
    m.joint_world = ints(b.joint_world)
    m.joint_X_p = wp.array(b.joint_X_p, dtype=wp.transform, device=dev)
    m.joint_X_c = wp.array(b.joint_X_c, dtype=wp.transform, device=dev)
    m.joint_axis = arr(np.asarray(b.joint_axis, dtype=np.float32).reshape(nj, 3), wp.vec3)
    q_start, qd_start = b._joint_coord_starts()
    m.joint_q_start, m.joint_qd_start = ints(q_start), ints(qd_start)
    m.joint_coord_count, m.joint_dof_count = int(q_start[-1]), int(qd_start[-1])
    m.joint_limit_lower = arr(np.asarray(b.joint_limit_lower, dtype=np.float32), wp.float32)
    m.joint_limit_upper = arr(np.asarray(b.joint_limit_upper, dtype=np.float32), wp.float32)
    m.joint_limit_ke = arr(np.asarray(b.joint_limit_ke, dtype=np.float32), wp.float32, True)
    m.joint_limit_kd = arr(np.asarray(b.joint_limit_kd, dtype=np.float32), wp.float32, True)
    m.joint_target_ke = arr(np.asarray(b.joint_target_ke, dtype=np.float32), wp.float32, True)
    m.joint_target_kd = arr(np.asarray(b.joint_target_kd, dtype=np.float32), wp.float32, True)
    order, starts = b._joint_tree_order()
    m.joint_fk_order, m.articulation_start = ints(order), ints(starts)
    m.articulation_count = len(starts) - 1
    m.joint_attach_ke = float(b.joint_attach_ke)
    m.joint_attach_kd = float(b.joint_attach_kd)

    # ---------------------------------------------------------------- shape properties for rigid contact
    m.shape_material_restitution = arr(np.asarray(b.shape_material_restitution, dtype=np.float32), wp.float32, True)
    m.shape_collision_group = ints(b.shape_collision_group)
    m.shape_collision_mask = ints(b.shape_collision_mask)
    m.shape_flags = ints(b.shape_flags)
    m.shape_radius = arr(_bounding_radii(b), wp.float32)
    m.rigid_contact_margin = float(b.rigid_contact_margin)
