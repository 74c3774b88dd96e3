"""URDF import: hand-written robots in tests/data, checked against closed forms, and the stock robots that used to fail.

Known answers: link poses of a cart-pole, a two-link arm and a quadruped's feet at given joint
coordinates (forward kinematics by hand); masses, centres of mass and inertias as written (an
inertial rotated by rpy), from the collision shapes' density (box, sphere, an STL octahedron of
volume 4/3 r^3) and merged across fixed joints (parallel axis by hand); mesh vertex counts and scale;
every malformed file refused with file and element named; what the importer reads (joint dynamics, gains,
mimic, self-collision filter, package.xml lookup, tolerated malformations, visuals, Collada, the USD round
trip). The stock robots that used to fail are in test_urdf_stock.py, the whole pybullet_data corpus against
PyBullet and MuJoCo in test_robot_corpus.py.
"""

from __future__ import annotations

import math
import os
import struct
import warnings

import numpy as np
import pytest

from conftest import DEVICE

import inertia
from inertia.io import urdf

DATA = os.path.join(os.path.dirname(__file__), "data")
CARTPOLE = os.path.join(DATA, "cartpole.urdf")
ARM = os.path.join(DATA, "arm2.urdf")
QUADRUPED = os.path.join(DATA, "quadruped", "urdf", "quadruped.urdf")


