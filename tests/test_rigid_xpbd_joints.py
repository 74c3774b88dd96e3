"""XPBDSolver joints (Müller et al. 2020): attachment, alignment, limits, drives, efforts; tape gradients.

Known answers: the small-angle period of a compound pendulum 2 pi sqrt(I_pivot / (m g d));
a hanging chain stays connected; a PD drive settles at its target; limits
hold against gravity and drives; a constant joint torque spins a hinge up at
tau / I. Gradients of a rollout with rigid contact and joints are checked
against central differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE
from gradcheck import check
from test_rigid_xpbd import Sim, rotate

G = 9.81


def hinge_bar(length=0.5, half=0.02, gravity=-G, **joint):
    """A bar of ``length`` along its x axis hinged at its -x end to the world origin about y.

    At the origin on purpose: float32 poses far from it quantize XPBD's velocities (x' - x) / dt
    (2.4e-7 m at 2 m is 1.4e-4 m/s at dt = 1/600), which biases slow motions.
    """
    b = inertia.ModelBuilder(gravity=gravity)
    body = b.add_body(xform=((0.5 * length, 0.0, 0.0), (0, 0, 0, 1)))
    b.add_shape_box(body, hx=0.5 * length, hy=half, hz=half)
    b.add_joint_revolute(-1, body, parent_xform=((0.0, 0.0, 0.0), (0, 0, 0, 1)),
                         child_xform=((-0.5 * length, 0.0, 0.0), (0, 0, 0, 1)), axis=(0, 1, 0), **joint)
    return b.finalize(device=DEVICE)


def start_at(sim, q, qd=None):
    """Place the sim's bodies from joint coordinates (both ping-pong states)."""
    s = sim.model.state()
    inertia.eval_fk(sim.model, np.asarray(q, np.float32), np.zeros(sim.model.joint_dof_count, np.float32)
                    if qd is None else np.asarray(qd, np.float32), s)
    sim.s0.assign(s)
    sim.s1.assign(s)


