"""Reference checks shared by the robot-import tests: an import against ``mujoco.MjModel`` (bodies merged as the
import merges them, joints, forward kinematics at random configurations) and the worst errors seen."""

from __future__ import annotations

import functools
import math
import os
import tempfile
import zlib

import numpy as np
import pytest

import inertia
from inertia.transforms import quat_mul, quat_to_matrix

mujoco = __import__("mujoco")

SAMPLES = 20  # random joint configurations per robot
FK_TOL = 1e-5  # [m] and [rad]: float32 poses along chains of a few metres round at ~1e-6
WORST = {}  # kind -> (error, file): the worst errors seen, reported by test_robot_corpus.test_corpus_summary


def record(kind: str, err: float, where: str) -> None:
    if err > WORST.get(kind, (-1.0, ""))[0]:
        WORST[kind] = (float(err), where)


def angle(q1, q2) -> float:
    """Rotation angle [rad] between two (x, y, z, w) quaternions."""
    d = quat_mul(np.asarray(q1, dtype=np.float64) * [-1, -1, -1, 1], np.asarray(q2, dtype=np.float64))
    return 2.0 * math.asin(min(1.0, float(np.linalg.norm(d[:3]))))


def random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


@functools.lru_cache(maxsize=None)
def mujoco_model(path: str):
    """``mujoco.MjModel`` of a file, or None when MuJoCo refuses it (loaded from a temporary folder: MuJoCo
    writes MUJOCO_LOG.TXT into the working directory when a file fails)."""
    cwd = os.getcwd()
    os.chdir(tempfile.gettempdir())
    try:
        return mujoco.MjModel.from_xml_path(os.path.abspath(os.path.join(cwd, path)))
    except ValueError:
        return None
    finally:
        os.chdir(cwd)


HINGE, SLIDE, BALL, FREE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE),
                            int(mujoco.mjtJoint.mjJNT_BALL), int(mujoco.mjtJoint.mjJNT_FREE))
MJ_KIND = {HINGE: 1, SLIDE: 0, BALL: 2, FREE: 4}  # MuJoCo's joint types -> inertia's


def _combine(parts):
    """(mass, com, inertia about it) of (mass, com, inertia) parts in one frame (float64, parallel axis)."""
    m = sum(p[0] for p in parts)
    c = sum(p[0] * p[1] for p in parts) / m if m > 0 else np.zeros(3)
    i = sum(p[2] + p[0] * ((p[1] - c) @ (p[1] - c) * np.eye(3) - np.outer(p[1] - c, p[1] - c)) for p in parts)
    return m, c, i


def _world_mass_properties(model, state, body):
    """(mass, com, inertia) of one body of ``model`` in world at ``state``."""
    q = state.body_q.numpy()[body].astype(np.float64)
    rot = quat_to_matrix(q[3:])
    com = rot @ model.body_com.numpy()[body].astype(np.float64) + q[:3]
    return (float(model.body_mass.numpy()[body]), com, rot @ model.body_inertia.numpy()[body].astype(np.float64) @ rot.T)


