"""Rest-shape computations done once on the host in float64 (the builder's side of the FEM kernels)."""

from __future__ import annotations

import numpy as np

# Relative thickness below which a rest shape counts as degenerate: the smallest height of
# the element over its longest edge. The kernels run in float32 (relative precision ~1e-7),
# so a sliver thinner than this has a rest shape they cannot represent: its inverse rest
# matrix is huge and its forces blow up at the first step.
_DEGENERATE = 1e-6


def _cross(a, b) -> np.ndarray:
    """``np.cross`` of two 3-vectors, the same products and differences (the same bits) in a twentieth of
    its time: building a 32 x 32 cloth makes 13,000 of them, which took 0.7 s through ``np.cross``."""
    a0, a1, a2 = float(a[0]), float(a[1]), float(a[2])
    b0, b1, b2 = float(b[0]), float(b[1]), float(b[2])
    return np.array((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))


def triangle_rest_pose(x: np.ndarray):
    """Inverse of the 2x2 rest edge matrix in the triangle's own plane, and its rest area.

    ``x`` is (3, 3). Returns ``(inv_dm, area)``, with ``inv_dm`` None for a degenerate triangle.
    """
    e1, e2 = x[1] - x[0], x[2] - x[0]
    n = _cross(e1, e2)
    area = 0.5 * float(np.linalg.norm(n))
    longest = max(float(np.linalg.norm(x[a] - x[b])) for a, b in ((0, 1), (0, 2), (1, 2)))
    # smallest height = 2 area / longest edge
    if not longest > 0.0 or 2.0 * area <= _DEGENERATE * longest * longest:
        return None, area
    # orthonormal in-plane frame (t, b) with t along the first edge
    t = e1 / np.linalg.norm(e1)
    b = _cross(n / np.linalg.norm(n), t)
    dm = np.array([[np.dot(e1, t), np.dot(e2, t)], [np.dot(e1, b), np.dot(e2, b)]])
    return np.linalg.inv(dm), area


def tet_rest_pose(x: np.ndarray):
    """Inverse rest edge matrix and signed rest volume of a tetrahedron ``x`` (4, 3)."""
    dm = np.stack([x[1] - x[0], x[2] - x[0], x[3] - x[0]], axis=1)
    volume = float(np.linalg.det(dm)) / 6.0
    longest = max(float(np.linalg.norm(x[a] - x[b])) for a in range(4) for b in range(a + 1, 4))
    faces = ((0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3))
    largest_face = max(0.5 * float(np.linalg.norm(_cross(x[b] - x[a], x[c] - x[a]))) for a, b, c in faces)
    # smallest height = 3 volume / largest face area
    if not largest_face > 0.0 or 3.0 * abs(volume) <= _DEGENERATE * largest_face * longest:
        return None, volume
    return np.linalg.inv(dm), volume


def dihedral_angle(x1, x2, x3, x4):
    """Signed dihedral angle [rad] across edge (x3, x4) between triangles (x1, x3, x4) and (x2, x4, x3).

    0 when the two triangles are flat (coplanar, consistently oriented). None if a wing is degenerate.
    """
    n1 = _cross(x3 - x1, x4 - x1)
    n2 = _cross(x4 - x2, x3 - x2)
    e = x4 - x3
    l1, l2, le = np.linalg.norm(n1), np.linalg.norm(n2), np.linalg.norm(e)
    if l1 < 1e-20 or l2 < 1e-20 or le < 1e-20:
        return None
    n1, n2, e = n1 / l1, n2 / l2, e / le
    return float(np.arctan2(np.dot(_cross(n1, n2), e), np.dot(n1, n2)))
