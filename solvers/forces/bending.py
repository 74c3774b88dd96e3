"""Dihedral-angle bending (Bridson, Marino & Fedkiw 2003).

Energy per edge: ke/2 (theta - theta0)^2, with theta the signed angle between the
two wing triangles (i, k, l) and (j, l, k) across edge (k, l). Forces are
-(ke (theta - theta0) + kd' dtheta/dt) dtheta/dx, with the exact angle gradient (kd' is kd made implicit per
element: :mod:`inertia.solvers.forces.elements`).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from .element_funcs import ElementVectors, gradient_rate, quad_vertices, weighted_squared_norms
from .element_kernels import element_forces
from .elements import element_share, implicit_damping

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def dihedral_angle_gradient(x1: wp.vec3, x2: wp.vec3, x3: wp.vec3, x4: wp.vec3):
    """theta across edge (x3, x4) and d theta / d x1..x4; ``ok`` is 0 when a wing is collapsed (no angle).

    Shared by the SemiImplicitSolver's bending force and the XPBDSolver's bending constraint.
    """
    n1 = wp.cross(x3 - x1, x4 - x1)
    n2 = wp.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    n1_sq = wp.dot(n1, n1)
    n2_sq = wp.dot(n2, n2)
    e_len = wp.length(e)
    theta = float(0.0)
    d1 = wp.vec3(0.0)
    d2 = wp.vec3(0.0)
    d3 = wp.vec3(0.0)
    d4 = wp.vec3(0.0)
    ok = float(0.0)
    if n1_sq > 1.0e-20 and n2_sq > 1.0e-20 and e_len > 1.0e-10:
        e_hat = e / e_len
        n1_hat = n1 / wp.sqrt(n1_sq)
        n2_hat = n2 / wp.sqrt(n2_sq)
        theta = wp.atan2(wp.dot(wp.cross(n1_hat, n2_hat), e_hat), wp.dot(n1_hat, n2_hat))
        a1 = n1 / n1_sq
        a2 = n2 / n2_sq
        d1 = -e_len * a1
        d2 = -e_len * a2
        d3 = -(wp.dot(x1 - x4, e_hat) * a1 + wp.dot(x2 - x4, e_hat) * a2)
        d4 = wp.dot(x1 - x3, e_hat) * a1 + wp.dot(x2 - x3, e_hat) * a2
        ok = 1.0
    return theta, d1, d2, d3, d4, ok


@wp.func
def bending_forces(t: int, indices: wp.array2d(dtype=wp.int32), rest_angle: wp.array(dtype=float),
                   stiffness: wp.array2d(dtype=float), damping: wp.array2d(dtype=float),
                   inv_mass: wp.array(dtype=float), element_count: wp.array(dtype=wp.int32),
                   x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), dt: float):
    """Bending edge t's particles and the forces on them (:mod:`inertia.solvers.forces.element_kernels`).

    ``stiffness`` and ``damping`` are both ``edge_bending_properties`` (ke, kd): read for ke and for kd, so the
    edges pass their arrays as the springs do (rest, stiffness, damping) to the one element force kernel.
    """
    i, j, k, l = quad_vertices(indices, t)
    particles = wp.vec4i(i, j, k, l)
    theta, d1, d2, d3, d4, ok = dihedral_angle_gradient(x[i], x[j], x[k], x[l])
    if ok == 0.0:
        return particles, ElementVectors(), False  # a collapsed wing has no defined angle
    rate = gradient_rate(d1, d2, d3, d4, v[i], v[j], v[k], v[l])
    damping_rate = weighted_squared_norms(d1, d2, d3, d4, inv_mass[i], inv_mass[j], inv_mass[k], inv_mass[l]) * (
        element_share(element_count, i, j, k, l))
    kd = implicit_damping(damping[t, 1], damping_rate, dt)
    s = -(stiffness[t, 0] * (theta - rest_angle[t]) + kd * rate)
    return particles, wp.matrix_from_rows(d1 * s, d2 * s, d3 * s, d4 * s), True


bending_forces_kernel, eval_bending_forces = element_forces(
    "bending", "bending_forces_kernel", __name__, bending_forces, "edge_count",
    ("edge_indices", "edge_rest_angle", "edge_bending_properties", "edge_bending_properties"))
