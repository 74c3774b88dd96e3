"""UsdPhysics import and export.

Known answers: a scene built in code (every shape and joint type, limits, drives, materials, a
kinematic body, static shapes, tilted gravity) survives export -> import with the same bodies,
mass properties, shapes, joints and gravity, and the two models place every body identically
under the same joint coordinates; a stage written by hand with pxr in centimetres, Y up, with
degree limits, per-degree drive gains and non-default axis tokens imports with the SI values and
poses worked out by hand; what is not simulated warns once, naming the prim; bad prims raise.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdShade

from conftest import DEVICE

import inertia
from inertia.io import usd_export, usd_import as usd_physics
from inertia.io.meshes import read_obj

DATA = os.path.join(os.path.dirname(__file__), "data")


def rot(q) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def axis_angle(axis, angle):
    a = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return tuple(a * math.sin(angle / 2)) + (math.cos(angle / 2),)


def same_pose(a, b, atol=2e-6) -> bool:
    a, b = np.asarray(list(a.p) + list(a.q)), np.asarray(list(b.p) + list(b.q))
    return np.allclose(a[:3], b[:3], atol=atol) and np.allclose(rot(a[3:]), rot(b[3:]), atol=atol)


def scene() -> inertia.ModelBuilder:
    """Every shape and joint type the engine has, with limits, drives, materials and filters."""
    b = inertia.ModelBuilder(gravity=(0.5, -0.3, -9.7))
    b.add_ground_plane(mu=0.8, restitution=0.1, label="ground")
    b.add_shape_box(-1, ((2.0, 0.0, 0.25), axis_angle((0, 0, 1), 0.4)), 0.5, 0.25, 0.25, tau=0.008, zeta=0.6,
                    label="step")
    torso = b.add_body(((0.0, 0.0, 1.0), axis_angle((1, 1, 0), 0.3)), mass=4.0,
                       inertia=[[0.2, 0.01, -0.02], [0.01, 0.3, 0.005], [-0.02, 0.005, 0.25]], com=(0.05, -0.02, 0.01),
                       label="torso")
    b.add_shape_box(torso, None, 0.3, 0.2, 0.1, ke=2e4, kd=20.0, mu=0.3, label="torso_box")
    ball = b.add_body(((0.6, 0.0, 1.0), (0, 0, 0, 1)), label="ball")
    b.add_shape_sphere(ball, ((0.0, 0.05, 0.0), (0, 0, 0, 1)), 0.08, density=700.0, collision_group=2,
                       collision_mask=5, label="ball_sphere")
    arm = b.add_body(((0.6, 0.0, 0.6), axis_angle((0, 1, 0), 0.2)), label="arm")
    b.add_shape_capsule(arm, ((0.0, 0.0, -0.15), axis_angle((1, 0, 0), 0.3)), 0.04, 0.12, restitution=0.5,
                        label="arm_capsule")
    hand = b.add_body(((0.6, 0.0, 0.3), (0, 0, 0, 1)), label="hand")
    b.add_shape_cylinder(hand, ((0.01, 0.0, 0.0), (0, 0, 0, 1)), 0.05, 0.03, collide_particles=False,
                         label="hand_cylinder")
    leg = b.add_body(((-0.4, 0.0, 0.7), (0, 0, 0, 1)), label="leg")
    b.add_shape_sphere(leg, None, 0.05, label="leg_sphere")
    rock = b.add_body(((1.0, 1.0, 0.5), axis_angle((0, 0, 1), 1.0)), linear_velocity=(0.1, 0.2, -0.3),
                      angular_velocity=(1.0, -2.0, 0.5), label="rock")
    v, f = read_obj(os.path.join(DATA, "quadruped", "meshes", "shin.obj"))
    b.add_shape_mesh(rock, ((0.0, 0.0, 0.1), (0, 0, 0, 1)), v, f, scale=(0.1, 0.2, 0.3), label="rock_mesh")
    belt = b.add_body(((0.0, -1.0, 0.1), (0, 0, 0, 1)), linear_velocity=(0.5, 0.0, 0.0), kinematic=True,
                      label="belt")
    b.add_shape_box(belt, None, 1.0, 0.2, 0.05, label="belt_box")

    b.add_joint_revolute(-1, torso, ((0.0, 0.0, 1.0), axis_angle((1, 1, 0), 0.3)), None, axis=(0, 1, 0),
                         limit_lower=-0.5, limit_upper=1.2, target_ke=50.0, target_kd=2.0, label="hip")
    b.add_joint_prismatic(torso, ball, ((0.6, 0.0, 0.0), axis_angle((0, 0, 1), 0.1)), None, axis=(0.6, 0.8, 0.0),
                          limit_lower=-0.1, limit_upper=0.3, limit_ke=5e3, limit_kd=7.0, target_ke=300.0,
                          target_kd=4.0, label="slide")
    b.add_joint_ball(ball, arm, None, ((0.0, 0.0, 0.4), (0, 0, 0, 1)), label="shoulder")
    b.add_joint_fixed(arm, hand, ((0.0, 0.0, -0.3), (0, 0, 0, 1)), None, collide_parent=True, label="wrist")
    b.add_joint_revolute(torso, leg, ((-0.4, 0.0, -0.3), (0, 0, 0, 1)), None, axis=(0, 0, -1), label="knee")
    b.add_joint_free(rock, ((1.0, 1.0, 0.5), axis_angle((0, 0, 1), 1.0)), None, label="rock_free")
    return b


def joint_q_sample(model) -> np.ndarray:
    """Joint coordinates away from zero for every joint of :func:`scene`."""
    q = np.zeros(model.joint_coord_count)
    starts, types = model.joint_q_start.numpy(), model.joint_type.numpy()
    for j, t in enumerate(types):
        s = starts[j]
        if t in (0, 1):
            q[s] = 0.3 + 0.1 * j
        elif t == 2:
            q[s:s + 4] = axis_angle((1, 2, 3), 0.7)
        elif t == 4:
            q[s:s + 7] = [0.1, -0.2, 0.3] + list(axis_angle((0, 1, 1), 0.4))
    return q


def fk(model, q) -> np.ndarray:
    state = model.state()
    inertia.eval_fk(model, q, np.zeros(model.joint_dof_count), state)
    return state.body_q.numpy().astype(np.float64)


def compare(a: inertia.ModelBuilder, b: inertia.ModelBuilder, density=True):
    assert b.body_label == a.body_label and b.joint_label == a.joint_label
    assert np.allclose(b.gravity, a.gravity, rtol=1e-6)
    for i in range(a.body_count):
        assert same_pose(a.body_q[i], b.body_q[i], 1e-9), a.body_label[i]
        assert np.allclose(a.body_qd[i], b.body_qd[i], atol=1e-6)
        assert a.body_kinematic[i] == b.body_kinematic[i]
    errors = []
    for (ma, ca, ia, *_), (mb, cb, ib, *_), kin in zip(a._body_mass_properties(), b._body_mass_properties(),
                                                        a.body_kinematic):
        if kin:
            continue
        errors.append(max(abs(mb / ma - 1), np.abs(ib - ia).max() / np.abs(ia).max(), np.abs(cb - ca).max()))
    print(f"\nworst relative mass / inertia / com error after the round trip: {max(errors):.2e}")
    assert max(errors) < 1e-6

    index = {label: s for s, label in enumerate(b.shape_label)}
    assert sorted(index) == sorted(a.shape_label)
    for s, label in enumerate(a.shape_label):
        t = index[label]
        assert b.shape_type[t] == a.shape_type[s], label
        pa, pb = a.shape_body[s], b.shape_body[t]
        assert (pa == -1 and pb == -1) or a.body_label[pa] == b.body_label[pb], label
        assert same_pose(a.shape_transform[s], b.shape_transform[t]), label
        assert np.allclose(a.shape_scale[s], b.shape_scale[t], rtol=1e-6), label
        if a.shape_mesh[s] is not None:
            assert np.allclose(a.shape_mesh[s][0], b.shape_mesh[t][0], atol=1e-7)
            assert np.array_equal(a.shape_mesh[s][1], b.shape_mesh[t][1])
        for attr in ("shape_material_mu", "shape_material_restitution", "shape_material_ke", "shape_material_kd",
                     "shape_material_tau", "shape_material_zeta", "shape_collision_group", "shape_collision_mask", "shape_flags") + (
                         ("shape_density",) if density and a.shape_type[s] != 4 else ()):
            assert getattr(b, attr)[t] == pytest.approx(getattr(a, attr)[s], rel=1e-6), (label, attr)

    for j, label in enumerate(a.joint_label):
        assert b.joint_type[j] == a.joint_type[j], label
        assert b.joint_parent[j] == a.joint_parent[j] and b.joint_child[j] == a.joint_child[j], label
        assert b.joint_collide_parent[j] == a.joint_collide_parent[j], label
        xpa, xpb, xca, xcb = a.joint_X_p[j], b.joint_X_p[j], a.joint_X_c[j], b.joint_X_c[j]
        assert np.allclose(xpa.p, xpb.p, atol=1e-6) and np.allclose(xca.p, xcb.p, atol=1e-6), label
        if a.joint_type[j] in (0, 1):
            # an axis that is not +X/+Y/+Z comes back as X of turned frames: the same axis in both bodies
            for xa, xb in ((xpa, xpb), (xca, xcb)):
                assert np.allclose(rot(xa.q) @ a.joint_axis[j], rot(xb.q) @ b.joint_axis[j], atol=1e-6), label
            # and the frames agree up to a turn about that axis (none at all for +X/+Y/+Z axes)
            turn_a, turn_b = rot(xpa.q).T @ rot(xca.q), rot(xpb.q).T @ rot(xcb.q)
            assert np.allclose(turn_a, rot(xpa.q).T @ rot(xpb.q) @ turn_b @ rot(xpb.q).T @ rot(xpa.q), atol=1e-6)
            if a.joint_axis[j] in [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]:
                assert same_pose(xpa, xpb) and same_pose(xca, xcb) and b.joint_axis[j] == a.joint_axis[j]
        else:
            assert same_pose(xpa, xpb) and same_pose(xca, xcb), label
    for attr in ("joint_limit_lower", "joint_limit_upper", "joint_limit_ke", "joint_limit_kd", "joint_target_ke",
                 "joint_target_kd"):
        assert np.allclose(getattr(a, attr), getattr(b, attr), rtol=1e-6), attr


def test_round_trip_through_a_file_keeps_the_scene(tmp_path):
    a = scene()
    path = usd_export.save_usd(a, tmp_path / "scene.usda")
    b = inertia.ModelBuilder()
    result = b.add_usd(path)  # the ModelBuilder method (SceneImportMixin)
    assert not result.warnings, result.warnings
    assert len(result.bodies) == a.body_count and len(result.joints) == a.joint_count
    compare(a, b)
    # the same joint coordinates place every body in the same place
    ma, mb = a.finalize(device=DEVICE), b.finalize(device=DEVICE)
    q = joint_q_sample(ma)
    qa, qb = fk(ma, q), fk(mb, q)
    print(f"body pose difference under the same joint_q: {np.abs(qa - qb).max():.2e}")
    assert np.abs(qa[:, :3] - qb[:, :3]).max() < 1e-5
    assert all(np.allclose(rot(x[3:]), rot(y[3:]), atol=1e-5) for x, y in zip(qa, qb))


def test_round_trip_of_a_finalized_model_keeps_its_mass_properties():
    a = scene()
    model = a.finalize(device=DEVICE)
    b = inertia.ModelBuilder()
    usd_physics.add_usd(b, usd_export.stage_from(model))
    compare(a, b, density=False)  # a Model keeps its bodies' mass properties but not its shapes' density


def test_export_refuses_an_x_up_scene():
    with pytest.raises(ValueError, match="X-up"):
        usd_export.stage_from(inertia.ModelBuilder(up_axis="x"))


# --------------------------------------------------------------------------- a stage written by hand
def define_limited_joint(st, joint_type, path, body0, body1, local_pos0, axis, limits):
    """A ``joint_type`` (UsdPhysics.RevoluteJoint or PrismaticJoint) prim from the prim ``body0`` to ``body1``
    (None: the world), its frame at ``local_pos0`` in body0, about / along the axis token ``axis``, limited
    to ``limits`` (lower, upper: degrees or the stage's length unit)."""
    joint = joint_type.Define(st, path)
    if body0 is not None:
        joint.CreateBody0Rel().SetTargets([body0.GetPath()])
    if body1 is not None:
        joint.CreateBody1Rel().SetTargets([body1.GetPath()])
    joint.CreateLocalPos0Attr(Gf.Vec3f(*local_pos0))
    joint.CreateAxisAttr(axis)
    joint.CreateLowerLimitAttr(limits[0])
    joint.CreateUpperLimitAttr(limits[1])
    return joint


def add_drive(joint, kind, stiffness, damping, target=None):
    """A UsdPhysics drive of ``kind`` ("angular" or "linear") on ``joint``; no target authored when None."""
    drive = UsdPhysics.DriveAPI.Apply(joint.GetPrim(), kind)
    drive.CreateStiffnessAttr(stiffness)
    drive.CreateDampingAttr(damping)
    if target is not None:
        drive.CreateTargetPositionAttr(target)


def hand_written_stage():
    """Centimetres, Y up, gravity 981 cm/s^2 along -Y, degree limits, axis tokens Y and Z."""
    st = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(st, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(st, 0.01)
    scene = UsdPhysics.Scene.Define(st, "/physics")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0, -1, 0))
    scene.CreateGravityMagnitudeAttr(981.0)
    UsdGeom.Xform.Define(st, "/World")
    floor = UsdGeom.Cube.Define(st, "/World/floor")  # static: 200 x 10 x 200 cm, top at y = 0
    floor.CreateSizeAttr(10.0)
    floor.AddTranslateOp().Set(Gf.Vec3d(0, -5, 0))
    floor.AddScaleOp().Set(Gf.Vec3f(20, 1, 20))
    UsdPhysics.CollisionAPI.Apply(floor.GetPrim())

    arm = UsdGeom.Xform.Define(st, "/World/arm")  # 1 m up (along y)
    arm.AddTranslateOp().Set(Gf.Vec3d(0, 100, 0))
    UsdPhysics.RigidBodyAPI.Apply(arm.GetPrim())
    UsdPhysics.ArticulationRootAPI.Apply(arm.GetPrim())
    mass = UsdPhysics.MassAPI.Apply(arm.GetPrim())
    mass.CreateMassAttr(2.0)
    mass.CreateDiagonalInertiaAttr(Gf.Vec3f(100.0, 200.0, 300.0))  # kg cm^2
    mass.CreatePrincipalAxesAttr(Gf.Quatf(math.cos(math.pi / 4), 0, math.sin(math.pi / 4), 0))  # 90 deg about y
    mass.CreateCenterOfMassAttr(Gf.Vec3f(10, 0, 0))
    cap = UsdGeom.Capsule.Define(st, "/World/arm/geom")
    cap.CreateAxisAttr(UsdGeom.Tokens.x)
    cap.CreateRadiusAttr(5.0)
    cap.CreateHeightAttr(40.0)
    cap.AddTranslateOp().Set(Gf.Vec3d(20, 0, 0))
    UsdPhysics.CollisionAPI.Apply(cap.GetPrim())
    material = UsdShade.Material.Define(st, "/World/rubber")
    m_api = UsdPhysics.MaterialAPI.Apply(material.GetPrim())
    m_api.CreateDynamicFrictionAttr(0.7)
    m_api.CreateStaticFrictionAttr(0.9)
    m_api.CreateRestitutionAttr(0.3)
    UsdShade.MaterialBindingAPI.Apply(cap.GetPrim()).Bind(material, UsdShade.Tokens.weakerThanDescendants, "physics")

    # world -> arm about the stage's Y (up); drive stiffness in kg cm^2 / deg / s^2
    hinge = define_limited_joint(st, UsdPhysics.RevoluteJoint, "/World/hinge", None, arm, (0, 100, 0),
                                 UsdPhysics.Tokens.y, (-45.0, 90.0))
    add_drive(hinge, "angular", stiffness=2.0, damping=0.1, target=30.0)

    slider = UsdGeom.Xform.Define(st, "/World/arm/slider")  # nested body, 30 cm along the arm
    slider.AddTranslateOp().Set(Gf.Vec3d(30, 0, 0))
    UsdPhysics.RigidBodyAPI.Apply(slider.GetPrim())
    UsdPhysics.MassAPI.Apply(slider.GetPrim()).CreateDensityAttr(0.002)  # kg/cm^3 = 2000 kg/m^3
    cyl = UsdGeom.Cylinder.Define(st, "/World/arm/slider/geom")
    cyl.CreateAxisAttr(UsdGeom.Tokens.y)
    cyl.CreateRadiusAttr(2.0)
    cyl.CreateHeightAttr(10.0)
    UsdPhysics.CollisionAPI.Apply(cyl.GetPrim())
    rail = define_limited_joint(st, UsdPhysics.PrismaticJoint, "/World/rail", arm, slider, (30, 0, 0),
                                UsdPhysics.Tokens.z, (-5.0, 15.0))
    add_drive(rail, "linear", stiffness=40.0, damping=3.0)  # kg / s^2

    # things the engine does not simulate: each warns once, naming its prim
    d6 = UsdPhysics.Joint.Define(st, "/World/d6")
    d6.CreateBody0Rel().SetTargets([arm.GetPath()])
    d6.CreateBody1Rel().SetTargets([slider.GetPath()])
    UsdPhysics.LimitAPI.Apply(d6.GetPrim(), "transX")
    cone = UsdGeom.Cone.Define(st, "/World/cone")
    UsdPhysics.CollisionAPI.Apply(cone.GetPrim())
    return st


