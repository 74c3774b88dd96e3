"""Shape-shape narrow phase: contact points for each broad-phase pair, in the format of :class:`inertia.Contacts`.

A contact is a point fixed on shape 0 (stored in the frame of shape 0's body,
in world when shape 0 is static) with a radius ``thickness0`` swept about it,
tested against shape 1's signed distance (``inertia.collision.sdf``). A point
is kept when ``thickness0 - sdf1(point) > -model.rigid_contact_margin``: it
touches, penetrates, or is within the margin of shape 1. The solvers evaluate
each point again at the current poses (``rigid_contact_geometry``), so depth
and normal are always the point's distance to shape 1 along its SDF normal.

Which points each pair type gets ("A -> B": points of A tested against B's
SDF; "searched": the point of least SDF of the other shape along a segment or
an arc, found by golden-section search. The SDF of a convex shape is convex,
so along a segment the search finds the true closest point; a searched point
is kept only when it lies deeper than the points it lies between by
``1e-6 m + 1e-4 x`` the length searched, so flat contacts get no duplicate
interior points):

======================  =====================================================================
pair                    points
======================  =====================================================================
sphere - any            sphere -> other: its centre, thickness r (sphere-sphere: the lower
                        shape index is shape 0)
capsule - plane         capsule -> plane: both end points of its segment, thickness r
capsule - box           capsule -> other: both end points and the searched point of its
capsule - cylinder      segment, thickness r (a capsule across a box edge: one contact at
capsule - mesh          the crossing)
capsule - capsule       A -> B: both end points and the searched point of A's segment (the
                        closest points of the two segments); B -> A: both end points (two
                        parallel capsules get contacts at both ends)
box - plane             box -> plane: the 8 corners (resting flat: the 4 bottom corners)
box - box               separating axes, then the incident face clipped against the reference
                        face (up to 8 points) or one edge-edge point, with the contact normal
                        fixed in the reference box's frame (``inertia.collision.box_box``)
cylinder - plane        cylinder -> plane: per rim, 8 points 45 degrees apart and the searched
                        rim point (the lowest point of a tilted or lying cylinder)
cylinder - box          each -> the other. Cylinder: per rim 8 points and a searched rim
cylinder - cylinder     point, both face centres, and the point of its side that faces the
                        other shape where its axis comes closest (searched along the axis;
                        crossed cylinders). Box: corners and searched edge points
box - mesh              each -> the other: the box or cylinder as above; the mesh: its
cylinder - mesh         vertices, thickness 0
mesh - plane            mesh -> plane: the vertices
mesh - sphere / capsule sphere / capsule -> mesh, as above
mesh - mesh             not supported: no points (``collide`` warns once per model)
======================  =====================================================================

Limits: outside box-box pairs, the depth of a contact is its point's
penetration into the other shape along that shape's SDF normal (box-box
contacts carry their own normal, so two box edges crossing at 45 degrees with
overlap delta report delta along the edges' common normal). Contacts are not
merged. Mesh SDFs need closed meshes.

Each pair's points are appended with an atomic counter (on a GPU one thread per pair slot; on a CPU one
thread loops over the pairs found, ``contact_geometry.list_threads``); ``rigid_contact_count`` counts every point requested, also past the
capacity, so ``Contacts.check_overflow`` reports an undersized buffer, and the
list is then filled with the deepest points instead (``selection.py``).

Not differentiated: this stage only chooses which material points to test
(its kernel is not recorded on a ``wp.Tape``). Gradients come from the solvers,
which recompute each point's depth and normal from the current poses.
"""

from __future__ import annotations

import math

import warp as wp

from ..types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_PLANE, GEO_SPHERE
from .box_box import box_box_contacts
from .contact_geometry import list_threads
from .contact_sink import ContactSink, PairList, append_contact, make_sink, rigid_pairs, stored_pair_count
from .sdf import ShapeGeometry, shape_geometry, shape_sdf_world
from .selection import overflow_idle, overflow_selection

