"""inertia.Simulator (graph-replayed frames, checked once per frame) and the non-finite report of model.collide.

The reference for the Simulator is the README's plain loop on the same model: replay must give the same
bits. The non-finite cases are the fuzzer's minimal scenes (issue 17): a light cloth with strong membrane
damping at dt = 1/2400 s goes NaN at step 28 and used to do so silently.
"""

from __future__ import annotations

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


def light_damped_cloth():
    """The fuzzer's minimal case: 2x2 cloth of 10 g particles with tri_kd 20 over the ground."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_cloth_grid(2, 2, pos=(0.0, 0.0, 0.3), mass=0.01, tri_kd=20.0)
    return b.finalize(device=DEVICE)


def test_a_plain_loop_that_goes_non_finite_is_told_once():
    model = light_damped_cloth()
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    solver = inertia.SemiImplicitSolver(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(60):
            model.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, 1.0 / 2400.0)
            s0, s1 = s1, s0
    told = [w for w in caught if issubclass(w.category, inertia.NonFiniteWarning)]
    assert len(told) == 1 and told[0].filename == __file__
    assert "collide() call 28" in str(told[0].message)  # the step that produced it: 28 states after the first
    assert not np.isfinite(s0.particle_q.numpy()).all()
    assert contacts.first_nonfinite() == 28


def test_the_simulator_names_the_frame_and_the_stage():
    model = light_damped_cloth()
    sim = inertia.Simulator(model, inertia.SemiImplicitSolver(model), frame_dt=1.0 / 60.0, substeps=40)
    with pytest.warns(inertia.NonFiniteWarning, match=r"non-finite in frame 0 \(t = 0 s\), substep 27: first in "
                                                      r"stage 'triangles'") as caught:
        sim.step(3)
    assert len([w for w in caught if issubclass(w.category, inertia.NonFiniteWarning)]) == 1
    assert caught[0].filename == __file__
    assert sim.health()["nonfinite_frame"] == 0 and sim.nonfinite_frame == 0


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
