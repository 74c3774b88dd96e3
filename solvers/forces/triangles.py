"""Membrane (cloth) triangles: a stable neo-Hookean energy in the triangle's plane.

Per unit rest area, with F the 3x2 deformation gradient and J its area ratio:
    psi = mu/2 (tr(F^T F) - 2) + lam'/2 (J - alpha)^2,   alpha = 1 + mu/lam',
with lam' = lam + mu so that, linearised, the stress is 2 mu eps + lam tr(eps) I
(mu = ``tri_ke``, lam = ``tri_ka``). Written without 1/lam, so lam = 0 is fine:
    P = mu (F - dJ/dF) + lam' (J - 1) dJ/dF.
Damping: P_d = kd' F sym(F^T dF/dt), which dissipates stretch but not rigid rotation (kd' is kd capped
per element: :mod:`inertia.solvers.forces.elements`).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from .element_funcs import (NO_PARTICLE, area_ratio_gradient, membrane_deformation, membrane_vertex_gradients,
                            triangle_vertices)
from .element_kernels import element_forces
from .elements import element_share, implicit_damping

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def triangle_forces(t: int, indices: wp.array2d(dtype=wp.int32), poses: wp.array(dtype=wp.mat22),
                    areas: wp.array(dtype=float), materials: wp.array2d(dtype=float), inv_mass: wp.array(dtype=float),
                    element_count: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                    dt: float):
    """Triangle t's particles and the forces on them (:mod:`inertia.solvers.forces.element_kernels`)."""
    i, j, k = triangle_vertices(indices, t)
    dm = poses[t]
    mu = materials[t, 0]
    lam = materials[t, 1] + mu
    # strain gradients of the vertices: rows of Dm^-1 (j, k) and minus their sum (i)
    gj = dm[0, 0] * dm[0, 0] + dm[0, 1] * dm[0, 1]
    gk = dm[1, 0] * dm[1, 0] + dm[1, 1] * dm[1, 1]
    gi = (dm[0, 0] + dm[1, 0]) * (dm[0, 0] + dm[1, 0]) + (dm[0, 1] + dm[1, 1]) * (dm[0, 1] + dm[1, 1])
    rate = areas[t] * (gi * inv_mass[i] + gj * inv_mass[j] + gk * inv_mass[k]) * element_share(
        element_count, i, j, k, -1)
    kd = implicit_damping(materials[t, 2], rate, dt)

    f0, f1 = membrane_deformation(x[j] - x[i], x[k] - x[i], dm)
    g0, g1 = membrane_deformation(v[j] - v[i], v[k] - v[i], dm)
    area_ratio, dj0, dj1 = area_ratio_gradient(f0, f1)

    s = lam * (area_ratio - 1.0)
    p0 = mu * (f0 - dj0) + s * dj0
    p1 = mu * (f1 - dj1) + s * dj1

    # strain-rate damping
    s00 = wp.dot(f0, g0)
    s11 = wp.dot(f1, g1)
    s01 = 0.5 * (wp.dot(f0, g1) + wp.dot(f1, g0))
    p0 = p0 + kd * (f0 * s00 + f1 * s01)
    p1 = p1 + kd * (f0 * s01 + f1 * s11)

    a = areas[t]
    hj, hk = membrane_vertex_gradients(p0, p1, dm)
    h1 = hj * a
    h2 = hk * a
    return wp.vec4i(i, j, k, NO_PARTICLE), wp.matrix_from_rows(h1 + h2, -h1, -h2, wp.vec3(0.0)), True


triangle_forces_kernel, eval_triangle_forces = element_forces(
    "triangles", "triangle_forces_kernel", __name__, triangle_forces, "tri_count",
    ("tri_indices", "tri_poses", "tri_areas", "tri_materials"))
