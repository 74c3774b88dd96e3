"""Dihedral bending for XPBD: C = theta - theta0 across each edge, compliance 1 / ``edge_ke``.

theta and its gradient are those of the SemiImplicitSolver's bending (Bridson,
Marino & Fedkiw 2003, solvers/forces/bending.py): the energy ke/2 (theta - theta0)^2
is (1 / 2 alpha) C^2. Damping gamma = alpha ``edge_kd`` / dt.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..forces.bending import dihedral_angle_gradient
from ..forces.element_funcs import ElementVectors, gather4, gradient_rate, quad_vertices, weighted_squared_norms
from .compliance import damped_multiplier_partials, damped_multiplier_step
from . import hand_adjoint
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


@wp.func
def _dihedral_angle_adjoint(x1: wp.vec3, x2: wp.vec3, x3: wp.vec3, x4: wp.vec3, adj_theta: float,
                            g1: wp.vec3, g2: wp.vec3, g3: wp.vec3, g4: wp.vec3, d1: wp.vec3, d2: wp.vec3,
                            d3: wp.vec3, d4: wp.vec3):
    """Adjoint of ``dihedral_angle_gradient`` where it has an angle (``ok``): the adjoints of x1..x4 from that
    of theta and those (g1..g4) of its gradient d1..d4. theta's own derivative is d1..d4 (Bridson et al.'s
    closed form); the gradient's is its formula's, reversed:

        d1 = -|e| a1, d2 = -|e| a2, d3 = -(s1 a1 + s2 a2), d4 = t1 a1 + t2 a2,
        a_w = n_w / |n_w|^2, s_w = (x_w - x4) . e^, t_w = (x_w - x3) . e^, e = x4 - x3
    """
    n1 = wp.cross(x3 - x1, x4 - x1)
    n2 = wp.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    e_len = wp.length(e)
    e_hat = e / e_len
    q1 = wp.dot(n1, n1)
    q2 = wp.dot(n2, n2)
    a1 = n1 / q1
    a2 = n2 / q2
    s1 = wp.dot(x1 - x4, e_hat)
    s2 = wp.dot(x2 - x4, e_hat)
    t1 = wp.dot(x1 - x3, e_hat)
    t2 = wp.dot(x2 - x3, e_hat)
    adj_a1 = -e_len * g1 - s1 * g3 + t1 * g4
    adj_a2 = -e_len * g2 - s2 * g3 + t2 * g4
    adj_len = -(wp.dot(a1, g1) + wp.dot(a2, g2))
    adj_s1 = -wp.dot(a1, g3)
    adj_s2 = -wp.dot(a2, g3)
    adj_t1 = wp.dot(a1, g4)
    adj_t2 = wp.dot(a2, g4)
    adj_x1 = d1 * adj_theta + e_hat * (adj_s1 + adj_t1)
    adj_x2 = d2 * adj_theta + e_hat * (adj_s2 + adj_t2)
    adj_x3 = d3 * adj_theta - e_hat * (adj_t1 + adj_t2)
    adj_x4 = d4 * adj_theta - e_hat * (adj_s1 + adj_s2)
    # e^ = e / |e|
    adj_hat = (x1 - x4) * adj_s1 + (x2 - x4) * adj_s2 + (x1 - x3) * adj_t1 + (x2 - x3) * adj_t2
    adj_e = (adj_hat - e_hat * wp.dot(e_hat, adj_hat)) * (1.0 / e_len) + e_hat * adj_len
    adj_x4 += adj_e
    adj_x3 -= adj_e
    # a = n / |n|^2
    adj_n1 = (adj_a1 - a1 * (2.0 * wp.dot(n1, adj_a1))) * (1.0 / q1)  # one division, not three
    adj_n2 = (adj_a2 - a2 * (2.0 * wp.dot(n2, adj_a2))) * (1.0 / q2)
    # n1 = (x3 - x1) x (x4 - x1), n2 = (x4 - x2) x (x3 - x2)
    u1 = wp.cross(x4 - x1, adj_n1)
    v1 = wp.cross(adj_n1, x3 - x1)
    u2 = wp.cross(x3 - x2, adj_n2)
    v2 = wp.cross(adj_n2, x4 - x2)
    adj_x1 -= u1 + v1
    adj_x2 -= u2 + v2
    adj_x3 += u1 + v2
    adj_x4 += v1 + u2
    return adj_x1, adj_x2, adj_x3, adj_x4


@wp.kernel(enable_backward=False, module=hand_adjoint.module_of(__name__))
def bending_constraints_adjoint_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    indices: wp.array2d(dtype=wp.int32),
    rest_angle: wp.array(dtype=float),
    stiffness: wp.array2d(dtype=float),
    damping: wp.array2d(dtype=float),
    # Data in:
    x_start: wp.array(dtype=wp.vec3),
    dx: wp.array(dtype=wp.vec3),
    lambda_in: wp.array(dtype=float),
    # In:
    scale: wp.array(dtype=float),
    dt: float,
    adj_delta: wp.array(dtype=wp.vec3),
    # Data out:
    adj_lambda_out: wp.array(dtype=float),
    adj_inv_mass: wp.array(dtype=float),
    adj_indices: wp.array2d(dtype=wp.int32),
    adj_rest_angle: wp.array(dtype=float),
    adj_stiffness: wp.array2d(dtype=float),
    adj_damping: wp.array2d(dtype=float),
    adj_x_start: wp.array(dtype=wp.vec3),
    adj_dx: wp.array(dtype=wp.vec3),
    adj_lambda_in: wp.array(dtype=float),
    adj_scale: wp.array(dtype=float),
):
    """Hand-written adjoint of ``solve_bending_constraints_kernel`` (:mod:`.hand_adjoint`): ``bending_step``'s
    forward values once, then their reverse. After the forward kernel's arguments: ``adj_delta``, the
    gradient of the corrections it added into (read); ``adj_lambda_out``, of the multipliers it stored (read,
    then zeroed: consumed, as Warp's adjoint of a store does); then the gradients of its array inputs, added
    into (a None array is skipped: no gradient wanted)."""
    t = wp.tid()
    i, j, k, l = quad_vertices(indices, t)
    al = float(0.0)
    if adj_lambda_out:
        al = adj_lambda_out[t]
        adj_lambda_out[t] = 0.0
    adj_lam = al  # lambda_out = lam + dlam
    m1, m2, m3, m4 = gather4(dx, i, j, k, l)
    o = x_start[i]
    x1 = m1
    x2 = (x_start[j] - o) + m2
    x3 = (x_start[k] - o) + m3
    x4 = (x_start[l] - o) + m4
    theta, d1, d2, d3, d4, ok = dihedral_angle_gradient(x1, x2, x3, x4)
    if ok != 0.0:
        w1, w2, w3, w4 = gather4(inv_mass, i, j, k, l)
        ke = stiffness[t, 0]
        kd = damping[t, 1]
        dlam, dd, md = damped_multiplier_partials(
            theta - rest_angle[t], lambda_in[t], weighted_squared_norms(d1, d2, d3, d4, w1, w2, w3, w4),
            gradient_rate(d1, d2, d3, d4, m1, m2, m3, m4), ke, 1.0, kd, dt, scale[t])
        # delta_v += d_v (w_v dlam)
        a1 = wp.vec3(0.0)
        a2 = wp.vec3(0.0)
        a3 = wp.vec3(0.0)
        a4 = wp.vec3(0.0)
        if adj_delta:
            a1, a2, a3, a4 = gather4(adj_delta, i, j, k, l)
        u1 = a1 * w1
        u2 = a2 * w2
        u3 = a3 * w3
        u4 = a4 * w4
        adj_dlam = al + gradient_rate(d1, d2, d3, d4, u1, u2, u3, u4)
        adj_c = dd[0] * adj_dlam
        adj_lam += dd[1] * adj_dlam
        sw = dd[2] * adj_dlam
        sr = dd[3] * adj_dlam
        ax1, ax2, ax3, ax4 = _dihedral_angle_adjoint(
            x1, x2, x3, x4, adj_c, u1 * dlam + d1 * (2.0 * w1 * sw) + m1 * sr, u2 * dlam + d2 * (2.0 * w2 * sw) + m2 * sr,
            u3 * dlam + d3 * (2.0 * w3 * sw) + m3 * sr, u4 * dlam + d4 * (2.0 * w4 * sw) + m4 * sr, d1, d2, d3, d4)
        if adj_x_start:
            wp.atomic_sub(adj_x_start, i, ax2 + ax3 + ax4)
            wp.atomic_add(adj_x_start, j, ax2)
            wp.atomic_add(adj_x_start, k, ax3)
            wp.atomic_add(adj_x_start, l, ax4)
        if adj_dx:
            wp.atomic_add(adj_dx, i, ax1 + d1 * sr)
            wp.atomic_add(adj_dx, j, ax2 + d2 * sr)
            wp.atomic_add(adj_dx, k, ax3 + d3 * sr)
            wp.atomic_add(adj_dx, l, ax4 + d4 * sr)
        if adj_inv_mass:
            wp.atomic_add(adj_inv_mass, i, wp.dot(d1, a1) * dlam + wp.dot(d1, d1) * sw)
            wp.atomic_add(adj_inv_mass, j, wp.dot(d2, a2) * dlam + wp.dot(d2, d2) * sw)
            wp.atomic_add(adj_inv_mass, k, wp.dot(d3, a3) * dlam + wp.dot(d3, d3) * sw)
            wp.atomic_add(adj_inv_mass, l, wp.dot(d4, a4) * dlam + wp.dot(d4, d4) * sw)
        if adj_rest_angle:
            adj_rest_angle[t] -= adj_c
        if adj_stiffness:
            adj_stiffness[t, 0] += md[0] * adj_dlam
        if adj_damping:
            adj_damping[t, 1] += md[2] * adj_dlam
    if adj_lambda_in:
        adj_lambda_in[t] += adj_lam


solve_bending_constraints_kernel, solve_bending_constraints = element_constraints(
    "bending", "solve_bending_constraints_kernel", __name__, bending_step, "edge_count",
    ("edge_indices", "edge_rest_angle", "edge_bending_properties", "edge_bending_properties"), "edge_lambda", float,
    "edge", adjoint=bending_constraints_adjoint_kernel)
