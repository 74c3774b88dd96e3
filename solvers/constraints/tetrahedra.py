"""Tetrahedral constraints for XPBD: the stable neo-Hookean energy as two constraints (Macklin & Müller 2021).

The energy is the one the SemiImplicitSolver uses (solvers/forces/tetrahedra.py),

    V psi = V mu'/2 (I_C - log(I_C + 1)) + V lam'/2 (J - a)^2 + const,   a = 1 + 3 mu' / (4 lam'),

written as (1 / 2 alpha) C^2 for a deviatoric and a volumetric constraint

    C_D = sqrt(I_C - log(I_C + 1)),  alpha_D = 1 / (mu' V)
    C_H = J - a,                     alpha_H = 1 / (lam' V)

so that both solvers come to the same static equilibrium. I_C = tr(F^T F),
J = det F, F = [x1 - x0, x2 - x0, x3 - x0] Dm^-1; mu' = 4/3 k_mu and
lam' = k_lambda + 5/6 k_mu map Lamé's parameters as in Smith et al. 2018.
Damping: gamma = k_damp / (k dt) on each constraint, XPBD's damping with
beta = k_damp V. Both constraints of a tet are solved from the same iterate
(Jacobi) and scaled by omega / sqrt(max n_i) over its particles (see ``jacobi_scales``).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..forces.element_funcs import (cofactor_determinant, gather4, gradient_rate, matrix_columns, quad_vertices,
                                    weighted_squared_norms)
from .compliance import damped_multiplier_step
from .element_kernels import element_constraints

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def _tet_particle_grads(dcdf: wp.mat33, dm_inv: wp.mat33):
    """d C / d x_1..3 as the columns of dC/dF Dm^-T (the gradient on x_0 is minus their sum)."""
    return dcdf * wp.transpose(dm_inv)


@wp.func
def _tet_multiplier_step(c: float, lam: float, g: wp.mat33, w0: float, w1: float, w2: float, w3: float,
                         m0: wp.vec3, m1: wp.vec3, m2: wp.vec3, m3: wp.vec3, k: float, volume: float, kd: float,
                         dt: float, s: float):
    """The multiplier increment of one of a tet's constraints, whose particle gradients ``g`` gives."""
    g1, g2, g3 = matrix_columns(g)
    g0 = -(g1 + g2 + g3)
    return damped_multiplier_step(c, lam, weighted_squared_norms(g0, g1, g2, g3, w0, w1, w2, w3),
                                  gradient_rate(g0, g1, g2, g3, m0, m1, m2, m3), k, volume, kd, dt, s)


@wp.func
def tet_step(t: int, inv_mass: wp.array(dtype=float), indices: wp.array2d(dtype=wp.int32),
             poses: wp.array(dtype=wp.mat33), volumes: wp.array(dtype=float), materials: wp.array2d(dtype=float),
             x_start: wp.array(dtype=wp.vec3), dx: wp.array(dtype=wp.vec3), lambda_in: wp.array(dtype=wp.vec2),
             scale: wp.array(dtype=float), dt: float):
    """Tetrahedron t's particles, their corrections and its next multipliers (:mod:`.element_kernels`)."""
    i0, i1, i2, i3 = quad_vertices(indices, t)
    w0, w1, w2, w3 = gather4(inv_mass, i0, i1, i2, i3)
    # edges from the start positions' differences and the displacements' (step-local: jacobi.py)
    m0, m1, m2, m3 = gather4(dx, i0, i1, i2, i3)
    x0 = x_start[i0]
    dm_inv = poses[t]
    F = wp.matrix_from_cols((x_start[i1] - x0) + (m1 - m0), (x_start[i2] - x0) + (m2 - m0),
                            (x_start[i3] - x0) + (m3 - m0)) * dm_inv
    mu = 4.0 / 3.0 * materials[t, 0]
    la = materials[t, 1] + 5.0 / 6.0 * materials[t, 0]
    kd = materials[t, 2]
    vol = volumes[t]
    s = scale[t]
    lam = lambda_in[t]

    # deviatoric
    ic = wp.ddot(F, F)
    cd = wp.sqrt(wp.max(ic - wp.log(ic + 1.0), 1.0e-12))
    gd = _tet_particle_grads(F * ((1.0 - 1.0 / (ic + 1.0)) / cd), dm_inv)
    dld = _tet_multiplier_step(cd, lam[0], gd, w0, w1, w2, w3, m0, m1, m2, m3, mu, vol, kd, dt, s)

    # volumetric
    cof, j = cofactor_determinant(F)
    ch = j - (1.0 + 0.75 * mu / la)
    gh = _tet_particle_grads(cof, dm_inv)
    dlh = _tet_multiplier_step(ch, lam[1], gh, w0, w1, w2, w3, m0, m1, m2, m3, la, vol, kd, dt, s)

    g = gd * dld + gh * dlh
    d1, d2, d3 = matrix_columns(g)
    corrections = wp.matrix_from_rows(-(d1 + d2 + d3) * w0, d1 * w1, d2 * w2, d3 * w3)
    return wp.vec4i(i0, i1, i2, i3), corrections, True, wp.vec2(lam[0] + dld, lam[1] + dlh)


solve_tet_constraints_kernel, solve_tet_constraints = element_constraints(
    "tetrahedra", "solve_tet_constraints_kernel", __name__, tet_step, "tet_count",
    ("tet_indices", "tet_poses", "tet_volumes", "tet_materials"), "tet_lambda", wp.vec2, "tet")
