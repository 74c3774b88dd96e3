"""Robots and an independent float64 reference for the FeatherstoneSolver tests.

The reference computes joint-space dynamics without spatial algebra: from each body's Jacobians
(the linear velocity of its centre of mass and its angular velocity per unit rate of every degree of
freedom, written out per joint type), the mass matrix ``M = sum_b J_v^T m J_v + J_w^T I_w J_w`` and the
bias forces ``C = sum_b J_v^T m (Jdot_v qd - g) + J_w^T (I_w Jdot_w qd + w x I_w w)``, with ``Jdot qd``
by a float64 central difference along the motion (error ~h^2 = 1e-10). The solver computes the same
quantities by the composite-rigid-body and recursive Newton-Euler algorithms in float32, so agreement
checks the algorithms, the joint conventions and the rounding together. The tests here check the
reference itself against MuJoCo (mass matrix and bias forces of the Kuka arm).

Robots: pybullet_data's Kuka iiwa (``kuka_iiwa/model.urdf``) and Unitree A1 (``a1/a1.urdf``).
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import inertia
from inertia.transforms import quat_from_rpy, quat_mul, quat_to_matrix
from inertia.types import JOINT_BALL, JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE


def robot_path(name: str) -> str:
    """A robot file of pybullet_data (skips the test when pybullet is not installed)."""
    data = pytest.importorskip("pybullet_data")
    return os.path.join(data.getDataPath(), name)


# ---------------------------------------------------------------------------------------------- robots
def kuka_builder(builder=None, xform=None):
    """The Kuka iiwa of ``kuka_iiwa/model.urdf``: seven revolute joints on a fixed base.

    Built from the URDF's own numbers (inertials with their rpy, joint origins, axes, limits) read here,
    because the importer refuses its base link's mesh today (issue 19). No collision shapes: the tests
    that use it are passive swings without contact. The massless base link is kinematic, fixed to the
    world, as the importer (and MuJoCo, which merges it into the world) treat it.
    """
    b = builder if builder is not None else inertia.ModelBuilder()
    root = ET.parse(robot_path("kuka_iiwa/model.urdf")).getroot()

    def floats(el, name, default):
        return tuple(float(v) for v in el.get(name, default).split()) if el is not None else tuple(
            float(v) for v in default.split())

    links = {}
    for link in root.findall("link"):
        inert = link.find("inertial")
        origin = inert.find("origin")
        xyz = floats(origin, "xyz", "0 0 0")
        r = quat_to_matrix(quat_from_rpy(*floats(origin, "rpy", "0 0 0")))
        i = inert.find("inertia")
        I = np.array([[float(i.get("ixx")), float(i.get("ixy")), float(i.get("ixz"))],
                      [float(i.get("ixy")), float(i.get("iyy")), float(i.get("iyz"))],
                      [float(i.get("ixz")), float(i.get("iyz")), float(i.get("izz"))]])
        mass = float(inert.find("mass").get("value"))
        links[link.get("name")] = (mass, xyz, r @ I @ r.T)
    # bodies are placed at joint_q = 0 by composing the joint origins from the root
    joints = root.findall("joint")
    child_of = {j.find("child").get("link"): j for j in joints}
    poses, body = {}, {}
    base = xform if xform is not None else ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))

    def pose_of(name):
        if name not in poses:
            j = child_of.get(name)
            if j is None:
                poses[name] = (np.asarray(base[0], float), np.asarray(base[1], float))
            else:
                pp, pq = pose_of(j.find("parent").get("link"))
                o = j.find("origin")
                oq = quat_from_rpy(*floats(o, "rpy", "0 0 0"))
                poses[name] = (pp + quat_to_matrix(pq) @ np.asarray(floats(o, "xyz", "0 0 0")), quat_mul(pq, oq))
        return poses[name]

    for name, (mass, com, I) in links.items():
        p, q = pose_of(name)
        if mass == 0.0:
            body[name] = b.add_body(xform=(tuple(p), tuple(q)), kinematic=True, label=name)
            b.add_joint_fixed(-1, body[name], parent_xform=(tuple(p), tuple(q)), label=f"{name}_fixed")
        else:
            body[name] = b.add_body(xform=(tuple(p), tuple(q)), mass=mass, inertia=I, com=com, label=name)
    for j in joints:
        o = j.find("origin")
        lim = j.find("limit")
        b.add_joint_revolute(body[j.find("parent").get("link")], body[j.find("child").get("link")],
                             parent_xform=(floats(o, "xyz", "0 0 0"), quat_from_rpy(*floats(o, "rpy", "0 0 0"))),
                             axis=floats(j.find("axis"), "xyz", "1 0 0"), limit_lower=float(lim.get("lower")),
                             limit_upper=float(lim.get("upper")), label=j.get("name"))
    return b


def a1_builder(builder=None, xform=((0.0, 0.0, 0.45), (0.0, 0.0, 0.0, 1.0))):
    """pybullet_data's Unitree A1 on a free joint, imported by ``builder.add_urdf`` (1 g dummy links included).

    Its links do not collide with each other (collision group 2, mask 1: only with the default group 1,
    e.g. a ground plane), as PyBullet and MuJoCo set up robots here (MuJoCo with contype/conaffinity).
    """
    b = builder if builder is not None else inertia.ModelBuilder()
    first = len(b.shape_type)
    b.add_urdf(robot_path("a1/a1.urdf"), xform=xform, floating=True)
    for s in range(first, len(b.shape_type)):
        b.shape_collision_group[s], b.shape_collision_mask[s] = 2, 1
    return b


# ---------------------------------------------------------------------------------------------- reference
class Reference:
    """Float64 joint-space dynamics of a finalized model's joint trees (module docstring).

    Coordinates and rates in the model's ``State.joint_q`` / ``joint_qd`` layout; every body must be
    in a joint tree rooted at the world.
    """

    def __init__(self, model):
        self.type = model.joint_type.numpy()
        self.parent = model.joint_parent.numpy()
        self.child = model.joint_child.numpy()
        self.X_p = model.joint_X_p.numpy().astype(np.float64)
        self.X_c = model.joint_X_c.numpy().astype(np.float64)
        self.axis = model.joint_axis.numpy().astype(np.float64)
        self.q_start = model.joint_q_start.numpy()
        self.qd_start = model.joint_qd_start.numpy()
        self.order = model.joint_fk_order.numpy()
        self.mass = model.body_mass.numpy().astype(np.float64)
        self.com = model.body_com.numpy().astype(np.float64)
        self.inertia = model.body_inertia.numpy().astype(np.float64)
        self.gravity = model.gravity.numpy()[0].astype(np.float64)
        self.nq, self.nv, self.nb = model.joint_coord_count, model.joint_dof_count, model.body_count
        self.joint_of = {int(c): j for j, c in enumerate(self.child)}

    @staticmethod
    def _pose(x):
        return np.asarray(x[:3]), quat_to_matrix(x[3:] / np.linalg.norm(x[3:]))

    def kinematics(self, q):
        """Per body: rotation (3, 3), com (3,), and per joint: the world frame of its parent side (R, p)."""
        R = np.zeros((self.nb, 3, 3))
        P = np.zeros((self.nb, 3))
        frames = {}
        for j in self.order:
            t, p, c, qs = self.type[j], self.parent[j], self.child[j], self.q_start[j]
            pp, pr = self._pose(self.X_p[j])
            if p >= 0:
                pp, pr = P[p] + R[p] @ pp, R[p] @ pr
            frames[j] = (pr, pp)
            if t == JOINT_REVOLUTE:
                a = self.axis[j]
                ang = q[qs]
                K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
                jr, jp = np.eye(3) + math.sin(ang) * K + (1 - math.cos(ang)) * K @ K, np.zeros(3)
            elif t == JOINT_PRISMATIC:
                jr, jp = np.eye(3), self.axis[j] * q[qs]
            elif t == JOINT_BALL:
                jr, jp = quat_to_matrix(q[qs:qs + 4] / np.linalg.norm(q[qs:qs + 4])), np.zeros(3)
            elif t == JOINT_FREE:
                jr, jp = quat_to_matrix(q[qs + 3:qs + 7] / np.linalg.norm(q[qs + 3:qs + 7])), q[qs:qs + 3]
            else:
                jr, jp = np.eye(3), np.zeros(3)
            wr, wpos = pr @ jr, pp + pr @ jp
            cp, cr = self._pose(self.X_c[j])
            R[c] = wr @ cr.T
            P[c] = wpos - R[c] @ cp
        coms = P + np.einsum("bij,bj->bi", R, self.com)
        return R, P, coms, frames

    def jacobians(self, q):
        """(Jv (nb, 3, nv), Jw (nb, 3, nv)): com velocity and angular velocity of every body per unit rate."""
        R, P, coms, frames = self.kinematics(q)
        Jv, Jw = np.zeros((self.nb, 3, self.nv)), np.zeros((self.nb, 3, self.nv))
        for b in range(self.nb):
            j = self.joint_of.get(b)
            while j is not None:
                t, ds = self.type[j], self.qd_start[j]
                pr, pp = frames[j]
                anchor = pp
                if t == JOINT_REVOLUTE:
                    a = pr @ self.axis[j]
                    Jw[b, :, ds] = a
                    Jv[b, :, ds] = np.cross(a, coms[b] - anchor)
                elif t == JOINT_PRISMATIC:
                    Jv[b, :, ds] = pr @ self.axis[j]
                elif t == JOINT_BALL:
                    for k in range(3):
                        e = pr[:, k]
                        Jw[b, :, ds + k] = e
                        Jv[b, :, ds + k] = np.cross(e, coms[b] - anchor)
                elif t == JOINT_FREE:
                    root = self.child[j]
                    for k in range(3):
                        e = np.eye(3)[k]
                        Jv[b, :, ds + k] = e
                        Jw[b, :, ds + 3 + k] = e
                        Jv[b, :, ds + 3 + k] = np.cross(e, coms[b] - coms[root])
                p = self.parent[j]
                j = self.joint_of.get(p) if p >= 0 else None
        return Jv, Jw, R

    def advance(self, q, qd, h):
        """q moved by h along the rates qd (the exponential map for ball and free joints)."""
        q = np.array(q, dtype=np.float64)
        _, _, coms, frames = self.kinematics(q)
        for j in self.order:
            t, qs, ds = self.type[j], self.q_start[j], self.qd_start[j]
            if t in (JOINT_REVOLUTE, JOINT_PRISMATIC):
                q[qs] += h * qd[ds]
            elif t == JOINT_BALL:
                q[qs:qs + 4] = quat_mul(_quat_exp(h * np.asarray(qd[ds:ds + 3])), q[qs:qs + 4])
            elif t == JOINT_FREE:
                # the com moves with v, the body turns with w about it; the joint frame follows the body
                c = self.child[j]
                R0 = quat_to_matrix(q[qs + 3:qs + 7] / np.linalg.norm(q[qs + 3:qs + 7]))
                dq = _quat_exp(h * np.asarray(qd[ds + 3:ds + 6]))
                pr, pp = frames[j]
                # child joint frame origin o relative to the com, in world: rotates with the body
                o = pp + pr @ q[qs:qs + 3]
                o_new = coms[c] + h * np.asarray(qd[ds:ds + 3]) + quat_to_matrix(dq) @ (o - coms[c])
                q[qs:qs + 3] = pr.T @ (o_new - pp)
                q[qs + 3:qs + 7] = _quat_from_matrix(pr.T @ quat_to_matrix(dq) @ pr @ R0)
        return q

    def mass_matrix(self, q):
        Jv, Jw, R = self.jacobians(q)
        M = np.zeros((self.nv, self.nv))
        for b in range(self.nb):
            Iw = R[b] @ self.inertia[b] @ R[b].T
            M += self.mass[b] * Jv[b].T @ Jv[b] + Jw[b].T @ Iw @ Jw[b]
        return M

    def bias(self, q, qd, h=1e-6):
        """C(q, qd): gravity, Coriolis and centrifugal generalized forces (M qdd + C = tau)."""
        qd = np.asarray(qd, dtype=np.float64)
        Jv, Jw, R = self.jacobians(q)
        Jv1, Jw1, _ = self.jacobians(self.advance(q, qd, h))
        Jv0, Jw0, _ = self.jacobians(self.advance(q, qd, -h))
        C = np.zeros(self.nv)
        for b in range(self.nb):
            Iw = R[b] @ self.inertia[b] @ R[b].T
            w = Jw[b] @ qd
            a_lin = (Jv1[b] - Jv0[b]) @ qd / (2 * h)
            a_ang = (Jw1[b] - Jw0[b]) @ qd / (2 * h)
            C += Jv[b].T @ (self.mass[b] * (a_lin - self.gravity)) + Jw[b].T @ (Iw @ a_ang + np.cross(w, Iw @ w))
        return C

    def energy(self, q, qd):
        """Kinetic plus gravitational potential energy [J]."""
        qd = np.asarray(qd, dtype=np.float64)
        _, _, coms, _ = self.kinematics(q)
        return 0.5 * qd @ self.mass_matrix(q) @ qd - float(np.sum(self.mass * (coms @ self.gravity)))

    def acceleration(self, q, qd, tau=None):
        rhs = -self.bias(q, qd) + (0.0 if tau is None else tau)
        return np.linalg.solve(self.mass_matrix(q), rhs)

    def rk4(self, q, qd, dt, steps, tau=None):
        """Classic RK4 of (q, qd) for trees of revolute and prismatic joints (q' = qd)."""
        q, qd = np.array(q, np.float64), np.array(qd, np.float64)
        for _ in range(steps):
            k1q, k1v = qd, self.acceleration(q, qd, tau)
            k2q, k2v = qd + 0.5 * dt * k1v, self.acceleration(q + 0.5 * dt * k1q, qd + 0.5 * dt * k1v, tau)
            k3q, k3v = qd + 0.5 * dt * k2v, self.acceleration(q + 0.5 * dt * k2q, qd + 0.5 * dt * k2v, tau)
            k4q, k4v = qd + dt * k3v, self.acceleration(q + dt * k3q, qd + dt * k3v, tau)
            q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
            qd = qd + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        return q, qd


def _quat_exp(theta):
    t = float(np.linalg.norm(theta))
    if t < 1e-12:
        return np.array([*(0.5 * theta), 1.0])
    return np.array([*(math.sin(t / 2) / t * theta), math.cos(t / 2)])


def _quat_from_matrix(r):
    from inertia.transforms import quat_from_matrix

    return np.asarray(quat_from_matrix(r))


# ---------------------------------------------------------------------------------------------- MuJoCo
def mujoco_kuka():
    """MuJoCo's model of the same URDF, passive: no damping, no contacts."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(robot_path("kuka_iiwa/model.urdf"))
    m.dof_damping[:] = 0.0
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return m


def test_reference_matches_mujoco_on_the_kuka():
    """The numpy reference's M and C equal MuJoCo's (qM, qfrc_bias) on the same URDF: the reference is right."""
    mujoco = pytest.importorskip("mujoco")
    mj = mujoco_kuka()
    data = mujoco.MjData(mj)
    model = kuka_builder().finalize()
    ref = Reference(model)
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd = rng.uniform(-1.5, 1.5, 7), rng.uniform(-2.0, 2.0, 7)
        data.qpos[:], data.qvel[:] = q, qd
        mujoco.mj_forward(mj, data)
        M_mj = np.zeros((7, 7))
        mujoco.mj_fullM(mj, data, M_mj)
        M = ref.mass_matrix(q)
        # float64 on both sides; the URDF's numbers pass through float32 in the model (1e-7 relative)
        assert np.abs(M - M_mj).max() < 1e-6 * np.abs(M_mj).max(), (M, M_mj)
        C = ref.bias(q, qd)
        assert np.abs(C - data.qfrc_bias).max() < 1e-6 * np.abs(data.qfrc_bias).max(), (C, data.qfrc_bias)
