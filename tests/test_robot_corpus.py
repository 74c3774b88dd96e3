"""Real robots, checked against the loaders people use: every URDF under ``pybullet_data`` and every MJCF under
Gymnasium's ``envs/mujoco/assets``.

URDF (reference: PyBullet's own parse, ``URDF_USE_INERTIA_FROM_FILE``; MuJoCo's where it loads the file):
every file PyBullet loads imports, every file it refuses is refused with a :class:`inertia.UrdfError`.
Per body, the mass, centre of mass and principal inertias equal PyBullet's links merged here in float64
(the links our import folds into one body: masses summed, inertias moved to the common centre of mass by
the parallel-axis theorem); joint types, axes, limits, effort / velocity limits, damping and friction equal
getJointInfo's; the pose of every link frame (merged ones through ``RobotImport.frame_pose``) equals
PyBullet's forward kinematics at 20 random joint configurations within 1e-5 m and 1e-5 rad; and a short
passive simulation in the SemiImplicitSolver stays finite. Documented differences are skipped by rule:
links without ``<inertial>`` (PyBullet gives them 1 kg; here their collision geometry's mass at 1000
kg/m^3, MuJoCo's rule: checked against MuJoCo in ``test_urdf.py``), tensors that are not positive definite
(replaced here by an estimate from the collision geometry, checked in ``test_urdf_stock.py``), tensors that
break the triangle inequality (PyBullet zeroes them; kept here as written), and a joint origin left as an
unexpanded xacro ``$(optenv NAME default)`` (PyBullet reads zeros, the import the default). MJCF (reference:
``mujoco.MjModel``, ``mj_kinematics``): every Gymnasium model imports; bodies (welded ones merged as here),
joints with armature, damping and friction loss, and forward kinematics agree.
"""

from __future__ import annotations

import functools
import glob
import math
import os
import warnings
import zlib

import numpy as np
import pytest

from conftest import DEVICE

import inertia
from inertia.transforms import compose, quat_to_matrix
from robot_reference import (FK_TOL, FREE, SAMPLES, WORST, angle, compare_with_mujoco, mujoco_model, random_quat,
                             record)

pybullet = pytest.importorskip("pybullet")
pybullet_data = pytest.importorskip("pybullet_data")
mujoco = pytest.importorskip("mujoco")

PB_DATA = pybullet_data.getDataPath()
URDFS = sorted(os.path.relpath(p, PB_DATA) for p in glob.glob(os.path.join(PB_DATA, "**", "*.urdf"), recursive=True))
RIGID_OBJECTS = []  # builders of the URDFs without a moving joint, simulated together
# URDFs PyBullet loads that are refused here on purpose, with the reason
REFUSED = {"random_urdfs/168/168.urdf": "its mesh's vertices are all NaN (PyBullet loads the NaNs)"}


@functools.lru_cache(maxsize=None)
def _pb_client() -> int:
    return pybullet.connect(pybullet.DIRECT)


@functools.lru_cache(maxsize=None)
def pybullet_reference(rel: str):
    """PyBullet's parse of one URDF (floating base at the origin) and its link frames at random configurations;
    None when PyBullet refuses the file."""
    cid = _pb_client()
    path = os.path.join(PB_DATA, rel)
    try:
        body = pybullet.loadURDF(path, useFixedBase=False, flags=pybullet.URDF_USE_INERTIA_FROM_FILE,
                                 physicsClientId=cid)
    except pybullet.error:
        return None
    try:
        base = pybullet.getBodyInfo(body, physicsClientId=cid)[0].decode()
        n = pybullet.getNumJoints(body, physicsClientId=cid)
        links, joints = {}, {}
        for k in range(-1, n):
            dyn = pybullet.getDynamicsInfo(body, k, physicsClientId=cid)
            name = base if k < 0 else pybullet.getJointInfo(body, k, physicsClientId=cid)[12].decode()
            links[name] = dict(mass=dyn[0], mu=dyn[1], inertia=np.array(dyn[2]), com=np.array(dyn[3]),
                               orn=np.array(dyn[4]), restitution=dyn[5])
        for k in range(n):
            info = pybullet.getJointInfo(body, k, physicsClientId=cid)
            joints[info[1].decode()] = dict(index=k, type=info[2], damping=info[6], friction=info[7],
                                            lower=info[8], upper=info[9], effort=info[10], velocity=info[11],
                                            link=info[12].decode(), axis=np.array(info[13]),
                                            parent=info[16])
        rng = np.random.default_rng(zlib.crc32(rel.encode()))
        configs, frames = [], []
        for _ in range(SAMPLES + 1):
            q = {}
            for name, j in joints.items():
                if j["type"] in (pybullet.JOINT_REVOLUTE, pybullet.JOINT_PRISMATIC):
                    lo, hi = j["lower"], j["upper"]
                    if lo > hi:  # no limit
                        lo, hi = (-math.pi, math.pi) if j["type"] == pybullet.JOINT_REVOLUTE else (-0.5, 0.5)
                    q[name] = float(rng.uniform(lo, hi)) if configs else 0.0
                    pybullet.resetJointState(body, j["index"], q[name], physicsClientId=cid)
                elif j["type"] == pybullet.JOINT_SPHERICAL:
                    q[name] = random_quat(rng) if configs else np.array([0.0, 0.0, 0.0, 1.0])
                    pybullet.resetJointStateMultiDof(body, j["index"], list(q[name]), physicsClientId=cid)
            f = {base: ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))}
            for name, j in joints.items():
                s = pybullet.getLinkState(body, j["index"], computeForwardKinematics=True, physicsClientId=cid)
                f[j["link"]] = (s[4], s[5])
            configs.append(q)
            frames.append(f)
        return dict(base=base, links=links, joints=joints, configs=configs, frames=frames)
    finally:
        pybullet.removeBody(body, physicsClientId=cid)