def test_hand_written_stage_in_centimetres_y_up():
    st = hand_written_stage()
    b = inertia.ModelBuilder()  # Z up: the stage's +Y becomes +Z, its +Z becomes -Y
    with pytest.warns(usd_physics.UsdImportWarning) as record:
        r = usd_physics.add_usd(b, st)
    msgs = [str(w.message) for w in record]
    print("\n" + "\n".join(msgs))
    expected = [("/World/rubber", "staticFriction 0.9"), ("/World/arm", "ArticulationRootAPI ignored"),
                ("/World/hinge", "targetPosition ignored"), ("/World/d6", "D6 joint"), ("/World/cone", "Cone")]
    for prim, what in expected:
        assert sum(f": {prim}: " in m and what in m for m in msgs) == 1, (prim, what)
    assert len(msgs) == len(expected) and r.warnings == msgs
    assert (r.meters_per_unit, r.up_axis) == (0.01, "Y")
    assert np.allclose(b.gravity, (0, 0, -9.81), atol=1e-6)

    up = rot(axis_angle((1, 0, 0), math.pi / 2))  # stage -> builder
    arm, slider = r.bodies["/World/arm"], r.bodies["/World/arm/slider"]
    assert np.allclose(b.body_q[arm].p, (0, 0, 1), atol=1e-6) and np.allclose(rot(b.body_q[arm].q), up, atol=1e-6)
    assert np.allclose(b.body_q[slider].p, (0.3, 0, 1), atol=1e-6)
    props = b._body_mass_properties()
    m, com, i_body = props[arm][:3]
    principal = rot(axis_angle((0, 1, 0), math.pi / 2))
    assert m == pytest.approx(2.0) and np.allclose(com, (0.1, 0, 0), atol=1e-6)
    assert np.allclose(i_body, principal @ np.diag([0.01, 0.02, 0.03]) @ principal.T, atol=1e-9)
    # the slider's cylinder: 2000 kg/m^3, radius 2 cm, 10 cm long along the stage's y (the body's y)
    assert props[slider][0] == pytest.approx(2000 * math.pi * 0.02**2 * 0.1, rel=1e-6)
    cyl = r.shapes["/World/arm/slider/geom"]
    assert np.allclose(b.shape_scale[cyl], (0.02, 0.05, 0), atol=1e-6)
    assert np.allclose(rot(b.shape_transform[cyl].q) @ (0, 0, 1), (0, 1, 0), atol=1e-6)  # axis Y of the body
    cap = r.shapes["/World/arm/geom"]
    assert np.allclose(b.shape_scale[cap], (0.05, 0.2, 0), atol=1e-6)
    assert np.allclose(b.shape_transform[cap].p, (0.2, 0, 0), atol=1e-6)
    assert np.allclose(rot(b.shape_transform[cap].q) @ (0, 0, 1), (1, 0, 0), atol=1e-6)  # axis X
    assert (b.shape_material_mu[cap], b.shape_material_restitution[cap]) == pytest.approx((0.7, 0.3))
    floor = r.shapes["/World/floor"]  # static, 2 x 2 x 0.1 m in world, its thin side now along z
    assert b.shape_body[floor] == -1 and np.allclose(b.shape_scale[floor], (1.0, 0.05, 1.0), atol=1e-6)
    assert np.allclose(np.abs(rot(b.shape_transform[floor].q)) @ b.shape_scale[floor], (1, 1, 0.05), atol=1e-6)
    assert np.allclose(b.shape_transform[floor].p, (0, 0, -0.05), atol=1e-6)

    hinge, rail = r.joints["/World/hinge"], r.joints["/World/rail"]
    assert b.joint_parent[hinge] == -1 and b.joint_child[hinge] == arm and b.joint_axis[hinge] == (0, 1, 0)
    assert (b.joint_limit_lower[0], b.joint_limit_upper[0]) == pytest.approx((-math.pi / 4, math.pi / 2))
    per_rad = 180 / math.pi
    assert (b.joint_target_ke[0], b.joint_target_kd[0]) == pytest.approx((2e-4 * per_rad, 1e-5 * per_rad))
    assert b.joint_parent[rail] == arm and b.joint_axis[rail] == (0, 0, 1)
    assert (b.joint_limit_lower[1], b.joint_limit_upper[1]) == pytest.approx((-0.05, 0.15))
    assert (b.joint_target_ke[1], b.joint_target_kd[1]) == pytest.approx((40.0, 3.0))

    # the hinge turns about the world's up axis (the stage's Y); the slider moves along the stage's Z (-y here)
    model = b.finalize(device=DEVICE)
    q = fk(model, [0.5, 0.1])
    assert np.allclose(q[arm, :3], (0, 0, 1), atol=1e-6)
    assert np.allclose(rot(q[arm, 3:]), rot(axis_angle((0, 0, 1), 0.5)) @ up, atol=1e-6)
    expected = np.array([0, 0, 1]) + rot(axis_angle((0, 0, 1), 0.5)) @ np.array([0.3, -0.1, 0.0])
    assert np.allclose(q[slider, :3], expected, atol=1e-6)


