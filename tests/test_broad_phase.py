"""Shape-shape detection beyond single pairs: filters, the broad phase vs brute force, overflow, capture,
particles against shapes on bodies, bad states.

The broad phase is compared pair for pair with a brute-force NumPy count of overlapping AABBs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE

import inertia
from inertia.contacts import ContactOverflowError
from inertia.types import GEO_BOX, GEO_PLANE
from test_rigid_collision import IDENTITY, quat, rot  # noqa: F401  (shared helpers)


# --------------------------------------------------------------------------- filters
def overlapping_spheres(builder, body_a, body_b, props_a=None, props_b=None):
    """Two spheres of radius 0.1 m, 0.15 m apart, on bodies a and b (shape indices returned)."""
    sa = builder.add_shape_sphere(body_a, xform=((0.0, 0.0, 0.0), IDENTITY), radius=0.1, **(props_a or {}))
    sb = builder.add_shape_sphere(body_b, xform=((0.15, 0.0, 0.0), IDENTITY), radius=0.1, **(props_b or {}))
    return sa, sb


def pair_set(model):
    c = model.contacts()
    model.collide(model.state(), c)
    return {tuple(p) for p in c.rigid_pairs()}


def test_filters_groups_bodies_joints_worlds_static_kinematic():
    # collision bits: B's mask misses A's group
    b = inertia.ModelBuilder()
    overlapping_spheres(b, b.add_body(), b.add_body(), {"collision_group": 2}, {"collision_mask": 1})
    assert pair_set(b.finalize(device=DEVICE)) == set()
    b = inertia.ModelBuilder()
    overlapping_spheres(b, b.add_body(), b.add_body(), {"collision_group": 3}, {"collision_mask": 1})
    assert pair_set(b.finalize(device=DEVICE)) == {(0, 1)}
    # collide_shapes=False
    b = inertia.ModelBuilder()
    overlapping_spheres(b, b.add_body(), b.add_body(), {"collide_shapes": False})
    assert pair_set(b.finalize(device=DEVICE)) == set()
    # same body
    b = inertia.ModelBuilder()
    body = b.add_body()
    overlapping_spheres(b, body, body)
    assert pair_set(b.finalize(device=DEVICE)) == set()
    # a joint's parent and child, unless collide_parent=True
    for collide_parent, expected in ((False, set()), (True, {(0, 1)})):
        b = inertia.ModelBuilder()
        p, ch = b.add_body(), b.add_body()
        overlapping_spheres(b, p, ch)
        b.add_joint_revolute(p, ch, collide_parent=collide_parent)
        assert pair_set(b.finalize(device=DEVICE)) == expected, collide_parent
    # worlds: different worlds never meet; the shared static world -1 meets both
    b = inertia.ModelBuilder()
    b.current_world = 0
    w0 = b.add_body()
    b.current_world = 1
    w1 = b.add_body()
    b.num_worlds = 2
    overlapping_spheres(b, w0, w1)
    static = b.add_shape_sphere(-1, xform=((0.07, 0.05, 0.0), IDENTITY), radius=0.1)
    assert pair_set(b.finalize(device=DEVICE)) == {(0, static), (1, static)}
    # static-static, kinematic-static: nothing; kinematic-dynamic: a pair
    b = inertia.ModelBuilder()
    overlapping_spheres(b, -1, -1)
    assert pair_set(b.finalize(device=DEVICE)) == set()
    b = inertia.ModelBuilder()
    kin = b.add_body(kinematic=True)
    overlapping_spheres(b, kin, -1)
    b.add_ground_plane()
    assert pair_set(b.finalize(device=DEVICE)) == set()
    b = inertia.ModelBuilder()
    kin = b.add_body(kinematic=True)
    overlapping_spheres(b, kin, b.add_body())
    assert pair_set(b.finalize(device=DEVICE)) == {(0, 1)}


# --------------------------------------------------------------------------- broad phase vs brute force
def brute_force_pairs(model, body_q):
    """Pairs of overlapping AABBs (grown by the margin) that pass the filters, in float64 NumPy."""
    types = model.shape_type.numpy()
    scale = model.shape_scale.numpy().astype(np.float64)
    xf = model.shape_transform.numpy().astype(np.float64)
    sbody = model.shape_body.numpy()
    world = model.shape_world.numpy()
    inv_mass = model.body_inv_mass.numpy()
    n = len(types)
    lo, hi = np.zeros((n, 3)), np.zeros((n, 3))
    for s in range(n):
        if types[s] == GEO_PLANE:
            continue
        assert types[s] == GEO_BOX
        R, p = rot(xf[s, 3:]), xf[s, :3]
        if sbody[s] >= 0:
            Rb = rot(body_q[sbody[s], 3:])
            R, p = Rb @ R, Rb @ p + body_q[sbody[s], :3]
        h = np.abs(R) @ scale[s] + model.rigid_contact_margin
        lo[s], hi[s] = p - h, p + h
    dyn = np.array([b >= 0 and inv_mass[b] > 0 for b in sbody])
    out = set()
    finite = [s for s in range(n) if types[s] != GEO_PLANE]
    for s in finite:
        for p in np.flatnonzero(types == GEO_PLANE):
            z = xf[p, 2]  # ground planes through (0, 0, z), normal +z
            if dyn[s] and lo[s, 2] <= z:
                out.add((min(s, p), max(s, p)))
    fl = np.array(finite)
    for i, s in enumerate(fl):
        t = fl[i + 1:]
        ok = np.all((lo[t] <= hi[s]) & (lo[s] <= hi[t]), axis=1)
        ok &= dyn[s] | dyn[t]
        ok &= (world[s] < 0) | (world[t] < 0) | (world[t] == world[s])
        ok &= sbody[t] != sbody[s]
        out.update((int(s), int(u)) for u in t[ok])
    return out


def test_broad_phase_1000_boxes_on_a_plane_matches_brute_force_and_pairs_only_neighbours():
    """One size: the pairs are exactly brute force's and about 5 per box (each box's AABB meets its 8
    neighbours' and the plane), not n^2 / 2. That is the pair list's size; the sweep's cost is not timed."""
    rng = np.random.default_rng(3)
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    h = 0.1
    nx, ny = 40, 25
    for i in range(nx):
        for j in range(ny):
            # 1.5 cm gaps: less than 2 margins, so neighbours' AABBs overlap, but with a yaw of at most
            # 0.02 rad the boxes stay more than a margin apart; resting 1 mm deep in the plane
            yaw = quat((0, 0, 1), rng.uniform(-0.02, 0.02))
            body = b.add_body(xform=((i * (2 * h + 0.015), j * (2 * h + 0.015), h - 0.001), yaw))
            b.add_shape_box(body, hx=h, hy=h, hz=h)
    model = b.finalize(device=DEVICE)
    n = nx * ny
    state = model.state()
    c = model.contacts()
    model.collide(state, c)
    got = [tuple(p) for p in c.rigid_pairs()]
    expected = brute_force_pairs(model, state.body_q.numpy().astype(np.float64))
    contacts = c.counts()["rigid_contacts"]
    print(f"1000 boxes: {len(got)} candidate pairs (brute force {len(expected)}, n^2/2 = {n * (n - 1) // 2}), "
          f"{contacts} contact points")
    assert len(got) == len(set(got)), "a pair was written twice"
    assert set(got) == expected
    assert len(got) < 5 * n  # 4 neighbour pairs a box (half of 8) plus the plane, less the border's: 4.8 n
    # every box rests on the plane with its 4 bottom corners; its neighbours are beyond the margin
    assert contacts == 4 * n


