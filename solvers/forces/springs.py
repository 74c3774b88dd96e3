"""Damped springs: f = (ke (l - l0) + kd dl/dt) along the spring."""

import warp as wp

from .elements import element_force_stage


@wp.kernel
def spring_forces_kernel(
    # Model:
    indices: wp.array(dtype=wp.int32),
    rest_length: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    # Data in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    # Data out:
    f: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    i = indices[2 * tid]
    j = indices[2 * tid + 1]
    d = x[j] - x[i]
    length = wp.length(d)
    if length < 1.0e-12:
        return  # direction undefined; a coincident pair exerts no force
    n = d / length
    rate = wp.dot(v[j] - v[i], n)
    fs = n * (stiffness[tid] * (length - rest_length[tid]) + damping[tid] * rate)
    wp.atomic_add(f, i, fs)
    wp.atomic_sub(f, j, fs)


eval_spring_forces = element_force_stage("springs", spring_forces_kernel, "spring_count",
                                          ("spring_indices", "spring_rest_length", "spring_stiffness",
                                           "spring_damping"))
