"""Dihedral bending for XPBD: C = theta - theta0 across each edge, compliance 1 / ``edge_ke``.

theta and its gradient are those of the SemiImplicitSolver's bending (Bridson,
Marino & Fedkiw 2003, solvers/forces/bending.py): the energy ke/2 (theta - theta0)^2
is (1 / 2 alpha) C^2. Damping gamma = alpha ``edge_kd`` / dt.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..forces.bending import dihedral_angle_gradient
from ..forces.element_funcs import gather4, gradient_rate, quad_vertices, weighted_squared_norms
from .compliance import damped_multiplier_step
from .jacobi import element_constraint_stage

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def solve_bending_constraints_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    indices: wp.array2d(dtype=wp.int32),
    rest_angle: wp.array(dtype=float),
    properties: wp.array2d(dtype=float),
    # Data in:
    x_start: wp.array(dtype=wp.vec3),
    dx: wp.array(dtype=wp.vec3),
    lambda_in: wp.array(dtype=float),
    # In:
    scale: wp.array(dtype=float),
    dt: float,
    # Data out:
    delta: wp.array(dtype=wp.vec3),
    lambda_out: wp.array(dtype=float),
):
    t = wp.tid()
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
    if ok != 0.0:  # a collapsed wing has no angle
        w1, w2, w3, w4 = gather4(inv_mass, i, j, k, l)
        # damped_multiplier_step takes a "modulus x measure": ke itself, measure 1
        wsum = weighted_squared_norms(d1, d2, d3, d4, w1, w2, w3, w4)
        rate = gradient_rate(d1, d2, d3, d4, m1, m2, m3, m4)
        dlam = damped_multiplier_step(theta - rest_angle[t], lam, wsum, rate, properties[t, 0], 1.0, properties[t, 1],
                                      dt, scale[t])
        wp.atomic_add(delta, i, d1 * (w1 * dlam))
        wp.atomic_add(delta, j, d2 * (w2 * dlam))
        wp.atomic_add(delta, k, d3 * (w3 * dlam))
        wp.atomic_add(delta, l, d4 * (w4 * dlam))
    lambda_out[t] = lam + dlam


solve_bending_constraints = element_constraint_stage(
    "bending", solve_bending_constraints_kernel, "edge_count",
    ("edge_indices", "edge_rest_angle", "edge_bending_properties"), "edge_lambda", "edge")
