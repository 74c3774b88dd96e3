"""Tape gradients of particle rollouts (springs, cloth, tets, bending, contact, gravity, mass) against
central differences, with the harness of ``gradcheck.py`` (directional derivatives over all entries of each
input, two steps, measured noise, nudged base points), and against float64 NumPy re-implementations of the
same discrete update where float32 differences cannot resolve a case. Run with ``-s`` to see the reports.
(Forces against energy gradients: ``test_forces_are_energy_gradients.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

import inertia
from gradcheck import Input, Rollout, check_against_reference, check_gradient

DEVICE = "cpu"


def finalize(builder):
    return builder.finalize(device=DEVICE, requires_grad=True)


def free_particles(model) -> np.ndarray:
    """(n, 1) mask of the particles that move (inverse mass > 0): a kinematic one's velocity is not an input."""
    return (model.particle_inv_mass.numpy() > 0.0)[:, None]


# --------------------------------------------------------------------------- springs
SPRING_X = np.array([[-0.1, -0.1, 0.0], [0.2, -0.1, 0.05], [0.0, 0.15, -0.05], [0.02, 0.0, 0.3]])
SPRING_M = np.array([0.1, 0.2, 0.15, 0.12])
SPRING_E = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
SPRING_KE = np.array([80.0, 120.0, 100.0, 150.0, 90.0, 110.0])
SPRING_KD = 0.05
SPRING_V0 = np.array([[0.2, -0.1, 0.3], [0.0, 0.4, -0.2], [-0.3, 0.1, 0.0], [0.1, 0.0, 0.5]])


def spring_builder():
    b = inertia.ModelBuilder(gravity=-9.81)
    for x, v, m in zip(SPRING_X, SPRING_V0, SPRING_M):
        b.add_particle(x, v, m, radius=0.01)
    for (i, j), ke in zip(SPRING_E, SPRING_KE):
        rest = 0.8 * np.linalg.norm(SPRING_X[i] - SPRING_X[j])  # start stretched: the springs work
        b.add_spring(i, j, ke=ke, kd=SPRING_KD, rest_length=rest)
    return b


def spring_rollout_f64(v0, ke, steps, dt, g=(0.0, 0.0, -9.81)):
    """The same dynamics (damped springs + symplectic Euler) in float64 NumPy."""
    x, v = SPRING_X.copy(), np.array(v0, dtype=np.float64).reshape(-1, 3).copy()
    w = 1.0 / SPRING_M
    rest = np.array([0.8 * np.linalg.norm(SPRING_X[i] - SPRING_X[j]) for i, j in SPRING_E])
    for _ in range(steps):
        f = np.zeros_like(x)
        for s, (i, j) in enumerate(SPRING_E):
            d = x[j] - x[i]
            length = np.linalg.norm(d)
            n = d / length
            fs = n * (ke[s] * (length - rest[s]) + SPRING_KD * np.dot(v[j] - v[i], n))
            f[i] += fs
            f[j] -= fs
        v = v + dt * (f * w[:, None] + np.asarray(g))
        x = x + dt * v
    return x


