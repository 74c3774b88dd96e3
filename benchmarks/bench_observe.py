"""What the sanity pass reads from a simulation, the same way for every engine (float64, NumPy).

A runner's ``observation()`` returns a dict of world-frame arrays:

* ``x`` (n, 3) [m], ``v`` (n, 3) [m/s], ``m`` (n,) [kg]: the particles, then the bodies' centres of mass
  (pinned particles and kinematic bodies have mass 0 and count for nothing below);
* ``w`` (nb, 3) [rad/s] and ``I`` (nb, 3, 3) [kg m^2]: the bodies' angular velocities and inertia
  tensors about their centres of mass, both in world;
* ``gaps`` (nj,) [m]: for each joint that pins a point (revolute, ball, fixed), the distance between
  its anchor on the parent (or in world) and its anchor on the child: 0 for a joint that holds. None
  for an engine in reduced coordinates (MuJoCo), whose joints cannot part.

``energy(obs)`` is kinetic (translational + rotational) plus gravitational potential energy with the
ground at z = 0 [J]; elastic and contact energy are not counted.
"""

from __future__ import annotations

import numpy as np

GRAVITY = 9.81  # [m/s^2], every scene's


def quat_rotate(q, v) -> np.ndarray:
    """Rotate vectors v (n, 3) by unit quaternions q (n, 4: x, y, z, w)."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    v = np.asarray(v, dtype=np.float64).reshape(-1, 3)
    xyz, w = q[:, :3], q[:, 3:4]
    t = 2.0 * np.cross(xyz, v)
    return v + w * t + np.cross(xyz, t)


def quat_matrix(q) -> np.ndarray:
    """(n, 3, 3) rotation matrices of unit quaternions (n, 4: x, y, z, w)."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    eye = np.broadcast_to(np.eye(3), (len(q), 3, 3))
    return np.stack([quat_rotate(q, eye[:, :, i]) for i in range(3)], axis=2)


def transform_points(tf, p) -> np.ndarray:
    """Apply transforms tf (n, 7: position, quaternion x y z w) to points p (n, 3)."""
    tf = np.asarray(tf, dtype=np.float64).reshape(-1, 7)
    return tf[:, :3] + quat_rotate(tf[:, 3:], p)


def joint_gaps(body_q, joint_parent, joint_child, joint_X_p, joint_X_c, mask) -> np.ndarray:
    """Anchor separation [m] of the joints where ``mask`` is set (maximal-coordinate engines)."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return np.zeros(0)
    body_q = np.asarray(body_q, dtype=np.float64).reshape(-1, 7)
    xp = np.asarray(joint_X_p, dtype=np.float64).reshape(-1, 7)[idx]
    xc = np.asarray(joint_X_c, dtype=np.float64).reshape(-1, 7)[idx]
    parent, child = np.asarray(joint_parent)[idx], np.asarray(joint_child)[idx]
    a_child = transform_points(body_q[child], xc[:, :3])
    world = np.concatenate([np.zeros(3), [0.0, 0.0, 0.0, 1.0]])
    parent_q = np.where((parent >= 0)[:, None], body_q[np.maximum(parent, 0)], world)
    a_parent = transform_points(parent_q, xp[:, :3])
    return np.linalg.norm(a_child - a_parent, axis=1)


def maximal_observation(particle_q, particle_qd, particle_mass, body_q, body_qd, body_mass, body_inertia, body_com,
                        joints=None) -> dict:
    """The observation of an engine that keeps bodies in maximal coordinates (inertia, Newton).

    ``body_q`` (nb, 7) body frames, ``body_qd`` (nb, 6) = (linear velocity of the centre of mass, angular
    velocity), world; ``body_inertia`` (nb, 3, 3) about the com in the body frame; ``body_com`` (nb, 3) in
    the body frame. ``joints``: (parent, child, X_p, X_c, mask) for ``joint_gaps``, or None.
    """
    pq = np.asarray(particle_q, dtype=np.float64).reshape(-1, 3)
    pv = np.asarray(particle_qd, dtype=np.float64).reshape(-1, 3)
    pm = np.asarray(particle_mass, dtype=np.float64).reshape(-1)
    bq = np.asarray(body_q, dtype=np.float64).reshape(-1, 7)
    bqd = np.asarray(body_qd, dtype=np.float64).reshape(-1, 6)
    bm = np.asarray(body_mass, dtype=np.float64).reshape(-1)
    com = transform_points(bq, np.asarray(body_com, dtype=np.float64).reshape(-1, 3))
    rot = quat_matrix(bq[:, 3:])
    inertia = np.asarray(body_inertia, dtype=np.float64).reshape(-1, 3, 3)
    return {
        "x": np.concatenate([pq, com]), "v": np.concatenate([pv, bqd[:, :3]]), "m": np.concatenate([pm, bm]),
        "w": bqd[:, 3:], "I": rot @ inertia @ rot.transpose(0, 2, 1),
        # None: no joint that pins a point (Newton's free joints of the boxes, a scene without joints)
        "gaps": joint_gaps(bq, *joints) if joints is not None and np.any(joints[4]) else None,
    }


def energy(obs) -> float:
    """Kinetic + gravitational potential energy [J] (ground at z = 0), float64."""
    m, v, x = obs["m"], obs["v"], obs["x"]
    e = float(np.sum(m * (0.5 * np.einsum("ij,ij->i", v, v) + GRAVITY * x[:, 2])))
    w, inertia = obs["w"], obs["I"]
    if len(w):
        moving = m[len(m) - len(w):] > 0.0  # kinematic bodies (mass 0) count for nothing
        e += float(0.5 * np.einsum("i,ij,ij->", moving.astype(np.float64), w, np.einsum("ijk,ik->ij", inertia, w)))
    return e


def point_speeds(obs) -> np.ndarray:
    """Per particle / body: |v| + |omega| x radius of gyration sqrt(tr I / m) [m/s] (an upper bound of the
    speed of the body's typical material point; moving entities only)."""
    m = obs["m"]
    speed = np.linalg.norm(obs["v"], axis=1)
    nb = len(obs["w"])
    if nb:
        mb = m[len(m) - nb:]
        trace = np.trace(obs["I"], axis1=1, axis2=2)
        gyration = np.sqrt(np.where(mb > 0, trace / np.where(mb > 0, mb, 1.0), 0.0))
        speed[len(m) - nb:] += np.linalg.norm(obs["w"], axis=1) * gyration
    return speed[m > 0]
