"""Shape-shape collision detection (broad + narrow phase) and body-aware particle-shape detection.

Every contact is evaluated the way the solvers evaluate it (``rigid_contact_geometry`` at the
current poses) and compared with hand-computed depth, normal and position:
penetration d of a sphere of radius r at height h above a plane is r - h, the
overlap of two spheres r1 + r2 - |c1 - c2|, and so on. Filters, the broad phase,
overflow and capture are in test_broad_phase.py.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE, box_mesh

import inertia
from inertia.collision.contact_geometry import RigidContacts, rigid_contact_geometry, rigid_contacts
from inertia.collision.sdf import ShapeGeometry, shape_geometry

MARGIN = 0.01  # the builder's default rigid_contact_margin [m]
SQ2 = math.sqrt(2.0)


@wp.kernel
def eval_contacts_kernel(
    # Model:
    shapes: ShapeGeometry,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    contacts: RigidContacts,
    # Data out:
    depth: wp.array(dtype=float),
    normal: wp.array(dtype=wp.vec3),
    p0: wp.array(dtype=wp.vec3),
    p1: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    g = rigid_contact_geometry(body_q, shapes, contacts, i, 9.0)  # mesh queries reach 10 m past the thickness
    depth[i] = g.depth
    normal[i] = g.normal
    p0[i] = g.p0
    p1[i] = g.p1


def quat(axis, angle):
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    s = math.sin(angle / 2.0)
    return (a[0] * s, a[1] * s, a[2] * s, math.cos(angle / 2.0))


def rot(q):
    x, y, z, w = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


IDENTITY = (0.0, 0.0, 0.0, 1.0)


def detect(model, state=None, contacts=None):
    """Collide and return (contacts, dict of the kept contacts with their current geometry)."""
    state = state or model.state()
    contacts = contacts or model.contacts()
    model.collide(state, contacts)
    c = contacts.rigid_contacts()
    n = len(c["shape0"])
    out = {k: np.zeros((n, 3)) for k in ("normal", "p0", "p1")}
    out["depth"] = np.zeros(n)
    if n:
        arrays = {k: wp.zeros(n, dtype=wp.vec3, device=DEVICE) for k in ("normal", "p0", "p1")}
        depth = wp.zeros(n, dtype=float, device=DEVICE)
        wp.launch(eval_contacts_kernel, dim=n, device=DEVICE,
                  inputs=[shape_geometry(model), state.body_q, rigid_contacts(contacts)],
                  outputs=[depth, arrays["normal"], arrays["p0"], arrays["p1"]])
        out = {k: a.numpy().astype(np.float64) for k, a in arrays.items()}
        out["depth"] = depth.numpy().astype(np.float64)
    out.update(c)
    return contacts, out


def print_contacts(name, g):
    print(f"{name}: {len(g['depth'])} contacts, depths {np.round(g['depth'], 6)}")


# --------------------------------------------------------------------------- pair types vs known answers
def test_sphere_sphere_depth_normal_and_points():
    b = inertia.ModelBuilder()
    q = quat((1, 2, 3), 0.7)  # the bodies are rotated and the spheres offset in them: frames must be right
    r1, r2, d = 0.3, 0.2, 0.05
    c1 = np.array([0.1, -0.2, 1.0])
    c2 = c1 + (r1 + r2 - d) * np.array([0.6, 0.0, 0.8])
    off = np.array([0.05, 0.0, -0.02])
    b1 = b.add_body(xform=(tuple(c1 - rot(q) @ off), q))
    b.add_shape_sphere(b1, xform=(tuple(off), IDENTITY), radius=r1)
    b2 = b.add_body(xform=(tuple(c2), IDENTITY))
    b.add_shape_sphere(b2, radius=r2)
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("sphere-sphere", g)
    assert len(g["depth"]) == 1 and g["shape0"][0] == 0 and g["thickness0"][0] == pytest.approx(r1)
    n = (c1 - c2) / np.linalg.norm(c1 - c2)  # from shape 1 towards shape 0
    assert g["depth"][0] == pytest.approx(d, abs=1e-6)
    assert np.allclose(g["normal"][0], n, atol=1e-6)
    assert np.allclose(g["p0"][0], c1 - n * r1, atol=1e-6) and np.allclose(g["p1"][0], c2 + n * r2, atol=1e-6)


def test_sphere_against_box_capsule_cylinder_plane_and_mesh():
    r, d = 0.1, 0.02
    yaw = quat((0, 0, 1), 0.5)
    R = rot(yaw)
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    # box (static, yawed): the sphere above its top face at (0.1, 0.05) in the box frame
    b.add_shape_box(xform=((2.0, 0.0, 0.5), yaw), hx=0.5, hy=0.3, hz=0.2)
    # capsule along the world x axis (rotated from local z), sphere beside it along +y
    b.add_shape_capsule(xform=((4.0, 0.0, 0.5), quat((0, 1, 0), math.pi / 2)), radius=0.1, half_height=0.4)
    # cylinder standing, sphere against its side along +x
    b.add_shape_cylinder(xform=((6.0, 0.0, 0.5), IDENTITY), radius=0.2, half_height=0.3)
    # closed mesh box, sphere above its top face
    v, f = box_mesh(0.3, 0.3, 0.1)
    b.add_shape_mesh(xform=((8.0, 0.0, 0.5), IDENTITY), vertices=v, indices=f)
    centres = [
        np.array([2.0, 0.0, 0.5]) + R @ np.array([0.1, 0.05, 0.2 + r - d]),
        np.array([4.2, 0.1 + r - d, 0.5]),
        np.array([6.0 + 0.2 + r - d, 0.0, 0.6]),
        np.array([8.1, 0.0, 0.5 + 0.1 + r - d]),
        np.array([10.0, 0.0, r - d]),  # the plane
    ]
    normals = [R @ np.array([0, 0, 1.0]), np.array([0, 1.0, 0]), np.array([1.0, 0, 0]), np.array([0, 0, 1.0]),
               np.array([0, 0, 1.0])]
    shape1 = [1, 2, 3, 4, 0]
    for c in centres:
        b.add_shape_sphere(b.add_body(xform=(tuple(c), IDENTITY)), radius=r)
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("sphere-box/capsule/cylinder/mesh/plane", g)
    assert len(g["depth"]) == 5
    for k, (c, n, s1) in enumerate(zip(centres, normals, shape1)):
        i = int(np.flatnonzero(g["shape0"] == 5 + k)[0])
        assert g["shape1"][i] == s1
        assert g["depth"][i] == pytest.approx(d, abs=2e-6), k
        assert np.allclose(g["normal"][i], n, atol=1e-5), k
        assert np.allclose(g["p0"][i], c - n * r, atol=2e-6), k


def test_box_resting_flat_on_a_plane_gets_exactly_its_four_bottom_corners():
    d, h = 0.003, np.array([0.4, 0.25, 0.1])
    q = quat((0, 0, 1), 0.3)
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=((0.5, -0.2, h[2] - d), q))
    b.add_shape_box(body, hx=h[0], hy=h[1], hz=h[2])
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("box-plane", g)
    assert len(g["depth"]) == 4
    assert np.allclose(g["depth"], d, atol=1e-6)
    assert np.allclose(g["normal"], [0, 0, 1], atol=1e-6)
    corners = np.array([[sx * h[0], sy * h[1], -h[2]] for sx in (-1, 1) for sy in (-1, 1)])
    expected = corners @ rot(q).T + np.array([0.5, -0.2, h[2] - d])
    got = g["p0"][np.lexsort(g["p0"].T[:2])]
    assert np.allclose(got, expected[np.lexsort(expected.T[:2])], atol=1e-6)


def test_box_on_box_face_to_face_gets_points_spanning_the_contact_face():
    d = 0.004
    h = np.array([0.3, 0.2, 0.1])
    q = quat((0, 0, 1), 0.35)
    b = inertia.ModelBuilder()
    b.add_shape_box(xform=((0.0, 0.0, -0.5), IDENTITY), hx=1.0, hy=1.0, hz=0.5)  # static, top face at z = 0
    body = b.add_body(xform=((0.1, 0.2, h[2] - d), q))
    b.add_shape_box(body, hx=h[0], hy=h[1], hz=h[2])
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("box-box face to face", g)
    assert len(g["depth"]) >= 4
    assert np.allclose(g["depth"], d, atol=1e-6) and np.allclose(g["normal"], [0, 0, 1], atol=1e-6)
    # the points span the upper box's bottom face: in its frame, every corner of the face is among them
    local = (g["p0"] - np.array([0.1, 0.2, h[2] - d])) @ rot(q)
    for sx in (-1, 1):
        for sy in (-1, 1):
            assert np.min(np.linalg.norm(local - [sx * h[0], sy * h[1], -h[2]], axis=1)) < 1e-5


def test_boxes_crossing_edge_to_edge():
    """Cube A with a ridge along x (45 degrees about x), cube B above with a ridge along y (45 degrees about y).

    The ridges overlap vertically by delta. The separating-axis test finds the edge-edge axis (the ridges'
    common normal, vertical): one contact at the crossing of the ridges, depth delta along the vertical (the
    distance that separates the boxes). No corner is near: a corner test alone would find nothing.
    """
    h, delta = 0.5, 0.02
    zb = 2 * h * SQ2 - delta
    b = inertia.ModelBuilder()
    ba = b.add_body(xform=((0.0, 0.0, 0.0), quat((1, 0, 0), math.pi / 4)))
    b.add_shape_box(ba, hx=h, hy=h, hz=h)
    bb = b.add_body(xform=((0.0, 0.0, zb), quat((0, 1, 0), math.pi / 4)))
    b.add_shape_box(bb, hx=h, hy=h, hz=h)
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("box-box edge to edge", g)
    print(f"  deepest {g['depth'].max():.7f} m, analytic delta = {delta:.7f} m")
    assert len(g["depth"]) == 1
    assert g["depth"][0] == pytest.approx(delta, abs=2e-6)
    # at the crossing of the ridges, on one of the two ridges, with the vertical common normal
    assert np.allclose(g["p0"][0][:2], 0.0, atol=1e-5)
    assert min(abs(g["p0"][0][2] - h * SQ2), abs(g["p0"][0][2] - (zb - h * SQ2))) < 1e-5
    assert abs(g["normal"][0][2]) == pytest.approx(1.0, abs=1e-6)


def test_equal_boxes_flush_and_offset_stacks_get_the_overlap_corners():
    """Two equal cubes flush on top of each other, and offset diagonally by a quarter of their width.

    Flush: every corner of the upper cube lies on the lower cube's side planes, where a point-vs-SDF test
    finds a side face (depth 0, normal sideways). The clipped face manifold puts the 4 corners of the
    overlap at depth d with the vertical normal. Offset: the overlap is a square with 2 corners that are
    edge crossings; all 4 must be there.
    """
    h, d = 0.25, 0.002
    b = inertia.ModelBuilder()
    for x, off in ((0.0, 0.0), (3.0, 0.5 * h)):
        b.add_shape_box(b.add_body(xform=((x, 0.0, h), IDENTITY)), hx=h, hy=h, hz=h)
        b.add_shape_box(b.add_body(xform=((x + off, off, 3 * h - d), IDENTITY)), hx=h, hy=h, hz=h)
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("equal boxes, flush and offset", g)
    for pair, (x, off) in enumerate(((0.0, 0.0), (3.0, 0.5 * h))):
        sel = (g["shape0"] // 2) == pair
        assert sel.sum() == 4
        assert np.allclose(g["depth"][sel], d, atol=2e-6)
        assert np.allclose(np.abs(g["normal"][sel][:, 2]), 1.0, atol=1e-6)
        corners = {(round(float(px) - x, 4), round(float(py), 4)) for px, py in g["p0"][sel][:, :2]}
        lo, hi = -h + off, h
        assert corners == {(round(a, 4), round(c, 4)) for a in (lo, hi) for c in (lo, hi)}, corners


def test_capsule_on_plane_box_capsule():
    r, hh, d = 0.05, 0.3, 0.002
    along_x = quat((0, 1, 0), math.pi / 2)
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_shape_box(xform=((3.0, 0.0, 0.5), IDENTITY), hx=1.0, hy=1.0, hz=0.5)  # static, top at z = 1
    # a box with a ridge along y at z = 0.5 sqrt(2) (45 degrees about y), far away
    b.add_shape_box(xform=((6.0, 0.0, 0.0), quat((0, 1, 0), math.pi / 4)), hx=0.5, hy=0.5, hz=0.5)
    caps = []
    caps.append(b.add_shape_capsule(b.add_body(xform=((0.0, 0.0, r - d), along_x)), radius=r, half_height=hh))
    caps.append(b.add_shape_capsule(b.add_body(xform=((3.0, 0.2, 1.0 + r - d), along_x)), radius=r, half_height=hh))
    # across the ridge (capsule along x, ridge along y): one contact at the crossing, depth d, normal up
    caps.append(b.add_shape_capsule(b.add_body(xform=((6.0, 0.0, 0.5 * SQ2 + r - d), along_x)), radius=r,
                                    half_height=hh))
    # capsule-capsule: parallel (B on A) and crossed (C along y on A)
    a = b.add_shape_capsule(b.add_body(xform=((9.0, 0.0, 1.0), along_x)), radius=r, half_height=hh)
    bp = b.add_shape_capsule(b.add_body(xform=((9.0, 0.0, 1.0 + 2 * r - d), along_x)), radius=r, half_height=hh)
    a2 = b.add_shape_capsule(b.add_body(xform=((12.0, 0.0, 1.0), along_x)), radius=r, half_height=hh)
    c2 = b.add_shape_capsule(b.add_body(xform=((12.1, 0.05, 1.0 + 2 * r - d), quat((1, 0, 0), math.pi / 2))),
                             radius=r, half_height=hh)
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("capsules", g)
    assert np.allclose(g["depth"], d, atol=2e-6)
    assert np.allclose(np.abs(g["normal"][:, 2]), 1.0, atol=1e-5)

    def on(shape):
        return (g["shape0"] == shape) | (g["shape1"] == shape)

    for s, cx in ((caps[0], 0.0), (caps[1], 3.0)):  # lying on the plane, on the box: 2 contacts at its ends
        sel = on(s)
        assert np.count_nonzero(sel) == 2
        assert np.allclose(np.sort(g["p0"][sel][:, 0]), [cx - hh, cx + hh], atol=1e-6)
    sel = on(caps[2])
    assert np.count_nonzero(sel) == 1 and np.allclose(g["p0"][sel][0], [6.0, 0.0, 0.5 * SQ2 - d], atol=1e-5)
    sel = on(a) & on(bp)  # parallel capsules: contacts at both ends
    xs = g["p0"][sel][:, 0]
    assert np.count_nonzero(sel) >= 2 and xs.min() == pytest.approx(9.0 - hh, abs=1e-6)
    assert xs.max() == pytest.approx(9.0 + hh, abs=1e-6)
    sel = on(a2) & on(c2)  # crossed: one contact at the crossing (12.1, 0) of the two axes
    assert np.count_nonzero(sel) == 1
    assert np.allclose(g["p0"][sel][0][:2], [12.1, 0.0], atol=1e-5)


def test_mesh_on_plane_and_cylinder_on_plane():
    d = 0.002
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    v, f = box_mesh(0.2, 0.1, 0.05)
    mesh_body = b.add_body(xform=((0.0, 0.0, 0.05 - d), quat((0, 0, 1), 0.2)))
    b.add_shape_mesh(mesh_body, vertices=v, indices=f)
    r, hh = 0.1, 0.2
    standing = b.add_shape_cylinder(b.add_body(xform=((2.0, 0.0, hh - d), IDENTITY)), radius=r, half_height=hh)
    # lying along x and turned 10 degrees about its axis: no rim sample sits at the bottom, the search must find it
    q = wp.quat(*quat((1, 0, 0), 0.1745)) * wp.quat(*quat((0, 1, 0), math.pi / 2))
    lying = b.add_shape_cylinder(b.add_body(xform=((4.0, 0.0, r - d), tuple(q))), radius=r, half_height=hh)
    model = b.finalize(device=DEVICE)
    _, g = detect(model)
    print_contacts("mesh / cylinders on a plane", g)
    sel = g["shape0"] == 1
    assert np.count_nonzero(sel) == 4 and np.allclose(g["depth"][sel], d, atol=1e-6)
    assert np.allclose(g["p0"][sel][:, 2], -d, atol=1e-6)
    sel = g["shape0"] == standing  # the 8 points of the bottom rim
    assert np.count_nonzero(sel) == 8 and np.allclose(g["depth"][sel], d, atol=1e-6)
    assert np.allclose(np.linalg.norm(g["p0"][sel][:, :2] - [2.0, 0.0], axis=1), r, atol=1e-6)
    sel = g["shape0"] == lying
    ends = np.sign(g["p0"][sel][:, 0] - 4.0)
    for e in (-1, 1):  # the deepest point of each rim: its lowest point, at depth d
        k = ends == e
        assert g["depth"][sel][k].max() == pytest.approx(d, abs=2e-6)
        lowest = g["p0"][sel][k][np.argmax(g["depth"][sel][k])]
        assert np.allclose(lowest, [4.0 + e * hh, 0.0, -d], atol=2e-4)
    assert g["depth"][sel].max() < d + 2e-6


def box_box_mtd(hA, RA, hB, RB, c):
    """(distance, axis index) of the least overlap of two boxes over the 15 separating axes (float64):
    the distance that separates them. Axes 0-5 are face normals, 6-14 edge cross products."""
    axes = [RA[:, i] for i in range(3)] + [RB[:, i] for i in range(3)]
    axes += [np.cross(RA[:, i], RB[:, j]) for i in range(3) for j in range(3)]

    def support(h, r, n):
        return sum(h[m] * abs(r[:, m] @ n) for m in range(3))

    best = (np.inf, -1)
    for k, a in enumerate(axes):
        if np.linalg.norm(a) < 1e-6:
            continue
        a = a / np.linalg.norm(a)
        best = min(best, (support(hA, RA, a) + support(hB, RB, a) - abs(c @ a), k))
    return best


def test_random_box_pairs_deepest_contact_matches_the_separating_axis_depth():
    """Boxes of random size and orientation, 1 cm deep along their least-overlap axis.

    Reference: the separating-axis distance in float64 (the least overlap over 15 axes). The deepest
    contact must equal it when that axis wins; a face axis may win over an edge axis within the
    preference band (5 % + 10 um), and then its depth lies in that band above the reference.
    """
    rng = np.random.default_rng(1)
    trials = 12
    b = inertia.ModelBuilder()
    refs = []
    for k in range(trials):
        hA, hB = rng.uniform(0.1, 0.5, 3), rng.uniform(0.1, 0.5, 3)
        qA, qB = quat(rng.normal(size=3), rng.uniform(0, 3)), quat(rng.normal(size=3), rng.uniform(0, 3))
        RA, RB = rot(qA), rot(qB)
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        lo, hi = 0.0, np.linalg.norm(hA) + np.linalg.norm(hB)
        for _ in range(50):  # bisect the distance of the centres to a 1 cm overlap
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if box_box_mtd(hA, RA, hB, RB, mid * u)[0] > 0.01 else (lo, mid)
        c = lo * u
        refs.append(box_box_mtd(hA, RA, hB, RB, c))
        base = np.array([2.5 * (k % 4), 2.5 * (k // 4), 0.0])  # near the origin: float32 keeps 1e-6 m
        b.add_shape_box(b.add_body(xform=(tuple(base), qA)), hx=hA[0], hy=hA[1], hz=hA[2])
        b.add_shape_box(b.add_body(xform=(tuple(base + c), qB)), hx=hB[0], hy=hB[1], hz=hB[2])
    _, g = detect(b.finalize(device=DEVICE))
    got = np.array([g["depth"][g["shape0"] // 2 == k].max() for k in range(trials)])
    ref = np.array([r[0] for r in refs])
    print("random box pairs: deepest contact - separating-axis depth [m]:", np.round(got - ref, 8),
          "axes", [r[1] for r in refs])
    assert (got >= ref - 3e-6).all()  # float32 rounding of world coordinates up to 7.5 m
    assert (got <= 1.05 * ref + 1e-5 + 3e-6).all()
    assert np.sum(np.abs(got - ref) < 3e-6) >= trials // 2  # mostly the reference axis itself


def test_cylinders_and_meshes_against_boxes_and_each_other():
    r, hh, d = 0.1, 0.25, 0.003
    along_x = quat((0, 1, 0), math.pi / 2)
    along_y = quat((1, 0, 0), math.pi / 2)
    b = inertia.ModelBuilder()
    v, f = box_mesh(1.0, 1.0, 0.5)
    table = b.add_shape_box(xform=((0.0, 0.0, 0.5), IDENTITY), hx=1.0, hy=1.0, hz=0.5)  # static, top at z = 1
    # the same as a mesh (its mask leaves out group 2: the mesh on the box, so no mesh-mesh pair to warn about)
    mesh_table = b.add_shape_mesh(xform=((5.0, 0.0, 0.5), IDENTITY), vertices=v, indices=f, collision_mask=~2)
    standing = b.add_shape_cylinder(b.add_body(xform=((-0.5, 0.0, 1.0 + hh - d), IDENTITY)), radius=r,
                                    half_height=hh)
    lying = b.add_shape_cylinder(b.add_body(xform=((0.4, 0.5, 1.0 + r - d), along_x)), radius=r, half_height=hh)
    box_on_mesh = b.add_shape_box(b.add_body(xform=((5.0, 0.0, 1.1 - d), IDENTITY)), hx=0.2, hy=0.3, hz=0.1)
    vm, fm = box_mesh(0.2, 0.3, 0.1)
    mesh_on_box = b.add_shape_mesh(b.add_body(xform=((0.4, -0.5, 1.1 - d), IDENTITY)), vertices=vm, indices=fm,
                                   collision_group=2)
    # crossed cylinders lying on each other, far from the rest: side-on contact in the middle of both
    low = b.add_shape_cylinder(b.add_body(xform=((10.0, 0.0, 1.0), along_x)), radius=r, half_height=hh)
    high = b.add_shape_cylinder(b.add_body(xform=((10.0, 0.0, 1.0 + 2 * r - d), along_y)), radius=r,
                                half_height=hh)
    _, g = detect(b.finalize(device=DEVICE))
    print_contacts("cylinders / meshes / boxes", g)

    def between(s0, s1):
        return ((g["shape0"] == s0) & (g["shape1"] == s1)) | ((g["shape0"] == s1) & (g["shape1"] == s0))

    # standing on the box: the 8 points of the bottom rim and the bottom face's centre, all at depth d
    sel = between(standing, table)
    assert np.count_nonzero(sel) == 9 and np.allclose(g["depth"][sel], d, atol=2e-6)
    assert np.allclose(g["normal"][sel], [0, 0, 1], atol=1e-5)
    # lying on the box: the lowest point of each rim at depth d
    sel = between(lying, table)
    for e in (-1, 1):
        k = sel & (np.sign(g["p0"][:, 0] - 0.4) == e)
        assert g["depth"][k].max() == pytest.approx(d, abs=2e-6)
        assert np.allclose(g["p0"][k][np.argmax(g["depth"][k])], [0.4 + e * hh, 0.5, 1.0 - d], atol=1e-4)
    assert g["depth"][sel].max() < d + 2e-6
    # a box on a mesh and a mesh on a box: the 4 bottom corners / vertices
    for s, centre in ((box_on_mesh, (5.0, 0.0)), (mesh_on_box, (0.4, -0.5))):
        sel = between(s, mesh_table if s == box_on_mesh else table)
        assert np.count_nonzero(sel) == 4 and np.allclose(g["depth"][sel], d, atol=2e-6), s
        assert np.allclose(np.abs(g["p0"][sel][:, :2] - centre), [0.2, 0.3], atol=1e-5), s
    # crossed cylinders: each side's point facing the other, at depth d, normals vertical
    sel = between(low, high)
    assert np.count_nonzero(sel) == 2 and np.allclose(g["depth"][sel], d, atol=2e-6)
    assert np.allclose(np.abs(g["normal"][sel][:, 2]), 1.0, atol=1e-5)
    assert np.allclose(g["p0"][sel][:, :2], [10.0, 0.0], atol=1e-4)


def test_mesh_mesh_pairs_warn_once():
    b = inertia.ModelBuilder()
    v, f = box_mesh(0.1, 0.1, 0.1)
    b.add_shape_mesh(vertices=v, indices=f)
    b.add_shape_mesh(b.add_body(xform=((0.0, 0.0, 0.19), IDENTITY)), vertices=v, indices=f)
    model = b.finalize(device=DEVICE)
    state, c = model.state(), model.contacts()
    with pytest.warns(RuntimeWarning, match="mesh-mesh contact is not supported: the mesh shape pairs "
                                            r"\('shape_0', 'shape_1'\) get no contact points") as record:
        model.collide(state, c)
    assert record[0].filename == __file__  # points at the caller's collide()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.collide(state, c)
    assert len(c.rigid_pairs()) == 1 and len(c.rigid_contacts()["shape0"]) == 0


def test_mesh_mesh_pairs_warn_when_a_solver_is_built_first():
    """A solver's dry run (``inertia.compile_ahead``) meets the pair first; the warning must still be shown,
    once, naming the line that built the solver."""
    b = inertia.ModelBuilder()
    v, f = box_mesh(0.1, 0.1, 0.1)
    b.add_shape_mesh(vertices=v, indices=f)
    b.add_shape_mesh(b.add_body(xform=((0.0, 0.0, 0.19), IDENTITY)), vertices=v, indices=f)
    model = b.finalize(device=DEVICE)
    with pytest.warns(RuntimeWarning, match="mesh-mesh contact is not supported") as record:
        inertia.SemiImplicitSolver(model)
    assert [w.filename for w in record if "mesh-mesh" in str(w.message)] == [__file__]
    state, c = model.state(), model.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.collide(state, c)


def test_separated_shapes_beyond_the_margin_get_no_contact():
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    r = 0.1
    gaps = [0.05, 0.015, 0.005]  # beyond 2 margins (no pair), between 1 and 2 (pair, no point), inside the margin
    for k, gap in enumerate(gaps):
        b.add_shape_sphere(b.add_body(xform=((3.0 * k, 0.0, 1.0), IDENTITY)), radius=r)
        b.add_shape_sphere(b.add_body(xform=((3.0 * k + 2 * r + gap, 0.0, 1.0), IDENTITY)), radius=r)
    box = b.add_body(xform=((20.0, 0.0, 0.5 + 0.05), IDENTITY))
    b.add_shape_box(box, hx=0.5, hy=0.5, hz=0.5)  # 5 cm above the ground: no pair
    c, g = detect(b.finalize(device=DEVICE))
    pairs = {(int(i), int(j)) for i, j in c.rigid_pairs()}
    print("pairs", sorted(pairs), "depths", g["depth"])
    assert pairs == {(3, 4), (5, 6)}
    assert len(g["depth"]) == 1 and g["depth"][0] == pytest.approx(-0.005, abs=1e-6)