wp.set_module_options({"enable_backward": False})

SEARCH_ITERATIONS = wp.constant(32)  # golden-section steps: the bracket shrinks to 0.618^32 = 2e-7 of its length
GOLDEN = wp.constant(0.6180339887)
CURVE_SEGMENT = wp.constant(0)
CURVE_ARC = wp.constant(1)
QUARTER_PI = wp.constant(math.pi / 4.0)

# what each side of a pair generates
POINTS_FULL = wp.constant(0)  # every point of the table's row
POINTS_PLANE = wp.constant(1)  # against a plane: only the points that can be extreme along its normal
POINTS_ENDS = wp.constant(2)  # a capsule's end points only (capsule-capsule, second side)

corner_sdfs = wp.types.matrix(shape=(8, 4), dtype=float)  # a box's 8 corners: (normal, sdf1) rows


@wp.struct
class PairSide:
    """Points of shape ``s0`` tested against the SDF of shape ``s1`` (everything the tests need, gathered once)."""

    s0: int
    s1: int
    X_b0: wp.transform  # pose of shape 0's body (identity when static)
    X_s0: wp.transform  # shape 0 in its body's frame (world when static)
    type1: int
    scale1: wp.vec3
    mesh1: wp.uint64
    X1: wp.transform  # shape 1 in world
    max_dist: float  # mesh queries: far enough that any point inside the mesh finds its surface


@wp.func
def make_side(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), s0: int, s1: int, margin: float):
    side = PairSide()
    side.s0 = s0
    side.s1 = s1
    side.X_b0 = wp.transform_identity()
    b0 = shapes.body[s0]
    if b0 >= 0:
        side.X_b0 = body_q[b0]
    side.X_s0 = shapes.transform[s0]
    side.type1 = shapes.type[s1]
    side.scale1 = shapes.scale[s1]
    side.mesh1 = shapes.source_ptr[s1]
    X1 = shapes.transform[s1]
    b1 = shapes.body[s1]
    if b1 >= 0:
        X1 = body_q[b1] * X1
    side.X1 = X1
    side.max_dist = 2.0 * shapes.radius[s1] + shapes.radius[s0] + margin + 1.0e-3
    return side


@wp.func
def side_sdf(side: PairSide, p_local: wp.vec3):
    """Shape 1's (world normal, signed distance [m]) at a point given in shape 0's frame (as the solvers
    evaluate it: through shape 0's body pose)."""
    x = wp.transform_point(side.X_b0, wp.transform_point(side.X_s0, p_local))
    return shape_sdf_world(side.type1, side.scale1, side.mesh1, side.X1, x, side.max_dist)


@wp.func
def emit(side: PairSide, sink: ContactSink, p_local: wp.vec3, thickness: float):
    """Append the contact (point ``p_local`` of shape 0, ``thickness``) if it is within the margin.

    Returns shape 1's (world normal, signed distance) at the point.
    """
    p0 = wp.transform_point(side.X_s0, p_local)
    x = wp.transform_point(side.X_b0, p0)
    sd = shape_sdf_world(side.type1, side.scale1, side.mesh1, side.X1, x, side.max_dist)
    gap = sd[3] - thickness
    if gap < sink.margin:
        append_contact(sink, side.s0, side.s1, p0, thickness, wp.vec3(0.0), gap)  # the solvers use shape 1's SDF
    return sd


@wp.func
def curve_point(kind: int, a: wp.vec3, b: wp.vec3, t: float):
    """A point of shape 0's frame at parameter t in [0, 1]: on the segment a-b, or (arc) on the circle of
    radius a[0] at height a[1], at the angle between b[0] and b[1]."""
    p = a + (b - a) * t
    if kind == CURVE_ARC:
        theta = b[0] + (b[1] - b[0]) * t
        p = wp.vec3(a[0] * wp.cos(theta), a[0] * wp.sin(theta), a[1])
    return p


