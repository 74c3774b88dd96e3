"""Bad input is refused where it is written, naming the argument and the value (one test per class of hole).

Where the declarations in inertia.schema carry a valid range, the tests iterate them: a field declared
later with a range is checked here by construction.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import warp as wp

import inertia
from conftest import DEVICE
from inertia import schema
from inertia.rollout import params as registry
from test_schema import every_kind_of_entity

BIG = 1.0e39  # finite in float64, inf in the model's float32 arrays


@pytest.mark.parametrize("call, name", [
    (lambda b: b.add_spring(b.add_particle((0, 0, 0)), b.add_particle((1, 0, 0)), ke=BIG), "spring ke"),
    (lambda b: b.add_spring(b.add_particle((0, 0, 0)), b.add_particle((1, 0, 0)), kd=BIG), "spring kd"),
    (lambda b: b.add_particle((0, 0, 0), radius=BIG), "particle radius"),
    (lambda b: b.add_particle((0, 0, BIG)), "particle position"),
    (lambda b: b.add_body(xform=((0.0, 0.0, BIG), (0, 0, 0, 1))), "body xform position"),
    (lambda b: b.add_body(mass=1.0, inertia=(BIG, 1.0, 1.0)), "body inertia"),
    (lambda b: inertia.ModelBuilder(gravity=-BIG), "gravity"),
    (lambda b: b.add_joint_revolute(-1, b.add_body(mass=1.0, inertia=(1, 1, 1)), limit_lower=-BIG), "limits"),
    (lambda b: b.add_shape_sphere(radius=1.0, ke=BIG), "shape ke"),
    (lambda b: b.add_cloth_grid(2, 2, tri_ke=BIG), "tri_ke"),
])
def test_values_beyond_float32_are_refused(call, name):
    with pytest.raises(ValueError, match=rf"{name}.*(float32|finite)"):
        call(inertia.ModelBuilder())


@pytest.mark.parametrize("field", [f for f in schema.MODEL_SCALARS if f.minimum is not None and f.dtype is float],
                         ids=lambda f: f.name)
@pytest.mark.parametrize("bad", [-0.5, math.nan, BIG])
def test_builder_scalars_are_checked_at_finalize(field, bad):
    b = inertia.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0))
    setattr(b, field.name, bad)
    with pytest.raises(ValueError, match=rf"builder\.{field.name} must be"):
        b.finalize(device=DEVICE)


def test_a_negative_friction_coefficient_no_longer_accelerates_a_particle():
    b = inertia.ModelBuilder()
    b.particle_mu = -0.5  # the fuzzer's case: a sliding particle sped up
    b.add_particle((0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match=r"builder\.particle_mu must be >= 0.0, got -0.5"):
        b.finalize(device=DEVICE)


@pytest.mark.parametrize("name", [n for n, p in registry.PARAMS.items() if schema.MODEL.get(n)
                                  and schema.MODEL[n].minimum is not None])
def test_rollout_params_outside_the_builders_range_are_refused(name):
    model = every_kind_of_entity().finalize(device=DEVICE, requires_grad=True)
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 1, 1.0 / 60.0, 2, params=(name,))
    value = wp.to_torch(getattr(model, name)).detach().clone()
    value.view(-1)[0] = schema.MODEL[name].minimum - 0.25
    with pytest.raises(ValueError, match=rf"params\['{name}'\] must be >= {schema.MODEL[name].minimum}"):
        ro(params={name: value})


def test_restitution_above_one_is_refused_in_a_rollout():
    model = every_kind_of_entity().finalize(device=DEVICE, requires_grad=True)
    ro = inertia.Rollout(model, inertia.XPBDSolver(model), 1, 1.0 / 60.0, 2, params=("shape_material_restitution",))
    e = torch.full((model.shape_count,), 1.5)
    with pytest.raises(ValueError, match=r"shape_material_restitution'\] must be <= 1.0, got 1.5"):
        ro(params={"shape_material_restitution": e})


@pytest.mark.parametrize("lower, upper", [(math.inf, math.inf), (-math.inf, -math.inf), (0.0, -math.inf)])
def test_joint_limits_that_exclude_every_position_are_refused(lower, upper):
    b = inertia.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=(1, 1, 1))
    with pytest.raises(ValueError, match="limits must"):
        b.add_joint_revolute(-1, body, limit_lower=lower, limit_upper=upper)


@pytest.mark.parametrize("rot", [(0, 0, 0, 0), (math.nan, 0, 0, 1), (0, 0, math.inf, 1)])
@pytest.mark.parametrize("grid", ["cloth", "soft", "particles"])
def test_grid_rotations_must_be_non_zero_finite_quaternions(rot, grid):
    b = inertia.ModelBuilder()
    call = {"cloth": lambda: b.add_cloth_grid(2, 2, rot=rot), "soft": lambda: b.add_soft_grid(1, 1, 1, rot=rot),
            "particles": lambda: b.add_particle_grid(2, 2, 2, rot=rot)}[grid]
    with pytest.raises(ValueError, match="grid rot must be a non-zero, finite quaternion"):
        call()


def test_rollout_takes_numpy_scalars_like_step_and_explains_a_string_of_params():
    b = inertia.ModelBuilder()
    b.add_spring(b.add_particle((0, 0, 1), mass=0.0), b.add_particle((0.2, 0, 1)), ke=50.0)
    model = b.finalize(device=DEVICE)
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 2, np.float32(1.0 / 60.0), 4)
    assert ro.frame_dt == pytest.approx(1.0 / 60.0)
    for bad in (True, np.bool_(True), -1.0, math.inf):
        with pytest.raises(ValueError, match="frame_dt must be a finite number > 0"):
            inertia.Rollout(model, inertia.SemiImplicitSolver(model), 2, bad, 4)
    with pytest.raises(TypeError, match=r"params must be a sequence of names, got the string 'spring_stiffness'"):
        inertia.Rollout(model, inertia.SemiImplicitSolver(model), 2, 1.0 / 60.0, 4, params="spring_stiffness")


def test_a_long_chain_still_refuses_a_loop_and_a_second_parent():
    """Joint checks walk the tree through a dict (linear-time chains): the refusals still hold."""
    b = inertia.ModelBuilder()
    prev = -1
    bodies = []
    for i in range(50):
        c = b.add_body(xform=((0.0, 0.0, 0.1 * i), (0, 0, 0, 1)), mass=1.0, inertia=(1, 1, 1))
        b.add_joint_revolute(prev, c)
        bodies.append(c)
        prev = c
    with pytest.raises(ValueError, match="joints must form trees"):
        b.add_joint_revolute(bodies[-1], bodies[0])  # closes a loop
    with pytest.raises(ValueError, match=f"body {bodies[7]} is already the child of joint 7"):
        b.add_joint_revolute(bodies[3], bodies[7])
    scene = inertia.ModelBuilder()
    scene.add_builder(b)  # copied lists: the child -> joint map follows them
    with pytest.raises(ValueError, match="already the child"):
        scene.add_joint_revolute(-1, 10)
