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


@wp.kernel
def set_wrenches_kernel(control_f: wp.array(dtype=wp.spatial_vector), f: wp.array(dtype=wp.spatial_vector)):
    tid = wp.tid()
    f[tid] = control_f[tid]


def apply_control_wrenches(model, control, body_f) -> None:
    """Start the step's body wrench accumulator (force at the com, torque; world) from ``Control.body_f``."""
    if model.body_count == 0:
        return
    if control is None or control.body_f is None:
        body_f.zero_()
        return
    wp.launch(set_wrenches_kernel, dim=model.body_count, inputs=[control.body_f], outputs=[body_f],
              device=model.device)