def fd64(loss, x, h=1e-6):
    """Central differences of a float64 function w.r.t. every entry of x (float64: h = 1e-6 is exact to ~1e-9)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.size)
    for e in range(x.size):
        d = np.zeros(x.size)
        d[e] = h
        out[e] = (loss(x + d.reshape(x.shape)) - loss(x - d.reshape(x.shape))) / (2 * h)
    return out.reshape(x.shape)


def test_spring_system_gradients():
    steps, dt = 100, 1.0e-3
    model = finalize(spring_builder())
    r = Rollout(model, steps, dt, seed=1, wqd=np.zeros((4, 3)))  # the float64 reference returns positions
    r.backward()
    qd0, ke = r.states[0].particle_qd, model.spring_stiffness

    # independent float64 reference: the trajectory, then central differences with a tiny step
    x_ref = spring_rollout_f64(SPRING_V0, SPRING_KE, steps, dt)
    x_wp = r.states[-1].particle_q.numpy()
    assert np.abs(x_wp - x_ref).max() < 1e-5, "float32 rollout departs from the float64 reference"
    assert np.abs(x_ref - SPRING_X).max() > 0.05, "the scene barely moves: a weak test"

    def loss64(v0=SPRING_V0, k=SPRING_KE):
        return float(np.sum(spring_rollout_f64(v0, k, steps, dt) * r.wq_np))

    check_against_reference("springs d/dv0 vs float64", qd0.grad.numpy(), fd64(lambda v: loss64(v0=v), SPRING_V0))
    check_against_reference("springs d/dke vs float64", ke.grad.numpy(), fd64(lambda k: loss64(k=k), SPRING_KE))

    # and against central differences of the float32 engine itself, velocities in the loss too
    r = Rollout(model, steps, dt, seed=1)
    check_gradient("springs", r.problem(qd0=r.states[0].particle_qd, ke=model.spring_stiffness),
                   [Input("qd0", 1e-2), Input("ke", 0.1, relative=True)], seed=1)


# --------------------------------------------------------------------------- cloth
def test_falling_cloth_gradients():
    """A 4x4 cloth pinned on one side, thrown: initial velocities, membrane materials, bending stiffness."""
    steps, dt = 60, 5.0e-4
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_cloth_grid(4, 4, pos=(-0.2, -0.2, 0.0), mass=0.05, fix_left=True, tri_ke=500.0, tri_ka=500.0, tri_kd=1.0,
                     edge_ke=0.5, edge_kd=0.0)
    rng = np.random.default_rng(3)
    qd = rng.uniform(-0.5, 0.5, (b.particle_count, 3))
    for p in range(b.particle_count):
        if b.particle_mass[p] > 0.0:
            b.particle_qd[p] = tuple(qd[p])
    model = finalize(b)
    assert model.tri_count == 32 and model.edge_count > 0
    r = Rollout(model, steps, dt, seed=2)
    x0 = r.states[0].particle_q.numpy()
    r.loss()
    assert np.abs(r.states[-1].particle_q.numpy() - x0).max() > 0.01
    # every triangle's (mu, lambda, damping) and every hinge's stiffness (its damping is 0 here: a relative
    # move of 0 is none, so only ke moves) in mixed directions: one triangle alone hardly moves the sheet
    problem = r.problem(qd0=r.states[0].particle_qd, tri=model.tri_materials, edge=model.edge_bending_properties)
    check_gradient("cloth", problem, [Input("qd0", 1e-2, mask=free_particles(model)),
                                      Input("tri", 0.05, relative=True), Input("edge", 0.05, relative=True)], seed=3)


# --------------------------------------------------------------------------- one test per stage
def test_tetrahedra_gradients():
    """Soft block (1x1x1 cell, 5 tets) released from a deformed pose: positions and all materials."""
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_soft_grid(1, 1, 1, pos=(-0.05, -0.05, -0.05), density=1000.0, k_mu=1.0e4, k_lambda=2.0e4, k_damp=1.0)
    rng = np.random.default_rng(4)
    for p in range(b.particle_count):  # move the vertices off the rest shape (rest poses are already stored)
        b.particle_q[p] = tuple(np.asarray(b.particle_q[p]) + rng.uniform(-0.008, 0.008, 3))
    model = finalize(b)
    assert model.tet_count == 5
    r = Rollout(model, 40, 1.0e-3, seed=5)
    check_gradient("tets", r.problem(q0=r.states[0].particle_q, tet=model.tet_materials),
                   [Input("q0", 5e-4), Input("tet", 0.05, relative=True)], seed=4)


def test_bending_gradients():
    """A single hinge (4 particles, no membrane) released away from its rest angle."""
    b = inertia.ModelBuilder(gravity=0.0)
    x = [(0.1, -0.1, 0.0), (0.1, 0.1, 0.04), (0.0, 0.0, 0.0), (0.2, 0.0, 0.0)]
    for p, v in zip(x, [(0.0, 0.0, 0.1), (0.05, 0.0, -0.1), (0.0, 0.0, 0.0), (0.0, 0.02, 0.0)]):
        b.add_particle(p, v, mass=0.01, radius=0.01)
    b.add_edge(0, 1, 2, 3, edge_ke=0.05, edge_kd=1e-4, rest_angle=0.3)
    model = finalize(b)
    r = Rollout(model, 50, 1.0e-3, seed=6)
    r.loss()
    assert abs(r.states[-1].particle_q.numpy() - np.asarray(x)).max() > 5e-3
    problem = r.problem(qd0=r.states[0].particle_qd, edge=model.edge_bending_properties, rest=model.edge_rest_angle)
    check_gradient("bending", problem, [Input("qd0", 1e-2), Input("edge", 0.05, relative=True), Input("rest", 1e-2)],
                   seed=5)


def test_ground_contact_friction_gradients():
    """A particle sliding on the ground under Coulomb friction (in contact all along)."""
    b = inertia.ModelBuilder(gravity=-9.81)
    m, radius, ke = 0.1, 0.05, 1.0e3
    b.add_particle((0.0, 0.0, radius - m * 9.81 / ke), (1.0, 0.3, 0.0), mass=m, radius=radius)
    b.add_ground_plane(ke=ke, kd=1.0, mu=0.4)
    model = finalize(b)
    r = Rollout(model, 100, 1.0e-3, wq=[[1.0, 0.5, 2.0]], wqd=[[0.3, -0.2, 0.1]], collide=True)
    r.backward()
    v_end = r.states[-1].particle_qd.numpy()[0]
    assert 0.5 < np.linalg.norm(v_end[:2]) < 1.0, "friction should slow the particle down but not stop it"
    assert model.shape_material_mu.grad.numpy()[0] < 0.0  # more friction: less far along +x (the weights favour +x)
    problem = r.problem(qd0=r.states[0].particle_qd, mu=model.shape_material_mu)
    check_gradient("ground contact", problem, [Input("qd0", 1e-2), Input("mu", 1e-2, relative=True)], seed=6)


def test_sphere_contact_friction_gradients():
    """A particle sliding over the top of a static sphere with friction."""
    b = inertia.ModelBuilder(gravity=-9.81)
    big, small, m, ke = 0.3, 0.02, 0.05, 2.0e3
    a = np.radians(15.0)
    n = np.array([np.sin(a), 0.0, np.cos(a)])
    b.add_particle(n * (big + small - m * 9.81 / ke), (0.1, 0.5, 0.0), mass=m, radius=small)
    b.add_shape_sphere(xform=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), radius=big, ke=ke, kd=1.0, mu=0.3)
    model = finalize(b)
    r = Rollout(model, 80, 1.0e-3, wq=[[1.0, 1.0, 0.5]], wqd=[[0.1, -0.1, 0.05]], collide=True)
    r.loss()
    assert r.contacts.counts()["soft_contacts"] == 1, "the particle should still touch the sphere"
    problem = r.problem(qd0=r.states[0].particle_qd, mu=model.shape_material_mu)
    # (5 % of mu: the particle slides throughout, and the loss moves little with mu here)
    check_gradient("sphere contact", problem, [Input("qd0", 1e-2), Input("mu", 0.05, relative=True)], seed=7)


def contact_rollout_f64(x0, v0, mass, radius, steps, dt, gravity, ground=None, pair=None, smoothing=0.01):
    """Float64 NumPy re-implementation of penalty contact + smoothed Coulomb friction + symplectic Euler.

    ``ground`` / ``pair``: (ke, kd, mu) for a ground plane at z = 0 / for every particle pair.
    """
    x, v = np.array(x0, dtype=np.float64), np.array(v0, dtype=np.float64)
    w = 1.0 / np.asarray(mass, dtype=np.float64)
    radius = np.asarray(radius, dtype=np.float64)

    def friction(vt, fn, mu, m):
        s2 = vt @ vt
        s = np.sqrt(s2 + 1e-20)
        return -vt * (min(mu * fn * s / np.sqrt(s2 + smoothing ** 2), m * s / dt) / s)

    def contact(n, depth, vrel, ke, kd, mu, m):
        vn = n @ vrel
        fn = max(ke * depth - kd * vn, 0.0)
        return n * fn + friction(vrel - n * vn, fn, mu, m)

    for _ in range(steps):
        f = np.zeros_like(x)
        for i in range(len(x)):
            if ground is not None and radius[i] - x[i, 2] > 0.0:
                f[i] += contact(np.array([0.0, 0.0, 1.0]), radius[i] - x[i, 2], v[i], *ground, 1.0 / w[i])
            for j in range(i + 1, len(x)):
                d = x[i] - x[j]
                dist = np.linalg.norm(d)
                if pair is not None and radius[i] + radius[j] - dist > 0.0:
                    fc = contact(d / dist, radius[i] + radius[j] - dist, v[i] - v[j], *pair, 1.0 / (w[i] + w[j]))
                    f[i] += fc
                    f[j] -= fc
        v = v + dt * (f * w[:, None] + np.asarray(gravity))
        x = x + dt * v
    return x


def test_ground_bounce_gradients():
    """A particle hits the ground, sticks through friction, and flies off: the contact set changes.

    The Contacts buffers are reused every step; the backward pass must still see each
    step's own contacts (a rollout that ends in the air used to get the free-flight gradient).
    """
    x0, v0, m, radius, ke, kd, mu = (0.0, 0.0, 0.06), (0.5, 0.0, -1.0), 1.0, 0.05, 1.0e4, 0.1, 0.3
    steps, dt = 200, 1.0e-3
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_particle(x0, v0, mass=m, radius=radius)
    b.add_ground_plane(ke=ke, kd=kd, mu=mu)
    model = finalize(b)
    r = Rollout(model, steps, dt, wq=[[0.3, 0.0, 1.0]], wqd=[[0.0, 0.0, 0.0]], collide=True)
    r.backward()
    assert r.states[-1].particle_q.numpy()[0, 2] > 0.06 and r.contacts.counts()["soft_contacts"] == 0

    def sim(v, mat=(ke, kd, mu)):
        return contact_rollout_f64([x0], v, [m], [radius], steps, dt, (0.0, 0.0, -9.81), ground=mat)

    assert np.abs(sim(np.array([v0])) - r.states[-1].particle_q.numpy()).max() < 1e-5
    check_against_reference("bounce d/dv0 vs float64", r.states[0].particle_qd.grad.numpy(),
                            fd64(lambda v: float(np.sum(sim(v) * r.wq_np)), np.array([v0])))
    names = ("shape_material_ke", "shape_material_kd", "shape_material_mu")
    g_mat = np.array([getattr(model, n).grad.numpy()[0] for n in names])
    base = np.array([ke, kd, mu])
    # float64 steps relative to each material value (ke ~ 1e4, kd ~ 0.1, mu ~ 0.3)
    fd_mat = fd64(lambda p: float(np.sum(sim(np.array([v0]), base * p) * r.wq_np)), np.ones(3))
    check_against_reference("bounce d/d(ke, kd, mu) vs float64", g_mat, fd_mat / base)

    # float32 central differences: friction is smoothed on a 0.01 m/s scale and the particle sticks
    # during the impact, so steps stay well below it (2 mm/s); the damping term is a small effect here
    # (kd = 0.1), so the float32 check moves ke and mu (the float64 one above covers kd)
    r = Rollout(model, steps, dt, wq=[[0.3, 0.0, 1.0]], wqd=[[0.1, 0.0, 0.1]], collide=True)
    problem = r.problem(qd0=r.states[0].particle_qd, ke=model.shape_material_ke, mu=model.shape_material_mu)
    check_gradient("bounce", problem, [Input("qd0", 2e-3), Input("ke", 1e-2, relative=True),
                                       Input("mu", 3e-3, relative=True)], seed=8)


def test_reused_contacts_second_backward_and_reset():
    """One Contacts for all steps: a second backward() gives the same gradient, and tape.reset()
    starts a fresh contact history instead of accumulating one."""
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_particle((0.0, 0.0, 0.1), (0.5, 0.0, -1.0), mass=1.0, radius=0.05)  # no contact at step 0
    b.add_ground_plane(ke=1.0e4, kd=0.1, mu=0.3)
    model = finalize(b)
    steps = 65  # still in contact at the end
    r = Rollout(model, steps, 1.0e-3, wq=[[0.3, 0.0, 1.0]], wqd=[[0.0, 0.0, 0.0]], collide=True)
    r.backward()
    qd0 = r.states[0].particle_qd
    g1 = qd0.grad.numpy().copy()
    assert r.contacts.counts()["soft_contacts"] == 1
    assert abs(g1[0, 2] - steps * 1.0e-3) > 0.01, "the contact must change the gradient (not free flight)"
    r.tape.zero()
    r.tape.backward(grads={r.states[-1].particle_q: r.wq})
    np.testing.assert_allclose(qd0.grad.numpy(), g1, rtol=1e-6, atol=1e-9)

    tape = r.tape
    for _ in range(3):
        tape.reset()
        with tape:
            r._run()
    # one snapshot per recorded step, not 3 * steps
    assert len(model.collision.history(tape, r.contacts)) == steps


@pytest.mark.parametrize("mu, kd", [(0.1, 0.1), (0.3, 1.0)], ids=["sliding", "sticking"])
def test_particle_particle_contact_gradients(mu, kd):
    """An oblique collision of two particles with friction; they separate again before the end.

    With mu = 0.3 the tangential slip stops during contact (the friction cap and its
    smoothing switch on and off), which makes the rollout kinked on a ~1e-3 m/s scale:
    float32 central differences cannot resolve that, so that case is checked against a
    float64 NumPy reference only.
    """
    x0 = [(-0.15, 0.0, 0.0), (0.0, 0.03, 0.0)]
    v0 = [(1.0, 0.0, 0.1), (0.0, 0.0, 0.0)]
    m, radius, ke = [0.1, 0.1], [0.05, 0.05], 1.0e4
    steps, dt = 160, 5.0e-4
    b = inertia.ModelBuilder(gravity=0.0)
    b.particle_ke, b.particle_kd, b.particle_mu = ke, kd, mu
    for p, v, mm, rr in zip(x0, v0, m, radius):
        b.add_particle(p, v, mass=mm, radius=rr)
    model = finalize(b)
    r = Rollout(model, steps, dt, seed=7, wqd=np.zeros((2, 3)), collide=True)
    r.backward()
    q_end, v_end = r.states[-1].particle_q.numpy(), r.states[-1].particle_qd.numpy()
    assert np.linalg.norm(v_end[1]) > 0.1, "the particles should have collided"
    assert np.linalg.norm(q_end[0] - q_end[1]) > 0.1, "the particles should have separated"

    def sim(v):
        return contact_rollout_f64(x0, v, m, radius, steps, dt, (0.0, 0.0, 0.0), pair=(ke, kd, mu))

    assert np.abs(sim(np.array(v0)) - q_end).max() < 1e-5
    check_against_reference(f"particle-particle ({mu=}, {kd=}) d/dv0 vs float64",
                            r.states[0].particle_qd.grad.numpy(),
                            fd64(lambda v: float(np.sum(sim(v) * r.wq_np)), np.array(v0)))
    if mu < 0.2:
        r = Rollout(model, steps, dt, seed=7, collide=True)
        check_gradient(f"particle-particle ({mu=}, {kd=})", r.problem(qd0=r.states[0].particle_qd),
                       [Input("qd0", 3e-3)], seed=9)


def test_gravity_gradient():
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_particle((0.0, 0.0, 0.0), (0.1, 0.0, 0.0), mass=0.2, radius=0.01)
    b.add_particle((0.1, 0.0, 0.05), (0.0, 0.2, 0.0), mass=0.1, radius=0.01)
    b.add_particle((0.0, -0.2, 0.0), (0.0, 0.0, 0.3), mass=0.3, radius=0.01)  # free
    b.add_spring(0, 1, ke=50.0, kd=0.1, rest_length=0.08)
    model = finalize(b)
    steps, dt = 60, 1.0e-3
    r = Rollout(model, steps, dt, seed=8, wqd=np.zeros((3, 3)))
    r.backward()
    g = model.gravity.grad.numpy()[0].astype(np.float64)
    # Uniform gravity shifts every (dynamic) particle alike and leaves the spring lengths alone, so
    # the loss is linear in g: with symplectic Euler, d x_T / d g = dt^2 T (T + 1) / 2 per particle
    # (float32 tape: a few ulps of the sum of 60 steps)
    c = dt * dt * steps * (steps + 1) / 2
    np.testing.assert_allclose(g, c * r.wq_np.sum(axis=0), rtol=1e-5)
    r = Rollout(model, steps, dt, seed=8)  # and with velocities in the loss, against central differences
    check_gradient("gravity", r.problem(gravity=model.gravity), [Input("gravity", 0.3)], seed=10)


def test_particle_mass_gradient():
    """d loss / d particle_inv_mass (what the integrator reads) in a spring system."""
    model = finalize(spring_builder())
    r = Rollout(model, 60, 1.0e-3, seed=9)
    check_gradient("inverse mass", r.problem(inv_mass=model.particle_inv_mass), [Input("inv_mass", 0.05, relative=True)],
                   seed=11)
