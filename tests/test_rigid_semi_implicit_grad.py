"""Gradients of the SemiImplicitSolver's rigid stages (wp.Tape vs central differences), and bad input.

Each scenario keeps the same contact set across the finite-difference
perturbations, where the rollout is smooth in the parameter:

- a cube sliding on the ground (4 corner contacts, all sliding: Coulomb
  friction at mu f_n): gradients w.r.t. its initial velocity
  ``state.body_qd``, its inverse mass ``model.body_inv_mass`` (what every
  kernel reads; the inertia is held fixed) and both shapes'
  ``shape_material_mu``;
- a rod driven about a horizontal hinge against gravity: gradients w.r.t.
  ``Control.joint_target_pos``, the initial ``body_qd`` and the inverse mass
  (joint springs, drive and gravity);
- a particle pressed onto a free box and sliding on it (two-way contact,
  gravity off): gradients w.r.t. the particle's and the box's initial velocities.

Where a perturbation adds or removes a contact (a drop whose impact moves
from one step to the next, a joint limit being reached, a contact passing
between stick and slip: the kink of the Coulomb projection) the
rollout is not smooth and a finite difference says nothing about the tape
gradient; such scenarios are not compared here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE
from gradcheck import Input, StepRollout, body_loss_kernel, check_gradient

import inertia

G = 9.81


@wp.kernel
def particle_loss_kernel(q: wp.array(dtype=wp.vec3), qd: wp.array(dtype=wp.vec3), w: wp.array2d(dtype=float),
                         out: wp.array(dtype=float)):
    i = wp.tid()
    s = float(0.0)
    for k in range(3):
        s += w[i, k] * q[i][k] + w[i, 3 + k] * qd[i][k]
    wp.atomic_add(out, 0, s)


class BodyRollout(StepRollout):
    """``steps`` collide + step calls of the SemiImplicitSolver; loss = random weights . final (body_q, body_qd,
    particles)."""

    def __init__(self, model, steps, dt, seed=0):
        super().__init__(model, steps, dt, inertia.SemiImplicitSolver(model))
        rng = np.random.default_rng(seed)
        nb, n = model.body_count, max(model.particle_count, 1)
        self.wq_np, self.wqd_np = rng.uniform(-1, 1, (nb, 7)), rng.uniform(-1, 1, (nb, 6))
        self.wp_np = rng.uniform(-1, 1, (n, 6))
        self.wq, self.wqd = (wp.array(a.ravel().astype(np.float32), dtype=float, device=DEVICE)
                             for a in (self.wq_np, self.wqd_np))  # body_loss_kernel takes flat rows of 7 and 6
        self.wp = wp.array(self.wp_np.astype(np.float32), dtype=float, device=DEVICE)

    def host_loss(self, last) -> float:
        q, qd = last.body_q.numpy().astype(np.float64), last.body_qd.numpy().astype(np.float64)
        out = float(np.sum(q * self.wq_np) + np.sum(qd * self.wqd_np))
        if self.model.particle_count:
            x = np.concatenate([last.particle_q.numpy(), last.particle_qd.numpy()], axis=1).astype(np.float64)
            out += float(np.sum(x * self.wp_np))
        return out

    def record_loss(self, last, out) -> None:
        wp.launch(body_loss_kernel, dim=self.model.body_count, inputs=[last.body_q, last.body_qd, self.wq, self.wqd],
                  outputs=[out], device=DEVICE)
        if self.model.particle_count:
            wp.launch(particle_loss_kernel, dim=self.model.particle_count,
                      inputs=[last.particle_q, last.particle_qd, self.wp], outputs=[out], device=DEVICE)

def smoothed_rest_depth(load, ke, h):
    """Depth [m] at which a smoothed contact (h > 0) carries ``load`` [N]: h ln(exp(load / (ke h)) - 1)."""
    return h * math.log(math.expm1(load / (ke * h)))


def sliding_cube(steps=40, smoothing=1e-3):
    """A 1 kg cube sliding and spinning on the ground, from rest height. ``contact_smoothing`` keeps the rollout
    smooth where friction's pitching torque unloads the trailing corners (plain contact: they lift off for a
    step or two, and the finite differences in the normal direction swing by 40 % with their step)."""
    b = inertia.ModelBuilder(gravity=-G)
    b.contact_smoothing = smoothing
    b.add_ground_plane(mu=0.4)
    h = 0.05
    depth = smoothed_rest_depth(G / 4, 0.25 / b.default_shape_tau ** 2, smoothing)  # a corner: m_eff = m / 4
    body = b.add_body(xform=((0, 0, h - depth), (0, 0, 0, 1)),
                      linear_velocity=(1.0, 0.3, 0.0), angular_velocity=(0.0, 0.0, 0.8))
    b.add_shape_box(body, hx=h, hy=h, hz=h, density=1.0 / (8 * h ** 3), mu=0.6)
    return BodyRollout(b.finalize(device=DEVICE, requires_grad=True), steps, 1e-3)


def check_sliding_box_gradients(name, r, mass_field, seed):
    """A box that slid on its 4 bottom corners all through the rollout ``r`` (still sliding at the end:
    friction at mu f_n throughout): check_gradient w.r.t. its initial velocity, the model's mass array
    ``mass_field`` (relative steps) and both shapes' ``shape_material_mu`` (relative steps)."""
    assert r.contacts.counts()["rigid_contacts"] == 4
    assert np.linalg.norm(r.states[-1].body_qd.numpy()[0, :2]) > 0.5  # still sliding at the end
    model = r.model
    wrt = {"body_qd0": r.states[0].body_qd, mass_field: getattr(model, mass_field),
           "shape_material_mu": model.shape_material_mu}
    check_gradient(name, r.problem(**wrt), [
        Input("body_qd0", h=1e-2), Input(mass_field, h=1e-2, relative=True),
        Input("shape_material_mu", h=1e-2, relative=True)], seed=seed)


