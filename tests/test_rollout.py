"""inertia.Rollout and its torch bridge: checkpointing, gradients vs finite differences, aliasing, errors.

The reference for every gradient is a central difference of the same float32
rollout (run through torch with no graph), along random directions that move
all entries of an input at once (``check_gradient`` of gradcheck.py: two steps,
measured noise, nudged base points).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import warp as wp

import inertia
from conftest import DEVICE
from gradcheck import Input, TorchProblem, check_gradient

FRAME_DT = 1.0 / 60.0


def chain_model(contact: bool, requires_grad: bool = True):
    """Three particles joined by two springs; with ``contact`` the lowest starts just above the ground, moving down."""
    b = inertia.ModelBuilder()
    z = 0.12 if contact else 1.0
    p0 = b.add_particle((0.0, 0.0, z), vel=(0.3, 0.0, -1.0 if contact else 0.2), mass=1.0, radius=0.05)
    p1 = b.add_particle((0.25, 0.0, z + 0.1), vel=(0.0, 0.1, 0.0), mass=0.5, radius=0.05)
    p2 = b.add_particle((0.5, 0.05, z + 0.2), vel=(-0.2, 0.0, 0.1), mass=2.0, radius=0.05)
    b.add_spring(p0, p1, ke=200.0, kd=0.5)
    b.add_spring(p1, p2, ke=300.0, kd=0.2)
    if contact:
        b.add_ground_plane(ke=2.0e3, kd=5.0, mu=0.4)
    b.particle_collide = False
    return b.finalize(device=DEVICE, requires_grad=requires_grad)


def make_rollout(model, frames=12, substeps=8, **kw):
    return inertia.Rollout(model, inertia.SemiImplicitSolver(model), frames, FRAME_DT, substeps, **kw)


def initial(model):
    q0 = torch.tensor(model.particle_q.numpy())
    qd0 = torch.tensor(model.particle_qd.numpy())
    return q0, qd0


def weights(shape, seed):
    return torch.tensor(np.random.default_rng(seed).uniform(-1.0, 1.0, shape), dtype=torch.float32)


def loss_of(q, qd, wq, wqd):
    # summed in float64 so that the finite differences are not limited by the sum's rounding
    return (q.double() * wq.double()).sum() + (qd.double() * wqd.double()).sum()


# ------------------------------------------------------------------ checkpointing
def _all_grads(model, k, frames=12):
    ro = make_rollout(model, frames=frames, params=("spring_stiffness", "particle_mass"), checkpoint_every=k)
    q0, qd0 = initial(model)
    q0.requires_grad_(True)
    qd0.requires_grad_(True)
    f = (0.1 * weights((frames, 3, 3), 3)).requires_grad_(True)
    ke = torch.tensor([200.0, 300.0], requires_grad=True)
    mass = torch.tensor([1.0, 0.5, 2.0], requires_grad=True)
    q, qd = ro(q0, qd0, f, {"spring_stiffness": ke, "particle_mass": mass})
    loss_of(q, qd, weights(q.shape, 1), weights(qd.shape, 2)).backward()
    return [q.detach(), qd.detach(), q0.grad, qd0.grad, f.grad, ke.grad, mass.grad]


@pytest.mark.parametrize("contact", [False, True])
def test_checkpointing_gives_bitwise_identical_gradients(contact):
    model = chain_model(contact)
    reference = _all_grads(model, 12)  # one tape over the whole rollout
    for k in (1, 5):  # 5 does not divide 12: a short last segment
        for a, b in zip(reference, _all_grads(model, k)):
            assert torch.isfinite(a).all() and a.abs().max() > 0
            assert torch.equal(a, b), f"checkpoint_every={k} changed a result by {(a - b).abs().max()}"


@pytest.mark.parametrize("solver", ["semi_implicit", "xpbd"])
def test_captured_graphs_give_bitwise_the_plain_results(solver):
    """capture=True replays frames and segments from graphs: the same kernels on the same buffers."""
    model = chain_model(True)
    results = []
    for capture in (False, True):
        ro = inertia.Rollout(model, SOLVERS[solver](model), 12, FRAME_DT, 3, params=("spring_stiffness",),
                             checkpoint_every=3, capture=capture)  # 3 substeps: odd, both ping-pong parities
        q0, qd0 = initial(model)
        qd0.requires_grad_(True)
        f = (0.1 * weights((12, 3, 3), 3)).requires_grad_(True)
        ke = torch.tensor([200.0, 300.0], requires_grad=True)
        for _ in range(2):  # the second call replays every graph the first one captured
            for t in (qd0, f, ke):
                t.grad = None
            q, qd = ro(q0, qd0, f, {"spring_stiffness": ke})
            loss_of(q, qd, weights(q.shape, 1), weights(qd.shape, 2)).backward()
        assert bool(ro._graphs) == capture
        if capture:
            assert set(ro._graphs) == {("frame", True), ("frame", False), "segment"}
        results.append([q.detach(), qd.detach(), qd0.grad, f.grad, ke.grad])
    for a, b in zip(*results):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="capture"):
        make_rollout(model, capture=True, check_finite=True)


def test_memory_budget_and_default_segment_length():
    model = chain_model(False)
    ro = make_rollout(model, frames=400, substeps=2)
    k = ro.checkpoint_every
    assert 5 <= k <= 80  # near sqrt(400), weighted by what a segment costs
    cost = {j: ro.memory_estimate(j)["checkpoints"] + ro.memory_estimate(j)["segment"] for j in (1, k, 400)}
    assert cost[k] < cost[1] and cost[k] < cost[400]
    budget = (cost[k] + cost[400]) // 2
    big = make_rollout(model, frames=400, substeps=2, memory_budget=budget)
    est = big.memory_estimate()
    assert big.checkpoint_every > k and est["checkpoints"] + est["segment"] <= budget
    with pytest.raises(ValueError, match="memory_budget"):
        make_rollout(model, frames=400, substeps=2, memory_budget=cost[k] // 2)


# ------------------------------------------------------------------ gradients vs finite differences
def check_torch_gradients(name: str, run, inputs: dict, steps: dict, seed: int, **kw):
    """:func:`check_gradient` over a torch function: ``run(dict of tensors)`` -> scalar tensor; ``steps``:
    input name -> :class:`Input` (or its step h, an absolute one) for every input of ``inputs``."""
    checked = [s if isinstance(s, Input) else Input(n, h=s) for n, s in steps.items()]
    assert {i.name for i in checked} == set(inputs), "a step for every input"
    return check_gradient(name, TorchProblem(run, inputs), checked, seed=seed, **kw)


SOLVERS = {"semi_implicit": lambda m: inertia.SemiImplicitSolver(m), "xpbd": lambda m: inertia.XPBDSolver(m, 8)}
# Central-difference steps, absolute (positions, velocities, rest lengths [m, m/s], forces [N]) and relative
# (stiffnesses, masses, friction), chosen from the measured noise of each loss: where the rounding of the
# difference and its truncation are about equal. XPBD's loss is ~10x noisier (sigma ~1e-4 against ~1e-5: its
# iterated projections at |x| ~ 1 m), and the chain's motion is smooth far wider, so its steps are larger.
STEPS = {"semi_implicit": {"q0": 1e-3, "qd0": 3e-3, "particle_f": 3e-2, "spring_rest_length": 1e-3},
         "xpbd": {"q0": 1e-2, "qd0": 1e-2, "particle_f": 0.3, "spring_rest_length": 1e-2}}
RELATIVE_STEPS = {"semi_implicit": {"spring_stiffness": 3e-2, "particle_mass": 1e-2, "shape_material_ke": 1e-2,
                                    "shape_material_mu": 1e-2},
                  "xpbd": {"spring_stiffness": 0.1, "particle_mass": 0.1}}


# XPBD through an impact is left out here: its hard contact switches on within a step's iterations, a
# kink that central differences straddle (errors of 5-15 % on this bouncing chain); its contact
# gradients are checked on sliding contact in test_xpbd.py.
@pytest.mark.parametrize("contact, solver", [(False, "semi_implicit"), (True, "semi_implicit"), (False, "xpbd")])
def test_torch_gradients_match_central_differences(contact, solver):
    model = chain_model(contact)
    frames = 12 if contact else 30
    names = ("spring_stiffness", "spring_rest_length", "particle_mass")
    if contact:
        names += ("shape_material_ke", "shape_material_mu")
    # XPBD's velocities are position differences / dt, so float32 rounding of positions enters them
    # amplified by 1/dt: its central differences are clean only at large steps. One substep per frame: at 2
    # the loss's noise is 2-5x larger (measured with 2 to 16 iterations) and the stiffness and mass gradients
    # resolve only to 3.6-4.6 % of S at best (1.7 and 2.9 % here)
    substeps = 1 if solver == "xpbd" else 8
    ro = inertia.Rollout(model, SOLVERS[solver](model), frames, FRAME_DT, substeps, params=names, checkpoint_every=4)
    q0, qd0 = initial(model)
    inputs = {"q0": q0, "qd0": qd0, "particle_f": 0.2 * weights((frames, 3, 3), 7),
              "spring_stiffness": torch.tensor([200.0, 300.0]),
              "spring_rest_length": torch.tensor(model.spring_rest_length.numpy()),
              "particle_mass": torch.tensor([1.0, 0.5, 2.0])}
    if contact:
        inputs["shape_material_mu"] = torch.tensor([0.4])
        inputs["shape_material_ke"] = torch.tensor([2.0e3])
    # positions and velocities of every frame, in both solvers (XPBD's velocities are its noisiest outputs:
    # sigma 7e-5 .. 2e-4 with them, 1e-5 .. 3e-5 without, but the gradients grow as much)
    wq, wqd = weights((frames + 1, 3, 3), 11), weights((frames + 1, 3, 3), 12)

    def run(x):
        q, qd = ro(x["q0"], x["qd0"], x["particle_f"], {n: x[n] for n in names})
        return loss_of(q, qd, wq, wqd)

    if contact:  # the scene must actually touch the ground, or this is the no-contact test again
        with torch.no_grad():
            q, _ = ro(q0, qd0)
        assert float(q[:, 0, 2].min()) < 0.05
    steps = dict(STEPS[solver])
    steps.update({n: Input(n, h=h, relative=True) for n, h in RELATIVE_STEPS[solver].items() if n in inputs})
    check_torch_gradients(f"rollout {solver}{' contact' if contact else ''}", run, inputs, steps, seed=5)


# ------------------------------------------------------------------ aliasing and autograd semantics
def test_user_tensors_and_model_are_left_untouched():
    model = chain_model(False)
    ro = make_rollout(model, params=("spring_stiffness",))
    q0, qd0 = initial(model)
    q0.requires_grad_(True)
    ke = torch.tensor([200.0, 300.0], requires_grad=True)
    before = [q0.detach().clone(), qd0.clone(), ke.detach().clone()]
    model_ke = model.spring_stiffness.numpy().copy()
    q, qd = ro(q0, qd0, params={"spring_stiffness": ke * 2.0})
    loss_of(q, qd, weights(q.shape, 1), weights(qd.shape, 2)).backward()
    for a, b in zip(before, [q0, qd0, ke]):
        assert torch.equal(a, b.detach())
    assert q.data_ptr() not in (q0.data_ptr(), qd0.data_ptr())
    # the backward pass restores the parameter values it found in the model
    np.testing.assert_array_equal(model.spring_stiffness.numpy(), 2.0 * model_ke)


def test_only_inputs_that_require_grad_get_grad():
    model = chain_model(False)
    ro = make_rollout(model, params=("spring_stiffness", "particle_mass"))
    q0, qd0 = initial(model)
    qd0.requires_grad_(True)
    f = torch.zeros((12, 3, 3))
    ke = torch.tensor([200.0, 300.0], requires_grad=True)
    mass = torch.tensor([1.0, 0.5, 2.0])
    q, qd = ro(q0, qd0, f, {"spring_stiffness": ke, "particle_mass": mass})
    q[-1].sum().backward()
    assert qd0.grad is not None and ke.grad is not None and ke.grad.abs().sum() > 0
    assert q0.grad is None and f.grad is None and mass.grad is None


def test_retain_graph_twice_and_interleaved_graphs():
    model = chain_model(True)
    ro = make_rollout(model, params=("spring_stiffness",))
    q0, qd0 = initial(model)
    qd_a = qd0.clone().requires_grad_(True)
    ke_a = torch.tensor([200.0, 300.0], requires_grad=True)
    q, qd = ro(q0, qd_a, params={"spring_stiffness": ke_a})
    loss_a = loss_of(q, qd, weights(q.shape, 1), weights(qd.shape, 2))
    # a second graph, different inputs, run before the first one's backward
    qd_b = (qd0 * 1.5).requires_grad_(True)
    ke_b = torch.tensor([400.0, 100.0], requires_grad=True)
    q2, qd2 = ro(q0, qd_b, params={"spring_stiffness": ke_b})
    loss_b = loss_of(q2, qd2, weights(q.shape, 1), weights(qd.shape, 2))

    loss_a.backward(retain_graph=True)
    first = (qd_a.grad.clone(), ke_a.grad.clone())
    qd_a.grad, ke_a.grad = None, None
    loss_a.backward()
    assert torch.equal(first[0], qd_a.grad) and torch.equal(first[1], ke_a.grad)

    loss_b.backward()
    alone_qd, alone_ke = qd_b.grad.clone(), ke_b.grad.clone()
    qd_c = (qd0 * 1.5).requires_grad_(True)
    ke_c = torch.tensor([400.0, 100.0], requires_grad=True)
    q3, qd3 = ro(q0, qd_c, params={"spring_stiffness": ke_c})
    loss_of(q3, qd3, weights(q.shape, 1), weights(qd.shape, 2)).backward()
    assert torch.equal(alone_qd, qd_c.grad) and torch.equal(alone_ke, ke_c.grad)
    assert not torch.equal(first[0], alone_qd)


def test_a_graph_keeps_the_parameter_values_of_its_own_forward_pass():
    """Declared params not passed to a call are snapshotted: a later call that changes them cannot leak in."""
    model = chain_model(False)
    ro = make_rollout(model, params=("spring_stiffness",))
    q0, qd0 = initial(model)
    ro(q0, qd0, params={"spring_stiffness": torch.tensor([400.0, 600.0])})  # leaves 400, 600 in the model
    qd_b = qd0.clone().requires_grad_(True)
    q, qd = ro(q0, qd_b)  # simulates with 400, 600
    ro(q0, qd0, params={"spring_stiffness": torch.tensor([50.0, 50.0])})  # changes the model again
    loss_of(q, qd, weights(q.shape, 1), weights(qd.shape, 2)).backward()
    qd_ref = qd0.clone().requires_grad_(True)
    fresh = make_rollout(chain_model(False), params=("spring_stiffness",))
    q2, qd2 = fresh(q0, qd_ref, params={"spring_stiffness": torch.tensor([400.0, 600.0])})
    assert torch.equal(q, q2)
    loss_of(q2, qd2, weights(q.shape, 1), weights(qd.shape, 2)).backward()
    assert torch.equal(qd_b.grad, qd_ref.grad)


def test_changing_a_model_scalar_recaptures_the_graphs():
    model = chain_model(True)
    q0, qd0 = initial(model)
    captured, plain = make_rollout(model, frames=6), make_rollout(model, frames=6, capture=False)
    for _ in range(3):
        captured(q0, qd0)  # frames and segments captured
    model.particle_damping = 5.0  # a scalar the captured kernels froze
    a, b = qd0.clone().requires_grad_(True), qd0.clone().requires_grad_(True)
    qa, _ = captured(q0, a)
    qb, _ = plain(q0, b)
    assert torch.equal(qa, qb)
    qa[-1].sum().backward()
    qb[-1].sum().backward()
    assert torch.equal(a.grad, b.grad)
    # and a solver that checks every stage is never replayed from a graph (its checks read the device)
    checked = inertia.Rollout(model, inertia.SemiImplicitSolver(model, check_finite=True), 4, FRAME_DT, 2)
    for _ in range(2):
        checked(q0, qd0)
    assert not checked._graphs


def test_final_output_equals_last_trajectory_frame():
    model = chain_model(True)
    traj = make_rollout(model, checkpoint_every=3)
    final = make_rollout(model, checkpoint_every=3, output="final")
    q0, qd0 = initial(model)
    a, b = qd0.clone().requires_grad_(True), qd0.clone().requires_grad_(True)
    q, _ = traj(q0, a)
    qf, _ = final(q0, b)
    assert qf.shape == (3, 3) and torch.equal(q[-1], qf)
    q[-1].sum().backward()
    qf.sum().backward()
    assert torch.equal(a.grad, b.grad)


def test_closed_loop_steps_match_open_loop_rollout():
    """Chaining frames=1 steps through autograd gives the gradients of one T-frame rollout."""
    model = chain_model(True)
    frames = 6
    f = (0.3 * weights((frames, 3, 3), 4)).requires_grad_(True)
    q0, qd0 = initial(model)
    qd_open = qd0.clone().requires_grad_(True)
    q, qd = make_rollout(model, frames=frames, output="final")(q0, qd_open, f)
    loss_of(q, qd, weights((3, 3), 1), weights((3, 3), 2)).backward()
    g_open = (qd_open.grad.clone(), f.grad.clone())
    f.grad = None

    stepper = make_rollout(model, frames=1)
    qd_closed = qd0.clone().requires_grad_(True)
    qc, qdc = q0, qd_closed
    for t in range(frames):
        qc, qdc = stepper.step(qc, qdc, f[t])
    assert torch.equal(qc, q) and torch.equal(qdc, qd)
    loss_of(qc, qdc, weights((3, 3), 1), weights((3, 3), 2)).backward()
    assert torch.equal(g_open[0], qd_closed.grad) and torch.equal(g_open[1], f.grad)


def test_policy_network_trains_with_adam_in_closed_loop():
    """An MLP reads each frame's state and pushes the middle particle; Adam lowers the target loss."""
    torch.manual_seed(0)
    model = chain_model(False)
    stepper = make_rollout(model, frames=1, substeps=4)
    policy = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    opt = torch.optim.Adam(policy.parameters(), lr=0.05)  # forces = 10 N x policy output
    q0, qd0 = initial(model)
    target = q0[1] + torch.tensor([0.0, 0.0, 0.05])
    mask = torch.zeros((3, 1))
    mask[1] = 1.0
    losses = []
    for _ in range(15):
        q, qd = q0, qd0
        for _ in range(10):
            push = 10.0 * policy(torch.cat([q[1] - target, qd[1]]))
            q, qd = stepper.step(q, qd, mask * push)
        loss = ((q[1] - target) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in policy.parameters())
        assert sum(float(p.grad.abs().sum()) for p in policy.parameters()) > 0
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.05 * losses[0], losses


