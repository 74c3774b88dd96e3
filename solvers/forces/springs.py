"""Damped springs: f = (ke (l - l0) + kd dl/dt) along the spring."""

import warp as wp


@wp.kernel
def spring_forces_kernel(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    indices: wp.array(dtype=wp.int32),
    rest_length: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float),
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


def eval_spring_forces(model, state, particle_f) -> None:
    if model.spring_count == 0:
        return
    wp.launch(
        spring_forces_kernel,
        dim=model.spring_count,
        inputs=[state.particle_q, state.particle_qd, model.spring_indices, model.spring_rest_length,
                model.spring_stiffness, model.spring_damping],
        outputs=[particle_f],
        device=model.device,
    )
