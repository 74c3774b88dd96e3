"""Many worlds in one builder: copy a builder into a world (``add_builder``), or N copies on a grid (``replicate``).

A world is a set of particles, bodies, shapes, joints and elements that never
interact with another world's: contacts, springs and joints stay inside one
world (the collision pipeline filters pairs by ``particle_world`` /
``shape_world``; the builder refuses elements and joints that span worlds).
Static shapes in world -1 are shared: every world meets them (a ground plane
added once to the outer builder). Particles and bodies always belong to a
world (>= 0).

Layout: ``replicate`` and ``add_builder`` append each copy's entities in one
block, so a model built from an outer builder (whatever it held before, e.g. a
shared ground plane, keeps its indices) plus N replicated copies lists every
kind of entity world by world: world ``first + k``'s particles, bodies,
joints, joint coordinates and elements are the k-th of N equal blocks after
the outer builder's own (``Model.world_counts()`` reports the per-world sizes
when every world has the same and they are sorted by world).

Speed: a copy is a handful of NumPy operations and list extends per entity
kind; nothing is validated again (the entities were checked when they were
added to the copied builder). 1,024 copies of a 20-body robot take under a
second to replicate and finalize here (``python benchmarks/worlds.py``).
"""

from __future__ import annotations

import gc

import math

import numpy as np
import warp as wp

from ..transforms import quat_mul, quat_to_matrix, transforms_to_array
from .checks import transform as _transform
from .checks import vec3 as _vec3


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _rows(a: np.ndarray) -> list:
    return list(map(tuple, a.tolist()))


class _Offset:
    """A rigid transform applied to a copy: position [m] and rotation (float64), or the identity rotation."""

    def __init__(self, xform):
        xf = _transform(xform, "add_builder xform")
        self.p = np.array(tuple(xf.p), dtype=np.float64)
        q = np.array(tuple(xf.q), dtype=np.float64)
        q /= np.linalg.norm(q)
        # an exact identity rotation keeps positions and quaternions bit for bit (only the translation is added)
        self.rotates = not (q[0] == 0.0 and q[1] == 0.0 and q[2] == 0.0)
        self.q = q
        self.R = quat_to_matrix(q) if self.rotates else np.eye(3)

    def points(self, x: np.ndarray) -> np.ndarray:
        return (x @ self.R.T if self.rotates else x) + self.p

    def vectors(self, v: np.ndarray) -> np.ndarray:
        return v @ self.R.T if self.rotates else v

    def poses(self, x7: np.ndarray) -> list:
        """``wp.transform``s of this offset composed with poses (n, 7)."""
        out = np.empty_like(x7)
        out[:, :3] = self.points(x7[:, :3])
        out[:, 3:] = quat_mul(self.q, x7[:, 3:]) if self.rotates else x7[:, 3:]
        return [wp.transform(*row) for row in out.tolist()]


class _Block:
    """One builder's entities as arrays, taken once and appended as many times as needed."""

    def __init__(self, b):
        self.n_particles, self.n_bodies = b.particle_count, b.body_count
        self.particle_q = np.asarray(b.particle_q, dtype=np.float64).reshape(-1, 3)
        self.particle_qd = np.asarray(b.particle_qd, dtype=np.float64).reshape(-1, 3)

        def idx(data, k):
            return np.asarray(data, dtype=np.int64).reshape(-1, k)

        self.spring_indices = idx(b.spring_indices, 2)
        self.tri_indices = idx(b.tri_indices, 3)
        self.edge_indices = idx(b.edge_indices, 4)
        self.tet_indices = idx(b.tet_indices, 4)
        self.tet_poses = np.asarray(b.tet_poses, dtype=np.float64).reshape(-1, 3, 3)

        self.body_q = transforms_to_array(b.body_q)
        self.body_qd = np.asarray(b.body_qd, dtype=np.float64).reshape(-1, 6)
        self.joint_parent = np.asarray(b.joint_parent, dtype=np.int64)
        self.joint_child = np.asarray(b.joint_child, dtype=np.int64)
        self.joint_to_world = np.flatnonzero(self.joint_parent < 0)  # their parent frame is in world
        self.joint_X_p_world = transforms_to_array([b.joint_X_p[j] for j in self.joint_to_world])
        self.shape_body = np.asarray(b.shape_body, dtype=np.int64)
        self.static_shapes = np.flatnonzero(self.shape_body < 0)
        self.static_X = transforms_to_array([b.shape_transform[s] for s in self.static_shapes])
        self.b = b


