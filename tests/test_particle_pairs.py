"""Particle-particle broad phase (the half-shell cell list) against a brute-force float64 reference.

The reference lists every pair i < j with |x_i - x_j| < r_i + r_j + contact_margin, both particles
active, in the same world and not sharing an element (spring, triangle, bending edge, tetrahedron),
from the model's own arrays. Detection must find exactly that set, each pair once, written as (i, j)
with i < j, whatever the grid size (small grids alias far-apart cells into one bucket).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE

# detection compares squared float32 distances: pairs this close (relative) to the threshold may go either way
TIE = 1.0e-5


def shared_element_pairs(model) -> set:
    """Particle pairs (i < j) that share an element, from the element index arrays."""
    out = set()
    groups = (model.spring_indices.numpy().reshape(-1, 2), model.tri_indices.numpy().reshape(-1, 3),
              model.edge_indices.numpy().reshape(-1, 4), model.tet_indices.numpy().reshape(-1, 4))
    for rows in groups:
        for row in rows:
            for a, b in itertools.combinations([int(p) for p in row if p >= 0], 2):
                if a != b:
                    out.add((min(a, b), max(a, b)))
    return out


def reference_pairs(model, q=None) -> tuple[set, set]:
    """(pairs that must be found, pairs within TIE of the threshold that may or may not be)."""
    q = (model.particle_q if q is None else q).numpy().astype(np.float64)
    r = model.particle_radius.numpy().astype(np.float64)
    active = (model.particle_flags.numpy() & 1) != 0
    world = model.particle_world.numpy()
    excluded = shared_element_pairs(model)
    must, tie = set(), set()
    with np.errstate(invalid="ignore"):
        for i in range(model.particle_count):
            j = np.arange(i + 1, model.particle_count)
            d = np.linalg.norm(q[j] - q[i], axis=1)
            reach = r[i] + r[j] + model.contact_margin
            ok = active[i] & active[j] & (world[j] == world[i])
            for jj in j[ok & (d < reach * (1.0 - TIE))]:
                if (i, int(jj)) not in excluded:
                    must.add((i, int(jj)))
            for jj in j[ok & (np.abs(d - reach) <= reach * TIE)]:
                if (i, int(jj)) not in excluded:
                    tie.add((i, int(jj)))
    return must, tie


def detected_pairs(model, state=None, grid_dim=None, contacts=None) -> list:
    contacts = model.contacts(grid_dim=grid_dim) if contacts is None else contacts
    model.collide(model.state() if state is None else state, contacts)
    assert contacts.overflow()["particle_pairs"] == 0
    return [tuple(p) for p in contacts.particle_pairs().tolist()]


def assert_pairs_match(model, state=None, grid_dim=None, contacts=None) -> int:
    got = detected_pairs(model, state, grid_dim, contacts)
    assert len(got) == len(set(got)), "a pair was listed twice"
    assert all(i < j for i, j in got), "pairs must be written as (i, j) with i < j"
    must, tie = reference_pairs(model, None if state is None else state.particle_q)
    got = set(got)
    missing, extra = must - got, got - must - tie
    assert not missing and not extra, f"missing {sorted(missing)[:10]}, extra {sorted(extra)[:10]}"
    return len(got)


def random_particles(n, low, high, r_min, r_max, seed) -> inertia.Model:
    rng = np.random.default_rng(seed)
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    x = rng.uniform(low, high, (n, 3))
    r = rng.uniform(r_min, r_max, n)
    for i in range(n):
        b.add_particle(pos=x[i], radius=r[i])
    return b.finalize(device=DEVICE)


# --------------------------------------------------------------------------- pair sets
@pytest.mark.parametrize("grid_dim", [None, 1, 2, 3, 5])
def test_jittered_block(grid_dim):
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    b.add_particle_grid(9, 8, 7, pos=(0.3, -0.2, 0.1), cell_x=0.1, cell_y=0.1, cell_z=0.1, jitter=0.01,
                        radius_mean=0.05, seed=5)
    model = b.finalize(device=DEVICE)
    found = assert_pairs_match(model, grid_dim=grid_dim)
    assert found > 2.5 * model.particle_count  # a packed block: each particle touches its face neighbours


@pytest.mark.parametrize("grid_dim", [None, 4])
def test_random_particles_with_varied_radii(grid_dim):
    model = random_particles(1500, 0.0, 1.2, 0.005, 0.08, seed=11)
    assert assert_pairs_match(model, grid_dim=grid_dim) > 500


@pytest.mark.parametrize("grid_dim", [None, 3, 4])
def test_negative_coordinates_and_cells_across_zero(grid_dim):
    # a cloud centred on the origin's negative side, with particles either side of every axis' zero
    model = random_particles(1200, -1.3, 0.4, 0.01, 0.05, seed=12)
    assert assert_pairs_match(model, grid_dim=grid_dim) > 200
    assert (model.particle_q.numpy() < 0.0).all(axis=1).sum() > 100


@pytest.mark.parametrize("grid_dim", [1, 2, 4])
def test_far_apart_clusters_alias_into_the_same_buckets(grid_dim):
    """Clusters exactly a multiple of grid_dim cells apart share every bucket; pairs never cross them."""
    rng = np.random.default_rng(13)
    r = 0.05
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    b.contact_margin = 0.0
    cell = 2.0 * r  # the cell width with this radius and margin
    # cluster offsets: whole multiples of grid_dim cells (exact aliasing), some far, some on negative sides
    offsets = [(0, 0, 0), (1, 0, 0), (0, -1, 0), (1, 1, -1), (-3, 2, 5), (40, -40, 40)]
    for ox, oy, oz in offsets:
        origin = np.array([ox, oy, oz], dtype=np.float64) * grid_dim * cell
        for x in rng.uniform(0.0, 0.6, (120, 3)):
            b.add_particle(pos=origin + x, radius=r)
    model = b.finalize(device=DEVICE)
    assert abs(2.0 * model.particle_max_radius + model.contact_margin - cell) < 1e-7
    assert assert_pairs_match(model, grid_dim=grid_dim) > 100


def test_particles_beyond_the_cell_coordinate_range_still_pair_correctly():
    """Positions so far out that cell coordinates clamp: they share cells (slow) but pairs stay exact."""
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    far = [(1.0e12, 0.0, 0.0), (1.0e12, 0.0, 0.0), (2.0e12, 0.0, 0.0), (-1.0e12, 5.0, 0.0),
           (-1.0e12, 5.0, 0.05), (0.0, 0.0, -3.0e15), (0.0, 0.0, 0.0), (0.0, 0.0, 0.08)]
    for p in far:
        b.add_particle(pos=p, radius=0.05)
    model = b.finalize(device=DEVICE)
    for grid_dim in (None, 2):
        got = set(detected_pairs(model, grid_dim=grid_dim))
        assert got == {(0, 1), (3, 4), (6, 7)}


def test_non_finite_positions_pair_with_nothing():
    model = random_particles(200, 0.0, 0.5, 0.03, 0.06, seed=14)
    state = model.state()
    q = state.particle_q.numpy()
    q[3] = (np.nan, 0.1, 0.1)
    q[7] = (np.inf, -np.inf, 0.2)
    state.particle_q.assign(q)
    got = set(detected_pairs(model, state))
    assert not any(3 in p or 7 in p for p in got)
    must, tie = reference_pairs(model, state.particle_q)
    assert must <= got <= must | tie


@pytest.mark.parametrize("grid_dim", [None, 2])
def test_worlds_stacked_at_one_place_never_pair_across(grid_dim):
    scene = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    scene.add_particle_grid(5, 5, 4, cell_x=0.1, cell_y=0.1, cell_z=0.1, jitter=0.01, radius_mean=0.05, seed=3)
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    b.replicate(scene, 4, spacing=0.0)
    model = b.finalize(device=DEVICE)
    assert set(model.particle_world.numpy().tolist()) == {0, 1, 2, 3}
    found = assert_pairs_match(model, grid_dim=grid_dim)
    single = scene.finalize(device=DEVICE)
    assert found == 4 * len(detected_pairs(single))


def test_particle_world_set_by_hand_separates_overlapping_particles():
    model = random_particles(600, 0.0, 0.6, 0.02, 0.06, seed=15)
    world = np.random.default_rng(1).integers(-1, 3, model.particle_count).astype(np.int32)  # -1 included
    model.particle_world.assign(world)
    assert assert_pairs_match(model) > 50


def test_inactive_particles_are_skipped_and_follow_the_flags_array():
    model = random_particles(800, 0.0, 0.7, 0.02, 0.06, seed=16)
    contacts = model.contacts()
    before = assert_pairs_match(model, contacts=contacts)
    flags = model.particle_flags.numpy()
    flags[::3] = 0  # a third of the particles frozen
    model.particle_flags.assign(flags)
    after = assert_pairs_match(model, contacts=contacts)  # same contacts: the list is rebuilt from the flags
    assert 0 < after < before


def test_cloth_excludes_particles_sharing_an_element():
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    # radius 0.11 on a 0.1 grid: particles up to two cells apart touch; the nearer ones share a triangle,
    # a spring or a bending edge, some of the farther ones do not
    b.add_cloth_grid(12, 10, pos=(-0.5, -0.5, 1.0), cell_x=0.1, cell_y=0.1, add_springs=True, particle_radius=0.11)
    model = b.finalize(device=DEVICE)
    state = model.state()
    q = state.particle_q.numpy()
    q[:, 2] += 0.04 * np.sin(7.0 * q[:, 0]) * np.cos(5.0 * q[:, 1])  # a wavy sheet
    state.particle_q.assign(q)
    found = assert_pairs_match(model, state)
    # the exclusions did remove close pairs (else this test could not tell them apart)
    dist = np.linalg.norm(q[:, None].astype(np.float64) - q[None], axis=2)
    close = {(i, j) for i, j in zip(*np.nonzero(np.triu(dist < 0.22 + model.contact_margin, 1)))}
    assert len(close & shared_element_pairs(model)) > 300 and found > 100


# --------------------------------------------------------------------------- overflow
def test_overflow_keeps_counting_and_writes_nothing_past_capacity():
    model = random_particles(700, 0.0, 0.6, 0.03, 0.06, seed=17)
    must, tie = reference_pairs(model)
    cap = 5
    contacts = model.contacts(particle_pair_max=cap)
    # the pair list as the first `cap` entries of a larger array: the rest must stay untouched
    backing = wp.full(cap + 64, wp.vec2i(-7, -7), dtype=wp.vec2i, device=DEVICE)
    contacts.particle_pair = backing[:cap]
    with pytest.warns(RuntimeWarning, match="particle-particle pairs"):
        model.collide(model.state(), contacts)
    count = int(contacts.particle_pair_count.numpy()[0])
    assert len(must) <= count <= len(must) + len(tie)
    assert contacts.overflow()["particle_pairs"] == count - cap
    assert contacts.overflow(since_reset=True)["particle_pairs"] == count - cap  # the peak counts saw it too
    kept = {tuple(p) for p in contacts.particle_pairs().tolist()}
    assert len(kept) == cap and kept <= must | tie
    assert (backing.numpy()[cap:] == -7).all()
    with pytest.raises(inertia.ContactOverflowError, match="particle_pair_max"):
        contacts.check_overflow(raise_error=True)


# --------------------------------------------------------------------------- capture and errors
def falling_block():
    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.add_particle_grid(6, 6, 6, pos=(0.0, 0.0, 0.1), cell_x=0.1, cell_y=0.1, cell_z=0.1, jitter=0.005,
                        radius_mean=0.05, vel=(0.4, -0.3, -1.0), seed=4)
    b.add_ground_plane()
    return b.finalize(device=DEVICE)


def test_captured_collide_and_step_replay_the_plain_loop():
    dt, pairs_of_steps = 1.0 / 1200, 12

    def make():
        model = falling_block()
        return model, inertia.SemiImplicitSolver(model), model.state(), model.state(), model.control(), model.contacts()

    def two_steps(model, solver, s0, s1, control, contacts):
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        model.collide(s1, contacts)
        solver.step(s1, s0, control, contacts, dt)

    plain = make()
    for _ in range(pairs_of_steps + 1):
        two_steps(*plain)

    graph = make()
    two_steps(*graph)  # warm-up: loads the modules, allocates the cell list
    with wp.ScopedCapture(device=DEVICE) as cap:
        two_steps(*graph)
    q_warm = graph[2].particle_q.numpy().copy()
    for _ in range(pairs_of_steps):
        wp.capture_launch(cap.graph)
    q = graph[2].particle_q.numpy()
    assert np.abs(q - q_warm).max() > 0.01  # the particles moved across cells while replaying
    np.testing.assert_array_equal(q, plain[2].particle_q.numpy())
    np.testing.assert_array_equal(graph[2].particle_qd.numpy(), plain[2].particle_qd.numpy())
    replayed = {tuple(p) for p in graph[5].particle_pairs().tolist()}
    assert replayed == {tuple(p) for p in plain[5].particle_pairs().tolist()} and replayed


def test_bad_grid_dim_and_foreign_contacts_raise():
    model = random_particles(20, 0.0, 0.2, 0.03, 0.05, seed=18)
    with pytest.raises(ValueError, match="grid_dim"):
        model.collide(model.state(), model.contacts(grid_dim=0))
    other = random_particles(30, 0.0, 0.2, 0.03, 0.05, seed=19)
    contacts = other.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other.collide(other.state(), contacts)
    with pytest.raises(ValueError, match="made by another model"):
        model.collide(model.state(), contacts)


def test_rollout_shares_one_cell_list_and_its_graphs_replay_bitwise():
    """A Rollout's per-step contacts all use the forward pass's cell list; capture changes no result."""
    torch = pytest.importorskip("torch")
    b = inertia.ModelBuilder(up_axis="z")
    b.add_particle_grid(3, 3, 3, pos=(0.0, 0.0, 0.06), cell_x=0.1, cell_y=0.1, cell_z=0.1, jitter=0.004,
                        radius_mean=0.05, vel=(0.2, 0.0, -0.5), seed=2)
    b.add_ground_plane()
    model = b.finalize(device=DEVICE, requires_grad=True)
    w = torch.tensor(np.random.default_rng(3).uniform(-1.0, 1.0, (7, 27, 3)), dtype=torch.float32)
    results = []
    for capture in (False, True):
        ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 6, 1.0 / 60.0, 4, checkpoint_every=3,
                             capture=capture)
        q0 = torch.tensor(model.particle_q.numpy())
        qd0 = torch.tensor(model.particle_qd.numpy()).requires_grad_(True)
        for _ in range(2):  # with capture, the second call replays every graph the first one captured
            qd0.grad = None
            q, qd = ro(q0, qd0)
            (q * w).sum().backward()
        assert ro.last_contact_peak[1] > 0  # particle pairs were found
        # one cell list serves every step's contacts: the model's collision pipeline owns it, per grid size
        assert {c.grid_dim for c in ro._seg_contacts} == {ro._fwd_contacts.grid_dim}
        assert list(model.collision._cell_lists) == [ro._fwd_contacts.grid_dim]
        assert torch.isfinite(qd0.grad).all() and qd0.grad.abs().max() > 0
        results.append((q.detach(), qd0.grad.clone()))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