# ------------------------------------------------------------------ pendulum and chain
def test_compound_pendulum_period_matches_the_closed_form():
    length = 0.5
    model = hinge_bar(length)
    m, i_com = float(model.body_mass.numpy()[0]), float(model.body_inertia.numpy()[0][1, 1])
    d = 0.5 * length
    period = 2 * math.pi * math.sqrt((i_com + m * d * d) / (m * G * d))
    substeps = 10
    sim = Sim(model, 1.0 / (60 * substeps), collide=False, iterations=4)
    down = math.pi / 2  # the hinge angle at which the bar hangs straight down
    start_at(sim, [down + 0.05])
    t, a = [], []
    for f in range(int(4 * period * 60)):
        sim.pairs(substeps // 2)
        t.append((f + 1) / 60)
        a.append(float(sim.s0.joint_q.numpy()[0]) - down)
    t, a = np.array(t), np.array(a)
    k = np.where((a[:-1] > 0) & (a[1:] <= 0))[0]
    crossings = t[k] + (t[k + 1] - t[k]) * a[k] / (a[k] - a[k + 1])
    measured = float(np.diff(crossings).mean())
    print(f"[rigid xpbd] compound pendulum: period {measured:.5f} s, 2 pi sqrt(I_pivot / (m g d)) = {period:.5f} s, "
          f"rel err {measured / period - 1:.1e}, amplitude after 4 periods {a[-int(period * 60):].max():.4f} rad")
    assert measured == pytest.approx(period, rel=1e-2)
    # position projection damps at first order in dt: a particle pendulum of the same period in the
    # particle XPBD loses the same 9 % of amplitude in 4 periods at this step
    assert a[-int(period * 60):].max() > 0.043


def test_chain_of_32_links_stays_connected():
    n, link = 32, 0.1
    b = inertia.ModelBuilder(gravity=-G)
    prev = -1
    for i in range(n):  # horizontal at the start: it swings down
        body = b.add_body(xform=((link * (i + 0.5), 0.0, 4.0), (0, 0, 0, 1)))
        b.add_shape_capsule(body, radius=0.01, half_height=0.5 * link, xform=((0, 0, 0), (0, math.sin(math.pi / 4), 0,
                                                                                            math.cos(math.pi / 4))))
        parent_xform = ((0.0, 0.0, 4.0), (0, 0, 0, 1)) if prev < 0 else ((0.5 * link, 0, 0), (0, 0, 0, 1))
        b.add_joint_revolute(prev, body, parent_xform=parent_xform, child_xform=((-0.5 * link, 0, 0), (0, 0, 0, 1)),
                             axis=(0, 1, 0))
        prev = body
    model = b.finalize(device=DEVICE)
    sim = Sim(model, 1.0 / 600, collide=False, iterations=8)
    worst, lowest = 0.0, 4.0
    for _ in range(20):  # 2,000 steps
        sim.pairs(50)
        q = sim.q()
        lowest = min(lowest, q[:, 2].min())
        ends = q[:, :3] + np.array([rotate(p[3:], [0.5 * link, 0, 0]) for p in q])
        starts = q[:, :3] - np.array([rotate(p[3:], [0.5 * link, 0, 0]) for p in q])
        gaps = np.linalg.norm(starts[1:] - ends[:-1], axis=1)
        worst = max(worst, gaps.max(), np.linalg.norm(starts[0] - [0, 0, 4.0]))
    print(f"[rigid xpbd] 32-link chain, 2000 steps (dt 1/600, 8 iterations): max anchor separation "
          f"{worst * 1e3:.3f} mm, "
          f"lowest link at z = {lowest:.3f} m")
    assert worst < 5e-3
    assert lowest < 4.0 - 1.5  # it swung down


# ------------------------------------------------------------------ drives, limits, efforts
def test_pd_drive_settles_at_its_target_and_a_velocity_drive_at_its_rate():
    model = hinge_bar(gravity=0.0, target_ke=20.0, target_kd=2.0)
    sim = Sim(model, 1.0 / 600, collide=False, iterations=4)
    sim.control.joint_target_pos.assign(np.array([0.8], np.float32))
    sim.pairs(600)  # 2 s; I_pivot = 0.04 kg m^2: omega_n = 22 rad/s, damping ratio 1.1
    angle, rate = float(sim.s0.joint_q.numpy()[0]), float(sim.s0.joint_qd.numpy()[0])
    print(f"[rigid xpbd] PD drive: angle {angle:.5f} rad (target 0.8), rate {rate:.1e} rad/s")
    assert angle == pytest.approx(0.8, abs=1e-3) and abs(rate) < 1e-3

    model = hinge_bar(gravity=0.0, target_ke=0.0, target_kd=2.0)
    sim = Sim(model, 1.0 / 600, collide=False, iterations=4)
    sim.control.joint_target_vel.assign(np.array([1.5], np.float32))
    sim.pairs(300)  # 1 s, time constant I / kd = 0.02 s
    rate = float(sim.s0.joint_qd.numpy()[0])
    print(f"[rigid xpbd] velocity drive: rate {rate:.5f} rad/s (target 1.5)")
    assert rate == pytest.approx(1.5, rel=1e-3)


def test_revolute_and_prismatic_limits_hold():
    # a bar released horizontally swings down until its limit at 0.6 rad stops it
    model = hinge_bar(limit_lower=-0.6, limit_upper=0.6)
    sim = Sim(model, 1.0 / 600, collide=False, iterations=4)
    worst = 0.0
    for _ in range(60):
        sim.pairs(5)
        worst = max(worst, float(sim.s0.joint_q.numpy()[0]))
    print(f"[rigid xpbd] revolute limit 0.6 rad: largest angle {worst:.5f} rad")
    assert 0.6 - 1e-3 < worst < 0.6 + 5e-3

    # a slider hanging from the world along z falls until its lower limit at -0.2 m
    b = inertia.ModelBuilder(gravity=-G)
    body = b.add_body(xform=((0, 0, 1.0), (0, 0, 0, 1)))
    b.add_shape_box(body, hx=0.05, hy=0.05, hz=0.05)
    b.add_joint_prismatic(-1, body, parent_xform=((0, 0, 1.0), (0, 0, 0, 1)), axis=(0, 0, 1), limit_lower=-0.2,
                          limit_upper=0.1)
    sim = Sim(b.finalize(device=DEVICE), 1.0 / 600, collide=False, iterations=4).pairs(300)
    offset = float(sim.s0.joint_q.numpy()[0])
    side = np.abs(sim.q()[0, :2]).max()
    print(f"[rigid xpbd] prismatic lower limit -0.2 m: offset {offset:.5f} m, off-axis {side:.1e} m")
    assert offset == pytest.approx(-0.2, abs=1e-4) and side < 1e-6


def test_joint_torque_spins_a_hinge_up_at_tau_over_i():
    model = hinge_bar(gravity=0.0)
    m, i_com = float(model.body_mass.numpy()[0]), float(model.body_inertia.numpy()[0][1, 1])
    i_pivot = i_com + m * 0.25 ** 2
    sim = Sim(model, 1.0 / 600, collide=False, iterations=4)
    tau = 0.05
    sim.control.joint_f.assign(np.array([tau], np.float32))
    sim.pairs(150)  # 0.5 s
    rate = float(sim.s0.joint_qd.numpy()[0])
    print(f"[rigid xpbd] joint torque {tau} N m: rate {rate:.5f} rad/s after 0.5 s, tau t / I_pivot = "
          f"{tau * 0.5 / i_pivot:.5f}")
    assert rate == pytest.approx(tau * 0.5 / i_pivot, rel=5e-3)


# ------------------------------------------------------------------ gradients
@wp.kernel
def body_loss_kernel(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector),
                     wq: wp.array(dtype=float), wqd: wp.array(dtype=float), out: wp.array(dtype=float)):
    b = wp.tid()
    acc = float(0.0)
    for k in range(7):
        acc += q[b][k] * wq[7 * b + k]
    for k in range(6):
        acc += qd[b][k] * wqd[6 * b + k]
    wp.atomic_add(out, 0, acc)


