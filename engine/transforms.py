"""Host-side rotation and pose math in float64 (builders and importers; kernels use Warp's own types).

Quaternions are ``(x, y, z, w)``, poses ``(position, quaternion)``, rotation matrices act on column
vectors. Each function takes anything NumPy reads.
"""

from __future__ import annotations

import math

import numpy as np

IDENTITY = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
"""The identity pose: ``(position, quaternion)``."""


def quat_mul(a, b) -> np.ndarray:
    """Hamilton product a * b of (x, y, z, w) quaternions (b applied first); either may be a stack (..., 4)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz], axis=-1)


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit (x, y, z, w) quaternion."""
    x, y, z, w = (float(v) for v in q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def quat_from_matrix(r: np.ndarray) -> tuple:
    """(x, y, z, w) of a proper rotation matrix (Shepperd's method: divide by the largest component)."""
    t = np.trace(r)
    if t > 0.0:
        s = 2.0 * math.sqrt(t + 1.0)
        q = ((r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, 0.25 * s)
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
        q = (0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s, (r[2, 1] - r[1, 2]) / s)
    elif r[1, 1] > r[2, 2]:
        s = 2.0 * math.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
        q = ((r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s, (r[0, 2] - r[2, 0]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
        q = ((r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s, (r[1, 0] - r[0, 1]) / s)
    n = math.sqrt(sum(v * v for v in q))
    return tuple(float(v) / n for v in q)


def quat_from_rpy(roll: float, pitch: float, yaw: float) -> tuple:
    """Quaternion (x, y, z, w) of fixed-axis roll-pitch-yaw (URDF's ``rpy``): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy)


def rotation_between(a, b) -> np.ndarray:
    """The smallest rotation (3, 3) taking unit vector ``a`` onto unit vector ``b`` (any half turn if opposite)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    c = float(a @ b)
    if c < -1.0 + 1e-12:
        p = np.eye(3)[np.argmin(np.abs(a))]
        k = np.cross(a, p)
        k /= np.linalg.norm(k)
        return 2.0 * np.outer(k, k) - np.eye(3)
    v = np.cross(a, b)
    vx = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + vx + vx @ vx / (1.0 + c)


def compose(a, b) -> tuple:
    """Pose a * b of (position, quaternion) pairs: b expressed in a's frame, mapped to a's parent."""
    pa, qa = a
    pb, qb = b
    p = np.asarray(pa, dtype=np.float64) + quat_to_matrix(qa) @ np.asarray(pb, dtype=np.float64)
    return tuple(p), tuple(float(v) for v in quat_mul(qa, qb))


def invert(a) -> tuple:
    """The inverse pose of a (position, quaternion) pair: ``compose(invert(a), a)`` is the identity."""
    p, q = a
    q = tuple(float(v) for v in q)
    p = -(quat_to_matrix(q).T @ np.asarray(p, dtype=np.float64))
    return tuple(p), (-q[0], -q[1], -q[2], q[3])


def homogeneous(p, r) -> np.ndarray:
    """4x4 matrix of a translation ``p`` and a rotation matrix ``r``."""
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = r, p
    return m


def transforms_to_array(xforms) -> np.ndarray:
    """(n, 7) float64 (position, quaternion) of a list of ``wp.transform`` (or 7-tuples)."""
    return np.array([tuple(x) for x in xforms], dtype=np.float64).reshape(len(xforms), 7)
