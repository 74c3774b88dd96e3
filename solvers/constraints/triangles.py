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
from ..forces.element_funcs import (NO_PARTICLE, area_ratio_gradient, gather3, membrane_deformation,
                                    membrane_vertex_gradients, triangle_vertices)
from .compliance import damped_multiplier_step
from .element_kernels import element_constraints

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def _membrane_step(c: float, lam: float, p0: wp.vec3, p1: wp.vec3, dm: wp.mat22, wi: float, wj: float, wk: float,
                   mi: wp.vec3, mj: wp.vec3, mk: wp.vec3, k: float, area: float, kd: float, dt: float, s: float):
    """One membrane constraint's multiplier increment and its gradients on x_i, x_j, x_k, from dC/dF = [p0, p1]."""
    gj, gk = membrane_vertex_gradients(p0, p1, dm)
    gi = -(gj + gk)
    dl = damped_multiplier_step(c, lam, wi * wp.dot(gi, gi) + wj * wp.dot(gj, gj) + wk * wp.dot(gk, gk),
                                wp.dot(gi, mi) + wp.dot(gj, mj) + wp.dot(gk, mk), k, area, kd, dt, s)
    return dl, gi, gj, gk


@wp.func
def triangle_step(t: int, inv_mass: wp.array(dtype=float), indices: wp.array2d(dtype=wp.int32),
                  poses: wp.array(dtype=wp.mat22), areas: wp.array(dtype=float), materials: wp.array2d(dtype=float),
                  x_start: wp.array(dtype=wp.vec3), dx: wp.array(dtype=wp.vec3), lambda_in: wp.array(dtype=wp.vec2),
                  scale: wp.array(dtype=float), dt: float):
    """Triangle t's particles, their corrections and its next multipliers (:mod:`.element_kernels`)."""
    i, j, k = triangle_vertices(indices, t)
    wi, wj, wk = gather3(inv_mass, i, j, k)
    dm = poses[t]
    mu = materials[t, 0]
    la = materials[t, 1] + mu
    kd = materials[t, 2]
    area = areas[t]
    s = scale[t]
    # edges from the start positions' differences and the displacements' (step-local: jacobi.py)
    mi, mj, mk = gather3(dx, i, j, k)
    xi = x_start[i]
    e1 = (x_start[j] - xi) + (mj - mi)
    e2 = (x_start[k] - xi) + (mk - mi)
    f0, f1 = membrane_deformation(e1, e2, dm)
    lam = lambda_in[t]

    # stretch / shear
    cd = wp.sqrt(wp.dot(f0, f0) + wp.dot(f1, f1))
    dld, gdi, gdj, gdk = _membrane_step(cd, lam[0], f0 / cd, f1 / cd, dm, wi, wj, wk, mi, mj, mk, mu, area, kd, dt, s)

    # area
    ratio, dj0, dj1 = area_ratio_gradient(f0, f1)
    dla, gai, gaj, gak = _membrane_step(ratio - (1.0 + mu / la), lam[1], dj0, dj1, dm, wi, wj, wk, mi, mj, mk, la,
                                        area, kd, dt, s)

    corrections = wp.matrix_from_rows((gdi * dld + gai * dla) * wi, (gdj * dld + gaj * dla) * wj,
                                      (gdk * dld + gak * dla) * wk, wp.vec3(0.0))
    return wp.vec4i(i, j, k, NO_PARTICLE), corrections, True, wp.vec2(lam[0] + dld, lam[1] + dla)


solve_triangle_constraints_kernel, solve_triangle_constraints = element_constraints(
    "triangles", "solve_triangle_constraints_kernel", __name__, triangle_step, "tri_count",
    ("tri_indices", "tri_poses", "tri_areas", "tri_materials"), "tri_lambda", wp.vec2, "tri")