def test_gradients_through_contact_and_joints_match_central_differences():
    """40 steps of a box sliding on the ground (four corner contacts, Coulomb friction throughout) next to a
    pendulum held by a PD drive: d loss / d (initial velocities, pendulum inverse mass, drive target, mu).

    Smooth on purpose: the box slides for the whole horizon (the contact set and the sliding regime do
    not change within the perturbations); where they change (a contact starting, sticking <-> sliding)
    the rollout has a kink and central differences straddling it disagree with the tape by design.
    Near the origin on purpose too: XPBD's velocities (x' - x) / dt are quantized by float32 poses
    (at |x| ~ 1 m a velocity change below 3e-5 m/s per step at dt = 1/480 rounds away), which makes
    central differences a staircase there.
    """
    b = inertia.ModelBuilder(gravity=-G)
    ground = b.add_ground_plane(mu=0.3)
    box = b.add_body(xform=((-0.04, 0.0, 0.1), (0, 0, 0, 1)), linear_velocity=(1.0, 0.2, 0.0))
    box_shape = b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=100.0, mu=0.3)
    bar = b.add_body(xform=((0.25, 0.0, 1.0), (0, 0, 0, 1)))
    b.add_shape_box(bar, hx=0.25, hy=0.02, hz=0.02)
    b.add_joint_revolute(-1, bar, parent_xform=((0.0, 0.0, 1.0), (0, 0, 0, 1)),
                         child_xform=((-0.25, 0.0, 0.0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=2.0,
                         target_kd=0.05)
    model = b.finalize(device=DEVICE, requires_grad=True)
    steps, dt = 40, 1.0 / 480
    states = [model.state() for _ in range(steps + 1)]
    inertia.eval_fk(model, np.array([1.2], np.float32), np.array([0.5], np.float32), states[0])
    control = model.control()
    control.joint_target_pos.assign(np.array([1.0], np.float32))
    contacts = model.contacts()
    solver = inertia.XPBDSolver(model, iterations=4)
    rng = np.random.default_rng(7)
    wq = wp.array(rng.uniform(-1, 1, 14).astype(np.float32), dtype=float, device=DEVICE)
    wqd = rng.uniform(-1, 1, 12).astype(np.float32)
    wqd[6 * box] = 2.0  # weigh the box's final velocity along its slide: the friction coefficient shows there
    wqd = wp.array(wqd, dtype=float, device=DEVICE)

    def loss():
        out = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
        for t in range(steps):
            model.collide(states[t], contacts)
            solver.step(states[t], states[t + 1], control, contacts, dt)
        wp.launch(body_loss_kernel, dim=2, inputs=[states[-1].body_q, states[-1].body_qd, wq, wqd], outputs=[out],
                  device=DEVICE)
        return out

    tape = wp.Tape()
    with tape:
        out = loss()
    tape.backward(loss=out)
    sliding = float(states[-1].body_qd.numpy()[box][0])
    lam = states[-1]._xpbd_buffers.bodies.contact_lambda.numpy()[-1]
    assert sliding > 0.5 and contacts.counts()["rigid_contacts"] == 4 and (lam[:4, 0] > 0).all()
    params = {  # name: (array, flat entry, eps)
        "body_qd[box].vx": (states[0].body_qd, 6 * box + 0, 1e-2),
        "body_qd[bar].wy": (states[0].body_qd, 6 * bar + 4, 3e-2),
        "body_inv_mass[bar]": (model.body_inv_mass, bar, 3e-2),
        "joint_target_pos": (control.joint_target_pos, 0, 1e-2),
        "shape_material_mu[box]": (model.shape_material_mu, box_shape, 1e-2),
        "shape_material_mu[ground]": (model.shape_material_mu, ground, 3e-3),
    }
    tape_grads = {name: float(a.grad.numpy().reshape(-1)[e]) for name, (a, e, _) in params.items()}
    tape.zero()

    def value():
        return float(loss().numpy()[0])

    failures = []
    for name, (a, e, eps) in params.items():
        base = a.numpy().copy()
        vals = []
        for sgn in (1.0, -1.0):
            p = base.copy()
            p.reshape(-1)[e] += sgn * eps
            a.assign(p)
            vals.append(value())
        a.assign(base)
        fd = (vals[0] - vals[1]) / (2 * eps)
        failures.append(None)
        try:
            check(f"rigid xpbd d loss / d {name} (tape {tape_grads[name]:+.5f}, fd {fd:+.5f}, eps {eps:g})",
                  [tape_grads[name]], [fd], tol=2e-2)
            failures.pop()
        except AssertionError as err:
            failures[-1] = str(err).splitlines()[0]
    assert not failures, failures


@wp.kernel
def _rebound_loss(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector), out: wp.array(dtype=float)):
    out[0] = wp.transform_get_translation(q[0])[2] + 0.1 * qd[0][2]


def test_gradients_through_restitution_match_central_differences():
    """A box landing flat at 2 m/s with restitution e (its 4 corners share the bounce in the restitution
    pass's Jacobi iterations): d (height and vertical velocity after the rebound) / d (e of either shape,
    landing speed), tape vs central differences. The impact lands mid-horizon and every corner bounces
    well above ``restitution_threshold`` in all perturbations, so the contact set holds. (A landing that
    also slides mixes sticking and sliding corners within the impact: a regime switch, not checked here.)
    """
    b = inertia.ModelBuilder(gravity=-G)
    ground = b.add_ground_plane(restitution=0.5)
    box = b.add_body(xform=((0.0, 0.0, 0.1), (0, 0, 0, 1)), linear_velocity=(0.0, 0.0, -2.0))
    shape = b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05, restitution=0.6)
    model = b.finalize(device=DEVICE, requires_grad=True)
    steps, dt = 40, 1.0 / 480
    states = [model.state() for _ in range(steps + 1)]
    control, contacts = model.control(), model.contacts()
    solver = inertia.XPBDSolver(model, iterations=4)

    def loss():
        out = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
        for t in range(steps):
            model.collide(states[t], contacts)
            solver.step(states[t], states[t + 1], control, contacts, dt)
        wp.launch(_rebound_loss, dim=1, inputs=[states[-1].body_q, states[-1].body_qd], outputs=[out],
                  device=DEVICE)
        return out

    tape = wp.Tape()
    with tape:
        out = loss()
    tape.backward(loss=out)
    assert states[-1].body_qd.numpy()[box][2] > 0.3  # it bounced: rising at the end of the horizon
    params = {  # name: (array, flat entry, eps)
        "restitution[box]": (model.shape_material_restitution, shape, 1e-2),
        "restitution[ground]": (model.shape_material_restitution, ground, 1e-2),
        "body_qd[box].vz": (states[0].body_qd, 6 * box + 2, 2e-2),
    }
    tape_grads = {name: float(a.grad.numpy().reshape(-1)[e]) for name, (a, e, _) in params.items()}
    tape.zero()
    for name, (a, e, eps) in params.items():
        base = a.numpy().copy()
        vals = []
        for sgn in (1.0, -1.0):
            p = base.copy()
            p.reshape(-1)[e] += sgn * eps
            a.assign(p)
            vals.append(float(loss().numpy()[0]))
        a.assign(base)
        check(f"rigid xpbd restitution d loss / d {name} (tape {tape_grads[name]:+.5f}, eps {eps:g})",
              [tape_grads[name]], [(vals[0] - vals[1]) / (2 * eps)], tol=2e-2)