@wp.func
def curve_min(side: PairSide, kind: int, a: wp.vec3, b: wp.vec3):
    """(t, sdf1) at the least shape-1 SDF along the curve (golden-section search: exact for a unimodal SDF)."""
    lo = float(0.0)
    hi = float(1.0)
    c = hi - GOLDEN * (hi - lo)
    d = lo + GOLDEN * (hi - lo)
    fc = side_sdf(side, curve_point(kind, a, b, c))[3]
    fd = side_sdf(side, curve_point(kind, a, b, d))[3]
    for _ in range(SEARCH_ITERATIONS):
        if fc < fd:
            hi = d
            d = c
            fd = fc
            c = hi - GOLDEN * (hi - lo)
            fc = side_sdf(side, curve_point(kind, a, b, c))[3]
        else:
            lo = c
            c = d
            fc = fd
            d = lo + GOLDEN * (hi - lo)
            fd = side_sdf(side, curve_point(kind, a, b, d))[3]
    t = 0.5 * (lo + hi)
    return wp.vec2(t, side_sdf(side, curve_point(kind, a, b, t))[3])


@wp.func
def interior_tolerance(length: float):
    return 1.0e-6 + 1.0e-4 * length


@wp.func
def segment_interior_min(side: PairSide, a: wp.vec3, b: wp.vec3, fa: wp.vec4, fb: wp.vec4, reach: float):
    """(t, sdf1, 1) at the searched interior point of the segment a-b (shape 0's frame) when it lies deeper
    than both ends (``fa``, ``fb``: shape 1's normal and SDF there); (0, 0, 0) when there is none.

    Against a box or a cylinder (convex, and the normal ``shape_sdf`` returns is a subgradient of the
    SDF everywhere) the SDF along the segment lies above its tangents at the two ends: when a tangent
    rises into the segment the least SDF is at that end, and when the tangents meet above ``reach`` no
    point of the segment comes within reach. Both skip the search (most edges of boxes side by side).
    Other shapes are always searched (a capsule's normal on its axis is no subgradient; meshes are
    not convex).
    """
    if side.type1 == GEO_BOX or side.type1 == GEO_CYLINDER:
        ab = wp.transform_vector(side.X_b0, wp.transform_vector(side.X_s0, b - a))
        slope_a = wp.dot(wp.vec3(fa[0], fa[1], fa[2]), ab)
        slope_b = wp.dot(wp.vec3(fb[0], fb[1], fb[2]), ab)
        if slope_a >= 0.0 or slope_b <= 0.0:
            return wp.vec3(0.0)
        t = (fb[3] - slope_b - fa[3]) / (slope_a - slope_b)
        if fa[3] + slope_a * t >= reach:
            return wp.vec3(0.0)
    tf = curve_min(side, CURVE_SEGMENT, a, b)
    if tf[1] < wp.min(fa[3], fb[3]) - interior_tolerance(wp.length(b - a)):
        return wp.vec3(tf[0], tf[1], 1.0)
    return wp.vec3(0.0)


@wp.func
def sphere_points(side: PairSide, sink: ContactSink, radius: float):
    emit(side, sink, wp.vec3(0.0), radius)


@wp.func
def capsule_points(side: PairSide, sink: ContactSink, radius: float, half_height: float, mode: int):
    a = wp.vec3(0.0, 0.0, -half_height)
    b = wp.vec3(0.0, 0.0, half_height)
    fa = emit(side, sink, a, radius)
    if half_height <= 0.0:
        return
    fb = emit(side, sink, b, radius)
    if mode == POINTS_FULL:
        found = segment_interior_min(side, a, b, fa, fb, radius + sink.margin)
        if found[2] > 0.0:
            emit(side, sink, curve_point(CURVE_SEGMENT, a, b, found[0]), radius)


@wp.func
def box_corner(h: wp.vec3, i: int):
    x = -h[0]
    y = -h[1]
    z = -h[2]
    if (i & 1) != 0:
        x = h[0]
    if (i & 2) != 0:
        y = h[1]
    if (i & 4) != 0:
        z = h[2]
    return wp.vec3(x, y, z)


