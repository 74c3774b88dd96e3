"""``ModelBuilder.finalize()``: every declared model field (:mod:`inertia.schema`) as a ``wp.array``.

Fields whose ``source`` is ``"builder"`` are the builder's list of the same name; ``"derived"`` ones are
computed here once from the builder (inverse masses, body mass properties, contact exclusion lists,
joint coordinate offsets and tree order, the world of every element, mesh handles, gravity per world).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .builder.checks import finite
from .schema import COUNT_OF, MODEL_FIELDS, MODEL_SCALARS, is_array
from .types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_SPHERE, JOINT_COORDS, SMOOTH_CONTACT_REACH

_NUMPY = {wp.int32: np.int32, wp.uint64: np.uint64}


def to_array(data, f, device, requires_grad: bool) -> wp.array:
    """One field's data (a builder list or a NumPy array) as the ``wp.array`` the kernels read."""
    if f.dtype in (wp.transform,):
        return wp.array(data, dtype=f.dtype, device=device, requires_grad=requires_grad)
    if f.dtype in _NUMPY:
        a = np.asarray(data, dtype=_NUMPY[f.dtype])
        a = a.reshape(-1) if f.flat or not f.inner else a.reshape((-1,) + f.inner)
        return wp.array(a, dtype=f.dtype, device=device)
    a = np.asarray(data, dtype=np.float32)
    width = getattr(f.dtype, "_shape_", ())
    a = a.reshape((-1,) + tuple(width)) if width else a.reshape((-1,) + f.inner)
    return wp.array(a, dtype=f.dtype, device=device, requires_grad=requires_grad)