def _import_urdf(path, **kwargs):
    b = inertia.ModelBuilder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = b.add_urdf(path, **kwargs)
    return b, r, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _merged_reference(ref, r, poses0):
    """Per body: (mass, com in world, inertia about it in world) of PyBullet's links our import put in it, at
    joint_q = 0 (``poses0``: PyBullet's link frames there)."""
    parts = {}
    for name, link in ref["links"].items():
        body = r.links[name]
        if body >= 0:
            frame = compose(poses0[name], (link["com"], link["orn"]))
            rot = quat_to_matrix(frame[1])
            parts.setdefault(body, []).append((link["mass"], np.asarray(frame[0]), rot @ np.diag(link["inertia"]) @ rot.T))
    merged = {}
    for body, ps in parts.items():
        mass = sum(m for m, _, _ in ps)
        com = sum(m * c for m, c, _ in ps) / mass if mass > 0 else np.zeros(3)
        i = sum(i + m * ((c - com) @ (c - com) * np.eye(3) - np.outer(c - com, c - com)) for m, c, i in ps)
        merged[body] = (mass, com, i)
    return merged


@pytest.mark.parametrize("rel", URDFS)
def test_urdf_imports_as_pybullet_loads_it(rel):
    path = os.path.join(PB_DATA, rel)
    ref = pybullet_reference(rel)
    if ref is None or rel in REFUSED:  # PyBullet refuses it (or it is broken): so does the importer, naming it
        with pytest.raises(inertia.UrdfError, match=os.path.basename(rel)):
            _import_urdf(path)
        return
    b, r, messages = _import_urdf(path)
    model = b.finalize(device=DEVICE)
    text = open(path, "rb").read().decode("utf-8", "replace")

    # ---- which links have a reference mass / inertia (see the module docstring)
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text[text.find("<robot"):text.rfind("</robot>") + 8])
    without_inertial = {el.get("name") for el in root.findall("link") if el.find("inertial") is None}
    replaced = set(r.inertia_replaced)
    # PyBullet zeroes a tensor that breaks the triangle inequality (A + B >= C); the import keeps it as written
    zeroed = {n for n, link in ref["links"].items() if link["mass"] > 0 and not link["inertia"].any()} - replaced

    # ---- masses and inertias per body, PyBullet's links merged in float64
    state0 = model.state()
    poses0 = ref["frames"][0]
    merged = _merged_reference(ref, r, poses0)
    mass, com = model.body_mass.numpy().astype(np.float64), model.body_com.numpy().astype(np.float64)
    inertia_ = model.body_inertia.numpy().astype(np.float64)
    body_q = state0.body_q.numpy().astype(np.float64)
    for name, body in r.bodies.items():
        parts = [n for n, bb in r.links.items() if bb == body]
        if any(n in without_inertial for n in parts):
            continue  # PyBullet's 1 kg default; MuJoCo's rule is checked below
        m_ref, c_ref, i_ref = merged[body]
        if m_ref == 0.0:
            assert mass[body] == 0.0 and model.body_inv_mass.numpy()[body] == 0.0, name  # kinematic
            continue
        err = abs(mass[body] - m_ref) / m_ref
        record("URDF body mass (relative)", err, f"{rel} {name}")
        assert err < 1e-6, (name, mass[body], m_ref)
        rot = quat_to_matrix(body_q[body, 3:])
        c_world = rot @ com[body] + body_q[body, :3]
        err = np.abs(c_world - c_ref).max()
        record("URDF body centre of mass [m]", err, f"{rel} {name}")
        assert err < 1e-6, (name, c_world, c_ref)
        if any(n in replaced or n in zeroed for n in parts):
            continue
        i_world = rot @ inertia_[body] @ rot.T
        scale = np.abs(i_ref).max()
        err = np.abs(np.linalg.eigvalsh(i_world) - np.linalg.eigvalsh(i_ref)).max() / scale
        record("URDF principal inertia (relative to the largest)", err, f"{rel} {name}")
        assert err < 1e-5, (name, np.linalg.eigvalsh(i_world), np.linalg.eigvalsh(i_ref))
        assert np.abs(i_world - i_ref).max() < 1e-5 * scale, name

    # ---- joints: types, axes, limits, dynamics
    types = model.joint_type.numpy()
    dof = model.joint_qd_start.numpy()
    lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    effort, velocity = model.joint_effort_limit.numpy(), model.joint_velocity_limit.numpy()
    damping, friction = model.joint_damping.numpy(), model.joint_friction.numpy()
    axes = model.joint_axis.numpy()
    kind = {pybullet.JOINT_REVOLUTE: 1, pybullet.JOINT_PRISMATIC: 0, pybullet.JOINT_SPHERICAL: 2}
    for name, j in ref["joints"].items():
        if j["type"] == pybullet.JOINT_FIXED:
            assert name not in r.joints and r.links[j["link"]] == r.links[_parent_link(ref, j)], name  # merged
            continue
        k = r.joints[name]
        assert types[k] == kind[j["type"]], name
        if j["type"] == pybullet.JOINT_SPHERICAL:
            continue
        d = dof[k]
        # PyBullet gives the axis in the child's inertial frame (principal axes, from the file's inertial)
        axis = quat_to_matrix(ref["links"][j["link"]]["orn"]) @ j["axis"]
        assert np.allclose(axes[k], axis / np.linalg.norm(axis), atol=1e-6), (name, axes[k], axis)
        if j["lower"] <= j["upper"]:
            assert (lower[d], upper[d]) == pytest.approx((j["lower"], j["upper"]), rel=1e-6, abs=1e-7), name
        else:
            assert np.isinf(lower[d]) and np.isinf(upper[d]), name
        assert effort[d] == (pytest.approx(j["effort"], rel=1e-6) if j["effort"] > 0 else math.inf), name
        assert velocity[d] == (pytest.approx(j["velocity"], rel=1e-6) if j["velocity"] > 0 else math.inf), name
        assert damping[d] == pytest.approx(j["damping"], rel=1e-6) and friction[d] == pytest.approx(j["friction"])

    # ---- forward kinematics of every link frame, merged ones included
    state = model.state()
    starts = model.joint_q_start.numpy()
    q0 = state.joint_q.numpy().copy()
    # a joint origin left as an unexpanded xacro $(optenv NAME default): PyBullet reads its text as zeros,
    # the import takes the default, so that link's frame differs by design (husky's imu_link)
    xacro = {j.find("child").get("link") for j in root.findall("joint")
             if j.find("origin") is not None and "$(" in "".join(j.find("origin").attrib.values())}
    worst_p = worst_r = 0.0
    samples = slice(1, None) if model.joint_dof_count else slice(0, 1)  # a rigid object: its frames at rest
    for config, frames in zip(ref["configs"][samples], ref["frames"][samples]):
        q = q0.copy()
        for name, v in config.items():
            q[r.joint_q[name]] = v
        inertia.eval_fk(model, q, np.zeros(model.joint_dof_count), state)
        for link, (p_ref, q_ref) in frames.items():
            if link in xacro:
                continue
            pose = r.frame_pose(state, link)
            worst_p = max(worst_p, float(np.abs(pose[:3] - p_ref).max()))
            worst_r = max(worst_r, angle(pose[3:], q_ref))
    record("URDF forward kinematics position [m]", worst_p, rel)
    record("URDF forward kinematics rotation [rad]", worst_r, rel)
    assert worst_p < FK_TOL and worst_r < FK_TOL, (worst_p, worst_r)

    # ---- a short passive simulation stays finite (rigid objects are simulated together, below)
    if model.joint_dof_count:
        _simulate_briefly(model)
    else:
        RIGID_OBJECTS.append(b)


