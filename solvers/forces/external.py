"""External forces from Control: the first stage, which also resets the step's force buffer."""

import warp as wp


@wp.kernel
def set_forces_kernel(control_f: wp.array(dtype=wp.vec3), f: wp.array(dtype=wp.vec3)):
    tid = wp.tid()
    f[tid] = control_f[tid]


def apply_control_forces(model, control, particle_f) -> None:
    """Start the step's force accumulator from the user's external forces (or zero without a Control)."""
    if model.particle_count == 0:
        return
    if control is None or control.particle_f is None:
        particle_f.zero_()
        return
    wp.launch(set_forces_kernel, dim=model.particle_count, inputs=[control.particle_f], outputs=[particle_f],
              device=model.device)
