"""Damped springs: f = (ke (l - l0) + kd' dl/dt) along the spring, kd' = kd / sqrt(1 + (dt kd (w_i + w_j) n)^2)
(damping that never overshoots: :mod:`inertia.solvers.forces.elements`)."""

import warp as wp

from ...autodiff.backward_code import on_demand
from .element_funcs import pair_vertices
from .elements import element_force_stage, element_share, implicit_damping

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def spring_forces_kernel(
    # Model:
    indices: wp.array(dtype=wp.int32),
    rest_length: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float),
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
    tid = wp.tid()
    i, j = pair_vertices(indices, tid)
    d = x[j] - x[i]
    length = wp.length(d)
    if length < 1.0e-12:
        return  # direction undefined; a coincident pair exerts no force
    n = d / length
    rate = wp.dot(v[j] - v[i], n)
    kd = implicit_damping(damping[tid], (inv_mass[i] + inv_mass[j]) * element_share(element_count, i, j, -1, -1), dt)
    fs = n * (stiffness[tid] * (length - rest_length[tid]) + kd * rate)
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)


eval_spring_forces = element_force_stage("springs", spring_forces_kernel, "spring_count",
                                          ("spring_indices", "spring_rest_length", "spring_stiffness",
                                           "spring_damping"))