def test_rigid_object_urdfs_simulate_together():
    """The URDFs without a moving joint (1,000 random objects, cubes, trays, ...), imported above, each in its
    own world of one model: a short passive simulation stays finite."""
    if not RIGID_OBJECTS:
        pytest.skip("run with the per-file tests above (they import the objects)")
    scene = inertia.ModelBuilder()
    for b in RIGID_OBJECTS:
        scene.add_builder(b)
    _simulate_briefly(scene.finalize(device=DEVICE))


def _parent_link(ref, j):
    """The parent link name of PyBullet joint ``j`` (PyBullet's link k is the child of its joint k)."""
    by_index = {other["index"]: other["link"] for other in ref["joints"].values()}
    return by_index.get(j["parent"], ref["base"])


def _simulate_briefly(model, steps: int = 50, dt: float = 2e-4):
    """50 steps of 0.2 ms under gravity, no ground: every body pose and velocity stays finite."""
    s0, s1 = model.state(), model.state()
    solver, control = inertia.SemiImplicitSolver(model), model.control()
    for _ in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
    assert np.isfinite(s0.body_q.numpy()).all() and np.isfinite(s0.body_qd.numpy()).all()


@pytest.mark.parametrize("rel", [u for u in URDFS if "random_urdfs" not in u])
def test_urdf_matches_mujoco_where_it_loads(rel):
    """MuJoCo's URDF parse (fixed links fused, links without <inertial> weighed from their geometry at 1000
    kg/m^3, as here): bodies, joints and forward kinematics agree."""
    path = os.path.join(PB_DATA, rel)
    mj = mujoco_model(path)
    if mj is None or pybullet_reference(rel) is None:
        pytest.skip("MuJoCo does not load it")
    b, r, _ = _import_urdf(path)
    # continuous joints that carry <limit lower upper>: PyBullet limits them (and so does the import), MuJoCo not
    text = open(path, "rb").read().decode("utf-8", "replace")
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text[text.find("<robot"):text.rfind("</robot>") + 8])
    limited = {j.get("name") for j in root.findall("joint") if j.get("type") == "continuous"
               and j.find("limit") is not None and j.find("limit").get("lower") is not None}
    compare_with_mujoco(mj, b.finalize(device=DEVICE), r, rel, "URDF vs MuJoCo", skip_limits=limited)


