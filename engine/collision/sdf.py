"""Signed distance and outward normal of each static shape type, as ``wp.func``s.

Shared by collision detection (which decides which particle-shape pairs to keep)
and by the contact force kernels (which recompute the distance from the current
positions, so Warp's autodiff differentiates through the exact geometry).
Everything is in the shape's local frame; planes have their normal along +Z,
capsules and cylinders their axis. :class:`ShapeGeometry` bundles the model's shape
arrays for kernels; :func:`shape_world_pose` places a shape in world (through
its body's pose when it has one).

**Compiled for the shapes a scene has.** The particle-shape kernels (detection, the
SemiImplicitSolver's contact forces, XPBD's contact constraints) are built per set
of shape types (:func:`shape_types`, :func:`shape_sdf_at_for`): a cloth over a
ground plane compiles the plane's distance only, not a mesh query and four other
shapes with their adjoints (the 32x32 cloth's cold start: 8.4 -> 7.3 s). Each set's kernels
live in a Warp module of their own, compiled the first time a scene uses them; the
arithmetic of every present type is the general function's, so results are the same
bits.
"""

import functools
import weakref

import numpy as np
import warp as wp

from ..kernel_args import ArgBundle
from ..types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_NAMES, GEO_PLANE, GEO_SPHERE


@wp.func
def sdf_sphere(p: wp.vec3, radius: float):
    d = wp.length(p)
    n = wp.vec3(0.0, 0.0, 1.0)
    if d > 1.0e-9:
        n = p / d
    return wp.vec4(n[0], n[1], n[2], d - radius)


@wp.func
def sdf_box(p: wp.vec3, h: wp.vec3):
    q = wp.vec3(wp.abs(p[0]) - h[0], wp.abs(p[1]) - h[1], wp.abs(p[2]) - h[2])
    result = wp.vec4(0.0)
    if q[0] > 0.0 or q[1] > 0.0 or q[2] > 0.0:
        # outside: distance to the closest point on the surface
        c = wp.vec3(wp.clamp(p[0], -h[0], h[0]), wp.clamp(p[1], -h[1], h[1]), wp.clamp(p[2], -h[2], h[2]))
        delta = p - c
        d = wp.length(delta)
        n = delta / wp.max(d, 1.0e-12)
        result = wp.vec4(n[0], n[1], n[2], d)
    else:
        # inside: push out through the nearest face
        axis = int(0)
        if q[1] > q[0] and q[1] >= q[2]:
            axis = 1
        elif q[2] > q[0] and q[2] > q[1]:
            axis = 2
        n = wp.vec3(0.0)
        n[axis] = wp.sign(p[axis])
        result = wp.vec4(n[0], n[1], n[2], q[axis])
    return result


@wp.func
def sdf_capsule(p: wp.vec3, radius: float, half_height: float):
    c = wp.vec3(0.0, 0.0, wp.clamp(p[2], -half_height, half_height))
    return sdf_sphere(p - c, radius)


@wp.func
def sdf_cylinder(p: wp.vec3, radius: float, half_height: float):
    """Solid cylinder along local Z: the exact distance, with the normal of the nearest face, rim or side."""
    rho = wp.sqrt(p[0] * p[0] + p[1] * p[1])
    radial = wp.vec3(1.0, 0.0, 0.0)
    if rho > 1.0e-9:
        radial = wp.vec3(p[0] / rho, p[1] / rho, 0.0)
    axial = wp.vec3(0.0, 0.0, wp.sign(p[2]))
    qx = rho - radius
    qz = wp.abs(p[2]) - half_height
    result = wp.vec4(0.0)
    if qx > 0.0 and qz > 0.0:
        d = wp.sqrt(qx * qx + qz * qz)  # nearest point on a rim
        n = (radial * qx + axial * qz) / d
        result = wp.vec4(n[0], n[1], n[2], d)
    elif qx > qz:
        result = wp.vec4(radial[0], radial[1], radial[2], qx)
    else:
        result = wp.vec4(axial[0], axial[1], axial[2], qz)
    return result


@wp.func
def sdf_mesh(p: wp.vec3, mesh: wp.uint64, max_dist: float):
    query = wp.mesh_query_point_sign_normal(mesh, p, max_dist)
    result = wp.vec4(0.0, 0.0, 1.0, max_dist)
    if query.result:
        c = wp.mesh_eval_position(mesh, query.face, query.u, query.v)
        delta = p - c
        d = wp.length(delta)
        n = wp.mesh_eval_face_normal(mesh, query.face)
        if d > 1.0e-9:
            n = delta / d * query.sign
        result = wp.vec4(n[0], n[1], n[2], d * query.sign)
    return result


@wp.func
def shape_sdf(geo_type: int, scale: wp.vec3, mesh: wp.uint64, p: wp.vec3, max_dist: float):
    """(normal.x, normal.y, normal.z, signed distance) of local point ``p`` to a shape's surface."""
    result = wp.vec4(0.0, 0.0, 1.0, max_dist)
    if geo_type == GEO_PLANE:
        result = wp.vec4(0.0, 0.0, 1.0, p[2])
    elif geo_type == GEO_SPHERE:
        result = sdf_sphere(p, scale[0])
    elif geo_type == GEO_BOX:
        result = sdf_box(p, scale)
    elif geo_type == GEO_CAPSULE:
        result = sdf_capsule(p, scale[0], scale[1])
    elif geo_type == GEO_CYLINDER:
        result = sdf_cylinder(p, scale[0], scale[1])
    elif geo_type == GEO_MESH:
        result = sdf_mesh(p, mesh, max_dist)
    return result


