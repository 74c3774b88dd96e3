"""FeatherstoneSolver: joint limits and velocity limits on a floating base, against conservation laws.

The Unitree A1 (pybullet_data, on a free joint) at its zero joint pose has its knees 0.916 rad past their
upper limit (-0.916 rad): the limit springs (ke 1e4 N m/rad) push them back with 9,160 N m, and the URDF's
velocity limits (28.6 rad/s at thighs and knees) hold the rates that this produces. Both are internal
forces of the robot: without contacts its linear momentum changes only by gravity (M g t), its angular
momentum about its centre of mass not at all, and its centre of mass falls on the free-fall parabola,
whatever the joints do. The reference is that law, evaluated in float64 from the bodies' poses and
velocities. (Clamping the limited rates alone, as the solver did, left the base the reaction to the
unclamped 9,160 N m: 208 kg m/s of momentum within 0.1 s at dt 1 ms, the robot thrown 1.5 m.)
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import inertia
from inertia.transforms import quat_to_matrix
from test_featherstone_models import a1_builder

GRAVITY = np.array([0.0, 0.0, -9.81])


def momentum(model, state):
    """(centre of mass, linear momentum, angular momentum about the centre of mass, sum of m |v - v_com|,
    largest angular rate of a body relative to body 0 (the base)), float64."""
    m = model.body_mass.numpy().astype(np.float64)
    q, qd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
    R = np.array([quat_to_matrix(x[3:]) for x in q])
    c = np.einsum("bij,bj->bi", R, model.body_com.numpy().astype(np.float64)) + q[:, :3]
    com = m @ c / m.sum()
    p = m @ qd[:, :3]
    inertia_w = R @ model.body_inertia.numpy().astype(np.float64) @ R.transpose(0, 2, 1)
    L = np.einsum("bij,bj->i", inertia_w, qd[:, 3:]) + np.cross(c - com, m[:, None] * qd[:, :3]).sum(0)
    spread = float(np.sum(m * np.linalg.norm(qd[:, :3] - p / m.sum(), axis=1)))
    turn = float(np.linalg.norm(qd[:, 3:] - qd[0, 3:], axis=1).max())
    return com, p, L, spread, turn


def free_a1(integrator="euler"):
    """The A1 at its zero joint pose, 0.45 m up, no ground (no contact: only gravity acts from outside)."""
    model = a1_builder().finalize()
    return model, inertia.FeatherstoneSolver(model, integrator=integrator)


def test_velocity_limits_hold_the_rates_with_internal_impulses():
    """One step from rest: the knees' and thighs' new rates exceed their velocity limits (the unlimited step
    gives ~400 rad/s) and are held at 28.6 rad/s, by impulses on those joints. At the step's start
    configuration the new rates then carry the old momentum (zero, no gravity) exactly: the semi-implicit
    step's discrete momentum balance, which only float32 rounding of the solve disturbs (relative 1e-5 of the
    momentum flowing inside the robot, sum m |v - v_com| = 12 kg m/s; measured 5e-7). The clamp before gave
    10.3 kg m/s in that one step."""
    b = a1_builder(inertia.ModelBuilder(gravity=0.0))
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    start, after = model.state(), model.state()
    with pytest.warns(inertia.StabilityWarning, match="start outside their limits"):
        solver.step(start, after, None, None, 1e-3)
    qd = after.joint_qd.numpy()
    limit = model.joint_velocity_limit.numpy()
    held = np.flatnonzero(np.isclose(np.abs(qd), limit, rtol=1e-6))
    labels = [model.joint_label[j] for j in range(1, model.joint_count)]  # dof 6 + k is joint 1 + k
    assert sorted(labels[d - 6].split("_")[1] for d in held) == ["lower"] * 4 + ["upper"] * 4, held
    at_start = model.state()  # the start configuration with the new rates
    at_start.joint_qd.assign(qd)
    solver.sync_bodies(at_start)
    _, p, L, spread, _ = momentum(model, at_start)
    assert np.linalg.norm(p) < 1e-5 * spread and np.linalg.norm(L) < 1e-5 * spread * 0.5, (p, L, spread)


def snap(dt, seconds=0.1, integrator="euler"):
    """Worst |p - M g t|, |L about the com|, com off the discrete parabola over ``seconds`` from the zero pose;
    the largest sum m |v - v_com| and relative angular rate seen."""
    model, solver = free_a1(integrator)
    a, b = model.state(), model.state()
    com0 = momentum(model, a)[0]
    mass = float(model.body_mass.numpy().sum())
    worst = np.zeros(5)
    for i in range(int(round(seconds / dt))):
        solver.step(a, b, None, None, dt)
        a, b = b, a
        t = (i + 1) * dt
        com, p, L, spread, turn = momentum(model, a)
        # semi-implicit Euler's free fall: v_n = g n dt, x_n = g dt^2 n (n + 1) / 2; RK4's is exact
        fall = com - com0 - GRAVITY * (t * (t + dt) if integrator == "euler" else t * t) / 2
        worst = np.maximum(worst, [np.linalg.norm(p - mass * GRAVITY * t), np.linalg.norm(L),
                                   np.linalg.norm(fall), spread, turn])
    return worst, mass


@pytest.mark.filterwarnings("ignore::inertia.StabilityWarning")
def test_a_floating_base_keeps_its_momentum_through_a_limit_snap():
    """0.1 s of the knee snap, without contacts, at dt 1 ms and 0.25 ms. What is left is the semi-implicit
    step's own error: its momentum balance holds at the step's start configuration (previous test), and the
    configuration change then turns the links' momenta by their rates' angle over the step, at most
    dt x (largest angular rate of a link relative to the base) x sum m |v - v_com| per step; these errors
    telescope (each step's is the difference of a quadratic form of the rates before and after), so twice
    one step's bound covers the whole run. Measured at 1 ms: 0.17 kg m/s of 1.4 allowed, angular momentum
    0.013 kg m^2/s, centre of mass 0.6 mm off its parabola; the same figures before the fix: 208 kg m/s and
    1.5 m. First order: at dt / 4 the momentum error is 1/4 (measured 0.25; before: 4x larger)."""
    coarse, mass = snap(1e-3)
    fine, _ = snap(2.5e-4)
    for dt, worst in ((1e-3, coarse), (2.5e-4, fine)):
        dp, dL, dx, spread, turn = worst
        bound = 2.0 * dt * turn * spread  # [kg m/s]
        print(f"[featherstone] A1 knee snap at dt {dt:g}: |p - M g t| {dp:.3g} kg m/s (bound {bound:.3g}), "
              f"|L_com| {dL:.3g} kg m^2/s, com off the free fall {1e3 * dx:.3g} mm")
        assert dp < bound
        assert dL < 0.5 * bound  # the same error with a lever arm of at most 0.5 m (the robot's half-length)
        assert dx < 0.1 * bound / mass  # the momentum error's drift over 0.1 s
    assert fine[0] < 0.35 * coarse[0]  # first order in dt: 0.25, and higher-order terms


@pytest.mark.filterwarnings("ignore::inertia.StabilityWarning")
def test_rk4_keeps_the_momentum_through_a_limit_snap():
    """RK4 (every force explicit) through the same snap at dt 1 ms: each stage's acceleration takes the
    velocity limits' impulses with that stage's own mass matrix, so the limit springs' 9,160 N m and the
    impulses that cancel them act at one configuration. Its error is within the semi-implicit step's bound
    above (RK4's is higher order where the motion is smooth; at the steps where a rate reaches or leaves its
    limit it is first order too). Measured 0.0076 kg m/s; correcting only the new rates, with M(q_n), left
    700 kg m/s without gravity (the stages' pushes and the impulses at different configurations), as the
    clamp before."""
    (dp, dL, dx, spread, turn), mass = snap(1e-3, integrator="rk4")
    bound = 2.0 * 1e-3 * turn * spread
    print(f"[featherstone] A1 knee snap, RK4 at dt 0.001: |p - M g t| {dp:.3g} kg m/s (bound {bound:.3g}), "
          f"|L_com| {dL:.3g} kg m^2/s, com off the free fall {1e3 * dx:.3g} mm")
    assert dp < bound and dL < 0.5 * bound and dx < 0.1 * bound / mass


def test_a_start_outside_the_limits_is_warned_about():
    """The first step names the joints that start beyond a limit by more than LIMIT_START_MARGIN (0.01 rad
    or m), once; a start within the limits, or beyond by less (a resting load's penetration), is not."""
    model, solver = free_a1()
    a, b = model.state(), model.state()
    with pytest.warns(inertia.StabilityWarning, match=r"4 joint\(s\) start outside their limits: 'FR_lower_joint' "
                                                      r"0\.916 rad beyond its upper limit -0\.9163"):
        solver.step(a, b, None, None, 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solver.step(b, a, None, None, 1e-3)  # once
        for knee in (-1.8, -0.9163 + 0.005):
            q = model.state().joint_q.numpy()
            q[7:] = np.tile([0.0, 0.9, knee], 4)
            inertia.FeatherstoneSolver(model).step(joint_state(model, q), b, None, None, 1e-3)


def joint_state(model, q):
    s = model.state()
    s.joint_q.assign(q.astype(np.float32))
    return s


def test_no_joint_dynamics_warning_for_a_model_with_all_of_them():
    """The FeatherstoneSolver simulates armature, damping, friction, effort and velocity limits: a model that
    sets them all is not told they are ignored (the base class warns for solvers that ignore some)."""
    b = inertia.ModelBuilder()
    link = b.add_body(mass=1.0, inertia=np.eye(3) * 0.01)
    b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0))
    b.joint_armature[0], b.joint_damping[0], b.joint_friction[0] = 0.01, 0.1, 0.05
    b.joint_effort_limit[0], b.joint_velocity_limit[0] = 5.0, 3.0
    model = b.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inertia.FeatherstoneSolver(model)
    with pytest.warns(RuntimeWarning, match="does not simulate joint_armature, joint_velocity_limit"):
        inertia.SemiImplicitSolver(model)
