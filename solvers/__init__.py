"""Solvers (``inertia.solvers``): each advances ``state_in -> state_out`` by one time step."""

from .featherstone import FeatherstoneSolver
from .semi_implicit import SemiImplicitSolver
from .solver import SolverBase
from .xpbd import XPBDSolver

__all__ = ["FeatherstoneSolver", "SemiImplicitSolver", "SolverBase", "XPBDSolver"]
