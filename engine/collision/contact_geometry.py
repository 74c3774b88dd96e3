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

from ..kernel_args import ArgBundle
from ..types import GEO_BOX
from .sdf import ShapeGeometry, shape_sdf_at, shape_world_pose


@wp.struct
class RigidContacts:
    """The shape-shape contact list of :class:`inertia.Contacts` as kernels read it (integers and material
    points chosen by detection: not differentiated). Built by :func:`rigid_contacts`."""

    capacity: int  # rigid_contact_max
    count: wp.array(dtype=wp.int32)  # contacts requested (may exceed the capacity)
    shape0: wp.array(dtype=wp.int32)
    shape1: wp.array(dtype=wp.int32)
    point0: wp.array(dtype=wp.vec3)  # on shape 0, in its body's frame (world when static) [m]
    thickness0: wp.array(dtype=float)  # radius swept about point0 [m]
    normal1: wp.array(dtype=wp.vec3)  # fixed normal in shape 1's frame (box-box), zero otherwise


# rigid_contacts(contacts): the RigidContacts of contacts.rigid_contact_*
rigid_contacts = ArgBundle(RigidContacts, "rigid_contact_", capacity="rigid_contact_max")


def list_threads(device, capacity: int) -> int:
    """Threads of a kernel that loops over what a list of ``capacity`` slots holds, each taking every n-th stored
    entry (n = the threads: a ``stride`` argument; 0: nothing to launch). On a GPU one per slot (each thread at
    most one entry, as a launch over the capacity). On a CPU one: Warp runs a CPU launch's threads one after
    another, so one thread looping over the entries found does the same work in the same order (the same bits),
    without a call per empty slot. Those calls were most of a contact stage where the list is mostly empty: the
    32-link chain's 2,304 contact slots through 16 launches a step of the SemiImplicitSolver, its 288 pair slots
    in each of the narrow phase's three launches (~5 us a launch of a ~20 us ``collide``)."""
    if capacity <= 0:
        return 0
    return capacity if wp.get_device(device).is_cuda else 1


@wp.func
def stored_contact_count(contacts: RigidContacts):
    """How many contacts ``contacts`` holds: its count, capped at the capacity (the count goes on past it when
    the list overflows). The solvers' contact kernels loop over this many (:func:`list_threads`)."""
    return wp.min(contacts.count[0], contacts.capacity)


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
def point_contact_geometry(
    body_q: wp.array(dtype=wp.transform),
    shapes: ShapeGeometry,
    point0: wp.vec3,
    thickness0: float,
    body0: int,
    shape1: int,
    max_dist: float,
    normal1: wp.vec3,
):
    """Geometry of the contact between ``point0`` (on ``body0``, -1: world) with radius ``thickness0`` and ``shape1``.

    ``normal1``: the contact's fixed normal in shape 1's frame (``Contacts.rigid_contact_normal1``);
    zero measures along shape 1's signed distance instead. ``max_dist``: how far mesh queries reach [m].
    """
    x = point0
    if body0 >= 0:
        x = wp.transform_point(body_q[body0], point0)
    X1 = shape_world_pose(shapes, body_q, shape1)
    sd = wp.vec4()
    if wp.length_sq(normal1) > 0.0 and shapes.type[shape1] == GEO_BOX:
        local = wp.transform_point(wp.transform_inverse(X1), x)
        n = wp.transform_vector(X1, normal1)
        sd = wp.vec4(n[0], n[1], n[2], wp.dot(normal1, local) - box_support(shapes.scale[shape1], normal1))
    else:
        sd = shape_sdf_at(shapes, shape1, X1, x, max_dist)
    g = ContactGeometry()
    g.normal = wp.vec3(sd[0], sd[1], sd[2])
    g.depth = thickness0 - sd[3]
    g.p0 = x - g.normal * thickness0
    g.p1 = x - g.normal * sd[3]
    return g


@wp.func
def rigid_contact_geometry(body_q: wp.array(dtype=wp.transform), shapes: ShapeGeometry, contacts: RigidContacts,
                           c: int, margin: float):
    """Geometry of contact ``c`` at the poses ``body_q``; mesh queries reach thickness + ``margin`` + 1 m."""
    thickness = contacts.thickness0[c]
    return point_contact_geometry(body_q, shapes, contacts.point0[c], thickness, shapes.body[contacts.shape0[c]],
                                  contacts.shape1[c], thickness + margin + 1.0, contacts.normal1[c])