def test_unauthored_units_warn_and_take_usd_fallbacks():
    st = Usd.Stage.CreateInMemory()
    body = UsdGeom.Sphere.Define(st, "/ball")
    body.CreateRadiusAttr(10.0)
    UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
    UsdPhysics.CollisionAPI.Apply(body.GetPrim())
    b = inertia.ModelBuilder()
    with pytest.warns(usd_physics.UsdImportWarning) as record:
        usd_physics.add_usd(b, st)
    assert any("metersPerUnit is not authored" in str(w.message) for w in record)
    assert any("upAxis is not authored" in str(w.message) for w in record)
    assert b.shape_scale[0][0] == pytest.approx(0.1)  # 10 cm
    b2 = inertia.ModelBuilder()
    usd_physics.add_usd(b2, st, meters_per_unit=1.0, up_axis="z")  # overridden: no warning, metres
    assert b2.shape_scale[0][0] == pytest.approx(10.0)


def z_up_stage():
    """An empty in-memory stage, Z up, in meters."""
    st = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(st, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(st, 1.0)
    return st


def test_mesh_collider_polygons_scale_and_handedness():
    st = z_up_stage()
    v, f = read_obj(os.path.join(DATA, "quadruped", "meshes", "shin.obj"))  # triangles of a unit cube
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    body = UsdGeom.Xform.Define(st, "/box")
    UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
    for name, order in (("right", quads), ("left", [q[::-1] for q in quads])):
        mesh = UsdGeom.Mesh.Define(st, f"/box/{name}")
        mesh.CreatePointsAttr([Gf.Vec3f(*p) for p in v])
        mesh.CreateFaceVertexCountsAttr([4] * 6)
        mesh.CreateFaceVertexIndicesAttr([i for q in order for i in q])
        mesh.AddScaleOp().Set(Gf.Vec3f(0.2, 0.4, 0.6))
        if name == "left":
            mesh.CreateOrientationAttr(UsdGeom.Tokens.leftHanded)
        UsdPhysics.CollisionAPI.Apply(mesh.GetPrim())
        UsdPhysics.MassAPI.Apply(mesh.GetPrim()).CreateDensityAttr(500.0)
    b = inertia.ModelBuilder()
    usd_physics.add_usd(b, st)
    assert [len(b.shape_mesh[s][1]) for s in range(2)] == [36, 36]  # 6 quads -> 12 triangles each
    assert np.allclose(b.shape_mesh[0][0].max(axis=0), (0.1, 0.2, 0.3))
    # both windings enclose +0.048 m^3 (a left-handed mesh is flipped): 2 x 500 kg/m^3 x 0.048 m^3
    assert b._body_mass_properties()[0][0] == pytest.approx(48.0, rel=1e-6)


def test_joint_to_the_world_through_body1_is_turned_round():
    """body0 = a body, body1 = nothing: the builder's parent is the world, so the angle's sign flips."""
    st = z_up_stage()
    door = UsdGeom.Cube.Define(st, "/door")
    door.AddTranslateOp().Set(Gf.Vec3d(0.5, 0, 1))
    UsdPhysics.RigidBodyAPI.Apply(door.GetPrim())
    UsdPhysics.CollisionAPI.Apply(door.GetPrim())
    frozen = UsdGeom.Sphere.Define(st, "/door/frozen")  # a disabled rigid body: part of the door
    UsdPhysics.RigidBodyAPI.Apply(frozen.GetPrim()).CreateRigidBodyEnabledAttr(False)
    UsdPhysics.CollisionAPI.Apply(frozen.GetPrim())
    hinge = define_limited_joint(st, UsdPhysics.RevoluteJoint, "/hinge", door, None, (-0.5, 0, 0),
                                 UsdPhysics.Tokens.z, (-10.0, 30.0))
    hinge.CreateLocalPos1Attr(Gf.Vec3f(0, 0, 1))
    b = inertia.ModelBuilder()
    r = usd_physics.add_usd(b, st)
    assert b.body_count == 1 and b.shape_body == [0, 0]
    assert (b.joint_parent[0], b.joint_child[0]) == (-1, 0)
    assert np.allclose(b.joint_X_p[0].p, (0, 0, 1)) and np.allclose(b.joint_X_c[0].p, (-0.5, 0, 0))
    assert (b.joint_limit_lower[0], b.joint_limit_upper[0]) == pytest.approx((-30 * math.pi / 180, 10 * math.pi / 180))
    assert r.joints == {"/hinge": 0}


def test_bad_prims_raise_naming_the_prim(tmp_path):
    st = z_up_stage()
    ball = UsdGeom.Sphere.Define(st, "/egg")
    ball.AddScaleOp().Set(Gf.Vec3f(1, 1, 2))
    UsdPhysics.RigidBodyAPI.Apply(ball.GetPrim())
    UsdPhysics.CollisionAPI.Apply(ball.GetPrim())
    with pytest.raises(usd_physics.UsdImportError, match="/egg: non-uniform scale .* would distort the sphere"):
        usd_physics.add_usd(inertia.ModelBuilder(), st)
    ball.GetPrim().RemoveAPI(UsdPhysics.CollisionAPI)
    ball.GetPrim().GetAttribute("xformOp:scale").Set(Gf.Vec3f(1, 1, 1))
    joint = UsdPhysics.FixedJoint.Define(st, "/weld")
    joint.CreateBody0Rel().SetTargets(["/nowhere"])
    with pytest.raises(usd_physics.UsdImportError, match="/weld: body0 targets /nowhere, which does not exist"):
        usd_physics.add_usd(inertia.ModelBuilder(), st)
    joint.GetBody0Rel().ClearTargets(True)
    with pytest.raises(usd_physics.UsdImportError, match="/weld: neither body0 nor body1 is a rigid body"):
        usd_physics.add_usd(inertia.ModelBuilder(), st)
    joint.CreateBody1Rel().SetTargets(["/egg"])
    joint.CreateLocalPos0Attr(Gf.Vec3f(float("nan"), 0, 0))
    with pytest.raises(usd_physics.UsdImportError, match="/weld: .*parent_xform position must be finite"):
        usd_physics.add_usd(inertia.ModelBuilder(), st)
    with pytest.raises(usd_physics.UsdImportError, match="USD file not found"):
        usd_physics.add_usd(inertia.ModelBuilder(), tmp_path / "missing.usda")