def test_gradients_of_a_cube_sliding_on_the_ground():
    r = sliding_cube()
    r.backward()
    g_mu = r.model.shape_material_mu.grad.numpy().astype(np.float64)
    # the two mu enter as their mean: equal gradients
    assert abs(g_mu[0] - g_mu[1]) < 1e-3 * abs(g_mu[0])
    check_sliding_box_gradients("sliding cube", r, "body_inv_mass", seed=11)


def test_gradients_of_a_driven_arm_against_gravity():
    b = inertia.ModelBuilder(gravity=-G)
    length, m = 0.4, 1.0
    body = b.add_body(mass=m, inertia=(m * length ** 2 / 12, m * length ** 2 / 12, 1e-3),
                      xform=((0.5 * length, 0, 1.0), tuple(wp.quat_from_axis_angle(wp.vec3(0, 1, 0), math.pi / 2))),
                      linear_velocity=(0.0, 0.0, 0.2), angular_velocity=(0.0, -0.1, 0.0))
    b.add_joint_revolute(-1, body, parent_xform=((0, 0, 1.0), (0, 0, 0, 1)),
                         child_xform=((0, 0, -0.5 * length), tuple(wp.quat_from_axis_angle(wp.vec3(0, 1, 0),
                                                                                            -math.pi / 2))),
                         axis=(0, 1, 0), target_ke=20.0, target_kd=1.0)
    r = BodyRollout(b.finalize(device=DEVICE, requires_grad=True), 60, 1e-3, seed=1)
    r.control.joint_target_pos.assign([0.3])
    check_gradient("driven arm", r.problem(joint_target_pos=r.control.joint_target_pos, body_qd0=r.states[0].body_qd,
                                           body_inv_mass=r.model.body_inv_mass), [
        # the arm is nearly linear in its initial velocity and the loss's rounding (sigma ~3e-6) is that of the
        # stiff joint springs: a 0.1 m/s step resolves it to 0.2 % (at 1e-2 only to 2-4 %); the mass moves the
        # loss least (S ~ 0.05): 3 % of it (1 %: rounding 3e-3 of S, 10 %: truncation 3.5e-3)
        Input("joint_target_pos", h=1e-2), Input("body_qd0", h=0.1),
        Input("body_inv_mass", h=3e-2, relative=True)], seed=12)


def test_gradients_of_a_particle_sliding_on_a_free_box():
    b = inertia.ModelBuilder(gravity=0.0)
    b.particle_collide = False
    b.contact_smoothing = 1e-3  # as for the cube: smooth in the normal direction
    radius = 0.02
    # pressed by 4 N; its contact's effective mass is 1 / (1 / 0.2 kg + the box's 1 / 1 kg at the centre)
    depth = smoothed_rest_depth(4.0, (1.0 / 6.0) / b.default_shape_tau ** 2, b.contact_smoothing)
    b.add_particle(pos=(0.0, 0.0, 0.05 + radius - depth), vel=(0.8, 0.2, -0.05), mass=0.2, radius=radius)
    body = b.add_body(angular_velocity=(0.0, 0.0, 0.3))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.05, density=1000.0 / 16, mu=0.5)  # 1 kg
    r = BodyRollout(b.finalize(device=DEVICE, requires_grad=True), 40, 1e-3, seed=2)
    r.control.particle_f.assign([(0.0, 0.0, -4.0)])  # keeps the particle pressed on the box
    r.backward()
    assert r.contacts.counts()["soft_contacts"] == 1
    s0 = r.states[0]
    check_gradient("particle on box", r.problem(particle_qd0=s0.particle_qd, body_qd0=s0.body_qd), [
        Input("particle_qd0", h=1e-2), Input("body_qd0", h=1e-2)], seed=13)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name, value", [("joint_attach_ke", -1.0), ("joint_attach_kd", float("nan")),
                                         ("joint_attach_ke", float("inf"))])
