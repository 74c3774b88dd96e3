"""Contact buffers that are too small: the deepest candidates are kept, and the simulation stays sane.

Known answers: with more candidates than capacity, each list keeps exactly the deepest ones (their gaps
are set here, and sorted in NumPy); the count still reports every candidate and the warning names the
argument to raise. Scenes with a quarter of the contacts they need (a cloth landing flat, 27 boxes on
the ground) stay within their bounds in both solvers: nothing above where it was released, nothing
through the ground. Before, the first-come candidates were kept: the XPBD cloth was flung to 51 m and
the semi-implicit one to 8.8 m, and 17 of 27 boxes fell through the ground (XPBD).
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE
from inertia.collision.broad_phase import ShapeFilter, shapes_may_collide

G = 9.81

# gaps [m] 6 % apart (the selection resolves 2.2 %: 1/32 of an octave), from 4 cm of overlap to 1 cm of gap
GAPS = np.concatenate([-0.04 * 0.94 ** np.arange(40), 0.01 * 0.94 ** np.arange(10)])


def shuffled_gaps(seed=0):
    return np.random.default_rng(seed).permutation(GAPS)


def deepest(gaps, k):
    return set(np.argsort(gaps)[:k].tolist())


def collide_and_warn(model, state, contacts, argument):
    with pytest.warns(RuntimeWarning, match=f"Pass a larger {argument} to model.contacts"):
        model.collide(state, contacts)


# ------------------------------------------------------------------ each list keeps its deepest candidates
def test_particle_shape_contacts_keep_the_deepest_and_stay_capturable():
    radius = 0.05
    gaps = shuffled_gaps(1)
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_ground_plane()
    for i, g in enumerate(gaps):
        b.add_particle((0.2 * i, 0.0, radius + g), mass=1.0, radius=radius)
    b.contact_margin = 0.02
    model = b.finalize(device=DEVICE)
    k = 12
    contacts = model.contacts(soft_contact_max=k)
    state = model.state()
    collide_and_warn(model, state, contacts, "soft_contact_max")
    assert contacts.counts()["soft_contacts"] == len(gaps)  # every candidate is still counted
    kept = contacts.soft_contact_pairs()
    assert set(kept[:, 0].tolist()) == deepest(gaps, k) and len(kept) == k
    # the three passes run on the device without a host read: a captured collide keeps the same ones
    contacts.clear()
    model.collision.prepare(contacts)
    with wp.ScopedCapture(device=DEVICE) as cap:
        model.collide(state, contacts, check_overflow=False)
    contacts.soft_contact_particle.fill_(-1)
    wp.capture_launch(cap.graph)
    assert set(contacts.soft_contact_pairs()[:, 0].tolist()) == deepest(gaps, k)


def test_particle_pairs_keep_the_deepest():
    radius = 0.05
    gaps = shuffled_gaps(2)
    b = inertia.ModelBuilder(gravity=0.0)
    b.particle_collide = True
    for i, g in enumerate(gaps):  # one pair per gap, the pairs 0.5 m apart
        b.add_particle((0.5 * i, 0.0, 1.0), mass=1.0, radius=radius)
        b.add_particle((0.5 * i + 2 * radius + g, 0.0, 1.0), mass=1.0, radius=radius)
    b.contact_margin = 0.02
    model = b.finalize(device=DEVICE)
    k = 15
    contacts = model.contacts(particle_pair_max=k)
    collide_and_warn(model, model.state(), contacts, "particle_pair_max")
    assert contacts.counts()["particle_pairs"] == len(gaps)
    kept = contacts.particle_pairs()
    assert len(kept) == k and set((kept[:, 0] // 2).tolist()) == deepest(gaps, k)


@pytest.mark.parametrize("buffer", ["rigid_contact_max", "rigid_pair_max"])
def test_shape_contacts_and_shape_pairs_keep_the_deepest(buffer):
    """Spheres at the given gaps above the ground: each is one broad-phase pair (its AABB reaches below the
    plane by margin - gap) and one contact point (its centre, thickness r)."""
    radius = 0.05
    gaps = shuffled_gaps(3)
    b = inertia.ModelBuilder(gravity=0.0)
    ground = b.add_ground_plane()
    for i, g in enumerate(gaps):
        body = b.add_body(xform=((0.2 * i, 0.0, radius + g), (0, 0, 0, 1)))
        b.add_shape_sphere(body, radius=radius)
    b.rigid_contact_margin = 0.02
    model = b.finalize(device=DEVICE)
    k = 10
    contacts = model.contacts(**{buffer: k})
    collide_and_warn(model, model.state(), contacts, buffer)
    if buffer == "rigid_pair_max":
        assert contacts.counts()["rigid_pairs"] == len(gaps)
        pairs = contacts.rigid_pairs()
        kept = pairs[:, 0] if ground != pairs[0, 0] else pairs[:, 1]
    else:
        assert contacts.counts()["rigid_contacts"] == len(gaps)
        c = contacts.rigid_contacts()
        kept = np.where(c["shape0"] == ground, c["shape1"], c["shape0"])
    bodies = model.shape_body.numpy()[kept]
    assert len(bodies) == k and set(bodies.tolist()) == deepest(gaps, k)


# ------------------------------------------------------------------ scenes on a quarter of their contacts
def run_captured(model, solver, contacts, dt, seconds, sample_every):
    """collide + step pairs replayed from a captured graph; yields the state every ``sample_every`` pairs."""
    s0, s1 = model.state(), model.state()

    def pair():
        for a, b in ((s0, s1), (s1, s0)):
            model.collide(a, contacts, check_overflow=False)
            solver.step(a, b, None, contacts, dt)

    pair()
    with wp.ScopedCapture(device=model.device) as cap:
        pair()
    pairs = int(seconds / dt) // 2 - 2
    for p in range(pairs):
        wp.capture_launch(cap.graph)
        if p % sample_every == 0 or p == pairs - 1:
            yield s0


def landing_cloth(mass):
    b = inertia.ModelBuilder(gravity=-G)
    b.add_cloth_grid(20, 20, pos=(-0.5, -0.5, 0.3), cell_x=0.05, cell_y=0.05, mass=mass)
    b.add_ground_plane()
    return b.finalize(device=DEVICE)


@pytest.mark.parametrize("solver", ["xpbd", "semi_implicit"])
def test_a_cloth_on_a_quarter_of_its_contacts_lands_and_stays_on_the_ground(solver):
    """A 21 x 21 cloth dropped flat from 0.3 m with soft_contact_max = 100 (441 particles touch the ground).

    Measured: XPBD z in [0.019, 0.300] m, resting at the radius (0.02 m); semi-implicit (penalty contact at
    1/2400 s) z in [0.002, 0.29] m, a bounce below the release height (the same cloth with every contact
    rebounds to 0.13 m; a penalty contact switched on deep and off shallow gives energy back, which the
    selection's 2.2 % resolution keeps small). Before, the cloth was flung to 51 m / 8.8 m."""
    if solver == "xpbd":
        model = landing_cloth(0.02)
        sim, dt = inertia.XPBDSolver(model, iterations=10), 1.0 / 600
    else:
        model = landing_cloth(0.1)  # the semi-implicit membrane's defaults are stable at this mass and step
        sim, dt = inertia.SemiImplicitSolver(model), 1.0 / 2400
    radius = float(model.particle_radius.numpy().max())
    contacts = model.contacts(soft_contact_max=100)
    low, high = np.inf, -np.inf
    for s in run_captured(model, sim, contacts, dt, 1.5, 5):
        z = s.particle_q.numpy()[:, 2]
        low, high = min(low, z.min()), max(high, z.max())
    v = np.abs(s.particle_qd.numpy()).max()
    print(f"[overflow] cloth, {solver}, 100 of 441 contacts: z in [{low:.4f}, {high:.4f}] m over 1.5 s, final "
          f"[{z.min():.4f}, {z.max():.4f}] m, max speed {v:.3f} m/s")
    assert contacts.counts()["soft_contacts"] == 441  # it did overflow
    assert low > -radius  # no particle's centre below the ground: none fell through
    assert high <= 0.3 + 1e-6  # nothing rose above where it was released
    assert np.abs(z - radius).max() < 0.5 * radius and v < 0.05  # resting on the ground


def box_grid():
    b = inertia.ModelBuilder(gravity=-G)
    b.add_ground_plane()
    h = 0.1
    for i in range(27):  # three layers of 3 x 3 boxes, dropped from 5 cm apart
        x, y, z = i % 3, (i // 3) % 3, i // 9
        body = b.add_body(xform=((0.3 * (x - 1), 0.3 * (y - 1), h + 0.25 * z + 0.05), (0, 0, 0, 1)))
        b.add_shape_box(body, hx=h, hy=h, hz=h)
    return b.finalize(device=DEVICE), h


@pytest.mark.parametrize("solver", ["xpbd", "semi_implicit"])
@pytest.mark.parametrize("buffer, capacity", [("rigid_contact_max", 40), ("rigid_pair_max", 10)])
def test_boxes_on_too_few_contacts_stay_on_the_ground(solver, buffer, capacity):
    """27 boxes dropped in three layers of nine onto the ground (108 corner and face contacts, 27 pairs)
    with 40 contact slots or 10 pair slots, for 3 s: none falls through, none is thrown, the layers stand."""
    model, h = box_grid()
    if solver == "xpbd":
        sim, dt = inertia.XPBDSolver(model, iterations=8), 1.0 / 1200
    else:
        sim, dt = inertia.SemiImplicitSolver(model), 1.0 / 2400
    contacts = model.contacts(**{buffer: capacity})
    lowest, highest = np.inf, -np.inf
    for s in run_captured(model, sim, contacts, dt, 3.0, 20):
        q = s.body_q.numpy()
        lowest, highest = min(lowest, q[:, 2].min()), max(highest, q[:, 2].max())
    start = model.body_q.numpy()
    rise = highest - start[:, 2].max()
    print(f"[overflow] 27 boxes, {solver}, {buffer} = {capacity}: centres z in [{lowest:.4f}, {highest:.4f}] m "
          f"(dropped from {start[:, 2].max():.2f}), largest sideways move {np.abs(q[:, :2] - start[:, :2]).max():.4f} "
          f"m, final max speed {np.abs(s.body_qd.numpy()).max():.3f}")
    assert contacts.overflow(since_reset=True)[buffer.replace("_max", "s")] > 0  # it did overflow
    assert np.isfinite(q).all()
    # No box sinks halfway into the ground (measured: XPBD 0.1 mm with too few contacts, 1 cm with too few pairs,
    # as a box losing its slot falls until it is among the deepest again; the penalty contact 3.6 / 4.1 cm, the
    # load of a column on a quarter of its contacts at ke = 1e4 N/m).
    assert lowest > 0.5 * h
    # Nothing rises above where it was dropped. The penalty contact's defaults bounce (this stack with every
    # contact still moves at 0.1 m/s after 3 s), and contacts that come and go with the selection gave a top
    # box up to 2.8 cm above its drop height (measured): bounded by half a box there.
    assert rise <= (1e-6 if solver == "xpbd" else 0.5 * h)
    assert np.abs(q[:, :2] - start[:, :2]).max() < 0.02  # none thrown or toppled sideways
    layer = np.arange(27) // 9
    assert (np.abs(q[:, 2] - (h + 2 * h * layer)) < 0.5 * h).all()  # each layer on the one below it


# ------------------------------------------------------------------ lists that can never overflow
@wp.kernel
def _filter_passes_kernel(f: ShapeFilter, out: wp.array(dtype=wp.int32)):
    a, b = wp.tid()
    if a < b and shapes_may_collide(f, a, b):
        wp.atomic_add(out, 0, 1)


def _random_scene(seed):
    """Two worlds and shared shapes: bodies chained by revolute joints (the builder excludes joined bodies),
    static shapes, random collision groups and masks, a few shapes without the collide flag."""
    rng = np.random.default_rng(seed)
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_shape_box(-1, xform=((3.0, 0.0, 0.5), (0, 0, 0, 1)), hx=0.2, hy=0.2, hz=0.2)  # static, shared
    for w in range(2):
        b.current_world = w
        prev = -1
        for i in range(int(rng.integers(3, 7))):
            body = b.add_body(xform=((float(i), float(w), 1.0), (0, 0, 0, 1)))
            for _ in range(int(rng.integers(1, 3))):
                props = {"collision_group": int(rng.choice([1, 2, 4])), "collision_mask": int(rng.choice([-1, 1, 3, 6])),
                         "collide_shapes": bool(rng.random() > 0.15)}
                kind = rng.integers(4)
                if kind == 0:
                    b.add_shape_sphere(body, radius=0.1, **props)
                elif kind == 1:
                    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, **props)
                elif kind == 2:
                    b.add_shape_capsule(body, radius=0.05, half_height=0.1, **props)
                else:
                    b.add_shape_cylinder(body, radius=0.05, half_height=0.1, **props)
            if rng.random() < 0.6:
                b.add_joint_revolute(prev, body, parent_xform=((float(i) - 0.5, float(w), 1.0), (0, 0, 0, 1)),
                                     child_xform=((-0.5, 0.0, 0.0), (0, 0, 0, 1)), axis=(0.0, 1.0, 0.0))
            prev = body
        if w == 0:
            b.add_shape_sphere(-1, xform=((-2.0, 0.0, 0.3), (0, 0, 0, 1)), radius=0.3)  # static, world 0
    return b.finalize(device=DEVICE)


@pytest.mark.parametrize("seed", range(6))
def test_the_pair_bound_is_the_count_the_broad_phase_filter_passes(seed):
    """``possible_pairs_and_contacts`` counts in NumPy the shape pairs that pass the broad phase's filter (a list
    whose capacity holds them all skips the overflow selection's passes 2 and 3); here the Warp filter itself,
    ``shapes_may_collide``, is evaluated on every pair of random scenes, with every body dynamic (the bound counts
    every body as dynamic): the same count."""
    from inertia.collision.broad_phase import shape_filter
    from inertia.collision.candidate_bounds import possible_pairs_and_contacts

    model = _random_scene(seed)
    pairs, _ = possible_pairs_and_contacts(model)
    model.body_inv_mass.assign(np.ones(model.body_count, np.float32))
    out = wp.zeros(1, dtype=wp.int32, device=DEVICE)
    n = model.shape_count
    wp.launch(_filter_passes_kernel, dim=(n, n), inputs=[shape_filter(model)], outputs=[out], device=DEVICE)
    assert pairs == int(out.numpy()[0]) > 0


def test_a_robot_on_the_ground_skips_the_selection_and_keeps_its_contacts():
    """Shapes on bodies that collide with the ground only (group 2, mask 1, as an imported robot's links), every
    one sunk below the plane so that each of its points is a contact: the contact bound (sphere 1, capsule 2,
    box 8, cylinder 18 points) holds what the narrow phase makes, the boxes' and capsules' exactly, so neither
    list can overflow, and a collide launches no selection pass; with a capacity below the bound the passes
    are back."""
    from inertia.collision.broad_phase import shape_broad_phase

    b = inertia.ModelBuilder(gravity=0.0)
    b.add_ground_plane()
    kinds = ["sphere", "capsule", "box", "cylinder"] * 2
    for i, kind in enumerate(kinds):
        body = b.add_body(xform=((0.5 * i, 0.0, -0.5), (0, 0, 0, 1)))  # well below the plane
        add = getattr(b, f"add_shape_{kind}")
        size = {"sphere": {"radius": 0.1}, "box": {"hx": 0.1, "hy": 0.1, "hz": 0.1},
                "capsule": {"radius": 0.05, "half_height": 0.1}, "cylinder": {"radius": 0.05, "half_height": 0.1}}
        add(body, collision_group=2, collision_mask=1, **size[kind])
    model = b.finalize(device=DEVICE)
    contacts = model.contacts()
    launched = []
    real = wp.launch

    def note(kernel, *args, **kwargs):
        launched.append(kernel.key)
        return real(kernel, *args, **kwargs)

    model.collision.replay.enabled = False
    wp.launch = note
    try:
        model.collide(model.state(), contacts)
    finally:
        wp.launch = real
    bp = shape_broad_phase(model)
    assert bp.max_pairs == len(kinds) and bp.max_contacts == 2 * (1 + 2 + 8 + 18)
    assert "plan_selection_kernel" not in launched and launched.count("narrow_phase_kernel") == 1
    stored = contacts.rigid_contacts()
    per_shape = np.bincount(np.where(stored["shape0"] == 0, stored["shape1"], stored["shape0"]), minlength=len(kinds) + 1)
    assert contacts.counts()["rigid_contacts"] <= bp.max_contacts
    for s, kind in enumerate(kinds, start=1):
        assert per_shape[s] <= {"sphere": 1, "capsule": 2, "box": 8, "cylinder": 18}[kind]
        if kind in ("sphere", "capsule", "box"):
            assert per_shape[s] == {"sphere": 1, "capsule": 2, "box": 8}[kind], (kind, per_shape)
    small = model.contacts(rigid_contact_max=20)  # below the 54 contacts made: overflows
    launched.clear()
    wp.launch = note
    try:
        with pytest.warns(RuntimeWarning):
            model.collide(model.state(), small)
    finally:
        wp.launch = real
    assert launched.count("plan_selection_kernel") == 1 and launched.count("narrow_phase_kernel") == 3


def test_reset_broad_phase_counts_again_after_masks_change_in_place():
    """The bound is taken at the first collide; masks changed in place afterwards (the shapes may now meet each
    other, not only the ground) are counted after ``model.collision.reset_broad_phase()``: more pairs, and no
    contact bound (not every pair has a plane), so the selection runs again."""
    from inertia.collision.broad_phase import shape_broad_phase

    b = inertia.ModelBuilder(gravity=0.0)
    b.add_ground_plane()
    for i in range(3):
        body = b.add_body(xform=((0.15 * i, 0.0, 0.05), (0, 0, 0, 1)))
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, collision_group=2, collision_mask=1)
    model = b.finalize(device=DEVICE)
    contacts = model.contacts()
    model.collide(model.state(), contacts)
    bp = shape_broad_phase(model)
    assert (bp.max_pairs, bp.max_contacts) == (3, 24)
    model.shape_collision_mask.assign(np.full(model.shape_count, -1, np.int32))
    model.collision.reset_broad_phase()
    assert (bp.max_pairs, bp.max_contacts) == (6, None)  # 3 box pairs more, which have no plane
    model.collide(model.state(), contacts)
    assert contacts.counts()["rigid_pairs"] > 3  # the overlapping boxes' pairs are found