class WorldBuilderMixin:
    """World bookkeeping and copying of :class:`inertia.ModelBuilder` (see the module docstring)."""

    def _init_worlds(self):
        self._current_world = 0
        self._highest_world = -1  # the highest world any particle, body or shape of this builder is in
        self._declared_worlds = 1

    # ------------------------------------------------------------------ world indices
    @property
    def current_world(self) -> int:
        """The world (>= 0) that ``add_particle`` and ``add_body`` (and the shapes, joints and
        elements on them) put new entities in. Static shapes added directly are shared (world -1)."""
        return self._current_world

    @current_world.setter
    def current_world(self, world) -> None:
        if not _is_int(world) or world < 0:
            raise ValueError(f"current_world must be an integer >= 0 (particles and bodies belong to a world; "
                             f"only static shapes are shared, world -1), got {world!r}")
        self._current_world = int(world)

    @property
    def num_worlds(self) -> int:
        """Worlds of the model this builder makes: one past the highest world in use, at least 1 (or as set)."""
        return max(self._declared_worlds, self._highest_world + 1)

    @num_worlds.setter
    def num_worlds(self, n) -> None:
        if not _is_int(n) or n < 1:
            raise ValueError(f"num_worlds must be an integer >= 1, got {n!r}")
        if n <= self._highest_world:
            raise ValueError(f"num_worlds = {n} is too few: world {self._highest_world} holds entities")
        self._declared_worlds = int(n)

    def _use_world(self, world: int) -> None:
        if world > self._highest_world:
            self._highest_world = world

    def _new_world(self) -> int:
        """World 0 on a builder that holds nothing in any world yet (shared static shapes at most), else the next."""
        return 0 if self._highest_world < 0 else self.num_worlds

    def _check_world(self, world, what: str) -> int:
        nxt = self._new_world()
        if not _is_int(world) or not 0 <= world <= max(nxt, self.num_worlds - 1):
            raise IndexError(f"{what}: world {world!r} out of range: expected an existing world 0.."
                             f"{self.num_worlds - 1} or the next new one ({nxt})")
        return int(world)

    # ------------------------------------------------------------------ copying builders
    def add_builder(self, other, xform=None, world=None, shared_static: bool = False) -> int:
        """Copy every entity of ``other`` into this builder, in one world, and return that world's index.

        Args:
            other: a :class:`inertia.ModelBuilder` whose entities are all in one world (any index) or
                are static shapes. Its particles, springs, triangles, bending edges, tets, bodies,
                shapes (materials, filters, labels, meshes) and joints (limits, drives,
                ``collide_parent``) are appended after this builder's; every index inside it
                (elements' particles, joints' and shapes' bodies) is shifted to match.
            xform: a rigid transform ``(position [m], quaternion (x, y, z, w))`` or ``wp.transform``
                applied to the copy: to particle positions, body poses, static shapes and the
                parent frames of joints attached to the world; velocities are rotated. Default: none.
            world: the world (>= 0) the copy goes into: an existing one or the next new one. Default:
                a new world, ``num_worlds`` (0 when this builder holds nothing in any world yet, e.g.
                only a shared ground plane); ``num_worlds`` grows to include it.
            shared_static: False (default): ``other``'s static shapes (body -1) belong to the copy's
                world, like its bodies (a table in a robot's scene stays in that robot's world).
                True: they stay shared (world -1) and every world meets them; add a shared ground
                once, to the outer builder, rather than with every copy.

        Model-wide settings of ``other`` (gravity, up axis, contact parameters, defaults) are not
        copied: this builder's apply. Labels are copied as they are.
        """
        if not isinstance(other, WorldBuilderMixin):
            raise TypeError(f"add_builder: expected a ModelBuilder, got {type(other).__name__}")
        if other is self:
            raise ValueError("add_builder: a builder cannot be added to itself; add a copy (or use replicate)")
        _single_world_of(other)
        w = self._new_world() if world is None else self._check_world(world, "add_builder")
        self._append_block(_Block(other), _Offset(xform), w, static_world=-1 if shared_static else w)
        return w

    def replicate(self, scene, num_worlds: int, spacing=0.0, shared_static: bool = False) -> np.ndarray:
        """Add ``num_worlds`` copies of builder ``scene``, each in a new world, laid out on a grid.

        Args:
            scene: a :class:`inertia.ModelBuilder` holding one world (see :meth:`add_builder`).
            num_worlds: how many copies (>= 1). They get the worlds ``first .. first + num_worlds - 1``
                where ``first`` is 0 on a builder that holds nothing in any world yet (a shared ground
                plane is fine) and ``num_worlds`` otherwise; their entities are appended world by world.
            spacing: [m] distance between neighbouring copies: a 3-vector (grid axes x, y, z), or a
                scalar for a square grid across the two axes perpendicular to the up axis. The grid
                spans the axes with a non-zero spacing, ``ceil(num_worlds ** (1 / axes))`` copies
                along each, first axis fastest; copy k = 0 stays where ``scene`` put it. 0 puts
                every copy at the same place: worlds never interact, so that is safe too.
            shared_static: as in :meth:`add_builder`; when True, ``scene``'s static shapes are
                added once (world -1, with the first copy, where ``scene`` put them) instead of
                once per copy.

        Returns the offsets [m] of the copies, a ``(num_worlds, 3)`` float64 array.
        """
        if not isinstance(scene, WorldBuilderMixin):
            raise TypeError(f"replicate: expected a ModelBuilder, got {type(scene).__name__}")
        if scene is self:
            raise ValueError("replicate: a builder cannot replicate itself; replicate a separate scene builder")
        if not _is_int(num_worlds) or num_worlds < 1:
            raise ValueError(f"replicate: num_worlds must be an integer >= 1, got {num_worlds!r}")
        offsets = grid_offsets(int(num_worlds), spacing, self.up_axis)
        _single_world_of(scene)
        block = _Block(scene)
        first = self._new_world()
        identity = (0.0, 0.0, 0.0, 1.0)
        enabled = gc.isenabled()
        gc.disable()  # many small objects, none of them cyclic garbage: the collector would only slow this down
        try:
            for k in range(num_worlds):
                if shared_static:
                    static_world = -1 if k == 0 else None  # None: leave the static shapes out of this copy
                else:
                    static_world = first + k
                self._append_block(block, _Offset((offsets[k], identity)), first + k, static_world)
        finally:
            if enabled:
                gc.enable()
        return offsets

    # ------------------------------------------------------------------ the copy
    def _append_block(self, blk: _Block, off: _Offset, w: int, static_world) -> None:
        b = blk.b
        p0, b0 = self.particle_count, self.body_count
        n, nb = blk.n_particles, blk.n_bodies

        # particles and elements
        self.particle_q += _rows(off.points(blk.particle_q))
        self.particle_qd += _rows(off.vectors(blk.particle_qd))
        self.particle_mass += b.particle_mass
        self.particle_radius += b.particle_radius
        self.particle_flags += b.particle_flags
        self.particle_world += [w] * n
        self.spring_indices += _rows(blk.spring_indices + p0)
        self.spring_rest_length += b.spring_rest_length
        self.spring_stiffness += b.spring_stiffness
        self.spring_damping += b.spring_damping
        self.tri_indices += _rows(blk.tri_indices + p0)
        self.tri_poses += b.tri_poses  # in the triangle's own plane: a rigid motion leaves it as it is
        self.tri_areas += b.tri_areas
        self.tri_materials += b.tri_materials
        self.edge_indices += _rows(blk.edge_indices + p0)
        self.edge_rest_angle += b.edge_rest_angle
        self.edge_bending_properties += b.edge_bending_properties
        self.tet_indices += _rows(blk.tet_indices + p0)
        # the inverse rest edge matrix is in world axes: a rotated rest shape has Dm^-1 R^T
        self.tet_poses += list(blk.tet_poses @ off.R.T) if off.rotates else b.tet_poses
        self.tet_volumes += b.tet_volumes
        self.tet_materials += b.tet_materials

        # bodies
        self.body_q += off.poses(blk.body_q) if nb else []
        qd = blk.body_qd
        self.body_qd += _rows(np.concatenate([off.vectors(qd[:, :3]), off.vectors(qd[:, 3:])], axis=1))
        self.body_mass += b.body_mass
        self.body_inertia += b.body_inertia
        self.body_com += b.body_com
        self.body_kinematic += b.body_kinematic
        self.body_world += [w] * nb
        self.body_label += b.body_label

        # joints: parent -1 (the world) stays -1, and its frame is in world, so it moves with the copy
        parent = np.where(blk.joint_parent >= 0, blk.joint_parent + b0, -1)
        self.joint_type += b.joint_type
        self.joint_parent += parent.tolist()
        self.joint_child += (blk.joint_child + b0).tolist()
        x_p = list(b.joint_X_p)
        for j, xf in zip(blk.joint_to_world.tolist(), off.poses(blk.joint_X_p_world) if len(blk.joint_to_world)
                         else []):
            x_p[j] = xf
        self.joint_X_p += x_p
        self.joint_X_c += b.joint_X_c
        self.joint_axis += b.joint_axis
        self.joint_label += b.joint_label
        self.joint_world += [w] * b.joint_count
        for name in ("joint_limit_lower", "joint_limit_upper", "joint_limit_ke", "joint_limit_kd",
                     "joint_target_ke", "joint_target_kd", "joint_collide_parent"):
            getattr(self, name).extend(getattr(b, name))

        # shapes: on bodies they follow their body; static ones move with the copy (or are left out)
        keep = slice(None)
        if static_world is None and len(blk.static_shapes):
            keep = np.flatnonzero(blk.shape_body >= 0)
        xfs = list(b.shape_transform)
        for s, xf in zip(blk.static_shapes.tolist(), off.poses(blk.static_X) if len(blk.static_shapes) else []):
            xfs[s] = xf
        body = blk.shape_body
        world = np.where(body >= 0, w, -1 if static_world is None else static_world)
        shape_cols = {
            "shape_type": b.shape_type, "shape_transform": xfs, "shape_scale": b.shape_scale,
            "shape_material_ke": b.shape_material_ke, "shape_material_kd": b.shape_material_kd,
            "shape_material_mu": b.shape_material_mu, "shape_material_restitution": b.shape_material_restitution,
            "shape_density": b.shape_density, "shape_collision_group": b.shape_collision_group,
            "shape_collision_mask": b.shape_collision_mask, "shape_flags": b.shape_flags,
            "shape_mesh": b.shape_mesh, "shape_label": b.shape_label,
            "shape_body": np.where(body >= 0, body + b0, -1).tolist(), "shape_world": world.tolist(),
        }
        for name, values in shape_cols.items():
            if isinstance(keep, slice):
                getattr(self, name).extend(values)
            else:
                getattr(self, name).extend([values[s] for s in keep.tolist()])

        if n or nb or (static_world is not None and static_world >= 0 and len(blk.static_shapes)):
            self._use_world(w)


