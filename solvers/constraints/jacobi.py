"""Applying one Jacobi iteration's corrections: x_{k+1} = x_k + delta_k.

The constraint kernels have already scaled their corrections (relaxation and
mass splitting, see :func:`jacobi_scales`). The result goes to a new array:
every iterate stays available to a recorded tape.
"""

import numpy as np
import warp as wp


@wp.kernel
def apply_corrections_kernel(
    x: wp.array(dtype=wp.vec3),
    delta: wp.array(dtype=wp.vec3),
    x_out: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()
    x_out[tid] = x[tid] + delta[tid]


def apply_corrections(model, x, delta, x_out) -> None:
    if model.particle_count == 0:
        return
    wp.launch(apply_corrections_kernel, dim=model.particle_count, inputs=[x, delta], outputs=[x_out],
              device=model.device)


def jacobi_scales(model, relaxation: float) -> tuple[wp.array, wp.array]:
    """Per-spring omega / max(n_i, n_j) and per-particle omega / (1 + n_i), n = distance constraints per particle.

    Computed once from the topology (host side, at solver construction).
    """
    n = np.zeros(max(model.particle_count, 1))
    if model.spring_count:
        ij = model.spring_indices.numpy().reshape(-1, 2)
        np.add.at(n, ij[:, 0], 1.0)
        np.add.at(n, ij[:, 1], 1.0)
        spring = relaxation / np.maximum(np.maximum(n[ij[:, 0]], n[ij[:, 1]]), 1.0)
    else:
        spring = np.zeros(1)
    particle = relaxation / (1.0 + n)
    return (wp.array(spring.astype(np.float32), dtype=float, device=model.device),
            wp.array(particle.astype(np.float32), dtype=float, device=model.device))
