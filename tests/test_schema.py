"""The declared data (inertia.schema) is the whole truth, and everything that copies data follows it.

By construction: each check iterates the declarations, so a field added to the schema is checked here
without a new test, and a field added anywhere else (a builder list, a model attribute) fails here until
it is declared.
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

I = (0.0, 0.0, 0.0, 1.0)
# model attributes that are not per-entity data: the device, flags, the up axis and private caches
NOT_DATA = {"device", "requires_grad", "up_axis", "up_vector", "_world_counts", "_reset_joint_q",
            "_reset_joint_qd", "_collision", "_assignments"}  # _assignments: inertia.signed's counter


def every_kind_of_entity(b=None) -> inertia.ModelBuilder:
    """One world with at least one of every entity the schema declares (a static shape too)."""
    b = b or inertia.ModelBuilder()
    b.add_cloth_grid(2, 1, pos=(0.0, 0.0, 1.0), mass=0.05)
    b.add_soft_grid(1, 1, 1, pos=(1.0, 0.0, 0.5), cell_x=0.1, cell_y=0.1, cell_z=0.1, density=300.0)
    b.add_spring(0, 1, ke=50.0)
    body = b.add_body(xform=((0.0, 1.0, 1.0), (0.1, 0.0, 0.0, 1.0)), linear_velocity=(0.1, 0.2, 0.3),
                      angular_velocity=(0.3, 0.2, 0.1))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, mu=0.3)
    arm = b.add_body(xform=((0.5, 1.0, 1.0), I), mass=2.0, inertia=(0.1, 0.2, 0.3), com=(0.01, 0.0, 0.0))
    b.add_shape_capsule(arm, radius=0.05, half_height=0.2)
    b.add_joint_revolute(-1, arm, parent_xform=((0.3, 1.0, 1.0), I), child_xform=((-0.2, 0.0, 0.0), I),
                         axis=(0, 1, 0), target_ke=3.0, limit_lower=-1.0, limit_upper=1.0)
    ball = b.add_body(xform=((0.9, 1.0, 1.0), I))
    b.add_shape_sphere(ball, radius=0.05)
    b.add_joint_ball(arm, ball, parent_xform=((0.2, 0.0, 0.0), I), child_xform=((-0.1, 0.0, 0.0), I))
    b.add_shape_sphere(xform=((2.0, 2.0, 0.2), I), radius=0.2)  # static, in this world
    slider = b.add_body(xform=((0.5, 2.0, 1.0), I), mass=1.0, inertia=(0.1, 0.1, 0.1))
    b.add_joint_prismatic(arm, slider, parent_xform=((0.0, 1.0, 0.0), I))
    b.set_joint_mimic(b.joint_count - 1, b.joint_count - 3, multiplier=0.5, offset=0.1)  # follows the hinge
    b.add_collision_exclusion(body, ball)
    b.add_visual(arm, "capsule", size=(0.05, 0.2, 0.0), color=(1.0, 0.0, 0.0))
    return b


def test_every_model_attribute_is_declared_with_its_dtype_and_length():
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    model = every_kind_of_entity(b).finalize(device=DEVICE)
    declared = {f.name for f in schema.MODEL_FIELDS + schema.MODEL_SCALARS} | set(schema.COUNT_OF.values())
    undeclared = sorted(set(vars(model)) - declared - NOT_DATA)
    assert not undeclared, f"model attributes missing from inertia.schema: {undeclared}"
    for f in schema.MODEL_FIELDS:
        if f.source == "builder_only":
            assert not hasattr(model, f.name), f"{f.name} is declared builder-only but is on the model"
            continue
        value = getattr(model, f.name)
        if not schema.is_array(f):
            assert isinstance(value, list), f.name
            assert f.length == "csr" or len(value) == model.count(f.entity), f.name
            continue
        assert isinstance(value, wp.array) and value.dtype == f.dtype, f"{f.name}: {value.dtype} != {f.dtype}"
        n = model.count(f.entity)
        expected = {"count": n * (int(np.prod(f.inner)) if f.flat else 1), "offsets": n + 1}.get(f.length)
        if expected is not None:
            assert value.shape[0] == expected, f"{f.name}: {value.shape[0]} entries, expected {expected}"
        if f.inner and not f.flat:
            assert value.shape[1:] == f.inner, f.name
        assert value.requires_grad is False  # requires_grad=False model
    for f in schema.MODEL_SCALARS:
        assert isinstance(getattr(model, f.name), f.dtype), f.name


def test_requires_grad_follows_the_declarations():
    model = every_kind_of_entity().finalize(device=DEVICE, requires_grad=True)
    for f in schema.model_arrays():
        if f.dtype in (wp.int32, wp.uint64):
            continue
        assert getattr(model, f.name).requires_grad == f.grad, f.name


def test_every_builder_list_is_declared():
    b = every_kind_of_entity()
    lists = {k for k, v in vars(b).items() if isinstance(v, list)}
    declared = {f.name for f in schema.builder_fields()}
    assert lists == declared, f"undeclared builder lists {sorted(lists - declared)}, missing {sorted(declared - lists)}"


def _moved(rule, a, p, R):
    """What a copy rule does to a builder field's values, for a copy moved by (p, R) (float64 reference)."""
    a = np.asarray(a, dtype=np.float64)
    if rule == "point":
        return a @ R.T + p
    if rule == "vector":
        return a @ R.T
    if rule == "spatial":
        return np.concatenate([a[:, :3] @ R.T, a[:, 3:] @ R.T], axis=1)
    return a


