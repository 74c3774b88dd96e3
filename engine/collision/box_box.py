"""Box-box contact manifolds: separating axes, then the incident face clipped against the reference face.

Points tested against a box's signed distance fail two ways for boxes on
boxes: where two equal boxes sit flush, corners lie exactly on the other box's
side planes and its SDF picks a side face (normal sideways, depth 0: the
boxes sink through each other), and where faces overlap only partly, the
corners of the overlap are edge crossings that no corner test finds (towers
rock on partial support). So box pairs get the classic manifold instead:

1. Separating-axis test over the 15 axes (3 face normals of each box, 9 edge
   cross products), all in box B's frame; no contact when some axis separates
   the boxes by more than the margin. Face axes are preferred unless an edge
   axis overlaps clearly less (``EDGE_RELATIVE``, ``EDGE_ABSOLUTE``), so stacks stay face to face.
2. Face axis: the box that owns it is the reference, the other the incident
   box. The incident face (the one most anti-parallel to the reference normal)
   is clipped against the reference face's four side planes (Sutherland-Hodgman,
   at most 8 points); every clipped point within the margin of the reference
   face becomes a contact.
3. Edge axis: the two supporting edges' closest points; one contact. A face
   axis that won within the preference band but whose clipped points fall
   short of its overlap (the overlap lies beyond the reference face's sides,
   near an edge) gets the best edge axis's contact as well.

A contact's point is fixed on the incident box (shape 0, in its body frame)
and its normal is fixed in the reference box's frame (``rigid_contact_normal1``,
shape 1's frame): the solvers measure depth along that normal to the reference
box's supporting plane, ``support(h, n) - n . p``, at the current poses, so
depth stays well defined (and differentiable) however the points sit.

Not differentiated (selection only), like the rest of detection.
"""

import warp as wp

from ..kinematics import body_pose
from .contact_geometry import box_support
from .contact_sink import ContactSink, append_contact
from .sdf import ShapeGeometry, shape_world_pose

# an edge axis wins only when its overlap is below the best face axis's by 5 % of that overlap plus 10 um
EDGE_RELATIVE = wp.constant(0.05)
EDGE_ABSOLUTE = wp.constant(1.0e-5)
# a face manifold whose deepest point falls short of the face's overlap by more than 10 % gets the edge contact too
FACE_SHORTFALL = wp.constant(0.1)

poly8 = wp.types.matrix(shape=(8, 3), dtype=float)


@wp.struct
class Polygon:
    v: poly8
    n: int


@wp.func
def rotated_support(h: wp.vec3, r: wp.mat33, n: wp.vec3):
    """Largest n . x over a box of half extents h whose axes are the columns of r (about its centre)."""
    return (h[0] * wp.abs(wp.dot(wp.vec3(r[0, 0], r[1, 0], r[2, 0]), n))
            + h[1] * wp.abs(wp.dot(wp.vec3(r[0, 1], r[1, 1], r[2, 1]), n))
            + h[2] * wp.abs(wp.dot(wp.vec3(r[0, 2], r[1, 2], r[2, 2]), n)))


@wp.func
def column(r: wp.mat33, j: int):
    return wp.vec3(r[0, j], r[1, j], r[2, j])


@wp.func
def sign_or_one(x: float):
    if x < 0.0:
        return -1.0
    return 1.0


@wp.func
def clip_polygon(p: Polygon, axis: int, side: float, limit: float):
    """The part of polygon p where side * x[axis] <= limit."""
    out = Polygon()
    out.n = 0
    for i in range(p.n):
        cur = p.v[i]
        nxt = p.v[(i + 1) % p.n]
        dc = side * cur[axis] - limit
        dn = side * nxt[axis] - limit
        if dc <= 0.0 and out.n < 8:
            out.v[out.n] = cur
            out.n += 1
        if (dc <= 0.0) != (dn <= 0.0) and out.n < 8:
            out.v[out.n] = cur + (nxt - cur) * (dc / (dc - dn))
            out.n += 1
    return out


@wp.func
def face_contacts(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), sink: ContactSink, s_ref: int,
                  s_inc: int, k: int):
    """Contacts of the incident box's face clipped against face k (+-) of the reference box.

    Returns the deepest clipped point's penetration [m] (-1e30 when none is left)."""
    X_ref = shape_world_pose(shapes, body_q, s_ref)
    X_inc = shape_world_pose(shapes, body_q, s_inc)
    h_ref = shapes.scale[s_ref]
    h_inc = shapes.scale[s_inc]
    X = wp.transform_inverse(X_ref) * X_inc  # incident box in the reference frame
    t = wp.transform_get_translation(X)
    r = wp.quat_to_matrix(wp.transform_get_rotation(X))
    sgn = sign_or_one(t[k])
    n = wp.vec3(0.0)
    n[k] = sgn
    # the incident face: most anti-parallel to n
    j = int(0)
    best = float(-1.0)
    for m in range(3):
        d = wp.abs(wp.dot(column(r, m), n))
        if d > best:
            best = d
            j = m
    toward = -sign_or_one(wp.dot(column(r, j), n))
    centre = t + column(r, j) * (toward * h_inc[j])
    u = (j + 1) % 3
    v = (j + 2) % 3
    U = column(r, u) * h_inc[u]
    V = column(r, v) * h_inc[v]
    p = Polygon()
    p.n = 4
    p.v[0] = centre + U + V
    p.v[1] = centre - U + V
    p.v[2] = centre - U - V
    p.v[3] = centre + U - V
    a = (k + 1) % 3
    b = (k + 2) % 3
    p = clip_polygon(p, a, 1.0, h_ref[a])
    p = clip_polygon(p, a, -1.0, h_ref[a])
    p = clip_polygon(p, b, 1.0, h_ref[b])
    p = clip_polygon(p, b, -1.0, h_ref[b])
    to_body = wp.transform_inverse(body_pose(body_q, shapes.body[s_inc])) * X_ref
    deepest = float(-1.0e30)
    for i in range(p.n):
        x = p.v[i]
        gap = sgn * x[k] - h_ref[k]
        if gap < sink.margin:
            append_contact(sink, s_inc, s_ref, wp.transform_point(to_body, x), 0.0, n, gap)
            deepest = wp.max(deepest, -gap)
    return deepest