def rot_x(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def quat_matrix(q):
    x, y, z, w = (float(v) for v in q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def poses_at(model, values: dict):
    """Body poses (n, 7) after forward kinematics with joint j's coordinates set to ``values[j]``."""
    state = model.state()
    q = state.joint_q.numpy().copy()
    starts = model.joint_q_start.numpy()
    for j, v in values.items():
        q[starts[j]:starts[j + 1]] = v
    inertia.eval_fk(model, q, np.zeros(model.joint_dof_count), state)
    return state.body_q.numpy().astype(np.float64)


def test_rpy_is_fixed_axis_roll_pitch_yaw():
    for rpy in [(0.3, -0.2, 0.5), (1.2, 0.7, -2.9), (0.0, math.pi / 2, 0.0)]:
        expected = rot_z(rpy[2]) @ rot_y(rpy[1]) @ rot_x(rpy[0])
        assert np.allclose(quat_matrix(urdf.quat_from_rpy(*rpy)), expected, atol=1e-12)


def test_cartpole_kinematics_and_mass_properties():
    b = inertia.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing in the cart-pole is unsupported: no warning
        r = urdf.add_urdf(b, CARTPOLE)
    assert r.name == "cartpole" and set(r.links) == {"rail", "cart", "pole"}
    model = b.finalize(device=DEVICE)
    rail, cart, pole = (r.links[n] for n in ("rail", "cart", "pole"))
    # the massless fixed root is kinematic; the others carry their <inertial> as written
    assert b.body_kinematic[rail] and not b.body_kinematic[cart]
    mass, com = model.body_mass.numpy(), model.body_com.numpy()
    assert mass[cart] == pytest.approx(1.0) and mass[pole] == pytest.approx(0.2)
    assert np.allclose(com[pole], [0, 0, 0.5]) and np.allclose(com[cart], 0.0)
    assert np.allclose(np.diag(model.body_inertia.numpy()[pole]), [0.0166867, 0.0166867, 0.00004], rtol=1e-6)
    # joint types, axes, limits (effort / velocity / damping are not imported)
    types = model.joint_type.numpy()
    slider, hinge = r.joints["slider"], r.joints["hinge"]
    assert types[r.root_joint] == 3 and types[slider] == 0 and types[hinge] == 1
    assert np.allclose(model.joint_axis.numpy()[[slider, hinge]], [[1, 0, 0], [0, 1, 0]])
    dof = model.joint_qd_start.numpy()
    lo, hi = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    assert (lo[dof[slider]], hi[dof[slider]]) == (-2.0, 2.0)
    assert np.isinf(lo[dof[hinge]]) and np.isinf(hi[dof[hinge]])  # continuous: no limits
    assert model.joint_target_kd.numpy()[dof[slider]] == 0.0

    for x, theta in [(0.0, 0.0), (0.7, 0.4), (-1.3, -2.2)]:
        q = poses_at(model, {slider: x, hinge: theta})
        assert np.allclose(q[cart, :3], [x, 0, 1.0], atol=1e-6)
        assert np.allclose(q[pole, :3], [x, 0, 1.05], atol=1e-6)
        assert np.allclose(quat_matrix(q[pole, 3:]), rot_y(theta), atol=1e-6)
        tip = q[pole, :3] + quat_matrix(q[pole, 3:]) @ np.array([0, 0, 1.0])
        assert np.allclose(tip, [x + math.sin(theta), 0, 1.05 + math.cos(theta)], atol=1e-6)


def test_imported_cartpole_falls_as_its_equations_of_motion_say():
    """Lagrange's equations of a cart (M) on a frictionless rail with a pole (m, com at l, inertia I about the com):
    (M + m) x'' + m l (cos t t'' - sin t t'^2) = 0,  m l cos t x'' + (I + m l^2) t'' = m g l sin t."""
    b = inertia.ModelBuilder()
    r = urdf.add_urdf(b, CARTPOLE)
    model = b.finalize(device=DEVICE)
    s0, s1 = model.state(), model.state()
    q = s0.joint_q.numpy()
    q[model.joint_q_start.numpy()[r.joints["hinge"]]] = 0.1
    inertia.eval_fk(model, q, np.zeros(model.joint_dof_count), s0)
    solver, control = inertia.SemiImplicitSolver(model), model.control()
    steps, dt = 1000, 2e-4
    for _ in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
    x, theta = s0.joint_q.numpy()[[model.joint_q_start.numpy()[r.joints[n]] for n in ("slider", "hinge")]]

    big_m, m, l, i_pole, g = 1.0, 0.2, 0.5, 0.0166867, 9.81  # as written in cartpole.urdf

    def rate(y):
        _, t, xd, td = y
        a = np.array([[big_m + m, m * l * math.cos(t)], [m * l * math.cos(t), i_pole + m * l * l]])
        xdd, tdd = np.linalg.solve(a, [m * l * math.sin(t) * td * td, m * g * l * math.sin(t)])
        return np.array([xd, td, xdd, tdd])

    y, h = np.array([0.0, 0.1, 0.0, 0.0]), dt / 4  # RK4 in float64
    for _ in range(4 * steps):
        k1 = rate(y)
        k2 = rate(y + h / 2 * k1)
        k3 = rate(y + h / 2 * k2)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + rate(y + h * k3))
    print(f"\ncart-pole after {steps * dt:.1f} s: pole {theta:.6f} rad (reference {y[1]:.6f}), "
          f"cart {x * 1e3:.4f} mm (reference {y[0] * 1e3:.4f})")
    # within 0.3 % of how far the pole fell (35 mrad) and 1 % of how far the cart moved (2.9 mm)
    assert abs(theta - y[1]) < 1e-4 and abs(x - y[0]) < 3e-5


def test_two_link_arm_kinematics_from_a_placed_base():
    b = inertia.ModelBuilder()
    yaw, origin = 0.3, np.array([1.0, 2.0, 0.5])
    base_q = (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2))
    r = b.add_urdf(ARM, xform=(tuple(origin), base_q))  # the ModelBuilder method (SceneImportMixin)
    model = b.finalize(device=DEVICE)
    shoulder, elbow = r.joints["shoulder"], r.joints["elbow"]
    l1, l2 = r.links["link1"], r.links["link2"]
    assert r.links["tip"] == l2 and "tip" not in r.bodies  # welded: folded into link2, its frame kept
    state = model.state()
    for t1, t2 in [(0.0, 0.0), (0.6, -1.1), (-2.0, 1.9)]:
        q = poses_at(model, {shoulder: t1, elbow: t2})
        qs = state.joint_q.numpy()
        qs[r.joint_q["shoulder"]], qs[r.joint_q["elbow"]] = t1, t2
        inertia.eval_fk(model, qs, np.zeros(model.joint_dof_count), state)
        a1, a12 = yaw + t1, yaw + t1 + t2
        p1 = origin + [0, 0, 0.1]
        p2 = p1 + 0.5 * np.array([math.cos(a1), math.sin(a1), 0])
        p_tip = p2 + 0.4 * np.array([math.cos(a12), math.sin(a12), 0])
        assert np.allclose(q[l1, :3], p1, atol=1e-6) and np.allclose(quat_matrix(q[l1, 3:]), rot_z(a1), atol=1e-6)
        assert np.allclose(q[l2, :3], p2, atol=1e-6) and np.allclose(quat_matrix(q[l2, 3:]), rot_z(a12), atol=1e-6)
        tip = r.frame_pose(state, "tip")
        assert np.allclose(tip[:3], p_tip, atol=1e-6) and np.allclose(quat_matrix(tip[3:]), rot_z(a12), atol=1e-6)
    assert b.joint_limit_lower[model.joint_qd_start.numpy()[elbow]] == -2.0


