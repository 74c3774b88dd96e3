"""Contact against known answers: static penetration, Coulomb sliding, granular settling, static
colliders, momentum of particle-particle contact, buffer overflow and element exclusions.

Penalty contact: f_n = max(ke d - kd v_n, 0) with d the penetration, so a particle
at rest on a surface penetrates exactly d = m g / ke with absolute gains, and
d = g tau^2 with the default mass-scaled ones (ke = m / tau^2 for a particle on a
static shape; tests/test_contact_model.py has that mode's closed forms). Particle
friction is Coulomb with a smoothing speed eps = ``model.friction_smoothing``:
sliding at |v_t| >> eps the deceleration on flat ground is mu g (to a relative
1 - |v_t| / sqrt(|v_t|^2 + eps^2)), and a particle launched at v0 stops after
v0^2 / (2 mu g).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE, Sim, masses, simulate

G = 9.81
KE_SHAPE = inertia.ModelBuilder.default_shape_ke  # 1e4 N/m, the default absolute stiffness
TAU = inertia.ModelBuilder.default_shape_tau  # 5 ms, the default contact time constant (mass-scaled gains)


# --------------------------------------------------------------------------- resting on the ground
@pytest.mark.parametrize("up_axis", ["z", "y"])
def test_static_penetration_is_mg_over_ke(up_axis):
    """Absolute gains (the ground given ke and kd): every particle sinks m g / ke, deeper the heavier."""
    b = inertia.ModelBuilder(up_axis=up_axis, gravity=-G)
    b.particle_collide = False  # particles 1 m apart; only ground contact matters here
    up = np.array(b.up_vector)
    side = np.array([1.0, 0.0, 0.0])
    r = 0.05
    ms = np.array([0.1, 0.3, 1.0])
    for i, m in enumerate(ms):
        b.add_particle(pos=i * side + r * up, mass=m, radius=r)  # just touching, at rest
    b.add_ground_plane(ke=KE_SHAPE, kd=10.0)
    model = b.finalize(device=DEVICE)
    # The ground's kd = 10 N s/m damps the bounce at kd / 2m >= 5 /s: after 1.5 s the transient
    # (initial amplitude m g / ke) is below e^-7.5 = 6e-4 of it.
    sim = simulate(model, 1500, 1.0e-3)
    q = sim.q()
    depth = r - q @ up
    expected = ms * G / KE_SHAPE
    rel = np.abs(depth / expected - 1.0)
    print(f"static penetration ({up_axis} up): depth/radius", np.round(depth / r, 5),
          "relative error vs m g/ke", rel)
    # Penetration is a small fraction of the radius: < 5 % (m g / ke is 2 % of r for the 1 kg particle).
    assert (depth / r < 0.05).all()
    # And it is the closed form m g / ke to 1 % (the transient left is < 0.1 %, float32 rounding of the
    # height near 0.05 m is 4e-9 m = 4e-5 of the smallest depth).
    assert (rel < 0.01).all()
    lateral = q - np.outer(q @ up, up)
    assert np.abs(lateral - (model.particle_q.numpy() - np.outer(model.particle_q.numpy() @ up, up))).max() < 1e-6


def test_sliding_particle_decelerates_at_mu_g_and_stops_at_v0_squared_over_2_mu_g():
    mu, r, m, dt = 0.4, 0.05, 1.0, 1.0e-3
    v0 = np.array([1.2, 1.6, 0.0])  # |v0| = 2 m/s, at an angle to the axes
    speed0 = np.linalg.norm(v0)
    b = inertia.ModelBuilder(up_axis="z", gravity=-G)
    # start at the static equilibrium depth g tau^2 so the normal force is m g from the first step
    b.add_particle(pos=(0.0, 0.0, r - G * TAU ** 2), vel=v0, mass=m, radius=r)
    b.add_ground_plane(mu=mu)
    model = b.finalize(device=DEVICE)
    eps = model.friction_smoothing
    assert speed0 > 100.0 * eps  # slide fast relative to the smoothing speed

    a = mu * G
    t_stop = speed0 / a
    n = int(1.3 * t_stop / dt)
    vel = np.empty((n, 3))

    def record(s, k):
        vel[k - 1] = s.state.particle_qd.numpy()[0]

    sim = simulate(model, n, dt, callback=record)
    speed = np.linalg.norm(vel[:, :2], axis=1)
    t = dt * np.arange(1, n + 1)
    fast = speed > 0.2  # 20 eps: the smoothing changes the force by < eps^2 / (2 v^2) = 1.3e-3 here
    slope = np.polyfit(t[fast], speed[fast], 1)[0]
    decel_err = abs(-slope / a - 1.0)
    dist = np.linalg.norm(sim.q()[0, :2])
    # symplectic Euler with a constant deceleration: dt * sum_k (v0 - k a dt) = v0^2 / (2a) - v0 dt / 2
    d_ref = speed0**2 / (2.0 * a)
    dist_err = abs(dist / d_ref - 1.0)
    direction = sim.q()[0, :2] / dist
    print(f"sliding: deceleration {-slope:.4f} m/s^2 vs mu g {a:.4f} ({decel_err:.2e}); stop distance {dist:.4f} m "
          f"vs v0^2/(2 mu g) {d_ref:.4f} ({dist_err:.2e}); final speed {speed[-1]:.1e}")
    # 0.5 %: the smoothing error (< 1.3e-3 in the fitted range); a wrong mu, g or friction direction
    # shows as a > 1 % error.
    assert decel_err < 5.0e-3
    # 1 % of v0^2 / (2 mu g) (the physical answer), and 2e-4 of the closed form of this discretisation:
    # symplectic Euler at constant deceleration removes v0 dt / 2, and the smoothing (a_eff = a v / sqrt(v^2 +
    # eps^2)) adds int_0^v0 (sqrt(v^2 + eps^2) - v) dv / a = eps^2 (1/4 + ln(2 v0 / eps) / 2) / a = 8e-5 m.
    assert dist_err < 0.01
    d_discrete = d_ref - speed0 * dt / 2.0 + eps**2 * (0.25 + 0.5 * math.log(2.0 * speed0 / eps)) / a
    print(f"   stop distance vs discrete closed form {d_discrete:.5f} m: {abs(dist / d_discrete - 1.0):.2e}")
    assert abs(dist / d_discrete - 1.0) < 2.0e-4
    assert speed[-1] < 1.0e-3  # it stopped ...
    assert (np.einsum("ij,j->i", vel[:, :2], v0[:2]) >= -1e-6).all()  # ... without ever reversing
    assert np.abs(direction - v0[:2] / speed0).max() < 1e-4  # along its initial direction
    assert abs(sim.q()[0, 2] - (r - G * TAU ** 2)) < 1e-5  # and stayed on the ground


def test_granular_pile_settles():
    # 125 particles (radius 0.04 m, 0.1 m apart) dropped 0.11 m onto the ground. The jitter (5 % of the
    # radius) makes the stacks imperfect; with a much larger jitter (25 %) the 5-high columns collapse
    # into a heap over several seconds (a real granular flow: total energy falls monotonically), too long
    # for this test.
    b = inertia.ModelBuilder(up_axis="z", gravity=-G)
    grid = b.add_particle_grid(5, 5, 5, pos=(0.0, 0.0, 0.15), jitter=0.002, seed=3)
    b.add_ground_plane()
    model = b.finalize(device=DEVICE)
    r = model.particle_radius.numpy().astype(np.float64)
    m = masses(model)
    q0 = model.particle_q.numpy().astype(np.float64)
    dt = 1.0 / 2400.0
    sim = Sim(model)
    e_pot0 = (m * G * q0[:, 2]).sum()
    ke_hist = []
    for _ in range(5):
        sim.step(600, dt)  # 1.25 s in all
        v = sim.qd()
        ke_hist.append(0.5 * (m * (v**2).sum(1)).sum())
    q = sim.q()
    pen = (r - q[:, 2]) / r
    spread = np.abs(q[:, :2] - q0[:, :2].mean(0)).max()
    print(f"granular pile: kinetic energy every 0.25 s {np.array(ke_hist)} J (initial potential {e_pot0:.2f} J), "
          f"max ground penetration {pen.max():.4f} r, max horizontal spread {spread:.3f} m, "
          f"height {q[:, 2].max():.3f} m")
    assert np.isfinite(q).all() and np.isfinite(sim.qd()).all()
    # Settled: kinetic energy below 2e-5 of the initial potential energy (rms speed < 1.2 cm/s), and
    # falling (at t = 0.25 s, just after impact, it is ~2e-2 of the potential energy).
    assert ke_hist[-1] < 2.0e-5 * e_pot0
    assert ke_hist[-1] < ke_hist[0]
    # No particle below the ground: centres above z = 0 and penetration below 5 % of the radius. The
    # closed form for a bottom particle carrying its whole 5-particle column is 5 m g / ke = 1.2 % of r.
    assert (q[:, 2] > 0.0).all()
    assert pen.max() < 0.05
    assert pen.max() > 0.5 * 5 * 0.1 * G / KE_SHAPE / r.max()  # it does rest on the ground (not floating)
    # No explosion: the pile stays below its drop height and within 0.5 m of where it was dropped.
    assert q[:, 2].max() < q0[:, 2].max()
    assert spread < 0.5
    assert len(grid) == 125


# --------------------------------------------------------------------------- static colliders
def cube_mesh(h):
    """Closed cube of half extent h: 8 vertices, 12 triangles wound counter-clockwise seen from outside."""
    v = np.array([[(2 * (i & 1) - 1) * h, (2 * ((i >> 1) & 1) - 1) * h, (2 * ((i >> 2) & 1) - 1) * h]
                  for i in range(8)], dtype=np.float64)
    quads = [(0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)]
    tris = []
    for a, b, c, d in quads:
        for t in ((a, b, c), (a, c, d)):
            n = np.cross(v[t[1]] - v[t[0]], v[t[2]] - v[t[0]])
            if np.dot(n, v[list(t)].mean(0)) < 0.0:
                t = (t[0], t[2], t[1])
            tris.append(t)
    return v, np.array(tris, dtype=np.int32)


def test_particles_come_to_rest_on_static_colliders():
    r, m = 0.05, 0.1
    gap = 0.02  # dropped from 2 cm above the surface
    b = inertia.ModelBuilder(up_axis="z", gravity=-G)
    b.particle_collide = False
    # four colliders 2 m apart, each with a particle above a point of its top surface
    R = 0.3
    b.add_shape_sphere(xform=((0.0, 0.0, 0.0), (0, 0, 0, 1)), radius=R)
    b.add_particle(pos=(0.0, 0.0, R + r + gap), mass=m, radius=r)
    hx, hy, hz = 0.4, 0.3, 0.2
    b.add_shape_box(xform=((2.0, 0.0, 0.0), (0, 0, 0, 1)), hx=hx, hy=hy, hz=hz)
    b.add_particle(pos=(2.0 + 0.17, -0.11, hz + r + gap), mass=m, radius=r)
    # a capsule lying along y (local z rotated onto world y): the particle lands on its cylinder
    cr, chh = 0.15, 0.4
    q_cap = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.5 * math.pi)
    b.add_shape_capsule(xform=((4.0, 0.0, 0.0), tuple(q_cap)), radius=cr, half_height=chh)
    b.add_particle(pos=(4.0, 0.13, cr + r + gap), mass=m, radius=r)
    # a closed cube mesh, turned 30 degrees about z
    h = 0.25
    vm, fm = cube_mesh(h)
    q_mesh = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), math.pi / 6.0)
    b.add_shape_mesh(xform=((6.0, 0.0, 0.0), tuple(q_mesh)), vertices=vm, indices=fm)
    b.add_particle(pos=(6.0 + 0.07, -0.09, h + r + gap), mass=m, radius=r)
    model = b.finalize(device=DEVICE)

    # critically damped at tau = 5 ms: 1 s (200 tau) settles the bounces and the ring-down completely
    sim = simulate(model, 1000, 1.0e-3)
    q = sim.q()
    # surface distances from closed-form signed distance functions (float64)
    d_sphere = np.linalg.norm(q[0]) - R
    p = q[1] - np.array([2.0, 0.0, 0.0])
    d_box = p[2] - hz if (np.abs(p[:2]) < (hx, hy)).all() else np.nan
    p = q[2] - np.array([4.0, 0.0, 0.0])
    d_capsule = np.hypot(p[0], p[2]) - cr if abs(p[1]) < chh else np.nan
    rot = np.array(wp.quat_to_matrix(q_mesh), dtype=np.float64).reshape(3, 3)
    p = rot.T @ (q[3] - np.array([6.0, 0.0, 0.0]))
    d_mesh = p[2] - h if (np.abs(p[:2]) < h).all() else np.nan
    d = np.array([d_sphere, d_box, d_capsule, d_mesh])
    expected = r - G * TAU ** 2  # rest distance: the radius minus the static penetration g tau^2
    err = np.abs(d - expected) / r
    print("static colliders (sphere, box, capsule, mesh): distance/radius", np.round(d / r, 6),
          f"expected {expected / r:.6f}; error/radius", err, "speed", np.linalg.norm(sim.qd(), axis=1).max())
    # 1e-4 of the radius (5e-6 m, 2 % of the 2.45e-4 m static penetration g tau^2): resting on the surface
    # at the penalty equilibrium, neither floating at r nor sunk in.
    assert np.isfinite(d).all()
    assert (err < 1.0e-4).all()
    assert np.linalg.norm(sim.qd(), axis=1).max() < 1.0e-3
    # landed where it was dropped (straight down on a flat face, or on top of a curved one)
    assert np.abs(q[:, :2] - model.particle_q.numpy()[:, :2]).max() < 1.0e-3


# --------------------------------------------------------------------------- particle-particle contact
def test_particle_contact_conserves_momentum():
    rng = np.random.default_rng(7)
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)  # free space; default ke, kd and friction mu = 0.5
    dirs = np.vstack([np.eye(3), -np.eye(3)]) + rng.uniform(-0.1, 0.1, (6, 3))  # octahedron, perturbed
    x = np.vstack([np.zeros(3), 0.2 * dirs / np.linalg.norm(dirs, axis=1, keepdims=True)])
    n = len(x)
    d0 = np.linalg.norm(x[:, None] - x[None], axis=2) + 10.0 * np.eye(n)
    assert d0.min() > 0.1  # no overlap (no stored penalty energy) at t = 0
    v = -2.0 * x / 0.2 + rng.normal(0.0, 0.3, (n, 3))  # all heading in, off-centre: oblique impacts, friction
    m = rng.uniform(0.05, 0.5, n)
    for i in range(n):
        b.add_particle(pos=x[i], vel=v[i], mass=m[i], radius=0.05)
    model = b.finalize(device=DEVICE)
    m = masses(model)[:, None]
    sim = Sim(model)
    v0 = sim.qd()
    P0 = (m * v0).sum(0)
    scale = (m * np.abs(v0)).sum()
    max_dp, pairs_seen = 0.0, 0
    for _ in range(40):
        sim.step(10, 2.0e-4)
        pairs_seen = max(pairs_seen, sim.contacts.counts()["particle_pairs"])
        max_dp = max(max_dp, np.abs((m * sim.qd()).sum(0) - P0).max() / scale)
    dv = np.abs(sim.qd() - v0).max()
    print(f"particle contact: relative momentum error {max_dp:.2e}, most pairs in one step {pairs_seen}, "
          f"max velocity change {dv:.2f} m/s")
    assert pairs_seen >= 3 and dv > 0.5  # they did collide, with normal and friction forces
    ke0, ke1 = 0.5 * (m * v0**2).sum(), 0.5 * (m * sim.qd() ** 2).sum()
    print(f"   kinetic energy {ke0:.3f} J -> {ke1:.3f} J")
    assert ke1 < ke0  # damped, frictional contact dissipates
    # 2e-5 of sum m|v|: float32 rounding only; contact forces are applied equal and opposite.
    assert max_dp < 2.0e-5


def test_head_on_elastic_collision_matches_closed_form():
    # kd = 0, mu = 0: the penalty spring is conservative, so the outgoing velocities approach those of
    # a 1D elastic collision, v1' = ((m1 - m2) v1 + 2 m2 v2) / (m1 + m2) and symmetrically.
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    b.particle_kd = 0.0
    b.particle_mu = 0.0
    m1, m2, u1, u2 = 0.3, 0.1, 1.0, -0.5
    b.add_particle(pos=(-0.2, 0.0, 0.0), vel=(u1, 0.0, 0.0), mass=m1, radius=0.05)
    b.add_particle(pos=(0.2, 0.0, 0.0), vel=(u2, 0.0, 0.0), mass=m2, radius=0.05)
    model = b.finalize(device=DEVICE)
    # contact frequency sqrt(ke / m_reduced) = 365 rad/s: dt = 1e-4 resolves it with ~86 steps
    sim = simulate(model, 4000, 1.0e-4)
    v = sim.qd()[:, 0]
    w1 = ((m1 - m2) * u1 + 2 * m2 * u2) / (m1 + m2)
    w2 = ((m2 - m1) * u2 + 2 * m1 * u1) / (m1 + m2)
    err = np.abs(v - [w1, w2]) / abs(u1 - u2)
    e_ratio = (m1 * v[0] ** 2 + m2 * v[1] ** 2) / (m1 * u1**2 + m2 * u2**2)
    print(f"elastic collision: v' = {v}, closed form ({w1:.4f}, {w2:.4f}); error/|u1-u2| {err}, "
          f"energy ratio {e_ratio:.5f}")
    assert v[1] - v[0] > 0  # separated
    # 1e-3 of the approach speed and of the energy: the only errors are symplectic Euler's (its modified
    # energy differs from the true one by O(w dt) = 3.7 % only while in contact, and the contact starts
    # and ends between samples); momentum is exact. A restitution below 1 (any damping) fails this.
    assert (err < 1.0e-3).all()
    assert abs(e_ratio - 1.0) < 1.0e-3


# --------------------------------------------------------------------------- overflow and exclusions
def test_contact_overflow_warns_counts_and_raises():
    b = inertia.ModelBuilder(up_axis="z", gravity=-G)
    for i in range(4):
        b.add_particle(pos=(0.5 * i, 0.0, 0.04), radius=0.05)  # all four touch the ground
    b.add_particle(pos=(0.0, 1.0, 0.5), radius=0.05)  # and one that does not
    b.add_ground_plane()
    model = b.finalize(device=DEVICE)
    state = model.state()

    roomy = model.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough room: no warning
        model.collide(state, roomy)
    assert roomy.overflow() == {"soft_contacts": 0, "particle_pairs": 0, "rigid_pairs": 0, "rigid_contacts": 0}
    assert not roomy.check_overflow(raise_error=True)
    assert sorted(roomy.soft_contact_pairs()[:, 0].tolist()) == [0, 1, 2, 3]

    tiny = model.contacts(soft_contact_max=1)
    with pytest.warns(RuntimeWarning, match="overflow"):
        model.collide(state, tiny)
    assert tiny.overflow()["soft_contacts"] == 3  # 4 requested, 1 kept
    assert len(tiny.soft_contact_pairs()) == 1
    with pytest.raises(inertia.ContactOverflowError):
        tiny.check_overflow(raise_error=True)

    # an overflow in an earlier step stays visible in the peak counts (no host read per step)
    tiny.reset_peak()
    with pytest.warns(RuntimeWarning):
        model.collide(state, tiny)
    lifted = model.state()
    lifted.particle_q.assign(state.particle_q.numpy() + np.array([0.0, 0.0, 1.0], dtype=np.float32))
    model.collide(lifted, tiny, check_overflow=False)
    assert not tiny.check_overflow()  # the last step was fine ...
    assert tiny.overflow(since_reset=True)["soft_contacts"] == 3  # ... an earlier one was not
    with pytest.raises(inertia.ContactOverflowError, match="at least one step"):
        tiny.check_overflow(raise_error=True, since_reset=True)
    tiny.reset_peak()
    assert not tiny.check_overflow(since_reset=True)

    # particle pairs overflow too: three mutually overlapping particles make 3 pairs
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    for x in (0.0, 0.05, 0.1):
        b.add_particle(pos=(x, 0.0, 0.0), radius=0.06)
    model = b.finalize(device=DEVICE)
    c = model.contacts(particle_pair_max=1)
    with pytest.warns(RuntimeWarning, match="particle-particle"):
        model.collide(model.state(), c)
    assert c.overflow()["particle_pairs"] == 2
    with pytest.raises(inertia.ContactOverflowError):
        c.check_overflow(raise_error=True)


def test_particles_sharing_an_element_are_never_contact_pairs():
    b = inertia.ModelBuilder(up_axis="z", gravity=0.0)
    r = 0.2  # every particle of a group overlaps every other one of the same group
    s = [b.add_particle(pos=(x, 0.0, 0.0), radius=r) for x in (0.0, 0.1)]
    b.add_spring(*s)
    t = [b.add_particle(pos=p, radius=r) for p in ((2.0, 0.0, 0.0), (2.1, 0.0, 0.0), (2.0, 0.1, 0.0))]
    b.add_triangle(*t)
    k = [b.add_particle(pos=p, radius=r) for p in ((4.0, 0, 0), (4.1, 0, 0), (4.0, 0.1, 0), (4.0, 0, 0.1))]
    b.add_tetrahedron(*k)
    free = [b.add_particle(pos=(x, 0.0, 2.0), radius=r) for x in (0.0, 0.1)]  # unconnected
    model = b.finalize(device=DEVICE)
    contacts = model.contacts()
    model.collide(model.state(), contacts)
    pairs = {tuple(sorted(p)) for p in contacts.particle_pairs().tolist()}
    print("contact pairs:", pairs)
    assert pairs == {tuple(free)}
