"""The solvers' per-step buffers: declared once, allocated on the step's output state, counted exactly.

Each solver declares what one step keeps beyond the State (``step_buffer_spec``); the same declaration
allocates the buffers (``state_out.step_buffers``) and counts their bytes (``state_buffer_bytes``, what
a Rollout's memory estimate uses), so the estimate is checked here against what was allocated.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE

import inertia

SOLVERS = {"semi_implicit": lambda m: inertia.SemiImplicitSolver(m),
           "xpbd": lambda m: inertia.XPBDSolver(m, iterations=3, velocity_iterations=2)}


def scene(requires_grad: bool):
    """Something of every kind a step keeps buffers for: springs, cloth, a soft block, bodies on the ground,
    a joint, shape-shape and particle-shape contacts."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_cloth_grid(2, 2, pos=(0.0, 0.0, 0.5))
    b.add_soft_grid(1, 1, 1, pos=(0.6, 0.0, 0.3), density=300.0)
    p0 = b.add_particle((1.0, 0.0, 0.5), mass=0.1, radius=0.02)
    p1 = b.add_particle((1.1, 0.0, 0.5), mass=0.1, radius=0.02)
    b.add_spring(p0, p1, 100.0, 1.0)
    box = b.add_body(xform=((-0.5, 0.0, 0.049), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05)
    link = b.add_body(xform=((-1.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_capsule(link, radius=0.02, half_height=0.1)
    b.add_joint_revolute(-1, link, parent_xform=((-1.0, 0.0, 1.2), (0, 0, 0, 1)),
                         child_xform=((0.0, 0.0, 0.2), (0, 0, 0, 1)), axis=(0, 1, 0))
    return b.finalize(device=DEVICE, requires_grad=requires_grad)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", list(SOLVERS))
def test_state_buffer_bytes_is_what_a_step_allocates(name, requires_grad):
    model = scene(requires_grad)
    solver = SOLVERS[name](model)
    a, b = model.state(), model.state()
    contacts = model.contacts()
    model.collide(a, contacts)
    assert b.step_buffers is None
    solver.step(a, b, None, contacts, 1e-3)
    buffers = b.step_buffers
    assert buffers is not None and a.step_buffers is None  # on the output state only
    allocated = sum(x.capacity + (x.grad.capacity if x.grad is not None else 0) for x in buffers.arrays())
    assert buffers.nbytes() == allocated
    assert solver.state_buffer_bytes(requires_grad, rigid_contact_max=contacts.rigid_contact_max) == allocated
    assert allocated > 0
    # every declared buffer is there, with a gradient exactly when the step is recorded and it is differentiable
    for decl in solver.step_buffer_spec.buffers:
        x = getattr(buffers, decl.name)
        assert x.dtype == decl.dtype and x.shape == solver.step_buffer_spec.shape(decl, buffers.sizes)
        assert (x.grad is not None) == (requires_grad and decl.grad)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_steady_loop_reuses_the_buffers_and_a_recorded_rollout_keeps_one_set_per_step(name):
    model = scene(True)
    solver = SOLVERS[name](model)
    contacts = model.contacts()
    s = [model.state(), model.state()]
    solver.prepare_state(s[1], contacts)
    prepared = s[1].step_buffers
    for t in range(4):  # ping-pong: every state is written again and keeps its buffers
        model.collide(s[t % 2], contacts)
        solver.step(s[t % 2], s[(t + 1) % 2], None, contacts, 1e-3)
    assert s[1].step_buffers is prepared and s[0].step_buffers is not prepared
    states = [model.state() for _ in range(3)]  # a recorded rollout: a new state per step
    tape = wp.Tape()
    with tape:
        for t in range(2):
            model.collide(states[t], contacts)
            solver.step(states[t], states[t + 1], None, contacts, 1e-3)
    assert states[1].step_buffers is not states[2].step_buffers
    # State.zero_grad zeroes the per-step buffers' gradients with the state's
    grads = [x.grad for x in states[2].step_buffers.arrays() if x.grad is not None]
    assert grads or name == "semi_implicit"  # its only buffer holds integer counts
    for g in grads:
        g.assign(np.ones_like(g.numpy()))
    states[2].zero_grad()
    assert all(not np.any(g.numpy()) for g in grads)


def test_buffers_follow_the_solver_settings_and_the_contact_capacity():
    model = scene(False)
    state_in, state_out = model.state(), model.state()
    small, large = model.contacts(rigid_contact_max=16), model.contacts(rigid_contact_max=64)
    inertia.XPBDSolver(model, iterations=2).step(state_in, state_out, None, small, 1e-3)
    first = state_out.step_buffers
    assert first.dx.shape[0] == 3 and first.contact_lambda.shape == (3, 16)
    inertia.XPBDSolver(model, iterations=5).step(state_in, state_out, None, large, 1e-3)
    assert state_out.step_buffers.dx.shape[0] == 6 and state_out.step_buffers.contact_lambda.shape == (6, 64)


def test_the_semi_implicit_step_counts_a_resting_boxs_four_corner_contacts():
    """The friction bound's mass split counts the contacts that push on each body: a box resting flat on the
    ground touches it with its 4 bottom corners (the box-plane pair's points are the 8 corners)."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body(xform=((0.0, 0.0, 0.0495), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05)
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model)
    a, c = model.state(), model.state()
    contacts = model.contacts()
    model.collide(a, contacts)
    solver.step(a, c, None, contacts, 1e-3)
    assert c.step_buffers.body_contact_counts.numpy().tolist() == [4]
