"""Many worlds in one Model: replicate / add_builder, world isolation, per-world parameters and reset.

Known answers: a world of a replicated model evolves exactly as a one-world model of the same scene
placed at the same offset (bitwise on the CPU: same arithmetic, one thread per entity, worlds only
filtered apart), and to float32 rounding of the offset as the scene at the origin; contacts never
join two worlds, even stacked at one place; a parameter changed in one world changes that world
only, and only the entities that depend on it; a reset restores exactly the masked worlds.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE
from gradcheck import Input, TapeProblem, check_gradient

G = 9.81
I = (0.0, 0.0, 0.0, 1.0)
DT = 1.0 / 2000


def quat(axis, angle):
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    return tuple(np.append(a * math.sin(angle / 2), math.cos(angle / 2)))


def scene(gravity=-G) -> inertia.ModelBuilder:
    """Particles, springs and cloth over a static pedestal; a box sliding on the ground with a pendulum on top.

    The ground is not part of the scene (the outer builder shares one). Index map: particles 0..15
    the 3x3-cell cloth, 16 a kinematic anchor, 17 a particle hanging from it by a spring; body 0 the
    box, body 1 the pendulum link (its capsule overlaps the box: the joint's exclusion keeps them apart).
    """
    b = inertia.ModelBuilder(gravity=gravity)
    b.add_shape_box(-1, xform=((1.0, 0.0, 0.2), I), hx=0.2, hy=0.2, hz=0.2, label="pedestal")
    b.add_cloth_grid(3, 3, pos=(0.85, -0.15, 0.46), mass=0.1, add_springs=True, spring_ke=50.0, spring_kd=0.01)
    anchor = b.add_particle((2.0, 0.0, 1.0), mass=0.0)
    bob = b.add_particle((2.2, 0.0, 1.0), mass=0.1)
    b.add_spring(anchor, bob, ke=200.0, kd=0.1)
    box = b.add_body(xform=((0.0, 0.0, 0.1), I), linear_velocity=(1.0, 0.0, 0.0), label="box")
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
    link = b.add_body(xform=((0.15, 0.0, 0.2), I), label="link")  # horizontal, hinged at the box's top edge
    b.add_shape_capsule(link, xform=((0.0, 0.0, 0.0), quat((0, 1, 0), math.pi / 2)), radius=0.02, half_height=0.15)
    b.add_joint_revolute(box, link, parent_xform=((0.0, 0.0, 0.1), I), child_xform=((-0.15, 0.0, 0.0), I),
                         axis=(0.0, 1.0, 0.0))
    return b


def outer(gravity=-G) -> inertia.ModelBuilder:
    b = inertia.ModelBuilder(gravity=gravity)
    b.add_ground_plane()
    return b


def make_solver(kind, model):
    return inertia.SemiImplicitSolver(model) if kind == "semi" else inertia.XPBDSolver(model, iterations=4)


def run(model, kind, steps, dt=DT):
    """Positions and velocities of particles and bodies after ``steps`` steps, and the last contacts."""
    solver = make_solver(kind, model)
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    for _ in range(steps):
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
    return {k: getattr(s0, k).numpy() for k in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q")}, contacts


def per_world(model, out, key, w):
    """World ``w``'s slice of a per-particle / per-body / per-coordinate array (world-contiguous layout)."""
    c = model.world_counts()
    n = {"particle": c["particles"], "body": c["bodies"], "joint": c["joint_coords"]}[key.split("_")[0]]
    return out[key][w * n:(w + 1) * n]


def assert_contacts_stay_in_their_world(model, contacts):
    shape_world, particle_world = model.shape_world.numpy(), model.particle_world.numpy()
    c = contacts.counts()
    pairs = contacts.rigid_pairs()
    assert len(pairs) > 0
    for a, b in pairs:
        assert shape_world[a] < 0 or shape_world[b] < 0 or shape_world[a] == shape_world[b], (a, b)
    n = c["soft_contacts"]
    assert n > 0
    p, s = contacts.soft_contact_particle.numpy()[:n], contacts.soft_contact_shape.numpy()[:n]
    assert np.all((shape_world[s] < 0) | (shape_world[s] == particle_world[p]))
    n = c["particle_pairs"]
    pp = contacts.particle_pair.numpy()[:n].reshape(n, 2)
    assert np.all(particle_world[pp[:, 0]] == particle_world[pp[:, 1]])
    return c


# --------------------------------------------------------------------------- isolation: replicated == single world
@pytest.mark.parametrize("kind", ["semi", "xpbd"])
def test_replicated_worlds_evolve_exactly_as_the_single_world_scene(kind):
    steps, n = 200, 3
    ref_b = outer()
    ref_b.add_builder(scene())
    ref = ref_b.finalize(device=DEVICE)
    ref_out, _ = run(ref, kind, steps)

    # stacked at one place: worlds overlap completely and still never touch
    stacked_b = outer()
    offsets = stacked_b.replicate(scene(), n, spacing=0.0)
    assert np.all(offsets == 0.0)
    stacked = stacked_b.finalize(device=DEVICE)
    assert stacked.num_worlds == n and stacked.world_counts() == {
        "particles": 18, "bodies": 2, "joints": 1, "joint_coords": 1, "joint_dofs": 1}
    out, contacts = run(stacked, kind, steps)
    counts = assert_contacts_stay_in_their_world(stacked, contacts)
    for w in range(n):
        for key in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q"):
            np.testing.assert_array_equal(per_world(stacked, out, key, w), ref_out[key], err_msg=f"world {w} {key}")

    # on a grid: world k is the scene placed at its offset (bitwise), and the scene at the origin to rounding
    grid_b = outer()
    offsets = grid_b.replicate(scene(), n, spacing=3.0)
    assert offsets.tolist() == [[0, 0, 0], [3, 0, 0], [0, 3, 0]]
    grid = grid_b.finalize(device=DEVICE)
    out, contacts = run(grid, kind, steps)
    assert_contacts_stay_in_their_world(grid, contacts)
    worst = 0.0
    for w in (1, 2):
        placed_b = outer()
        placed_b.add_builder(scene(), xform=(offsets[w], I))
        placed_out, _ = run(placed_b.finalize(device=DEVICE), kind, steps)
        for key in ("particle_q", "body_q", "body_qd", "joint_q"):
            np.testing.assert_array_equal(per_world(grid, out, key, w), placed_out[key], err_msg=f"world {w} {key}")
        dq = per_world(grid, out, "particle_q", w) - offsets[w] - ref_out["particle_q"]
        db = per_world(grid, out, "body_q", w)[:, :3] - offsets[w] - ref_out["body_q"][:, :3]
        worst = max(worst, np.abs(dq).max(), np.abs(db).max())
    print(f"{kind}: {n} stacked worlds bitwise = the single world ({counts['rigid_contacts']} rigid, "
          f"{counts['soft_contacts']} particle-shape contacts, all within their world); grid worlds "
          f"bitwise = the scene placed there, |x - offset - x_single| <= {worst:.2e} m")
    # XPBD takes velocities from (x' - x) / dt: float32 positions 3 m out are quantized to 2.4e-7 m, i.e.
    # 5e-4 m/s per step at this dt, which the box's friction (stick or slip) amplifies to millimetres
    assert worst < (1e-5 if kind == "semi" else 1e-2)
    # the shared ground (world -1) holds every world's box up; the pedestal (each world's own) holds its cloth
    box_z = out["body_q"][0::2, 2]
    assert np.all(box_z > 0.09) and np.all(box_z < 0.12), box_z
    cloth_z = out["particle_q"].reshape(n, 18, 3)[:, :16, 2]
    assert np.all(cloth_z > 0.43), cloth_z.min()
    assert np.abs(out["body_qd"][0::2, 0]).max() < 1.0  # friction with the shared ground slowed every box


# --------------------------------------------------------------------------- per-world parameters
def test_worlds_with_different_parameters_evolve_differently_and_identical_ones_identically():
    """World 0 and 5 are the baseline; 1: gravity, 2: box mass, 3: box friction, 4: spring stiffness."""
    b = outer()
    b.replicate(scene(), 6, spacing=0.0)
    model = b.finalize(device=DEVICE)
    c = model.world_counts()
    nb, npw = c["bodies"], c["particles"]
    g = model.gravity.numpy()
    assert g.shape == (6, 3) and np.all(g == np.float32([0.0, 0.0, -G]))
    g[1] = (0.0, 0.0, -0.3 * G)
    model.gravity.assign(g)
    box = [w * nb for w in range(6)]  # body 0 of each world
    for name, scale in (("body_mass", 2.0), ("body_inv_mass", 0.5), ("body_inertia", 2.0), ("body_inv_inertia", 0.5)):
        a = getattr(model, name).numpy()
        a[box[2]] *= scale
        getattr(model, name).assign(a)
    box_shapes = np.flatnonzero((model.shape_body.numpy() == box[3]))
    mu = model.shape_material_mu.numpy()
    mu[box_shapes] = 0.0
    model.shape_material_mu.assign(mu)
    springs_per_world = model.spring_count // 6
    ke = model.spring_stiffness.numpy()
    assert np.all(model.spring_world.numpy()[4 * springs_per_world:5 * springs_per_world] == 4)
    ke[5 * springs_per_world - 1] *= 0.25  # the hanging particle's spring (the last spring of world 4)
    model.spring_stiffness.assign(ke)

    out, _ = run(model, "semi", 200)
    pq = out["particle_q"].reshape(6, npw, 3)
    bq = out["body_q"].reshape(6, nb, 7)
    cloth, bob = slice(0, 16), 17
    np.testing.assert_array_equal(pq[5], pq[0])
    np.testing.assert_array_equal(bq[5], bq[0])
    # weaker gravity: the hanging particle has swung down less; the cloth meets the pedestal later
    assert pq[1, bob, 2] > pq[0, bob, 2] + 1e-2 and np.abs(pq[1, cloth] - pq[0, cloth]).max() > 1e-4
    # a heavier box: same particles, different bodies (the pendulum pushes it less)
    np.testing.assert_array_equal(pq[2], pq[0])
    assert np.abs(bq[2] - bq[0]).max() > 1e-4
    # less friction on the box: it slides further; the particles do not notice
    np.testing.assert_array_equal(pq[3], pq[0])
    assert bq[3, 0, 0] > bq[0, 0, 0] + 1e-3
    # a softer spring: the hanging particle stretches it further; nothing else changes
    np.testing.assert_array_equal(bq[4], bq[0])
    np.testing.assert_array_equal(pq[4, cloth], pq[0, cloth])
    stretch = [np.linalg.norm(pq[w, bob] - pq[w, 16]) - 0.2 for w in (0, 4)]
    assert stretch[1] > 1.3 * stretch[0] > 0.0, stretch
    print(f"per-world parameters: hanging particle z {pq[0, bob, 2]:.4f} (g) vs {pq[1, bob, 2]:.4f} "
          f"(0.3 g); box x {bq[0, 0, 0]:.4f} (mu 0.5) vs {bq[3, 0, 0]:.4f} (mu 0.25); spring stretch "
          f"{stretch[0]:.4f} vs {stretch[1]:.4f} m (ke / 4); heavy box differs by {np.abs(bq[2] - bq[0]).max():.2e}")


def test_per_world_gravity_moves_bodies_and_particles_in_both_solvers():
    """Free fall under each world's own gravity, bodies and particles, SemiImplicit and XPBD (closed form)."""
    s = inertia.ModelBuilder(gravity=-G)
    s.add_particle((0.0, 0.0, 1.0), mass=1.0)
    body = s.add_body(xform=((0.5, 0.0, 1.0), I))
    s.add_shape_sphere(body, radius=0.1)
    b = inertia.ModelBuilder(gravity=-G)
    b.replicate(s, 3, spacing=1.0)
    model = b.finalize(device=DEVICE)
    g = np.array([[0, 0, -G], [0, 0, -1.62], [1.0, -2.0, 3.0]], dtype=np.float32)
    model.gravity.assign(g)
    x0 = model.particle_q.numpy().astype(np.float64)
    b0 = model.body_q.numpy()[:, :3].astype(np.float64)
    n, dt = 20, 0.01
    for kind in ("semi", "xpbd"):
        # the SemiImplicitSolver splits a step beyond its stable step (here the particle's possible contact with
        # the spheres) into s substeps: then symplectic Euler takes n s steps of dt / s
        s = inertia.SemiImplicitSolver(model).substeps(dt) if kind == "semi" else 1
        h, steps = dt / s, n * s
        drop = g.astype(np.float64) * h * h * steps * (steps + 1) / 2  # x_k = x_0 + g h^2 k (k + 1) / 2
        out, _ = run(model, kind, n, dt)
        err = max(np.abs(out["particle_q"] - x0 - drop).max(), np.abs(out["body_q"][:, :3] - b0 - drop).max())
        print(f"{kind}: free fall under 3 gravities (drops {np.abs(drop).max(axis=1).round(4)} m), "
              f"|x - x_closed_form| <= {err:.1e} m")
        # XPBD's velocities are (x' - x) / dt of float32 positions (~2 m: 2.4e-7 m apart): an error of up to
        # n (n + 1) / 2 such steps in position; the SemiImplicitSolver's only the rounding of x += dt v
        assert err < (1e-6 if kind == "semi" else steps * (steps + 1) / 2 * 2.4e-7)
        if kind == "semi":
            np.testing.assert_allclose(out["particle_qd"], g * n * dt, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(out["body_qd"][:, :3], g * n * dt, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["semi", "xpbd"])
def test_per_world_gravity_gradients_match_central_differences(kind):
    """d loss / d gravity[w] through particles (a spring, a free particle) and a tumbling body, per world."""
    s = inertia.ModelBuilder(gravity=-G)
    anchor = s.add_particle((0.0, 0.0, 1.0), mass=0.0)
    s.add_spring(anchor, s.add_particle((0.2, 0.0, 1.0), mass=0.1), ke=50.0, kd=0.1)
    s.add_particle((0.0, 0.3, 1.0), vel=(0.1, 0.0, 0.5), mass=0.2)
    body = s.add_body(xform=((0.5, 0.0, 1.0), quat((1, 2, 3), 0.4)), angular_velocity=(0.3, 0.2, 0.1))
    s.add_shape_box(body, hx=0.1, hy=0.05, hz=0.02)
    b = inertia.ModelBuilder(gravity=-G)
    b.replicate(s, 2, spacing=1.0)
    model = b.finalize(device=DEVICE, requires_grad=True)
    steps, dt = 30, 1.0e-2  # long enough that gravity moves things well above float32 rounding
    rng = np.random.default_rng(4)
    wq = rng.uniform(-1.0, 1.0, (model.particle_count, 3))
    wb = np.zeros((model.body_count, 7))
    wb[:, :3] = rng.uniform(-1.0, 1.0, (model.body_count, 3))  # body positions only
    solver = make_solver(kind, model)
    states = [model.state() for _ in range(steps + 1)]
    control = model.control()

    def forward():
        for t in range(steps):
            solver.step(states[t], states[t + 1], control, None, dt)
        return states[-1]

    def loss():
        last = forward()
        return float(np.sum(last.particle_q.numpy() * wq) + np.sum(last.body_q.numpy() * wb))

    def tape_grad(wq, wb):
        model.gravity.grad.zero_()
        tape = wp.Tape()
        with tape:
            last = forward()
        tape.backward(grads={last.particle_q: wp.array(wq.astype(np.float32), dtype=wp.vec3, device=DEVICE),
                             last.body_q: wp.array(wb.astype(np.float32), dtype=wp.transform, device=DEVICE)})
        g = model.gravity.grad.numpy().astype(np.float64).copy()
        tape.zero()
        for st in states:
            st.zero_grad()
        return g

    def backward():
        model.gravity.grad.assign(tape_grad(wq, wb).astype(np.float32))

    reports = check_gradient(f"{kind} gravity per world", TapeProblem({"gravity": model.gravity}, loss, backward),
                             [Input("gravity", 0.3)], seed=18)
    # world 1's gravity only reaches world 1's entities: without their weights its gradient is exactly 0
    wq1, wb1 = wq.copy(), wb.copy()
    wq1[3:], wb1[1:] = 0.0, 0.0
    g0 = tape_grad(wq1, wb1)
    print(f"{kind}: gravity gradient per world {tape_grad(wq, wb).round(5).tolist()}, error vs central differences "
          f"{reports[0].error:.1e}; world 0's loss only: {g0.round(5).tolist()}")
    assert np.all(g0[1] == 0.0) and np.abs(g0[0]).max() > 1e-4


# --------------------------------------------------------------------------- reset
def snapshot(state):
    return {k: getattr(state, k).numpy().copy() for k in
            ("particle_q", "particle_qd", "particle_f", "body_q", "body_qd", "body_f", "joint_q", "joint_qd")}


def check_reset(model, before, after, initial, mask):
    c = model.world_counts()
    size = {"particle": c["particles"], "body": c["bodies"], "joint_q": c["joint_coords"],
            "joint_qd": c["joint_dofs"]}
    for key in before:
        n = size["joint_q" if key == "joint_q" else "joint_qd" if key == "joint_qd" else key.split("_")[0]]
        for w, m in enumerate(mask):
            sl = slice(w * n, (w + 1) * n)
            expected = initial[key][sl] if m else before[key][sl]
            np.testing.assert_array_equal(after[key][sl], expected, err_msg=f"{key} world {w} mask {m}")


def test_reset_restores_masked_worlds_and_leaves_the_others_bitwise_and_is_capturable():
    b = outer()
    b.replicate(scene(), 4, spacing=2.0)
    model = b.finalize(device=DEVICE)
    initial = snapshot(model.state())
    solver = inertia.SemiImplicitSolver(model)
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()

    def advance(k):
        nonlocal s0, s1
        for _ in range(k):
            model.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, DT)
            s0, s1 = s1, s0

    advance(40)
    before = snapshot(s0)
    for key in ("particle_q", "body_q", "joint_q"):
        assert not np.array_equal(before[key], initial[key])
    mask = [True, False, True, False]
    model.reset_worlds(s0, mask)
    check_reset(model, before, snapshot(s0), initial, mask)

    # a device mask (int32, then bool), recorded once in a graph and replayed with new mask contents
    advance(20)
    device_mask = wp.array([0, 1, 0, 0], dtype=wp.int32, device=DEVICE)
    model.reset_worlds(s0, device_mask)  # load the kernels before capturing
    advance(10)
    state = s0
    with wp.ScopedCapture(device=DEVICE) as capture:
        model.reset_worlds(state, device_mask)
    for m in ([0, 0, 0, 1], [1, 1, 0, 0]):
        advance(10)  # an even number of steps: the captured state is the current one again
        assert state is s0
        before = snapshot(state)
        device_mask.assign(np.array(m, dtype=np.int32))
        wp.capture_launch(capture.graph)
        check_reset(model, before, snapshot(state), initial, m)
    bool_mask = wp.array([False, False, True, True], dtype=wp.bool, device=DEVICE)
    before = snapshot(s0)
    model.reset_worlds(s0, bool_mask)
    check_reset(model, before, snapshot(s0), initial, [0, 0, 1, 1])
    print("reset: masked worlds == initial state bitwise, others untouched; replayed from a captured graph")


# --------------------------------------------------------------------------- add_builder remapping
def test_add_builder_remaps_indices_transforms_copies_and_keeps_joint_exclusions():
    sc = scene()
    tet = [sc.add_particle(p, mass=0.1) for p in ((3, 0, 0.5), (3.1, 0, 0.5), (3, 0.1, 0.5), (3, 0, 0.6))]
    sc.add_tetrahedron(*tet)
    arm = sc.add_body(xform=((4.0, 0.0, 1.0), I))
    sc.add_shape_box(arm, hx=0.05, hy=0.05, hz=0.05)
    sc.add_joint_revolute(-1, arm, parent_xform=((4.0, 0.0, 1.2), I), child_xform=((0.0, 0.0, 0.2), I),
                          axis=(1.0, 0.0, 0.0))
    b = outer()
    b.add_particle((9.0, 9.0, 9.0))  # the outer builder's own entities come first, in world 0
    b.add_body(xform=((9.0, 9.0, 9.0), I), mass=1.0, inertia=(1.0, 1.0, 1.0))
    rot = quat((0.3, -0.5, 0.8), 0.7)
    xf = ((1.0, -2.0, 0.5), rot)
    assert b.add_builder(sc, xform=xf) == 1
    assert b.add_builder(sc, world=2, shared_static=True) == 2
    assert b.num_worlds == 3
    src = sc.finalize(device=DEVICE)
    model = b.finalize(device=DEVICE)
    npart, nb, ns, nj = src.particle_count, src.body_count, src.shape_count, src.joint_count
    assert model.particle_count == 1 + 2 * npart and model.body_count == 1 + 2 * nb
    assert model.world_counts() is None  # world 0 holds one particle and one body only

    R = np.array(wp.quat_to_matrix(wp.quat(*rot)), dtype=np.float64).reshape(3, 3)
    sq = src.particle_q.numpy().astype(np.float64)
    first = slice(1, 1 + npart)
    np.testing.assert_allclose(model.particle_q.numpy()[first], sq @ R.T + xf[0], atol=2e-6)
    np.testing.assert_array_equal(model.particle_q.numpy()[1 + npart:], src.particle_q.numpy())
    np.testing.assert_allclose(model.particle_qd.numpy()[first], src.particle_qd.numpy() @ R.T, atol=1e-6)
    for name, off in (("spring_indices", 1), ("tri_indices", 1), ("edge_indices", 1), ("tet_indices", 1)):
        got, orig = getattr(model, name).numpy().reshape(-1), getattr(src, name).numpy().reshape(-1)
        np.testing.assert_array_equal(got, np.concatenate([orig + off, orig + off + npart]), err_msg=name)
    for name in ("spring_world", "tri_world", "edge_world", "tet_world"):
        n = getattr(src, name.split("_")[0] + "_count")
        np.testing.assert_array_equal(getattr(model, name).numpy(), [1] * n + [2] * n, err_msg=name)
    # the rotated tet keeps its rest shape: no force at rest, in the rotated copy too
    np.testing.assert_allclose(model.tet_poses.numpy()[0], src.tet_poses.numpy()[0] @ R.T, rtol=1e-5, atol=1e-5)
    parent, child = model.joint_parent.numpy(), model.joint_child.numpy()
    np.testing.assert_array_equal(parent, np.concatenate([np.where(p >= 0, p + off, -1) for off in (1, 1 + nb)
                                                          for p in [src.joint_parent.numpy()]]))
    np.testing.assert_array_equal(child, np.concatenate([src.joint_child.numpy() + off for off in (1, 1 + nb)]))
    np.testing.assert_array_equal(model.joint_world.numpy(), [1] * nj + [2] * nj)
    sb = src.shape_body.numpy()
    np.testing.assert_array_equal(model.shape_body.numpy()[1:], np.concatenate(
        [np.where(sb >= 0, sb + 1, -1), np.where(sb >= 0, sb + 1 + nb, -1)]))
    sw = model.shape_world.numpy()
    assert sw[0] == -1  # the outer ground: shared
    np.testing.assert_array_equal(sw[1:1 + ns], [1] * ns)  # static pedestal of copy 1 belongs to its world
    np.testing.assert_array_equal(sw[1 + ns:], np.where(sb >= 0, 2, -1))  # shared_static=True
    for name in ("body_mass", "body_inertia", "body_com", "shape_material_mu", "spring_stiffness", "joint_axis",
                 "joint_limit_lower", "joint_target_ke", "shape_scale", "tri_materials"):
        np.testing.assert_array_equal(getattr(model, name).numpy()[-len(getattr(src, name)):],
                                      getattr(src, name).numpy(), err_msg=name)
    assert model.body_label[1:] == 2 * src.body_label and model.joint_label == 2 * src.joint_label
    # a rigid motion of the whole copy leaves joint coordinates as they were (the world-attached hinge too)
    s_model, s_src = model.state(), src.state()
    np.testing.assert_allclose(s_model.joint_q.numpy(), np.tile(s_src.joint_q.numpy(), 2), atol=1e-6)
    # body poses: the copy's points are the original's moved by xf
    pose, pose0 = model.body_q.numpy()[1:1 + nb].astype(np.float64), src.body_q.numpy().astype(np.float64)
    np.testing.assert_allclose(pose[:, :3], pose0[:, :3] @ R.T + xf[0], atol=2e-6)
    # exclusions: the box and its pendulum link overlap but never collide, in either copy; they would without
    body_of = model.shape_body.numpy()

    def box_link_pairs(m):
        contacts = m.contacts()
        m.collide(m.state(), contacts)
        pairs = {tuple(p) for p in contacts.rigid_pairs()}
        return [any({body_of[a], body_of[c]} == {1 + k * nb, 2 + k * nb} for a, c in pairs) for k in (0, 1)], pairs

    found, pairs = box_link_pairs(model)
    assert found == [False, False] and len(pairs) >= 1  # copy 2 (not moved) rests on the ground
    b.joint_collide_parent[:] = [True] * len(b.joint_collide_parent)
    assert box_link_pairs(b.finalize(device=DEVICE))[0] == [True, True]
    print(f"add_builder: {len(pairs)} shape pairs, none between a joint's parent and child (with collide_parent: "
          "one per copy)")


def test_replicate_layout_mesh_sharing_and_shared_static_once():
    s = scene()
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64) * 0.1
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    body = s.add_body(xform=((5.0, 0.0, 0.5), I))
    s.add_shape_mesh(body, vertices=verts, indices=faces)
    b = outer()
    offsets = b.replicate(s, 5, spacing=(1.0, 0.0, 2.0), shared_static=True)
    assert offsets.tolist() == [[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 0, 2], [1, 0, 2]]
    model = b.finalize(device=DEVICE)
    sw = model.shape_world.numpy()
    assert np.count_nonzero(sw == -1) == 2  # the outer ground and the scene's pedestal, added once
    assert len({m.id for m in model.shape_meshes}) == 1 and len(model.shape_meshes) == 5
    bw = model.body_world.numpy()
    np.testing.assert_array_equal(bw, np.repeat(np.arange(5), 3))
    np.testing.assert_array_equal(model.particle_world.numpy(), np.repeat(np.arange(5), 18))
    assert model.world_counts()["bodies"] == 3
    # replicate after something in world 0: the copies go to worlds 1.. and the layout is no longer uniform
    b = outer()
    b.add_builder(s)
    b.replicate(s, 2)
    assert b.num_worlds == 3 and b.finalize(device=DEVICE).world_counts() is not None
    b.add_particle((0.0, 0.0, 0.0))  # current_world 0: world 0 gets one more particle
    assert b.finalize(device=DEVICE).world_counts() is None


