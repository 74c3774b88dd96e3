"""Solvers (``inertia.solvers``): each advances ``state_in -> state_out`` by one time step."""

from .semi_implicit import SemiImplicitSolver
from .solver import SolverBase
from .xpbd import XPBDSolver


def __getattr__(name):
    # imported at first use: its 59 kernel and function definitions took 0.05-0.06 s of ``import warp, inertia``
    # (median and minimum of 12 fresh interpreters each, alternated), which a particle or maximal-coordinate
    # scene's cold start need not pay
    if name == "FeatherstoneSolver":
        from .featherstone import FeatherstoneSolver

        return FeatherstoneSolver
    raise AttributeError(f"module 'inertia.solvers' has no attribute {name!r}")


__all__ = ["FeatherstoneSolver", "SemiImplicitSolver", "SolverBase", "XPBDSolver"]
