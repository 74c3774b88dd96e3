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
from .elements import element_force_stage, element_share, implicit_damping

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def triangle_forces_kernel(
    # Model:
    indices: wp.array2d(dtype=wp.int32),
    poses: wp.array(dtype=wp.mat22),
    areas: wp.array(dtype=float),
    materials: wp.array2d(dtype=float),
    inv_mass: wp.array(dtype=float),
    element_count: wp.array(dtype=wp.int32),
    # Data in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    # In:
    dt: float,
    # Data out:
    f: wp.array(dtype=wp.vec3),
):
    t = wp.tid()
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
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

    e1 = x[j] - x[i]
    e2 = x[k] - x[i]
    f0 = e1 * dm[0, 0] + e2 * dm[1, 0]
    f1 = e1 * dm[0, 1] + e2 * dm[1, 1]
    u1 = v[j] - v[i]
    u2 = v[k] - v[i]
    g0 = u1 * dm[0, 0] + u2 * dm[1, 0]
    g1 = u1 * dm[0, 1] + u2 * dm[1, 1]

    c = wp.cross(f0, f1)
    area_ratio = wp.length(c)
    n = c / wp.max(area_ratio, 1.0e-12)
    dj0 = wp.cross(f1, n)
    dj1 = wp.cross(n, f0)

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
    h1 = (p0 * dm[0, 0] + p1 * dm[0, 1]) * a
    h2 = (p0 * dm[1, 0] + p1 * dm[1, 1]) * a
    wp.atomic_add(f, i, h1 + h2)
    wp.atomic_sub(f, j, h1)
    wp.atomic_sub(f, k, h2)


eval_triangle_forces = element_force_stage("triangles", triangle_forces_kernel, "tri_count",
                                             ("tri_indices", "tri_poses", "tri_areas", "tri_materials"))
