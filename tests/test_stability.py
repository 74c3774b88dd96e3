"""Stability of the SemiImplicitSolver: damping that never overshoots, the stable-step estimate, its warning.

References: the closed form of a damped spring pair under symplectic Euler (the relative speed decays by
1 - x / sqrt(1 + x^2), x = dt kd (w_i + w_j), per step; an undamped pair is stable while
dt <= 2 / sqrt(ke (w_i + w_j))), and the step at which each scene actually blows up when stepped.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import inertia
from conftest import DEVICE
from gradcheck import Input, Rollout, check_gradient
from inertia.solvers.semi_implicit import STABILITY_MARGIN


def spring_pair(m=0.01, ke=1.0e3, kd=0.0, v=1.0):
    b = inertia.ModelBuilder(gravity=0.0)
    a = b.add_particle((0.0, 0.0, 0.0), mass=m)
    c = b.add_particle((0.1, 0.0, 0.0), vel=(v, 0.0, 0.0), mass=m)
    b.add_spring(a, c, ke=ke, kd=kd)
    b.particle_collide = False
    return b.finalize(device=DEVICE)


def run(model, dt, steps, substeps=20):
    # max_substeps=1: every step runs as given, so a step beyond the stable one is seen to blow up
    sim = inertia.Simulator(model, inertia.SemiImplicitSolver(model, max_substeps=1), frame_dt=dt * substeps,
                            substeps=substeps, check_every=10 ** 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim.step(steps // substeps)
    q = sim.state.particle_q.numpy()
    return bool(np.isfinite(q).all() and np.abs(q).max() < 10.0)


def test_damping_never_overshoots_at_any_step():
    """A spring pair at rest length with ke = 0: the relative speed decays by exactly 1 - x / sqrt(1 + x^2),
    x = dt kd (2 / m), per step: stable at any kd dt (explicit damping, 1 - x, diverges once x > 2)."""
    m, kd, dt = 0.01, 50.0, 1.0e-3  # kd dt (w_i + w_j) = 10: explicit damping would flip and grow 9x a step
    model = spring_pair(m=m, ke=0.0, kd=kd)
    s0, s1 = model.state(), model.state()
    solver = inertia.SemiImplicitSolver(model)
    speeds = []
    for _ in range(4):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        v = s0.particle_qd.numpy().astype(np.float64)
        speeds.append(v[1, 0] - v[0, 0])
    ratio = np.array(speeds[1:]) / np.array(speeds[:-1])
    x = dt * kd * 2.0 / m
    expected = 1.0 - x / math.sqrt(1.0 + x * x)
    # the relative speed is a difference of two float32 velocities near 0.5 m/s (each rounded to 3e-8): the
    # ratio carries that error over the smaller speed; 4x covers both ends
    tol = 4 * 2.0 ** -24 * 0.5 / np.abs(np.array(speeds[1:]))
    assert np.all(np.abs(ratio - expected) <= tol * expected + 1e-12), (ratio, expected, tol)


@pytest.mark.parametrize("m, ke", [(0.01, 1.0e3), (1.0, 5.0e4)])
def test_spring_pair_estimate_is_the_closed_form(m, ke):
    solver = inertia.SemiImplicitSolver(spring_pair(m=m, ke=ke))
    closed = 2.0 / math.sqrt(ke * 2.0 / m)
    assert solver.stable_steps["elastic forces"][0] == pytest.approx(closed, rel=1e-3)


def scenes():
    def cloth(n, mass, **kw):
        b = inertia.ModelBuilder()
        b.add_ground_plane()
        b.add_cloth_grid(n, n, pos=(0.0, 0.0, 0.5), mass=mass, **kw)
        return b.finalize(device=DEVICE)

    def soft(density, k):
        b = inertia.ModelBuilder()
        b.add_ground_plane()
        b.add_soft_grid(2, 2, 2, pos=(0.0, 0.0, 0.3), density=density, k_mu=k, k_lambda=k)
        return b.finalize(device=DEVICE)

    return {"spring pair": lambda: spring_pair(), "cloth 8x8 (defaults)": lambda: cloth(8, 0.1),
            "light damped cloth": lambda: cloth(2, 0.01, tri_kd=20.0),
            "fine cloth 20x20": lambda: cloth(20, 0.02, cell_x=0.05, cell_y=0.05, fix_left=True),
            "dense soft block": lambda: soft(1000.0, 1.0e5), "light soft block": lambda: soft(23.0, 1.0e5)}


@pytest.mark.parametrize("name", list(scenes()))
def test_the_estimate_separates_stable_from_unstable_steps(name):
    """Stepped at the warning threshold (0.85 x the estimate) every scene stays bounded for 400 steps; at
    1.5 x the estimate it blows up (measured: the real limits lie 0-12 % below the estimates)."""
    make = scenes()[name]
    estimate = inertia.SemiImplicitSolver(make()).stable_dt
    assert math.isfinite(estimate)
    assert run(make(), STABILITY_MARGIN * estimate, 400), f"{name}: unstable below the warning threshold"
    assert not run(make(), 1.5 * estimate, 400), f"{name}: stable at 1.5 x the estimate: the estimate is loose"


def test_a_step_beyond_the_estimate_is_warned_once_per_step_size():
    model = scenes()["light soft block"]()
    solver = inertia.SemiImplicitSolver(model, max_substeps=1)
    s0, s1 = model.state(), model.state()
    dt = 2.0 * solver.stable_dt
    with pytest.warns(inertia.StabilityWarning, match=r"beyond the stable step of explicit integration for "
                                                      r"elastic forces .* set by particle \d+.*XPBDSolver") as w:
        for _ in range(3):
            solver.step(s0, s1, None, None, dt)
            s0, s1 = s1, s0
    assert len([x for x in w if issubclass(x.category, inertia.StabilityWarning)]) == 1
    assert w[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stable step size: quiet
        solver.step(s0, s1, None, None, 0.5 * solver.stable_dt)


def _pair_invariant(state, h, w2, rest):
    """Symplectic Euler (kick, then drift) of x'' = -w^2 x at step h conserves u^2 + w^2 r^2 - h w^2 r u exactly
    (r: the spring's stretch [m], u: its rate [m/s]); evaluated in float64 from the float32 state."""
    q, v = state.particle_q.numpy().astype(np.float64), state.particle_qd.numpy().astype(np.float64)
    r, u = q[1, 0] - q[0, 0] - rest, v[1, 0] - v[0, 0]
    return u * u + w2 * r * r - h * w2 * r * u


def test_a_step_beyond_the_estimate_runs_as_stable_substeps():
    """An undamped spring pair stepped at 3x its stable step (the closed form 2 / sqrt(ke (w_i + w_j))): the
    solver splits each step into n = ceil(3 / 0.85) = 4 equal substeps and says so once; the motion then keeps
    symplectic Euler's invariant at step dt / 4 for 50 steps, bitwise as 200 plain steps of dt / 4 would.
    (At 3x in one step the same pair leaves every bound within a few steps: the test above at 1.5x.)"""
    m, ke = 0.01, 1.0e3
    w2 = ke * 2.0 / m
    dt = 3.0 * 2.0 / math.sqrt(w2)
    model = spring_pair(m=m, ke=ke)
    rest = float(model.spring_rest_length.numpy()[0])
    solver = inertia.SemiImplicitSolver(model)
    assert solver.substeps(dt) == 4 and solver.substeps(0.5 * dt / 3.0) == 1
    s0, s1 = model.state(), model.state()
    h = dt / 4
    q0 = _pair_invariant(s0, h, w2, rest)
    invariants = []
    with pytest.warns(inertia.StabilityWarning, match=r"runs as 4 substeps of .* stays stable") as w:
        for _ in range(50):
            solver.step(s0, s1, None, None, dt)
            s0, s1 = s1, s0
            invariants.append(_pair_invariant(s0, h, w2, rest))
    assert len(w) == 1 and w[0].filename == __file__
    # float32 positions near 0.1 m round to 7e-9 m against a stretch amplitude u / w = 2.2 mm: each substep
    # moves the invariant by ~1e-5 of itself, a random walk over 200 substeps ~1.5e-4. The invariant at a
    # wrong substep (dt / 3 or dt / 5) swings by ~20 % of itself, and a blow-up grows without bound.
    assert np.max(np.abs(np.array(invariants) / q0 - 1.0)) < 1e-3, invariants[-5:]
    plain_model = spring_pair(m=m, ke=ke)
    plain = inertia.SemiImplicitSolver(plain_model, max_substeps=1)
    p0, p1 = plain_model.state(), plain_model.state()
    for _ in range(200):
        plain.step(p0, p1, None, None, h)
        p0, p1 = p1, p0
    assert np.array_equal(p0.particle_q.numpy(), s0.particle_q.numpy())
    assert np.array_equal(p0.particle_qd.numpy(), s0.particle_qd.numpy())


def test_max_substeps_caps_the_split_and_says_it_will_blow_up():
    model = spring_pair()
    solver = inertia.SemiImplicitSolver(model, max_substeps=2)
    dt = 5.0 * solver.stable_dt
    assert solver.substeps(dt) == 2
    s0, s1 = model.state(), model.state()
    with pytest.warns(inertia.StabilityWarning, match=r"likely blow up even in 2 substeps \(max_substeps\)"):
        solver.step(s0, s1, None, None, dt)
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match="max_substeps"):
            inertia.SemiImplicitSolver(model, max_substeps=bad)