def compare_with_mujoco(mj, model, r, rel, label, joint_ref=None, skip_limits=()):
    """Bodies MuJoCo keeps (by name): mass, centre of mass and principal inertias; joints: types, axes, limits;
    forward kinematics of the bodies at random joint configurations. ``joint_ref``: MuJoCo's joint reference
    positions (qpos0), which are this import's zero; ``skip_limits``: joints whose limits MuJoCo reads
    differently (by design)."""
    # MuJoCo's bodies by our names (an unnamed one is "body_<its index>" here as there)
    names = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, b) or f"body_{b}" for b in range(mj.nbody)]
    data = mujoco.MjData(mj)
    mujoco.mj_kinematics(mj, data)  # at qpos0, where this import's joint_q is 0
    state0 = model.state()
    parts = {}  # our body -> MuJoCo (mass, world com, world inertia) of the bodies folded into it
    for b, name in enumerate(names):
        body = r.links.get(name, -1)
        if b > 0 and body >= 0:
            rot = data.ximat[b].reshape(3, 3)
            parts.setdefault(body, []).append((mj.body_mass[b], data.xipos[b].copy(),
                                               rot @ np.diag(mj.body_inertia[b]) @ rot.T))
    ours = {}  # ours: a body and the intermediate bodies that borrowed from it
    for body in parts:
        ours[body] = [body] + [i for i, donor in r.intermediate_bodies.items() if donor == body]
    checked = 0
    for body, ps in parts.items():
        m_ref, c_ref, i_ref = _combine(ps)
        m, c, i = _combine([_world_mass_properties(model, state0, k) for k in ours[body]])
        label_body = model.body_label[body]
        if m_ref == 0.0:
            continue
        err = abs(m - m_ref) / m_ref
        record(f"{label} body mass (relative)", err, f"{rel} {label_body}")
        assert err < 2e-6, (label_body, m, m_ref)
        assert np.abs(c - c_ref).max() < 2e-6, (label_body, c, c_ref)
        scale = np.abs(i_ref).max()
        err = np.abs(np.linalg.eigvalsh(i) - np.linalg.eigvalsh(i_ref)).max() / scale
        record(f"{label} principal inertia (relative to the largest)", err, f"{rel} {label_body}")
        assert err < 2e-5, (label_body, np.linalg.eigvalsh(i), np.linalg.eigvalsh(i_ref))
        assert np.abs(i - i_ref).max() < 2e-5 * scale, label_body
        checked += 1
    # joints
    types, dof = model.joint_type.numpy(), model.joint_qd_start.numpy()
    axes = model.joint_axis.numpy()
    lower, upper = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    for j in range(mj.njnt):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j)
        k = r.joints[name]
        assert types[k] == MJ_KIND[int(mj.jnt_type[j])], name
        if int(mj.jnt_type[j]) in (HINGE, SLIDE):
            assert np.allclose(axes[k], mj.jnt_axis[j], atol=1e-6), (name, axes[k], mj.jnt_axis[j])
            ref = 0.0 if joint_ref is None else joint_ref.get(name, 0.0)
            if name in skip_limits:
                pass
            elif mj.jnt_limited[j]:
                assert (lower[dof[k]], upper[dof[k]]) == pytest.approx(tuple(mj.jnt_range[j] - ref), abs=2e-6), name
            else:
                assert np.isinf(lower[dof[k]]) and np.isinf(upper[dof[k]]), name
    # forward kinematics at random configurations
    rng = np.random.default_rng(zlib.crc32(rel.encode()) + 1)
    state = model.state()
    q0 = state.joint_q.numpy().copy()
    worst_p = worst_r = 0.0
    for _ in range(SAMPLES):
        qpos = mj.qpos0.copy()
        q = q0.copy()
        for j in range(mj.njnt):
            name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j)
            a, t = mj.jnt_qposadr[j], int(mj.jnt_type[j])
            if t in (HINGE, SLIDE):
                lo, hi = mj.jnt_range[j] if mj.jnt_limited[j] else ((-math.pi, math.pi) if t == HINGE else (-0.5, 0.5))
                qpos[a] = rng.uniform(lo, hi)
                q[r.joint_q[name]] = qpos[a] - (0.0 if joint_ref is None else joint_ref.get(name, 0.0))
            elif t == BALL:
                x = random_quat(rng)
                qpos[a:a + 4] = [x[3], x[0], x[1], x[2]]
                q[r.joint_q[name]] = x
            else:  # free: position, then (w, x, y, z); here (x, y, z, w)
                x = random_quat(rng)
                p = rng.uniform(-1.0, 1.0, 3)
                qpos[a:a + 7] = list(p) + [x[3], x[0], x[1], x[2]]
                q[r.joint_q[name]] = list(p) + list(x)
        data.qpos[:] = qpos
        mujoco.mj_kinematics(mj, data)
        inertia.eval_fk(model, q, np.zeros(model.joint_dof_count), state)
        for b, name in enumerate(names):
            if b == 0 or name not in r.frames or r.frames[name][0] < 0:
                continue
            pose = r.frame_pose(state, name)
            x = data.xquat[b]
            worst_p = max(worst_p, float(np.abs(pose[:3] - data.xpos[b]).max()))
            worst_r = max(worst_r, angle(pose[3:], (x[1], x[2], x[3], x[0])))
    record(f"{label} forward kinematics position [m]", worst_p, rel)
    record(f"{label} forward kinematics rotation [rad]", worst_r, rel)
    assert worst_p < FK_TOL and worst_r < FK_TOL, (worst_p, worst_r)
    return checked


