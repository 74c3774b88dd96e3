"""Force stages of the SemiImplicitSolver: each accumulates into a particle force or body wrench array.

The element kinds (``springs``, ``triangles``, ``bending``, ``tetrahedra``) each give their forces as a ``wp.func``
that the one kernel definition of ``element_kernels`` runs; ``element_funcs`` holds what their kernels and the
XPBDSolver's constraints on the same elements compute alike.
"""

from .bending import eval_bending_forces
from .body_contact import eval_body_contact_forces, eval_body_contact_sweeps
from .contact import eval_particle_pair_contact_forces, eval_particle_shape_contact_forces
from .external import apply_controls
from .joints import eval_joint_forces
from .springs import eval_spring_forces
from .tetrahedra import eval_tetrahedron_forces
from .triangles import eval_triangle_forces

__all__ = [
    "apply_controls",
    "eval_spring_forces",
    "eval_triangle_forces",
    "eval_bending_forces",
    "eval_tetrahedron_forces",
    "eval_particle_shape_contact_forces",
    "eval_particle_pair_contact_forces",
    "eval_joint_forces",
    "eval_body_contact_forces",
    "eval_body_contact_sweeps",
]