# --------------------------------------------------------------------------- bad input
def test_bad_world_input_is_refused_with_a_clear_error():
    s = scene()
    b = outer()
    for n, err in ((0, ValueError), (-3, ValueError), (1.5, ValueError), (True, ValueError)):
        with pytest.raises(err, match="num_worlds must be an integer >= 1"):
            b.replicate(s, n)
    for spacing in (float("nan"), float("inf"), (1.0, float("nan"), 0.0)):
        with pytest.raises(ValueError, match="spacing must be finite"):
            b.replicate(s, 2, spacing=spacing)
    with pytest.raises(ValueError, match="spacing must have 3 components"):
        b.replicate(s, 2, spacing=(1.0, 2.0))
    with pytest.raises(IndexError, match="world 1 out of range"):
        b.add_builder(s, world=1)  # nothing is in any world yet: only world 0 can be next
    for w in (-1, 2.0, "0"):
        with pytest.raises(IndexError, match="out of range"):
            b.add_builder(s, world=w)
    b.add_builder(s)
    with pytest.raises(IndexError, match=r"world 3 out of range: expected an existing world 0..0 or the next new one"):
        b.add_builder(s, world=3)
    with pytest.raises(ValueError, match="cannot be added to itself"):
        b.add_builder(b)
    with pytest.raises(TypeError, match="expected a ModelBuilder"):
        b.add_builder("robot")
    with pytest.raises(ValueError, match="current_world must be an integer >= 0"):
        b.current_world = -1
    with pytest.raises(ValueError, match="num_worlds = 0 is too few|num_worlds must be"):
        b.num_worlds = 0
    # an element or a joint across two worlds would join them
    two = inertia.ModelBuilder()
    p0 = two.add_particle((0, 0, 0))
    b0 = two.add_body(mass=1.0, inertia=(1, 1, 1))
    two.current_world = 1
    p1 = two.add_particle((1, 0, 0))
    b1 = two.add_body(mass=1.0, inertia=(1, 1, 1))
    with pytest.raises(ValueError, match="different worlds"):
        two.add_spring(p0, p1)
    with pytest.raises(ValueError, match="different worlds"):
        two.add_joint_ball(b0, b1)
    with pytest.raises(ValueError, match="copy one world"):
        inertia.ModelBuilder().add_builder(two)
    # reset: the mask's length, type and device; the state's model; no tape
    b = outer()
    b.replicate(s, 2)
    model = b.finalize(device=DEVICE)
    state = model.state()
    with pytest.raises(ValueError, match="mask must have 2 entries"):
        model.reset_worlds(state, [1, 0, 1])
    with pytest.raises(TypeError, match="booleans or integers"):
        model.reset_worlds(state, [0.5, 1.0])
    with pytest.raises(TypeError, match="mask dtype float32"):
        model.reset_worlds(state, wp.zeros(2, dtype=float, device=DEVICE))
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        model.reset_worlds(state, wp.zeros(3, dtype=wp.int32, device=DEVICE))
    with pytest.raises(ValueError, match="not a state of it"):
        model.reset_worlds(scene().finalize(device=DEVICE).state(), [1, 1])
    with wp.Tape():
        with pytest.raises(RuntimeError, match="not differentiable"):
            model.reset_worlds(state, [1, 1])