@wp.func
def box_points(side: PairSide, sink: ContactSink, h: wp.vec3, mode: int):
    f = corner_sdfs()
    for i in range(8):
        f[i] = emit(side, sink, box_corner(h, i), 0.0)
    if mode != POINTS_FULL:
        return
    for e in range(12):
        axis = e // 4
        m = e % 4
        # corner index bits (x, y, z); the edge along `axis` joins the corners that differ in that bit only
        low = m & ((1 << axis) - 1)
        high = (m >> axis) << (axis + 1)
        i0 = low | high
        i1 = i0 | (1 << axis)
        a = box_corner(h, i0)
        b = box_corner(h, i1)
        found = segment_interior_min(side, a, b, f[i0], f[i1], sink.margin)
        if found[2] > 0.0:
            emit(side, sink, curve_point(CURVE_SEGMENT, a, b, found[0]), 0.0)


@wp.func
def cylinder_points(side: PairSide, sink: ContactSink, radius: float, half_height: float, mode: int):
    for rim in range(2):
        z = -half_height
        if rim == 1:
            z = half_height
        best = float(1.0e30)
        best_theta = float(0.0)
        for k in range(8):
            theta = float(k) * QUARTER_PI
            d = emit(side, sink, wp.vec3(radius * wp.cos(theta), radius * wp.sin(theta), z), 0.0)[3]
            if d < best:
                best = d
                best_theta = theta
        # every rim point within 45 degrees lies within a chord 2 r sin(22.5 deg) < 0.77 r of a sample, and the
        # SDF changes by at most the distance moved: farther than that beyond the margin, nothing to search
        if best - 0.77 * radius < sink.margin:
            arc = wp.vec3(radius, z, 0.0)
            span = wp.vec3(best_theta - QUARTER_PI, best_theta + QUARTER_PI, 0.0)
            tf = curve_min(side, CURVE_ARC, arc, span)
            if tf[1] < best - interior_tolerance(radius):
                emit(side, sink, curve_point(CURVE_ARC, arc, span, tf[0]), 0.0)
    if mode != POINTS_FULL:
        return
    emit(side, sink, wp.vec3(0.0, 0.0, -half_height), 0.0)
    emit(side, sink, wp.vec3(0.0, 0.0, half_height), 0.0)
    # the side: where the axis comes closest to shape 1, the side point facing it (against shape 1's normal)
    a = wp.vec3(0.0, 0.0, -half_height)
    b = wp.vec3(0.0, 0.0, half_height)
    # the axis is `radius` inside the side: the side can only come within the margin where the axis comes
    # within radius + margin
    found = segment_interior_min(side, a, b, side_sdf(side, a), side_sdf(side, b), radius + sink.margin)
    if found[2] > 0.0:
        c = curve_point(CURVE_SEGMENT, a, b, found[0])
        sd = side_sdf(side, c)
        # shape 1's outward normal at the axis point, in shape 0's frame: the side faces against it
        to_local = wp.transform_inverse(side.X_b0 * side.X_s0)
        n = wp.transform_vector(to_local, wp.vec3(sd[0], sd[1], sd[2]))
        radial = wp.vec3(-n[0], -n[1], 0.0)
        if wp.length(radial) > 1.0e-6:
            emit(side, sink, c + wp.normalize(radial) * radius, 0.0)


@wp.func
def mesh_points(side: PairSide, sink: ContactSink, mesh: wp.uint64):
    points = wp.mesh_get(mesh).points  # already scaled into the shape's frame by the builder
    for i in range(points.shape[0]):
        emit(side, sink, points[i], 0.0)