def test_inertial_with_rpy_and_mass_from_collision_density():
    b = inertia.ModelBuilder()
    r = urdf.add_urdf(b, ARM, density=500.0)
    model = b.finalize(device=DEVICE)
    mass, com, inertia_ = (a.numpy().astype(np.float64) for a in (model.body_mass, model.body_com,
                                                                  model.body_inertia))
    l1, l2, tip = r.links["link1"], r.links["link2"], r.links["tip"]
    # link1: the inertia tensor written in the inertial frame, rotated by Rz(0.5) Ry(-0.2) Rx(0.3)
    local = np.array([[0.002, 0.0002, -0.0001], [0.0002, 0.03, 0.0003], [-0.0001, 0.0003, 0.031]])
    rot = rot_z(0.5) @ rot_y(-0.2) @ rot_x(0.3)
    print(f"\nlink1 inertia (rotated by rpy) max error {np.abs(inertia_[l1] - rot @ local @ rot.T).max():.2e}")
    assert np.allclose(inertia_[l1], rot @ local @ rot.T, atol=1e-8)
    assert mass[l1] == pytest.approx(1.5) and np.allclose(com[l1], [0.25, 0, 0])
    # link2: no inertial, a 0.4 x 0.05 x 0.05 m box at 500 kg/m^3 centred 0.2 m out, and the welded tip (a
    # sphere of 2 cm at 0.4 m) folded into it: masses add, the inertia about the joint com by parallel axes
    m2, mt = 500.0 * 0.4 * 0.05 * 0.05, 500.0 * 4 / 3 * math.pi * 0.02**3
    c = (m2 * 0.2 + mt * 0.4) / (m2 + mt)
    izz = m2 * (0.4**2 + 0.05**2) / 12 + m2 * (0.2 - c) ** 2 + 0.4 * mt * 0.02**2 + mt * (0.4 - c) ** 2
    assert tip == l2 and mass[l2] == pytest.approx(m2 + mt, rel=1e-6)
    assert np.allclose(com[l2], [c, 0, 0], atol=1e-7) and inertia_[l2][2, 2] == pytest.approx(izz, rel=1e-5)
    # merge_fixed=False keeps the tip a body of its own (welded by a fixed joint), weighed alone
    b2 = inertia.ModelBuilder()
    r2 = urdf.add_urdf(b2, ARM, density=500.0, merge_fixed=False)
    m = b2.finalize(device=DEVICE).body_mass.numpy()
    assert m[r2.bodies["tip"]] == pytest.approx(mt, rel=1e-6) and m[r2.bodies["link2"]] == pytest.approx(m2, rel=1e-6)