class Derived:
    """The derived fields of one builder, each computed on first use."""

    def __init__(self, b, num_worlds: int):
        self.b, self.num_worlds, self._cache = b, num_worlds, {}

    def __getitem__(self, name: str):
        if name not in self._cache:
            self._cache.update(getattr(self, "_" + _GROUP.get(name, name))())
        return self._cache[name]

    # -------------------------------------------------------------- particles
    def _particle_inv_mass(self):
        mass = np.asarray(self.b.particle_mass, dtype=np.float32)
        return {"particle_inv_mass": np.where(mass > 0.0, 1.0 / np.where(mass > 0.0, mass, 1.0), 0.0).astype(
            np.float32)}

    def _particle_element_count(self):
        b, n = self.b, self.b.particle_count
        count = np.zeros(n, dtype=np.int64)
        for idx, k in ((b.spring_indices, 2), (b.tri_indices, 3), (b.edge_indices, 4), (b.tet_indices, 4)):
            if len(idx):
                count += np.bincount(np.asarray(idx, dtype=np.int64).reshape(-1, k).reshape(-1), minlength=n)
        return {"particle_element_count": count.astype(np.int32)}

    def _particle_exclusions(self):
        b = self.b
        offsets, flat = csr_exclusions(b.particle_count, (b.spring_indices, b.tri_indices, b.edge_indices,
                                                           b.tet_indices))
        return {"particle_exclusion_offsets": offsets,
                "particle_exclusions": flat if len(flat) else np.zeros(1, np.int32)}

    def _element_worlds(self):
        pw = np.asarray(self.b.particle_world, dtype=np.int64)
        out = {}
        for name, idx, k in (("spring", self.b.spring_indices, 2), ("tri", self.b.tri_indices, 3),
                             ("edge", self.b.edge_indices, 4), ("tet", self.b.tet_indices, 4)):
            first = np.asarray(idx, dtype=np.int64).reshape(-1, k)[:, 0]  # an element's particles share a world
            out[f"{name}_world"] = pw[first]
        return out

    # -------------------------------------------------------------- shapes
    def _shape_radius(self):
        b = self.b
        memo, out = {}, []
        for t, s, mesh in zip(b.shape_type, b.shape_scale, b.shape_mesh):
            key = (t, s, id(mesh))
            r = memo.get(key)
            if r is None:
                r = memo[key] = bounding_radius(t, s, mesh)
            out.append(r)
        return {"shape_radius": np.array(out, dtype=np.float32)}

    # -------------------------------------------------------------- bodies
    def _body_mass_properties(self):
        props = self.b._body_mass_properties()
        nb = self.b.body_count
        return {"body_com": np.array([p[1] for p in props], dtype=np.float32).reshape(nb, 3),
                "body_mass": np.array([p[0] for p in props], dtype=np.float32),
                "body_inv_mass": np.array([p[3] for p in props], dtype=np.float32),
                "body_inertia": np.array([p[2] for p in props], dtype=np.float32).reshape(nb, 3, 3),
                "body_inv_inertia": np.array([p[4] for p in props], dtype=np.float32).reshape(nb, 3, 3)}

    def _body_exclusions(self):
        """Per-body sorted CSR lists of bodies it never collides with (a joint's parent and child by default)."""
        b = self.b
        parent = np.asarray(b.joint_parent, dtype=np.int64)
        child = np.asarray(b.joint_child, dtype=np.int64)
        keep = (parent >= 0) & ~np.asarray(b.joint_collide_parent, dtype=bool).reshape(-1)
        n = max(b.body_count, 1)
        # pairs excluded explicitly (add_collision_exclusion: imported robots' self-collision filters)
        lens = np.fromiter(map(len, b.body_collision_exclude), dtype=np.int64, count=b.body_count)
        first = np.repeat(np.arange(b.body_count, dtype=np.int64), lens)
        other = np.fromiter((o for entry in b.body_collision_exclude for o in entry), dtype=np.int64,
                            count=int(lens.sum()))
        pairs = np.unique(np.concatenate([parent[keep] * n + child[keep], child[keep] * n + parent[keep],
                                          first * n + other, other * n + first]))
        offsets = np.zeros(b.body_count + 1, dtype=np.int32)
        offsets[1:] = np.cumsum(np.bincount(pairs // n, minlength=b.body_count))
        flat = (pairs % n).astype(np.int32)
        return {"body_exclusion_offsets": offsets, "body_exclusions": flat if len(flat) else np.zeros(1, np.int32)}

    # -------------------------------------------------------------- joints
    def _joint_layout(self):
        b = self.b
        q_start, qd_start = b._joint_coord_starts()
        order, starts = b._joint_tree_order()
        jw = np.asarray(b.joint_world, dtype=np.int64)
        per_joint = joint_coord_counts(b.joint_type)
        return {"joint_q_start": q_start, "joint_qd_start": qd_start, "joint_fk_order": order,
                "articulation_start": starts, "joint_coord_world": np.repeat(jw, per_joint[:, 0]),
                "joint_dof_world": np.repeat(jw, per_joint[:, 1])}

    # -------------------------------------------------------------- worlds
    def _gravity(self):
        # one gravity per world (the builder's for all of them); the integrators read gravity[world]
        return {"gravity": np.tile(np.asarray(self.b.gravity, dtype=np.float32), (self.num_worlds, 1))}


_GROUP = {
    "particle_exclusion_offsets": "particle_exclusions",
    "spring_world": "element_worlds", "tri_world": "element_worlds", "edge_world": "element_worlds",
    "tet_world": "element_worlds",
    **{n: "body_mass_properties" for n in ("body_com", "body_mass", "body_inv_mass", "body_inertia",
                                           "body_inv_inertia")},
    "body_exclusion_offsets": "body_exclusions",
    **{n: "joint_layout" for n in ("joint_q_start", "joint_qd_start", "joint_fk_order", "articulation_start",
                                   "joint_coord_world", "joint_dof_world")},
}


def joint_coord_counts(joint_type) -> np.ndarray:
    """(n, 2): coordinates and degrees of freedom of each joint."""
    table = np.array([JOINT_COORDS[t] for t in range(len(JOINT_COORDS))], dtype=np.int64)
    return table[np.asarray(joint_type, dtype=np.int64)].reshape(-1, 2)


def bounding_radius(geo_type: int, scale, mesh) -> float:
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


def csr_exclusions(n: int, groups) -> tuple[np.ndarray, np.ndarray]:
    """Per-particle sorted lists of particles that share an element (they never collide)."""
    keys = [np.zeros(0, dtype=np.int64)]
    for group in groups:
        if not len(group):
            continue
        e = np.asarray(group, dtype=np.int64).reshape(len(group), -1)
        k = e.shape[1]
        keys += [e[:, a] * n + e[:, b] for a in range(k) for b in range(k) if a != b]
    keys = np.sort(np.concatenate(keys))  # by particle, then by neighbour
    # unique by neighbour comparison: np.unique's hash path is ~15x slower on millions of keys (NumPy 2.4)
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
    n1 = max(n, 1)
    keys = keys[keys // n1 != keys % n1]
    offsets = np.zeros(n + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(np.bincount(keys // n1, minlength=n))
    return offsets, (keys % n1).astype(np.int32)


def _shape_meshes(m, b) -> None:
    m.shape_meshes = []  # keeps the wp.Mesh objects alive as long as the model
    ptrs = np.zeros(m.shape_count, dtype=np.uint64)
    built = {}  # copies of a builder (replicate) share their mesh data: one wp.Mesh each
    for s, mesh in enumerate(b.shape_mesh):
        if mesh is not None:
            wm = built.get(id(mesh))
            if wm is None:
                wm = built[id(mesh)] = wp.Mesh(
                    points=wp.array(mesh[0].astype(np.float32), dtype=wp.vec3, device=m.device),
                    indices=wp.array(mesh[1], dtype=wp.int32, device=m.device))
            m.shape_meshes.append(wm)
            ptrs[s] = wm.id
    m.shape_source_ptr = wp.array(ptrs, dtype=wp.uint64, device=m.device)


def build_model(m, b, device, requires_grad: bool) -> None:
    """Give the (empty) Model ``m`` every declared field of builder ``b``."""
    m.device = wp.get_device(device)
    m.requires_grad = bool(requires_grad)
    m.up_axis = b.up_axis
    m.up_vector = wp.vec3(*b.up_vector)
    m.num_worlds = b.num_worlds
    q = np.asarray(b.particle_q, dtype=np.float32).reshape(b.particle_count, 3)
    if not np.isfinite(q).all():
        raise ValueError("particle positions contain NaN or inf")
    m.particle_count, m.spring_count, m.tri_count = b.particle_count, len(b.spring_rest_length), len(b.tri_areas)
    m.edge_count, m.tet_count, m.shape_count = len(b.edge_rest_angle), len(b.tet_volumes), len(b.shape_type)
    m.body_count, m.joint_count = b.body_count, b.joint_count
    derived = Derived(b, m.num_worlds)
    for f in MODEL_FIELDS:
        if f.source == "builder_only":
            continue
        if f.name in ("shape_meshes", "shape_source_ptr"):
            continue
        if not is_array(f):
            setattr(m, f.name, list(getattr(b, f.name)) if f.source == "builder" else derived[f.name])
            continue
        data = getattr(b, f.name) if f.source == "builder" else derived[f.name]
        setattr(m, f.name, to_array(data, f, m.device, f.grad and m.requires_grad))
    _shape_meshes(m, b)
    m.joint_coord_count = int(m.joint_q_start.numpy()[-1])
    m.joint_dof_count = int(m.joint_qd_start.numpy()[-1])
    m.articulation_count = len(m.articulation_start) - 1

    radius = np.asarray(b.particle_radius, dtype=np.float32)
    m.particle_max_radius = float(radius.max()) if b.particle_count else 0.0
    for f in MODEL_SCALARS:
        if f.source == "builder":
            value = getattr(b, f.name)
            if f.dtype is float:
                value = finite(value, f"builder.{f.name}", minimum=f.minimum, maximum=f.maximum)
            setattr(m, f.name, f.dtype(value))
    if b.contact_margin is not None:
        finite(b.contact_margin, "builder.contact_margin", minimum=0.0)
    margin = float(b.contact_margin if b.contact_margin is not None else 0.5 * m.particle_max_radius)
    # a smoothed contact already pushes before the surfaces touch: detect it from where it starts
    m.contact_margin = max(margin, SMOOTH_CONTACT_REACH * m.contact_smoothing)
    m._world_counts = uniform_world_counts(m.num_worlds, b)
    # the joint coordinates of the initial poses, recomputed by every reset (the initial poses may be edited)
    m._reset_joint_q = wp.zeros(m.joint_coord_count, dtype=float, device=m.device)
    m._reset_joint_qd = wp.zeros(m.joint_dof_count, dtype=float, device=m.device)
    missing = [name for name in COUNT_OF.values() if not hasattr(m, name)]
    assert not missing, f"finalize left counts unset: {missing}"


def uniform_world_counts(num_worlds: int, b):
    """Entities per world when every world holds the same numbers, sorted by world; else None."""
    particle_world = np.asarray(b.particle_world, dtype=np.int64)
    body_world = np.asarray(b.body_world, dtype=np.int64)
    joint_world = np.asarray(b.joint_world, dtype=np.int64)
    per_joint = joint_coord_counts(b.joint_type)
    out = {}
    for name, worlds, weights in (("particles", particle_world, None), ("bodies", body_world, None),
                                  ("joints", joint_world, None), ("joint_coords", joint_world, per_joint[:, 0]),
                                  ("joint_dofs", joint_world, per_joint[:, 1])):
        if len(worlds) and (worlds.min() < 0 or worlds.max() >= num_worlds or np.any(np.diff(worlds) < 0)):
            return None  # shared, out of range, or not sorted by world
        counts = np.bincount(worlds, weights=weights, minlength=num_worlds) if len(worlds) else np.zeros(num_worlds)
        if np.any(counts != counts[0]):
            return None
        out[name] = int(counts[0])
    return out
