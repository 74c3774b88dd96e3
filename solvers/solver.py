"""The contract every solver shares, and the input checks done before a step.

``step(state_in, state_out, control, contacts, dt)`` reads ``state_in`` and writes
``state_out``; it never writes ``state_in``, so a tape that recorded it can
replay it backwards. The checks here cost only Python attribute reads (no
device sync), so they stay on; the finite-value checks (``check_finite=True``)
read every stage's output back and are for debugging.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..diagnostics import check_finite as _check_finite
from ..autodiff.tape import guard_step


# (array, what its length counts) of a State and a Control
_STATE_SIZES = (("particle_q", "particle"), ("particle_qd", "particle"), ("particle_f", "particle"),
                ("body_q", "body"), ("body_qd", "body"), ("body_f", "body"),
                ("joint_q", "joint_q"), ("joint_qd", "joint_qd"))
_CONTROL_SIZES = (("particle_f", "particle"), ("body_f", "body"), ("joint_target_pos", "joint_qd"),
                  ("joint_target_vel", "joint_qd"), ("joint_f", "joint_qd"))


class SolverBase:
    """Common input validation and optional per-stage finite checks.

    Args:
        model: the :class:`inertia.Model` to simulate.
        check_finite: after every stage, check its outputs for NaN/inf and raise
            :class:`inertia.NonFiniteError` naming the stage and step (slow: a
            host read per stage; not usable inside graph capture).
    """

    def __init__(self, model, check_finite: bool = False):
        self.model = model
        self.check_finite = bool(check_finite)
        self.step_count = 0  # steps taken by this solver (used in error reports)

    def _validate(self, state_in, state_out, control, contacts, dt) -> None:
        # any real scalar (Python or NumPy: np.float32 is not a float subclass), but not a bool
        if not isinstance(dt, numbers.Real) or isinstance(dt, (bool, np.bool_)) or not math.isfinite(dt) or dt <= 0.0:
            raise ValueError(f"dt must be a finite number > 0 (seconds), got {dt!r}")
        if state_in is state_out:
            raise ValueError("state_in and state_out must be different State objects (step never writes its input)")
        model = self.model
        dev = str(model.device)
        sizes = {"particle": (model.particle_count, "particles"), "body": (model.body_count, "bodies"),
                 "joint_q": (model.joint_coord_count, "joint coordinates"),
                 "joint_qd": (model.joint_dof_count, "joint degrees of freedom")}
        for label, st in (("state_in", state_in), ("state_out", state_out)):
            for name, kind in _STATE_SIZES:
                self._check_array(f"{label}.{name}", getattr(st, name, None), *sizes[kind], dev)
        if control is not None:
            for name, kind in _CONTROL_SIZES:
                self._check_array(f"control.{name}", getattr(control, name, None), *sizes[kind], dev,
                                  optional=True)
        if contacts is not None and str(contacts.device) != dev:
            raise ValueError(f"contacts live on {contacts.device}, the model on {dev}")
        guard_step(state_in, state_out)

    @staticmethod
    def _check_array(name, a, length, what, dev, optional=False) -> None:
        if a is None:
            if length and not optional:
                raise ValueError(f"{name} is missing; create states with model.state()")
            return
        if str(a.device) != dev:
            raise ValueError(f"{name} is on device {a.device}, but the model is on {dev}")
        if a.shape[0] != length:
            raise ValueError(f"{name} has {a.shape[0]} entries, the model has {length} {what}")

    def _check(self, stage: str, **arrays) -> None:
        if self.check_finite:
            _check_finite(stage, self.step_count, **arrays)

    def step(self, state_in, state_out, control, contacts, dt: float):  # pragma: no cover - interface
        raise NotImplementedError