def test_quadruped_feet_and_meshes():
    b = inertia.ModelBuilder()
    # package://quadruped/... is found in the file's ancestors (tests/data/quadruped), no package_paths needed;
    # merge_fixed=False keeps the welded feet bodies of their own, weighed from their meshes
    r = urdf.add_urdf(b, QUADRUPED, floating=True, merge_fixed=False)
    model = b.finalize(device=DEVICE)
    assert model.body_count == 13 and model.joint_type.numpy()[r.root_joint] == 4  # free base
    # the FL shin's OBJ cube: 8 vertices, 12 triangles, scaled to 0.03 x 0.03 x 0.2 m
    shape = r.shapes["FL_shin"][0]
    v, f = b.shape_mesh[shape]
    assert v.shape == (8, 3) and f.shape == (36,)
    assert np.allclose(v.max(axis=0), [0.015, 0.015, 0.1]) and np.allclose(v.min(axis=0), [-0.015, -0.015, -0.1])
    assert b.shape_scale[shape] == (0.03, 0.03, 0.2)
    # the HR foot's STL octahedron (6 vertices, 8 faces, radius 0.025 m): volume 4/3 r^3 at 1000 kg/m^3
    foot = r.shapes["HR_foot"][0]
    assert b.shape_mesh[foot][0].shape == (6, 3) and len(b.shape_mesh[foot][1]) == 24
    assert model.body_mass.numpy()[r.links["HR_foot"]] == pytest.approx(1000.0 * 4 / 3 * 0.025**3, rel=1e-6)

    base_p, yaw, pitch = np.array([0.2, -0.1, 0.6]), 0.4, 0.1
    rb = rot_z(yaw) @ rot_y(pitch)
    qb = (-math.sin(pitch / 2) * math.sin(yaw / 2), math.sin(pitch / 2) * math.cos(yaw / 2),
          math.cos(pitch / 2) * math.sin(yaw / 2), math.cos(pitch / 2) * math.cos(yaw / 2))
    assert np.allclose(quat_matrix(qb), rb)
    angles = {"FL": (0.5, -1.0), "FR": (-0.3, -0.2), "HL": (0.9, -1.8), "HR": (0.0, 0.0)}
    values = {r.root_joint: list(base_p) + list(qb)}
    for leg, (th, tk) in angles.items():
        values[r.joints[f"{leg}_hip"]], values[r.joints[f"{leg}_knee"]] = th, tk
    q = poses_at(model, values)
    # merged (the default): 9 bodies, and each foot a named frame of its shin at the same place
    bm = inertia.ModelBuilder()
    rm = urdf.add_urdf(bm, QUADRUPED, floating=True)
    merged = bm.finalize(device=DEVICE)
    assert merged.body_count == 9 and rm.links["HR_foot"] == rm.bodies["HR_shin"]
    sm = merged.state()
    qm = sm.joint_q.numpy()
    for name, j in r.joints.items():
        if j in values and name in rm.joint_q:
            qm[rm.joint_q[name]] = values[j]
    qm[rm.joint_q["torso_free_base"]] = values[r.root_joint]
    inertia.eval_fk(merged, qm, np.zeros(merged.joint_dof_count), sm)
    for leg, sx, sy in [("FL", 1, 1), ("FR", 1, -1), ("HL", -1, 1), ("HR", -1, -1)]:
        assert np.allclose(rm.frame_pose(sm, f"{leg}_foot"), q[r.links[f"{leg}_foot"]], atol=2e-6)
    for leg, sx, sy in [("FL", 1, 1), ("FR", 1, -1), ("HL", -1, 1), ("HR", -1, -1)]:
        th, tk = angles[leg]
        hip = np.array([0.3 * sx, 0.15 * sy, -0.05])
        foot_local = hip + [-0.2 * math.sin(th) - 0.2 * math.sin(th + tk), 0,
                            -0.2 * math.cos(th) - 0.2 * math.cos(th + tk)]
        expected = base_p + rb @ foot_local
        got = q[r.links[f"{leg}_foot"], :3]
        print(f"{leg} foot {np.round(got, 4)} expected {np.round(expected, 4)}")
        assert np.allclose(got, expected, atol=2e-6)


# --------------------------------------------------------------------------- mesh readers
def test_obj_reader_triangulates_polygons_and_takes_negative_indices(tmp_path):
    p = tmp_path / "poly.obj"
    p.write_text("o thing\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0.5 1.5 0\n"
                 "f 1/1/1 2/2/1 3/3/1 5 4   # a pentagon\nv 0 0 1\nf -1 -5 -4\n")
    v, f = urdf.read_obj(str(p))
    assert v.shape == (6, 3) and f.tolist() == [[0, 1, 2], [0, 2, 4], [0, 4, 3], [5, 1, 2]]


def test_binary_and_ascii_stl_read_the_same_octahedron(tmp_path):
    v_a, f_a = urdf.read_stl(os.path.join(DATA, "quadruped", "meshes", "octahedron.stl"))
    # write the same triangles as binary STL (header starting with "solid", as some exporters do)
    p = tmp_path / "octa.stl"
    tris = v_a[f_a]
    with open(p, "wb") as fh:
        fh.write(b"solid but binary".ljust(80, b" ") + struct.pack("<I", len(tris)))
        for t in tris:
            fh.write(struct.pack("<12fH", 0, 0, 0, *t.reshape(-1), 0))
    v_b, f_b = urdf.read_stl(str(p))
    assert v_a.shape == (6, 3) and f_a.shape == (8, 3)
    assert np.array_equal(v_a, v_b) and np.array_equal(f_a, f_b)
    # outward winding: the signed volume is that of the octahedron, 4/3
    a, b_, c = tris[:, 0], tris[:, 1], tris[:, 2]
    assert np.einsum("ij,ij->i", a, np.cross(b_, c)).sum() / 6 == pytest.approx(4 / 3)