# ------------------------------------------------------------------ diagnostics
def test_grad_norms_are_recorded_per_frame():
    model = chain_model(False)
    ro = make_rollout(model, frames=10, checkpoint_every=3, record_grad_norms=True, output="final")
    q0, qd0 = initial(model)
    qd0.requires_grad_(True)
    wq = weights((3, 3), 1)
    q, _ = ro(q0, qd0)
    (q * wq).sum().backward()
    norms = ro.grad_norms
    assert norms.shape == (11, 2) and np.isfinite(norms).all()
    assert norms[10, 0] == pytest.approx(float(wq.norm()), rel=1e-6) and norms[10, 1] == 0.0
    assert norms[0, 1] == pytest.approx(float(qd0.grad.norm()), rel=1e-6)
    assert (norms[:10] > 0).all()


def test_check_finite_names_the_kernel_whose_adjoint_overflows():
    model = chain_model(False)
    q0, qd0 = initial(model)
    huge = torch.full((3, 3), 3.0e38)  # a finite seed that the spring adjoint (ke ~ 1e2) overflows
    plain = make_rollout(model, frames=4, output="final")
    qd = qd0.clone().requires_grad_(True)
    (plain(q0, qd)[0] * huge).sum().backward()
    assert not torch.isfinite(qd.grad).all()  # the failure is real ...
    checked = make_rollout(model, frames=4, output="final", check_finite=True)
    qd = qd0.clone().requires_grad_(True)
    with pytest.raises(inertia.NonFiniteError, match=r"kernel '.*' at frame 3, substep 7") as info:
        (checked(q0, qd)[0] * huge).sum().backward()
    assert info.value.step == 3 and info.value.stage  # ... and it is located in the last frame


