"""Constraint stages of the XPBDSolver: each adds its corrections to one Jacobi iteration's buffers."""

from .contact import solve_particle_contacts, solve_shape_contacts
from .distance import solve_distance_constraints
from .jacobi import apply_corrections, jacobi_scales
from .tetrahedra import solve_tet_constraints

__all__ = ["solve_distance_constraints", "solve_shape_contacts", "solve_particle_contacts", "solve_tet_constraints", "apply_corrections",
           "jacobi_scales"]