# --------------------------------------------------------------------------- derivatives of corrections that are zero
@wp.kernel
def _pose_entry(q: wp.array(dtype=wp.transform), b: int, k: int, out: wp.array(dtype=float)):
    out[0] = q[b][k]


@wp.kernel
def _angle_about_y(q: wp.array(dtype=wp.transform), b: int, out: wp.array(dtype=float)):
    r = wp.transform_get_rotation(q[b])
    out[0] = 2.0 * wp.atan2(r[1], r[3])


def _taped(model, control, steps, dt, kernel, args, contacts=None):
    solver = inertia.XPBDSolver(model, iterations=4)
    states = [model.state() for _ in range(steps + 1)]
    out = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for t in range(steps):
            if contacts is not None:
                model.collide(states[t], contacts)
            solver.step(states[t], states[t + 1], control, contacts, dt)
        wp.launch(kernel, 1, inputs=[states[-1].body_q, *args], outputs=[out], device=DEVICE)
    return tape, out


def test_a_drive_resting_at_its_target_keeps_its_gradient():
    """The drive's correction is exactly 0 at its target; its derivative is not (the outside review's case):
    d(angle) / d(target) of a hinge whose axis is along gravity, at rest on its target, vs central differences."""
    b = inertia.ModelBuilder(gravity=-G, up_axis="y")  # gravity along the hinge axis: no torque
    bar = b.add_body(xform=((0.25, 0, 0), (0, 0, 0, 1)), mass=1.0, inertia=(1e-3, 0.02, 0.02))
    b.add_joint_revolute(-1, bar, child_xform=((-0.25, 0, 0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=5.0,
                         target_kd=0.1)
    model = b.finalize(device=DEVICE, requires_grad=True)
    control = model.control()

    def run(target):
        control.joint_target_pos.assign(np.array([target], np.float32))
        return _taped(model, control, 20, 1 / 240, _angle_about_y, [bar])

    tape, out = run(0.0)
    tape.backward(loss=out)
    g = float(control.joint_target_pos.grad.numpy()[0])
    fd = (float(run(1e-2)[1].numpy()[0]) - float(run(-1e-2)[1].numpy()[0])) / 2e-2
    print(f"\n[drive at rest] tape {g:+.5f}, central difference {fd:+.5f}")
    assert fd > 0.1 and abs(g - fd) < 1e-2 * abs(fd)


def test_a_sticking_contact_keeps_its_friction_gradient():
    """A settled box pushed well inside its friction cone: static friction holds it, and the tape must say so
    (it used to skip the friction row at zero slip and return the free body's response, 3x too large)."""
    b = inertia.ModelBuilder(gravity=-G)
    b.add_ground_plane(mu=0.5)
    box = b.add_body(xform=((0, 0, 0.1), (0, 0, 0, 1)))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=100.0, mu=0.5)  # 0.8 kg: mu m g = 3.9 N
    model = b.finalize(device=DEVICE, requires_grad=True)
    control, contacts = model.control(), model.contacts()
    steps, dt = 20, 1 / 480
    solver = inertia.XPBDSolver(model, iterations=4)
    s0, s1 = model.state(), model.state()
    for _ in range(200):  # settle, then start from the settled state
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, dt)
        s0, s1 = s1, s0
    model.body_q.assign(s0.body_q.numpy())
    model.body_qd.assign(s0.body_qd.numpy())

    def run(fx):
        control.body_f.assign(np.array([[fx, 0, 0, 0, 0, 0]], np.float32))
        return _taped(model, control, steps, dt, _pose_entry, [box, 0], contacts)

    tape, out = run(0.0)
    tape.backward(loss=out)
    g = float(control.body_f.grad.numpy()[0][0])
    eps = 0.1  # N: the 4 Jacobi iterations leave a creep that is linear in the push only for small pushes
    fd = (float(run(eps)[1].numpy()[0]) - float(run(-eps)[1].numpy()[0])) / (2 * eps)
    free = sum(range(1, steps + 1)) * dt * dt / 0.8
    print(f"\n[sticking box] tape {g:+.3e} m/N, central difference {fd:+.3e} m/N, free body {free:+.3e} m/N")
    assert abs(g - fd) < 0.05 * abs(fd) and g < 0.5 * free