@pytest.mark.parametrize("static, per_world", [(30, 60), (8, 25)])  # 271 shapes: radix sort; 109: rank sort
def test_broad_phase_many_worlds_and_shared_static_shapes_match_brute_force(static, per_world):
    """Worlds on top of each other are swept apart; static shapes of world -1 meet every world. Both sorts
    of the sweep (a counting kernel up to RANK_SORT_MAX shapes, a radix sort beyond) give the same pairs."""
    from inertia.collision.broad_phase import RANK_SORT_MAX

    assert (1 + static + 4 * per_world > RANK_SORT_MAX) == (static == 30)
    rng = np.random.default_rng(7)
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    for _ in range(static):  # shared static boxes
        b.add_shape_box(xform=(tuple(rng.uniform(-1.5, 1.5, 3)), quat(rng.normal(size=3), rng.uniform(0, 3))),
                        hx=rng.uniform(0.02, 0.3), hy=rng.uniform(0.02, 0.3), hz=rng.uniform(0.02, 0.3))
    for w in range(4):
        b.current_world = w
        for k in range(per_world):
            body = b.add_body(xform=(tuple(rng.uniform(-1.5, 1.5, 3)), quat(rng.normal(size=3), rng.uniform(0, 3))),
                              kinematic=(k % 10 == 0))
            b.add_shape_box(body, hx=rng.uniform(0.02, 0.2), hy=rng.uniform(0.02, 0.2), hz=rng.uniform(0.02, 0.2))
    b.num_worlds = 4
    model = b.finalize(device=DEVICE)
    state = model.state()
    c = model.contacts()
    model.collide(state, c)
    got = [tuple(p) for p in c.rigid_pairs()]
    expected = brute_force_pairs(model, state.body_q.numpy().astype(np.float64))
    print(f"4 worlds x {per_world} boxes + {static} shared static boxes: {len(got)} pairs "
          f"(brute force {len(expected)})")
    assert len(got) == len(set(got)) and set(got) == expected and len(expected) > 20


