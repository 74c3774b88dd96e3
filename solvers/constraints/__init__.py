"""Constraint stages of the XPBDSolver: each adds its corrections to one Jacobi iteration's buffers."""

from .bending import solve_bending_constraints
from .body_contact import (
    apply_body_corrections,
    count_body_constraints,
    eval_body_frames,
    solve_body_contacts,
)
from .contact import solve_particle_contacts, solve_shape_contacts
from .distance import solve_distance_constraints
from .jacobi import apply_corrections, jacobi_scales
from .joints import apply_joint_efforts, joint_rows_per_body, solve_joints
from .restitution import solve_contact_velocities
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
    "apply_corrections",
    "apply_body_corrections",
    "jacobi_scales",
]
