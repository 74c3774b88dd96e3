"""What the narrow-phase kernels share: the shapes' geometry and the contact buffers they append to."""

import warp as wp

from ..kinematics import body_pose
from .sdf import shape_world_transform


@wp.struct
class ShapeGeometry:
    body_q: wp.array(dtype=wp.transform)
    shape_body: wp.array(dtype=wp.int32)
    shape_transform: wp.array(dtype=wp.transform)
    shape_type: wp.array(dtype=wp.int32)
    shape_scale: wp.array(dtype=wp.vec3)
    shape_source_ptr: wp.array(dtype=wp.uint64)
    shape_radius: wp.array(dtype=float)


@wp.struct
class ContactSink:
    margin: float
    capacity: int
    count: wp.array(dtype=wp.int32)
    shape0: wp.array(dtype=wp.int32)
    shape1: wp.array(dtype=wp.int32)
    point0: wp.array(dtype=wp.vec3)
    thickness0: wp.array(dtype=float)
    normal1: wp.array(dtype=wp.vec3)


@wp.func
def append_contact(sink: ContactSink, s0: int, s1: int, point0: wp.vec3, thickness0: float, normal1: wp.vec3):
    """Append one contact; the count goes on past the capacity so an overflow shows."""
    slot = wp.atomic_add(sink.count, 0, 1)
    if slot < sink.capacity:
        sink.shape0[slot] = s0
        sink.shape1[slot] = s1
        sink.point0[slot] = point0
        sink.thickness0[slot] = thickness0
        sink.normal1[slot] = normal1


@wp.func
def body_pose_of(g: ShapeGeometry, s: int):
    """Pose of shape s's body in world (identity for a static shape)."""
    return body_pose(g.body_q, g.shape_body[s])


@wp.func
def shape_world_pose(g: ShapeGeometry, s: int):
    return shape_world_transform(g.shape_body, g.shape_transform, g.body_q, s)


def make_geometry(model, state) -> ShapeGeometry:
    g = ShapeGeometry()
    g.body_q = state.body_q
    g.shape_body = model.shape_body
    g.shape_transform = model.shape_transform
    g.shape_type = model.shape_type
    g.shape_scale = model.shape_scale
    g.shape_source_ptr = model.shape_source_ptr
    g.shape_radius = model.shape_radius
    return g


def make_sink(model, contacts) -> ContactSink:
    sink = ContactSink()
    sink.margin = model.rigid_contact_margin
    sink.capacity = contacts.rigid_contact_max
    sink.count = contacts.rigid_contact_count
    sink.shape0 = contacts.rigid_contact_shape0
    sink.shape1 = contacts.rigid_contact_shape1
    sink.point0 = contacts.rigid_contact_point0
    sink.thickness0 = contacts.rigid_contact_thickness0
    sink.normal1 = contacts.rigid_contact_normal1
    return sink