# --------------------------------------------------------------------------- overflow, capture, particles
def test_overflow_is_reported_for_rigid_pairs_and_contacts():
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    for k in range(3):
        b.add_shape_box(b.add_body(xform=((2.0 * k, 0.0, 0.49), IDENTITY)), hx=0.5, hy=0.5, hz=0.5)
    model = b.finalize(device=DEVICE)
    state = model.state()
    small = model.contacts(rigid_pair_max=1)
    with pytest.warns(RuntimeWarning, match="shape-shape candidate pairs.*rigid_pair_max"):
        model.collide(state, small)
    assert small.counts()["rigid_pairs"] == 3 and small.counts()["rigid_contacts"] == 4
    with pytest.raises(ContactOverflowError,
                       match=r"shape-shape candidate pairs \(broad phase\): 3 requested, capacity 1"):
        small.check_overflow(raise_error=True)
    few = model.contacts(rigid_contact_max=5)
    with pytest.warns(RuntimeWarning, match="shape-shape contact points: 12 requested, capacity 5"):
        model.collide(state, few)
    roomy = model.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.collide(state, roomy)
    assert roomy.counts()["rigid_contacts"] == 12


def sorted_contacts(c):
    r = c.rigid_contacts()
    rows = np.column_stack([r["shape0"], r["shape1"], r["point0"], r["thickness0"]])
    return rows[np.lexsort(rows.T[::-1])]


def test_captured_collide_replays_the_plain_call_on_moved_bodies():
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_shape_box(xform=((0.0, 0.0, 0.1), IDENTITY), hx=0.5, hy=0.5, hz=0.1)
    box = b.add_body(xform=((0.0, 0.0, 0.29), IDENTITY))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
    ball = b.add_body(xform=((2.0, 0.0, 0.09), IDENTITY))
    b.add_shape_sphere(ball, radius=0.1)
    cap = b.add_body(xform=((3.0, 0.0, 0.05), quat((0, 1, 0), math.pi / 2)))
    b.add_shape_capsule(cap, radius=0.05, half_height=0.2)
    b.add_particle((0.0, 0.0, 1.0), mass=1.0, radius=0.05)
    model = b.finalize(device=DEVICE)
    state = model.state()
    plain, replayed = model.contacts(), model.contacts()
    model.collide(state, replayed)  # loads the modules and makes the broad-phase buffers
    # move the bodies: the box onto the ball, the capsule tilted onto the plane
    q = state.body_q.numpy()
    q[box, :3] = (2.0, 0.05, 0.28)
    q[cap, 3:] = quat((0, 1, 0), 1.3)
    state.body_q.assign(q)
    with wp.ScopedCapture(device=DEVICE) as capture:
        model.collide(state, replayed, check_overflow=False)
    wp.capture_launch(capture.graph)
    model.collide(state, plain)
    a, r = sorted_contacts(plain), sorted_contacts(replayed)
    print(f"captured collide: {len(r)} contacts, plain {len(a)}")
    assert len(a) == 3 and np.array_equal(a, r)  # ball-plane, box-ball, the capsule's lower end on the plane
    assert np.array_equal(np.sort(plain.rigid_pairs(), axis=0), np.sort(replayed.rigid_pairs(), axis=0))
    # the graph reads the state's current poses: move again, replay, compare
    q[box, :3] = (0.3, 0.3, 0.29)
    state.body_q.assign(q)
    wp.capture_launch(capture.graph)
    model.collide(state, plain)
    a, r = sorted_contacts(plain), sorted_contacts(replayed)
    assert len(a) == 6 and np.array_equal(a, r)  # the box back on the static box: + its 4 corners, - the ball


def test_particles_meet_shapes_on_bodies_at_their_current_pose():
    b = inertia.ModelBuilder()
    b.particle_collide = False
    body = b.add_body(xform=((0.0, 0.0, 0.0), IDENTITY))
    s_box = b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2)
    b.add_shape_sphere(body, xform=((0.0, 0.0, 0.3), IDENTITY), radius=0.1, collide_particles=False)
    b.add_particle((1.0, 0.0, 0.22), mass=1.0, radius=0.05)  # beside the box where the body will be
    b.add_particle((0.0, 0.0, 0.42), mass=1.0, radius=0.05)  # on the sphere that ignores particles
    model = b.finalize(device=DEVICE)
    state = model.state()
    c = model.contacts()
    model.collide(state, c)
    assert len(c.soft_contact_pairs()) == 0
    q = state.body_q.numpy()
    q[body, :3] = (1.0, 0.0, 0.0)  # now the first particle touches the box's top face
    state.body_q.assign(q)
    model.collide(state, c)
    assert [tuple(p) for p in c.soft_contact_pairs()] == [(0, s_box)]


def test_collide_rejects_a_state_of_another_model():
    b = inertia.ModelBuilder()
    b.add_shape_sphere(b.add_body(), radius=0.1)
    model = b.finalize(device=DEVICE)
    other = inertia.ModelBuilder()
    other.add_shape_sphere(other.add_body(), radius=0.1)
    other.add_shape_sphere(other.add_body(), radius=0.1)
    with pytest.raises(ValueError, match="state.body_q has 2 bodies, the model 1"):
        model.collide(other.finalize(device=DEVICE).state(), model.contacts())
