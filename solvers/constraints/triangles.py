"""Membrane (cloth) triangles for XPBD: the SemiImplicitSolver's membrane energy as two constraints.

Per triangle of rest area A, with F the 3x2 deformation gradient and J its area ratio,
the energy A (mu/2 (I_C - 2) + lam'/2 (J - a)^2), a = 1 + mu / lam', lam' = lam + mu
(solvers/forces/triangles.py), is (1 / 2 alpha) C^2 of

    C_D = sqrt(I_C),  alpha_D = 1 / (mu A)        (stretch and shear)
    C_A = J - a,      alpha_A = 1 / (lam' A)      (area)

so both solvers hang a pinned cloth at the same equilibrium. mu = ``tri_ke``,
lam = ``tri_ka``; damping gamma = ``tri_kd`` / (k dt) on each constraint.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from .compliance import damped_multiplier_step
from .jacobi import element_constraint_stage

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def _membrane_grads(p0: wp.vec3, p1: wp.vec3, dm: wp.mat22):
    """dC/dx_j and dC/dx_k from dC/dF = [p0, p1] (dC/dx_i is minus their sum)."""
    return wp.matrix_from_rows(p0 * dm[0, 0] + p1 * dm[0, 1], p0 * dm[1, 0] + p1 * dm[1, 1], wp.vec3(0.0))


@wp.kernel
def solve_triangle_constraints_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    indices: wp.array2d(dtype=wp.int32),
    poses: wp.array(dtype=wp.mat22),
    areas: wp.array(dtype=float),
    materials: wp.array2d(dtype=float),
    # Data in:
    x_start: wp.array(dtype=wp.vec3),
    dx: wp.array(dtype=wp.vec3),
    lambda_in: wp.array(dtype=wp.vec2),
    # In:
    scale: wp.array(dtype=float),
    dt: float,
    # Data out:
    delta: wp.array(dtype=wp.vec3),
    lambda_out: wp.array(dtype=wp.vec2),
):
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    wi = inv_mass[i]
    wj = inv_mass[j]
    wk = inv_mass[k]
    dm = poses[t]
    mu = materials[t, 0]
    la = materials[t, 1] + mu
    kd = materials[t, 2]
    area = areas[t]
    s = scale[t]
    # edges from the start positions' differences and the displacements' (step-local: jacobi.py)
    mi = dx[i]
    mj = dx[j]
    mk = dx[k]
    xi = x_start[i]
    e1 = (x_start[j] - xi) + (mj - mi)
    e2 = (x_start[k] - xi) + (mk - mi)
    f0 = e1 * dm[0, 0] + e2 * dm[1, 0]
    f1 = e1 * dm[0, 1] + e2 * dm[1, 1]
    lam = lambda_in[t]

    # stretch / shear
    cd = wp.sqrt(wp.dot(f0, f0) + wp.dot(f1, f1))
    gd = _membrane_grads(f0 / cd, f1 / cd, dm)
    gdj = gd[0]
    gdk = gd[1]
    gdi = -(gdj + gdk)
    dld = damped_multiplier_step(cd, lam[0], wi * wp.dot(gdi, gdi) + wj * wp.dot(gdj, gdj) + wk * wp.dot(gdk, gdk),
                                 wp.dot(gdi, mi) + wp.dot(gdj, mj) + wp.dot(gdk, mk), mu, area, kd, dt, s)

    # area
    c = wp.cross(f0, f1)
    ratio = wp.length(c)
    n = c / wp.max(ratio, 1.0e-12)
    ga = _membrane_grads(wp.cross(f1, n), wp.cross(n, f0), dm)
    gaj = ga[0]
    gak = ga[1]
    gai = -(gaj + gak)
    dla = damped_multiplier_step(ratio - (1.0 + mu / la), lam[1],
                                 wi * wp.dot(gai, gai) + wj * wp.dot(gaj, gaj) + wk * wp.dot(gak, gak),
                                 wp.dot(gai, mi) + wp.dot(gaj, mj) + wp.dot(gak, mk), la, area, kd, dt, s)

    wp.atomic_add(delta, i, (gdi * dld + gai * dla) * wi)
    wp.atomic_add(delta, j, (gdj * dld + gaj * dla) * wj)
    wp.atomic_add(delta, k, (gdk * dld + gak * dla) * wk)
    lambda_out[t] = wp.vec2(lam[0] + dld, lam[1] + dla)


solve_triangle_constraints = element_constraint_stage(
    "triangles", solve_triangle_constraints_kernel, "tri_count",
    ("tri_indices", "tri_poses", "tri_areas", "tri_materials"), "tri_lambda", "tri")
