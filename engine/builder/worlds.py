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
from ..schema import builder_fields
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
    """One builder's lists prepared once for copying (index columns and poses as arrays), appended as many
    times as needed by :meth:`WorldBuilderMixin._append_block`."""

    def __init__(self, b):
        self.b = b
        self.n_particles, self.n_bodies = b.particle_count, b.body_count
        self.arrays = {}
        for f in builder_fields():
            values = getattr(b, f.name)
            if f.copy == "particle_index":
                self.arrays[f.name] = np.asarray(values, dtype=np.int64).reshape((-1,) + f.inner)
            elif f.copy in ("body_index", "joint_index"):
                self.arrays[f.name] = np.asarray(values, dtype=np.int64)
            elif f.copy in ("point", "vector"):
                self.arrays[f.name] = np.asarray(values, dtype=np.float64).reshape(-1, 3)
            elif f.copy == "spatial":
                self.arrays[f.name] = np.asarray(values, dtype=np.float64).reshape(-1, 6)
            elif f.copy == "pose":
                self.arrays[f.name] = transforms_to_array(values)
            elif f.copy == "tet_pose":
                self.arrays[f.name] = np.asarray(values, dtype=np.float64).reshape(-1, 3, 3)
        # poses given in world (a joint's parent frame when its parent is the world, a static shape's pose)
        self.shape_body = np.asarray(b.shape_body, dtype=np.int64)
        self.static_shapes = np.flatnonzero(self.shape_body < 0)
        self.in_world = {"joint_X_p": np.flatnonzero(np.asarray(b.joint_parent, dtype=np.int64) < 0),
                         "shape_transform": self.static_shapes}
        self.world_poses = {name: transforms_to_array([getattr(b, name)[i] for i in idx])
                            for name, idx in self.in_world.items()}


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

    def _add_to_current_world(self, entity_world: list) -> None:
        """Put a new particle or body in the current world: its ``*_world`` entry, and the world counts as used."""
        entity_world.append(self._current_world)
        self._use_world(self._current_world)

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
        """Append every declared builder list of ``blk`` (:func:`inertia.schema.builder_fields`) by its copy
        rule: indices shifted past this builder's particles and bodies, poses and vectors moved by ``off``,
        world indices set to ``w`` (static shapes: ``static_world``; None leaves them out of this copy)."""
        b = blk.b
        shift = {"particle_index": self.particle_count, "body_index": self.body_count,
                 "joint_index": self.joint_count}
        keep = None  # shapes to copy, when the static ones are left out
        if static_world is None and len(blk.static_shapes):
            keep = np.flatnonzero(blk.shape_body >= 0).tolist()
        for f in builder_fields():
            values, a = getattr(b, f.name), blk.arrays.get(f.name)
            rule = f.copy
            if rule == "plain":
                new = values
            elif rule == "world":
                new = [w] * len(values)
            elif rule == "shape_world":
                new = np.where(blk.shape_body >= 0, w, -1 if static_world is None else static_world).tolist()
            elif rule == "particle_index":
                new = _rows(a + shift[rule])
            elif rule in ("body_index", "joint_index"):  # -1 (the world, a static shape, no joint) stays -1
                new = np.where(a >= 0, a + shift[rule], -1).tolist()
            elif rule == "body_index_list":
                s = shift["body_index"]
                new = [tuple(i + s for i in entry) for entry in values]
            elif rule == "point":
                new = _rows(off.points(a))
            elif rule == "vector":
                new = _rows(off.vectors(a))
            elif rule == "spatial":
                new = _rows(np.concatenate([off.vectors(a[:, :3]), off.vectors(a[:, 3:])], axis=1))
            elif rule == "pose":
                new = off.poses(a) if len(a) else []
            elif rule == "world_pose":
                new = list(values)
                idx = blk.in_world[f.name]
                for i, xf in zip(idx.tolist(), off.poses(blk.world_poses[f.name]) if len(idx) else []):
                    new[i] = xf
            elif rule == "tet_pose":  # the inverse rest edge matrix is in world axes: rotated, Dm^-1 R^T
                new = list(a @ off.R.T) if off.rotates else values
            else:
                raise AssertionError(f"field {f.name}: unknown copy rule {rule!r}")
            if keep is not None and f.entity == "shape":
                new = [new[s] for s in keep]
            getattr(self, f.name).extend(new)
        if blk.n_particles or blk.n_bodies or (static_world is not None and static_world >= 0
                                               and len(blk.static_shapes)):
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
