"""The contract every solver shares: input checks, per-step buffers and the data a step's stages share.

``step(state_in, state_out, control, contacts, dt)`` reads ``state_in`` and writes
``state_out``; it never writes ``state_in``, so a tape that recorded it can
replay it backwards. The checks here cost only Python attribute reads (no
device sync), so they stay on; the finite-value checks (``check_finite=True``)
read every stage's output back and are for debugging.

A solver declares its per-step buffers as a :class:`StepBufferSpec` (``step_buffer_spec``) and their
sizes (:meth:`SolverBase.buffer_sizes`); :meth:`SolverBase.begin_step` allocates them on
``state_out`` when it has none that fit, and returns the step's :class:`StepData` for the stages.
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np
import warp as wp

from ..autodiff.tape import guard_step
from ..collision.contact_geometry import rigid_contacts
from ..collision.contact_sink import particle_pairs
from ..collision.particle_shape import soft_contacts
from ..collision.sdf import shape_geometry
from ..diagnostics import check_finite as _check_finite
from ..diagnostics import warn
from ..kinematics import eval_ik, joint_topology
from ..replay import Replay
from ..signed import Signed, signature
from .forces.contact import penalty_law
from .step_data import StepBuffers, StepBufferSpec, StepData, stage


# (array, what its length counts) of a State and a Control
_STATE_SIZES = (("particle_q", "particle"), ("particle_qd", "particle"), ("particle_f", "particle"),
                ("body_q", "body"), ("body_qd", "body"), ("body_f", "body"),
                ("joint_q", "joint_q"), ("joint_qd", "joint_qd"))
_CONTROL_SIZES = (("particle_f", "particle"), ("body_f", "body"), ("joint_target_pos", "joint_qd"),
                  ("joint_target_vel", "joint_qd"), ("joint_f", "joint_qd"))


class SolverBase(Signed):
    """Common input validation, per-step buffers, the step's shared data and optional per-stage finite checks.

    Args:
        model: the :class:`inertia.Model` to simulate.
        check_finite: after every stage, check its outputs for NaN/inf and raise
            :class:`inertia.NonFiniteError` naming the stage and step (slow: a
            host read per stage; not usable inside graph capture).
    """

    step_buffer_spec = StepBufferSpec()  # the solver's per-step buffers (none by default)
    # not part of what a replayed graph froze: the step counter, and the step size last warned about (a
    # solver's once-per-dt warning; dt itself is in the key)
    _signature_skip = ("step_count", "_checked_dt")
    # per-dof joint dynamics this solver does not simulate (warned about once when a model sets them)
    ignores_joint_fields: tuple = ("joint_armature", "joint_damping", "joint_friction", "joint_effort_limit",
                                   "joint_velocity_limit")

    def __init__(self, model, check_finite: bool = False):
        self.model = model
        self.check_finite = bool(check_finite)
        self.step_count = 0  # steps taken by this solver (used in error reports)
        # a plain loop's steps replay from graphs captured per signature (inertia.replay; .enabled = False: off)
        self.replay = Replay(model.device)
        self._warn_ignored_joint_dynamics()
        # drive targets and efforts of a step taken without a Control (allocated once: step() allocates nothing)
        self.zero_dofs = wp.zeros(max(model.joint_dof_count, 1), dtype=float, device=model.device)
        self._sizes = {}

    def _warn_ignored_joint_dynamics(self) -> None:
        """No silent drop: a model whose joints carry dynamics this solver does not simulate is told which."""
        model = self.model
        if not self.ignores_joint_fields or not getattr(model, "joint_dof_count", 0):
            return
        used = []
        for name in self.ignores_joint_fields:
            values = getattr(model, name).numpy()
            if (np.isfinite(values).any() if name.endswith("limit") else np.any(values != 0.0)):
                used.append(name)
        if used:
            warn(f"{type(self).__name__} does not simulate {', '.join(used)} (set on this model's joints, "
                          "e.g. by a URDF's <dynamics> / <limit> or an MJCF's armature): they are ignored. The "
                          "FeatherstoneSolver simulates them.", RuntimeWarning)

    # ------------------------------------------------------------------------------------------ step buffers
    def buffer_sizes(self, rigid_contact_max: int) -> dict:
        """The sizes of the dimensions ``step_buffer_spec`` names, for contacts of ``rigid_contact_max`` points."""
        return {}

    def _buffer_sizes(self, rigid_contact_max: int) -> dict:
        sizes = self._sizes.get(rigid_contact_max)
        if sizes is None:
            sizes = self._sizes[rigid_contact_max] = self.buffer_sizes(rigid_contact_max)
        return sizes

    @staticmethod
    def _rigid_contact_max(contacts) -> int:
        return 0 if contacts is None else contacts.rigid_contact_max

    def step_buffers(self, state, contacts=None) -> StepBuffers:
        """``state.step_buffers`` for a step that writes ``state`` with ``contacts`` (allocated if none fit)."""
        sizes = self._buffer_sizes(self._rigid_contact_max(contacts))
        requires_grad = state.requires_grad()
        buffers = state.step_buffers
        if buffers is None or not buffers.fits(self.step_buffer_spec, sizes, requires_grad):
            buffers = state.step_buffers = self.step_buffer_spec.allocate(sizes, self.model.device, requires_grad)
        return buffers

    def prepare_state(self, state, contacts=None) -> None:
        """Allocate ``state``'s per-step buffers now rather than at its first step as ``state_out`` (``contacts``)."""
        self.step_buffers(state, contacts)

    def state_buffer_bytes(self, requires_grad: bool, rigid_contact_max: int = 0, dt: float | None = None) -> int:
        """Bytes of the per-step buffers every output state of a step carries (gradients included when
        ``requires_grad``), from the same declaration that allocates them.

        ``rigid_contact_max``: the capacity of the step's ``Contacts`` (XPBD's multipliers are per contact);
        ``dt`` [s]: the step (a solver that splits a step into substeps keeps more; here it changes nothing).
        """
        return self.step_buffer_spec.nbytes(self._buffer_sizes(rigid_contact_max), requires_grad)

    # ------------------------------------------------------------------------------------------ a step
    def begin_step(self, state_in, state_out, control, contacts, dt) -> StepData:
        """Check the step's inputs and return the :class:`StepData` its stages share."""
        self._validate(state_in, state_out, control, contacts, dt)
        model = self.model
        lists = (None, None, None) if contacts is None else (rigid_contacts(contacts), soft_contacts(contacts),
                                                             particle_pairs(contacts))
        data = StepData(state_in, state_out, control, contacts, dt, self.step_buffers(state_out, contacts), self,
                        shape_geometry(model), joint_topology(model), penalty_law(model), *lists)
        if self.check_finite:
            _check_finite("input", self.step_count, particle_q=state_in.particle_q, particle_qd=state_in.particle_qd,
                          body_q=state_in.body_q, body_qd=state_in.body_qd)
        return data

    @staticmethod
    def _validate_dt(dt) -> None:
        # any real scalar (Python or NumPy: np.float32 is not a float subclass), but not a bool
        if not isinstance(dt, numbers.Real) or isinstance(dt, (bool, np.bool_)) or not math.isfinite(dt) or dt <= 0.0:
            raise ValueError(f"dt must be a finite number > 0 (seconds), got {dt!r}")

    def _validate(self, state_in, state_out, control, contacts, dt) -> None:
        self._validate_dt(dt)
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
        """For solvers that run their own stage loop: with ``check_finite``, raise naming ``stage`` if any of
        ``arrays`` holds a NaN/inf (a host read; the :func:`~inertia.solvers.step_data.stage` decorator does
        this for declared stages)."""
        if self.check_finite:
            _check_finite(stage, self.step_count, **arrays)

    def step(self, state_in, state_out, control, contacts, dt: float):  # pragma: no cover - interface
        raise NotImplementedError


def replayed(step):
    """Decorator of a solver's ``step``: the second call with the same signature (states, control, contacts,
    dt, and every array and scalar of the model and solver; :mod:`inertia.replay`) is captured, later ones
    replay its graph. Plain while a tape records, while the device captures, and with ``check_finite``."""

    @functools.wraps(step)
    def run(self, state_in, state_out, control, contacts, dt):
        if self.check_finite or not self.replay.active():
            return step(self, state_in, state_out, control, contacts, dt)
        self._validate_dt(dt)  # before it is hashed into the signature
        held = (state_in, state_out, control, contacts)  # the model and solver own the replay: not held
        key = (signature(self.model, self, *held), dt, type(dt))
        before = self.replay.counts["replayed"]
        self.replay.run(key, held, lambda: step(self, state_in, state_out, control, contacts, dt))
        if self.replay.counts["replayed"] != before:  # the graph ran the kernels; the count is Python's
            self.step_count += 1
        return state_out

    return run


@stage("joint coordinates")
def update_joint_coordinates(model, data) -> None:
    """Stage (the last of every solver): ``state_out.joint_q`` / ``joint_qd`` from its bodies."""
    eval_ik(model, data.state_out, data.joints)
