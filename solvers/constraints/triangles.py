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
from .compliance import damped_multiplier_partials, damped_multiplier_step
from . import hand_adjoint
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


@wp.func
def _membrane_gradients(p0: wp.vec3, p1: wp.vec3, dm: wp.mat22):
    """A membrane constraint's gradients on x_i, x_j, x_k from dC/dF = [p0, p1]."""
    gj, gk = membrane_vertex_gradients(p0, p1, dm)
    return -(gj + gk), gj, gk


@wp.func
def _membrane_gradients_adjoint(bi: wp.vec3, bj: wp.vec3, bk: wp.vec3, p0: wp.vec3, p1: wp.vec3, dm: wp.mat22):
    """Adjoint of :func:`_membrane_gradients`: from the gradients' adjoints ``b``, those of p0, p1 and Dm^-1."""
    cj = bj - bi  # g_i = -(g_j + g_k)
    ck = bk - bi
    adj_p0 = cj * dm[0, 0] + ck * dm[1, 0]
    adj_p1 = cj * dm[0, 1] + ck * dm[1, 1]
    adj_dm = wp.mat22(wp.dot(p0, cj), wp.dot(p1, cj), wp.dot(p0, ck), wp.dot(p1, ck))
    return adj_p0, adj_p1, adj_dm


