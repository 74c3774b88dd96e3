"""Shapes of the ModelBuilder: colliders that are static (``body=-1``) or attached to a rigid body.

Every ``add_shape_*`` takes the same keyword properties (see
:data:`SHAPE_PROPERTIES`): a material for contact (penalty stiffness ``ke``
[N/m], damping ``kd`` [N s/m], Coulomb friction ``mu``, ``restitution`` in
[0, 1], used by the XPBDSolver), a ``density`` [kg/m^3] from which a body
without an explicit mass gets its mass and inertia, and a collision filter.

Collision filter: two shapes collide when each one's ``collision_group`` bits
meet the other's ``collision_mask`` bits (defaults: group 1, mask all bits),
they sit on different bodies, at least one of them is on a dynamic body, and
their bodies are not excluded from each other (by default a joint's parent
and child never collide; see ``add_joint_*(collide_parent=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import warp as wp

from .checks import finite, index, transform, vec3
from ..types import (
    GEO_BOX,
    GEO_CAPSULE,
    GEO_CYLINDER,
    GEO_MESH,
    GEO_PLANE,
    GEO_SPHERE,
    SHAPE_FLAG_COLLIDE_PARTICLES,
    SHAPE_FLAG_COLLIDE_SHAPES,
)

SHAPE_PROPERTIES = {
    "ke": "contact stiffness [N/m] (penalty contact of the SemiImplicitSolver); default builder.default_shape_ke",
    "kd": "contact damping [N s/m]; default builder.default_shape_kd",
    "mu": "Coulomb friction coefficient; default builder.default_shape_mu",
    "restitution": "normal restitution in [0, 1] (XPBDSolver); default builder.default_shape_restitution",
    "density": "[kg/m^3] for the mass of a body without an explicit mass; default builder.default_shape_density",
    "collision_group": "bits this shape belongs to (int, default 1)",
    "collision_mask": "bits of the groups this shape collides with (int, default -1: all)",
    "collide_shapes": "take part in shape-shape contact (default True)",
    "collide_particles": "take part in particle-shape contact (default True)",
    "label": "a name (USD prim names, error messages)",
}


VISUAL_KINDS = ("sphere", "box", "capsule", "cylinder", "ellipsoid", "mesh")


@dataclass(frozen=True)
class Visual:
    """Geometry drawn with a body (USD recorder) and never simulated: a robot file's visual meshes.

    ``kind``: one of :data:`VISUAL_KINDS`; ``xform``: (position [m], quaternion (x, y, z, w)) in the body
    frame; ``size`` [m]: sphere (radius, 0, 0), box half extents, capsule / cylinder (radius, half height
    along local Z, 0), ellipsoid radii, mesh scale (already applied to ``vertices``); ``vertices`` (n, 3)
    and ``triangles`` (m, 3) for meshes; ``color`` (r, g, b, a) in [0, 1] or None; ``label`` a name.
    """

    kind: str
    xform: tuple
    size: tuple
    vertices: object = None
    triangles: object = None
    color: tuple | None = None
    label: str = "visual"


class ShapeBuilderMixin:
    """Shape-adding methods of :class:`inertia.ModelBuilder` (see the module docstring for the properties)."""

    default_shape_ke = 1.0e4
    default_shape_kd = 10.0
    default_shape_mu = 0.5
    default_shape_restitution = 0.0
    default_shape_density = 1000.0

    @property
    def shape_count(self) -> int:
        return len(self.shape_type)

    def _add_shape(self, body, geo_type, xform, scale, mesh=None, **props) -> int:
        unknown = set(props) - set(SHAPE_PROPERTIES)
        if unknown:
            raise TypeError(f"unknown shape properties {sorted(unknown)}; known: {sorted(SHAPE_PROPERTIES)}")
        body = index(body, self.body_count, "shape body", allow_world=True)
        if geo_type == GEO_PLANE and body != -1:
            raise ValueError("planes are infinite and can only be static (body=-1)")

        def prop(name, default, minimum=0.0):
            v = props.get(name)
            return finite(default if v is None else v, f"shape {name}", minimum=minimum)

        restitution = prop("restitution", self.default_shape_restitution)
        if restitution > 1.0:
            raise ValueError(f"shape restitution must be in [0, 1], got {restitution}")
        group = int(props.get("collision_group", 1))
        mask = int(props.get("collision_mask", -1))
        for v, n in ((group, "collision_group"), (mask, "collision_mask")):
            if not -(2**31) <= v < 2**31:
                raise ValueError(f"{n} must fit in 32 bits, got {v}")
        flags = (SHAPE_FLAG_COLLIDE_SHAPES if props.get("collide_shapes", True) else 0) | (
            SHAPE_FLAG_COLLIDE_PARTICLES if props.get("collide_particles", True) else 0
        )
        self.shape_type.append(int(geo_type))
        self.shape_body.append(body)
        self.shape_transform.append(transform(xform, "shape xform"))
        self.shape_scale.append(tuple(float(s) for s in scale))
        self.shape_material_ke.append(prop("ke", self.default_shape_ke))
        self.shape_material_kd.append(prop("kd", self.default_shape_kd))
        self.shape_material_mu.append(prop("mu", self.default_shape_mu))
        self.shape_material_restitution.append(restitution)
        self.shape_density.append(prop("density", self.default_shape_density))
        self.shape_collision_group.append(group)
        self.shape_collision_mask.append(mask)
        self.shape_flags.append(flags)
        self.shape_world.append(-1 if body == -1 else self.body_world[body])
        self.shape_mesh.append(mesh)
        self.shape_label.append(props.get("label") or f"shape_{len(self.shape_type) - 1}")
        return len(self.shape_type) - 1

    def add_visual(self, body, kind: str, xform=None, size=(1.0, 1.0, 1.0), vertices=None, triangles=None,
                   color=None, label=None) -> Visual:
        """Attach visual geometry to ``body`` (see :class:`Visual`): drawn by the USD recorder, never simulated."""
        body = index(body, self.body_count, "add_visual: body")
        if kind not in VISUAL_KINDS:
            raise ValueError(f"add_visual: kind must be one of {VISUAL_KINDS}, got {kind!r}")
        xf = transform(xform, "add_visual xform")
        size = vec3(size, "add_visual size")
        if kind == "mesh":
            v = np.asarray(vertices, dtype=np.float32)
            f = np.asarray(triangles, dtype=np.int32).reshape(-1, 3)
            if v.ndim != 2 or v.shape[1] != 3 or not np.isfinite(v).all():
                raise ValueError(f"add_visual: mesh vertices must be finite (n, 3), got shape {v.shape}")
            if len(f) == 0 or f.min() < 0 or f.max() >= len(v):
                raise ValueError(f"add_visual: mesh triangles must index the {len(v)} vertices")
            vertices, triangles = v, f
        if color is not None:
            color = tuple(float(c) for c in color)
            if len(color) == 3:
                color = color + (1.0,)
            if len(color) != 4 or not all(0.0 <= c <= 1.0 for c in color):
                raise ValueError(f"add_visual: color must be (r, g, b[, a]) in [0, 1], got {color}")
        vis = Visual(kind, (tuple(xf.p), tuple(xf.q)), size, vertices, triangles, color,
                     label or f"visual_{len(self.body_visual[body])}")
        self.body_visual[body] = self.body_visual[body] + (vis,)
        return vis

    def add_ground_plane(self, height=0.0, **props) -> int:
        """Add an infinite static ground plane normal to the up axis at ``height`` [m]."""
        height = finite(height, "ground height")
        up = np.array(self.up_vector)
        # the plane's local frame has its normal along +Z: rotate +Z onto the up axis
        q = wp.quat_between_vectors(wp.vec3(0.0, 0.0, 1.0), wp.vec3(*up))
        props.setdefault("label", "ground")
        return self._add_shape(-1, GEO_PLANE, (tuple(up * height), tuple(q)), (0.0, 0.0, 0.0), **props)

    def add_shape_plane(self, xform=None, **props) -> int:
        """Add an infinite static plane through ``xform``'s origin, its normal along the local +Z axis."""
        return self._add_shape(-1, GEO_PLANE, xform, (0.0, 0.0, 0.0), **props)

    def add_shape_sphere(self, body=-1, xform=None, radius=1.0, **props) -> int:
        """Add a sphere of ``radius`` [m] centred at ``xform``'s origin (in the body frame, or world if static)."""
        r = finite(radius, "sphere radius", minimum=0.0, strict=True)
        return self._add_shape(body, GEO_SPHERE, xform, (r, 0.0, 0.0), **props)

    def add_shape_box(self, body=-1, xform=None, hx=0.5, hy=0.5, hz=0.5, **props) -> int:
        """Add a box with half extents (hx, hy, hz) [m] along the axes of ``xform``."""
        h = tuple(finite(v, "box half extent", minimum=0.0, strict=True) for v in (hx, hy, hz))
        return self._add_shape(body, GEO_BOX, xform, h, **props)

    def add_shape_capsule(self, body=-1, xform=None, radius=0.1, half_height=0.5, **props) -> int:
        """Add a capsule: a segment of half length ``half_height`` [m] along local Z, swept by ``radius`` [m]."""
        r = finite(radius, "capsule radius", minimum=0.0, strict=True)
        hh = finite(half_height, "capsule half_height", minimum=0.0)
        return self._add_shape(body, GEO_CAPSULE, xform, (r, hh, 0.0), **props)

    def add_shape_cylinder(self, body=-1, xform=None, radius=0.1, half_height=0.5, **props) -> int:
        """Add a solid cylinder of ``radius`` [m] with its axis along local Z, ``2 half_height`` [m] long."""
        r = finite(radius, "cylinder radius", minimum=0.0, strict=True)
        hh = finite(half_height, "cylinder half_height", minimum=0.0, strict=True)
        return self._add_shape(body, GEO_CYLINDER, xform, (r, hh, 0.0), **props)

    def add_shape_mesh(self, body=-1, xform=None, vertices=None, indices=None, scale=(1.0, 1.0, 1.0), **props) -> int:
        """Add a triangle mesh collider.

        Args:
            vertices: (n, 3) vertex positions [m] in the shape frame.
            indices: (m, 3) or flat (3m,) triangle vertex indices, counter-clockwise
                seen from outside (closed, for inside/outside tests and for mass
                from density).
            scale: per-axis scale applied to the vertices.
        """
        v = np.asarray(vertices, dtype=np.float64)
        f = np.asarray(indices, dtype=np.int64).reshape(-1)
        if v.ndim != 2 or v.shape[1] != 3 or len(v) < 3:
            raise ValueError(f"mesh vertices must have shape (n >= 3, 3), got {v.shape}")
        if not np.isfinite(v).all():
            raise ValueError("mesh vertices contain NaN or inf")
        if len(f) == 0 or len(f) % 3:
            raise ValueError(f"mesh indices must describe whole triangles, got {len(f)} indices")
        if f.min() < 0 or f.max() >= len(v):
            raise IndexError(f"mesh index out of range [0, {len(v)}): min {f.min()}, max {f.max()}")
        s = vec3(scale, "mesh scale")
        if min(s) <= 0.0:
            # a negative scale mirrors the mesh, turning it inside out (its SDF sign flips outside it)
            raise ValueError(f"mesh scale must be > 0 on every axis, got {s}; mirror the vertices instead")
        mesh = (v * np.array(s), f.astype(np.int32))
        return self._add_shape(body, GEO_MESH, xform, s, mesh=mesh, **props)