@wp.func
def closest_on_segments(p1: wp.vec3, d1: wp.vec3, p2: wp.vec3, d2: wp.vec3):
    """Parameters (s, t) in [-1, 1] of the closest points of p1 + s d1 and p2 + t d2."""
    r = p1 - p2
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    b = wp.dot(d1, d2)
    c = wp.dot(d1, r)
    f = wp.dot(d2, r)
    denom = a * e - b * b
    s = float(0.0)
    if denom > 1.0e-12 * a * e:
        s = wp.clamp((b * f - c * e) / denom, -1.0, 1.0)
    t = wp.clamp((b * s + f) / e, -1.0, 1.0)
    s = wp.clamp((b * t - c) / a, -1.0, 1.0)
    return wp.vec2(s, t)


@wp.func
def edge_contact(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), sink: ContactSink, sa: int, sb: int,
                 i: int, j: int, u: wp.vec3):
    """The contact between box B's edge along its axis i and box A's edge along A's axis j (u: B's frame, B -> A)."""
    X_b = shape_world_pose(shapes, body_q, sb)
    X = wp.transform_inverse(X_b) * shape_world_pose(shapes, body_q, sa)
    t = wp.transform_get_translation(X)
    r = wp.quat_to_matrix(wp.transform_get_rotation(X))
    hb = shapes.scale[sb]
    ha = shapes.scale[sa]
    pb = wp.vec3(0.0)
    for m in range(3):
        if m != i:
            pb[m] = sign_or_one(u[m]) * hb[m]  # B's edge furthest along +u
    db = wp.vec3(0.0)
    db[i] = hb[i]
    pa = t
    for m in range(3):
        if m != j:
            pa = pa - column(r, m) * (sign_or_one(wp.dot(column(r, m), u)) * ha[m])  # A's edge furthest along -u
    da = column(r, j) * ha[j]
    st = closest_on_segments(pa, da, pb, db)
    x = pa + da * st[0]
    gap = wp.dot(u, x) - box_support(hb, u)
    if gap < sink.margin:
        to_body = wp.transform_inverse(body_pose(body_q, shapes.body[sa])) * X_b
        append_contact(sink, sa, sb, wp.transform_point(to_body, x), 0.0, u, gap)


@wp.func
def box_box_contacts(shapes: ShapeGeometry, body_q: wp.array(dtype=wp.transform), sink: ContactSink, sa: int, sb: int):
    """Separating axes in B's frame, then face or edge contacts (module docstring)."""
    X = wp.transform_inverse(shape_world_pose(shapes, body_q, sb)) * shape_world_pose(shapes, body_q, sa)
    t = wp.transform_get_translation(X)
    r = wp.quat_to_matrix(wp.transform_get_rotation(X))
    ha = shapes.scale[sa]
    hb = shapes.scale[sb]
    best_face = float(1.0e30)
    face = int(-1)
    for k in range(3):  # B's faces
        e = wp.vec3(0.0)
        e[k] = 1.0
        overlap = rotated_support(ha, r, e) + hb[k] - wp.abs(t[k])
        if overlap < best_face:
            best_face = overlap
            face = k
    for k in range(3):  # A's faces
        c = column(r, k)
        overlap = box_support(hb, c) + ha[k] - wp.abs(wp.dot(t, c))
        if overlap < best_face:
            best_face = overlap
            face = 3 + k
    best_edge = float(1.0e30)
    edge_i = int(0)
    edge_j = int(0)
    edge_u = wp.vec3(0.0)
    for i in range(3):
        e = wp.vec3(0.0)
        e[i] = 1.0
        for j in range(3):
            u = wp.cross(e, column(r, j))
            length = wp.length(u)
            if length > 1.0e-6:
                u = u / length
                if wp.dot(t, u) < 0.0:
                    u = -u
                overlap = box_support(hb, u) + rotated_support(ha, r, u) - wp.dot(t, u)
                if overlap < best_edge:
                    best_edge = overlap
                    edge_i = i
                    edge_j = j
                    edge_u = u
    if wp.min(best_face, best_edge) < -sink.margin:
        return  # separated by more than the margin
    if best_edge < best_face - (EDGE_RELATIVE * wp.abs(best_face) + EDGE_ABSOLUTE):
        edge_contact(shapes, body_q, sink, sa, sb, edge_i, edge_j, edge_u)
        return
    deepest = float(0.0)
    if face < 3:
        deepest = face_contacts(shapes, body_q, sink, sb, sa, face)
    else:
        deepest = face_contacts(shapes, body_q, sink, sa, sb, face - 3)
    # the face won within the preference band, but its overlap came from a part of the incident box that
    # lies beyond the reference face's sides: the boxes overlap near an edge; add that edge contact too
    if best_edge < 1.0e29 and deepest < best_face - (FACE_SHORTFALL * wp.abs(best_face) + EDGE_ABSOLUTE):
        edge_contact(shapes, body_q, sink, sa, sb, edge_i, edge_j, edge_u)
