"""MJCF import against MuJoCo's own compiler: hand-written models that use one feature each, loaded by both.

Reference: ``mujoco.MjModel`` of the same file (bodies' mass, centre of mass and principal inertias merged as
the import merges welded bodies; joint types, axes, limits; forward kinematics of bodies and sites at 20
random configurations with ``mj_kinematics``), MuJoCo's actuator gains and dof dynamics, and MuJoCo's
contact filter (contype / conaffinity, parent filter on welded bodies, ``<exclude>``) for every geom pair.
Every Gymnasium model is checked in test_robot_corpus.py.
"""

from __future__ import annotations

import os
import struct
import warnings
import zlib

import numpy as np
import pytest

from conftest import DEVICE

import inertia
from inertia.io.mjcf import MjcfError

mujoco = pytest.importorskip("mujoco")
from robot_reference import angle, compare_with_mujoco, mujoco_model, random_quat  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")

FEATURES = """
<mujoco model="features">
  <compiler angle="degree" eulerseq="zyx" meshdir="meshes" autolimits="true"/>
  <default>
    <joint damping="0.1" armature="0.01"/>
    <geom density="800" rgba="0.5 0.5 0.5 1"/>
    <default class="light">
      <geom density="300"/>
      <default class="lighter">
        <geom density="100"/>
        <joint frictionloss="0.2"/>
      </default>
    </default>
    <default class="visual"><geom contype="0" conaffinity="0" group="1"/></default>
  </default>
  <asset><mesh name="gem" file="octahedron.stl" scale="0.03 0.05 0.08"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" contype="2" conaffinity="1"/>
    <body name="base" pos="0 0 1" euler="10 20 30" childclass="light">
      <freejoint name="root"/>
      <geom name="torso" type="box" size="0.2 0.1 0.05" contype="1" conaffinity="2"/>
      <geom name="head" type="sphere" size="0.05" pos="0.25 0 0" class="lighter"/>
      <geom name="shell" class="visual" type="box" size="0.21 0.11 0.06"/>
      <site name="imu" pos="0.1 0 0.05" axisangle="0 0 1 30"/>
      <frame pos="0 0.1 0" euler="20 0 10"><site name="framed" pos="0.05 0 0" euler="0 30 0"/></frame>
      <body name="arm" pos="0.2 0.1 0" xyaxes="0 1 0 -1 0 0">
        <joint name="shoulder_z" type="hinge" axis="0 0 1" range="-45 45" ref="10"/>
        <joint name="shoulder_y" type="hinge" axis="0 1 0" pos="0.01 0 0" range="-30 60" class="lighter"/>
        <geom name="upper" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="forearm" pos="0.3 0 0" zaxis="1 0 1">
          <joint name="elbow" type="slide" axis="1 0 0" range="0 0.1" damping="2"/>
          <geom name="fore" type="cylinder" fromto="0 0 0 0 0 0.2" size="0.02" mass="0.3"/>
          <geom name="hand" type="ellipsoid" size="0.03 0.02 0.01" pos="0 0 0.22" contype="4" conaffinity="4"/>
          <body name="wrist" pos="0 0 0.25">
            <geom name="gem" type="mesh" mesh="gem" pos="0 0 0.05" euler="0 0 30"/>
            <site name="tool" pos="0 0 0.05"/>
          </body>
          <body name="ball" pos="0 0 0.3">
            <joint name="wrist_ball" type="ball"/>
            <inertial pos="0 0 0.02" quat="0.9 0.1 0.2 0.3" mass="0.2" diaginertia="0.001 0.002 0.003"/>
            <geom name="cube" type="box" size="0.02 0.02 0.02" contype="4" conaffinity="0"/>
            <body name="finger" pos="0 0.05 0" quat="0.7 0 0.7 0">
              <joint name="finger" axis="1 0 0" range="-10 10"/>
              <inertial pos="0 0 0" mass="0.05" fullinertia="0.0001 0.0002 0.00025 0.00001 0 -0.00002"/>
              <geom name="nail" type="sphere" size="0.01" density="0"/>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="post" pos="1 0 0"><geom name="post" type="cylinder" size="0.05 0.5"/></body>
  </worldbody>
  <contact><exclude body1="base" body2="forearm"/></contact>
  <include file="actuators.xml"/>
  <tendon><fixed name="t"><joint joint="shoulder_z" coef="1"/></fixed></tendon>
</mujoco>
"""
ACTUATORS = """
<mujoco>
  <actuator>
    <motor name="m1" joint="shoulder_z" gear="50" ctrlrange="-1 1"/>
    <position name="p1" joint="shoulder_y" kp="20" kv="2" gear="2"/>
    <velocity name="v1" joint="elbow" kv="3" gear="1" forcerange="-5 5"/>
  </actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def features(tmp_path_factory):
    d = tmp_path_factory.mktemp("mjcf")
    (d / "meshes").mkdir()
    # the quadruped's ASCII octahedron as binary STL (MuJoCo reads binary STL only)
    v, f = inertia.io.urdf.read_stl(os.path.join(DATA, "quadruped", "meshes", "octahedron.stl"))
    with open(d / "meshes" / "octahedron.stl", "wb") as fh:
        fh.write(b"octahedron".ljust(80, b" ") + struct.pack("<I", len(f)))
        for tri in v[f]:
            fh.write(struct.pack("<12fH", 0, 0, 0, *tri.reshape(-1), 0))
    (d / "actuators.xml").write_text(ACTUATORS)
    (d / "features.xml").write_text(FEATURES)
    path = str(d / "features.xml")
    b = inertia.ModelBuilder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = b.add_mjcf(path)
    return path, b, r, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_bodies_joints_and_kinematics_equal_mujocos(features):
    path, b, r, _ = features
    mj = mujoco_model(path)
    model = b.finalize(device=DEVICE)
    # arm has two joints: an intermediate body "arm:shoulder_z" between base and arm; wrist folds into forearm
    assert "arm:shoulder_z" in r.bodies and r.links["wrist"] == r.bodies["forearm"] and "post" not in r.bodies
    assert r.extra["joint_ref"] == {"shoulder_z": pytest.approx(np.radians(10.0))}
    assert compare_with_mujoco(mj, model, r, "features.xml", "MJCF features", joint_ref=r.extra["joint_ref"]) >= 5
    dof = model.joint_qd_start.numpy()
    for j in range(mj.njnt):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j)
        for k in range(mj.jnt_dofadr[j], mj.jnt_dofadr[j] + (3 if mj.jnt_type[j] == 1 else 6 if mj.jnt_type[j] == 0
                                                              else 1)):
            d = dof[r.joints[name]] + k - mj.jnt_dofadr[j]
            assert model.joint_armature.numpy()[d] == pytest.approx(mj.dof_armature[k]), name
            assert model.joint_damping.numpy()[d] == pytest.approx(mj.dof_damping[k]), name
            assert model.joint_friction.numpy()[d] == pytest.approx(mj.dof_frictionloss[k]), name


def test_sites_are_named_frames_where_mujoco_puts_them(features):
    path, b, r, _ = features
    mj = mujoco_model(path)
    data = mujoco.MjData(mj)
    model = b.finalize(device=DEVICE)
    state = model.state()
    rng = np.random.default_rng(zlib.crc32(b"sites"))
    ref = r.extra["joint_ref"]
    worst = 0.0
    for _ in range(10):
        qpos, q = mj.qpos0.copy(), state.joint_q.numpy().copy()
        qpos[:3] = rng.uniform(-1, 1, 3)
        x = random_quat(rng)
        qpos[3:7] = [x[3], x[0], x[1], x[2]]
        q[r.joint_q["root"]] = list(qpos[:3]) + list(x)
        for name in ("shoulder_z", "shoulder_y", "elbow", "finger"):
            j = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, name)
            qpos[mj.jnt_qposadr[j]] = rng.uniform(*mj.jnt_range[j])
            q[r.joint_q[name]] = qpos[mj.jnt_qposadr[j]] - ref.get(name, 0.0)
        x = random_quat(rng)
        a = mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, "wrist_ball")]
        qpos[a:a + 4] = [x[3], x[0], x[1], x[2]]
        q[r.joint_q["wrist_ball"]] = x
        data.qpos[:] = qpos
        mujoco.mj_kinematics(mj, data)
        inertia.eval_fk(model, q, np.zeros(model.joint_dof_count), state)
        for site in ("imu", "tool", "framed"):
            s = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, site)
            pose = r.frame_pose(state, site)
            m = data.site_xmat[s].reshape(3, 3)
            from inertia.transforms import quat_from_matrix

            worst = max(worst, np.abs(pose[:3] - data.site_xpos[s]).max(), angle(pose[3:], quat_from_matrix(m)))
    assert worst < 1e-5, worst


def test_actuators_become_effort_limits_and_drive_gains_as_mujoco_defines_them(features):
    path, b, r, _ = features
    mj = mujoco_model(path)
    model = b.finalize(device=DEVICE)
    dof = model.joint_qd_start.numpy()
    ke, kd, effort = model.joint_target_ke.numpy(), model.joint_target_kd.numpy(), model.joint_effort_limit.numpy()
    act = {mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_ACTUATOR, a): a for a in range(mj.nu)}
    # motor: torque = gear * ctrl, ctrl in ctrlrange
    a = act["m1"]
    assert effort[dof[r.joints["shoulder_z"]]] == pytest.approx(mj.actuator_gear[a, 0] * abs(mj.actuator_ctrlrange[a]).max())
    # position: torque = gear (kp ctrl - kp gear q - kv gear qd): stiffness kp gear^2, damping kv gear^2
    a, d = act["p1"], dof[r.joints["shoulder_y"]]
    g = mj.actuator_gear[a, 0]
    assert ke[d] == pytest.approx(-mj.actuator_biasprm[a, 1] * g * g) and kd[d] == pytest.approx(-mj.actuator_biasprm[a, 2] * g * g)
    # velocity: torque = gear (kv ctrl - kv gear qd), force within forcerange
    a, d = act["v1"], dof[r.joints["elbow"]]
    assert kd[d] == pytest.approx(-mj.actuator_biasprm[a, 2]) and effort[d] == pytest.approx(abs(mj.actuator_forcerange[a]).max())
    assert r.extra["actuators"]["m1"] == dict(kind="motor", joint="shoulder_z", gear=50.0, ctrlrange=(-1.0, 1.0))


def _mujoco_collides(mj, g1, g2):
    """MuJoCo's filter for a geom pair: contype / conaffinity, not one welded body, the parent filter on welded
    bodies (not for the world), <exclude>, and never two static geoms."""
    b1, b2 = mj.geom_bodyid[g1], mj.geom_bodyid[g2]
    w1, w2 = mj.body_weldid[b1], mj.body_weldid[b2]
    if w1 == w2:
        return False
    p1, p2 = mj.body_weldid[mj.body_parentid[w1]], mj.body_weldid[mj.body_parentid[w2]]
    if w1 != 0 and w2 != 0 and (w1 == p2 or w2 == p1):
        return False
    if (w1 << 16) + w2 in set(mj.exclude_signature) or (w2 << 16) + w1 in set(mj.exclude_signature):
        return False
    return bool((mj.geom_contype[g1] & mj.geom_conaffinity[g2]) | (mj.geom_contype[g2] & mj.geom_conaffinity[g1]))


def _inertia_collides(model, s1, s2):
    group, mask = model.shape_collision_group.numpy(), model.shape_collision_mask.numpy()
    body = model.shape_body.numpy()
    if not (group[s1] & mask[s2] and group[s2] & mask[s1]):
        return False
    b1, b2 = body[s1], body[s2]
    if b1 == b2 or (b1 < 0 and b2 < 0):
        return False
    if b1 < 0 or b2 < 0:
        return True
    off, ex = model.body_exclusion_offsets.numpy(), model.body_exclusions.numpy()
    return b2 not in ex[off[b1]:off[b1 + 1]]


def test_contact_filter_equals_mujocos_for_every_geom_pair(features):
    """contype / conaffinity (MuJoCo's either-way rule) as collision groups and masks, the parent filter through
    the intermediate body, <exclude>, and a ground plane added later (a contype = conaffinity = 1 geom)."""
    path, b, r, _ = features
    mj = mujoco_model(path)
    ground = b.add_ground_plane(height=-1.0)
    model = b.finalize(device=DEVICE)
    labels = list(model.shape_label)
    geoms = [g for g in range(mj.ngeom) if mj.geom_contype[g] | mj.geom_conaffinity[g]]
    shape = {g: labels.index(mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_GEOM, g)) for g in geoms}
    checked = 0
    for i, g1 in enumerate(geoms):
        for g2 in geoms[i + 1:]:
            expected = _mujoco_collides(mj, g1, g2)
            assert _inertia_collides(model, shape[g1], shape[g2]) == expected, (labels[shape[g1]], labels[shape[g2]])
            checked += expected
        default = bool((mj.geom_contype[g1] & 1) | (mj.geom_conaffinity[g1] & 1)) and mj.geom_bodyid[g1] != 0
        assert _inertia_collides(model, shape[g1], ground) == (default and model.shape_body.numpy()[shape[g1]] >= 0)
    assert checked >= 3  # some pairs do collide (floor-torso, hand-cube, post-head, ...)


def test_visuals_and_warnings(features):
    _, b, r, messages = features
    kinds = [v.kind for v in b.body_visual[r.bodies["base"]]]
    assert kinds.count("box") == 2 and "sphere" in kinds  # torso and the visual-only shell; the head
    assert "shell" not in b.shape_label  # contype = conaffinity = 0: drawn, never collides
    assert sum("<tendon> not imported" in m for m in messages) == 1
    assert any("ellipsoid collision geometry approximated" in m for m in messages)


def test_settotalmass_and_inertiafromgeom_false(tmp_path):
    for k, compiler in enumerate(('<compiler settotalmass="7" angle="radian"/>', '<compiler inertiafromgeom="false"/>')):
        text = f"""<mujoco>{compiler}<worldbody><body name="a"><freejoint name="free"/><geom type="box" size="0.1 0.2 0.3"/>
          <inertial pos="0.05 0 0" mass="2" diaginertia="0.1 0.2 0.3"/>
          <body name="b" pos="0.3 0 0"><joint name="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/>
          <inertial pos="0.2 0 0" mass="1" diaginertia="0.01 0.02 0.02"/></body></body></worldbody></mujoco>"""
        p = tmp_path / f"m{k}.xml"  # a file per model: mujoco_model caches by path
        p.write_text(text)
        mj = mujoco_model(str(p))
        b = inertia.ModelBuilder()
        r = b.add_mjcf(str(p))
        model = b.finalize(device=DEVICE)
        assert model.body_mass.numpy().sum() == pytest.approx(mj.body_mass.sum(), rel=1e-6)
        compare_with_mujoco(mj, model, r, "m.xml", "MJCF compiler")


BAD = {
    "undefined class": ('<worldbody><body><geom class="nope" size="1"/></body></worldbody>', "class 'nope'"),
    "deep free joint": ('<worldbody><body name="a"><geom size="1"/><body name="b"><freejoint/><geom size="1"/></body>'
                        '</body></worldbody>', "body 'b': a free joint must be the only joint of a body of the worldbody"),
    "global coordinates": ('<compiler coordinate="global"/><worldbody/>', "coordinate=\"global\"> is not supported"),
    "missing include": ('<include file="nope.xml"/>', "<include file=\"nope.xml\">"),
    "no size": ('<worldbody><body><geom type="box" size="1 1"/></body></worldbody>', "a box needs 3 size entries"),
    "missing mesh": ('<asset><mesh file="gone.stl"/></asset>', "mesh file not found"),
    "unknown joint": ('<worldbody><body><joint type="screw"/><geom size="1"/></body></worldbody>', "unknown type 'screw'"),
    "actuator target": ('<worldbody><body><joint name="j"/><geom size="1"/></body></worldbody>'
                        '<actuator><motor joint="k"/></actuator>', "joint=\"k\" names no hinge or slide joint"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_mjcf_names_file_and_element(tmp_path, case):
    body, expected = BAD[case]
    p = tmp_path / "bad.xml"
    p.write_text(f"<mujoco>{body}</mujoco>")
    with pytest.raises(MjcfError) as e:
        inertia.ModelBuilder().add_mjcf(str(p))
    assert str(p) in str(e.value) and expected in str(e.value), str(e.value)


def test_recording_draws_geoms_with_their_colours(features, tmp_path):
    from pxr import Usd, UsdGeom

    _, b, r, _ = features
    model = b.finalize(device=DEVICE)
    out = str(tmp_path / "features.usda")
    with inertia.UsdRecorder(out, model) as rec:
        rec.record(model.state())
    stage = Usd.Stage.Open(out)
    shell = UsdGeom.Cube(stage.GetPrimAtPath("/world/bodies/base/visuals/shell/geom"))
    assert shell and tuple(shell.GetDisplayColorAttr().Get()[0]) == pytest.approx((0.5, 0.5, 0.5))
    assert UsdGeom.Imageable(stage.GetPrimAtPath("/world/bodies/base/torso/geom")).ComputePurpose() == "guide"
    hand = stage.GetPrimAtPath("/world/bodies/forearm/visuals/hand/geom")
    assert UsdGeom.Sphere(hand) and np.allclose(UsdGeom.Xformable(hand).GetOrderedXformOps()[0].Get(), (0.03, 0.02, 0.01))
    assert stage.GetPrimAtPath("/world/shapes/floor/geom").IsValid()  # static geometry as before
