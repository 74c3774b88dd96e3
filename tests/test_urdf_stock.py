"""The stock robots (pybullet_data) that failed to import, each with its documented behaviour, and a recording
that draws a robot by its visual meshes.

kuka_iiwa's massless root (kinematic, its open mesh never weighed), franka_panda's package:// meshes,
massless links and mimic (the merged grasp target's pose against PyBullet's), laikago's zero inertias (against
trimesh's mass properties of the collision meshes, an independent implementation), humanoid's stray NUL byte.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest

from conftest import DEVICE

import inertia
from inertia.io import urdf
from test_urdf import quat_matrix, rot_x, rot_y, rot_z

pybullet_data = pytest.importorskip("pybullet_data")
PB = pybullet_data.getDataPath()


def _import(path, **kwargs):
    b = inertia.ModelBuilder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = urdf.add_urdf(b, path, **kwargs)
    return b, r, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_kuka_iiwa_massless_fixed_root_is_kinematic_and_needs_no_mesh_mass():
    """kuka_iiwa/model.urdf: link_0 has <mass value="0"/> and an open collision mesh; it becomes a kinematic
    body whose mesh is never weighed (it used to fail in finalize: 'mesh is not closed')."""
    from inertia.builder import mass_properties

    path = os.path.join(PB, "kuka_iiwa", "model.urdf")
    b, r, _ = _import(path)
    root = r.bodies["lbr_iiwa_link_0"]
    with pytest.raises(ValueError, match="not closed"):  # what finalize used to trip over
        mass_properties.mesh(1000.0, *b.shape_mesh[r.shapes["lbr_iiwa_link_0"][0]])
    model = b.finalize(device=DEVICE)
    assert model.body_mass.numpy()[root] == 0.0 and model.body_inv_mass.numpy()[root] == 0.0
    s0, s1 = model.state(), model.state()
    q0 = s0.body_q.numpy().copy()
    solver = inertia.SemiImplicitSolver(model)
    for _ in range(100):
        solver.step(s0, s1, None, None, 2e-4)
        s0, s1 = s1, s0
    q = s0.body_q.numpy()
    assert np.isfinite(q).all() and np.array_equal(q[root], q0[root])  # the base stays put; the arm falls
    assert np.abs(q - q0).max() > 1e-6


def test_franka_panda_resolves_its_meshes_merges_massless_links_and_declares_the_mimic():
    """franka_panda/panda.urdf: package://meshes/... is found next to the file (no package_paths), the massless
    panda_link8 and panda_grasptarget fold into their parents with their frames kept, and the second finger's
    <mimic> is a declared coupling (no warning)."""
    pybullet = pytest.importorskip("pybullet")
    path = os.path.join(PB, "franka_panda", "panda.urdf")
    b, r, messages = _import(path)
    assert not [m for m in messages if "mimic" in m]
    model = b.finalize(device=DEVICE)
    assert r.links["panda_link8"] == r.links["panda_hand"] == r.links["panda_grasptarget"] == r.bodies["panda_link7"]
    assert "panda_hand_joint" not in r.joints and model.body_count == 10  # 13 links, 3 folded
    j1, j2 = r.joints["panda_finger_joint1"], r.joints["panda_finger_joint2"]
    assert model.joint_mimic_joint.numpy()[j2] == j1 and model.joint_mimic_joint.numpy()[j1] == -1
    assert model.joint_mimic_multiplier.numpy()[j2] == 1.0 and model.joint_mimic_offset.numpy()[j2] == 0.0
    # the grasp target's pose at a joint configuration equals PyBullet's link frame there
    cid = pybullet.connect(pybullet.DIRECT)
    try:
        body = pybullet.loadURDF(path, useFixedBase=True, physicsClientId=cid)
        q = {"panda_joint1": 0.3, "panda_joint2": -0.5, "panda_joint4": -2.0, "panda_joint6": 1.5,
             "panda_joint7": 0.7}
        state = model.state()
        qs = state.joint_q.numpy()
        target = None
        for k in range(pybullet.getNumJoints(body, physicsClientId=cid)):
            info = pybullet.getJointInfo(body, k, physicsClientId=cid)
            name = info[1].decode()
            if name in q:
                pybullet.resetJointState(body, k, q[name], physicsClientId=cid)
                qs[r.joint_q[name]] = q[name]
            if info[12].decode() == "panda_grasptarget":
                target = k
        p_ref, q_ref = pybullet.getLinkState(body, target, computeForwardKinematics=True, physicsClientId=cid)[4:6]
    finally:
        pybullet.disconnect(cid)
    inertia.eval_fk(model, qs, np.zeros(model.joint_dof_count), state)
    pose = r.frame_pose(state, "panda_grasptarget")
    assert np.allclose(pose[:3], p_ref, atol=1e-6)
    rel = quat_matrix(pose[3:] / np.linalg.norm(pose[3:])).T @ quat_matrix(q_ref)
    assert np.abs(rel - np.eye(3)).max() < 1e-6  # float32 rotations


def test_laikago_zero_inertias_are_estimated_from_the_collision_meshes_with_one_warning():
    """laikago/laikago_toes.urdf writes zero tensors for all 13 links: each becomes its collision mesh's inertia
    (trimesh's mass properties, an independent implementation; the open chassis mesh by its convex hull),
    scaled to the link's mass and moved to the written centre of mass; one warning names them."""
    trimesh = pytest.importorskip("trimesh")
    from inertia.builder import mass_properties
    from inertia.io.meshes import convex_hull

    path = os.path.join(PB, "laikago", "laikago_toes.urdf")
    b, r, messages = _import(path)
    replaced = [m for m in messages if "not positive definite" in m]
    assert len(replaced) == 1 and "13x" in replaced[0] and len(r.inertia_replaced) == 13
    model = b.finalize(device=DEVICE)
    inertia_ = model.body_inertia.numpy().astype(np.float64)
    import xml.etree.ElementTree as ET

    links = {el.get("name"): el.find("inertial") for el in ET.parse(path).getroot().findall("link")}
    written = {name: (float(el.find("mass").get("value")), [float(x) for x in el.find("origin").get("xyz").split()])
               for name, el in links.items() if name in ("chassis", "FR_hip_motor", "FR_upper_leg")}
    meshes = {"chassis": ("chassis_vhacd_mod.obj", (0.0, 0.0, 0.043794), (-1.57, 0.0, 0.0)),
              "FR_hip_motor": ("hip_motor_mirror.stl", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
              "FR_upper_leg": ("upper_leg_right_vhacd.obj", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))}
    for link, (fname, xyz, rpy) in meshes.items():
        v, f = (urdf.read_obj if fname.endswith(".obj") else urdf.read_stl)(os.path.join(PB, "laikago", fname))
        try:  # the import's rule: a mesh that is not closed counts by its convex hull
            mass_properties.mesh(1.0, v, f)
            mesh = trimesh.Trimesh(v, f, process=False)
        except ValueError:  # the chassis: every vertex lies inside the hull (on or below each face's plane)
            hull = trimesh.Trimesh(v, convex_hull(v), process=False)
            assert hull.is_watertight and hull.is_winding_consistent and hull.volume > 0
            heights = np.einsum("vfk,fk->vf", v[:, None, :] - hull.triangles[None, :, 0], hull.face_normals)
            assert heights.max() < 1e-9
            mesh = hull
        mesh.density = 1.0
        rot = rot_z(rpy[2]) @ rot_y(rpy[1]) @ rot_x(rpy[0])
        com_g = rot @ mesh.center_mass + np.array(xyz)
        i_g = rot @ mesh.moment_inertia @ rot.T
        mass, com = written[link]
        d = np.array(com) - com_g
        expected = mass / mesh.mass * i_g + mass * (d @ d * np.eye(3) - np.outer(d, d))
        got = inertia_[r.bodies[link]]
        print(f"\n{link}: estimated inertia {np.round(np.linalg.eigvalsh(got), 6)}, max rel error "
              f"{np.abs(got - expected).max() / np.abs(expected).max():.1e}")
        assert np.allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


def test_humanoid_with_a_stray_nul_after_robot_imports_with_a_warning():
    """humanoid/humanoid.urdf ends with a NUL byte after </robot> (PyBullet loads it); its spherical joints
    (PyBullet's extension) are ball joints."""
    b, r, messages = _import(os.path.join(PB, "humanoid", "humanoid.urdf"))
    assert any("bytes after </robot> tolerated" in m for m in messages)
    model = b.finalize(device=DEVICE)
    assert (model.joint_type.numpy() == 2).sum() == 8 and model.joint_type.numpy()[r.joints["neck"]] == 2



def test_recording_draws_the_robot_by_its_visuals_and_keeps_collision_as_a_guide(tmp_path):
    """franka_panda in USD: each link's visual OBJ (its own vertices, not the collision hull) under the body, the
    collision shapes tagged purpose="guide"; the body poses are time-sampled as before."""
    from pxr import Usd, UsdGeom

    path = os.path.join(PB, "franka_panda", "panda.urdf")
    b, r, _ = _import(path)
    model = b.finalize(device=DEVICE)
    out = str(tmp_path / "panda.usda")
    s0 = model.state()
    with inertia.UsdRecorder(out, model, fps=30) as rec:
        rec.record(s0)
    stage = Usd.Stage.Open(out)
    link1 = "/world/bodies/panda_link1"
    visual = UsdGeom.Mesh(stage.GetPrimAtPath(f"{link1}/visuals/panda_link1_visual_0/geom"))
    v_file, _ = urdf.read_obj(os.path.join(PB, "franka_panda", "meshes", "visual", "link1.obj"))
    points = np.array(visual.GetPointsAttr().Get())
    assert len(points) == len(v_file) and np.allclose(points, v_file, atol=1e-6)
    assert UsdGeom.Imageable(visual.GetPrim()).ComputePurpose() == UsdGeom.Tokens.default_
    collision = stage.GetPrimAtPath(f"{link1}/panda_link1_collision_0/geom")
    assert UsdGeom.Imageable(collision).ComputePurpose() == UsdGeom.Tokens.guide
    # the merged hand's visual sits under panda_link7, where the hand is (rotated -45 deg about z at link8)
    hand = [p for p in stage.GetPrimAtPath("/world/bodies/panda_link7/visuals").GetChildren()
            if p.GetName().startswith("panda_hand")]
    assert len(hand) == 1
    x = UsdGeom.Xformable(hand[0]).GetOrderedXformOps()
    assert np.allclose(np.array(x[0].Get()), [0, 0, 0.107], atol=1e-6)
