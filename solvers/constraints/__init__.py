"""Constraint stages of the XPBDSolver: each adds its corrections to one Jacobi iteration's buffers.

Modules: ``jacobi`` / ``body_jacobi`` (particles' / bodies' mass splitting and corrections), ``compliance`` (the
multiplier update of a compliant, damped constraint), ``body_frames`` (what a constraint needs of a
rigid body), ``distance`` / ``triangles`` / ``bending`` / ``tetrahedra`` (particle constraints: each kind's step,
run by the one kernel definition of ``element_kernels``),
``particle_contacts`` (particles against shapes and each other), ``rigid_contacts`` and
``restitution`` (contacts between shapes: position and velocity pass), ``joints``.
"""

from .bending import solve_bending_constraints
from .body_frames import eval_body_frames
from .distance import solve_distance_constraints
from .body_jacobi import apply_body_corrections, count_body_constraints
from .jacobi import apply_corrections, clear_corrections, jacobi_scales
from .joints import apply_joint_efforts, joint_rows_per_body, solve_joints
from .particle_contacts import solve_particle_contacts, solve_shape_contacts
from .restitution import solve_contact_velocities
from .rigid_contacts import solve_body_contacts
from .tetrahedra import solve_tet_constraints
from .triangles import solve_triangle_constraints

__all__ = [
    "solve_distance_constraints",
    "solve_triangle_constraints",
    "solve_bending_constraints",
    "solve_tet_constraints",
    "solve_shape_contacts",
    "solve_particle_contacts",
    "solve_body_contacts",
    "solve_joints",
    "solve_contact_velocities",
    "count_body_constraints",
    "eval_body_frames",
    "joint_rows_per_body",
    "apply_joint_efforts",
    "clear_corrections",
    "apply_corrections",
    "apply_body_corrections",
    "jacobi_scales",
]
