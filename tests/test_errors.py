"""Bad input raises a clear error where it was written; NaNs are traced to the stage that made them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import inertia

DEVICE = "cpu"
DT = 1.0e-3


def two_particles(**kw):
    b = inertia.ModelBuilder(**kw)
    b.add_particle((0.0, 0.0, 1.0), mass=1.0, radius=0.05)
    b.add_particle((0.2, 0.0, 1.0), mass=1.0, radius=0.05)
    return b


def spring_model():
    b = two_particles()
    b.add_spring(0, 1, ke=100.0, kd=0.1)
    return b.finalize(device=DEVICE)


def sim_parts(model):
    return model.state(), model.state(), model.control(), model.contacts(), inertia.SemiImplicitSolver(model)


# --------------------------------------------------------------------------- builder: particles
@pytest.mark.parametrize("mass", [-1.0, -1e-9, float("nan"), float("inf")])
def test_bad_particle_mass(mass):
    b = inertia.ModelBuilder()
    with pytest.raises(ValueError, match=r"particle mass must be (finite|>= 0)"):
        b.add_particle((0.0, 0.0, 0.0), mass=mass)
    assert b.particle_count == 0, "a rejected particle must not be added"


def test_zero_mass_is_kinematic_not_an_error():
    b = inertia.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.0), mass=0.0)
    assert b.finalize(device=DEVICE).particle_inv_mass.numpy()[0] == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("what", ["position", "velocity"])
def test_nonfinite_particle_position_velocity(what, bad):
    b = inertia.ModelBuilder()
    pos, vel = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    (pos if what == "position" else vel)[1] = bad
    with pytest.raises(ValueError, match=f"particle {what} must be finite"):
        b.add_particle(pos, vel)


@pytest.mark.parametrize("value, exc, msg", [
    ((0.0, 1.0), ValueError, "must have 3 components"),
    ((0.0, 1.0, 2.0, 3.0), ValueError, "must have 3 components"),
    (1.0, TypeError, "must be a 3-vector"),
])
def test_particle_position_shape(value, exc, msg):
    with pytest.raises(exc, match=msg):
        inertia.ModelBuilder().add_particle(value)


def test_bad_particle_radius():
    with pytest.raises(ValueError, match="particle radius must be >= 0"):
        inertia.ModelBuilder().add_particle((0.0, 0.0, 0.0), radius=-0.1)


def test_nonfinite_grid_position_is_caught():
    with pytest.raises(ValueError, match="grid pos must be finite"):
        inertia.ModelBuilder().add_cloth_grid(2, 2, pos=(0.0, float("nan"), 0.0))
    with pytest.raises(ValueError, match="particle velocity must be finite"):
        inertia.ModelBuilder().add_soft_grid(1, 1, 1, vel=(float("inf"), 0.0, 0.0))


def test_nonfinite_position_edited_into_builder_is_caught_at_finalize():
    b = two_particles()
    b.particle_q[1] = (0.0, float("nan"), 0.0)
    with pytest.raises(ValueError, match="particle positions contain NaN or inf"):
        b.finalize(device=DEVICE)


# --------------------------------------------------------------------------- builder: elements
def element_builder():
    """Five particles: a tet (0..3) plus one more, all in general position."""
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)]:
        b.add_particle(p)
    return b


ADDERS = {
    "add_spring": (2, lambda b, idx: b.add_spring(*idx)),
    "add_triangle": (3, lambda b, idx: b.add_triangle(*idx)),
    "add_edge": (4, lambda b, idx: b.add_edge(*idx)),
    "add_tetrahedron": (4, lambda b, idx: b.add_tetrahedron(*idx)),
}


@pytest.mark.parametrize("adder", list(ADDERS))
@pytest.mark.parametrize("bad", [5, 100, -1])
def test_index_out_of_range(adder, bad):
    n, add = ADDERS[adder]
    b = element_builder()
    idx = [0, 1, 2, 3][:n]
    idx[-1] = bad
    with pytest.raises(IndexError, match=rf"{adder}: particle index {bad} out of range \(the builder has 5 particles\)"):
        add(b, idx)


@pytest.mark.parametrize("adder", list(ADDERS))
def test_repeated_indices(adder):
    n, add = ADDERS[adder]
    idx = [0, 1, 2, 3][:n]
    idx[-1] = idx[0]
    with pytest.raises(ValueError, match=rf"{adder}: repeated particle index"):
        add(element_builder(), idx)


@pytest.mark.parametrize("adder", list(ADDERS))
@pytest.mark.parametrize("bad, exc", [(1.5, TypeError), (True, TypeError)])
def test_non_integer_indices(adder, bad, exc):
    n, add = ADDERS[adder]
    idx = [0, 1, 2, 3][:n]
    idx[-1] = bad
    with pytest.raises(exc, match=r"is not an integer"):
        add(element_builder(), idx)


def test_numpy_integer_indices_are_accepted():
    b = element_builder()
    assert b.add_spring(np.int64(0), np.int32(4)) == 0
    assert b.spring_indices[0] == (0, 4) and all(type(i) is int for i in b.spring_indices[0])


def test_rejected_elements_leave_builder_unchanged():
    b = element_builder()
    with pytest.raises(IndexError):
        b.add_spring(0, 9)
    with pytest.raises(ValueError):
        b.add_triangle(0, 1, 1)
    assert b.spring_indices == [] and b.tri_indices == []


def test_degenerate_triangle():
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 0, 0)]:
        b.add_particle(p)
    with pytest.raises(ValueError, match=r"add_triangle\(0, 1, 2\): degenerate triangle \(rest area 0 m\^2\)"):
        b.add_triangle(0, 1, 2)  # collinear
    with pytest.raises(ValueError, match="degenerate triangle"):
        b.add_triangle(0, 1, 3)  # two coincident vertices
    b.particle_q[2] = (2.0, 1e-9, 0.0)  # nearly collinear (relative to the edge lengths)
    with pytest.raises(ValueError, match="degenerate triangle"):
        b.add_triangle(0, 1, 2)


def test_degenerate_tetrahedron():
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0.3, 0.3, 1e-10)]:
        b.add_particle(p)
    with pytest.raises(ValueError, match=r"add_tetrahedron\(0, 1, 2, 3\): degenerate tetrahedron \(rest volume"):
        b.add_tetrahedron(0, 1, 2, 3)  # coplanar
    with pytest.raises(ValueError, match="degenerate tetrahedron"):
        b.add_tetrahedron(0, 1, 2, 4)  # nearly coplanar


def test_tet_orientation_is_fixed_not_rejected():
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (0, 1, 0), (1, 0, 0), (0, 0, 1)]:  # negative orientation
        b.add_particle(p)
    b.add_tetrahedron(0, 1, 2, 3)
    assert b.tet_volumes[0] == pytest.approx(1.0 / 6.0)


def test_degenerate_edge_wing():
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0.5, 1, 0)]:
        b.add_particle(p)
    with pytest.raises(ValueError, match="a wing triangle is degenerate"):
        b.add_edge(3, 2, 0, 1)  # particle 2 lies on the edge (0, 1)


@pytest.mark.parametrize("call, msg", [
    (lambda b: b.add_spring(0, 1, ke=-1.0), "spring ke must be >= 0"),
    (lambda b: b.add_spring(0, 1, kd=float("nan")), "spring kd must be finite"),
    (lambda b: b.add_spring(0, 1, rest_length=-0.1), "spring rest_length must be >= 0"),
    (lambda b: b.add_triangle(0, 1, 2, tri_ke=-1.0), "tri_ke must be >= 0"),
    (lambda b: b.add_triangle(0, 1, 2, tri_ka=float("inf")), "tri_ka must be finite"),
    (lambda b: b.add_edge(0, 1, 2, 3, edge_ke=-1.0), "edge_ke must be >= 0"),
    (lambda b: b.add_edge(0, 1, 2, 3, rest_angle=float("nan")), "edge rest_angle must be finite"),
    (lambda b: b.add_tetrahedron(0, 1, 2, 3, k_mu=-1.0), "k_mu must be >= 0"),
    (lambda b: b.add_tetrahedron(0, 1, 2, 3, k_lambda=0.0), "k_lambda must be > 0"),
    (lambda b: b.add_tetrahedron(0, 1, 2, 3, k_damp=float("nan")), "k_damp must be finite"),
])
def test_bad_material_values(call, msg):
    with pytest.raises(ValueError, match=msg):
        call(element_builder())


@pytest.mark.parametrize("call, msg", [
    (lambda b: b.add_cloth_grid(0, 2), "dim_x must be a positive integer"),
    (lambda b: b.add_cloth_grid(2, 1.5), "dim_y must be a positive integer"),
    (lambda b: b.add_soft_grid(1, 1, -1), "dim_z must be a positive integer"),
    (lambda b: b.add_soft_grid(1, 1, 1, density=0.0), "density must be > 0"),
    (lambda b: b.add_particle_grid(1, True, 1), "dim_y must be a positive integer"),
])
def test_bad_grid_arguments(call, msg):
    with pytest.raises(ValueError, match=msg):
        call(inertia.ModelBuilder())


# --------------------------------------------------------------------------- builder: shapes, axes, gravity
@pytest.mark.parametrize("add", [
    lambda b: b.add_shape_sphere(body=0),
    lambda b: b.add_shape_box(body=2),
    lambda b: b.add_shape_capsule(body=0),
    lambda b: b.add_shape_mesh(body=1, vertices=[(0, 0, 0), (1, 0, 0), (0, 1, 0)], indices=[0, 1, 2]),
])
def test_shape_on_missing_body(add):
    b = inertia.ModelBuilder()
    with pytest.raises(IndexError, match=r"shape body \d does not exist: expected -1 \(the world\) \(0 defined\)"):
        add(b)
    b.add_body(mass=1.0, inertia=(1.0, 1.0, 1.0))
    with pytest.raises(IndexError, match=r"shape body 3 does not exist: expected -1 \(the world\) or 0..0"):
        b.add_shape_sphere(body=3)
    assert b.shape_type == []


@pytest.mark.parametrize("call, exc, msg", [
    (lambda b: b.add_shape_sphere(radius=0.0), ValueError, "sphere radius must be > 0"),
    (lambda b: b.add_shape_box(hx=-1.0), ValueError, "box half extent must be > 0"),
    (lambda b: b.add_shape_capsule(half_height=-0.1), ValueError, "capsule half_height must be >= 0"),
    (lambda b: b.add_shape_sphere(mu=-0.5), ValueError, "shape mu must be >= 0"),
    (lambda b: b.add_shape_sphere(xform=((0, 0, 0), (0, 0, 0, 0))), ValueError, "non-zero quaternion"),
    (lambda b: b.add_shape_sphere(xform=((0, float("nan"), 0), (0, 0, 0, 1))), ValueError,
     "xform position must be finite"),
    (lambda b: b.add_ground_plane(height=float("inf")), ValueError, "ground height must be finite"),
    (lambda b: b.add_shape_mesh(vertices=[(0, 0, 0), (1, 0, 0), (0, 1, 0)], indices=[0, 1, 3]), IndexError,
     r"mesh index out of range \[0, 3\)"),
    (lambda b: b.add_shape_mesh(vertices=[(0, 0, 0), (1, 0, 0), (0, 1, 0)], indices=[0, 1]), ValueError,
     "whole triangles"),
    (lambda b: b.add_shape_mesh(vertices=[(0, 0, 0), (1, 0, float("nan")), (0, 1, 0)], indices=[0, 1, 2]),
     ValueError, "mesh vertices contain NaN or inf"),
])
def test_bad_shapes(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(inertia.ModelBuilder())


@pytest.mark.parametrize("axis", ["w", "", "zz", 3, -1, True, 1.0, None])
def test_bad_up_axis(axis):
    with pytest.raises(ValueError, match=r"up_axis must be 'x', 'y', 'z' or 0..2, got"):
        inertia.ModelBuilder(up_axis=axis)


@pytest.mark.parametrize("axis, index", [("x", 0), ("Y", 1), ("z", 2), (2, 2)])
def test_good_up_axis(axis, index):
    b = inertia.ModelBuilder(up_axis=axis, gravity=-9.81)
    assert b.up_axis == index
    assert b.gravity[index] == -9.81 and sum(abs(g) for g in b.gravity) == 9.81


@pytest.mark.parametrize("gravity, msg", [
    (float("nan"), "gravity must be finite"),
    ((0.0, float("inf"), 0.0), "gravity must be finite"),
    ((0.0, -9.81), "gravity must have 3 components"),
])
def test_bad_gravity(gravity, msg):
    with pytest.raises(ValueError, match=msg):
        inertia.ModelBuilder(gravity=gravity)


# --------------------------------------------------------------------------- lame_from_young
def test_lame_from_young_values():
    mu, lam = inertia.lame_from_young(1.0e5, 0.3)
    assert mu == pytest.approx(1.0e5 / 2.6)
    assert lam == pytest.approx(1.0e5 * 0.3 / (1.3 * 0.4))
    # round trip: E = mu (3 lam + 2 mu) / (lam + mu), nu = lam / (2 (lam + mu))
    for E, nu in [(2.0e6, 0.45), (1.0e3, 0.0), (5.0e4, -0.5)]:
        mu, lam = inertia.lame_from_young(E, nu)
        assert mu * (3 * lam + 2 * mu) / (lam + mu) == pytest.approx(E)
        assert lam / (2 * (lam + mu)) == pytest.approx(nu, abs=1e-12)
    assert inertia.lame_from_young(1.0e3, 0.0)[1] == 0.0


@pytest.mark.parametrize("E, nu, msg", [
    (0.0, 0.3, "Young's modulus must be > 0"),
    (-1.0, 0.3, "Young's modulus must be > 0"),
    (float("nan"), 0.3, "Young's modulus must be > 0"),
    (1e5, 0.5, r"Poisson's ratio must lie in \(-1, 0.5\)"),
    (1e5, -1.0, r"Poisson's ratio must lie in \(-1, 0.5\)"),
    (1e5, 0.7, r"Poisson's ratio must lie in \(-1, 0.5\)"),
    (1e5, float("nan"), r"Poisson's ratio must lie in \(-1, 0.5\)"),
])
def test_lame_from_young_validation(E, nu, msg):
    with pytest.raises(ValueError, match=msg):
        inertia.lame_from_young(E, nu)


# --------------------------------------------------------------------------- solver input checks
@pytest.mark.parametrize("dt", [0.0, -1e-3, float("nan"), float("inf"), -float("inf"), "0.001", None, True])
def test_bad_dt(dt):
    model = spring_model()
    s0, s1, control, contacts, solver = sim_parts(model)
    with pytest.raises(ValueError, match=r"dt must be a finite number > 0 \(seconds\), got"):
        solver.step(s0, s1, control, contacts, dt)
    assert solver.step_count == 0


@pytest.mark.parametrize("dt", [1e-3, np.float32(1e-3), np.float64(1e-3)])
def test_numeric_dt_types_accepted(dt):
    model = spring_model()
    s0, s1, control, contacts, solver = sim_parts(model)
    solver.step(s0, s1, control, contacts, dt)
    assert solver.step_count == 1 and s1.particle_q.numpy()[0, 2] < 1.0


def test_state_in_is_state_out():
    model = spring_model()
    s0, _, control, contacts, solver = sim_parts(model)
    with pytest.raises(ValueError, match="state_in and state_out must be different State objects"):
        solver.step(s0, s0, control, contacts, DT)


class OnOtherDevice:
    """Stands in for a wp.array on a GPU (only a CPU here): the checks read ``.device`` and ``.shape``."""

    def __init__(self, like, device="cuda:0"):
        self.device, self.shape, self.dtype = device, like.shape, like.dtype


@pytest.mark.parametrize("where", ["state_in.particle_q", "state_in.particle_qd", "state_out.particle_q",
                                   "state_out.particle_f", "control.particle_f"])
def test_array_on_another_device(where):
    model = spring_model()
    s0, s1, control, contacts, solver = sim_parts(model)
    owner = {"state_in": s0, "state_out": s1, "control": control}[where.split(".")[0]]
    name = where.split(".")[1]
    setattr(owner, name, OnOtherDevice(getattr(owner, name)))
    with pytest.raises(ValueError, match=rf"{where} is on device cuda:0, but the model is on cpu"):
        solver.step(s0, s1, control, contacts, DT)


def test_contacts_on_another_device():
    model = spring_model()
    s0, s1, control, contacts, solver = sim_parts(model)
    contacts.device = "cuda:0"
    with pytest.raises(ValueError, match="contacts live on cuda:0, the model on cpu"):
        solver.step(s0, s1, control, contacts, DT)
    s0.particle_q = OnOtherDevice(s0.particle_q)
    with pytest.raises(ValueError, match=r"collide\(\): arrays on different devices"):
        model.collide(s0, model.contacts())


def test_state_from_another_model():
    model = spring_model()
    b = two_particles()
    b.add_particle((0.0, 0.5, 1.0))
    other = b.finalize(device=DEVICE)
    s0, s1, control, contacts, solver = sim_parts(model)
    with pytest.raises(ValueError, match=r"state_in.particle_q has 3 entries, the model has 2 particles"):
        solver.step(other.state(), s1, control, contacts, DT)
    with pytest.raises(ValueError, match=r"state_out.particle_q has 3 entries, the model has 2 particles"):
        solver.step(s0, other.state(), control, contacts, DT)
    with pytest.raises(ValueError, match=r"control.particle_f has 3 entries, the model has 2 particles"):
        solver.step(s0, s1, other.control(), contacts, DT)
    with pytest.raises(ValueError, match=r"collide\(\): state does not belong to this model"):
        model.collide(other.state(), contacts)


def test_state_missing_arrays():
    model = spring_model()
    _, s1, control, contacts, solver = sim_parts(model)
    with pytest.raises(ValueError, match=r"state_in.particle_q is missing; create states with model.state\(\)"):
        solver.step(inertia.State(), s1, control, contacts, DT)


def test_negative_contact_capacity():
    with pytest.raises(ValueError, match="contact capacities must be >= 0"):
        spring_model().contacts(soft_contact_max=-1)


# --------------------------------------------------------------------------- NonFiniteError
def run_steps(model, solver, states, control, contacts, start, count):
    for t in range(start, start + count):
        solver.step(states[t], states[t + 1], control, contacts, DT)


def test_nonfinite_error_names_stage_and_step():
    model = spring_model()
    solver = inertia.SemiImplicitSolver(model, check_finite=True)
    states = [model.state() for _ in range(11)]
    control, contacts = model.control(), model.contacts()
    run_steps(model, solver, states, control, contacts, 0, 5)  # healthy: no false alarm
    assert solver.step_count == 5

    model.spring_stiffness.assign(np.array([np.nan], dtype=np.float32))
    with pytest.raises(inertia.NonFiniteError, match=r"non-finite value in particle_f\[0\] .* after stage 'springs' "
                                                     r"of step 5") as info:
        run_steps(model, solver, states, control, contacts, 5, 5)
    err = info.value
    assert (err.stage, err.step, err.array, err.index) == ("springs", 5, "particle_f", 0)
    assert isinstance(err, FloatingPointError)


def test_nonfinite_without_check_finite_is_silent_but_check_catches_input():
    """Without check_finite a NaN just propagates (no host reads); with it, a NaN in the input is named 'input'."""
    model = spring_model()
    states = [model.state() for _ in range(3)]
    control, contacts = model.control(), model.contacts()
    q = states[0].particle_q.numpy()
    q[1, 2] = np.inf
    states[0].particle_q.assign(q)
    inertia.SemiImplicitSolver(model).step(states[0], states[1], control, contacts, DT)
    assert not np.isfinite(states[1].particle_q.numpy()).all()
    with pytest.raises(inertia.NonFiniteError, match=r"particle_q\[1\] .* after stage 'input' of step 0") as info:
        inertia.SemiImplicitSolver(model, check_finite=True).step(states[0], states[2], control, contacts, DT)
    assert (info.value.stage, info.value.array, info.value.index) == ("input", "particle_q", 1)


@pytest.mark.parametrize("stage, poison", [
    ("triangles", lambda m: m.tri_materials.assign(np.full((1, 3), np.nan, np.float32))),
    ("bending", lambda m: m.edge_bending_properties.assign(np.full((1, 2), np.nan, np.float32))),
    ("tetrahedra", lambda m: m.tet_materials.assign(np.full((1, 3), np.nan, np.float32))),
    ("control forces", None),
    ("integrate", lambda m: m.gravity.assign(np.array([[0.0, np.nan, 0.0]], np.float32))),
])
def test_nonfinite_error_stages(stage, poison):
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0), (0, 0, 0.1)]:
        b.add_particle(p, mass=0.1, radius=0.01)
    b.add_triangle(0, 1, 2)
    b.add_edge(0, 3, 1, 2)
    b.add_tetrahedron(0, 1, 2, 3)
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model, check_finite=True)
    states = [model.state() for _ in range(4)]
    control = model.control()
    run_steps(model, solver, states, control, None, 0, 2)
    if poison is None:
        control.particle_f.assign(np.array([[0, 0, 0], [0, 0, 0], [np.nan, 0, 0], [0, 0, 0]], np.float32))
    else:
        poison(model)
    with pytest.raises(inertia.NonFiniteError, match=f"after stage '{stage}' of step 2") as info:
        run_steps(model, solver, states, control, None, 2, 1)
    assert info.value.stage == stage and info.value.step == 2
    if poison is None:
        assert info.value.index == 2


def test_nonfinite_error_contact_stage():
    b = inertia.ModelBuilder()
    b.add_particle((0.0, 0.0, 0.04), mass=0.1, radius=0.05)
    b.add_ground_plane(ke=1.0e4, kd=10.0)  # absolute gains: the infinite ke below is what the contact uses
    model = b.finalize(device=DEVICE)
    solver = inertia.SemiImplicitSolver(model, check_finite=True)
    states = [model.state() for _ in range(3)]
    contacts = model.contacts()
    model.collide(states[0], contacts)
    solver.step(states[0], states[1], None, contacts, DT)
    model.shape_material_ke.assign(np.array([np.inf], np.float32))
    model.collide(states[1], contacts)
    with pytest.raises(inertia.NonFiniteError, match="after stage 'particle-shape contact' of step 1"):
        solver.step(states[1], states[2], None, contacts, DT)
    assert math.isinf(model.shape_material_ke.numpy()[0])


def test_thin_but_valid_elements_are_accepted():
    """The degeneracy threshold is relative and only rejects slivers float32 cannot represent."""
    b = inertia.ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (0.5, 1e-3, 0), (0.5, 0.3, 1e-3)]:
        b.add_particle(p)
    b.add_triangle(0, 1, 2)
    b.add_tetrahedron(0, 1, 2, 3)
    assert b.tri_areas[0] == pytest.approx(5e-4) and b.tet_volumes[0] > 0.0
