"""Tape gradients against central finite differences, and forces against energy gradients.

Every gradient test compares ``wp.Tape`` reverse mode with central differences
of the same float32 rollout (see ``gradcheck.py``); the spring test also uses a
float64 NumPy re-implementation as an independent reference. Run with ``-s`` to
see the measured relative errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import inertia
from inertia.geometry import dihedral_angle
from gradcheck import Rollout, central_difference, check, directional_difference, grad_dot, grad_entries

DEVICE = "cpu"


def finalize(builder):
    return builder.finalize(device=DEVICE, requires_grad=True)


def vec_entries(particles, axes=(0, 1, 2)):
    """Flat indices of the given components of a (n, 3) array."""
    return [3 * p + a for p in particles for a in axes]


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


def test_spring_system_gradients():
    steps, dt = 100, 1.0e-3
    model = finalize(spring_builder())
    r = Rollout(model, steps, dt, seed=1)
    r.backward()
    qd0, ke = r.states[0].particle_qd, model.spring_stiffness

    # independent float64 reference: the trajectory, then central differences with a tiny step
    x_ref = spring_rollout_f64(SPRING_V0, SPRING_KE, steps, dt)
    x_wp = r.states[-1].particle_q.numpy()
    assert np.abs(x_wp - x_ref).max() < 1e-5, "float32 rollout departs from the float64 reference"
    assert np.abs(x_ref - SPRING_X).max() > 0.05, "the scene barely moves: a weak test"

    def loss64(v0=SPRING_V0, k=SPRING_KE):
        return float(np.sum(spring_rollout_f64(v0, k, steps, dt) * r.wq_np))

    h = 1e-6
    fd64_v = np.array([(loss64(v0=SPRING_V0 + h * np.eye(12)[e].reshape(4, 3))
                        - loss64(v0=SPRING_V0 - h * np.eye(12)[e].reshape(4, 3))) / (2 * h) for e in range(12)])
    fd64_k = np.array([(loss64(k=SPRING_KE + h * np.eye(6)[e]) - loss64(k=SPRING_KE - h * np.eye(6)[e])) / (2 * h)
                       for e in range(6)])

    g_v = grad_entries(qd0, range(12))
    g_k = grad_entries(ke, range(6))
    check("springs d/dv0 vs float64 FD", g_v, fd64_v, tol=1e-4)
    check("springs d/dke vs float64 FD", g_k, fd64_k, tol=1e-4)

    # and against central differences of the float32 engine itself
    fd_v = central_difference(r.loss, qd0, list(range(12)), eps=1e-2)
    fd_k = central_difference(r.loss, ke, list(range(6)), eps=1.0)
    check("springs d/dv0 vs float32 FD", g_v, fd_v, tol=5e-3)
    check("springs d/dke vs float32 FD", g_k, fd_k, tol=2e-3)


# --------------------------------------------------------------------------- cloth
def test_falling_cloth_gradients():
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
    r.backward()
    x0, x1 = r.states[0].particle_q.numpy(), r.states[-1].particle_q.numpy()
    assert np.abs(x1 - x0).max() > 0.01

    qd0 = r.states[0].particle_qd
    ev = vec_entries([6, 12, 24])
    check("cloth d/dv0", grad_entries(qd0, ev), central_difference(r.loss, qd0, ev, eps=1e-2), tol=1e-2)

    # Material parameters: one triangle's mu hardly moves the sheet, so check directional
    # derivatives that move every triangle (each column scaled by its value, then a random mix).
    tm = model.tri_materials  # (n, 3): mu, lambda, damping
    base = tm.numpy().astype(np.float64)
    directions = []
    for col in range(3):
        d = np.zeros_like(base)
        d[:, col] = base[:, col]
        directions.append(d)
    directions.append(base * rng.uniform(-1.0, 1.0, base.shape))
    g = [grad_dot(tm, d) for d in directions]
    fd = [directional_difference(r.loss, tm, d, h=1e-2) for d in directions]
    check("cloth d/dtri_materials (mu, lambda, damping, mixed)", g, fd, tol=1e-2, floor=0.0)

    eb = model.edge_bending_properties  # (n, 2): ke, kd
    d_all = np.zeros((model.edge_count, 2))
    d_all[:, 0] = 1.0
    d_mix = d_all * rng.uniform(-1.0, 1.0, d_all.shape)
    g = [grad_dot(eb, d) for d in (d_all, d_mix)]
    fd = [directional_difference(r.loss, eb, d, h=1e-2) for d in (d_all, d_mix)]
    check("cloth d/dedge_ke (all, mixed)", g, fd, tol=1e-2, floor=0.0)


# --------------------------------------------------------------------------- one test per stage
def test_tetrahedra_gradients():
    """Soft block (1x1x1 cell, 5 tets) released from a deformed pose: d/dx0 and d/dk_mu."""
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_soft_grid(1, 1, 1, pos=(-0.05, -0.05, -0.05), density=1000.0, k_mu=1.0e4, k_lambda=2.0e4, k_damp=1.0)
    rng = np.random.default_rng(4)
    for p in range(b.particle_count):  # move the vertices off the rest shape (rest poses are already stored)
        b.particle_q[p] = tuple(np.asarray(b.particle_q[p]) + rng.uniform(-0.008, 0.008, 3))
    model = finalize(b)
    assert model.tet_count == 5
    r = Rollout(model, 40, 1.0e-3, seed=5)
    r.backward()

    q0 = r.states[0].particle_q
    eq = vec_entries([0, 3, 7])
    check("tets d/dx0", grad_entries(q0, eq), central_difference(r.loss, q0, eq, eps=5e-4), tol=1e-2)

    tm = model.tet_materials  # (n, 3): k_mu, k_lambda, k_damp
    et = [3 * t for t in range(5)]  # k_mu of every tet
    check("tets d/dk_mu", grad_entries(tm, et), central_difference(r.loss, tm, et, eps=50.0), tol=1e-2)


def test_bending_gradients():
    """A single hinge (4 particles, no membrane) released away from its rest angle."""
    b = inertia.ModelBuilder(gravity=0.0)
    x = [(0.1, -0.1, 0.0), (0.1, 0.1, 0.04), (0.0, 0.0, 0.0), (0.2, 0.0, 0.0)]
    for p, v in zip(x, [(0.0, 0.0, 0.1), (0.05, 0.0, -0.1), (0.0, 0.0, 0.0), (0.0, 0.02, 0.0)]):
        b.add_particle(p, v, mass=0.01, radius=0.01)
    b.add_edge(0, 1, 2, 3, edge_ke=0.05, edge_kd=1e-4, rest_angle=0.3)
    model = finalize(b)
    r = Rollout(model, 50, 1.0e-3, seed=6)
    r.backward()
    assert abs(r.states[-1].particle_q.numpy() - np.asarray(x)).max() > 5e-3

    qd0 = r.states[0].particle_qd
    ev = vec_entries([0, 1, 2])
    check("bending d/dv0", grad_entries(qd0, ev), central_difference(r.loss, qd0, ev, eps=1e-2), tol=1e-2)
    eb = model.edge_bending_properties
    check("bending d/d(ke, kd)", grad_entries(eb, [0, 1]),
          central_difference(r.loss, eb, [0, 1], eps=[5e-4, 1e-5]), tol=1e-2)
    ra = model.edge_rest_angle
    check("bending d/drest_angle", grad_entries(ra, [0]), central_difference(r.loss, ra, [0], eps=1e-2), tol=1e-2)


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

    qd0 = r.states[0].particle_qd
    check("ground contact d/dv0", grad_entries(qd0, [0, 1, 2]),
          central_difference(r.loss, qd0, [0, 1, 2], eps=1e-2), tol=1e-2)
    mu = model.shape_material_mu
    g_mu = grad_entries(mu, [0])
    check("ground contact d/dmu", g_mu, central_difference(r.loss, mu, [0], eps=5e-3), tol=1e-2)
    assert g_mu[0] < 0.0  # more friction: less far along +x (the loss weights favour +x)


def test_sphere_contact_friction_gradients():
    """A particle sliding over the top of a static sphere with friction."""
    b = inertia.ModelBuilder(gravity=-9.81)
    big, small, m, ke = 0.3, 0.02, 0.05, 2.0e3
    a = np.radians(15.0)
    n = np.array([np.sin(a), 0.0, np.cos(a)])
    b.add_particle(n * (big + small - m * 9.81 / ke), (0.1, 0.5, 0.0), mass=m, radius=small)
    b.add_shape_sphere(xform=((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), radius=big, ke=ke, kd=1.0, mu=0.3)
    model = finalize(b)
    r = Rollout(model, 80, 1.0e-3, wq=[[1.0, 1.0, 0.5]], collide=True)
    r.backward()
    assert r.contacts.counts()["soft_contacts"] == 1, "the particle should still touch the sphere"

    qd0 = r.states[0].particle_qd
    check("sphere contact d/dv0", grad_entries(qd0, [0, 1, 2]),
          central_difference(r.loss, qd0, [0, 1, 2], eps=1e-2), tol=1e-2)
    mu = model.shape_material_mu
    check("sphere contact d/dmu", grad_entries(mu, [0]), central_difference(r.loss, mu, [0], eps=5e-3), tol=1e-2)


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


def fd64_velocity(sim, v0, weights, h=1e-6):
    """Central differences of ``sum(weights * sim(v0))`` w.r.t. every entry of v0, in float64."""
    v0 = np.asarray(v0, dtype=np.float64)
    out = np.zeros(v0.size)
    for e in range(v0.size):
        d = np.zeros(v0.size)
        d[e] = h
        d = d.reshape(v0.shape)
        out[e] = (np.sum(sim(v0 + d) * weights) - np.sum(sim(v0 - d) * weights)) / (2 * h)
    return out


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
    r = Rollout(model, steps, dt, wq=[[0.3, 0.0, 1.0]], collide=True)
    r.backward()
    assert r.states[-1].particle_q.numpy()[0, 2] > 0.06 and r.contacts.counts()["soft_contacts"] == 0

    qd0 = r.states[0].particle_qd
    g_v = grad_entries(qd0, range(3))

    def sim(v, mat=(ke, kd, mu)):
        return contact_rollout_f64([x0], v, [m], [radius], steps, dt, (0.0, 0.0, -9.81), ground=mat)

    assert np.abs(sim(np.array([v0])) - r.states[-1].particle_q.numpy()).max() < 1e-5
    check("bounce d/dv0 vs float64 FD", g_v, fd64_velocity(sim, [v0], r.wq_np), tol=1e-3)
    # friction is smoothed on a 0.01 m/s scale, so the float32 step must stay well below it
    check("bounce d/dv0 vs float32 FD", g_v, central_difference(r.loss, qd0, [0, 1, 2], eps=2e-3), tol=1e-2)

    names = ("shape_material_ke", "shape_material_kd", "shape_material_mu")
    g_mat = np.array([grad_entries(getattr(model, n), [0])[0] for n in names])
    base = np.array([ke, kd, mu])
    fd64 = []
    for k in range(3):
        h = 1e-6 * base[k]
        up, dn = base.copy(), base.copy()
        up[k] += h
        dn[k] -= h
        fd64.append((np.sum(sim(np.array([v0]), up) * r.wq_np) - np.sum(sim(np.array([v0]), dn) * r.wq_np)) / (2 * h))
    check("bounce d/d(ke, kd, mu) vs float64 FD", g_mat, fd64, tol=1e-3, floor=0.0)
    # the damping term is a small effect here (kd = 0.1): float32 differences only for ke and mu
    # (mu with a smaller relative step: the sticking phase makes the loss kinked in mu on a ~1% scale)
    fd32 = [central_difference(r.loss, getattr(model, names[k]), [0], eps=rel * base[k])[0]
            for k, rel in ((0, 1e-2), (2, 3e-3))]
    check("bounce d/d(ke, mu) vs float32 FD", g_mat[[0, 2]], fd32, tol=1e-2, floor=0.0)


def test_reused_contacts_second_backward_and_reset():
    """One Contacts for all steps: a second backward() gives the same gradient, and tape.reset()
    starts a fresh contact history instead of accumulating one."""
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_particle((0.0, 0.0, 0.1), (0.5, 0.0, -1.0), mass=1.0, radius=0.05)  # no contact at step 0
    b.add_ground_plane(ke=1.0e4, kd=0.1, mu=0.3)
    model = finalize(b)
    steps = 65  # still in contact at the end
    r = Rollout(model, steps, 1.0e-3, wq=[[0.3, 0.0, 1.0]], collide=True)
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
    assert len(r.contacts._tape_record[3]) == steps  # one snapshot per recorded step, not 3 * steps


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
    r = Rollout(model, steps, dt, seed=7, collide=True)
    r.backward()
    q_end, v_end = r.states[-1].particle_q.numpy(), r.states[-1].particle_qd.numpy()
    assert np.linalg.norm(v_end[1]) > 0.1, "the particles should have collided"
    assert np.linalg.norm(q_end[0] - q_end[1]) > 0.1, "the particles should have separated"

    def sim(v):
        return contact_rollout_f64(x0, v, m, radius, steps, dt, (0.0, 0.0, 0.0), pair=(ke, kd, mu))

    assert np.abs(sim(np.array(v0)) - q_end).max() < 1e-5
    qd0 = r.states[0].particle_qd
    g = grad_entries(qd0, range(6))
    check(f"particle-particle ({mu=}, {kd=}) d/dv0 vs float64 FD", g, fd64_velocity(sim, v0, r.wq_np), tol=1e-3)
    if mu < 0.2:
        check(f"particle-particle ({mu=}, {kd=}) d/dv0 vs float32 FD", g,
              central_difference(r.loss, qd0, list(range(6)), eps=3e-3), tol=1e-2)


def test_gravity_gradient():
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_particle((0.0, 0.0, 0.0), (0.1, 0.0, 0.0), mass=0.2, radius=0.01)
    b.add_particle((0.1, 0.0, 0.05), (0.0, 0.2, 0.0), mass=0.1, radius=0.01)
    b.add_particle((0.0, -0.2, 0.0), (0.0, 0.0, 0.3), mass=0.3, radius=0.01)  # free
    b.add_spring(0, 1, ke=50.0, kd=0.1, rest_length=0.08)
    model = finalize(b)
    steps, dt = 60, 1.0e-3
    r = Rollout(model, steps, dt, seed=8)
    r.backward()
    g = grad_entries(model.gravity, [0, 1, 2])
    check("gravity", g, central_difference(r.loss, model.gravity, [0, 1, 2], eps=1e-1), tol=1e-2)
    # Uniform gravity shifts every (dynamic) particle alike and leaves the spring lengths alone, so
    # the loss is linear in g: with symplectic Euler, d x_T / d g = dt^2 T (T + 1) / 2 per particle.
    c = dt * dt * steps * (steps + 1) / 2
    np.testing.assert_allclose(g, c * r.wq_np.sum(axis=0), rtol=1e-4)


def test_particle_mass_gradient():
    """d loss / d particle_inv_mass (what the integrator reads) in a spring system."""
    model = finalize(spring_builder())
    r = Rollout(model, 60, 1.0e-3, seed=9)
    r.backward()
    w = model.particle_inv_mass
    e = [0, 1, 2, 3]
    h = 1e-2 * w.numpy()[e]
    check("inverse mass", grad_entries(w, e), central_difference(r.loss, w, e, eps=h), tol=1e-2)


# --------------------------------------------------------------------------- forces = -dE/dx
def one_step_forces(model) -> np.ndarray:
    """``particle_f`` of one step from the model's initial state (zero control, no gravity in the scenes)."""
    s0, s1 = model.state(), model.state()
    contacts = None
    if model.shape_count:
        contacts = model.contacts()
        model.collide(s0, contacts)
    inertia.SemiImplicitSolver(model).step(s0, s1, model.control(), contacts, 1.0e-4)
    return s1.particle_f.numpy().astype(np.float64)


