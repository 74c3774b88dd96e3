"""One kernel definition for the constraints of every element kind: distance, membrane, bending, tetrahedra.

An element kind gives a ``wp.func``

    element_step(e, inv_mass, indices, a, b, c, x_start, dx, lambda_in, scale, dt)
        -> (particles, corrections, applies, lambda_next)

for element e on one Jacobi iterate: its particles (a ``wp.vec4i``, -1 where it has fewer than four), the
correction of each (the rows of an :data:`~inertia.solvers.forces.element_funcs.ElementVectors`), whether
it moves them at all (an inactive or degenerate element does not), and its multipliers for the next
iterate. ``a``, ``b``, ``c`` are the kind's own Model arrays after its indices, in the order its stage
passes them (:func:`inertia.solvers.constraints.jacobi.element_constraint_stage`).
:func:`element_constraint_kernel` makes the kernel that runs it for every element, adds the corrections
into ``delta`` and stores the multipliers (once: a second store to one element would get its adjoint
twice); the stores stay in the kernel, since a ``wp.func`` is replayed in the reverse pass.
:func:`element_constraints` declares a kind in one call: its kernel, typed from the schema's declaration of
its arrays, and its stage.
"""

import warp as wp

from ..forces.element_funcs import NO_PARTICLE
from ..forces.element_kernels import model_array_type
from .jacobi import element_constraint_stage


def element_constraint_kernel(name: str, module: str, element_step, indices_type, a_type, b_type, c_type,
                              multiplier_type, backward: bool = True):
    """The constraint kernel ``name`` (in Warp module ``module``: the kind's file, which compiles only when it
    runs) of an element kind, launched with ``element_constraint_stage``'s arguments; ``*_type``: the types of
    its four Model arrays, ``multiplier_type``: its multipliers' (float, or wp.vec2 for two constraints).
    ``backward=False``: Warp generates no adjoint (a kind with a hand-written one, :mod:`.hand_adjoint`)."""

    @wp.kernel(name=name, module=module, enable_backward=backward)
    def element_constraints_kernel(
        # Model:
        inv_mass: wp.array(dtype=float),
        indices: indices_type,
        a: a_type,
        b: b_type,
        c: c_type,
        # Data in:
        x_start: wp.array(dtype=wp.vec3),
        dx: wp.array(dtype=wp.vec3),
        lambda_in: wp.array(dtype=multiplier_type),
        # In:
        scale: wp.array(dtype=float),
        dt: float,
        # Data out:
        delta: wp.array(dtype=wp.vec3),
        lambda_out: wp.array(dtype=multiplier_type),
    ):
        e = wp.tid()
        particles, corrections, applies, lambda_next = element_step(e, inv_mass, indices, a, b, c, x_start, dx,
                                                                    lambda_in, scale, dt)
        if applies:
            for n in range(4):
                if particles[n] != NO_PARTICLE:
                    wp.atomic_add(delta, particles[n], corrections[n])
        lambda_out[e] = lambda_next

    return element_constraints_kernel


def element_constraints(stage_name: str, kernel_name: str, module: str, element_step, count: str, arrays: tuple,
                        multipliers: str, multiplier_type, scale: str, adjoint=None):
    """An element kind's constraint kernel and stage, ``(kernel, stage)``: ``arrays`` names its four Model arrays
    (indices first), ``count`` the model attribute counting its elements, ``multipliers`` its buffer of
    multipliers (of ``multiplier_type``), ``scale`` its entry of ``jacobi_scales`` (:func:`element_constraint_kernel`,
    ``element_constraint_stage``); ``adjoint``: the kind's hand-written adjoint kernel, or None for Warp's."""
    kernel = element_constraint_kernel(kernel_name, module, element_step, *(model_array_type(a) for a in arrays),
                                       multiplier_type, backward=adjoint is None)
    return kernel, element_constraint_stage(stage_name, kernel, count, arrays, multipliers, scale, adjoint)
