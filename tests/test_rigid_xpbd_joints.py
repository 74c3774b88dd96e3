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
from gradcheck import Input, StepRollout, body_loss_kernel, check_gradient
from test_rigid_xpbd import Sim, rotate

G = 9.81


def hinge_bar(length=0.5, half=0.02, gravity=-G, **joint):
    """A bar of ``length`` along its x axis hinged at its -x end to the world origin about y (the XPBDSolver
    iterates step-local motions, so where the hinge is does not matter: tests/test_xpbd_precision.py)."""
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
def slide_and_swing_model(smoothing: float = 0.0):
    """A 20 cm box sliding on the ground at 1 m/s (4 corner contacts, mu 0.3) beside a pendulum bar on a PD
    drive (target_ke 2 N m/rad, target_kd 0.05 N m s/rad); bodies 0 (box) and 1 (bar); requires_grad."""
    b = inertia.ModelBuilder(gravity=-G)
    b.contact_smoothing = smoothing
    b.add_ground_plane(mu=0.3)
    box = b.add_body(xform=((-0.04, 0.0, 0.1), (0, 0, 0, 1)), linear_velocity=(1.0, 0.2, 0.0))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=100.0, mu=0.3)
    bar = b.add_body(xform=((0.25, 0.0, 1.0), (0, 0, 0, 1)))
    b.add_shape_box(bar, hx=0.25, hy=0.02, hz=0.02)
    b.add_joint_revolute(-1, bar, parent_xform=((0.0, 0.0, 1.0), (0, 0, 0, 1)),
                         child_xform=((-0.25, 0.0, 0.0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=2.0,
                         target_kd=0.05)
    return b.finalize(device=DEVICE, requires_grad=True)


class XPBDRollout(StepRollout):
    """``steps`` (collide +) XPBD steps, re-runnable for :func:`check_gradient`.

    The loss is ``wq . body_q_T + wqd . body_qd_T`` (one row of 7 and of 6 weights per body), summed in
    float64 on the host for the finite differences and by ``body_loss_kernel`` on the tape; or, with
    ``loss=(host, device)``, ``host(final state) -> float`` and ``device(final state, out)`` that launches the
    same loss into ``out`` on the tape.
    """

    def __init__(self, model, steps, dt, wq=None, wqd=None, loss=None, collide=True, iterations=4, **solver_args):
        super().__init__(model, steps, dt, inertia.XPBDSolver(model, iterations=iterations, **solver_args), collide)
        if loss is None:
            wq, wqd = np.asarray(wq, np.float64).reshape(-1, 7), np.asarray(wqd, np.float64).reshape(-1, 6)
            wq32, wqd32 = (wp.array(w.ravel().astype(np.float32), dtype=float, device=DEVICE) for w in (wq, wqd))

            def host(last):
                q, qd = last.body_q.numpy().astype(np.float64), last.body_qd.numpy().astype(np.float64)
                return float(np.sum(q * wq) + np.sum(qd * wqd))

            def device(last, out):
                wp.launch(body_loss_kernel, dim=model.body_count, inputs=[last.body_q, last.body_qd, wq32, wqd32],
                          outputs=[out], device=DEVICE)

            loss = (host, device)
        self.host_loss, self.record_loss = loss


@pytest.mark.parametrize("velocity_iterations", [4, 0])
def test_gradients_through_contact_and_joints_match_central_differences(velocity_iterations):
    """40 steps of a box sliding on the ground (four corner contacts, Coulomb friction throughout) next to a
    pendulum held by a PD drive: d loss / d (initial velocities, inverse masses, drive target, mu); with the
    restitution pass (its zero-normal-velocity projection of the sliding box's corners) and without it
    (``velocity_iterations=0``: the velocities recovered from the poses are the step's).

    Smooth on purpose: the box slides for the whole horizon (the contact set and the sliding regime do
    not change within the perturbations); where they change (a contact starting, sticking <-> sliding)
    the rollout has a kink and central differences straddling it disagree with the tape by design.
    Near the origin on purpose too: XPBD's velocities (x' - x) / dt are quantized by float32 poses
    (at |x| ~ 1 m a velocity change below 3e-5 m/s per step at dt = 1/480 rounds away), which makes
    central differences a staircase there.
    """
    model = slide_and_swing_model()
    box = 0
    rng = np.random.default_rng(7)
    wq, wqd = rng.uniform(-1, 1, (2, 7)), rng.uniform(-1, 1, (2, 6))
    wqd[box, 0] = 2.0  # weigh the box's final velocity along its slide: the friction coefficient shows there
    r = XPBDRollout(model, 40, 1.0 / 480, wq, wqd, velocity_iterations=velocity_iterations)
    inertia.eval_fk(model, np.array([1.2], np.float32), np.array([0.5], np.float32), r.states[0])
    r.control.joint_target_pos.assign(np.array([1.0], np.float32))
    r.backward()
    sliding = float(r.states[-1].body_qd.numpy()[box][0])
    lam = r.states[-1].step_buffers.contact_lambda.numpy()[-1]
    assert sliding > 0.5 and r.contacts.counts()["rigid_contacts"] == 4 and (lam[:4, 0] > 0).all()
    # The loss weighs both bodies' final velocities. They are XPBD's position differences / dt, and the bar's
    # poses sit near z = 1 m, where a float32 ulp of position is 1.2e-7 m = 6e-5 m/s at dt = 1/480: the loss's
    # rounding noise is sigma ~1e-4 (2e-5 for the box near the origin, 3e-6 without the velocity terms; the
    # sensitivities drop in proportion, S / sigma ~ 3e3 either way). Central differences at 1e-2 resolve the
    # gradient only to 5-15 % of S; the rollout is smooth far wider (sliding friction is linear in mu, the
    # drive linear in its target; truncation measured < 1e-3 of S), so the steps are large: 10 % of mu,
    # 0.1 rad of target, 0.1 m/s, 20 % of the inverse masses. Every shape's mu moves (the bar's touches
    # nothing: its gradient is 0 and adds nothing to S). Every initial velocity moves but the box's vertical
    # one: the box rests on the ground, and rising it lifts off (the contact set changes; the loss's slope
    # along it is 0.60 below vz = 0 and 0.7-1.6 above): a kink at the base point.
    moving = np.ones((2, 6))
    moving[box, 2] = 0.0
    check_gradient("rigid xpbd contact + joints", r.problem(
        body_qd0=r.states[0].body_qd, body_inv_mass=model.body_inv_mass,
        joint_target_pos=r.control.joint_target_pos, shape_material_mu=model.shape_material_mu), [
        Input("body_qd0", h=0.1, mask=moving), Input("body_inv_mass", h=0.2, relative=True),
        Input("joint_target_pos", h=0.1), Input("shape_material_mu", h=0.1, relative=True)], seed=21)


def test_gradients_through_restitution_match_central_differences():
    """A box landing flat at 2 m/s with restitution e (its 4 corners share the bounce in the restitution
    pass's Jacobi iterations): d (height and vertical velocity after the rebound) / d (e of either shape,
    landing speed), tape vs central differences. The impact lands mid-horizon and every corner bounces
    well above ``restitution_threshold`` in all perturbations, so the contact set holds. (A landing that
    also slides mixes sticking and sliding corners within the impact: a regime switch, not checked here.)
    """
    b = inertia.ModelBuilder(gravity=-G)
    b.add_ground_plane(restitution=0.5)
    box = b.add_body(xform=((0.0, 0.0, 0.1), (0, 0, 0, 1)), linear_velocity=(0.0, 0.0, -2.0))
    b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05, restitution=0.6)
    model = b.finalize(device=DEVICE, requires_grad=True)
    wq, wqd = np.zeros((1, 7)), np.zeros((1, 6))
    wq[box, 2], wqd[box, 2] = 1.0, 0.1  # height and vertical velocity after the rebound
    r = XPBDRollout(model, 40, 1.0 / 480, wq, wqd)
    r.backward()
    assert r.states[-1].body_qd.numpy()[box][2] > 0.3  # it bounced: rising at the end of the horizon
    # the landing speed only: the lateral and angular velocities are 0, where the friction of the impact has its
    # kink (|v_t| = 0: any nudge sideways slides the corners one way or the other), so they stay put
    vz = np.zeros((1, 6))
    vz[box, 2] = 1.0
    check_gradient("rigid xpbd restitution", r.problem(
        restitution=model.shape_material_restitution, body_qd0=r.states[0].body_qd), [
        Input("restitution", h=1e-2, relative=True), Input("body_qd0", h=2e-2, mask=vz)], seed=22)


# --------------------------------------------------------------------------- derivatives of corrections that are zero
@wp.kernel
def _pose_and_rate(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector), b: int, k: int,
                   rate_weight: float, out: wp.array(dtype=float)):
    """Entry k of body b's position plus ``rate_weight`` times its velocity along the same axis."""
    out[0] = q[b][k] + rate_weight * qd[b][k]


