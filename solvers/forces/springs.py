"""Damped springs: f = (ke (l - l0) + kd' dl/dt) along the spring, kd' = kd / sqrt(1 + (dt kd (w_i + w_j) n)^2)
(damping that never overshoots: :mod:`inertia.solvers.forces.elements`)."""

import warp as wp

from ...autodiff.backward_code import on_demand
from .element_funcs import NO_PARTICLE, ElementVectors, pair_vertices
from .element_kernels import element_forces
from .elements import element_share, implicit_damping

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def spring_forces(e: int, indices: wp.array(dtype=wp.int32), rest_length: wp.array(dtype=float),
                  stiffness: wp.array(dtype=float), damping: wp.array(dtype=float), inv_mass: wp.array(dtype=float),
                  element_count: wp.array(dtype=wp.int32), x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3),
                  dt: float):
    """Spring e's particles and the forces on them (:mod:`inertia.solvers.forces.element_kernels`)."""
    i, j = pair_vertices(indices, e)
    particles = wp.vec4i(i, j, NO_PARTICLE, NO_PARTICLE)
    d = x[j] - x[i]
    length = wp.length(d)
    if length < 1.0e-12:
        return particles, ElementVectors(), False  # direction undefined; a coincident pair exerts no force
    n = d / length
    rate = wp.dot(v[j] - v[i], n)
    kd = implicit_damping(damping[e], (inv_mass[i] + inv_mass[j]) * element_share(element_count, i, j, -1, -1), dt)
    fs = n * (stiffness[e] * (length - rest_length[e]) + kd * rate)
    return particles, wp.matrix_from_rows(fs, -fs, wp.vec3(0.0), wp.vec3(0.0)), True


spring_forces_kernel, eval_spring_forces = element_forces(
    "springs", "spring_forces_kernel", __name__, spring_forces, "spring_count",
    ("spring_indices", "spring_rest_length", "spring_stiffness", "spring_damping"))