def test_substeps_differentiate_and_their_memory_is_counted():
    """A recorded step split into substeps keeps each substep's State on ``state_out`` (the tape needs every
    one): tape gradients of a light spring chain stepped at 2.5x its stable step match central differences,
    and ``state_buffer_bytes(dt=...)`` counts the intermediate States the step allocated."""
    # no gravity and positions near the origin: the loss's float32 rounding stays small; the springs start
    # stretching at ~0.5 m/s, so the loss feels ke
    b = inertia.ModelBuilder(gravity=0.0)
    rng = np.random.default_rng(2)
    ids = [b.add_particle((0.1 * i, 0.0, 0.02 * (i % 2)), vel=tuple(rng.uniform(-0.5, 0.5, 3)), mass=0.01)
           for i in range(4)]
    for i in range(3):
        b.add_spring(ids[i], ids[i + 1], ke=500.0, kd=0.05)
    b.particle_collide = False
    model = b.finalize(device=DEVICE, requires_grad=True)
    solver = inertia.SemiImplicitSolver(model)
    dt = 2.5 * solver.stable_dt
    n = solver.substeps(dt)
    assert n == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inertia.StabilityWarning)
        r = Rollout(model, steps=12, dt=dt, solver=solver)
        check_gradient("spring chain in substeps", r.problem(qd0=r.states[0].particle_qd,
                                                             ke=model.spring_stiffness),
                       [Input("qd0", 1e-2), Input("ke", 1e-2, relative=True)])
    out = r.states[1]
    assert len(out.substep_states) == n - 1
    held = sum(a.capacity * (2 if a.requires_grad else 1) for st in out.substep_states
               for a in (st.particle_q, st.particle_qd, st.particle_f, st.body_q, st.body_qd, st.body_f,
                         st.joint_q, st.joint_qd) if a is not None)
    assert solver.state_buffer_bytes(True, dt=dt) - solver.state_buffer_bytes(True) == held