# ------------------------------------------------------------------------------------------------ MJCF
GYM = os.path.join(os.path.dirname(pytest.importorskip("gymnasium").__file__), "envs", "mujoco", "assets")
MJCFS = sorted(os.path.relpath(p, GYM) for p in glob.glob(os.path.join(GYM, "**", "*.xml"), recursive=True))


@pytest.mark.parametrize("rel", MJCFS)
def test_mjcf_imports_as_mujoco_loads_it(rel):
    """Every Gymnasium MuJoCo model MuJoCo loads: bodies (mass, centre of mass, principal inertias), joints
    (types, axes, limits, armature, damping, friction loss) and forward kinematics at 20 random configurations
    equal ``mujoco.MjModel``'s and ``mj_kinematics``'; a short passive simulation stays finite."""
    path = os.path.join(GYM, rel)
    mj = mujoco_model(path)
    if mj is None:
        with pytest.raises(inertia.io.mjcf.MjcfError):
            inertia.ModelBuilder().add_mjcf(path)
        return
    b = inertia.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # what is not imported is listed by the warnings
        r = b.add_mjcf(path)
    model = b.finalize(device=DEVICE)
    total = float(model.body_mass.numpy().astype(np.float64).sum())
    # MuJoCo's total counts bodies welded to the world too; here they are static shapes: compare the others
    moving = sum(mj.body_mass[k] for k in range(1, mj.nbody)
                 if r.links.get(mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, k) or f"body_{k}", -1) >= 0)
    record("MJCF total mass (relative)", abs(total - moving) / moving, rel)
    assert total == pytest.approx(moving, rel=2e-6)
    assert compare_with_mujoco(mj, model, r, rel, "MJCF", joint_ref=r.extra["joint_ref"]) > 0
    dof, armature = model.joint_qd_start.numpy(), model.joint_armature.numpy()
    damping, friction = model.joint_damping.numpy(), model.joint_friction.numpy()
    for j in range(mj.njnt):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j)
        d = dof[r.joints[name]]
        if int(mj.jnt_type[j]) == FREE:
            continue
        a = mj.jnt_dofadr[j]
        assert armature[d] == pytest.approx(mj.dof_armature[a], rel=1e-6, abs=1e-9), name
        assert damping[d] == pytest.approx(mj.dof_damping[a], rel=1e-6, abs=1e-9), name
        assert friction[d] == pytest.approx(mj.dof_frictionloss[a], rel=1e-6, abs=1e-9), name
    if model.joint_dof_count:
        _simulate_briefly(model)


def test_corpus_summary():
    """Counts and the worst errors of the corpus (run after the per-file tests; printed with -s)."""
    loads = [u for u in URDFS if pybullet_reference(u) is not None]
    print(f"\nURDFs: {len(loads) - len([u for u in REFUSED if u in loads])} imported / {len(loads)} loadable by "
          f"PyBullet / {len(URDFS)} in pybullet_data (refused on purpose: {REFUSED})")
    print(f"MJCFs: {sum(mujoco_model(os.path.join(GYM, m)) is not None for m in MJCFS)} loadable by MuJoCo / "
          f"{len(MJCFS)} in Gymnasium's assets")
    for kind, (err, where) in sorted(WORST.items()):
        print(f"  worst {kind}: {err:.2e} ({where})")
