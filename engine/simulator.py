"""Simulator: the README's loop as one object, replayed from a captured graph, checked once per frame.

Small scenes are bound by Python's launch overhead: a step is tens of kernel launches, each costing
microseconds of host work, so a plain ``for`` loop of ``collide`` + ``step`` runs 20-50x slower than the
same kernels replayed from a graph. :class:`Simulator` runs a frame (``substeps`` times collide + step)
plainly the first time (loading kernels, allocating per-state buffers), captures it with
``wp.ScopedCapture`` the second time and replays it from then on: the same kernels on the same buffers,
so the same results bit for bit (tested).

Safety, as :class:`inertia.Rollout`: a Python scalar of the model or solver that a graph froze (dt,
damping, contact settings, iterations) is compared at every call and the graphs are captured again when
one changed; after every ``check_every`` frames one host read of the contacts' status reports a contact
buffer that overflowed and a state that went non-finite (:class:`inertia.NonFiniteWarning`, once, naming
the frame); with ``localize=True`` (default) the frame that blew up is re-run from a copy of its start
with the solver's per-stage checks, and the warning names the first stage and substep that produced a
NaN/inf.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import warp as wp

from .diagnostics import NonFiniteError, NonFiniteWarning
from .replay import plain_calls


class Simulator:
    """``model`` and ``solver`` stepped ``substeps`` times per frame of ``frame_dt`` seconds.

    Args:
        model, solver: the :class:`inertia.Model` and a solver built on it.
        frame_dt: [s] one frame; each solver step is ``frame_dt / substeps``.
        substeps: solver steps (each after a ``collide``) per frame.
        capture: replay frames from captured graphs (default True).
        check_every: frames between host reads of the contact status (overflow, non-finite).
        localize: re-run a frame that went non-finite with per-stage checks to name the stage.
        contacts: capacities for ``model.contacts(**contacts)``.

    Attributes: ``state`` (the current :class:`inertia.State`), ``control`` (set drive targets, forces
    and efforts there; read by every substep), ``contacts``, ``frame`` (frames taken), ``time`` [s].
    """

    def __init__(self, model, solver, frame_dt: float = 1.0 / 60.0, substeps: int = 1, capture: bool = True,
                 check_every: int = 1, localize: bool = True, contacts: dict | None = None):
        if (not isinstance(frame_dt, numbers.Real) or isinstance(frame_dt, (bool, np.bool_))
                or not np.isfinite(frame_dt) or frame_dt <= 0):
            raise ValueError(f"frame_dt must be a finite number > 0 (seconds), got {frame_dt!r}")
        for name, v in (("substeps", substeps), ("check_every", check_every)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if solver.model is not model:
            raise ValueError("the solver was built on another model")
        self.model, self.solver = model, solver
        self.frame_dt, self.substeps, self.dt = float(frame_dt), int(substeps), float(frame_dt) / int(substeps)
        self.capture, self.check_every, self.localize = bool(capture), int(check_every), bool(localize)
        self._states = [model.state(requires_grad=False), model.state(requires_grad=False)]
        self.control = model.control(requires_grad=False)
        self.contacts = model.contacts(**(contacts or {}))
        self.frame, self._checked, self._parity = 0, 0, False
        self._graphs, self._warm, self._graphs_for = {}, set(), None
        self._start = model.state(requires_grad=False) if self.localize else None  # a frame's start, for re-runs
        self._reported = False
        self.nonfinite_frame = None  # the first frame that went non-finite

    @property
    def state(self):
        """The current state (after the last frame)."""
        return self._states[0]

    @property
    def time(self) -> float:
        return self.frame * self.frame_dt

    # ------------------------------------------------------------------ stepping
    def _substeps(self):
        a, b = self._states
        if self._start is not None:
            self._start.assign(a)  # inside the graph: a frame's start is kept for a re-run with checks
        for _ in range(self.substeps):
            self.model.collide(a, self.contacts, check_overflow=False)
            self.solver.step(a, b, self.control, self.contacts, self.dt)
            a, b = b, a

    def _frozen(self) -> tuple:
        def scalars(obj):
            return tuple(sorted((k, v) for k, v in vars(obj).items()
                                if isinstance(v, (bool, int, float, str)) and k != "step_count"))
        return (self.dt, self.substeps, scalars(self.model), scalars(self.solver))

    def _run_frame(self):
        if not self.capture or self.solver.check_finite:  # the solver's checks read the device back
            with plain_calls(self.solver.replay, self.model.collision.replay):  # capture=False: no graphs at all
                return self._substeps()
        frozen = self._frozen()
        if frozen != self._graphs_for:
            self._graphs.clear()
            self._warm.clear()
            self._graphs_for = frozen
        key = self._parity  # odd substeps alternate which of the two states a frame starts from
        graph = self._graphs.get(key)
        if graph is not None:
            wp.capture_launch(graph)
        elif key not in self._warm:
            self._warm.add(key)
            self._substeps()
        else:
            with wp.ScopedCapture(device=self.model.device) as cap:  # records, runs nothing
                self._substeps()
            self._graphs[key] = cap.graph
            wp.capture_launch(cap.graph)

    def step(self, frames: int = 1):
        """Advance ``frames`` frames; returns the current state."""
        for _ in range(int(frames)):
            self._run_frame()
            if self.substeps % 2:
                self._states.reverse()
                self._parity = not self._parity
            self.frame += 1
            if self.frame % self.check_every == 0:
                self.check()
        return self.state

    # ------------------------------------------------------------------ health
    def health(self) -> dict:
        """Since the last check: contact counts (last step) and peaks, the buffers that overflowed, and the first
        collide() (counted over substeps) that saw a non-finite state (None: none); and the first frame that
        ever went non-finite (``nonfinite_frame``, None: none). One host read."""
        s = self.contacts.read_status()
        return {"counts": self.contacts.counts(status=s), "peaks": self.contacts.counts(True, status=s),
                "overflow": {k: v for k, v in self.contacts.overflow(True, status=s).items() if v},
                "first_nonfinite_collide": self.contacts.first_nonfinite(status=s),
                "nonfinite_frame": self.nonfinite_frame}

    def check(self) -> None:
        """One host read of the contact status since the last check: warn about a contact buffer that
        overflowed, and (once) about a state that went non-finite, naming the frame (and, re-run with
        checks, the stage); then start counting afresh."""
        s = self.contacts.read_status()
        self.contacts.check_overflow(since_reset=True, status=s)
        first = self.contacts.first_nonfinite(s)
        frames_checked = self.frame - self._checked
        self._checked = self.frame
        self.contacts.reset_peak()
        if first is None or self._reported:
            return
        self._reported = True
        frame = self.nonfinite_frame = self.frame - frames_checked + first // self.substeps
        where = ""
        if frame == self.frame - 1 and self._start is not None:
            where = self._localize()
        elif self._start is not None:
            where = " (check_every=1 re-runs the frame with checks to name the stage)"
        warnings.warn(
            f"the simulation went non-finite in frame {frame} (t = {frame * self.frame_dt:.4g} s){where}. A "
            "smaller time step, softer materials, or the XPBDSolver usually help.", NonFiniteWarning, stacklevel=3)

    def _localize(self) -> str:
        """Re-run the last frame from its start with per-stage checks: the first stage and substep at fault."""
        model, solver = self.model, self.solver
        a, b = model.state(requires_grad=False), model.state(requires_grad=False)
        a.assign(self._start)
        c = self.contacts
        contacts = model.contacts(c.soft_contact_max, c.particle_pair_max, c.rigid_pair_max, c.rigid_contact_max,
                                  c.grid_dim)
        saved = solver.check_finite
        solver.check_finite = True
        try:
            for k in range(self.substeps):
                model.collide(a, contacts, check_overflow=False)
                solver.step(a, b, self.control, contacts, self.dt)
                a, b = b, a
        except NonFiniteError as e:
            return f", substep {k}: first in stage '{e.stage}' ({e.array}[{e.index}])"
        finally:
            solver.check_finite = saved
        return " (re-run with checks, the frame stayed finite: the blow-up depends on rounding)"
