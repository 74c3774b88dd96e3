"""The FeatherstoneSolver (``inertia.FeatherstoneSolver``): articulated rigid bodies in joint coordinates.

Modules: :mod:`.solver` (the step, and why CRBA + Cholesky), :mod:`.topology` (trees, slots, coordinate
layout), :mod:`.spatial` (spatial algebra), :mod:`.kinematics` (forward kinematics, gathers and
scatters), :mod:`.dynamics` (joint forces, CRBA, RNEA, integration), :mod:`.contacts` (contacts through
the contact Jacobian), :mod:`.linalg` (per-articulation Cholesky), :mod:`.step_data` (what a step keeps).
"""

from .solver import FeatherstoneSolver

__all__ = ["FeatherstoneSolver"]
