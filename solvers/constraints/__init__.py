"""Constraint stages of the XPBDSolver: each adds its corrections to one Jacobi iteration's buffers."""

from .bending import solve_bending_constraints
from .contact import solve_particle_contacts, solve_shape_contacts
from .distance import solve_distance_constraints
from .jacobi import apply_corrections, jacobi_scales
from .tetrahedra import solve_tet_constraints
from .triangles import solve_triangle_constraints

__all__ = [
    "solve_distance_constraints",
    "solve_triangle_constraints",
    "solve_bending_constraints",
    "solve_tet_constraints",
    "solve_shape_contacts",
    "solve_particle_contacts",
    "apply_corrections",
    "jacobi_scales",
]
