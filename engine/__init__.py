"""inertia: a differentiable physics engine on NVIDIA Warp.

    import inertia
    builder = inertia.ModelBuilder()            # Z up, SI units
    ...
    model = builder.finalize()
    solver = inertia.SemiImplicitSolver(model)
"""

from .builder import ModelBuilder
from .contacts import ContactOverflowError, Contacts
from .diagnostics import NonFiniteError
from .kinematics import eval_fk, eval_ik
from .urdf import UrdfError
from .materials import lame_from_young
from .model import Model
from .rollout import DIFFERENTIABLE_PARAMS, Rollout
from .state import Control, State
from .tape_guard import TapeReuseError
from .solvers import SemiImplicitSolver, SolverBase, XPBDSolver

__version__ = "0.1.0"


def __getattr__(name):
    # USD (pxr) takes a moment to import: load it only when a recorder or the USD importer is asked for.
    if name == "UsdRecorder":
        from .usd import UsdRecorder

        return UsdRecorder
    if name in ("usd_physics", "save_usd"):
        import importlib

        module = importlib.import_module(".usd_physics", __name__)
        return module if name == "usd_physics" else module.save_usd
    raise AttributeError(f"module 'inertia' has no attribute {name!r}")


__all__ = [
    "ModelBuilder",
    "Model",
    "State",
    "Control",
    "Contacts",
    "ContactOverflowError",
    "NonFiniteError",
    "SemiImplicitSolver",
    "XPBDSolver",
    "SolverBase",
    "Rollout",
    "DIFFERENTIABLE_PARAMS",
    "TapeReuseError",
    "lame_from_young",
    "eval_fk",
    "eval_ik",
    "UsdRecorder",
    "UrdfError",
    "save_usd",
]
