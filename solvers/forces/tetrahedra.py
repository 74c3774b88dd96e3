"""Tetrahedral FEM: stable neo-Hookean (Smith, de Goes & Kim 2018).

    psi = mu'/2 (I_C - 3) + lam'/2 (J - alpha)^2 - mu'/2 log(I_C + 1),  alpha = 1 + 3 mu' / (4 lam')
with mu' = 4/3 mu and lam' = lam + 5/6 mu, the paper's mapping that makes the
linearised stress match Lamé's (mu = ``k_mu``, lam = ``k_lambda``). Its stress
    P = mu' (1 - 1/(I_C + 1)) F + (lam' (J - 1) - 3/4 mu') cof(F)
vanishes at rest and stays finite for inverted elements.
Damping: P_d = k_damp' F sym(F^T dF/dt), k_damp capped per element (:mod:`inertia.solvers.forces.elements`).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from .element_funcs import cofactor_determinant, matrix_columns, quad_vertices, weighted_squared_norms
from .element_kernels import element_forces
from .elements import element_share, implicit_damping

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def tet_psi(F: wp.mat33, mu: float, lam: float):
    """Stable neo-Hookean energy density [J/m^3] for Lamé (mu, lam); used by tests and energy checks."""
    m = 4.0 / 3.0 * mu
    l = lam + 5.0 / 6.0 * mu
    ic = wp.ddot(F, F)
    alpha = 1.0 + 0.75 * m / l
    j = wp.determinant(F)
    return 0.5 * m * (ic - 3.0) + 0.5 * l * (j - alpha) * (j - alpha) - 0.5 * m * wp.log(ic + 1.0)


@wp.func
def tetrahedron_forces(t: int, indices: wp.array2d(dtype=wp.int32), poses: wp.array(dtype=wp.mat33),
                       volumes: wp.array(dtype=float), materials: wp.array2d(dtype=float),
                       inv_mass: wp.array(dtype=float), element_count: wp.array(dtype=wp.int32),
                       x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float):
    """Tetrahedron t's particles and the forces on them (:mod:`inertia.solvers.forces.element_kernels`)."""
    i0, i1, i2, i3 = quad_vertices(indices, t)
    x0 = x[i0]
    v0 = v[i0]
    dm_inv = poses[t]
    F = wp.matrix_from_cols(x[i1] - x0, x[i2] - x0, x[i3] - x0) * dm_inv
    dF = wp.matrix_from_cols(v[i1] - v0, v[i2] - v0, v[i3] - v0) * dm_inv

    mu = 4.0 / 3.0 * materials[t, 0]
    lam = materials[t, 1] + 5.0 / 6.0 * materials[t, 0]
    # strain gradients of the vertices: rows of Dm^-1 (1..3) and minus their sum (0)
    g1 = wp.vec3(dm_inv[0, 0], dm_inv[0, 1], dm_inv[0, 2])
    g2 = wp.vec3(dm_inv[1, 0], dm_inv[1, 1], dm_inv[1, 2])
    g3 = wp.vec3(dm_inv[2, 0], dm_inv[2, 1], dm_inv[2, 2])
    g0 = g1 + g2 + g3
    rate = volumes[t] * weighted_squared_norms(g0, g1, g2, g3, inv_mass[i0], inv_mass[i1], inv_mass[i2], inv_mass[i3])
    kd = implicit_damping(materials[t, 2], rate * element_share(element_count, i0, i1, i2, i3), dt)

    cof, j = cofactor_determinant(F)
    ic = wp.ddot(F, F)

    FtdF = wp.transpose(F) * dF
    strain_rate = 0.5 * (FtdF + wp.transpose(FtdF))
    P = F * (mu * (1.0 - 1.0 / (ic + 1.0))) + cof * (lam * (j - 1.0) - 0.75 * mu) + F * strain_rate * kd

    H = P * wp.transpose(dm_inv) * volumes[t]
    h1, h2, h3 = matrix_columns(H)
    return wp.vec4i(i0, i1, i2, i3), wp.matrix_from_rows(h1 + h2 + h3, -h1, -h2, -h3), True


tetrahedron_forces_kernel, eval_tetrahedron_forces = element_forces(
    "tetrahedra", "tetrahedron_forces_kernel", __name__, tetrahedron_forces, "tet_count",
    ("tet_indices", "tet_poses", "tet_volumes", "tet_materials"))
