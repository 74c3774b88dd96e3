"""inertia.Simulator (graph-replayed frames, checked once per frame) and the non-finite report of model.collide.

The reference for the Simulator is the README's plain loop on the same model: replay must give the same
bits. The non-finite case is a spring chain stepped at 1.6 times its stable step (a closed form) without the
solver's substeps: it blows up, and the engine says so before (the stability guard) and when (the non-finite report), never silently.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import inertia
from conftest import DEVICE


def scene():
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_cloth_grid(4, 4, pos=(0.0, 0.0, 0.6))
    b.add_shape_sphere(xform=((0.2, 0.2, 0.3), (0, 0, 0, 1)), radius=0.2)
    box = b.add_body(xform=((1.0, 0.0, 0.3), (0, 0, 0, 1)), angular_velocity=(0.5, 0.2, 0.0))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
    return b.finalize(device=DEVICE)


def plain_loop(model, solver, steps, dt):
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    for _ in range(steps):
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
    return s0


@pytest.mark.parametrize("substeps", [4, 5])
@pytest.mark.parametrize("solver", ["semi_implicit", "xpbd"])
def test_replayed_frames_are_bitwise_the_plain_loop(substeps, solver):
    make = {"semi_implicit": inertia.SemiImplicitSolver, "xpbd": inertia.XPBDSolver}[solver]
    model = scene()
    dt = 1.0 / 2400.0 if solver == "semi_implicit" else 1.0 / 600.0
    sim = inertia.Simulator(model, make(model), frame_dt=dt * substeps, substeps=substeps)
    sim.step(6)  # plain, plain again while warming the other parity, then captured and replayed
    assert len(sim._graphs) == (1 if substeps % 2 == 0 else 2)
    ref = plain_loop(model, make(model), 6 * substeps, dt)
    for name in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q"):
        assert np.array_equal(getattr(sim.state, name).numpy(), getattr(ref, name).numpy()), name
    assert sim.frame == 6 and sim.time == pytest.approx(6 * dt * substeps)


def test_a_changed_scalar_recaptures():
    model = scene()
    sim = inertia.Simulator(model, inertia.SemiImplicitSolver(model), frame_dt=1 / 600, substeps=4)
    sim.step(4)
    model.particle_damping = 2.0  # frozen into the graphs: they must be captured again
    sim.step(3)
    model.particle_damping = 0.0
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    solver = inertia.SemiImplicitSolver(model)
    for k in range(28):
        model.particle_damping = 2.0 if 16 <= k < 28 else 0.0
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, 1 / 2400)
        s0, s1 = s1, s0
    assert np.array_equal(sim.state.particle_q.numpy(), s0.particle_q.numpy())


def too_stiff_springs(dt=1.0 / 2400.0):
    """A chain of 10 g particles on springs whose stable step is dt / 1.6 (2 / sqrt(ke (2 / m)) = dt / 1.6), over
    the ground: the explicit solver run without substeps (``max_substeps=1``) must blow up, and say so."""
    m = 0.01
    ke = (2.0 / (dt / 1.6)) ** 2 * m / 2.0
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    ids = [b.add_particle((0.1 * i, 0.0, 0.5), mass=m, radius=0.02) for i in range(4)]
    for i in range(3):
        b.add_spring(ids[i], ids[i + 1], ke=ke, kd=0.0, rest_length=0.099)
    return b.finalize(device=DEVICE)


def test_a_plain_loop_that_goes_non_finite_is_told_before_and_when():
    model = too_stiff_springs()
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    solver = inertia.SemiImplicitSolver(model, max_substeps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(400):
            model.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, 1.0 / 2400.0)
            s0, s1 = s1, s0
    assert not np.isfinite(s0.particle_q.numpy()).all(), "the scene was meant to blow up"
    first = contacts.first_nonfinite()
    kinds = [w.category for w in caught]
    assert kinds.count(inertia.StabilityWarning) == 1 and kinds.count(inertia.NonFiniteWarning) == 1
    assert kinds.index(inertia.StabilityWarning) < kinds.index(inertia.NonFiniteWarning)  # told before the NaN
    told = caught[kinds.index(inertia.NonFiniteWarning)]
    assert told.filename == __file__ and f"collide() call {first}" in str(told.message)


def test_the_simulator_names_the_frame_and_the_stage():
    model = too_stiff_springs()
    sim = inertia.Simulator(model, inertia.SemiImplicitSolver(model, max_substeps=1), frame_dt=1.0 / 60.0,
                            substeps=40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim.step(10)
    told = [w for w in caught if issubclass(w.category, inertia.NonFiniteWarning)]
    assert len(told) == 1 and told[0].filename == __file__
    assert re.search(r"non-finite in frame \d+ \(t = [\d.]+ s\), substep \d+: first in stage '(springs|integrate)'",
                     str(told[0].message)), str(told[0].message)
    assert sim.nonfinite_frame is not None and sim.health()["nonfinite_frame"] == sim.nonfinite_frame


def test_overflow_is_reported_with_the_argument_to_raise():
    model = scene()
    sim = inertia.Simulator(model, inertia.SemiImplicitSolver(model), frame_dt=1 / 240, substeps=10,
                            contacts={"soft_contact_max": 2})
    with pytest.warns(RuntimeWarning, match="soft_contact_max"):
        sim.step(40)
    quiet = inertia.Simulator(model, inertia.SemiImplicitSolver(model), frame_dt=1 / 240, substeps=10,
                              contacts={"soft_contact_max": 2}, check_every=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing read back yet: no warning
        quiet.step(40)
    health = quiet.health()
    assert health["overflow"]["soft_contacts"] > 0 and health["peaks"]["soft_contact_max"] == 2


@pytest.mark.parametrize("kwargs, match", [({"frame_dt": 0.0}, "frame_dt"), ({"frame_dt": True}, "frame_dt"),
                                           ({"substeps": 0}, "substeps"), ({"check_every": 1.5}, "check_every")])
def test_bad_arguments_are_refused(kwargs, match):
    model = scene()
    with pytest.raises(ValueError, match=match):
        inertia.Simulator(model, inertia.SemiImplicitSolver(model), **kwargs)
    with pytest.raises(ValueError, match="another model"):
        inertia.Simulator(model, inertia.SemiImplicitSolver(scene()))