def energy_gradient(energy, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences (float64) of ``energy(x)`` w.r.t. every coordinate of x (n, 3)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = (energy(xp) - energy(xm)) / (2 * h)
    return g


def check_force(name, f, f_ref, tol):
    """``f_ref`` is -dE/dx (or another exact reference force)."""
    scale = np.abs(f_ref).max()
    assert scale > 0.0, f"{name}: zero reference force, a vacuous check"
    err = np.abs(f - f_ref).max() / scale
    print(f"[force] {name}: max |f - f_ref| / max|f_ref| = {err:.2e} (tol {tol:.0e})")
    assert err < tol, f"{name}: force differs from the reference (rel err {err:.3e})\n f {f}\n f_ref {f_ref}"


def deformed(builder, amplitude, seed):
    rng = np.random.default_rng(seed)
    for p in range(builder.particle_count):
        builder.particle_q[p] = tuple(np.asarray(builder.particle_q[p]) + rng.uniform(-amplitude, amplitude, 3))


def snh_tet_psi(F, mu, lam):
    """Stable neo-Hookean energy density with the Lamé mapping of solvers/forces/tetrahedra.py (float64)."""
    m, l = 4.0 / 3.0 * mu, lam + 5.0 / 6.0 * mu
    ic = np.sum(F * F)
    alpha = 1.0 + 0.75 * m / l
    return 0.5 * m * (ic - 3.0) + 0.5 * l * (np.linalg.det(F) - alpha) ** 2 - 0.5 * m * np.log(ic + 1.0)


@pytest.mark.parametrize("amplitude", [0.01, 0.03, "inverted"], ids=["mild", "large", "inverted"])
def test_tet_forces_are_energy_gradient(amplitude):
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_soft_grid(1, 1, 1, density=1000.0, k_mu=1.0e4, k_lambda=3.0e4, k_damp=5.0)
    if amplitude == "inverted":  # push the top corner through the block: several tets turn inside out
        b.particle_q[7] = (0.02, 0.03, -0.04)
        deformed(b, 0.005, seed=12)
    else:
        deformed(b, amplitude, seed=10)
    model = b.finalize(device=DEVICE)
    x = model.particle_q.numpy().astype(np.float64)
    idx, poses, vols = model.tet_indices.numpy(), np.asarray(b.tet_poses), np.asarray(b.tet_volumes)
    mats = np.asarray(b.tet_materials)

    def energy(x):
        e = 0.0
        for t, (i, j, k, l) in enumerate(idx):
            ds = np.stack([x[j] - x[i], x[k] - x[i], x[l] - x[i]], axis=1)
            e += vols[t] * snh_tet_psi(ds @ poses[t], mats[t, 0], mats[t, 1])
        return e

    if amplitude == "inverted":
        assert min(np.linalg.det(np.stack([x[j] - x[i], x[k] - x[i], x[l] - x[i]], axis=1)) for i, j, k, l in idx) < 0
    check_force(f"tetrahedra ({amplitude=})", one_step_forces(model), -energy_gradient(energy, x), tol=2e-5)


def test_triangle_forces_are_energy_gradient():
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_cloth_grid(2, 2, tri_ke=500.0, tri_ka=800.0, tri_kd=3.0, edge_ke=0.0, edge_kd=0.0)
    deformed(b, 0.02, seed=11)
    model = b.finalize(device=DEVICE)
    x = model.particle_q.numpy().astype(np.float64)
    idx, poses, areas = model.tri_indices.numpy(), np.asarray(b.tri_poses), np.asarray(b.tri_areas)
    mats = np.asarray(b.tri_materials)

    def energy(x):
        e = 0.0
        for t, (i, j, k) in enumerate(idx):
            F = np.stack([x[j] - x[i], x[k] - x[i]], axis=1) @ poses[t]  # 3x2
            mu, lam = mats[t, 0], mats[t, 1] + mats[t, 0]
            J = np.linalg.norm(np.cross(F[:, 0], F[:, 1]))
            psi = 0.5 * mu * (np.sum(F * F) - 2.0) + 0.5 * lam * (J - (1.0 + mu / lam)) ** 2
            e += areas[t] * psi
        return e

    check_force("triangles", one_step_forces(model), -energy_gradient(energy, x), tol=2e-5)


def test_bending_forces_are_energy_gradient():
    b = inertia.ModelBuilder(gravity=0.0)
    x = [(0.1, -0.1, 0.02), (0.12, 0.09, 0.05), (0.0, 0.0, 0.0), (0.2, 0.01, -0.01)]
    for p in x:
        b.add_particle(p, mass=0.01, radius=0.01)
    ke, rest = 0.3, 0.2
    b.add_edge(0, 1, 2, 3, edge_ke=ke, edge_kd=0.1, rest_angle=rest)
    model = b.finalize(device=DEVICE)
    xs = model.particle_q.numpy().astype(np.float64)

    def energy(x):
        return 0.5 * ke * (dihedral_angle(*x) - rest) ** 2

    check_force("bending", one_step_forces(model), -energy_gradient(energy, xs), tol=2e-5)


def test_spring_forces_are_energy_gradient():
    b = spring_builder()
    b.gravity = (0.0, 0.0, 0.0)
    b.particle_qd = [(0.0, 0.0, 0.0)] * b.particle_count
    model = b.finalize(device=DEVICE)
    xs = model.particle_q.numpy().astype(np.float64)

    def energy(x):
        return sum(0.5 * ke * (np.linalg.norm(x[j] - x[i]) - l0) ** 2
                   for (i, j), ke, l0 in zip(b.spring_indices, b.spring_stiffness, b.spring_rest_length))

    check_force("springs", one_step_forces(model), -energy_gradient(energy, xs), tol=2e-5)


def _sdf_box(p, h):
    q = np.abs(p) - h
    return np.linalg.norm(np.maximum(q, 0.0)) if (q > 0).any() else q.max()


@pytest.mark.parametrize("shape", ["ground", "sphere", "box_face", "box_edge", "capsule"])
def test_contact_forces_are_penalty_gradient(shape):
    """At rest (no damping or friction force), contact forces are -d/dx of ke/2 depth^2."""
    b = inertia.ModelBuilder(gravity=0.0)
    ke, r = 2.0e3, 0.05
    xf = ((0.1, -0.2, 0.3), (0.0, 0.0, 0.0, 1.0))
    c = np.array(xf[0])
    if shape == "ground":
        b.add_ground_plane(ke=ke, kd=5.0, mu=0.5)
        p, sdf = (0.01, 0.02, 0.03), lambda x: x[2]
    elif shape == "sphere":
        b.add_shape_sphere(xform=xf, radius=0.2, ke=ke, kd=5.0, mu=0.5)
        p, sdf = c + (0.1, 0.1, 0.12), lambda x: np.linalg.norm(x - c) - 0.2
    elif shape in ("box_face", "box_edge"):
        h = np.array([0.2, 0.1, 0.15])
        b.add_shape_box(xform=xf, hx=h[0], hy=h[1], hz=h[2], ke=ke, kd=5.0, mu=0.5)
        p = c + ((0.05, 0.07, 0.13) if shape == "box_face" else (0.22, 0.11, 0.0))
        sdf = lambda x: _sdf_box(x - c, h)  # noqa: E731
    else:
        b.add_shape_capsule(xform=xf, radius=0.1, half_height=0.2, ke=ke, kd=5.0, mu=0.5)
        p = c + (0.08, 0.06, 0.1)
        sdf = lambda x: np.linalg.norm((x - c) - np.array([0.0, 0.0, np.clip((x - c)[2], -0.2, 0.2)])) - 0.1  # noqa: E731
    b.add_particle(p, mass=0.1, radius=r)
    model = b.finalize(device=DEVICE)
    xs = model.particle_q.numpy().astype(np.float64)
    depth0 = r - sdf(xs[0])
    assert 0.0 < depth0 < 2 * r, f"test setup: the particle should penetrate, depth {depth0}"

    def energy(x):
        return 0.5 * ke * max(r - sdf(x[0]), 0.0) ** 2

    check_force(f"contact {shape}", one_step_forces(model), -energy_gradient(energy, xs, h=1e-7), tol=2e-5)


def test_small_strain_forces_match_linear_elasticity():
    """k_mu / k_lambda (tets) and tri_ke / tri_ka (membranes) are Lame parameters: at small strain
    the forces are those of linear elasticity, sigma = 2 mu eps + lam tr(eps) I."""
    mu, lam = 2.0e4, 5.0e4
    eps3 = 1e-3 * np.array([[1.0, 0.4, -0.3], [0.4, -0.5, 0.2], [-0.3, 0.2, 0.7]])
    X = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.02, 0.12, 0.0], [0.03, 0.01, 0.09]])

    b = inertia.ModelBuilder(gravity=0.0)
    for p in X:
        b.add_particle(p, mass=1.0, radius=0.01)
    b.add_tetrahedron(0, 1, 2, 3, k_mu=mu, k_lambda=lam)
    for p in range(4):
        b.particle_q[p] = tuple(X[p] + eps3 @ X[p])
    dm_inv, vol = np.asarray(b.tet_poses[0]), b.tet_volumes[0]
    sigma = 2 * mu * eps3 + lam * np.trace(eps3) * np.eye(3)
    H = -vol * sigma @ dm_inv.T  # forces on vertices 1..3 (columns)
    f_lin = np.vstack([-H.sum(axis=1), H.T])
    order = list(b.tet_indices[0])
    f_ref = np.zeros((4, 3))
    f_ref[order] = f_lin
    check_force("tet small strain vs linear elasticity", one_step_forces(b.finalize(device=DEVICE)), f_ref, tol=5e-3)

    eps2 = 1e-3 * np.array([[0.8, 0.3], [0.3, -0.6]])
    Y = np.array([[0.0, 0.0], [0.1, 0.0], [0.03, 0.08]])
    b = inertia.ModelBuilder(gravity=0.0)
    for p in Y:
        b.add_particle((p[0], p[1], 0.0), mass=1.0, radius=0.01)
    b.add_triangle(0, 1, 2, tri_ke=mu, tri_ka=lam, tri_kd=0.0)
    for p in range(3):
        q = Y[p] + eps2 @ Y[p]
        b.particle_q[p] = (q[0], q[1], 0.0)
    dm = np.stack([Y[1] - Y[0], Y[2] - Y[0]], axis=1)
    area = 0.5 * abs(np.linalg.det(dm))
    sigma = 2 * mu * eps2 + lam * np.trace(eps2) * np.eye(2)
    H = -area * sigma @ np.linalg.inv(dm).T
    f_ref = np.zeros((3, 3))
    f_ref[1:, :2] = H.T
    f_ref[0, :2] = -H.sum(axis=1)
    check_force("triangle small strain vs linear elasticity", one_step_forces(b.finalize(device=DEVICE)), f_ref,
                tol=5e-3)