@pytest.mark.parametrize("name, kwargs", [
    ("light cloth, strong membrane damping", dict(dim=2, pos=(0.0, 0.0, 0.3), mass=0.01, tri_kd=20.0)),
    ("20x20 cloth of 20 g, default bending damping", dict(dim=20, pos=(0.0, 0.0, 1.0), cell_x=0.05, cell_y=0.05,
                                                          mass=0.02, fix_left=True)),
    ("4x4 cloth of 6 g particles", dict(dim=4, pos=(0.0, 0.0, 0.5), cell_x=0.054, cell_y=0.054, mass=0.006)),
])
def test_the_fuzzers_damping_blow_ups_stay_finite_and_quiet(name, kwargs):
    """Issue 17's minimal scenes: each went NaN within 30 steps at 1/2400 s with explicit damping (the 2x2 at
    step 28, silently); with damping that never overshoots they stay finite for a second, unwarned (their
    stiffness is stable at this step)."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    n = kwargs.pop("dim")
    b.add_cloth_grid(n, n, **kwargs)
    model = b.finalize(device=DEVICE)
    sim = inertia.Simulator(model, inertia.SemiImplicitSolver(model), frame_dt=1.0 / 60.0, substeps=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.step(60)
    q = sim.state.particle_q.numpy()
    assert np.isfinite(q).all() and q[:, 2].min() > 0.0  # and resting on the ground, not through it


@pytest.mark.parametrize("limited", [False, True])
def test_a_limit_spring_bounds_the_step_only_where_the_dof_has_a_limit(limited):
    """A pendulum link on a revolute joint: an unlimited joint's limit_ke never acts, so it must not bound the
    step (it did: a 6-link chain at dt 1 ms was warned about a 1.7e-5 s limit and ran fine); a limited one is
    bounded by 2 / sqrt(limit_ke w), w the link's inverse inertia about the joint axis (y: 1 / 0.02), not its
    largest (1 / 0.01, about x, which the limit's torque never excites)."""
    b = inertia.ModelBuilder()
    link = b.add_body(xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)), mass=1.0, inertia=np.diag([0.01, 0.02, 0.04]))
    limits = dict(limit_lower=-1.0, limit_upper=1.0) if limited else {}
    b.add_joint_revolute(-1, link, parent_xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0),
                         limit_ke=1.0e4, **limits)
    model = b.finalize(device=DEVICE)
    steps = inertia.stability.stable_time_steps(model)
    if limited:
        assert steps["joint drives"][0] == pytest.approx(2.0 / math.sqrt(1.0e4 / 0.02), rel=1e-6)
    else:
        assert "joint drives" not in steps


