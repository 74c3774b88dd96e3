"""Where a shape-shape contact is right now: the geometry both solvers evaluate for each contact point.

A contact (``Contacts.rigid_contact_*``) is a point fixed on shape 0 (in its
body's frame) with a radius ``thickness0`` about it, close to shape 1. Its
geometry is recomputed from the current body poses every time a solver needs
it, through shape 1's signed distance, so depth, normal and lever arms follow
both bodies exactly (and ``wp.Tape`` differentiates through them). Box-box
contacts carry a normal fixed in shape 1's frame (``rigid_contact_normal1``):
their depth is measured along it, to the box's supporting plane.
"""

import warp as wp

from ..types import GEO_BOX
from .sdf import shape_sdf_world, shape_world_transform


@wp.func
def box_support(h: wp.vec3, n: wp.vec3):
    """Largest n . x over the box of half extents h (in its own frame)."""
    return h[0] * wp.abs(n[0]) + h[1] * wp.abs(n[1]) + h[2] * wp.abs(n[2])


@wp.struct
class ContactGeometry:
    normal: wp.vec3  # unit, world, pointing from shape 1 towards shape 0
    depth: float  # penetration [m] (> 0 when the surfaces overlap; negative: the gap)
    p0: wp.vec3  # the contact point on shape 0's surface, world [m]
    p1: wp.vec3  # the closest point on shape 1's surface, world [m]


@wp.func
def rigid_contact_geometry(
    point0: wp.vec3,
    thickness0: float,
    body0: int,
    shape1: int,
    body_q: wp.array(dtype=wp.transform),
    shape_body: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    shape_type: wp.array(dtype=wp.int32),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_source_ptr: wp.array(dtype=wp.uint64),
    max_dist: float,
    normal1: wp.vec3 = wp.vec3(0.0),
):
    """Geometry of the contact between ``point0`` (on ``body0``, -1: world) with radius ``thickness0`` and ``shape1``.

    ``normal1``: the contact's fixed normal in shape 1's frame (``Contacts.rigid_contact_normal1``);
    zero (the default) measures along shape 1's signed distance instead.
    """
    x = point0
    if body0 >= 0:
        x = wp.transform_point(body_q[body0], point0)
    X1 = shape_world_transform(shape_body, shape_transform, body_q, shape1)
    sd = wp.vec4()
    if wp.length_sq(normal1) > 0.0 and shape_type[shape1] == GEO_BOX:
        local = wp.transform_point(wp.transform_inverse(X1), x)
        n = wp.transform_vector(X1, normal1)
        sd = wp.vec4(n[0], n[1], n[2], wp.dot(normal1, local) - box_support(shape_scale[shape1], normal1))
    else:
        sd = shape_sdf_world(shape_type[shape1], shape_scale[shape1], shape_source_ptr[shape1], X1, x, max_dist)
    g = ContactGeometry()
    g.normal = wp.vec3(sd[0], sd[1], sd[2])
    g.depth = thickness0 - sd[3]
    g.p0 = x - g.normal * thickness0
    g.p1 = x - g.normal * sd[3]
    return g