def test_add_builder_carries_every_declared_field_by_its_copy_rule():
    """World 1 is world 0 moved by 2 m and turned 90 deg about z: every declared builder field comes out
    as its copy rule says (index fields shifted, world fields set, vectors and poses moved)."""
    scene = every_kind_of_entity()
    b = inertia.ModelBuilder()
    b.add_ground_plane()  # shared static shape first: shapes of the copies are offset by one
    b.add_builder(scene)
    half = math.sqrt(0.5)
    b.add_builder(scene, xform=((2.0, 0.0, 0.0), (0.0, 0.0, half, half)))
    R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    p = np.array([2.0, 0.0, 0.0])
    checked = []
    for f in schema.builder_fields():
        values = getattr(b, f.name)
        n = len(getattr(scene, f.name))
        if f.entity == "shape":
            w0, w1 = values[1:1 + n], values[1 + n:1 + 2 * n]
        else:
            w0, w1 = values[:n], values[n:2 * n]
        assert len(values) == 2 * n + (1 if f.entity == "shape" else 0), f.name
        if f.copy == "world":
            assert set(w0) <= {0} and set(w1) <= {1}, f.name
        elif f.copy == "shape_world":
            assert set(w0) <= {0} and set(w1) <= {1} and values[0] == -1, f.name
        elif f.copy in ("particle_index", "body_index", "joint_index"):
            shift = {"particle_index": scene.particle_count, "body_index": scene.body_count,
                     "joint_index": scene.joint_count}[f.copy]
            a0, a1 = np.asarray(w0, dtype=np.int64), np.asarray(w1, dtype=np.int64)
            assert np.array_equal(np.where(a0 >= 0, a0 + shift, -1), a1), f.name
        elif f.copy == "body_index_list":
            assert [tuple(i + scene.body_count for i in e) for e in w0] == list(w1), f.name
        elif f.copy in ("pose", "world_pose"):
            x0 = np.array([tuple(x) for x in w0], dtype=np.float64).reshape(-1, 7)
            x1 = np.array([tuple(x) for x in w1], dtype=np.float64).reshape(-1, 7)
            owner = {"shape_transform": "shape_body", "joint_X_p": "joint_parent"}.get(f.name)
            moves = np.ones(len(x0), bool) if owner is None else np.asarray(getattr(scene, owner)) < 0
            np.testing.assert_allclose(x1[moves, :3], x0[moves, :3] @ R.T + p, atol=1e-6, err_msg=f.name)
            np.testing.assert_array_equal(x1[~moves], x0[~moves], err_msg=f.name)
        elif f.copy == "tet_pose":
            np.testing.assert_allclose(np.asarray(w1), np.asarray(w0) @ R.T, atol=1e-9, err_msg=f.name)
        elif f.copy in ("point", "vector", "spatial"):
            np.testing.assert_allclose(_moved(f.copy, w1, 0, np.eye(3)), _moved(f.copy, w0, p, R), atol=1e-9,
                                       err_msg=f.name)
        else:
            assert f.copy == "plain", f"{f.name}: a copy rule this test does not know: {f.copy}"
            for u, v in zip(w0, w1):
                assert u is v or np.array_equal(np.asarray(u, dtype=object), np.asarray(v, dtype=object)), f.name
        checked.append(f.name)
    assert len(checked) == len(schema.builder_fields())
    model = b.finalize(device=DEVICE)  # and the copies finalize into two equal worlds
    assert model.num_worlds == 2 and model.world_counts()["bodies"] == scene.body_count


def test_the_parameter_registry_is_the_schema_and_every_param_reaches_the_model_in_a_rollout():
    for name, p in registry.PARAMS.items():
        assert p.entity in schema.ENTITIES, name
        for w in p.writes:
            f = schema.MODEL[w]
            assert f.grad and schema.is_array(f), f"{name} writes {w}, which is not a differentiable model array"
    assert set(registry.DIFFERENTIABLE_PARAMS) == {f.name for f in schema.MODEL_FIELDS if f.param}
    from inertia.rollout.torch_bridge import DERIVED

    assert set(DERIVED) == set(registry.DERIVED_PARAMS), "every derived parameter needs its torch derivation"
    model = every_kind_of_entity().finalize(device=DEVICE, requires_grad=True)
    # every parameter, except the arrays a derived one writes (a rollout takes one or the other)
    written = {w for d, writes in registry.DERIVED_PARAMS.items() for w in writes if w != d}
    names = tuple(n for n in registry.PARAMS if n not in written)
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 2, 1.0 / 60.0, 20, params=names)
    values = {n: wp.to_torch(getattr(model, n)).detach().clone().requires_grad_(True) for n in names}
    res = ro(params=values)
    (res.particle_q.sum() + res.body_q[..., :3].sum()).backward()
    for n in names:
        g = values[n].grad
        assert g is not None and torch.isfinite(g).all(), f"{n}: no finite gradient"


@pytest.mark.parametrize("table", ["STATE_FIELDS", "CONTROL_FIELDS"])
def test_states_and_controls_hold_every_declared_field(table):
    model = every_kind_of_entity().finalize(device=DEVICE)
    obj = model.state() if table == "STATE_FIELDS" else model.control()
    for f in getattr(schema, table):
        a = getattr(obj, f.name)
        assert a.dtype == f.dtype and a.shape[0] == model.count(f.entity), f.name
    assert set(vars(obj)) - {"_assignments"} == {f.name for f in getattr(schema, table)}  # inertia.signed


def test_describe_names_dtype_entity_and_unit():
    assert schema.describe("body_inv_inertia") == ("Model.body_inv_inertia: mat33f per body [1/(kg m^2)]: its "
                                                   "inverse (0: kinematic)")
    with pytest.raises(KeyError, match="no field 'nope'"):
        schema.describe("nope")
