"""Rigid bodies without contact: mass properties, free motion, torque-free rotation, joint kinematics, bad input.

Known answers: closed-form mass and inertia of each solid; symplectic Euler's
free fall; conservation of angular momentum and the intermediate-axis
(Dzhanibekov) instability of a torque-free body; forward kinematics of a
planar two-link arm; tape gradients of the body integrator vs central
differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE, box_mesh, quat_matrix
from gradcheck import Input, TapeProblem, body_loss_kernel, check_gradient

import inertia
from inertia.builder import mass_properties as mp


def run(model, steps, dt, solver=None, control=None, callback=None):
    solver = solver or inertia.SemiImplicitSolver(model)
    s0, s1 = model.state(), model.state()
    control = control or model.control()
    for k in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        if callback is not None:
            callback(s0, k + 1)
    return s0


# --------------------------------------------------------------------------- mass properties
def test_solid_mass_properties_match_closed_forms():
    rho = 700.0
    m, c, i = mp.box(rho, 0.1, 0.2, 0.3)
    assert m == pytest.approx(rho * 0.048)
    assert np.allclose(np.diag(i), m / 3 * np.array([0.13, 0.10, 0.05]))
    m, _, i = mp.sphere(rho, 0.2)
    assert m == pytest.approx(rho * 4 / 3 * math.pi * 0.008) and i[0, 0] == pytest.approx(0.4 * m * 0.04)
    m, _, i = mp.cylinder(rho, 0.1, 0.25)
    assert m == pytest.approx(rho * math.pi * 0.01 * 0.5)
    assert i[2, 2] == pytest.approx(0.5 * m * 0.01) and i[0, 0] == pytest.approx(m * (3 * 0.01 + 0.25) / 12)
    # a capsule of zero half height is a sphere
    ms, _, is_ = mp.sphere(rho, 0.3)
    mc, _, ic = mp.capsule(rho, 0.3, 0.0)
    assert mc == pytest.approx(ms) and np.allclose(ic, is_)
    # a closed mesh of a box has the box's properties, wherever its origin sits
    v, f = box_mesh(0.1, 0.2, 0.3)
    mm, cm, im = mp.mesh(rho, v + np.array([0.5, -1.0, 2.0]), f)
    mb, _, ib = mp.box(rho, 0.1, 0.2, 0.3)
    assert mm == pytest.approx(mb) and np.allclose(cm, [0.5, -1.0, 2.0]) and np.allclose(im, ib, rtol=1e-9)


def test_body_mass_from_shapes_uses_the_parallel_axis_theorem():
    b = inertia.ModelBuilder()
    body = b.add_body()
    r, d, rho = 0.1, 0.5, 1000.0
    b.add_shape_sphere(body, xform=((d, 0.0, 0.0), (0, 0, 0, 1)), radius=r, density=rho)
    b.add_shape_sphere(body, xform=((-d, 0.0, 0.0), (0, 0, 0, 1)), radius=r, density=rho)
    b.add_shape_box(body, hx=0.05, hy=0.05, hz=0.05, density=0.0)  # collision only: no mass
    model = b.finalize(device=DEVICE)
    m1 = rho * 4 / 3 * math.pi * r**3
    assert model.body_mass.numpy()[0] == pytest.approx(2 * m1, rel=1e-6)
    assert np.allclose(model.body_com.numpy()[0], 0.0, atol=1e-7)
    inertia_expected = np.diag([2 * 0.4 * m1 * r * r] * 3) + np.diag([0.0, 2 * m1 * d * d, 2 * m1 * d * d])
    assert np.allclose(model.body_inertia.numpy()[0], inertia_expected, rtol=1e-5)
    assert np.allclose(model.body_inv_inertia.numpy()[0] @ model.body_inertia.numpy()[0], np.eye(3), atol=1e-5)


def test_explicit_mass_scales_the_shapes_inertia():
    b = inertia.ModelBuilder()
    body = b.add_body(mass=3.0)
    b.add_shape_box(body, hx=0.1, hy=0.2, hz=0.3)
    model = b.finalize(device=DEVICE)
    assert model.body_mass.numpy()[0] == pytest.approx(3.0)
    assert np.allclose(np.diag(model.body_inertia.numpy()[0]), 1.0 * np.array([0.13, 0.10, 0.05]), rtol=1e-6)


# --------------------------------------------------------------------------- free motion
def test_free_fall_is_symplectic_euler_exactly():
    b = inertia.ModelBuilder()
    body = b.add_body(xform=((0.0, 0.0, 10.0), (0, 0, 0, 1)), mass=2.0, inertia=(0.1, 0.1, 0.1),
                      com=(0.1, 0.0, 0.0), linear_velocity=(1.0, 0.0, 0.0))
    model = b.finalize(device=DEVICE)
    n, dt = 100, 0.01
    s = run(model, n, dt)
    q = s.body_q.numpy()[body]
    com_z = 10.0 - 9.81 * dt * dt * n * (n + 1) / 2
    assert q[2] == pytest.approx(com_z, abs=2e-5)
    assert q[0] == pytest.approx(1.0 * n * dt, abs=1e-5)  # the com moved 1 m/s * 1 s; no rotation
    assert np.allclose(q[3:], [0, 0, 0, 1], atol=1e-7)
    assert s.body_qd.numpy()[body][2] == pytest.approx(-9.81 * n * dt, rel=1e-5)


def test_kinematic_body_keeps_its_velocity():
    b = inertia.ModelBuilder()
    body = b.add_body(kinematic=True, linear_velocity=(0.5, 0.0, 0.0), angular_velocity=(0.0, 0.0, 1.0))
    model = b.finalize(device=DEVICE)
    control = model.control()
    control.body_f.assign(np.array([[10.0, 0, 0, 0, 0, 5.0]], dtype=np.float32))  # ignored
    s = run(model, 100, 0.01, control=control)
    q, qd = s.body_q.numpy()[body], s.body_qd.numpy()[body]
    assert np.allclose(qd, [0.5, 0, 0, 0, 0, 1.0], atol=1e-7)
    assert q[0] == pytest.approx(0.5, abs=1e-5) and q[2] == pytest.approx(0.0, abs=1e-7)
    assert 2 * math.atan2(q[5], q[6]) == pytest.approx(1.0, abs=1e-4)  # turned 1 rad about z


def test_constant_torque_spins_up_as_tau_over_i():
    b = inertia.ModelBuilder(gravity=0.0)
    body = b.add_body(mass=1.0, inertia=(0.2, 0.3, 0.5))
    model = b.finalize(device=DEVICE)
    control = model.control()
    control.body_f.assign(np.array([[0, 0, 0, 0, 0, 0.25]], dtype=np.float32))
    s = run(model, 200, 0.005, control=control)
    assert s.body_qd.numpy()[body][5] == pytest.approx(0.25 / 0.5 * 1.0, rel=1e-4)  # 200 float32 additions


def spinning_box(omega):
    """A box whose principal moments are (2, 3, 4) kg m^2, spinning at ``omega`` (world) with no gravity."""
    # box inertias m/3 (hy^2 + hz^2) etc.: solve for half extents with m = 12 kg
    m = 12.0
    s = np.linalg.solve([[0, 1, 1], [1, 0, 1], [1, 1, 0]], np.array([2.0, 3.0, 4.0]) * 3 / m)
    b = inertia.ModelBuilder(gravity=0.0)
    body = b.add_body(mass=m, angular_velocity=omega)
    b.add_shape_box(body, hx=math.sqrt(s[0]), hy=math.sqrt(s[1]), hz=math.sqrt(s[2]))
    model = b.finalize(device=DEVICE)
    assert np.allclose(np.diag(model.body_inertia.numpy()[0]), [2, 3, 4], rtol=1e-5)
    return model


def angular_momentum(state, inertia_body) -> np.ndarray:
    q = state.body_q.numpy()[0]
    r = quat_matrix(q[3:])
    w = state.body_qd.numpy()[0][3:].astype(np.float64)
    return r @ inertia_body @ r.T @ w


def test_torque_free_rotation_keeps_angular_momentum_and_flips_about_the_intermediate_axis():
    # Dzhanibekov: spin about the intermediate axis (y, I = 3) with a small perturbation.
    # The perturbation grows at w sqrt((I2 - I1)(I3 - I2) / (I1 I3)) = 1.41/s: a flip within ~5 s.
    model = spinning_box((0.02, 4.0, 0.02))
    inertia_body = np.diag([2.0, 3.0, 4.0])
    s0 = model.state()
    L0 = angular_momentum(s0, inertia_body)
    e0 = 0.5 * s0.body_qd.numpy()[0][3:] @ (inertia_body @ s0.body_qd.numpy()[0][3:])
    alignment, drift, energies = [], [], []

    def watch(state, k):
        if k % 10 == 0:
            r = quat_matrix(state.body_q.numpy()[0][3:])
            alignment.append(r[:, 1] @ L0 / np.linalg.norm(L0))  # body y axis along L
            drift.append(np.linalg.norm(angular_momentum(state, inertia_body) - L0) / np.linalg.norm(L0))
            w_body = r.T @ state.body_qd.numpy()[0][3:]
            energies.append(0.5 * w_body @ inertia_body @ w_body)

    run(model, 4000, 2e-3, callback=watch)
    print(f"\nintermediate axis: min alignment {min(alignment):.3f}, max |dL|/|L| {max(drift):.2e}, "
          f"energy drift {max(abs(e / e0 - 1) for e in energies):.2e}")
    assert max(drift) < 2e-5, "angular momentum must be conserved to float32 rounding"
    assert min(alignment) < -0.9, "the body must flip about its intermediate axis"
    assert max(abs(e / e0 - 1) for e in energies) < 0.02


@pytest.mark.parametrize("axis", [0, 2])
def test_rotation_about_largest_and_smallest_axis_is_stable(axis):
    omega = [0.02, 0.02, 0.02]
    omega[axis] = 4.0
    model = spinning_box(tuple(omega))
    worst = []

    def watch(state, k):
        r = quat_matrix(state.body_q.numpy()[0][3:])
        worst.append(abs(r[:, axis] @ np.eye(3)[axis]))

    run(model, 2000, 2e-3, callback=watch)
    assert min(worst) > 0.99


# --------------------------------------------------------------------------- joint kinematics
def two_link_arm(l1=1.0, l2=0.5):
    b = inertia.ModelBuilder()
    link1 = b.add_body(mass=1.0, com=(0.5 * l1, 0, 0), inertia=(0.01, 0.1, 0.1))
    link2 = b.add_body(mass=1.0, com=(0.5 * l2, 0, 0), inertia=(0.01, 0.1, 0.1))
    b.add_joint_revolute(-1, link1, axis=(0, 0, 1))
    b.add_joint_revolute(link1, link2, parent_xform=((l1, 0, 0), (0, 0, 0, 1)), axis=(0, 0, 1))
    return b.finalize(device=DEVICE)


def test_forward_kinematics_of_a_two_link_arm():
    l1, l2 = 1.0, 0.5
    model = two_link_arm(l1, l2)
    state = model.state()
    th, thd = np.array([0.3, -0.7]), np.array([1.5, -0.4])
    inertia.eval_fk(model, th, thd, state)
    q, qd = state.body_q.numpy(), state.body_qd.numpy()

    def e(a):
        return np.array([math.cos(a), math.sin(a), 0.0])

    def e_perp(a):
        return np.array([-math.sin(a), math.cos(a), 0.0])

    a1, a2 = th[0], th[0] + th[1]
    assert np.allclose(q[0][:3], 0.0, atol=1e-6)
    assert np.allclose(q[1][:3], l1 * e(a1), atol=1e-6)
    assert 2 * math.atan2(q[1][5], q[1][6]) == pytest.approx(a2, abs=1e-6)
    v_com2 = l1 * thd[0] * e_perp(a1) + 0.5 * l2 * (thd[0] + thd[1]) * e_perp(a2)
    assert np.allclose(qd[1][:3], v_com2, atol=1e-5)
    assert qd[1][5] == pytest.approx(thd.sum(), abs=1e-6) and qd[0][5] == pytest.approx(thd[0], abs=1e-6)
    # and back: the state's joint coordinates are the ones we set
    assert np.allclose(state.joint_q.numpy(), th, atol=1e-6)
    assert np.allclose(state.joint_qd.numpy(), thd, atol=1e-5)


def test_inverse_kinematics_recovers_every_joint_type():
    b = inertia.ModelBuilder()
    bodies = [b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1), com=(0.1, 0.05, 0.0)) for _ in range(5)]
    rot = (0.0, math.sin(0.2), 0.0, math.cos(0.2))
    b.add_joint_free(bodies[0], child_xform=((0.0, 0.1, 0.0), (0, 0, 0, 1)))
    b.add_joint_revolute(bodies[0], bodies[1], parent_xform=((0.3, 0, 0), rot), child_xform=((-0.1, 0, 0), rot),
                         axis=(1, 1, 0))
    b.add_joint_prismatic(bodies[1], bodies[2], parent_xform=((0, 0.3, 0), (0, 0, 0, 1)), axis=(0, 0, 1))
    b.add_joint_ball(bodies[2], bodies[3], parent_xform=((0, 0, 0.3), rot))
    b.add_joint_fixed(bodies[3], bodies[4], parent_xform=((0.2, 0, 0), (0, 0, 0, 1)))
    model = b.finalize(device=DEVICE)
    assert (model.joint_coord_count, model.joint_dof_count) == (7 + 1 + 1 + 4, 6 + 1 + 1 + 3)
    ball = np.array([0.2, -0.3, 0.1, 0.9])
    ball /= np.linalg.norm(ball)
    free_rot = np.array([0.1, 0.2, -0.3, 0.8])
    free_rot /= np.linalg.norm(free_rot)
    q = np.concatenate([[1.0, 2.0, 3.0], free_rot, [0.8], [-0.25], ball])
    qd = np.array([0.1, -0.2, 0.3, 0.5, -0.4, 0.2, 1.3, -0.6, 0.4, 0.5, -0.7])
    state = model.state()
    inertia.eval_fk(model, q, qd, state)
    assert np.allclose(state.joint_q.numpy(), q, atol=1e-5)
    assert np.allclose(state.joint_qd.numpy(), qd, atol=1e-5)
    # the fixed joint holds body 4 where body 3 says
    pose3, pose4 = state.body_q.numpy()[3], state.body_q.numpy()[4]
    assert np.allclose(pose4[:3], pose3[:3] + quat_matrix(pose3[3:]) @ [0.2, 0, 0], atol=1e-6)


def test_joint_coordinates_follow_the_bodies_after_each_step():
    model = two_link_arm()
    s0, s1 = model.state(), model.state()
    inertia.eval_fk(model, [0.4, 0.2], [0.0, 0.0], s0)
    inertia.SemiImplicitSolver(model).step(s0, s1, model.control(), None, 0.01)
    expected = model.state()
    expected.body_q.assign(s1.body_q)
    expected.body_qd.assign(s1.body_qd)
    from inertia.kinematics import eval_ik

    eval_ik(model, expected)
    assert np.array_equal(s1.joint_q.numpy(), expected.joint_q.numpy())


# --------------------------------------------------------------------------- gradients of the body integrator
def test_body_integration_gradients_match_central_differences():
    """30 steps of a free body under a constant wrench (no contact, no joints: smooth in every input):
    d (random weights . final pose and velocity) / d (initial velocity, inverse mass, inertia, wrench)."""
    b = inertia.ModelBuilder()
    b.add_body(xform=((0, 0, 1), (0.1, 0.2, 0.0, 1.0)), mass=2.0, com=(0.05, 0.0, -0.02),
               inertia=((0.3, 0.01, 0.0), (0.01, 0.2, 0.0), (0.0, 0.0, 0.1)),
               linear_velocity=(0.3, -0.2, 1.0), angular_velocity=(1.0, -2.0, 0.5))
    model = b.finalize(device=DEVICE, requires_grad=True)
    control = model.control()
    control.body_f.assign(np.array([[0.5, 0.0, 1.0, 0.05, -0.02, 0.03]], dtype=np.float32))
    rng = np.random.default_rng(3)
    wq, wqd = rng.uniform(-1, 1, (1, 7)), rng.uniform(-1, 1, (1, 6))  # pose (incl. quaternion) and velocity
    wq32, wqd32 = (wp.array(w.ravel().astype(np.float32), dtype=float, device=DEVICE) for w in (wq, wqd))
    steps, dt = 30, 0.01
    states = [model.state() for _ in range(steps + 1)]
    solver = inertia.SemiImplicitSolver(model)
    tapes = []

    def run():
        for t in range(steps):
            solver.step(states[t], states[t + 1], control, None, dt)

    def loss():
        run()
        q, qd = (a.numpy().astype(np.float64) for a in (states[-1].body_q, states[-1].body_qd))
        return float(np.sum(q * wq) + np.sum(qd * wqd))

    def backward():
        if tapes:
            tapes.pop().zero()
        out = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
        tape = wp.Tape()
        with tape:
            run()
            wp.launch(body_loss_kernel, dim=1, inputs=[states[-1].body_q, states[-1].body_qd, wq32, wqd32],
                      outputs=[out], device=DEVICE)
        tape.backward(loss=out)
        tapes.append(tape)

    problem = TapeProblem({"body_qd": states[0].body_qd, "body_inv_mass": model.body_inv_mass,
                           "body_inertia": model.body_inertia, "body_f": control.body_f}, loss, backward)
    # every entry of the inertia moves, the off-diagonal ones too: the integrator reads it as a general
    # matrix (and inverts it), so an unsymmetric direction is a valid one for the discrete map. Steps: 3 % of
    # the inverse mass and 3e-3 kg m^2 of inertia (the smallest moment is 0.1; at 1e-2 the truncation
    # error is 7e-4 of S)
    check_gradient("body integrator", problem, [
        Input("body_qd", h=1e-2), Input("body_inv_mass", h=3e-2, relative=True),
        Input("body_inertia", h=3e-3), Input("body_f", h=0.1)], seed=3)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, exc, msg", [
    (lambda b: b.add_body(mass=-1.0), ValueError, "body mass must be >= 0"),
    (lambda b: b.add_body(mass=0.0), ValueError, "mass 0 is only for kinematic=True"),
    (lambda b: b.add_body(mass=float("nan")), ValueError, "body mass must be finite"),
    (lambda b: b.add_body(xform=((0, 0, 0), (0, 0, 0, 0))), ValueError, "non-zero quaternion"),
    (lambda b: b.add_body(inertia=(1.0, 2.0)), ValueError, "3x3 matrix or its diagonal"),
    (lambda b: b.add_body(inertia=((1, 2, 0), (0, 1, 0), (0, 0, 1))), ValueError, "symmetric"),
    (lambda b: b.add_joint_revolute(0, 0), ValueError, "parent and child must differ"),
    (lambda b: b.add_joint_revolute(0, 5), IndexError, "child body 5 does not exist"),
    (lambda b: b.add_joint_revolute(-2, 1), IndexError, "parent body -2 does not exist"),
    (lambda b: b.add_joint_revolute(0, 1, axis=(0, 0, 0)), ValueError, "axis must be non-zero"),
    (lambda b: b.add_joint_revolute(0, 1, limit_lower=1.0, limit_upper=-1.0), ValueError, "lower <= upper"),
    (lambda b: (b.add_joint_free(1, label="x"), b.add_joint_free(1)), ValueError, "already the child of joint 0"),
    (lambda b: (b.add_joint_revolute(0, 1), b.add_joint_revolute(1, 0)), ValueError, "joints must form trees"),
    (lambda b: (b.add_shape_plane(), b.add_shape_box(body=7)), IndexError, "shape body 7 does not exist"),
    (lambda b: b._add_shape(0, 4, None, (0, 0, 0)), ValueError, "planes are infinite"),
    (lambda b: b.add_shape_sphere(0, restitution=1.5), ValueError, "restitution must be in"),
    (lambda b: b.add_shape_sphere(0, friction=0.5), TypeError, "unknown shape properties"),
    (lambda b: b.add_shape_mesh(0, vertices=box_mesh(0.1, 0.1, 0.1)[0], indices=box_mesh(0.1, 0.1, 0.1)[1],
                                scale=(-1.0, 1.0, 1.0)), ValueError, "mesh scale must be > 0 on every axis"),
])
def test_bad_bodies_joints_and_shapes(call, exc, msg):
    b = inertia.ModelBuilder()
    b.add_body(mass=1.0, inertia=(1, 1, 1))
    b.add_body(mass=1.0, inertia=(1, 1, 1))
    with pytest.raises(exc, match=msg):
        call(b)


def test_dynamic_body_without_mass_is_refused_at_finalize():
    b = inertia.ModelBuilder()
    b.add_body(label="ghost")
    with pytest.raises(ValueError, match=r"body 0 \('ghost'\) is dynamic but has no mass"):
        b.finalize(device=DEVICE)
    b = inertia.ModelBuilder()
    body = b.add_body(label="flat")
    b.add_shape_box(body, density=0.0)
    with pytest.raises(ValueError, match="is dynamic but has no mass"):
        b.finalize(device=DEVICE)
    b = inertia.ModelBuilder()
    b.add_body(mass=1.0)
    with pytest.raises(ValueError, match="has a mass but no inertia"):
        b.finalize(device=DEVICE)
    b = inertia.ModelBuilder()
    b.add_body(mass=1.0, inertia=(1.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="positive definite"):
        b.finalize(device=DEVICE)


def test_an_open_mesh_needs_explicit_mass_properties_and_says_which_shape():
    v, f = box_mesh(0.1, 0.1, 0.1)
    open_faces = f[:-2]  # one side missing
    b = inertia.ModelBuilder()
    body = b.add_body(label="link")
    b.add_shape_mesh(body, vertices=v, indices=open_faces, label="scan")
    with pytest.raises(ValueError, match=r"shape 0 \('scan'\) on body 0 \('link'\): mesh is not closed"):
        b.finalize(device=DEVICE)
    b = inertia.ModelBuilder()
    body = b.add_body(mass=2.0, inertia=(0.1, 0.1, 0.1), com=(0.0, 0.0, 0.0))
    b.add_shape_mesh(body, vertices=v, indices=open_faces)  # collision only: the body's own mass properties rule
    assert b.finalize(device=DEVICE).body_mass.numpy()[0] == pytest.approx(2.0)


def test_an_explicit_com_moves_the_shapes_inertia_to_it():
    """Inertia from the shapes, com given: the parallel-axis theorem about the given com."""
    b = inertia.ModelBuilder()
    body = b.add_body(com=(0.0, 0.0, 0.2))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, density=1000.0)  # 8 kg, its own com at the origin
    model = b.finalize(device=DEVICE)
    m = 8.0
    own = m / 3 * 0.02
    assert np.allclose(np.diag(model.body_inertia.numpy()[0]), [own + m * 0.04, own + m * 0.04, own], rtol=1e-5)
    assert np.allclose(model.body_com.numpy()[0], [0.0, 0.0, 0.2])


def test_quaternions_are_normalized_by_the_builder():
    b = inertia.ModelBuilder()
    b.add_body(xform=((0, 0, 0), (0.0, 0.0, 2.0, 2.0)), mass=1.0, inertia=(1, 1, 1))
    model = b.finalize(device=DEVICE)
    assert np.allclose(model.body_q.numpy()[0][3:], [0, 0, math.sqrt(0.5), math.sqrt(0.5)], atol=1e-7)


def test_eval_fk_refuses_bad_coordinates_and_a_recording_tape():
    model = two_link_arm()
    state = model.state()
    with pytest.raises(ValueError, match="joint_q must have 2 entries"):
        inertia.eval_fk(model, [0.1], [0.0, 0.0], state)
    with pytest.raises(ValueError, match="joint_qd contains NaN"):
        inertia.eval_fk(model, [0.1, 0.2], [0.0, float("nan")], state)
    with pytest.raises(ValueError, match="joint_q contains NaN"):
        inertia.eval_fk(model, wp.array([0.1, float("inf")], dtype=float, device=DEVICE), [0.0, 0.0], state)
    b = inertia.ModelBuilder()
    b.add_joint_ball(-1, b.add_body(mass=1.0, inertia=(1, 1, 1)), label="shoulder")
    ball = b.finalize(device=DEVICE)
    with pytest.raises(ValueError, match=r"joint 0 \('shoulder'\) holds a zero quaternion"):
        inertia.eval_fk(ball, [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0], ball.state())
    with wp.Tape():
        with pytest.raises(RuntimeError, match="eval_fk is not differentiable"):
            inertia.eval_fk(model, [0.1, 0.2], [0.0, 0.0], state)


def test_step_refuses_body_arrays_of_another_model():
    model, other = two_link_arm(), two_link_arm()
    b = inertia.ModelBuilder()
    b.add_body(mass=1.0, inertia=(1, 1, 1))
    small = b.finalize(device=DEVICE)
    s0, s1 = model.state(), model.state()
    s1.body_q = small.state().body_q
    with pytest.raises(ValueError, match="state_out.body_q has 1 entries, the model has 2 bodies"):
        inertia.SemiImplicitSolver(model).step(s0, s1, other.control(), None, 0.01)
