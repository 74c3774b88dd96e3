"""External forces from Control: the first stages of a step, which also reset the step's force accumulators."""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..step_data import stage

on_demand(__name__)  # backward code compiled once gradients are wanted


def _set_values_kernel(dtype):
    """The kernel that copies a Control array into the step's accumulator, for one dtype.

    One definition, one kernel per dtype, each with its own name: Warp 1.19's CPU graph capture keys the
    kernels it replays by name, so overloads of one generic kernel launched in the same graph replay as
    whichever was recorded first.
    """

    @wp.kernel(name=f"set_{dtype.__name__}_kernel")
    def set_values(
        # Data in:
        control_f: wp.array(dtype=dtype),
        # Data out:
        f: wp.array(dtype=dtype),
    ):
        tid = wp.tid()
        f[tid] = control_f[tid]

    return set_values


SET_KERNELS = {dtype: _set_values_kernel(dtype) for dtype in (wp.vec3, wp.spatial_vector)}


def _set_from_control(model, count: int, control_f, f) -> None:
    """``f`` (the step's accumulator, ``count`` entries) = ``control_f``, or zero without one."""
    if count == 0:
        return
    if control_f is None:
        f.zero_()
        return
    wp.launch(SET_KERNELS[f.dtype], dim=count, inputs=[control_f], outputs=[f], device=model.device)


@stage("control forces", writes=lambda data: {"particle_f": data.state_out.particle_f,
                                                         "body_f": data.state_out.body_f})
def apply_controls(model, data) -> None:
    """Stage: start the step's accumulators from the Control: ``state_out.particle_f`` from ``particle_f`` [N],
    ``state_out.body_f`` (force at the com, torque; world) from ``body_f``; zero without a Control."""
    control, out = data.control, data.state_out
    _set_from_control(model, model.particle_count, None if control is None else control.particle_f, out.particle_f)
    _set_from_control(model, model.body_count, None if control is None else control.body_f, out.body_f)
