"""Call replay (inertia.replay): a plain ``collide`` + ``step`` loop runs from graphs it captured itself.

The reference is the same loop with replay off (``solver.replay.enabled = False``,
``model.collision.replay.enabled = False``): every kernel launched one by one from Python. Replay must
give the same bits, honour every change a user makes between steps (array contents, a replaced array, a
Python scalar of the model or solver, another dt), leave recorded tapes alone, and keep its warnings
pointing at the user's line.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE

I = (0.0, 0.0, 0.0, 1.0)


def chain(links=4):
    """Revolute links with drives, over the ground: joints, drives, shape-shape contact."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    prev = -1
    for i in range(links):
        link = b.add_body(xform=((0.2 * i + 0.1, 0.0, 0.5), I))
        b.add_shape_box(link, hx=0.1, hy=0.02, hz=0.02, density=500.0)
        b.add_joint_revolute(prev, link, parent_xform=(((0.0, 0.0, 0.5) if prev < 0 else (0.1, 0.0, 0.0)), I),
                             child_xform=((-0.1, 0.0, 0.0), I), axis=(0.0, 1.0, 0.0), target_ke=5.0, target_kd=0.5)
        prev = link
    return b.finalize(device=DEVICE)


def cloth_on_box():
    """Cloth with self-contact falling on a box: particle-shape and particle-particle contact, two-way."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    box = b.add_body(xform=((0.0, 0.0, 0.1), I))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=300.0)
    b.add_cloth_grid(6, 6, pos=(-0.15, -0.15, 0.3), cell_x=0.05, cell_y=0.05, mass=0.02)
    return b.finalize(device=DEVICE)


def pile():
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    for k in range(4):
        body = b.add_body(xform=((0.01 * k, 0.0, 0.11 + 0.21 * k), I))
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, density=500.0)
    return b.finalize(device=DEVICE)


SOLVERS = {"semi_implicit": lambda m: inertia.SemiImplicitSolver(m),
           "xpbd": lambda m: inertia.XPBDSolver(m, iterations=4),
           "featherstone": lambda m: inertia.FeatherstoneSolver(m)}
SCENES = {"chain": chain, "cloth on a box": cloth_on_box, "pile": pile}


def loop(model, solver, steps, dt, replay=True, between=None):
    """The README's loop; ``between(k, model, solver, states, control)`` runs before step k."""
    solver.replay.enabled = model.collision.replay.enabled = replay
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    for k in range(steps):
        if between is not None:
            between(k, model, solver, (s0, s1), control)
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
    return s0


def same_bits(a, b):
    for name in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q", "joint_qd"):
        x, y = getattr(a, name), getattr(b, name)
        if x is not None and x.size:
            assert np.array_equal(x.numpy(), y.numpy()), name


@pytest.mark.parametrize("scene", list(SCENES))
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_replayed_loop_is_bitwise_the_plain_loop(scene, solver):
    if solver == "featherstone" and scene != "chain":
        pytest.skip("the FeatherstoneSolver's scenes are articulations")
    steps, dt = 40, 1.0e-3
    plain = loop(SCENES[scene](), SOLVERS[solver](SCENES[scene]()), 0, dt)  # noqa: F841  (kernels loaded)
    model = SCENES[scene]()
    ref = loop(model, SOLVERS[solver](model), steps, dt, replay=False)
    model2 = SCENES[scene]()
    s = SOLVERS[solver](model2)
    out = loop(model2, s, steps, dt)
    same_bits(ref, out)
    # two signatures (s0 -> s1, s1 -> s0), each run plainly once, captured once, then replayed
    assert s.replay.counts["replayed"] >= steps - 6, s.replay.counts
    assert model2.collision.replay.counts["replayed"] >= steps - 6, model2.collision.replay.counts
    assert s.step_count == steps


