"""One kernel definition for the forces of every element kind: springs, membranes, bending edges, tetrahedra.

An element kind gives a ``wp.func``

    element_forces(e, indices, a, b, c, inv_mass, element_count, x, v, dt) -> (particles, forces, acts)

for element e: its particles (a ``wp.vec4i``, -1 where it has fewer than four), the force on each (the rows
of an :data:`~inertia.solvers.forces.element_funcs.ElementVectors`) and whether it acts at all (a coincident
spring, a collapsed bending wing: no force). ``a``, ``b``, ``c`` are the kind's own Model arrays after its
indices, in the order its stage passes them (:func:`inertia.solvers.forces.elements.element_force_stage`).
:func:`element_force_kernel` makes the kernel that runs it for every element and adds the forces into ``f``:
the scatter stays in the kernel, since a ``wp.func`` is replayed in the reverse pass (an atomic in it would
add twice). :func:`element_forces` declares a kind in one call: its kernel, typed from the schema's
declaration of its arrays, and its stage.
"""

import warp as wp

from ...schema import MODEL
from .element_funcs import NO_PARTICLE
from .elements import element_force_stage


def model_array_type(name: str):
    """The kernel argument type of Model array ``name``, as the schema declares it (2-D where it has inner
    dimensions and is not stored flat)."""
    f = MODEL[name]
    return wp.array2d(dtype=f.dtype) if f.inner and not f.flat else wp.array(dtype=f.dtype)


def element_force_kernel(name: str, module: str, element_forces, indices_type, a_type, b_type, c_type):
    """The force kernel ``name`` (in Warp module ``module``: the kind's file, which compiles only when it runs)
    of an element kind, launched with ``element_force_stage``'s arguments; ``*_type``: the types of its four
    Model arrays."""

    @wp.kernel(name=name, module=module)
    def element_forces_kernel(
        # Model:
        indices: indices_type,
        a: a_type,
        b: b_type,
        c: c_type,
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
        e = wp.tid()
        particles, forces, acts = element_forces(e, indices, a, b, c, inv_mass, element_count, x, v, dt)
        if acts:
            for n in range(4):
                if particles[n] != NO_PARTICLE:
                    wp.atomic_add(f, particles[n], forces[n])

    return element_forces_kernel


def element_forces(stage_name: str, kernel_name: str, module: str, element_forces_func, count: str, arrays: tuple):
    """An element kind's force kernel and stage, ``(kernel, stage)``: ``arrays`` names its four Model arrays
    (indices first), ``count`` the model attribute counting its elements (:func:`element_force_kernel`,
    ``element_force_stage``)."""
    kernel = element_force_kernel(kernel_name, module, element_forces_func, *(model_array_type(a) for a in arrays))
    return kernel, element_force_stage(stage_name, kernel, count, arrays)
