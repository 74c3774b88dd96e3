"""Rest-shape computations done once on the host in float64 (the builder's side of the FEM kernels)."""

from __future__ import annotations

import numpy as np

_DEGENERATE = 1e-12


def triangle_rest_pose(x: np.ndarray):
    """Inverse of the 2x2 rest edge matrix in the triangle's own plane, and its rest area.

    ``x`` is (3, 3). Returns ``(inv_dm, area)``, with ``inv_dm`` None for a degenerate triangle.
    """
    e1, e2 = x[1] - x[0], x[2] - x[0]
    n = np.cross(e1, e2)
    area = 0.5 * float(np.linalg.norm(n))
    scale = max(float(np.dot(e1, e1)), float(np.dot(e2, e2)), 1e-30)
    if area <= _DEGENERATE * scale:
        return None, area
    # orthonormal in-plane frame (t, b) with t along the first edge
    t = e1 / np.linalg.norm(e1)
    b = np.cross(n / np.linalg.norm(n), t)
    dm = np.array([[np.dot(e1, t), np.dot(e2, t)], [np.dot(e1, b), np.dot(e2, b)]])
    return np.linalg.inv(dm), area


def tet_rest_pose(x: np.ndarray):
    """Inverse rest edge matrix and signed rest volume of a tetrahedron ``x`` (4, 3)."""
    dm = np.stack([x[1] - x[0], x[2] - x[0], x[3] - x[0]], axis=1)
    volume = float(np.linalg.det(dm)) / 6.0
    scale = max(float(np.max(np.sum((x[1:] - x[0]) ** 2, axis=1))), 1e-30) ** 1.5
    if abs(volume) <= _DEGENERATE * scale:
        return None, volume
    return np.linalg.inv(dm), volume


def dihedral_angle(x1, x2, x3, x4):
    """Signed dihedral angle [rad] across edge (x3, x4) between triangles (x1, x3, x4) and (x2, x4, x3).

    0 when the two triangles are flat (coplanar, consistently oriented). None if a wing is degenerate.
    """
    n1 = np.cross(x3 - x1, x4 - x1)
    n2 = np.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    l1, l2, le = np.linalg.norm(n1), np.linalg.norm(n2), np.linalg.norm(e)
    if l1 < 1e-20 or l2 < 1e-20 or le < 1e-20:
        return None
    n1, n2, e = n1 / l1, n2 / l2, e / le
    return float(np.arctan2(np.dot(np.cross(n1, n2), e), np.dot(n1, n2)))