@wp.kernel(enable_backward=False, module=hand_adjoint.module_of(__name__))
def triangle_constraints_adjoint_kernel(
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
    adj_delta: wp.array(dtype=wp.vec3),
    # Data out:
    adj_lambda_out: wp.array(dtype=wp.vec2),
    adj_inv_mass: wp.array(dtype=float),
    adj_indices: wp.array2d(dtype=wp.int32),
    adj_poses: wp.array(dtype=wp.mat22),
    adj_areas: wp.array(dtype=float),
    adj_materials: wp.array2d(dtype=float),
    adj_x_start: wp.array(dtype=wp.vec3),
    adj_dx: wp.array(dtype=wp.vec3),
    adj_lambda_in: wp.array(dtype=wp.vec2),
    adj_scale: wp.array(dtype=float),
):
    """Hand-written adjoint of ``solve_triangle_constraints_kernel`` (:mod:`.hand_adjoint`): ``triangle_step``'s
    forward values once, then their reverse, constraint by constraint. After the forward kernel's arguments: ``adj_delta``, the
    gradient of the corrections it added into (read); ``adj_lambda_out``, of the multipliers it stored (read,
    then zeroed: consumed, as Warp's adjoint of a store does); then the gradients of its array inputs, added
    into (a None array is skipped: no gradient wanted)."""
    t = wp.tid()
    # forward, as triangle_step
    i, j, k = triangle_vertices(indices, t)
    wi, wj, wk = gather3(inv_mass, i, j, k)
    dm = poses[t]
    mu = materials[t, 0]
    la = materials[t, 1] + mu
    kd = materials[t, 2]
    area = areas[t]
    s = scale[t]
    mi, mj, mk = gather3(dx, i, j, k)
    xi = x_start[i]
    e1 = (x_start[j] - xi) + (mj - mi)
    e2 = (x_start[k] - xi) + (mk - mi)
    f0, f1 = membrane_deformation(e1, e2, dm)
    lam = lambda_in[t]
    cd = wp.sqrt(wp.dot(f0, f0) + wp.dot(f1, f1))
    p0 = f0 / cd
    p1 = f1 / cd
    gdi, gdj, gdk = _membrane_gradients(p0, p1, dm)
    dld, dd, md = damped_multiplier_partials(
        cd, lam[0], wi * wp.dot(gdi, gdi) + wj * wp.dot(gdj, gdj) + wk * wp.dot(gdk, gdk),
        wp.dot(gdi, mi) + wp.dot(gdj, mj) + wp.dot(gdk, mk), mu, area, kd, dt, s)
    ratio, dj0, dj1 = area_ratio_gradient(f0, f1)
    gai, gaj, gak = _membrane_gradients(dj0, dj1, dm)
    dla, da, ma = damped_multiplier_partials(
        ratio - (1.0 + mu / la), lam[1], wi * wp.dot(gai, gai) + wj * wp.dot(gaj, gaj) + wk * wp.dot(gak, gak),
        wp.dot(gai, mi) + wp.dot(gaj, mj) + wp.dot(gak, mk), la, area, kd, dt, s)

    # reverse. lambda_out = lam + (dld, dla); delta_v += (gd_v dld + ga_v dla) w_v
    al = wp.vec2(0.0)
    if adj_lambda_out:
        al = adj_lambda_out[t]
        adj_lambda_out[t] = wp.vec2(0.0)
    ai = wp.vec3(0.0)
    aj = wp.vec3(0.0)
    ak = wp.vec3(0.0)
    if adj_delta:
        ai, aj, ak = gather3(adj_delta, i, j, k)
    ui = ai * wi
    uj = aj * wj
    uk = ak * wk
    adj_dld = al[0] + wp.dot(gdi, ui) + wp.dot(gdj, uj) + wp.dot(gdk, uk)
    adj_dla = al[1] + wp.dot(gai, ui) + wp.dot(gaj, uj) + wp.dot(gak, uk)
    # through each multiplier step: d(c, lam, wsum, rate) and d(k, measure, kd)
    adj_lam = al + wp.vec2(dd[1] * adj_dld, da[1] * adj_dla)
    swd = dd[2] * adj_dld  # adjoint of wsum (stretch), of rate next
    srd = dd[3] * adj_dld
    swa = da[2] * adj_dla
    sra = da[3] * adj_dla
    adj_mi = gdi * srd + gai * sra
    adj_mj = gdj * srd + gaj * sra
    adj_mk = gdk * srd + gak * sra
    adj_pd0, adj_pd1, adj_dm = _membrane_gradients_adjoint(
        ui * dld + gdi * (2.0 * wi * swd) + mi * srd, uj * dld + gdj * (2.0 * wj * swd) + mj * srd,
        uk * dld + gdk * (2.0 * wk * swd) + mk * srd, p0, p1, dm)
    adj_dj0, adj_dj1, adj_dm_a = _membrane_gradients_adjoint(
        ui * dla + gai * (2.0 * wi * swa) + mi * sra, uj * dla + gaj * (2.0 * wj * swa) + mj * sra,
        uk * dla + gak * (2.0 * wk * swa) + mk * sra, dj0, dj1, dm)
    adj_dm = adj_dm + adj_dm_a
    # stretch: C = |F|, dC/dF = F / |F|
    adj_cd = dd[0] * adj_dld
    proj = wp.dot(p0, adj_pd0) + wp.dot(p1, adj_pd1)
    inv_cd = 1.0 / cd  # one division, not six
    adj_f0 = (adj_pd0 - p0 * proj) * inv_cd + p0 * adj_cd
    adj_f1 = (adj_pd1 - p1 * proj) * inv_cd + p1 * adj_cd
    # area: c = f0 x f1, J = |c|, n = c / max(J, 1e-12), dJ/df0 = f1 x n, dJ/df1 = n x f0
    adj_ratio = da[0] * adj_dla
    c = wp.cross(f0, f1)
    n = c / wp.max(ratio, 1.0e-12)
    adj_f1 += wp.cross(n, adj_dj0)
    adj_f0 += wp.cross(adj_dj1, n)
    adj_n = wp.cross(adj_dj0, f1) + wp.cross(f0, adj_dj1)
    adj_c = wp.vec3(0.0)
    if ratio > 1.0e-12:
        adj_c = (adj_n - n * wp.dot(n, adj_n)) * (1.0 / ratio) + n * adj_ratio
    else:
        adj_c = adj_n / 1.0e-12
        if ratio > 0.0:
            adj_c += c * (adj_ratio / ratio)
    adj_f0 += wp.cross(f1, adj_c)
    adj_f1 += wp.cross(adj_c, f0)
    # F = [e1, e2] Dm^-1
    adj_e1 = adj_f0 * dm[0, 0] + adj_f1 * dm[0, 1]
    adj_e2 = adj_f0 * dm[1, 0] + adj_f1 * dm[1, 1]
    adj_dm += wp.mat22(wp.dot(e1, adj_f0), wp.dot(e1, adj_f1), wp.dot(e2, adj_f0), wp.dot(e2, adj_f1))

    if adj_x_start:
        wp.atomic_sub(adj_x_start, i, adj_e1 + adj_e2)
        wp.atomic_add(adj_x_start, j, adj_e1)
        wp.atomic_add(adj_x_start, k, adj_e2)
    if adj_dx:
        wp.atomic_add(adj_dx, i, adj_mi - adj_e1 - adj_e2)
        wp.atomic_add(adj_dx, j, adj_mj + adj_e1)
        wp.atomic_add(adj_dx, k, adj_mk + adj_e2)
    if adj_lambda_in:
        adj_lambda_in[t] += adj_lam
    if adj_inv_mass:
        wp.atomic_add(adj_inv_mass, i, wp.dot(gdi * dld + gai * dla, ai) + wp.dot(gdi, gdi) * swd + wp.dot(gai, gai) * swa)
        wp.atomic_add(adj_inv_mass, j, wp.dot(gdj * dld + gaj * dla, aj) + wp.dot(gdj, gdj) * swd + wp.dot(gaj, gaj) * swa)
        wp.atomic_add(adj_inv_mass, k, wp.dot(gdk * dld + gak * dla, ak) + wp.dot(gdk, gdk) * swd + wp.dot(gak, gak) * swa)
    if adj_poses:
        adj_poses[t] += adj_dm
    if adj_areas:
        adj_areas[t] += md[1] * adj_dld + ma[1] * adj_dla
    if adj_materials:
        # k of the stretch is mu; of the area la = lambda + mu; the area's target 1 + mu / la
        adj_la = ma[0] * adj_dla + adj_ratio * mu / (la * la)
        adj_materials[t, 0] += md[0] * adj_dld + adj_la - adj_ratio / la
        adj_materials[t, 1] += adj_la
        adj_materials[t, 2] += md[2] * adj_dld + ma[2] * adj_dla


solve_triangle_constraints_kernel, solve_triangle_constraints = element_constraints(
    "triangles", "solve_triangle_constraints_kernel", __name__, triangle_step, "tri_count",
    ("tri_indices", "tri_poses", "tri_areas", "tri_materials"), "tri_lambda", wp.vec2, "tri",
    adjoint=triangle_constraints_adjoint_kernel)