@wp.func
def shape_points(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), sink: ContactSink, s0: int, s1: int,
                 mode: int):
    """All points of shape ``s0`` (per the table, ``mode``) against shape ``s1``."""
    side = make_side(shapes, body_q, s0, s1, sink.margin)
    t = shapes.type[s0]
    sc = shapes.scale[s0]
    if t == GEO_SPHERE:
        sphere_points(side, sink, sc[0])
    elif t == GEO_CAPSULE:
        capsule_points(side, sink, sc[0], sc[1], mode)
    elif t == GEO_BOX:
        box_points(side, sink, sc, mode)
    elif t == GEO_CYLINDER:
        cylinder_points(side, sink, sc[0], sc[1], mode)
    elif t == GEO_MESH:
        mesh_points(side, sink, shapes.source_ptr[s0])


@wp.func
def lead_points(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), sink: ContactSink, a: int, b: int,
                a_leads: bool, mode: int):
    """The points of the pair's leading shape (``a`` if ``a_leads``, else ``b``) against the other."""
    if a_leads:
        shape_points(shapes, body_q, sink, a, b, mode)
    else:
        shape_points(shapes, body_q, sink, b, a, mode)


@wp.func
def pair_contacts(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), sink: ContactSink, a: int, b: int):
    """The contact points of shape pair (a, b) into ``sink`` (the table of the module doc)."""
    ta = shapes.type[a]
    tb = shapes.type[b]
    # which shape's points the table takes: the sphere's (a's if both), the one against a plane (a's if both
    # are planes), the capsule's (a's if both, then b's end points too)
    if ta == GEO_SPHERE or tb == GEO_SPHERE:
        lead_points(shapes, body_q, sink, a, b, ta == GEO_SPHERE, POINTS_FULL)
    elif ta == GEO_PLANE or tb == GEO_PLANE:
        lead_points(shapes, body_q, sink, a, b, tb == GEO_PLANE, POINTS_PLANE)
    elif ta == GEO_CAPSULE or tb == GEO_CAPSULE:
        lead_points(shapes, body_q, sink, a, b, ta == GEO_CAPSULE, POINTS_FULL)
        if ta == tb:
            shape_points(shapes, body_q, sink, b, a, POINTS_ENDS)
    elif ta == GEO_BOX and tb == GEO_BOX:
        box_box_contacts(shapes, body_q, sink, a, b)
    elif ta != GEO_MESH or tb != GEO_MESH:
        # boxes, cylinders and meshes: each shape's points against the other
        shape_points(shapes, body_q, sink, a, b, POINTS_FULL)
        shape_points(shapes, body_q, sink, b, a, POINTS_FULL)


@wp.kernel
def narrow_phase_kernel(
    # Model:
    shapes: ShapeGeometry,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    pairs: PairList,
    # In:
    threads: int,
    # Data out:
    sink: ContactSink,
):
    """Thread t takes pairs t, t + threads, ... of the pairs found (``contact_geometry.list_threads``)."""
    t = wp.tid()
    if overflow_idle(sink.overflow, sink.contacts.count, sink.contacts.capacity):
        return
    for i in range(t, stored_pair_count(pairs), threads):
        pair_contacts(shapes, body_q, sink, pairs.pairs[i][0], pairs.pairs[i][1])


def detect_shape_contacts(model, state, contacts) -> None:
    """Stage: contact points for every pair in ``contacts.rigid_pair`` (poses from ``state.body_q``)."""
    if model.body_count == 0 or contacts.rigid_pair_max == 0:
        return
    from .broad_phase import shape_broad_phase

    if not shape_broad_phase(model).active:
        return
    inputs = [shape_geometry(model), state.body_q, rigid_pairs(contacts)]
    selection = overflow_selection(model)
    sink = make_sink(model, contacts, selection.passes[0])  # made once (a struct costs ~20 us): passes swap in
    threads = list_threads(model.device, contacts.rigid_pair_max)

    def emit(overflow):
        sink.overflow = overflow
        wp.launch(narrow_phase_kernel, dim=threads, device=model.device, record_tape=False,
                  inputs=[*inputs, threads], outputs=[sink])

    selection.run(emit, contacts.rigid_contact_count, contacts.rigid_contact_max,
                  most=shape_broad_phase(model).max_contacts)