# --------------------------------------------------------------------------- scale
def legged_robot() -> inertia.ModelBuilder:
    """20 bodies: a free torso, four 4-link legs with feet, a head (fixed) and a 2-link tail (ball joints)."""
    b = inertia.ModelBuilder()
    torso = b.add_body(xform=((0.0, 0.0, 0.6), I), label="torso")
    b.add_shape_box(torso, hx=0.3, hy=0.15, hz=0.05)
    b.add_joint_free(torso)
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        parent, anchor = torso, (0.25 * sx, 0.2 * sy, 0.0)
        for k in range(4):
            link = b.add_body(xform=((0.25 * sx, 0.2 * sy, 0.6 - 0.05 - 0.1 * k), I))
            b.add_shape_capsule(link, radius=0.03, half_height=0.04)
            b.add_joint_revolute(parent, link, parent_xform=(anchor, I), child_xform=((0.0, 0.0, 0.05), I),
                                 axis=(0.0, 1.0, 0.0), target_ke=10.0, target_kd=1.0, limit_lower=-1.0, limit_upper=1.0)
            parent, anchor = link, (0.0, 0.0, -0.05)
        b.add_shape_sphere(parent, xform=((0.0, 0.0, -0.05), I), radius=0.03)
    head = b.add_body(xform=((0.35, 0.0, 0.65), I))
    b.add_shape_sphere(head, radius=0.06)
    b.add_joint_fixed(torso, head, parent_xform=((0.35, 0.0, 0.05), I))
    parent, anchor = torso, (-0.3, 0.0, 0.0)
    for k in range(2):
        tail = b.add_body(xform=((-0.35 - 0.1 * k, 0.0, 0.6), I))
        b.add_shape_capsule(tail, xform=((0, 0, 0), quat((0, 1, 0), math.pi / 2)), radius=0.02, half_height=0.03)
        b.add_joint_ball(parent, tail, parent_xform=(anchor, I), child_xform=((0.05, 0.0, 0.0), I))
        parent, anchor = tail, (-0.05, 0.0, 0.0)
    return b