def test_a_rollout_beyond_the_stable_step_counts_and_differentiates_its_substeps():
    """Rollout (checkpointed, captured) over a step the solver splits: its memory estimate includes the
    substeps' States, and its gradients are bitwise those of one segment without checkpoints."""
    torch = pytest.importorskip("torch")
    b = inertia.ModelBuilder(gravity=0.0)
    ids = [b.add_particle((0.1 * i, 0.0, 0.0), vel=(0.0, 0.0, 0.3 * i), mass=0.01) for i in range(3)]
    for i in range(2):
        b.add_spring(ids[i], ids[i + 1], ke=800.0, kd=0.0)
    b.particle_collide = False
    model = b.finalize(device=DEVICE, requires_grad=True)
    dt = 2.0 * inertia.SemiImplicitSolver(model).stable_dt
    grads, estimates = [], []
    for every in (2, 8):
        solver = inertia.SemiImplicitSolver(model)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = inertia.Rollout(model, solver, 8, dt, 1, checkpoint_every=every)
            qd = torch.tensor(model.particle_qd.numpy(), requires_grad=True)
            q, _ = r(qd0=qd)
            q[-1].pow(2).sum().backward()
        told = [w for w in caught if issubclass(w.category, inertia.StabilityWarning)]
        # once per solver and step size, named at this line (not inside torch's autograd that runs the step)
        assert len(told) == 1 and told[0].filename == __file__, [(w.filename, str(w.message)) for w in told]
        grads.append(qd.grad.numpy().copy())
        estimates.append(r.memory_estimate()["segment"])
    assert np.array_equal(grads[0], grads[1]) and np.abs(grads[0]).max() > 0
    n = solver.substeps(dt)
    assert n == 3
    # each of the 8 recorded steps of a segment keeps n - 1 more States, with gradients: 2 x (q, qd, f) of
    # 3 particles in float32 (a particle model's State holds nothing else)
    plain = inertia.Rollout(model, inertia.SemiImplicitSolver(model, max_substeps=1), 8, dt, 1, checkpoint_every=8)
    extra = estimates[1] - plain.memory_estimate()["segment"]
    assert extra == 8 * (n - 1) * 2 * 3 * 3 * 3 * 4, extra
