"""The FeatherstoneSolver's forward-only factor and solve (inertia.solvers.featherstone.linalg; CPU) and its
one-launch Euler step (fused_step.py) against its differentiable stage kernels: the same bits, with and
without contacts."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE
from test_featherstone import no_limits, tree_builder
from test_featherstone_models import a1_builder, kuka_builder


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_forward_only_factor_and_solve_are_bitwise_the_taped_kernels(integrator):
    """Without a tape the solver factors and solves with forward-only kernels (sums in local variables; an
    articulation no contact touches takes H0's factor for H's; the last factor, the solve and the velocity
    limits in one launch, dynamics.solve_forward_kernel), and its contacts' forward substitution
    z = L0^-1 J^T likewise (contacts.contact_jacobian_forward_kernel); on a tape, with the differentiable ones
    (atomic adds into scratch). Both must give the same bits, and so must ``check_finite=True`` (its checks
    between the stages read what they write): an A1 landing on its feet beside one still in the air (one
    articulation with contacts, one without), its joints' velocity limits lowered to 1.5 rad/s so that the
    landing holds some at them, 150 steps of 1 ms each way, with either integrator (RK4 factors the contacts'
    matrix and applies the limits with M(q_n))."""
    b = a1_builder(xform=((0.0, 0.0, 0.33), (0.0, 0.0, 0.0, 1.0)))
    a1_builder(b, xform=((1.5, 0.0, 2.0), (0.0, 0.0, 0.0, 1.0)))
    no_limits(b)  # the URDF's zero pose is outside the calves' limits
    b.joint_velocity_limit[:] = [min(v, 1.5) for v in b.joint_velocity_limit]  # the free bases' stay infinite
    b.add_ground_plane()
    model = b.finalize(device=DEVICE, requires_grad=True)  # the twins run on a CPU only (linalg's docstring)
    limit = model.joint_velocity_limit.numpy()
    runs = []
    for taped, checked in ((False, False), (True, False), (False, True)):
        solver = inertia.FeatherstoneSolver(model, integrator=integrator, check_finite=checked)
        contacts = model.contacts()
        states = [model.state() for _ in range(151)]  # a recorded step needs a State of its own
        touching, held = [], 0
        with wp.Tape() if taped else contextlib.nullcontext():
            for i in range(150):
                model.collide(states[i], contacts)
                touching.append(int(contacts.rigid_contact_count.numpy()[0]))
                solver.step(states[i], states[i + 1], None, contacts, 1e-3)
                held = max(held, int(np.isclose(np.abs(states[i + 1].joint_qd.numpy()), limit).sum()))
        runs.append((states[-1].joint_q.numpy().copy(), states[-1].joint_qd.numpy().copy(), touching))
        heights = states[-1].body_q.numpy()[:, 2]
        assert held >= 1, (taped, checked)  # some joint at its velocity limit
    assert max(runs[0][2]) > 0  # the first robot's feet touched the ground
    assert heights[model.body_count // 2:].min() > 1.5  # the second never came near it
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0][0], other[0])
        np.testing.assert_array_equal(runs[0][1], other[1])


@pytest.mark.filterwarnings("ignore::inertia.StabilityWarning")  # the zero pose is outside the calves' limits
def test_forward_only_velocity_limits_are_bitwise_the_taped_kernels():
    """The velocity limits' impulses: without a tape in the step's forward-only solve launch
    (dynamics.solve_forward_kernel: after the step's own factor and solve, the limits' system, factor and solve,
    sums in locals), on a tape the differentiable kernels. The same bits through the
    A1's knee snap from its zero pose (thighs and knees held at their velocity limits for 30 steps), with
    both integrators (RK4's impulses solve with M(q_n) at the step's end)."""
    model = a1_builder().finalize(device=DEVICE, requires_grad=True)
    limit = model.joint_velocity_limit.numpy()
    for integrator in ("euler", "rk4"):
        runs = []
        for taped in (False, True):
            solver = inertia.FeatherstoneSolver(model, integrator=integrator)
            states = [model.state() for _ in range(31)]
            held = 0
            with wp.Tape() if taped else contextlib.nullcontext():
                for i in range(30):
                    solver.step(states[i], states[i + 1], None, None, 1e-3)
                    held = max(held, int(np.isclose(np.abs(states[i + 1].joint_qd.numpy()), limit).sum()))
            runs.append((states[-1].joint_q.numpy().copy(), states[-1].joint_qd.numpy().copy()))
            assert held >= 4, integrator  # the knees at least
        np.testing.assert_array_equal(runs[0][0], runs[1][0])
        np.testing.assert_array_equal(runs[0][1], runs[1][1])


def test_contact_overflow_stops_at_the_capacity_with_the_same_bits():
    """More contacts found than the list holds (an A1 landing on four feet, two slots): on a CPU one thread
    loops over the stored contacts (``stored_contact_count``: the count capped at the capacity), so nothing
    reads past the list; the overflow is reported by ``model.collide``, and the forward-only and taped kernels
    still give the same bits."""
    b = a1_builder(xform=((0.0, 0.0, 0.33), (0.0, 0.0, 0.0, 1.0)))
    no_limits(b)  # the URDF's zero pose is outside the calves' limits
    b.add_ground_plane()
    model = b.finalize(device=DEVICE, requires_grad=True)
    runs = []
    for taped in (False, True):
        solver = inertia.FeatherstoneSolver(model)
        contacts = model.contacts(rigid_contact_max=2)
        states = [model.state() for _ in range(121)]
        found = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with wp.Tape() if taped else contextlib.nullcontext():
                for i in range(120):
                    model.collide(states[i], contacts)
                    found.append(int(contacts.rigid_contact_count.numpy()[0]))
                    solver.step(states[i], states[i + 1], None, contacts, 1e-3)
        assert max(found) > 2  # the count went past the capacity ...
        assert any("overflow" in str(w.message).lower() for w in caught)  # ... and collide said so
        q = states[-1].joint_q.numpy()
        assert np.isfinite(q).all()
        runs.append((q.copy(), states[-1].joint_qd.numpy().copy()))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


@pytest.mark.filterwarnings("ignore::inertia.StabilityWarning")  # the A1's zero pose is outside the calves' limits
def test_one_launch_euler_step_is_bitwise_the_stage_kernels():
    """Off the tape on a CPU, a contact-free Euler step is one launch per articulation (fused_step.py: gather,
    kinematics, joint forces, composite, factor, solve, velocity limits, advance, outputs). It must give the
    bits of the stage kernels, off the tape and on it: three articulations of every joint type (the Kuka's
    fixed base and revolute joints with drives, damping, friction, effort and velocity limits; the A1's free
    base, snapping its knees back into their limits; a free base with ball, prismatic, revolute and fixed
    joints), with drive targets, joint forces and body wrenches, 120 steps of 1 ms each way. Every state array
    and every array of the step's StepData that both paths write is compared."""
    b = kuka_builder()
    a1_builder(b, xform=((2.0, 0.0, 3.0), (0.0, 0.0, 0.0, 1.0)))
    b.add_builder(tree_builder(), xform=((-2.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    b.joint_friction[:] = [0.05] * len(b.joint_friction)
    b.joint_effort_limit[:] = [min(e, 40.0) for e in b.joint_effort_limit]
    b.joint_velocity_limit[:] = [min(v, 2.0) for v in b.joint_velocity_limit]  # the free bases' stay infinite
    model = b.finalize(device=DEVICE, requires_grad=True)
    rng = np.random.default_rng(11)
    control = model.control()
    control.joint_target_pos.assign(rng.uniform(-0.5, 0.5, model.joint_dof_count).astype(np.float32))
    control.joint_f.assign(rng.uniform(-1.0, 1.0, model.joint_dof_count).astype(np.float32))
    control.body_f.assign(rng.uniform(-2.0, 2.0, (model.body_count, 6)).astype(np.float32))
    ke = model.joint_target_ke.numpy()
    ke[:7] = 300.0  # the Kuka's drives
    model.joint_target_ke.assign(ke)
    limit = model.joint_velocity_limit.numpy()
    runs = []
    for mode in ("fused", "stages", "taped"):
        solver = inertia.FeatherstoneSolver(model)
        solver.replay.enabled = False  # every step through step()'s Python, to count the fused ones
        fused = []
        if mode == "stages":
            solver._fused_step_applies = lambda data: False
        else:
            real = solver._fused_step
            solver._fused_step = lambda *args: (fused.append(1), real(*args))
        # a recorded step needs a State of its own; off the tape two states take turns, so every step writes
        # over the buffers of the step before last (the sums must start from zero every time)
        states = [model.state() for _ in range(121 if mode == "taped" else 2)]
        held = 0
        with wp.Tape() if mode == "taped" else contextlib.nullcontext():
            for i in range(120):
                src, dst = (states[i], states[i + 1]) if mode == "taped" else (states[i % 2], states[(i + 1) % 2])
                solver.step(src, dst, control, None, 1e-3)
                held = max(held, int(np.isclose(np.abs(dst.joint_qd.numpy()), limit).sum()))
        assert len(fused) == (120 if mode == "fused" else 0), mode
        assert held >= 1, mode  # some joint held at its velocity limit
        data = dst.step_buffers
        arrays = {n: getattr(dst, n) for n in ("joint_q", "joint_qd", "body_q", "body_qd")}
        arrays.update({n: getattr(data, n) for n in ("q", "qd", "q_next", "qd_next", "twist")})
        # every array a stage writes on and off the tape (not the taped kernels' own scratch: partial sums,
        # the limits' coupling and right-hand side, which the forward-only functions keep in locals)
        arrays.update({n: getattr(data.stages[0], n) for n in (
            "art_ref", "body_X", "body_I", "body_Ic", "body_v", "body_a", "body_fb", "body_fsub", "dof_S", "tau_joint",
            "diag", "bias", "tau_contact", "H0", "L0", "y", "dqd", "limit_H", "limit_L", "limit_y", "limit_dqd")})
        runs.append({n: a.numpy().copy() for n, a in arrays.items()})
    for other in runs[1:]:
        for name, x in runs[0].items():
            np.testing.assert_array_equal(x, other[name], err_msg=name)