def _single_world_of(b) -> None:
    """Refuse a builder whose particles, bodies or shapes sit in more than one world."""
    worlds = set(b.particle_world) | set(b.body_world) | set(b.shape_world)
    worlds.discard(-1)
    if len(worlds) > 1:
        raise ValueError(f"add_builder / replicate copy one world, but the builder holds entities in worlds "
                         f"{sorted(worlds)}; add its worlds one builder at a time")


def grid_offsets(num_worlds: int, spacing, up_axis: int = 2) -> np.ndarray:
    """Offsets [m] of ``num_worlds`` copies on a grid (see :meth:`WorldBuilderMixin.replicate`), (n, 3) float64."""
    if np.ndim(spacing) == 0:
        try:
            s = float(spacing)
        except (TypeError, ValueError):
            raise TypeError(f"replicate: spacing must be a number or a 3-vector, got {spacing!r}") from None
        if not math.isfinite(s):
            raise ValueError(f"replicate: spacing must be finite, got {spacing!r}")
        step = np.full(3, s)
        step[up_axis] = 0.0
    else:
        step = np.array(_vec3(spacing, "replicate: spacing"), dtype=np.float64)
    axes = np.flatnonzero(step != 0.0)
    out = np.zeros((num_worlds, 3), dtype=np.float64)
    if len(axes) == 0:
        return out
    side = max(1, int(math.ceil(num_worlds ** (1.0 / len(axes)) - 1e-9)))
    while side ** len(axes) < num_worlds:  # guard against the root rounding down
        side += 1
    k = np.arange(num_worlds)
    for a in axes:
        out[:, a] = (k % side) * step[a]
        k = k // side
    return out