def test_check_finite_reports_forward_blow_up_with_stage_and_step():
    model = chain_model(False)
    ro = make_rollout(model, frames=20, substeps=1, params=("spring_stiffness",), check_finite=True)
    q0, qd0 = initial(model)
    with pytest.raises(inertia.NonFiniteError) as info:
        ro(q0, qd0, params={"spring_stiffness": torch.tensor([1.0e9, 1.0e9])})
    assert info.value.stage and info.value.step >= 0


def test_a_blow_up_without_checks_warns_instead_of_returning_nan_silently():
    model = chain_model(False)
    ro = make_rollout(model, frames=20, substeps=1, params=("spring_stiffness",))
    q0, qd0 = initial(model)
    with pytest.warns(RuntimeWarning, match="check_finite=True"):
        q, _ = ro(q0, qd0, params={"spring_stiffness": torch.tensor([1.0e9, 1.0e9])})
    assert not torch.isfinite(q[-1]).all()
    assert model.torch_device == q.device


# ------------------------------------------------------------------ bad input
def test_bad_inputs_are_refused_clearly():
    model = chain_model(False)
    ro = make_rollout(model, params=("particle_mass",))
    q0, qd0 = initial(model)
    with pytest.raises(ValueError, match="shape"):
        ro(q0[:2], qd0)
    with pytest.raises(TypeError, match="floating-point"):
        ro(q0.to(torch.int32), qd0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        ro(q0.numpy(), qd0)
    with pytest.raises(ValueError, match="device"):
        ro(q0.to("meta"), qd0)
    bad = qd0.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ro(q0, bad)
    with pytest.raises(ValueError, match=r"must be >= 0.0 \[kg\]"):
        ro(q0, qd0, params={"particle_mass": torch.tensor([1.0, -0.5, 2.0])})
    with pytest.raises(ValueError, match="not declared"):
        ro(q0, qd0, params={"spring_stiffness": torch.tensor([1.0, 1.0])})
    with pytest.raises(ValueError, match="shape"):
        ro(q0, qd0, particle_f=torch.zeros((11, 3, 3)))
    with pytest.raises(ValueError, match="cannot differentiate"):
        make_rollout(model, params=("particle_colour",))
    with pytest.raises(ValueError, match="frame_dt"):
        inertia.Rollout(model, inertia.SemiImplicitSolver(model), 4, 0.0)
    with pytest.raises(ValueError, match="largest radius"):
        make_rollout(model, params=("particle_radius",))(q0, qd0, params={
            "particle_radius": torch.tensor([0.05, 0.2, 0.05])})
    with pytest.raises(ValueError, match="not both"):
        make_rollout(model, params=("particle_mass", "particle_inv_mass"))
    with pytest.raises(ValueError, match=r"particle_inv_mass.. must be >= 0.0"):
        make_rollout(model, params=("particle_inv_mass",))(q0, qd0, params={
            "particle_inv_mass": torch.tensor([1.0, -2.0, 0.5])})
    empty = inertia.ModelBuilder()
    empty.add_ground_plane()
    empty_model = empty.finalize(device=DEVICE)
    with pytest.raises(ValueError, match="particles"):
        inertia.Rollout(empty_model, inertia.SemiImplicitSolver(empty_model), 4, FRAME_DT)
    with pytest.raises(ValueError, match="another model"):
        inertia.Rollout(model, inertia.SemiImplicitSolver(chain_model(False)), 4, FRAME_DT)
    # float64 inputs are accepted (cast, differentiably) and get float64 gradients
    qd64 = qd0.double().requires_grad_(True)
    ro(q0, qd64)[0].sum().backward()
    assert qd64.grad.dtype == torch.float64 and torch.isfinite(qd64.grad).all()


# ------------------------------------------------------------------ tape guard
def test_ping_pong_states_under_a_tape_raise():
    model = chain_model(False)
    solver = inertia.SemiImplicitSolver(model)
    s0, s1 = model.state(), model.state()
    control = model.control()
    tape = wp.Tape()
    with pytest.raises(inertia.TapeReuseError, match="overwrite"):
        with tape:
            for _ in range(3):
                solver.step(s0, s1, control, None, 1e-3)
                s0, s1 = s1, s0
    # fresh states per step are fine, also on the same tape after reset()
    tape.reset()
    states = [model.state() for _ in range(4)]
    with tape:
        for t in range(3):
            solver.step(states[t], states[t + 1], control, None, 1e-3)
    # and with no tape recording, ping-pong is the normal loop
    for _ in range(3):
        solver.step(s0, s1, control, None, 1e-3)
        s0, s1 = s1, s0
    assert np.isfinite(s0.particle_q.numpy()).all()


def test_contact_overflow_in_any_substep_is_reported():
    b = inertia.ModelBuilder()
    for i in range(3):
        b.add_particle((0.3 * i, 0.0, 0.08), mass=1.0, radius=0.05)
    b.add_ground_plane()
    model = b.finalize(device=DEVICE)
    roomy = make_rollout(model, frames=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q, _ = roomy()
    assert float(q[:, :, 2].min()) < 0.05  # they reached the ground: three contacts at once
    tight = make_rollout(model, frames=10, soft_contact_max=1)
    with pytest.warns(RuntimeWarning, match="at least one step"):
        tight()