def test_bad_joint_attachment_gains_are_refused(name, value):
    b = inertia.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.add_joint_ball(-1, body)
    setattr(b, name, value)
    with pytest.raises(ValueError, match=f"builder.{name} must be"):  # at finalize, where it was set
        b.finalize(device=DEVICE)
    setattr(b, name, 1.0)
    model = b.finalize(device=DEVICE)
    setattr(model, name, value)  # or edited into the model afterwards: the solver checks again
    with pytest.raises(ValueError, match=f"model.{name} must be a finite number >= 0"):
        inertia.SemiImplicitSolver(model)


def test_joint_controls_of_the_wrong_size_are_refused():
    b = inertia.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.add_joint_revolute(-1, body)
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model)
    control = model.control()
    control.joint_target_pos = wp.zeros(3, dtype=float, device=DEVICE)
    with pytest.raises(ValueError, match="control.joint_target_pos has 3 entries, the model has 1 joint degrees"):
        solver.step(model.state(), model.state(), control, None, 1e-3)


def test_a_step_without_control_drives_nothing():
    """control=None: no drive targets, no effort (the solver's zero inputs), and the same step as a zero Control."""
    b = inertia.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1), xform=((0.3, 0, 0), (0, 0, 0, 1)),
                      angular_velocity=(0, 0, 1.0))
    b.add_joint_revolute(-1, body, child_xform=((-0.3, 0, 0), (0, 0, 0, 1)), target_ke=5.0, target_kd=1.0)
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model)
    a, c, d = model.state(), model.state(), model.state()
    solver.step(a, c, None, None, 1e-3)
    solver.step(a, d, model.control(), None, 1e-3)
    assert np.array_equal(c.body_qd.numpy(), d.body_qd.numpy())


# --------------------------------------------------------------------------- graph capture
def test_captured_rigid_steps_replay_the_plain_loop_bitwise():
    """collide + step with joints, shape-shape and particle-body contact allocate nothing after a state's first
    step and read nothing back: a captured pair of steps replays the plain loop bitwise."""
    def build():
        b = inertia.ModelBuilder(gravity=-G)
        b.add_ground_plane()
        box = b.add_body(xform=((0, 0, 0.06), (0, 0, 0, 1)), linear_velocity=(0.3, 0, 0))
        b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05)
        link = b.add_body(mass=1.0, inertia=(0.01, 0.01, 0.01), xform=((0.5, 0, 1.0), (0, 0, 0, 1)))
        b.add_joint_revolute(-1, link, parent_xform=((0.3, 0, 1.0), (0, 0, 0, 1)),
                             child_xform=((-0.2, 0, 0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=5.0)
        b.add_particle(pos=(0.0, 0.0, 0.13), mass=0.1, radius=0.02)
        return b.finalize(device=DEVICE)

    def pair(model, s, control, contacts, solver):
        for a, c in ((0, 1), (1, 0)):
            model.collide(s[a], contacts, check_overflow=False)
            solver.step(s[a], s[c], control, contacts, 1e-3)

    runs = []
    for captured in (False, True):
        model = build()
        s, control, contacts = [model.state(), model.state()], model.control(), model.contacts()
        control.joint_target_pos.assign([0.4])
        solver = inertia.SemiImplicitSolver(model)
        pair(model, s, control, contacts, solver)  # first steps: per-state buffers, module loads
        if captured:
            with wp.ScopedCapture(device=DEVICE) as cap:
                pair(model, s, control, contacts, solver)
            for _ in range(20):
                wp.capture_launch(cap.graph)
        else:
            for _ in range(20):
                pair(model, s, control, contacts, solver)
        runs.append((s[0].body_q.numpy(), s[0].body_qd.numpy(), s[0].particle_q.numpy()))
    for plain, replay in zip(*runs):
        np.testing.assert_array_equal(plain, replay)
    assert runs[0][0][0][0] > 0.005  # the box slid: the replay simulated
