"""What the element kernels of both particle solvers do alike, as ``wp.func``s.

Every spring, membrane, bending and tet kernel of the SemiImplicitSolver and the XPBDSolver starts by
reading its element's particles and their per-particle values (:func:`pair_vertices` ... :func:`gather4`).
The membrane and tet forces and the constraints on the same elements are derivatives of one energy
(ARCHITECTURE.md: "Both particle solvers share energies"), so they build the same deformation gradients,
area and volume gradients and vertex gradients; the bending edges and tets of both sum the same
per-vertex terms. One definition of each keeps the two solvers on one energy. No stores here: a
``wp.func`` is replayed in the reverse pass, so the kernels scatter what these return.
"""

from typing import Any

import warp as wp

ElementVectors = wp.types.matrix(shape=(4, 3), dtype=wp.float32)
"""One vector per particle of an element (up to four: forces [N], corrections [m]), as rows."""

NO_PARTICLE = wp.constant(-1)  # in an element's wp.vec4i of particles: fewer than four


@wp.func
def pair_vertices(indices: wp.array(dtype=wp.int32), e: int):
    """The two particles of spring e (``spring_indices`` is stored flat, two per spring)."""
    return indices[2 * e], indices[2 * e + 1]


@wp.func
def triangle_vertices(indices: wp.array2d(dtype=wp.int32), e: int):
    """The three particles of triangle e."""
    return indices[e, 0], indices[e, 1], indices[e, 2]


@wp.func
def quad_vertices(indices: wp.array2d(dtype=wp.int32), e: int):
    """The four particles of bending edge or tet e."""
    return indices[e, 0], indices[e, 1], indices[e, 2], indices[e, 3]


@wp.func
def gather2(a: wp.array(dtype=Any), i: int, j: int):
    """a[i], a[j]: a per-particle value at a spring's two particles."""
    return a[i], a[j]


@wp.func
def gather3(a: wp.array(dtype=Any), i: int, j: int, k: int):
    """a[i], a[j], a[k]: a per-particle value at a triangle's particles."""
    return a[i], a[j], a[k]


@wp.func
def gather4(a: wp.array(dtype=Any), i: int, j: int, k: int, l: int):
    """a[i], a[j], a[k], a[l]: a per-particle value at a bending edge's or a tet's particles."""
    return a[i], a[j], a[k], a[l]


@wp.func
def membrane_deformation(e1: wp.vec3, e2: wp.vec3, dm: wp.mat22):
    """The columns f0, f1 of a triangle's 3x2 deformation gradient F = [e1, e2] Dm^-1 (e1, e2: edges from vertex i)."""
    return e1 * dm[0, 0] + e2 * dm[1, 0], e1 * dm[0, 1] + e2 * dm[1, 1]


@wp.func
def area_ratio_gradient(f0: wp.vec3, f1: wp.vec3):
    """The area ratio J = |f0 x f1| of a membrane and dJ/dF as two columns (zero for a collapsed triangle)."""
    c = wp.cross(f0, f1)
    ratio = wp.length(c)
    n = c / wp.max(ratio, 1.0e-12)
    return ratio, wp.cross(f1, n), wp.cross(n, f0)


@wp.func
def membrane_vertex_gradients(p0: wp.vec3, p1: wp.vec3, dm: wp.mat22):
    """d/dx_j and d/dx_k of a function of a triangle's F whose dF is [p0, p1] (d/dx_i is minus their sum)."""
    return p0 * dm[0, 0] + p1 * dm[0, 1], p0 * dm[1, 0] + p1 * dm[1, 1]


@wp.func
def matrix_columns(m: wp.mat33):
    """The three columns of m."""
    return wp.vec3(m[0, 0], m[1, 0], m[2, 0]), wp.vec3(m[0, 1], m[1, 1], m[2, 1]), wp.vec3(m[0, 2], m[1, 2], m[2, 2])


@wp.func
def cofactor_determinant(F: wp.mat33):
    """cof(F) = d det(F) / dF and det(F), from F's columns (a tet's volume ratio and its gradient)."""
    c0, c1, c2 = matrix_columns(F)
    return wp.matrix_from_cols(wp.cross(c1, c2), wp.cross(c2, c0), wp.cross(c0, c1)), wp.dot(c0, wp.cross(c1, c2))


@wp.func
def weighted_squared_norms(g0: wp.vec3, g1: wp.vec3, g2: wp.vec3, g3: wp.vec3, w0: float, w1: float, w2: float,
                           w3: float):
    """sum_v w_v |g_v|^2 over an element's four vertices: with inverse masses w, how fast its measure responds."""
    return w0 * wp.dot(g0, g0) + w1 * wp.dot(g1, g1) + w2 * wp.dot(g2, g2) + w3 * wp.dot(g3, g3)


@wp.func
def gradient_rate(g0: wp.vec3, g1: wp.vec3, g2: wp.vec3, g3: wp.vec3, u0: wp.vec3, u1: wp.vec3, u2: wp.vec3,
                  u3: wp.vec3):
    """sum_v g_v . u_v over an element's four vertices: its measure's rate for velocities (or displacements) u."""
    return wp.dot(g0, u0) + wp.dot(g1, u1) + wp.dot(g2, u2) + wp.dot(g3, u3)
