"""FeatherstoneSolver against independent references: a float64 Jacobian-based reference (mass matrix,
bias forces), closed forms (pendulum period, flywheel spin-down, conserved energy and angular
momentum), MuJoCo (the same URDF), and the behaviour the implicit terms promise (stiff drives, light
links, limits, friction, effort and velocity limits, mass-independent contact)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import inertia
from test_featherstone_models import Reference, a1_builder, kuka_builder, mujoco_kuka

KUKA_Q0 = np.array([0.4, 0.8, -0.3, -1.0, 0.5, 0.7, 0.2])


def no_limits(b):
    b.joint_limit_lower[:] = [-math.inf] * len(b.joint_limit_lower)
    b.joint_limit_upper[:] = [math.inf] * len(b.joint_limit_upper)
    return b


def simulate(model, solver, state, steps, dt, control=None, contacts=None, record=None):
    """``steps`` steps from ``state`` (ping-pong); ``record(i, state)`` after each. Returns the last state."""
    a, b = state, model.state()
    for i in range(steps):
        if contacts is not None:
            model.collide(a, contacts)
        solver.step(a, b, control, contacts, dt)
        a, b = b, a
        if record is not None:
            record(i, a)
    return a


def captured(model, solver, state, pairs, dt, control=None, each=None, every=1):
    """2 * ``pairs`` steps from ``state`` (which ends up holding the result), replayed from a graph of two
    steps (no Python per step; bitwise the same steps). ``each(middle, state)`` after every ``every`` pairs."""
    b = model.state()
    solver.prepare_state(b)
    solver.prepare_state(state)
    with wp.ScopedCapture(device=model.device) as cap:
        solver.step(state, b, control, None, dt)
        solver.step(b, state, control, None, dt)
    for i in range(pairs):
        wp.capture_launch(cap.graph)
        if each is not None and (i + 1) % every == 0:
            each(b, state)
    return state


def joint_state(model, q, qd=None):
    """A state at joint coordinates q (rates qd), bodies synced."""
    s = model.state()
    s.joint_q.assign(np.asarray(q, np.float32))
    if qd is not None:
        s.joint_qd.assign(np.asarray(qd, np.float32))
    return s


def dense_blocks(solver, flat, diag=None):
    """An articulation-blocked matrix of the step data as one dense matrix in State.joint_qd order."""
    topo = solver.topology
    n = solver.model.joint_dof_count
    out = np.zeros((n, n))
    for a in range(topo.articulation_count):
        d0, d1 = topo.art_dof_start_np[a], topo.art_dof_start_np[a + 1]
        m0, k = topo.art_mat_start_np[a], d1 - d0
        block = flat[m0:m0 + k * k].reshape(k, k).astype(np.float64)
        if diag is not None:
            block -= np.diag(diag[d0:d1])
        idx = topo.dof_state_np[d0:d1]
        out[np.ix_(idx, idx)] = block
    return out


def tree_builder():
    """A tree of every joint type: a free base with a ball-jointed arm, a prismatic slider and a hinge on it."""
    b = inertia.ModelBuilder()
    base = b.add_body(mass=3.0, inertia=np.diag([0.05, 0.08, 0.1]), com=(0.02, 0.0, -0.01))
    b.add_joint_free(base, parent_xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
    arm = b.add_body(mass=1.0, inertia=np.diag([0.01, 0.02, 0.015]), com=(0.1, 0.0, 0.0))
    b.add_joint_ball(base, arm, parent_xform=((0.2, 0.0, 0.0), (0.0, 0.0, 0.3826834, 0.9238795)))
    slider = b.add_body(mass=0.5, inertia=np.diag([0.002, 0.003, 0.004]), com=(0.0, 0.05, 0.0))
    b.add_joint_prismatic(arm, slider, parent_xform=((0.2, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(1.0, 0.0, 0.0))
    tip = b.add_body(mass=0.3, inertia=np.diag([0.001, 0.001, 0.002]), com=(0.0, 0.0, 0.05))
    b.add_joint_revolute(slider, tip, parent_xform=((0.0, 0.1, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0))
    weld = b.add_body(mass=0.2, inertia=np.diag([0.001, 0.001, 0.001]))
    b.add_joint_fixed(tip, weld, parent_xform=((0.0, 0.0, 0.1), (0.0, 0.0, 0.0, 1.0)))
    return b


def random_coordinates(model, rng, spread=0.8):
    q = model.state().joint_q.numpy().astype(np.float64)
    for j, t in enumerate(model.joint_type.numpy()):
        qs = model.joint_q_start.numpy()[j]
        if t in (inertia.types.JOINT_REVOLUTE, inertia.types.JOINT_PRISMATIC):
            q[qs] += rng.uniform(-spread, spread)
        elif t in (inertia.types.JOINT_BALL, inertia.types.JOINT_FREE):
            k = qs + (3 if t == inertia.types.JOINT_FREE else 0)
            if t == inertia.types.JOINT_FREE:
                q[qs:qs + 3] += rng.uniform(-0.3, 0.3, 3)
            r = rng.normal(size=4)
            q[k:k + 4] = r / np.linalg.norm(r)
    return q


@pytest.mark.filterwarnings("ignore::inertia.StabilityWarning")  # random states: some outside the joint limits
@pytest.mark.parametrize("robot", ["kuka", "a1", "tree"])
def test_mass_matrix_and_bias_forces_match_the_float64_reference(robot):
    """CRBA + RNEA (float32, spatial algebra) vs the float64 Jacobian reference, at random states."""
    b = {"kuka": kuka_builder, "a1": a1_builder, "tree": tree_builder}[robot]()
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    ref = Reference(model)
    rng = np.random.default_rng(3)
    for _ in range(2):
        q = random_coordinates(model, rng)
        qd = rng.uniform(-2.0, 2.0, model.joint_dof_count)
        s0, s1 = joint_state(model, q, qd), model.state()
        solver.step(s0, s1, None, None, 1e-3)
        stage = s1.step_buffers.stages[0]
        M = dense_blocks(solver, stage.H0.numpy(), stage.diag.numpy())  # H0 - diag = M
        bias = np.zeros(model.joint_dof_count)
        bias[solver.topology.dof_state_np] = stage.bias.numpy()
        M_ref, C_ref = ref.mass_matrix(q), ref.bias(q, qd)
        # float32 sums of ~10 products per entry: ~1e-6 of the largest entry; the reference's central
        # difference is exact to ~1e-10
        assert np.abs(M - M_ref).max() < 1e-5 * np.abs(M_ref).max(), np.abs(M - M_ref).max()
        assert np.abs(bias - C_ref).max() < 1e-5 * np.abs(C_ref).max(), np.abs(bias - C_ref).max()


def compound_pendulum(length=0.5, mass=2.0, amplitude=0.01):
    b = inertia.ModelBuilder()
    link = b.add_body(mass=mass, inertia=np.diag([0.01, 0.02, 0.015]), com=(length, 0.0, 0.0))
    b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0))
    model = b.finalize()
    i_pivot = 0.02 + mass * length ** 2
    period = 2.0 * math.pi * math.sqrt(i_pivot / (mass * 9.81 * length))
    # start hanging down (angle pi / 2 about y puts the com below the pivot) plus the amplitude
    return model, period, math.pi / 2 + amplitude


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_compound_pendulum_period(integrator):
    model, period, q0 = compound_pendulum()
    solver = inertia.FeatherstoneSolver(model, integrator=integrator)
    dt = 1e-3
    angles = []

    def record(*states):
        angles.extend(float(s.joint_q.numpy()[0]) - math.pi / 2 for s in states)

    captured(model, solver, joint_state(model, [q0]), int(1.5 * period / dt), dt, each=record)
    a = np.array(angles)
    up = np.flatnonzero((a[:-1] < 0) & (a[1:] >= 0))  # upward zero crossings, interpolated
    t = (up + 1 + a[up] / (a[up] - a[up + 1])) * dt
    measured = float(np.mean(np.diff(t)))
    # small-angle period: amplitude 0.01 rad changes it by amp^2 / 16 = 6e-6; the integrators' phase
    # error is O(dt^2) here (3e-7 for symplectic Euler at omega dt = 0.005); zero-crossing interpolation ~1e-5
    assert abs(measured - period) < 5e-5 * period, (measured, period)


def double_pendulum():
    b = inertia.ModelBuilder()
    upper = b.add_body(mass=1.0, inertia=np.diag([0.005, 0.02, 0.02]), com=(0.25, 0.0, 0.0))
    b.add_joint_revolute(-1, upper, parent_xform=((0.0, 0.0, 2.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0))
    lower = b.add_body(mass=0.7, inertia=np.diag([0.003, 0.01, 0.01]), com=(0.2, 0.0, 0.0))
    b.add_joint_revolute(upper, lower, parent_xform=((0.5, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0))
    return b.finalize()


@pytest.mark.parametrize("integrator, bound", [("euler", 5e-2), ("rk4", 1e-4)])
def test_double_pendulum_conserves_energy(integrator, bound):
    """Chaotic double pendulum, 5 s at dt 1e-3: the energy change relative to the energy the motion
    releases. RK4: ~1e-6. Semi-implicit Euler in joint coordinates is first order and not symplectic
    (the Coriolis forces are explicit): its energy wanders by ~dt per second (2e-2 here after 5 s,
    1e-1 after 10 s at dt 2e-3); prefer RK4 for long passive motion."""
    model = double_pendulum()
    solver = inertia.FeatherstoneSolver(model, integrator=integrator)
    ref = Reference(model)
    q0 = [0.3, 1.2]
    e0 = ref.energy(q0, [0.0, 0.0])
    scale = e0 - ref.energy([math.pi / 2, 0.0], [0.0, 0.0])  # potential energy released from q0 to hanging
    energies = []
    captured(model, solver, joint_state(model, q0), 2500, 1e-3, every=25,
             each=lambda _, s: energies.append(ref.energy(s.joint_q.numpy(), s.joint_qd.numpy())))
    drift = np.abs(np.array(energies) - e0).max() / scale
    print(f"[featherstone] double pendulum {integrator}: max |dE| / scale = {drift:.2e}")
    assert drift < bound


def kuka_mujoco_rk4(q0, seconds, dt=1e-4, every=1e-3):
    mujoco = pytest.importorskip("mujoco")
    mj = mujoco_kuka()
    mj.jnt_limited[:] = 0
    mj.opt.integrator, mj.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, dt
    d = mujoco.MjData(mj)
    d.qpos[:] = q0
    out, k = [np.array(q0, dtype=np.float64)], int(round(every / dt))
    for i in range(int(round(seconds / dt))):
        mujoco.mj_step(mj, d)
        if (i + 1) % k == 0:
            out.append(d.qpos.copy())
    return np.array(out)


def kuka_errors(integrator, dt, seconds, reference):
    model = no_limits(kuka_builder()).finalize()
    solver = inertia.FeatherstoneSolver(model, integrator=integrator)
    every = int(round(1e-3 / dt)) if dt < 1e-3 else 1
    frames = []
    simulate(model, solver, joint_state(model, KUKA_Q0), int(round(seconds / dt)), dt,
             record=lambda i, s: frames.append(s.joint_q.numpy().copy()) if (i + 1) % every == 0 else None)
    stride = int(round(dt / 1e-3)) if dt > 1e-3 else 1
    return float(np.abs(np.array(frames) - reference[stride::stride][:len(frames)]).max())


def test_passive_kuka_matches_mujoco_rk4():
    """Passive 7-DoF Kuka (no damping, no limits), 1 s from a bent pose, against MuJoCo's RK4 at dt 1e-4.

    The swing is chaotic (the wrist spins up; a joint moves ~9 rad): MuJoCo's own semi-implicit Euler at
    dt 1e-3 is 2 rad off after 1 s, and so is ours (the same scheme on the same equations: their
    errors agree). RK4 at dt 1e-3 stays within 1e-3 rad, which is float32 rounding amplified by the
    chaos (the error stops shrinking below dt 2e-3); over shorter spans the errors shrink with dt as
    each scheme's order says.
    """
    ref = kuka_mujoco_rk4(KUKA_Q0, 1.0)
    rk4 = kuka_errors("rk4", 1e-3, 1.0, ref)
    print(f"[featherstone] passive Kuka 1 s: RK4 dt 1e-3 max error {rk4:.2e} rad")
    assert rk4 < 1e-2
    short = ref[:201]
    euler = [kuka_errors("euler", dt, 0.2, short) for dt in (4e-3, 2e-3, 1e-3)]
    orders = np.log2(np.array(euler[:-1]) / np.array(euler[1:]))
    print(f"[featherstone] passive Kuka 0.2 s, Euler dt 4e-3, 2e-3, 1e-3: {euler}, orders {orders}")
    assert (orders > 0.8).all(), euler  # first order: the error halves with dt (1.0 up to rounding)
    rk4_half = [kuka_errors("rk4", dt, 0.5, ref[:501]) for dt in (2e-2, 1e-2)]
    print(f"[featherstone] passive Kuka 0.5 s, RK4 dt 2e-2, 1e-2: {rk4_half}")
    # fourth order: 16x (measured 19; at smaller dt the float32 rounding floor, ~1e-5 rad here, shows)
    assert rk4_half[0] / rk4_half[1] > 8.0


def test_passive_kuka_energy_over_ten_seconds():
    """RK4 at dt 1e-3: the energy of the undamped arm stays within 1 % of its kinetic energy scale for 10 s."""
    model = no_limits(kuka_builder()).finalize()
    solver = inertia.FeatherstoneSolver(model, integrator="rk4")
    ref = Reference(model)
    state = joint_state(model, KUKA_Q0)
    e0 = ref.energy(KUKA_Q0, np.zeros(7))
    worst, kinetic = 0.0, 0.0
    for _ in range(20):  # 20 x 0.5 s, replayed from a captured pair of steps
        state = captured(model, solver, state, 250, 1e-3)
        q, qd = state.joint_q.numpy(), state.joint_qd.numpy()
        worst = max(worst, abs(ref.energy(q, qd) - e0))
        kinetic = max(kinetic, 0.5 * qd @ ref.mass_matrix(q) @ qd)
    print(f"[featherstone] Kuka 10 s RK4: max |dE| {worst:.2e} J, largest kinetic energy {kinetic:.1f} J")
    assert kinetic > 10.0 and worst < 0.01 * kinetic


def test_flywheel_spin_down_is_the_implicit_closed_form():
    """Armature and damping enter the solved matrix: a flywheel of inertia I + armature under damping c
    decays as v_n = v0 / (1 + c dt / (I + A))^n, the implicit Euler closed form, even at c dt / (I + A) = 100
    (an explicit damper flips sign and grows beyond 2)."""
    I, A, c, dt = 0.01, 0.04, 25.0, 0.2
    b = inertia.ModelBuilder()
    wheel = b.add_body(mass=1.0, inertia=np.diag([I, I, I]))
    b.add_joint_revolute(-1, wheel, axis=(0.0, 0.0, 1.0), armature=A, damping=c)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    rates = []
    simulate(model, solver, joint_state(model, [0.0], [10.0]), 5, dt,
             record=lambda i, s: rates.append(float(s.joint_qd.numpy()[0])))
    expected = 10.0 / (1.0 + c * dt / (I + A)) ** np.arange(1, 6)
    # float32: I + A is resolved to 2^-24 of the solved diagonal c dt + I + A, i.e. 100 x 6e-8 of itself per step
    np.testing.assert_allclose(rates, expected, rtol=5 * 100 * 2.0 ** -23)


def light_chain(kp, kd, link_mass=1e-3):
    """A 3-link arm whose last link weighs ``link_mass`` (a 1 g flange as on the Panda), PD drives."""
    b = inertia.ModelBuilder()
    parent = -1
    for i, (m, length) in enumerate(((2.0, 0.4), (1.0, 0.3), (link_mass, 0.02))):
        body = b.add_body(mass=m, inertia=np.eye(3) * m * length ** 2 / 12.0 + np.eye(3) * 1e-9,
                          com=(length / 2, 0.0, 0.0))
        b.add_joint_revolute(parent, body, parent_xform=((0.4 if i == 1 else 0.3 if i == 2 else 0.0, 0.0, 0.0),
                                                         (0.0, 0.0, 0.0, 1.0)),
                             axis=(0.0, 1.0, 0.0), target_ke=kp, target_kd=kd)
        parent = body
    return b.finalize()


@pytest.mark.parametrize("kp, kd", [(100.0, 2.0), (1e4, 50.0), (1e4, 2.0)])
def test_stiff_drives_on_light_links_are_stable(kp, kd):
    """Defaults, dt 1e-3: drives of any gain on a 1 g link track their target (an explicit drive needs
    dt < 2 I / kd = 2e-8 s there) and settle; nothing gains energy."""
    model = light_chain(kp, kd)
    solver = inertia.FeatherstoneSolver(model)
    control = model.control()
    target = np.array([0.5, -0.8, 1.0], np.float32)
    control.joint_target_pos.assign(target)
    state = simulate(model, solver, joint_state(model, [0.0, 0.0, 0.0]), 2000, 1e-3, control)
    q, qd = state.joint_q.numpy(), state.joint_qd.numpy()
    assert np.isfinite(q).all() and np.abs(qd).max() < 0.05  # settling (kd 2 leaves the heavy links slow)
    # static sag under gravity: at most (m g r) / kp of the heaviest joint load (~10 N m / kp)
    assert np.abs(q - target).max() < 12.0 / kp + 1e-3, q


def test_joint_limit_holds_a_falling_link():
    """A pendulum falls onto a stiff implicit limit (ke 1e6 on a 0.5 kg m^2 link, dt 1e-3: an explicit
    spring would need dt < 1.4 ms / (ke / 1e4)^0.5): it rests there, sinking m g d / ke."""
    b = inertia.ModelBuilder()
    link = b.add_body(mass=2.0, inertia=np.eye(3) * 0.01, com=(0.5, 0.0, 0.0))
    b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), limit_lower=-0.3, limit_upper=0.3, limit_ke=1e6,
                         limit_kd=100.0)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    state = simulate(model, solver, joint_state(model, [0.0]), 1500, 1e-3)
    q = float(state.joint_q.numpy()[0])
    # gravity turns the com (along +x) down: a positive rotation about +y; torque m g d cos(0.3)
    sag = 2.0 * 9.81 * 0.5 * math.cos(0.3) / 1e6
    assert abs(q - (0.3 + sag)) < 0.1 * sag + 1e-6, q
    assert abs(float(state.joint_qd.numpy()[0])) < 1e-3


def test_joint_friction_holds_below_and_slides_above():
    """Coulomb friction mu on a flywheel: a torque below mu only creeps (where mu v / sqrt(v^2 + eps^2)
    = tau); above it, the wheel accelerates at (tau - mu) / I."""
    mu, I = 2.0, 0.05
    b = inertia.ModelBuilder()
    wheel = b.add_body(mass=1.0, inertia=np.diag([I, I, I]))
    b.add_joint_revolute(-1, wheel, axis=(0.0, 0.0, 1.0), friction=mu)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    control = model.control()
    for tau in (1.0, 3.0):
        control.joint_f.assign(np.array([tau], np.float32))
        rates = []
        simulate(model, solver, joint_state(model, [0.0], [0.0]), 1000, 1e-3, control,
                 record=lambda i, s: rates.append(float(s.joint_qd.numpy()[0])))
        if tau < mu:
            ratio = tau / mu
            creep = solver.joint_friction_smoothing * ratio / math.sqrt(1.0 - ratio ** 2)
            assert abs(rates[-1] - creep) < 1e-3 * creep, (rates[-1], creep)
        else:
            # sliding: the acceleration is (tau - mu) / I (over the last half second). Breaking away lags
            # ~20 ms: the friction's damping is taken at the step's start, so from rest the rate grows
            # by tau / mu per step until it is past dt mu / I
            # the lagged coefficient makes the friction mu v' / v = mu (1 + dt a / v): 0.3 % more at v ~ 15 rad/s
            slope = (rates[-1] - rates[499]) / 0.5
            assert abs(slope - (tau - mu) / I) < 1e-2 * (tau - mu) / I, slope
            assert abs(rates[-1] - (tau - mu) / I) < 0.05 * (tau - mu) / I, rates[-1]


def test_effort_limit_clamps_the_drive_and_velocity_limit_the_rate():
    I = 0.05
    b = inertia.ModelBuilder()
    wheel = b.add_body(mass=1.0, inertia=np.diag([I, I, I]))
    b.add_joint_revolute(-1, wheel, axis=(0.0, 0.0, 1.0), target_ke=1e4, target_kd=10.0, effort_limit=0.5,
                         velocity_limit=3.0)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    control = model.control()
    control.joint_target_pos.assign(np.array([100.0], np.float32))
    rates = []
    simulate(model, solver, joint_state(model, [0.0]), 400, 1e-3, control,
             record=lambda i, s: rates.append(float(s.joint_qd.numpy()[0])))
    # saturated: the acceleration is effort_limit / I = 10 rad/s^2 until the 3 rad/s limit (t = 0.3 s)
    np.testing.assert_allclose(rates[99], 0.5 / I * 0.1, rtol=1e-4)
    assert max(rates) <= 3.0 and rates[-1] == pytest.approx(3.0)


def test_free_body_keeps_its_angular_momentum():
    """A box tumbling about a non-principal axis without gravity (RK4): world angular momentum constant."""
    b = inertia.ModelBuilder(gravity=0.0)
    box = b.add_body(xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)), angular_velocity=(2.0, 0.3, 1.0),
                     linear_velocity=(0.5, 0.0, 0.0))
    b.add_shape_box(box, hx=0.3, hy=0.1, hz=0.05, density=500.0)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model, integrator="rk4")

    def momentum(s):
        q, w = s.body_q.numpy()[0], s.body_qd.numpy()[0][3:]
        from inertia.transforms import quat_to_matrix

        r = quat_to_matrix(q[3:])
        return r @ model.body_inertia.numpy()[0] @ r.T @ w

    state = model.state()
    L0 = momentum(state)
    state = captured(model, solver, state, 1000, 1e-3)
    L1 = momentum(state)
    assert np.linalg.norm(L1 - L0) < 1e-4 * np.linalg.norm(L0), (L0, L1)
    # the com moves 5e-4 m per step: 2000 float32 additions near 1 m round by up to 2000 x 6e-8
    np.testing.assert_allclose(state.body_q.numpy()[0][:3], [0.5 * 2.0, 0.0, 1.0], atol=1.2e-4)


@pytest.mark.parametrize("mass_scale", [1e-3, 1.0, 1e3])
def test_contact_means_the_same_at_any_mass(mass_scale):
    """A box dropped on the ground rests sinking g tc^2 (the contact's time constant, any mass), without
    bouncing (critically damped: the rebound speed stays below 0.3 of the impact speed)."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body(xform=((0.0, 0.0, 0.3), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(box, hx=0.1, hy=0.2, hz=0.1, density=1000.0 * mass_scale)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    contacts = model.contacts()
    vz = []
    state = simulate(model, solver, model.state(), 1000, 1e-3, contacts=contacts,
                     record=lambda i, s: vz.append(float(s.body_qd.numpy()[0][2])))
    impact = -min(vz)
    assert max(vz) < 0.3 * impact
    sink = 0.1 - float(state.body_q.numpy()[0][2])
    tc = solver.contact_timeconst
    # g tc^2 of the four corners sharing the box's mass (row sums); implicit Euler and the margin add ~20 %
    assert 0.8 * 9.81 * tc ** 2 < sink < 1.5 * 9.81 * tc ** 2, sink


def mujoco_a1(kp, kd, mu, z0, stand):
    mujoco = pytest.importorskip("mujoco")
    from test_featherstone_models import robot_path

    spec = mujoco.MjSpec.from_file(robot_path("a1/a1.urdf"))
    trunk = spec.body("trunk")
    trunk.add_freejoint()
    trunk.pos = [0.0, 0.0, z0]
    for g in spec.geoms:  # no self-collision, as the inertia model
        g.contype, g.conaffinity, g.friction = 1, 2, [mu, 0.005, 0.0001]
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], contype=2, conaffinity=1,
                            friction=[mu, 0.005, 0.0001])
    names = []
    for j in spec.joints:
        if j.type == mujoco.mjtJoint.mjJNT_HINGE:
            a = spec.add_actuator(name=j.name, target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            a.set_to_position(kp=kp, kv=kd)
            names.append(j.name)
    mj = spec.compile()
    mj.opt.timestep, mj.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    d = mujoco.MjData(mj)
    target = np.array([stand[n.split("_")[1]] for n in names])
    for k, n in enumerate(names):
        d.qpos[mj.jnt_qposadr[mj.joint(n).id]] = target[k]
    d.ctrl[:] = target
    heights = []
    for _ in range(2000):
        mujoco.mj_step(mj, d)
        heights.append(d.qpos[2])
    return np.array(heights)


A1_STAND = {"hip": 0.0, "upper": 0.9, "lower": -1.8}


def a1_standing(kp, kd, mu=1.0, z0=0.32, steps=2000):
    b = a1_builder(xform=((0.0, 0.0, z0), (0.0, 0.0, 0.0, 1.0)))
    b.add_ground_plane()
    b.shape_material_mu[:] = [mu] * len(b.shape_material_mu)
    model = b.finalize()
    types, qds, qs = model.joint_type.numpy(), model.joint_qd_start.numpy(), model.joint_q_start.numpy()
    ke, kdv, target = (np.zeros(model.joint_dof_count, np.float32) for _ in range(3))
    q = model.state().joint_q.numpy()
    for j, (label, t) in enumerate(zip(model.joint_label, types)):
        if t == inertia.types.JOINT_REVOLUTE:
            ke[qds[j]], kdv[qds[j]] = kp, kd
            target[qds[j]] = q[qs[j]] = A1_STAND[label.split("_")[1]]
    model.joint_target_ke.assign(ke)
    model.joint_target_kd.assign(kdv)
    solver = inertia.FeatherstoneSolver(model)
    control = model.control()
    control.joint_target_pos.assign(target)
    heights = []
    state = simulate(model, solver, joint_state(model, q), steps, 1e-3, control, model.contacts(),
                     record=lambda i, s: heights.append(float(s.body_q.numpy()[0][2])))
    return np.array(heights), state


@pytest.mark.parametrize("kp, kd", [(100.0, 2.0), (1e4, 50.0)])
def test_a1_stands_on_pd_drives_like_mujoco(kp, kd):
    """Unitree A1 (1 g dummy links) dropped 4 cm onto its feet, standing on PD drives for 2 s at dt 1e-3
    with the solver's defaults: its base height is MuJoCo's (implicitfast, default contact, same friction)
    within 5 mm. Measured: 0.6 mm (kp 100) and 0.8 mm (kp 1e4); the remaining difference is the contact
    models' (MuJoCo's soft constraints vs these spring-dampers: ~1 mm of sinking each) and friction creep."""
    ours, state = a1_standing(kp, kd)
    theirs = mujoco_a1(kp, kd, 1.0, 0.32, A1_STAND)
    assert np.isfinite(state.joint_q.numpy()).all()
    diff = abs(ours[-1] - theirs[-1])
    print(f"[featherstone] A1 kp {kp:g} kd {kd:g}: base height {ours[-1]:.4f} m, MuJoCo {theirs[-1]:.4f} m, "
          f"difference {1e3 * diff:.2f} mm (largest during the landing {1e3 * np.abs(ours - theirs).max():.1f} mm)")
    assert diff < 5e-3
    assert np.abs(state.joint_qd.numpy()).max() < 0.05  # standing still


def test_worlds_are_independent_articulations():
    """Three Kuka worlds at different places and poses step like each one alone (float32 rounding differs:
    positions are relative to each tree's root)."""
    single = no_limits(kuka_builder()).finalize()
    b = inertia.ModelBuilder()
    b.replicate(no_limits(kuka_builder()), 3, spacing=(2.0, 0.0, 0.0))
    many = b.finalize()
    poses = [KUKA_Q0, KUKA_Q0 * 0.5, -KUKA_Q0]
    state = simulate(many, inertia.FeatherstoneSolver(many), joint_state(many, np.concatenate(poses)), 200, 1e-3)
    for w, q0 in enumerate(poses):
        alone = simulate(single, inertia.FeatherstoneSolver(single), joint_state(single, q0), 200, 1e-3)
        np.testing.assert_allclose(state.joint_q.numpy()[7 * w:7 * (w + 1)], alone.joint_q.numpy(), atol=2e-5)


@pytest.mark.filterwarnings("ignore::inertia.StabilityWarning")  # the zero pose: the knee snap, velocity limits
def test_captured_steps_are_bitwise_the_plain_steps():
    model = a1_builder().finalize()
    solver = inertia.FeatherstoneSolver(model)
    plain = simulate(model, solver, model.state(), 20, 1e-3)
    replayed = captured(model, solver, model.state(), 10, 1e-3)
    assert np.array_equal(plain.joint_q.numpy(), replayed.joint_q.numpy())
    assert np.array_equal(plain.body_q.numpy(), replayed.body_q.numpy())


def test_state_in_is_never_written_and_bodies_follow_the_joints():
    model = tree_builder().finalize()
    solver = inertia.FeatherstoneSolver(model)
    s0 = joint_state(model, random_coordinates(model, np.random.default_rng(1)),
                     np.random.default_rng(2).uniform(-1, 1, model.joint_dof_count))
    solver.sync_bodies(s0)
    before = {n: getattr(s0, n).numpy().copy() for n in ("joint_q", "joint_qd", "body_q", "body_qd")}
    s1 = model.state()
    solver.step(s0, s1, None, None, 1e-3)
    for n, v in before.items():
        assert np.array_equal(getattr(s0, n).numpy(), v), n
    # the output's bodies are where forward kinematics puts them, velocities included
    check = model.state()
    inertia.eval_fk(model, s1.joint_q.numpy(), s1.joint_qd.numpy(), check)
    np.testing.assert_allclose(s1.body_q.numpy(), check.body_q.numpy(), atol=1e-6)
    np.testing.assert_allclose(s1.body_qd.numpy(), check.body_qd.numpy(), atol=1e-5)


def test_bad_input_is_refused():
    model = kuka_builder().finalize()
    for kwargs, match in (({"integrator": "rk2"}, "integrator"), ({"contact_timeconst": 0.0}, "contact_timeconst"),
                          ({"contact_dampratio": -1.0}, "contact_dampratio"),
                          ({"friction_smoothing": float("nan")}, "friction_smoothing")):
        with pytest.raises(ValueError, match=match):
            inertia.FeatherstoneSolver(model, **kwargs)
    b = inertia.ModelBuilder()
    base = b.add_body(kinematic=True)
    link = b.add_body(mass=1.0, inertia=np.eye(3))
    b.add_joint_revolute(base, link)
    with pytest.raises(ValueError, match="kinematic and the child of no joint"):
        inertia.FeatherstoneSolver(b.finalize())
    b = inertia.ModelBuilder()
    a = b.add_body(mass=1.0, inertia=np.eye(3))
    b.add_joint_revolute(-1, a)
    ghost = b.add_body(kinematic=True)
    b.add_joint_revolute(a, ghost, label="spins_nothing")
    with pytest.raises(ValueError, match="spins_nothing"):
        inertia.FeatherstoneSolver(b.finalize())


def test_the_panda_holds_a_pose_on_its_drives_at_1_ms():
    """pybullet_data's Franka Panda (its 0.1 kg fingers, effort limits 12-87 N m, velocity limits 2.2-2.6 rad/s)
    from straight up to a pose on PD drives (kp 400, kd 40) at dt 1 ms with the defaults: it gets there within
    its limits and settles; at rest every arm joint's drive torque
    kp (target - q) balances gravity as the float64 reference computes it at that q. The tolerance, 2e-3 of the
    largest gravity torque (19.5 N m), is 8x the imbalance measured (5e-3 N m: float32 rounding of q times
    kp); a drive that saw the wrong gravity or the wrong mass would be off by its whole share (~1-3 N m)."""
    pybullet_data = pytest.importorskip("pybullet_data")
    b = inertia.ModelBuilder()
    kp = 400.0
    b.add_urdf(f"{pybullet_data.getDataPath()}/franka_panda/panda.urdf", joint_target_ke=kp, joint_target_kd=40.0)
    model = b.finalize()
    solver = inertia.FeatherstoneSolver(model)
    control = model.control()
    target = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.8, 0.02, 0.02], np.float32)
    control.joint_target_pos.assign(target)
    state = simulate(model, solver, model.state(), 4000, 1e-3, control)
    q, qd = state.joint_q.numpy().astype(np.float64), state.joint_qd.numpy()
    lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    assert np.isfinite(q).all() and np.abs(qd).max() < 1e-3  # settled
    assert np.all(q >= lower - 1e-3) and np.all(q <= upper + 1e-3)
    gravity = Reference(model).bias(q, np.zeros(model.joint_dof_count))[:7]
    drive = kp * (target[:7] - q[:7])
    print(f"\n[featherstone] Panda at rest: drive torque {drive.round(3)} N m, gravity {gravity.round(3)} N m")
    assert np.abs(drive - gravity).max() < 2e-3 * np.abs(gravity).max()

