"""Dihedral bending for XPBD: C = theta - theta0 across each edge, compliance 1 / ``edge_ke``.

theta and its gradient are those of the SemiImplicitSolver's bending (Bridson,
Marino & Fedkiw 2003, solvers/forces/bending.py): the energy ke/2 (theta - theta0)^2
is (1 / 2 alpha) C^2. Damping gamma = alpha ``edge_kd`` / dt.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..forces.bending import dihedral_angle_gradient
from ..forces.element_funcs import ElementVectors, gather4, gradient_rate, quad_vertices, weighted_squared_norms
from .compliance import damped_multiplier_step
from .element_kernels import element_constraints

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def bending_step(t: int, inv_mass: wp.array(dtype=float), indices: wp.array2d(dtype=wp.int32),
                 rest_angle: wp.array(dtype=float), stiffness: wp.array2d(dtype=float),
                 damping: wp.array2d(dtype=float), x_start: wp.array(dtype=wp.vec3), dx: wp.array(dtype=wp.vec3),
                 lambda_in: wp.array(dtype=float), scale: wp.array(dtype=float), dt: float):
    """Bending edge t's particles, their corrections and its next multiplier (:mod:`.element_kernels`).

    ``stiffness`` and ``damping`` are both ``edge_bending_properties`` (ke, kd), as in the force
    (``solvers/forces/bending.py``).
    """
    i, j, k, l = quad_vertices(indices, t)
    # the four points relative to the first one's start (the angle does not depend on where they are; the
    # differences keep float32's precision far from the origin: step-local, jacobi.py)
    m1, m2, m3, m4 = gather4(dx, i, j, k, l)
    o = x_start[i]
    x1 = m1
    x2 = (x_start[j] - o) + m2
    x3 = (x_start[k] - o) + m3
    x4 = (x_start[l] - o) + m4
    lam = lambda_in[t]
    theta, d1, d2, d3, d4, ok = dihedral_angle_gradient(x1, x2, x3, x4)
    dlam = float(0.0)
    corrections = ElementVectors()
    applies = ok != 0.0  # a collapsed wing has no angle
    if applies:
        w1, w2, w3, w4 = gather4(inv_mass, i, j, k, l)
        # damped_multiplier_step takes a "modulus x measure": ke itself, measure 1
        wsum = weighted_squared_norms(d1, d2, d3, d4, w1, w2, w3, w4)
        rate = gradient_rate(d1, d2, d3, d4, m1, m2, m3, m4)
        dlam = damped_multiplier_step(theta - rest_angle[t], lam, wsum, rate, stiffness[t, 0], 1.0, damping[t, 1],
                                      dt, scale[t])
        corrections = wp.matrix_from_rows(d1 * (w1 * dlam), d2 * (w2 * dlam), d3 * (w3 * dlam), d4 * (w4 * dlam))
    return wp.vec4i(i, j, k, l), corrections, applies, lam + dlam


solve_bending_constraints_kernel, solve_bending_constraints = element_constraints(
    "bending", "solve_bending_constraints_kernel", __name__, bending_step, "edge_count",
    ("edge_indices", "edge_rest_angle", "edge_bending_properties", "edge_bending_properties"), "edge_lambda", float,
    "edge")