def test_replicating_1024_robots_gives_1024_identical_worlds():
    """(How long it takes is benchmark output: ``python benchmarks/worlds.py``, printed here for information.)"""
    robot = legged_robot()
    assert robot.body_count == 20
    t0 = time.perf_counter()
    b = outer()
    b.replicate(robot, 1024, spacing=2.0)
    t1 = time.perf_counter()
    model = b.finalize(device=DEVICE)
    t2 = time.perf_counter()
    state = model.state()
    t3 = time.perf_counter()
    print(f"1,024 x 20-body robots ({model.body_count} bodies, {model.shape_count} shapes, {model.joint_count} "
          f"joints): replicate {t1 - t0:.2f} s, finalize {t2 - t1:.2f} s, model.state() {t3 - t2:.2f} s")
    assert model.num_worlds == 1024
    assert model.world_counts() == {"particles": 0, "bodies": 20, "joints": 20, "joint_coords": 7 + 16 + 8,
                                    "joint_dofs": 6 + 16 + 6}
    # the same mass properties and joint coordinates in every world as in the robot alone
    single = robot.finalize(device=DEVICE)
    np.testing.assert_array_equal(model.body_mass.numpy().reshape(1024, 20),
                                  np.tile(single.body_mass.numpy(), (1024, 1)))
    np.testing.assert_array_equal(model.body_inv_inertia.numpy().reshape(1024, 20, 3, 3)[-1],
                                  single.body_inv_inertia.numpy())
    jq = state.joint_q.numpy().reshape(1024, -1)
    np.testing.assert_allclose(jq[:, 7:], np.tile(single.state().joint_q.numpy()[7:], (1024, 1)), atol=1e-6)
    fk = model.joint_fk_order.numpy()
    assert model.articulation_count == 1024 and np.all(model.joint_world.numpy()[fk] == np.repeat(np.arange(1024), 20))