# --------------------------------------------------------------------------- errors
ARM_TEXT = open(ARM).read()


def _write(tmp_path, text, name="bad.urdf"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


LINK = '<link name="{0}"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial></link>'


def _robot(*parts):
    return "<robot name='r'>" + "".join(parts) + "</robot>"


def _joint(name, jtype, parent, child, extra=""):
    return f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>{extra}</joint>'


BAD = {
    "not xml": ("<robot><link name='a'>", "not well-formed"),
    "root tag": ("<model/>", "expected <robot>"),
    "link name": (_robot("<link/>"), "a <link>: <link> is missing the attribute 'name'"),
    "joint type": (_robot(LINK.format("a"), LINK.format("b"), _joint("j", "hinge", "a", "b")),
                   "joint 'j': unknown type 'hinge'"),
    "planar": (_robot(LINK.format("a"), LINK.format("b"), _joint("j", "planar", "a", "b")),
               "joint 'j': type 'planar' is not supported"),
    "unknown parent": (_robot(LINK.format("a"), LINK.format("b"), _joint("j", "fixed", "nope", "b")),
                       "joint 'j': <parent link=\"nope\"> names an unknown link"),
    "missing child": (_robot(LINK.format("a"), '<joint name="j" type="fixed"><parent link="a"/></joint>'),
                      "joint 'j': has no <child> element"),
    "two roots": (_robot(LINK.format("a"), LINK.format("b")), "exactly one root link"),
    "two parents": (_robot(LINK.format("a"), LINK.format("b"), LINK.format("c"), _joint("j1", "fixed", "a", "c"),
                           _joint("j2", "fixed", "b", "c")), "link 'c' is already the child of joint 'j1'"),
    "no limit": (_robot(LINK.format("a"), LINK.format("b"), _joint("j", "revolute", "a", "b")),
                 "joint 'j': a revolute joint needs a <limit>"),
    "bad number": (_robot(LINK.format("a"), LINK.format("b"),
                          _joint("j", "fixed", "a", "b", '<origin xyz="0 0 x"/>')),
                   "joint 'j': <origin xyz=\"0 0 x\"> is not 3 number(s)"),
    "short vector": (_robot(LINK.format("a"), LINK.format("b"),
                            _joint("j", "revolute", "a", "b", '<axis xyz="0 1"/><limit lower="0" upper="1"/>')),
                     "joint 'j': <axis xyz=\"0 1\"> must be 3 finite number(s)"),
    "bad effort": (_robot(LINK.format("a"), LINK.format("b"),
                          _joint("j", "revolute", "a", "b", '<limit lower="0" upper="1" effort="lots"/>')),
                   "joint 'j': <limit effort=\"lots\"> is not 1 number(s)"),
    "floating deep": (_robot(LINK.format("a"), LINK.format("b"), LINK.format("c"), _joint("j1", "fixed", "a", "b"),
                             _joint("j2", "floating", "b", "c")), "joint 'j2': floating joints are supported only"),
    "massless link": (_robot(LINK.format("a"), '<link name="b"/>',
                             _joint("j", "revolute", "a", "b", '<limit lower="0" upper="1"/>')),
                      "link 'b' has no mass and no link below it has any"),
    "bad inertia": (_robot('<link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="-1"/>'
                           '</inertial></link>'), "link 'a': <inertia> must be positive (semi)definite"),
    "no inertia": (_robot('<link name="a"><inertial><mass value="1"/></inertial></link>'),
                   "link 'a': <inertial> has no <inertia>"),
    "box size": (_robot('<link name="a"><collision><geometry><box/></geometry></collision></link>'),
                 "link 'a' <collision> 0: <box> is missing the attribute 'size'"),
    "negative radius": (_robot('<link name="a"><collision><geometry><sphere radius="-1"/></geometry></collision>'
                               '</link>'), "link 'a' <collision> 0: sphere radius must be > 0"),
    "unknown geometry": (_robot('<link name="a"><collision><geometry><cone/></geometry></collision></link>'),
                         "link 'a' <collision> 0: unsupported geometry <cone>"),
    "mesh format": (_robot('<link name="a"><collision><geometry><mesh filename="m.ply"/></geometry></collision>'
                           '</link>'), "unsupported format '.ply'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_urdf_names_file_and_element(tmp_path, case):
    text, expected = BAD[case]
    path = _write(tmp_path, text)
    if case == "mesh format":
        (tmp_path / "m.ply").write_text("ply")
    with pytest.raises(urdf.UrdfError) as e:
        urdf.add_urdf(inertia.ModelBuilder(), path)
    assert path in str(e.value) and expected in str(e.value), str(e.value)


def test_missing_mesh_lists_the_paths_tried(tmp_path):
    text = ARM_TEXT.replace('<sphere radius="0.02"/>', '<mesh filename="package://tools/meshes/tip.stl"/>')
    path = _write(tmp_path, text)
    with pytest.raises(urdf.UrdfError) as e:
        urdf.add_urdf(inertia.ModelBuilder(), path, package_paths=[str(tmp_path / "ws"), str(tmp_path / "tools")])
    msg = str(e.value)
    print(f"\n{msg}")
    assert path in msg and "link 'tip' <collision> 0" in msg and "package://tools/meshes/tip.stl" in msg
    assert str(tmp_path / "ws" / "tools" / "meshes" / "tip.stl") in msg
    assert str(tmp_path / "tools" / "meshes" / "tip.stl") in msg  # a package folder given directly


def test_malformed_mesh_file_is_named(tmp_path):
    (tmp_path / "tip.obj").write_text("v 0 0 0\nv 1 0 0\nf 1 2 7\n")
    path = _write(tmp_path, ARM_TEXT.replace('<sphere radius="0.02"/>', '<mesh filename="tip.obj"/>'))
    with pytest.raises(urdf.UrdfError) as e:
        urdf.add_urdf(inertia.ModelBuilder(), path)
    assert path in str(e.value) and "link 'tip'" in str(e.value) and "tip.obj:3" in str(e.value)




# --------------------------------------------------------------------------- what the importer reads
def test_joint_dynamics_limits_gains_and_coordinate_slices(tmp_path):
    text = _robot(LINK.format("a"), LINK.format("b"), LINK.format("c"),
                  _joint("hinge", "revolute", "a", "b", '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="30" '
                         'velocity="4"/><dynamics damping="0.5" friction="0.2"/>'),
                  _joint("slide", "prismatic", "b", "c", '<limit lower="0" upper="0.3" effort="0" velocity="0"/>'))
    path = _write(tmp_path, text)
    b = inertia.ModelBuilder()
    r = b.add_urdf(path, joint_target_ke={"hinge": 50.0}, joint_target_kd=2.0)
    model = b.finalize(device=DEVICE)
    h, s = (model.joint_qd_start.numpy()[r.joints[n]] for n in ("hinge", "slide"))
    assert model.joint_damping.numpy()[h] == 0.5 and model.joint_friction.numpy()[h] == pytest.approx(0.2)
    assert model.joint_effort_limit.numpy()[h] == 30.0 and model.joint_velocity_limit.numpy()[h] == 4.0
    assert np.isinf(model.joint_effort_limit.numpy()[s]) and np.isinf(model.joint_velocity_limit.numpy()[s])
    assert model.joint_target_ke.numpy()[[h, s]].tolist() == [50.0, 0.0]  # by name; others 0
    assert model.joint_target_kd.numpy()[[h, s]].tolist() == [2.0, 2.0]  # a number: every joint
    starts, dstarts = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    for name, j in r.joints.items():
        assert r.joint_q[name] == slice(starts[j], starts[j + 1]) and r.joint_qd[name] == slice(dstarts[j], dstarts[j + 1])
    with pytest.raises(urdf.UrdfError, match=r"joint_target_ke: no joints named \['knee'\]"):
        inertia.ModelBuilder().add_urdf(path, joint_target_ke={"knee": 1.0})


def test_mimic_is_a_declared_coupling(tmp_path):
    text = ARM_TEXT.replace('<axis xyz="0 0 1"/>\n    <limit lower="-2.0"',
                            '<axis xyz="0 0 1"/><mimic joint="shoulder" multiplier="-0.5" offset="0.1"/>\n'
                            '    <limit lower="-2.0"')
    b = inertia.ModelBuilder()
    r = urdf.add_urdf(b, _write(tmp_path, text))
    model = b.finalize(device=DEVICE)
    e = r.joints["elbow"]
    assert model.joint_mimic_joint.numpy()[e] == r.joints["shoulder"]
    assert model.joint_mimic_multiplier.numpy()[e] == -0.5 and model.joint_mimic_offset.numpy()[e] == pytest.approx(0.1)
    bad = text.replace('mimic joint="shoulder"', 'mimic joint="hip"')
    with pytest.raises(urdf.UrdfError, match="names no joint"):
        urdf.add_urdf(inertia.ModelBuilder(), _write(tmp_path, bad, "bad2.urdf"))


def test_no_self_collision_by_default_adjacent_links_never(tmp_path):
    """Two arms whose links overlap: within one robot nothing collides unless enable_self_collisions=True (and
    then only non-adjacent links); two robots collide with each other."""
    box = '<collision><geometry><box size="0.2 0.2 0.2"/></geometry></collision>'
    link = '<link name="{0}"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>' + box + '</link>'
    text = _robot(link.format("a"), link.format("b"), link.format("c"),
                  _joint("j1", "revolute", "a", "b", '<origin xyz="0.1 0 0"/><limit lower="-1" upper="1"/>'),
                  _joint("j2", "revolute", "b", "c", '<origin xyz="-0.15 0 0"/><limit lower="-1" upper="1"/>'))
    path = _write(tmp_path, text)

    def rigid_contacts(**kwargs):
        b = inertia.ModelBuilder()
        b.add_urdf(path, **kwargs)
        if kwargs.pop("second", False):
            pass
        model = b.finalize(device=DEVICE)
        contacts = model.contacts()
        model.collide(model.state(), contacts)
        return model, contacts.counts()["rigid_pairs"]

    assert rigid_contacts()[1] == 0
    model, n = rigid_contacts(enable_self_collisions=True)
    assert n > 0  # a and c overlap (0.05 m apart); a-b and b-c are joined: never
    b = inertia.ModelBuilder()
    b.add_urdf(path)
    b.add_urdf(path, xform=((0.05, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)))
    model = b.finalize(device=DEVICE)
    contacts = model.contacts()
    model.collide(model.state(), contacts)
    assert contacts.counts()["rigid_pairs"] > 0  # the two robots meet


def test_package_found_by_its_package_xml_in_the_file_ancestors(tmp_path):
    pkg = tmp_path / "src" / "robot_pkg"  # the folder's name is not the package's
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "meshes").mkdir()
    (pkg / "package.xml").write_text("<package><name>my_robot_description</name></package>")
    octa = open(os.path.join(DATA, "quadruped", "meshes", "octahedron.stl")).read()
    (pkg / "meshes" / "tip.stl").write_text(octa)
    text = ARM_TEXT.replace('<sphere radius="0.02"/>', '<mesh filename="package://my_robot_description/meshes/tip.stl"/>')
    (pkg / "urdf" / "arm.urdf").write_text(text)
    b = inertia.ModelBuilder()
    r = b.add_urdf(str(pkg / "urdf" / "arm.urdf"))
    assert b.shape_mesh[r.shapes["link2"][-1]][0].shape == (6, 3)


def test_malformed_numbers_and_inverted_limits_are_read_as_pybullet_reads_them(tmp_path):
    text = _robot(LINK.format("a"), LINK.format("b"),
                  _joint("j", "revolute", "a", "b", '<origin xyz="0.07, 0, -0.69" rpy="0 0 0 0"/>'
                         '<limit lower="1" upper="-1."/>'))
    b = inertia.ModelBuilder()
    with pytest.warns(UserWarning) as caught:
        r = b.add_urdf(_write(tmp_path, text))
    messages = " | ".join(str(w.message) for w in caught)
    assert "malformed number tolerated" in messages and "lower > upper tolerated" in messages
    model = b.finalize(device=DEVICE)
    j = r.joints["j"]
    assert np.allclose(np.array(model.joint_X_p.numpy()[j][:3]), [0.07, 0, -0.69])
    assert np.isinf(model.joint_limit_lower.numpy()[model.joint_qd_start.numpy()[j]])


def test_visuals_are_imported_with_their_colours(tmp_path):
    text = ARM_TEXT.replace('<link name="link2">', '<link name="link2"><visual><origin xyz="0.2 0 0"/><geometry>'
                            '<box size="0.4 0.06 0.06"/></geometry><material name="red"><color rgba="1 0 0 1"/>'
                            '</material></visual>')
    b = inertia.ModelBuilder()
    r = b.add_urdf(_write(tmp_path, text))
    (vis,) = b.body_visual[r.bodies["link2"]]
    assert vis.kind == "box" and np.allclose(vis.size, (0.2, 0.03, 0.03)) and vis.color == (1.0, 0.0, 0.0, 1.0)
    assert np.allclose(vis.xform[0], (0.2, 0, 0))
    b2 = inertia.ModelBuilder()
    r2 = b2.add_urdf(_write(tmp_path, text), load_visuals=False)
    assert b2.body_visual[r2.bodies["link2"]] == ()


def test_collada_meshes_through_the_optional_extra(tmp_path, monkeypatch):
    trimesh = pytest.importorskip("trimesh")
    pytest.importorskip("collada")
    box = trimesh.creation.box(extents=(0.1, 0.2, 0.3))
    (tmp_path / "tip.dae").write_bytes(trimesh.exchange.dae.export_collada(box))
    text = ARM_TEXT.replace('<sphere radius="0.02"/>', '<mesh filename="tip.dae"/>')
    path = _write(tmp_path, text)
    b = inertia.ModelBuilder()
    r = b.add_urdf(path)
    v, f = b.shape_mesh[r.shapes["link2"][-1]]
    assert len(f) == 36 and np.allclose(v.max(axis=0) - v.min(axis=0), (0.1, 0.2, 0.3), atol=1e-6)
    monkeypatch.setitem(__import__("sys").modules, "trimesh", None)  # as if the extra were not installed
    with pytest.raises(urdf.UrdfError, match=r'pip install "inertia\[collada\]"'):
        inertia.ModelBuilder().add_urdf(path)


def test_self_collision_filter_and_mimic_round_trip_through_usd(tmp_path):
    """save_usd / add_usd keep an imported robot's excluded body pairs (FilteredPairsAPI) and its mimic coupling."""
    text = ARM_TEXT.replace('<axis xyz="0 0 1"/>\n    <limit lower="-2.0"',
                            '<axis xyz="0 0 1"/><mimic joint="shoulder" multiplier="2" offset="-0.3"/>\n'
                            '    <limit lower="-2.0"')
    b = inertia.ModelBuilder()
    r = b.add_urdf(_write(tmp_path, text))
    assert b.body_collision_exclude[r.bodies["base"]] == (r.bodies["link1"], r.bodies["link2"])
    for source in (b, b.finalize(device=DEVICE)):
        path = inertia.save_usd(source, str(tmp_path / "arm.usda"))
        b2 = inertia.ModelBuilder()
        b2.add_usd(path)
        m1, m2 = b.finalize(device=DEVICE), b2.finalize(device=DEVICE)
        for name in ("body_exclusion_offsets", "body_exclusions", "joint_mimic_joint", "joint_mimic_multiplier",
                     "joint_mimic_offset"):
            assert np.allclose(getattr(m1, name).numpy(), getattr(m2, name).numpy()), name


def test_links_without_inertial_weigh_their_geometry_as_mujoco_does():
    """arm2's link2 and welded tip have no <inertial>: their collision box and sphere at 1000 kg/m^3, folded
    together, equal MuJoCo's URDF parse (inertiafromgeom="auto", fusestatic) in mass, centre of mass, principal
    inertias and forward kinematics."""
    mujoco = pytest.importorskip("mujoco")
    from robot_reference import compare_with_mujoco, mujoco_model

    b = inertia.ModelBuilder()
    r = b.add_urdf(ARM)
    assert compare_with_mujoco(mujoco_model(ARM), b.finalize(device=DEVICE), r, "arm2.urdf",
                               "URDF vs MuJoCo") == 2
