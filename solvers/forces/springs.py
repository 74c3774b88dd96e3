"""Damped springs: f = (ke (l - l0) + kd dl/dt) along the spring."""

import warp as wp

from .. import step_data


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


@step_data.stage("springs", writes=lambda data: {"particle_f": data.state_out.particle_f})
def eval_spring_forces(model, data) -> None:
    """Stage: the forces of every spring at ``state_in``, added to ``state_out.particle_f``."""
    if model.spring_count == 0:
        return
    state = data.state_in
    wp.launch(spring_forces_kernel, dim=model.spring_count, device=model.device,
              inputs=[model.spring_indices, model.spring_rest_length, model.spring_stiffness, model.spring_damping,
                      state.particle_q, state.particle_qd],
              outputs=[data.state_out.particle_f])
