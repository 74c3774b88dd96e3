"""FeatherstoneSolver gradients (wp.Tape) against central differences, with tests/gradcheck.py's harness.

Every check runs with ``wp.config.verify_autograd_array_access`` on and fails if Warp reports an array
written after a recorded launch read it (the bug class that makes Newton 1.8's Featherstone gradient of
a free body wrong by ~500x: its mass matrix, factor and poses are solver buffers overwritten each step).

Scenarios keep one contact set across the perturbations (where the rollout is smooth):

- the Kuka arm on PD drives (no contact): initial joint coordinates and rates, drive targets, gains,
  armature, passive damping, link masses and inertias;
- a free box sliding and spinning on the ground (contacts, a free body): initial velocity, mass,
  friction;
- the A1 quadruped standing on its feet (free base, contacts, drives): initial base pose and joint
  angles, drive targets, gains, masses;
- a driven paddle carrying two particles joined by a spring (particle-shape contact both ways): initial
  particle velocities and joint rate, drive target, the spring's and the contact's stiffness.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE
from gradcheck import Input, StepRollout, TorchProblem, check_gradient

import inertia
from test_featherstone_models import a1_builder, kuka_builder
from test_rigid_semi_implicit_grad import check_sliding_box_gradients


# the solver's kernels, rebuilt with the check on (the collision modules hold no differentiated state)
SOLVER_MODULES = tuple(f"inertia.solvers.featherstone.{m}" for m in ("kinematics", "dynamics", "linalg", "contacts"))
# and the particle stages a step with particles runs (test_gradients_of_a_paddle_carrying_particles)
SOLVER_MODULES += ("inertia.solvers.forces.external", "inertia.solvers.forces.springs",
                   "inertia.solvers.forces.contact", "inertia.integrators.euler")


def _reload_solver_modules():
    # A module loaded before the flag was set keeps its binary, and then its kernels' read/write flags are
    # all False: the check would pass without checking anything. Marking it modified makes the next launch
    # build it again (with the flag on: Warp rebuilds, it never takes such a module from its cache).
    for name in SOLVER_MODULES:
        wp.get_module(name).mark_modified()


@pytest.fixture(scope="module", autouse=True)
def verify_autograd_array_access():
    """Warp's write-after-read check on for this whole file (switched once: every switch rebuilds the
    solver's modules, ~20 s on 2 cores)."""
    saved = wp.config.verify_autograd_array_access
    wp.config.verify_autograd_array_access = True
    _reload_solver_modules()
    yield
    wp.config.verify_autograd_array_access = saved
    _reload_solver_modules()  # back to the cached binaries for the tests that follow


@pytest.fixture
def verify_access(capfd):
    """The test fails if a launch wrote an array that an earlier recorded launch read. (The check's other,
    static message, "written to after it has been read from within the same kernel", is expected: the tree
    walks and factorizations read entries their own thread wrote earlier, each entry written once; see
    inertia.solvers.featherstone.linalg.)"""
    assert wp.config.verify_autograd_array_access
    yield
    out, err = capfd.readouterr()
    print(out)
    assert "read from in a previous launch" not in out + err, "a recorded array was overwritten (see the output)"