@wp.func
def shape_sdf_world(
    geo_type: int, scale: wp.vec3, mesh: wp.uint64, xform: wp.transform, x: wp.vec3, max_dist: float
):
    """As ``shape_sdf`` for a world-space point, with the normal returned in world space."""
    local = shape_sdf(geo_type, scale, mesh, wp.transform_point(wp.transform_inverse(xform), x), max_dist)
    n = wp.transform_vector(xform, wp.vec3(local[0], local[1], local[2]))
    return wp.vec4(n[0], n[1], n[2], local[3])


@wp.struct
class ShapeGeometry:
    """The model's shapes as kernels read them (``model.shape_*``; not differentiated, so one argument).

    Built by :func:`shape_geometry`; the materials (``shape_material_*``) are differentiable and stay
    separate arrays, so a ``wp.Tape`` sees them.
    """

    body: wp.array(dtype=wp.int32)  # the body each shape is attached to (-1: static)
    transform: wp.array(dtype=wp.transform)  # pose in its body's frame (in world when static)
    type: wp.array(dtype=wp.int32)  # GEO_* of inertia.types
    scale: wp.array(dtype=wp.vec3)  # half extents / radius, half height [m] (by type)
    source_ptr: wp.array(dtype=wp.uint64)  # wp.Mesh id of mesh shapes (0 otherwise)
    radius: wp.array(dtype=float)  # bounding sphere about the shape's origin [m] (0 for planes)


# shape_geometry(model): the ShapeGeometry of model.shape_*
shape_geometry = ArgBundle(ShapeGeometry, "shape_")


@wp.func
def shape_world_pose(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), s: int):
    """World pose of shape ``s``: its body's pose times its local pose (static shapes: already world)."""
    b = shapes.body[s]
    if b < 0:
        return shapes.transform[s]
    return body_q[b] * shapes.transform[s]


@wp.func
def shape_sdf_at(shapes: ShapeGeometry, s: int, xform: wp.transform, x: wp.vec3, max_dist: float):
    """``shape_sdf_world`` of shape ``s`` placed at world pose ``xform``."""
    return shape_sdf_world(shapes.type[s], shapes.scale[s], shapes.source_ptr[s], xform, x, max_dist)


# id(model.shape_type) -> (a weak reference to that array, the set of types it holds)
_TYPE_SETS: dict = {}


def shape_types(model) -> frozenset:
    """The ``GEO_*`` types of ``model``'s shapes (a host read, once per ``model.shape_type`` array: a scene whose
    shapes change type must assign a new array)."""
    a = model.shape_type
    hit = _TYPE_SETS.get(id(a))
    if hit is None or hit[0]() is not a:
        types = frozenset(int(t) for t in np.unique(a.numpy())) if model.shape_count else frozenset()
        # the entry leaves with its array (a sweep over thousands of models keeps nothing of the finished ones)
        hit = _TYPE_SETS[id(a)] = (weakref.ref(a, lambda _, key=id(a): _TYPE_SETS.pop(key, None)), types)
    return hit[1]


def type_tag(types: frozenset) -> str:
    """``"box_plane"``: a name for a set of shape types (kernel names, one per set)."""
    return "_".join(sorted(GEO_NAMES[t] for t in types)) or "none"


@functools.cache
def shape_sdf_at_for(types: frozenset):
    """:func:`shape_sdf_at` compiled for the shape types in ``types`` only (others: no contact, distance
    ``max_dist``), the same arithmetic per type."""
    has = {t: int(t) in types for t in (GEO_PLANE, GEO_SPHERE, GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH)}

    @wp.func
    def shape_sdf_at_typed(shapes: ShapeGeometry, s: int, xform: wp.transform, x: wp.vec3, max_dist: float):
        geo_type = shapes.type[s]
        scale = shapes.scale[s]
        p = wp.transform_point(wp.transform_inverse(xform), x)
        local = wp.vec4(0.0, 0.0, 1.0, max_dist)
        if wp.static(has[GEO_PLANE]):
            if geo_type == GEO_PLANE:
                local = wp.vec4(0.0, 0.0, 1.0, p[2])
        if wp.static(has[GEO_SPHERE]):
            if geo_type == GEO_SPHERE:
                local = sdf_sphere(p, scale[0])
        if wp.static(has[GEO_BOX]):
            if geo_type == GEO_BOX:
                local = sdf_box(p, scale)
        if wp.static(has[GEO_CAPSULE]):
            if geo_type == GEO_CAPSULE:
                local = sdf_capsule(p, scale[0], scale[1])
        if wp.static(has[GEO_CYLINDER]):
            if geo_type == GEO_CYLINDER:
                local = sdf_cylinder(p, scale[0], scale[1])
        if wp.static(has[GEO_MESH]):
            if geo_type == GEO_MESH:
                local = sdf_mesh(p, shapes.source_ptr[s], max_dist)
        n = wp.transform_vector(xform, wp.vec3(local[0], local[1], local[2]))
        return wp.vec4(n[0], n[1], n[2], local[3])

    return shape_sdf_at_typed