def test_changes_between_steps_are_honoured():
    """Drive targets written in place, a replaced velocity array and a replaced model array, a model scalar and
    a solver scalar changed mid-loop, and a second step size: replay must see each (it captures anew where a
    graph froze a value)."""
    def between(k, model, solver, states, control):
        control.joint_target_pos.assign(np.full(model.joint_dof_count, 0.3 * np.sin(0.2 * k), dtype=np.float32))
        if k == 12:
            qd = states[0].body_qd.numpy()
            qd[:, 2] += 0.5
            states[0].body_qd = wp.array(qd, dtype=wp.spatial_vector, device=model.device)
        model.joint_attach_kd = 10.0 if 20 <= k < 30 else 0.0
        if k == 16:  # a model array replaced (not written in place): stiffer drives from here on
            model.joint_target_ke = wp.array(4.0 * model.joint_target_ke.numpy(), dtype=float, device=model.device)
        solver.contact_relaxation = 1.5 if k >= 25 else 1.8

    def run(replay):
        model = chain()
        solver = inertia.SemiImplicitSolver(model)
        out = loop(model, solver, 40, 1.0e-3, replay, between)
        return out, solver

    ref, _ = run(False)
    out, solver = run(True)
    same_bits(ref, out)
    assert solver.replay.counts["replayed"] > 0

    # another dt every few steps: each step size is its own signature
    model_a, model_b = chain(), chain()
    a, b = inertia.SemiImplicitSolver(model_a), inertia.SemiImplicitSolver(model_b)
    outs = []
    for model, solver, replay in ((model_a, a, False), (model_b, b, True)):
        solver.replay.enabled = model.collision.replay.enabled = replay
        s0, s1, contacts = model.state(), model.state(), model.contacts()
        for k in range(30):
            model.collide(s0, contacts)
            solver.step(s0, s1, None, contacts, 1.0e-3 if (k // 5) % 2 else 5.0e-4)
            s0, s1 = s1, s0
        outs.append(s0)
    same_bits(*outs)
    assert b.replay.counts["replayed"] > 0  # the once-per-dt warning's bookkeeping is not in the signature


def test_a_tape_after_replayed_steps_records_every_launch():
    """Steps replayed from graphs, then a recorded step: the tape must see its launches (replay stays off
    while a tape records), so the gradient equals the one with replay off."""
    grads = []
    for replay in (False, True):
        model = cloth_on_box()
        solver = inertia.SemiImplicitSolver(model)
        solver.replay.enabled = model.collision.replay.enabled = replay
        contacts = model.contacts()
        s0, s1 = model.state(), model.state()
        for _ in range(10):  # warm: these replay when enabled
            model.collide(s0, contacts)
            solver.step(s0, s1, None, contacts, 1.0e-3)
            s0, s1 = s1, s0
        a, b = model.state(requires_grad=True), model.state(requires_grad=True)
        a.assign(s0)
        tape = wp.Tape()
        with tape:
            model.collide(a, contacts)
            solver.step(a, b, None, contacts, 1.0e-3)
        loss_grad = wp.array(np.ones((model.particle_count, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
        tape.backward(grads={b.particle_q: loss_grad})
        grads.append(a.particle_qd.grad.numpy().copy())
        assert np.abs(grads[-1]).max() > 0.0
    assert np.array_equal(grads[0], grads[1])


def test_warnings_name_the_users_line_when_steps_replay():
    """The first step beyond the stable step warns (it runs plainly); an overflowing contact buffer warns from
    every collide, replayed or not: both name this file."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_cloth_grid(4, 4, pos=(0.0, 0.0, 0.02), cell_x=0.05, cell_y=0.05, mass=0.001, tri_ke=5.0e3, tri_ka=5.0e3)
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model)
    contacts = model.contacts(soft_contact_max=2)
    s0, s1 = model.state(), model.state()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(8):
            model.collide(s0, contacts)
            solver.step(s0, s1, None, contacts, 4.0 * solver.stable_dt)
            s0, s1 = s1, s0
    assert model.collision.replay.counts["replayed"] > 0 and solver.replay.counts["replayed"] > 0
    stability = [w for w in caught if issubclass(w.category, inertia.StabilityWarning)]
    overflow = [w for w in caught if "soft_contact_max" in str(w.message)]
    assert len(stability) == 1 and stability[0].filename == __file__
    assert len(overflow) == 8 and all(w.filename == __file__ for w in overflow)


def test_a_signature_changes_exactly_when_an_attribute_does():
    """The O(1) signature of Model / State / Control / Contacts / solvers: an assignment of another object or
    another scalar value changes it; the same value, or a counter the step bumps (step_count), does not."""
    from inertia.signed import signature

    model = chain(1)
    solver = inertia.SemiImplicitSolver(model)
    state = model.state()
    first = signature(model, solver, state)
    model.joint_attach_kd = float(model.joint_attach_kd)  # the same value
    solver.step_count += 5
    state.particle_q = state.particle_q
    assert signature(model, solver, state) == first
    for change in (lambda: setattr(model, "joint_attach_kd", model.joint_attach_kd + 1.0),
                   lambda: setattr(state, "body_qd", wp.clone(state.body_qd)),
                   lambda: setattr(solver, "contact_iterations", 3),
                   lambda: delattr(state, "step_buffers") if "step_buffers" in vars(state) else
                   setattr(state, "step_buffers", object())):
        before = signature(model, solver, state)
        change()
        assert signature(model, solver, state) != before


def test_new_states_every_step_run_plainly_and_free_what_they_leave():
    """A loop that makes a new output State every step: no call is ever replayed (each signature is new) and
    none is captured on its first use, even when a new State inherits a dead one's identity (a capture
    would allocate its buffers inside the graph); the results are the plain loop's."""
    outs = []
    for replay in (False, True):
        model = cloth_on_box()
        solver = inertia.XPBDSolver(model, iterations=4)
        solver.replay.enabled = model.collision.replay.enabled = replay
        s0, contacts = model.state(), model.contacts()
        for _ in range(30):
            s1 = model.state()
            model.collide(s0, contacts)
            solver.step(s0, s1, None, contacts, 1.0e-3)
            s0 = s1
        outs.append(s0)
        if replay:
            assert solver.replay.counts["captured"] == 0, solver.replay.counts
    same_bits(*outs)


def test_a_finished_simulation_is_freed_without_the_cycle_collector():
    """Replays hold the states and contacts of their graphs, never their owner (model, solver): dropping the
    loop's objects frees them by reference counting alone (a cycle would wait for gc, and on a GPU its
    memory does not count towards gc's thresholds)."""
    import gc
    import weakref

    def run():
        model = chain(2)
        solver = inertia.SemiImplicitSolver(model)
        loop(model, solver, 10, 1.0e-3)
        assert solver.replay.counts["replayed"] > 0
        return weakref.ref(model), weakref.ref(solver)

    gc.collect()
    gc.disable()
    try:
        refs = run()
        assert all(r() is None for r in refs)
    finally:
        gc.enable()


def test_more_signatures_in_rotation_than_graphs_stop_capturing():
    """Twelve states in a ring: twelve signatures for eight graphs, each evicted before it replays. After a few
    such wasted captures calls run plainly (a capture per step costs more than a plain call)."""
    model = cloth_on_box()
    solver = inertia.SemiImplicitSolver(model)
    ring, contacts = [model.state() for _ in range(12)], model.contacts()
    for k in range(96):
        a, b = ring[k % 12], ring[(k + 1) % 12]
        model.collide(a, contacts)
        solver.step(a, b, None, contacts, 1.0e-3)
    counts = solver.replay.counts
    assert counts["wasted"] == solver.replay.max_wasted
    assert counts["captured"] <= solver.replay.max_graphs + solver.replay.max_wasted, counts
    assert counts["plain"] >= 96 - counts["captured"] - counts["replayed"] - 1


def test_settings_edited_between_steps_take_effect_at_the_next_step():
    """max_substeps edited after steps at a dt beyond the stable step: the next step uses the new count (it
    did only once dt changed); the XPBDSolver's per-element scales cannot be edited in place (a replayed
    graph would not see it): the mapping is read-only."""
    b = inertia.ModelBuilder(gravity=0.0)
    p = [b.add_particle((0.1 * i, 0.0, 0.0), vel=(0.0, 0.0, 0.2 * i), mass=0.01) for i in range(2)]
    b.add_spring(p[0], p[1], ke=1.0e3, kd=0.0)
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model)
    dt = 3.0 * solver.stable_dt
    s0, s1 = model.state(), model.state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inertia.StabilityWarning)
        for _ in range(3):
            solver.step(s0, s1, None, None, dt)
        assert len(s1.substep_states) == 3
        solver.max_substeps = 2
        solver.step(s0, s1, None, None, dt)
        assert len(s1.substep_states) == solver.substeps(dt) - 1 == 1
    xpbd = inertia.XPBDSolver(cloth_on_box())
    with pytest.raises(TypeError):
        xpbd.scales["tri"] = xpbd.scales["spring"]


def test_an_uncaptured_simulator_makes_no_graphs():
    """Simulator(capture=False) (for debugging) runs every call plainly: no graph inside either."""
    model = chain(2)
    solver = inertia.SemiImplicitSolver(model)
    sim = inertia.Simulator(model, solver, frame_dt=1.0 / 60.0, substeps=4, capture=False)
    sim.step(5)
    assert solver.replay.counts["captured"] == solver.replay.counts["replayed"] == 0
    assert model.collision.replay.counts["captured"] == 0
    assert solver.replay.enabled and model.collision.replay.enabled  # restored after each frame
