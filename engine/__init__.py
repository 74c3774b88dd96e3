"""inertia: a differentiable physics engine on NVIDIA Warp.

    import inertia
    builder = inertia.ModelBuilder()            # Z up, SI units
    ...
    model = builder.finalize()
    solver = inertia.SemiImplicitSolver(model)

``import inertia`` loads neither torch nor USD: :class:`Rollout` loads torch, :class:`UsdRecorder` and
:func:`save_usd` load ``pxr``, when first used.
"""

from . import precompiled_header
from .autodiff.backward_code import enable_gradients, gradients_enabled
from .autodiff.tape import TapeReuseError
from .builder import ModelBuilder
from .builder.materials import lame_from_young
from .contacts import ContactOverflowError, Contacts
from .diagnostics import NonFiniteError, NonFiniteWarning, StabilityWarning
from .io.mjcf_spec import MjcfError
from .io.urdf import UrdfError
from .kinematics import eval_fk, eval_ik
from .model import Model
from .rollout.params import DIFFERENTIABLE_PARAMS
from .simulator import Simulator
from .solvers import SemiImplicitSolver, SolverBase, XPBDSolver
from .state import Control, State

__version__ = "0.1.0"

precompiled_header.install()  # Warp's CPU precompiled header, kept beside the kernel cache between processes


def __getattr__(name):
    if name == "FeatherstoneSolver":  # its 59 kernels and functions: import time a particle scene need not pay
        from .solvers import FeatherstoneSolver

        return FeatherstoneSolver
    if name == "Rollout":  # torch
        from .rollout.rollout import Rollout

        return Rollout
    if name == "body_poses":  # torch
        from .rollout.kinematics_torch import body_poses

        return body_poses
    if name == "UsdRecorder":  # pxr takes a moment to import
        from .io.recorder import UsdRecorder

        return UsdRecorder
    if name == "save_usd":
        from .io.usd_export import save_usd

        return save_usd
    raise AttributeError(f"module 'inertia' has no attribute {name!r}")


__all__ = [
    "ModelBuilder",
    "Model",
    "State",
    "Control",
    "Contacts",
    "ContactOverflowError",
    "NonFiniteError",
    "NonFiniteWarning",
    "StabilityWarning",
    "SemiImplicitSolver",
    "XPBDSolver",
    "FeatherstoneSolver",
    "SolverBase",
    "Rollout",
    "Simulator",
    "DIFFERENTIABLE_PARAMS",
    "TapeReuseError",
    "lame_from_young",
    "enable_gradients",
    "gradients_enabled",
    "eval_fk",
    "eval_ik",
    "body_poses",
    "UsdRecorder",
    "UrdfError",
    "MjcfError",
    "save_usd",
]
