"""Particles in the FeatherstoneSolver: they step as in the SemiImplicitSolver and push the bodies they touch.

References: the torque balance of a PD-driven link carrying a particle at rest (kp theta = g sum m x about the
hinge), conservation of linear momentum between particles and a free body in zero gravity, and, for a scene
of particles alone, the SemiImplicitSolver's step (the same stages and integrator: bitwise the same). The
gradients of a robot carrying particles are checked in tests/test_featherstone_grad.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import inertia
from conftest import DEVICE, quat_matrix
from gradcheck import Input, TorchProblem, check_gradient

G = 9.81
HINGE = np.array([0.0, 0.0, 0.5])
PADDLE_HALF = (0.3, 0.1, 0.01)  # [m]: the paddle reaches from the hinge (x = 0) to x = 0.6


def paddle(kp=400.0, kd=20.0, particles=((0.45, 0.0, 0.5),), particle_mass=0.5, radius=0.02, gravity=-G,
           spring_ke=None, mu=0.5, requires_grad=False):
    """A 2.4 kg paddle on a y-axis revolute drive (target 0) at HINGE, particles resting on its top face
    (their (x, y); z is where they rest), the first two joined by a spring of ``spring_ke`` [N/m] if given."""
    b = inertia.ModelBuilder(gravity=gravity)
    hx, hy, hz = PADDLE_HALF
    link = b.add_body(xform=((hx, 0.0, HINGE[2]), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(link, hx=hx, hy=hy, hz=hz, density=1000.0, mu=mu)
    b.add_joint_revolute(-1, link, parent_xform=(tuple(HINGE), (0.0, 0.0, 0.0, 1.0)),
                         child_xform=((-hx, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0),
                         target_ke=kp, target_kd=kd)
    for x, y, _ in particles:  # resting on the top face at its contact depth g tau^2 (0.25 mm)
        b.add_particle((x, y, HINGE[2] + hz + radius - G * 0.005 ** 2), mass=particle_mass, radius=radius)
    if spring_ke is not None:
        b.add_spring(0, 1, ke=spring_ke, kd=1.0)
    return b.finalize(device=DEVICE, requires_grad=requires_grad)


def simulate(model, seconds, dt, frame_steps=20):
    sim = inertia.Simulator(model, inertia.FeatherstoneSolver(model), frame_dt=frame_steps * dt,
                            substeps=frame_steps)
    sim.step(frames=int(round(seconds / (frame_steps * dt))))
    return sim


def test_a_particle_on_a_driven_link_tilts_it_by_its_torque():
    """At rest the drive balances gravity about the hinge: kp theta = g (m_link x_link + m_p x_p), x measured
    from the hinge along world x (theta > 0 pitches the free end down). The particle's own weight tilts the
    paddle by m_p g x_p / kp = 5.5 mrad. After 2 s the drive (damping ratio ~0.8, period ~0.2 s) has settled
    to float32 rounding; the particle creeps down the 0.03 rad slope at the smoothed friction's ~mm/s, which
    moves x_p but keeps the balance (quasi-static). 1e-3 of the torque is ~80x the measured imbalance (1.3e-5: rounding and the creep's
    inertia explain, and 1/30 of the particle's share: a coupling that lost its reaction fails by 30x."""
    kp = 400.0
    model = paddle(kp=kp)
    sim = simulate(model, 2.0, 1e-3)
    theta = float(sim.state.joint_q.numpy()[0])
    x_link = float(sim.state.body_q.numpy()[0, 0]) - HINGE[0]
    x_p = float(sim.state.particle_q.numpy()[0, 0]) - HINGE[0]
    m_link, m_p = float(model.body_mass.numpy()[0]), 0.5
    torque = G * (m_link * x_link + m_p * x_p)
    alone = simulate(paddle(kp=kp, particles=()), 2.0, 1e-3)
    theta_alone = float(alone.state.joint_q.numpy()[0])
    print(f"\n[featherstone particles] paddle theta {theta:.6f} rad (alone {theta_alone:.6f}), kp theta "
          f"{kp * theta:.5f} N m, g sum m x {torque:.5f} N m, particle at x {x_p:.4f} m")
    assert np.abs(sim.state.particle_qd.numpy()).max() < 0.01  # resting (creep only)
    assert abs(kp * theta - torque) < 1e-3 * torque
    assert abs((theta - theta_alone) - m_p * G * x_p / kp) < 0.03 * m_p * G * x_p / kp  # its share, cos ~ 1


def test_momentum_passes_between_particles_and_a_free_body():
    """Zero gravity: four 50 g particles hit a free 8 kg box off its centre at 2 m/s and bounce (it drifts and
    spins). Each contact force acts on the particle and, reversed, on the body in the same step, with its torque
    about the body's centre of mass taken at the particle, so the total linear momentum (particles + the body's
    centre of mass) stays 0.4 kg m/s in x and the total angular momentum about the world origin (particles'
    m x cross v, the body's I w + M c cross v) stays at its start. Bounds: linear, 1e-5 of 0.4 kg m/s (measured
    1.3e-7 of it: float32 sums); angular, what rounding every position once a step does when it adds up
    coherently, steps x 2^-24 x |x| (0.5 m) x the momentum (0.4): 7e-6 kg m^2/s (measured 1.5e-6). A torque
    taken about the world origin instead of the centre of mass (0.36 m away) would be off by c x the impulse
    the box took (0.45 kg m/s), ~0.1 kg m^2/s."""
    b = inertia.ModelBuilder(gravity=0.0)
    box = b.add_body(xform=((0.3, -0.2, 0.1), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=1000.0)
    for y, z in ((0.05, 0.02), (-0.06, 0.04), (0.02, -0.07), (-0.03, -0.01)):
        b.add_particle((0.05, -0.2 + y, 0.1 + z), vel=(2.0, 0.0, 0.0), mass=0.05, radius=0.02)
    model = b.finalize(device=DEVICE)

    def momenta(state):
        x, v = state.particle_q.numpy().astype(np.float64), state.particle_qd.numpy().astype(np.float64)
        q, qd = state.body_q.numpy()[0].astype(np.float64), state.body_qd.numpy()[0].astype(np.float64)
        mass, rot = float(model.body_mass.numpy()[0]), quat_matrix(q[3:])
        c = q[:3] + rot @ model.body_com.numpy()[0].astype(np.float64)
        inertia_world = rot @ model.body_inertia.numpy()[0].astype(np.float64) @ rot.T
        linear = 0.05 * v.sum(axis=0) + mass * qd[:3]
        angular = 0.05 * np.cross(x, v).sum(axis=0) + inertia_world @ qd[3:] + mass * np.cross(c, qd[:3])
        return linear, angular

    p0, l0 = momenta(model.state())
    sim = simulate(model, 0.6, 1e-3)
    p, angular = momenta(sim.state)
    s = sim.state
    print(f"\n[featherstone particles] momentum {p} kg m/s (before {p0}), angular {angular} (before {l0}) "
          f"kg m^2/s; box v {s.body_qd.numpy()[0, :3]}, w {s.body_qd.numpy()[0, 3:]}")
    assert s.body_qd.numpy()[0, 0] > 0.02 and np.abs(s.body_qd.numpy()[0, 3:]).max() > 0.01  # it was hit
    assert np.abs(p - p0).max() < 1e-5 * 0.4
    assert np.abs(angular - l0).max() < 600 * 2.0 ** -24 * 0.5 * 0.4


def test_particles_alone_step_as_in_the_semi_implicit_solver():
    """A cloth falling over a static sphere onto the ground: the same stages and integrator, bitwise."""
    def build():
        b = inertia.ModelBuilder()
        b.add_ground_plane()
        b.add_shape_sphere(-1, xform=((0.1, 0.1, 0.15), (0.0, 0.0, 0.0, 1.0)), radius=0.1)
        b.add_cloth_grid(6, 6, pos=(0.0, 0.0, 0.3), cell_x=0.04, cell_y=0.04, mass=0.01)
        return b.finalize(device=DEVICE)

    finals = []
    for make in (inertia.FeatherstoneSolver, inertia.SemiImplicitSolver):
        model = build()
        sim = inertia.Simulator(model, make(model), frame_dt=1 / 60, substeps=40)
        sim.step(frames=20)
        finals.append(sim.state.particle_q.numpy())
    assert np.isfinite(finals[0]).all() and finals[0][:, 2].min() > 0.0
    np.testing.assert_array_equal(finals[0], finals[1])


def test_a_step_beyond_the_particles_stable_step_is_warned():
    """The particles' forces are explicit here too: the SemiImplicitSolver's estimate bounds their step."""
    b = inertia.ModelBuilder()
    b.add_cloth_grid(4, 4, pos=(0.0, 0.0, 1.0), cell_x=0.03, cell_y=0.03, mass=0.001)
    model = b.finalize(device=DEVICE)
    solver = inertia.FeatherstoneSolver(model)
    limit = solver.stable_steps["elastic forces"][0]
    s0, s1 = model.state(), model.state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solver.step(s0, s1, None, None, 0.5 * limit)
    with pytest.warns(inertia.StabilityWarning, match="elastic forces"):
        solver.step(s0, s1, None, None, 2.0 * limit)


def test_rollout_of_a_robot_carrying_particles():
    """A Rollout through the FeatherstoneSolver (checkpointed, captured) returns particle and joint
    trajectories bitwise the plain loop's, and its torch gradients w.r.t. the drive targets and the contact
    time constant (a parameter here: particle contact reads it; body_inv_mass is not) agree with central
    differences (tests/gradcheck.py)."""
    model = paddle(particles=((0.3, 0.02, 0.0), (0.5, -0.03, 0.0)), particle_mass=0.2)
    solver = inertia.FeatherstoneSolver(model)
    ro = inertia.Rollout(model, solver, 10, 0.01, 10, params=("shape_material_tau",))
    target = torch.full((10, 1), 0.2)
    tau = torch.tensor(model.shape_material_tau.numpy())
    out = ro(joint_target_pos=target, params={"shape_material_tau": tau})
    # the plain loop
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    control.joint_target_pos.fill_(0.2)
    for _ in range(100):
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, 1e-3)
        s0, s1 = s1, s0
    np.testing.assert_array_equal(out.particle_q[-1].numpy(), s0.particle_q.numpy())
    np.testing.assert_array_equal(out.joint_q[-1].numpy(), s0.joint_q.numpy())
    w = torch.tensor(np.random.default_rng(4).uniform(-1, 1, (2, 3)), dtype=torch.float32)

    def run(x):
        o = ro(joint_target_pos=x["target"], params={"shape_material_tau": x["tau"]})
        return (w * o.particle_q[-1]).sum() + o.joint_q[-1].sum()

    check_gradient("rollout paddle particles", TorchProblem(run, {"target": target, "tau": tau}), [
        Input("target", h=1e-2), Input("tau", h=3e-2, relative=True)], seed=31)
    with pytest.raises(ValueError, match="does not read 'body_inv_mass'"):
        inertia.Rollout(model, solver, 2, 0.01, params=("body_inv_mass",))