@wp.kernel
def _angle_and_rate_about_y(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector), b: int,
                            rate_weight: float, out: wp.array(dtype=float)):
    """Body b's rotation angle about y plus ``rate_weight`` times its angular velocity about y."""
    r = wp.transform_get_rotation(q[b])
    out[0] = 2.0 * wp.atan2(r[1], r[3]) + rate_weight * qd[b][4]


RATE_WEIGHT = 0.1  # [s]: a velocity counts like the distance it covers in 0.1 s


def test_a_drive_resting_at_its_target_keeps_its_gradient():
    """The drive's correction is exactly 0 at its target; its derivative is not (the outside review's case):
    d(angle + 0.1 s x rate) / d(target) of a hinge whose axis is along gravity, at rest on its target, vs central
    differences."""
    b = inertia.ModelBuilder(gravity=-G, up_axis="y")  # gravity along the hinge axis: no torque
    bar = b.add_body(xform=((0.25, 0, 0), (0, 0, 0, 1)), mass=1.0, inertia=(1e-3, 0.02, 0.02))
    b.add_joint_revolute(-1, bar, child_xform=((-0.25, 0, 0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=5.0,
                         target_kd=0.1)
    model = b.finalize(device=DEVICE, requires_grad=True)

    def host(last):
        q, qd = last.body_q.numpy().astype(np.float64)[bar], last.body_qd.numpy().astype(np.float64)[bar]
        return 2.0 * math.atan2(q[4], q[6]) + RATE_WEIGHT * qd[4]

    def device(last, out):
        wp.launch(_angle_and_rate_about_y, 1, inputs=[last.body_q, last.body_qd, bar, RATE_WEIGHT], outputs=[out],
                  device=DEVICE)

    r = XPBDRollout(model, 20, 1 / 240, loss=(host, device), collide=False)
    r.control.joint_target_pos.assign(np.array([0.0], np.float32))  # the bar rests on its target
    (rep,) = check_gradient("drive at rest", r.problem(joint_target_pos=r.control.joint_target_pos),
                            [Input("joint_target_pos", h=1e-2)], base_points=2, seed=31)
    assert min(abs(line["fd"]) for line in rep.lines) > 0.1  # the correction is 0, its derivative is not


def test_a_sticking_contact_keeps_its_friction_gradient():
    """A settled box pushed well inside its friction cone: static friction holds it, and the tape must say so
    (it used to skip the friction row at zero slip and return the free body's response, 3x too large)."""
    b = inertia.ModelBuilder(gravity=-G)
    b.add_ground_plane(mu=0.5)
    box = b.add_body(xform=((0, 0, 0.1), (0, 0, 0, 1)))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=100.0, mu=0.5)  # 0.8 kg: mu m g = 3.9 N
    model = b.finalize(device=DEVICE, requires_grad=True)
    contacts = model.contacts()
    steps, dt = 20, 1 / 480
    solver = inertia.XPBDSolver(model, iterations=4)
    s0, s1 = model.state(), model.state()
    for _ in range(200):  # settle, then start from the settled state
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, dt)
        s0, s1 = s1, s0
    model.body_q.assign(s0.body_q.numpy())
    model.body_qd.assign(s0.body_qd.numpy())

    def host(last):
        return float(last.body_q.numpy()[box][0]) + RATE_WEIGHT * float(last.body_qd.numpy()[box][0])

    def device(last, out):
        wp.launch(_pose_and_rate, 1, inputs=[last.body_q, last.body_qd, box, 0, RATE_WEIGHT], outputs=[out],
                  device=DEVICE)

    r = XPBDRollout(model, steps, dt, loss=(host, device))
    r.backward()
    g = float(r.control.body_f.grad.numpy()[box][0])
    free = (sum(range(1, steps + 1)) * dt * dt + RATE_WEIGHT * steps * dt) / 0.8  # the free body's x + 0.1 s vx
    print(f"\n[sticking box] tape d loss / d fx {g:+.3e} m/N, free body {free:+.3e} m/N")
    assert g < 0.5 * free
    # The push fx only. The wrench's other entries leave the regime this test is about: a torque about x or y
    # shifts the corners' loads until they switch (the loss's noise rises from sigma 5e-7 to 1e-5 .. 1e-4 and the
    # tape and central differences part by 30-100 % of S), and fy does not move x (it only shrinks S).
    # Step 0.2 N (5 % of the friction bound mu m g = 3.9 N): the 4 Jacobi iterations leave a creep that is
    # linear in the push only for small pushes (truncation 3e-4 of S at 0.2 N, 3e-2 at 0.3 N), and at 0.1 N
    # the rounding (sigma 8e-7) resolves the gradient only to 4 % of S.
    push = np.zeros((1, 6))
    push[box, 0] = 1.0
    check_gradient("sticking box", r.problem(body_f=r.control.body_f), [Input("body_f", h=0.2, mask=push)],
                   base_points=2, seed=32)
