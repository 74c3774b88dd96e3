"""Shapes of the ModelBuilder: colliders that are static (``body=-1``) or attached to a rigid body.

Every ``add_shape_*`` takes the same keyword properties (see
:data:`SHAPE_PROPERTIES`): a material for contact (Coulomb friction ``mu``,
``restitution`` in [0, 1] used by the XPBDSolver, and the SemiImplicitSolver's
penalty gains, below), a ``density`` [kg/m^3] from which a body without an
explicit mass gets its mass and inertia, and a collision filter.

Penalty gains come in two modes (:mod:`inertia.solvers.forces.contact` gives the law):

* mass-scaled (the default): a contact time constant ``tau`` [s] and damping
  ratio ``zeta``; each contact's stiffness and damping are m_eff / tau^2 and
  2 zeta m_eff / tau with m_eff the effective mass of the contact along its
  normal, so a 1 g link and a 10 kg body sink g tau^2 and rebound alike.
  Defaults ``default_shape_tau`` (:data:`DEFAULT_CONTACT_TAU`) and
  ``default_shape_zeta`` (1: critically damped).
* absolute: ``ke`` [N/m] and ``kd`` [N s/m], the same for every mass.

A shape given ``ke`` or ``kd`` uses the absolute mode (the missing one from
``default_shape_ke`` / ``default_shape_kd``); one given ``tau`` or ``zeta``,
or neither, the mass-scaled mode; both kinds at once are refused. ``tau=0``
also selects the absolute mode. Setting ``builder.default_shape_ke`` or
``default_shape_kd`` makes the absolute mode the default for the shapes added
after it (it sets ``default_shape_tau = 0``); setting ``default_shape_tau > 0``
switches back. Particle-particle contact has the same pair, model-wide:
``builder.particle_tau`` / ``particle_zeta`` (mass-scaled by the pair's reduced
mass) or ``particle_ke`` / ``particle_kd`` (setting either selects them:
``particle_tau = 0``).

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

# The default contact time constant [s] of shapes and particle pairs: rest depth g tau^2 = 0.25 mm, stable at
# the README's steps (see inertia.solvers.forces.contact for the condition on dt / tau).
DEFAULT_CONTACT_TAU = 0.005

SHAPE_PROPERTIES = {
    "ke": "absolute contact stiffness [N/m] (penalty contact of the SemiImplicitSolver); selects the absolute mode",
    "kd": "absolute contact damping [N s/m]; selects the absolute mode",
    "tau": "contact time constant [s]: stiffness m_eff / tau^2 per contact (default builder.default_shape_tau; "
           "0: the absolute ke / kd)",
    "zeta": "contact damping ratio: damping 2 zeta m_eff / tau (default builder.default_shape_zeta, 1: critical)",
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


class AbsoluteGain:
    """A builder default of absolute penalty gain: setting it on a builder selects the absolute mode.

    Reading it on the class gives the built-in default; setting it on a builder stores the value there and
    sets the builder's ``tau_attr`` (``default_shape_tau`` or ``particle_tau``) to 0, so the value set is the
    value used, never silently ignored in favour of a time constant.
    """

    def __init__(self, value: float, tau_attr: str):
        self.value, self.tau_attr = value, tau_attr

    def __set_name__(self, owner, name):
        self.name, self.slot = name, "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.value
        return obj.__dict__.get(self.slot, self.value)

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value  # checked where it is used (add_shape_*, finalize), like every default
        setattr(obj, self.tau_attr, 0.0)


class ShapeBuilderMixin:
    """Shape-adding methods of :class:`inertia.ModelBuilder` (see the module docstring for the properties)."""

    default_shape_ke = AbsoluteGain(1.0e4, "default_shape_tau")
    default_shape_kd = AbsoluteGain(10.0, "default_shape_tau")
    default_shape_tau = DEFAULT_CONTACT_TAU
    default_shape_zeta = 1.0
    default_shape_mu = 0.5
    default_shape_restitution = 0.0
    default_shape_density = 1000.0

    # particle-particle contact, model-wide: mass-scaled (particle_tau > 0) or absolute (particle_ke / kd)
    particle_ke = AbsoluteGain(1.0e4, "particle_tau")  # [N/m]
    particle_kd = AbsoluteGain(10.0, "particle_tau")  # [N s/m]

    def _init_contact(self):
        """The builder's particle-particle contact settings (the shapes' defaults are class attributes)."""
        self.particle_tau = DEFAULT_CONTACT_TAU  # [s]
        self.particle_zeta = 1.0
        self.particle_mu = 0.5  # Coulomb friction coefficient

    @property
    def shape_count(self) -> int:
        return len(self.shape_type)

    def _penalty_gains(self, props) -> tuple:
        """(ke, kd, tau, zeta) of a new shape from its properties and the builder's defaults (see the module
        docstring: ke / kd select the absolute mode, tau / zeta or neither the mass-scaled one)."""
        given = {k: props.get(k) for k in ("ke", "kd", "tau", "zeta") if props.get(k) is not None}
        ke = finite(given.get("ke", self.default_shape_ke), "shape ke", minimum=0.0)
        kd = finite(given.get("kd", self.default_shape_kd), "shape kd", minimum=0.0)
        zeta = finite(given.get("zeta", self.default_shape_zeta), "shape zeta", minimum=0.0)
        tau = finite(given.get("tau", self.default_shape_tau), "shape tau", minimum=0.0)
        absolute = "ke" in given or "kd" in given
        if absolute and (tau > 0.0 and "tau" in given or "zeta" in given):
            raise ValueError(f"shape: give either ke / kd (absolute penalty gains) or tau / zeta (mass-scaled), "
                             f"not both; got {sorted(given)}")
        return ke, kd, 0.0 if absolute else tau, zeta

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

        ke, kd, tau, zeta = self._penalty_gains(props)
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
        self.shape_material_ke.append(ke)
        self.shape_material_kd.append(kd)
        self.shape_material_tau.append(tau)
        self.shape_material_zeta.append(zeta)
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
