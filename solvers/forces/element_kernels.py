"""One kernel definition for the forces of every element kind: springs, membranes, bending edges, tetrahedra.

An element kind gives a ``wp.func``

    element_forces(e, indices, a, b, c, inv_mass, element_count, x, v, dt) -> (particles, forces, acts)

for element e: its particles (a ``wp.vec4i``, -1 where it has fewer than four), the force on each (the rows
of an :data:`~inertia.solvers.forces.element_funcs.ElementVectors`) and whether it acts at all (a coincident
spring, a collapsed bending wing: no force). ``a``, ``b``, ``c`` are the kind's own Model arrays after its indices, in the order its stage
passes them (:func:`inertia.solvers.forces.elements.element_force_stage`). :func:`element_force_kernel`
makes the kernel that runs it for every element and adds the forces into ``f``: the scatter stays in the
kernel, since a ``wp.func`` is replayed in the reverse pass (an atomic in it would add twice).
"""

import warp as wp

from .element_funcs import NO_PARTICLE


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