@wp.kernel
def joint_loss_kernel(q: wp.array(dtype=float), qd: wp.array(dtype=float), wq: wp.array(dtype=float),
                      wqd: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    if i < q.shape[0]:
        wp.atomic_add(out, 0, q[i] * wq[i])
    if i < qd.shape[0]:
        wp.atomic_add(out, 0, qd[i] * wqd[i])


@wp.kernel
def pose_loss_kernel(body_q: wp.array(dtype=wp.transform), w: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, wp.dot(wp.transform_get_translation(body_q[i]), w[i]))


class JointRollout(StepRollout):
    """``steps`` collide + step calls (FeatherstoneSolver by default); loss = random weights . (final joint_q,
    joint_qd, body positions)."""

    def __init__(self, model, steps, dt, solver=None, contacts=True, seed=0, body_weight=1.0):
        super().__init__(model, steps, dt, solver if solver is not None else inertia.FeatherstoneSolver(model),
                         contacts)
        rng = np.random.default_rng(seed)
        nq, nv, nb = model.joint_coord_count, model.joint_dof_count, model.body_count
        self.wq_np = rng.uniform(-1, 1, max(nq, 1))
        self.wqd_np = 0.1 * rng.uniform(-1, 1, max(nv, 1))  # a rate counts like the distance of 0.1 s
        self.wb_np = body_weight * rng.uniform(-1, 1, (nb, 3))
        self.wq, self.wqd = (wp.array(a.astype(np.float32), dtype=float, device=DEVICE)
                             for a in (self.wq_np, self.wqd_np))
        self.wb = wp.array(self.wb_np.astype(np.float32), dtype=wp.vec3, device=DEVICE)

    def _run(self, check_overflow=True):
        self.solver.sync_bodies(self.states[0])  # joint_q0 may have been edited: collision sees the poses
        super()._run(check_overflow)

    def host_loss(self, last) -> float:
        m = self.model
        out = float(np.sum(last.joint_q.numpy().astype(np.float64) * self.wq_np[:m.joint_coord_count]))
        out += float(np.sum(last.joint_qd.numpy().astype(np.float64) * self.wqd_np[:m.joint_dof_count]))
        return out + float(np.sum(last.body_q.numpy()[:, :3].astype(np.float64) * self.wb_np))

    def record_loss(self, last, out) -> None:
        m = self.model
        wp.launch(joint_loss_kernel, dim=max(m.joint_coord_count, m.joint_dof_count, 1),
                  inputs=[last.joint_q, last.joint_qd, self.wq, self.wqd], outputs=[out], device=DEVICE)
        wp.launch(pose_loss_kernel, dim=m.body_count, inputs=[last.body_q, self.wb], outputs=[out], device=DEVICE)


def test_the_access_check_is_live(capfd):
    """The check reports a gather that reads State.joint_q followed by a scatter that writes it (the
    fixture's rebuild made the solver's kernels carry their read/write flags)."""
    from inertia.solvers.featherstone import kinematics

    model = kuka_builder().finalize(device=DEVICE, requires_grad=True)
    topo = inertia.FeatherstoneSolver(model).topology
    state = model.state()
    q, qd = (wp.zeros(7, dtype=float, device=DEVICE, requires_grad=True) for _ in range(2))
    with wp.Tape():
        wp.launch(kinematics.gather_joints_kernel, 7, inputs=[topo.coord_state, state.joint_q], outputs=[q],
                  device=DEVICE)
        wp.launch(kinematics.scatter_state_kernel, 7, inputs=[topo.tree, q, qd, 7, 7],
                  outputs=[state.joint_q, state.joint_qd], device=DEVICE)
    out, err = capfd.readouterr()
    assert "read from in a previous launch" in out + err


def test_gradients_of_the_kuka_on_pd_drives(verify_access):
    """0.2 s of the 7-DoF arm swinging to drive targets (kp 100, kd 5, armature 0.05, damping 0.5)."""
    b = kuka_builder()
    for d in range(len(b.joint_target_ke)):
        b.joint_target_ke[d], b.joint_target_kd[d] = 100.0, 5.0
        b.joint_armature[d], b.joint_damping[d] = 0.05, 0.5
    model = b.finalize(device=DEVICE, requires_grad=True)
    r = JointRollout(model, 100, 2e-3, contacts=False, seed=1)
    r.states[0].joint_q.assign(np.array([0.4, 0.8, -0.3, -1.0, 0.5, 0.7, 0.2], np.float32))
    r.states[0].joint_qd.assign(np.array([0.5, -0.3, 0.2, 0.1, -0.4, 0.3, 1.0], np.float32))
    r.control.joint_target_pos.assign(np.array([0.2, 0.5, 0.0, -1.2, 0.3, 0.4, 0.0], np.float32))
    dynamic = (model.body_inv_mass.numpy() > 0).astype(np.float64)  # the massless base stays massless
    s0 = r.states[0]
    check_gradient("kuka drives", r.problem(
        joint_q0=s0.joint_q, joint_qd0=s0.joint_qd, joint_target_pos=r.control.joint_target_pos,
        joint_target_ke=model.joint_target_ke, joint_target_kd=model.joint_target_kd,
        joint_armature=model.joint_armature, joint_damping=model.joint_damping), [
        Input("joint_q0", h=1e-2), Input("joint_qd0", h=1e-1), Input("joint_target_pos", h=1e-2),
        Input("joint_target_ke", h=1e-2, relative=True), Input("joint_target_kd", h=1e-2, relative=True),
        Input("joint_armature", h=1e-2, relative=True), Input("joint_damping", h=3e-2, relative=True)], seed=21)
    check_gradient("kuka masses", r.problem(body_mass=model.body_mass, body_inertia=model.body_inertia), [
        Input("body_mass", h=1e-2, relative=True, mask=dynamic),
        Input("body_inertia", h=1e-2, relative=True, mask=dynamic[:, None, None] * np.eye(3))], seed=22)


def sliding_box(steps=60):
    """A 1 kg box sliding at 1 m/s and spinning on the ground from its resting depth (four corners touch)."""
    b = inertia.ModelBuilder()
    b.add_ground_plane(mu=0.4)
    h = 0.05
    solver_tc = 0.005
    sink = 9.81 * solver_tc ** 2
    box = b.add_body(xform=((0.0, 0.0, h - sink), (0.0, 0.0, 0.0, 1.0)), linear_velocity=(1.0, 0.3, 0.0),
                     angular_velocity=(0.0, 0.0, 0.8))
    b.add_shape_box(box, hx=h, hy=1.5 * h, hz=h, density=1.0 / (12 * h ** 3), mu=0.6)
    model = b.finalize(device=DEVICE, requires_grad=True)
    return JointRollout(model, steps, 1e-3, inertia.FeatherstoneSolver(model, contact_timeconst=solver_tc), seed=2)


def test_gradients_of_a_free_box_sliding_on_the_ground(verify_access):
    r = sliding_box()
    # a push: with contact and friction that mean the same at any mass, the push is what the mass changes
    r.control.body_f.assign(np.array([[2.0, -1.0, 0.0, 0.0, 0.0, 0.05]], np.float32))
    r.backward()
    # the box's inertia is held (the kernels read body_mass and body_inertia separately)
    check_sliding_box_gradients("sliding box", r, "body_mass", seed=23)


def settled_a1():
    """The A1 standing on PD drives (kp 300, kd 10) after 0.5 s, as the base point of a 30-step check."""
    b = a1_builder(xform=((0.0, 0.0, 0.30), (0.0, 0.0, 0.0, 1.0)))
    b.add_ground_plane()
    model = b.finalize(device=DEVICE, requires_grad=True)
    types, qds, qs = model.joint_type.numpy(), model.joint_qd_start.numpy(), model.joint_q_start.numpy()
    stand = {"hip": 0.0, "upper": 0.9, "lower": -1.8}
    ke, kd, target = (np.zeros(model.joint_dof_count, np.float32) for _ in range(3))
    q = model.state().joint_q.numpy()
    for j, (label, t) in enumerate(zip(model.joint_label, types)):
        if t == inertia.types.JOINT_REVOLUTE:
            ke[qds[j]], kd[qds[j]] = 300.0, 10.0
            target[qds[j]] = q[qs[j]] = stand[label.split("_")[1]]
    model.joint_target_ke.assign(ke)
    model.joint_target_kd.assign(kd)
    r = JointRollout(model, 30, 1e-3, seed=3, body_weight=0.1)
    r.control.joint_target_pos.assign(target)
    settle = JointRollout(model, 500, 1e-3, r.solver)
    settle.control = r.control
    settle.states[0].joint_q.assign(q)
    settle._run()
    r.states[0].joint_q.assign(settle.states[-1].joint_q)
    r.states[0].joint_qd.assign(settle.states[-1].joint_qd)
    return r, ke > 0


def test_gradients_of_the_a1_standing_on_its_feet(verify_access):
    """Free base, 18 dofs, four foot contacts, PD drives: 30 steps from a settled stance. The masses move the
    stance little (the contacts and drives hold it): a 5 % step resolves their gradient."""
    r, driven = settled_a1()
    r.backward()
    assert r.contacts.counts()["rigid_contacts"] == 4
    model, s0 = r.model, r.states[0]
    nq = model.joint_coord_count
    position = np.zeros(nq)
    position[:3] = 1.0  # the base position; its quaternion is checked through the joint angles' effect
    angles = np.zeros(nq)
    angles[7:] = 1.0
    dynamic = (model.body_inv_mass.numpy() > 0).astype(np.float64)
    check_gradient("a1 stance", r.problem(
        base=s0.joint_q, angles=s0.joint_q, joint_target_pos=r.control.joint_target_pos,
        body_mass=model.body_mass), [
        Input("base", h=2e-4, mask=position), Input("angles", h=1e-3, mask=angles),
        Input("joint_target_pos", h=1e-3, mask=driven.astype(np.float64)),
        Input("body_mass", h=5e-2, relative=True, mask=dynamic)], seed=24)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_gradients_through_velocity_limits_on_a_floating_base(integrator, verify_access):
    """A free base with a two-link arm, no gravity: efforts drive the arm's first hinge beyond its velocity
    limit (1.5 rad/s) from the 6th step on, and the impulses that hold it there move the base (the
    dynamics.rate_limit_kernel system, its factor and solve on the tape; with RK4 at every stage). Initial
    rates and angles, the efforts, link masses."""
    b = inertia.ModelBuilder(gravity=0.0)
    base = b.add_body(xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(base, hx=0.2, hy=0.1, hz=0.1, density=250.0)  # 2 kg
    b.add_joint_free(base)
    parent = base
    for k, limit in enumerate((1.5, 10.0)):
        link = b.add_body(xform=((0.2 + 0.3 * k + 0.15, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
        b.add_shape_box(link, hx=0.15, hy=0.03, hz=0.03, density=500.0)  # 0.54 kg
        b.add_joint_revolute(parent, link, parent_xform=((0.2 if k == 0 else 0.15, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
                             child_xform=((-0.15, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0),
                             velocity_limit=limit)
        parent = link
    model = b.finalize(device=DEVICE, requires_grad=True)
    r = JointRollout(model, 60, 2e-3, inertia.FeatherstoneSolver(model, integrator=integrator), contacts=False,
                     seed=4)
    s0 = r.states[0]
    s0.joint_q.assign(np.array([0, 0, 1.0, 0, 0, 0, 1, 0.1, -0.2], np.float32))
    s0.joint_qd.assign(np.array([0.1, 0.0, -0.1, 0.0, 0.2, 0.0, 0.3, -0.5], np.float32))
    r.control.joint_f.assign(np.array([0, 0, 0, 0, 0, 0, 2.0, 0.5], np.float32))
    r._run()
    assert abs(r.states[-1].joint_qd.numpy()[6]) == pytest.approx(1.5)  # held at the limit
    angles, base_rates, arm = (np.zeros(n) for n in (9, 8, 8))
    angles[7:], base_rates[:6], arm[6:] = 1.0, 1.0, 1.0
    check_gradient(f"velocity limits {integrator}", r.problem(
        joint_q0=s0.joint_q, joint_qd0=s0.joint_qd, joint_f=r.control.joint_f, body_mass=model.body_mass), [
        Input("joint_q0", h=1e-2, mask=angles), Input("joint_qd0", h=1e-2, mask=base_rates),
        Input("joint_f", h=1e-2, mask=arm), Input("body_mass", h=1e-2, relative=True)], seed=28)


# ----------------------------------------------------------------------------- Rollout + torch
def check_torch(name, run, inputs: dict, steps: list, seed: int):
    return check_gradient(name, TorchProblem(run, inputs), steps, seed=seed)


def test_rollout_gradients_of_the_driven_kuka(verify_access):
    """inertia.Rollout (checkpointed, graph replay) + inertia.body_poses: a hand loss and a trajectory loss;
    gradients with respect to the initial joint state, per-frame targets and efforts, armature, damping,
    drive damping and link masses."""
    torch = pytest.importorskip("torch")
    b = kuka_builder()
    for d in range(7):
        b.joint_target_ke[d], b.joint_target_kd[d] = 100.0, 5.0
    model = b.finalize(device=DEVICE)
    T = 8
    ro = inertia.Rollout(model, inertia.FeatherstoneSolver(model), T, 0.02, 10, checkpoint_every=3,
                         params=("joint_armature", "joint_damping", "joint_target_kd", "body_mass"))
    hand = model.body_label.index("lbr_iiwa_link_7")
    rng = np.random.default_rng(5)
    w = torch.tensor(rng.uniform(-1, 1, (T + 1, 7)), dtype=torch.float32)
    goal = torch.tensor([0.3, 0.2, 0.8])

    def run(x):
        out = ro(joint_q0=x["joint_q0"], joint_qd0=x["joint_qd0"], joint_target_pos=x["targets"], joint_f=x["efforts"],
                 params={"joint_armature": x["armature"], "joint_damping": x["damping"], "joint_target_kd": x["kd"],
                         "body_mass": x["mass"]})
        poses = inertia.body_poses(model, out.joint_q)  # the same poses as out.body_q, through torch
        return (poses[-1, hand, :3] - goal).square().sum() + 0.1 * (w * out.joint_q).sum() / T

    inputs = {"joint_q0": torch.tensor([0.4, 0.8, -0.3, -1.0, 0.5, 0.7, 0.2]),
              "joint_qd0": torch.tensor(rng.uniform(-0.5, 0.5, 7), dtype=torch.float32),
              "targets": torch.tensor(rng.uniform(-0.5, 0.5, (T, 7)), dtype=torch.float32),
              "efforts": torch.tensor(rng.uniform(-2, 2, (T, 7)), dtype=torch.float32),
              "armature": torch.full((7,), 0.05), "damping": torch.full((7,), 0.5), "kd": torch.full((7,), 5.0),
              "mass": torch.tensor(model.body_mass.numpy())}
    dynamic = (model.body_inv_mass.numpy() > 0).astype(np.float64)
    check_torch("rollout kuka", run, inputs, [
        Input("joint_q0", h=1e-2), Input("joint_qd0", h=1e-1), Input("targets", h=1e-2), Input("efforts", h=1e-1),
        Input("armature", h=3e-2, relative=True), Input("damping", h=3e-2, relative=True),
        Input("kd", h=3e-2, relative=True), Input("mass", h=1e-2, relative=True, mask=dynamic)], seed=25)


def test_rollout_gradients_of_the_a1_free_base(verify_access):
    """A rollout of the standing A1 (free base, four foot contacts): its initial base position and joint
    angles, drive targets and masses."""
    torch = pytest.importorskip("torch")
    r, driven = settled_a1()
    model = r.model
    model.requires_grad = False
    T = 6
    ro = inertia.Rollout(model, r.solver, T, 0.005, 5, params=("body_mass",))
    q0 = torch.tensor(r.states[0].joint_q.numpy())
    target = torch.tensor(r.control.joint_target_pos.numpy()).repeat(T, 1)
    w = torch.tensor(np.random.default_rng(6).uniform(-1, 1, (model.body_count, 3)), dtype=torch.float32)

    def run(x):
        q = torch.cat([x["base"], q0[3:7], x["angles"]])
        out = ro(joint_q0=q, joint_target_pos=x["targets"], params={"body_mass": x["mass"]})
        return (w * out.body_q[-1, :, :3]).sum() + out.joint_q[-1, 7:].sum()

    inputs = {"base": q0[:3].clone(), "angles": q0[7:].clone(), "targets": target,
              "mass": torch.tensor(model.body_mass.numpy())}
    dynamic = (model.body_inv_mass.numpy() > 0).astype(np.float64)
    check_torch("rollout a1", run, inputs, [
        Input("base", h=2e-4), Input("angles", h=1e-3), Input("targets", h=1e-3, mask=driven[None, :]),
        Input("mass", h=5e-2, relative=True, mask=dynamic)], seed=26)



@wp.kernel
def particle_loss_kernel(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), wx: wp.array(dtype=wp.vec3),
                         wv: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, wp.dot(x[i], wx[i]) + wp.dot(v[i], wv[i]))


class PaddleRollout(JointRollout):
    """JointRollout whose loss adds random weights . (final particle positions, 0.1 s x velocities)."""

    def __init__(self, model, steps, dt, seed=0):
        super().__init__(model, steps, dt, seed=seed)
        rng = np.random.default_rng(seed + 100)
        self.wx_np = rng.uniform(-1, 1, (model.particle_count, 3))
        self.wv_np = 0.1 * rng.uniform(-1, 1, (model.particle_count, 3))
        self.wx, self.wv = (wp.array(a.astype(np.float32), dtype=wp.vec3, device=DEVICE)
                            for a in (self.wx_np, self.wv_np))

    def host_loss(self, last) -> float:
        return (super().host_loss(last) + float(np.sum(last.particle_q.numpy().astype(np.float64) * self.wx_np))
                + float(np.sum(last.particle_qd.numpy().astype(np.float64) * self.wv_np)))

    def record_loss(self, last, out) -> None:
        super().record_loss(last, out)
        wp.launch(particle_loss_kernel, dim=self.model.particle_count,
                  inputs=[last.particle_q, last.particle_qd, self.wx, self.wv], outputs=[out], device=DEVICE)


def test_gradients_of_a_paddle_carrying_particles(verify_access):
    """0.1 s of a driven paddle (tests/test_featherstone_particles.py) swinging toward its target with two
    particles joined by a spring riding on it: both keep their contact with the paddle throughout (the loss
    is smooth), so the gradient runs through the contact both ways (particle to body and back)."""
    from test_featherstone_particles import paddle

    model = paddle(particles=((0.25, 0.02, 0.0), (0.45, -0.03, 0.0)), particle_mass=0.2, spring_ke=200.0, mu=0.1,
                   requires_grad=True)
    r = PaddleRollout(model, 100, 1e-3, seed=3)
    s0 = r.states[0]
    # sliding toward each other (low friction: they slide the whole 0.1 s, so their paths depend on these
    # velocities smoothly, and the spring between them is compressed)
    s0.particle_qd.assign(np.array([[0.3, 0.05, 0.0], [-0.3, 0.05, 0.0]], np.float32))
    s0.joint_qd.assign(np.array([-0.5], np.float32))
    r.control.joint_target_pos.assign(np.array([-0.3], np.float32))
    check_gradient("paddle particles", r.problem(
        particle_qd0=s0.particle_qd, joint_qd0=s0.joint_qd, joint_target_pos=r.control.joint_target_pos,
        spring_stiffness=model.spring_stiffness, shape_material_tau=model.shape_material_tau), [
        Input("particle_qd0", h=3e-2, mask=np.array([1.0, 1.0, 0.0])), Input("joint_qd0", h=3e-2),
        Input("joint_target_pos", h=3e-3), Input("spring_stiffness", h=3e-2, relative=True),
        Input("shape_material_tau", h=3e-2, relative=True)], seed=27)
