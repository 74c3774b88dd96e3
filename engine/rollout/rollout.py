"""Differentiable rollouts with checkpointing: T frames forward, gradients back, in bounded memory.

A recorded ``wp.Tape`` keeps every intermediate state, so its memory grows
with the horizon. :class:`Rollout` instead runs the forward pass without a
tape, keeping only every k-th frame's positions and velocities (a
checkpoint). The backward pass walks the segments from last to first: it
restores a segment's checkpoint, re-simulates the segment's k frames on a tape
(into buffers allocated once and reused by every segment), seeds the tape
with the adjoint of the segment's last state, and runs it backwards. Peak
memory is ``T/k`` checkpoints plus one segment, smallest near
``k = sqrt(T)``; the default picks that k.

Why the gradients are the same for every k: the segments replay exactly the
kernels of the forward pass on the same inputs, and the adjoint handed from
one segment to the next is the very value a single long tape would hold at
that point, accumulated in the same order. On the CPU the results are
bitwise identical for every ``checkpoint_every`` (tested); on CUDA atomic
accumulation order can differ, so expect agreement to float rounding.

A model's state (particle positions and velocities, body poses and
velocities) and its per-frame controls travel as flat float32 rows
(:mod:`inertia.rollout.layout`), so the same code serves particle, rigid and
mixed models. Torch tensors go in and come out through
:mod:`inertia.rollout.torch_bridge` (``rollout(q0, qd0, particle_f=..., params=...,
body_q0=..., joint_target_pos=...)``); this module holds the simulation side.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import torch
import warp as wp

from ..autodiff.backward_code import enable_gradients
from ..autodiff.denormals import FlushDenormals
from ..diagnostics import NonFiniteError, first_nonfinite
from ..replay import plain_calls
from ..types import JOINT_BALL, JOINT_FREE
from .layout import Layout
from .params import DIFFERENTIABLE_PARAMS, PARAM_ALIASES, idle_params, warp_param_names  # noqa: F401
from .sizing import RolloutSizing

def _wp(t: torch.Tensor, dtype=wp.float32) -> wp.array:
    """Zero-copy Warp view of a contiguous float32 torch tensor (detached: Warp never sees autograd)."""
    return wp.from_torch(t.detach(), dtype=dtype)


class Rollout(RolloutSizing):
    """Simulate ``frames`` frames of ``substeps`` solver steps each, differentiably.

    Args:
        model: the :class:`inertia.Model` (particles, rigid bodies, or both).
        solver: a solver built on ``model`` (e.g. :class:`inertia.SemiImplicitSolver`).
        frames: number of frames T. Controls and outputs are per frame.
        frame_dt: frame length [s]; each solver step is ``frame_dt / substeps``.
        substeps: solver steps per frame.
        params: names of model arrays to differentiate with respect to (see
            ``DIFFERENTIABLE_PARAMS``, plus ``"particle_mass"`` and ``"body_mass"``).
        checkpoint_every: frames per checkpointed segment k. ``None`` picks the
            k of least memory (about ``sqrt(T)``, weighted by what a frame
            costs); ``frames`` records the whole rollout on one tape (no
            checkpointing).
        memory_budget: bytes allowed for checkpoints plus one recorded
            segment; the largest k that fits is used (fewer, longer segments).
            Raises ``ValueError`` if even the best k does not fit.
        output: ``"trajectory"`` returns the state at every frame, e.g.
            positions ``(T + 1, N, 3)`` (frame 0 is the initial state);
            ``"final"`` returns only the last frame, ``(N, 3)``, so memory stays
            independent of T.
        check_finite: debugging. Forward: the solver names the first stage and
            step that produced a NaN/inf. Backward: every kernel's adjoint is run
            on its own and checked; :class:`inertia.NonFiniteError` names the
            kernel, frame and substep where a gradient first became non-finite.
        record_grad_norms: after each backward pass, ``grad_norms`` (shape
            ``(T + 1, 2)``) holds the norm of the loss gradient w.r.t. the
            positions and the velocities (particles and bodies together) of every
            frame (one tape per step and a host read per frame: slower).
        soft_contact_max, particle_pair_max, rigid_pair_max, rigid_contact_max:
            contact capacities per step (see :meth:`inertia.Model.contacts`).
        capture: replay each frame of the forward pass, and each segment's
            re-simulation and backward pass, from a graph captured once with
            ``wp.ScopedCapture`` (the same kernels on the same buffers, so the
            same results bitwise; much less Python launch overhead). Default:
            on, unless ``check_finite`` or ``record_grad_norms`` is set.
        batched: for a model whose worlds are uniform and world-contiguous, give every
            state, control and output a leading ``num_worlds`` dimension (``body_q0``
            ``(W, B, 7)``, ``body_f`` ``(T, W, B, 6)``, outputs ``(T + 1, W, N, 3)``; N, B
            per world) and accept per-entity parameters as ``(W, per_world, ...)`` too
            (:mod:`inertia.rollout.worlds`). ``ValueError`` if the worlds are not uniform.

    Inputs are never written: states, controls and parameter values are
    copied into the rollout's own buffers (parameter values are written into
    the model's arrays, which is where the solver reads them, and stay there).
    A declared parameter that a call does not pass is simulated with the
    model's current value, snapshotted for that call's backward pass.

    Captured graphs freeze the Python scalars of the model and solver (dt,
    damping, contact settings, iterations); a change to any of them is noticed
    at the next call and the graphs are captured again.
    """

    def __init__(self, model, solver, frames: int, frame_dt: float, substeps: int = 1, params=(),
                 checkpoint_every: int | None = None, memory_budget: int | None = None,
                 output: str = "trajectory", check_finite: bool = False, record_grad_norms: bool = False,
                 soft_contact_max: int | None = None, particle_pair_max: int | None = None,
                 capture: bool | None = None, rigid_pair_max: int | None = None,
                 rigid_contact_max: int | None = None, batched: bool = False):
        if solver.model is not model:
            raise ValueError("the solver was built for another model")
        if model.particle_count == 0 and model.body_count == 0:
            raise ValueError("Rollout needs a model with particles or bodies (this one has neither)")
        if int(frames) != frames or frames < 1:
            raise ValueError(f"frames must be a positive integer, got {frames!r}")
        if int(substeps) != substeps or substeps < 1:
            raise ValueError(f"substeps must be a positive integer, got {substeps!r}")
        # any real scalar, NumPy's included (np.float32 is not a float subclass), as solver.step takes; not a bool
        if (not isinstance(frame_dt, numbers.Real) or isinstance(frame_dt, (bool, np.bool_))
                or not math.isfinite(frame_dt) or frame_dt <= 0):
            raise ValueError(f"frame_dt must be a finite number > 0 (seconds), got {frame_dt!r}")
        if output not in ("trajectory", "final"):
            raise ValueError(f"output must be 'trajectory' or 'final', got {output!r}")
        self.model, self.solver = model, solver
        # a solver in joint coordinates (FeatherstoneSolver) reads joint_q / joint_qd of its input state and
        # places the jointed bodies from them (sync_bodies): a rollout checkpoints those too, and syncs the
        # bodies of a segment's first state (under the tape: a pose's gradient then reaches the coordinates)
        self.layout = Layout(model, getattr(solver, "state_inputs", None))
        self._sync_bodies = getattr(solver, "sync_bodies", None)
        self.world_views = None
        if batched:
            from .worlds import WorldViews

            self.world_views = WorldViews(model)
        self.frames, self.substeps = int(frames), int(substeps)
        self.frame_dt = float(frame_dt)
        self.dt = self.frame_dt / self.substeps
        self.output = output
        self.check_finite = bool(check_finite)
        self.record_grad_norms = bool(record_grad_norms)
        self.grad_norms: np.ndarray | None = None
        self._contact_caps = (soft_contact_max, particle_pair_max, rigid_pair_max, rigid_contact_max)
        diagnostics = self.check_finite or self.record_grad_norms
        if capture and diagnostics:
            raise ValueError("capture=True cannot be combined with check_finite or record_grad_norms, which read "
                             "the device back between kernels")
        self.capture = (not diagnostics) if capture is None else bool(capture)

        if isinstance(params, str):
            raise TypeError(f"params must be a sequence of names, got the string {params!r}: write "
                            f"params=({params!r},)")
        self.param_names = tuple(params)
        if len(set(self.param_names)) != len(self.param_names):
            raise ValueError(f"params lists a name twice: {self.param_names}")
        for alias, targets in PARAM_ALIASES.items():
            clash = [n for n in self.param_names if n != alias and n in targets]
            if alias in self.param_names and clash:
                raise ValueError(f"declare {alias} or {clash[0]}, not both (they write the same array)")
        allowed = tuple(PARAM_ALIASES) + DIFFERENTIABLE_PARAMS
        for name in self.param_names:
            if name not in allowed:
                raise ValueError(f"cannot differentiate with respect to {name!r}; choose from {allowed}")
        ignored = getattr(solver, "unused_params", ())
        unused = [n for n in self.param_names if all(w in ignored for w in warp_param_names((n,)))]
        if unused:
            raise ValueError(f"{type(solver).__name__} does not read {unused[0]!r}: its gradient would be zero "
                             f"(parameters it ignores: {list(solver.unused_params)})")
        for message in idle_params(model, warp_param_names(self.param_names)):
            warnings.warn(message, stacklevel=2)
        for name in warp_param_names(self.param_names):
            a = getattr(model, name)
            if not a.requires_grad:
                a.requires_grad = True  # allocates .grad once, here rather than in backward()

        # forward buffers (no gradients): two ping-pong states and one Contacts
        self._fwd = (model.state(requires_grad=False), model.state(requires_grad=False))
        self._fwd_contacts = model.contacts(*self._contact_caps)
        self.checkpoint_every = self._choose_segment(checkpoint_every, memory_budget)
        self.segment_count = -(-self.frames // self.checkpoint_every)
        # the controls every step reads: typed views of one fixed row, refilled per frame (a captured
        # graph replays fixed addresses)
        self._control = model.control(requires_grad=False)
        self._frame_control = wp.zeros(max(1, self.layout.control_size), dtype=float, device=model.device)
        self._point_control(self._control, self._frame_control)
        self._graphs: dict = {}  # captured graphs, by what they run
        # the backward passes' kernels run with denormals flushed to zero on a CPU (autodiff/denormals.py)
        self._flush = FlushDenormals(model.device)
        self._warm: set = set()  # what has run once uncaptured (modules loaded, per-state buffers allocated)
        self._seg_states = None  # allocated at the first backward pass, then reused
        self.last_contact_peak = None  # largest contact counts of the last forward pass

    def initial_joint_state(self) -> dict:
        """``{"joint_q", "joint_qd"}``: the model's initial joint coordinates (the default joint_q0 / joint_qd0)."""
        if getattr(self, "_initial_joints", None) is None:
            s = self.model.state(requires_grad=False)
            self._initial_joints = {"joint_q": s.joint_q, "joint_qd": s.joint_qd}
            # ball and free joints: where their quaternions sit in joint_q
            types, starts = self.model.joint_type.numpy(), self.model.joint_q_start.numpy()
            self._quat_rows = [int(starts[j]) + (3 if t == JOINT_FREE else 0) for j, t in enumerate(types)
                               if t in (JOINT_BALL, JOINT_FREE)]
        return self._initial_joints

    def check_joint_quaternions(self, joint_q: torch.Tensor) -> None:
        """Refuse joint_q0 whose ball or free joint quaternions are far from unit length (a host read)."""
        self.initial_joint_state()
        if not self._quat_rows:
            return
        rows = torch.as_tensor(self._quat_rows, device=joint_q.device)
        idx = rows[:, None] + torch.arange(4, device=joint_q.device)
        norms = torch.linalg.norm(joint_q.detach()[..., idx], dim=-1)
        if bool(((norms - 1.0).abs() > 1e-2).any()):
            raise ValueError("joint_q0 quaternions of ball and free joints must have unit length (x, y, z, w); "
                             "normalize them")

    def _point_control(self, control, row) -> None:
        for name, view in Layout.views(self.layout.control, row).items():
            setattr(control, name, view)

    # ------------------------------------------------------------------ torch
    def __call__(self, q0=None, qd0=None, particle_f=None, params=None, *, body_q0=None, body_qd0=None,
                 body_f=None, joint_target_pos=None, joint_target_vel=None, joint_f=None, joint_q0=None,
                 joint_qd0=None):
        """Run the rollout on torch tensors; differentiable with ``loss.backward()``.

        Args:
            q0, qd0: initial particle positions [m] and velocities [m/s], ``(N, 3)``;
                default: the model's initial state (no gradient).
            particle_f: external force [N] per frame and particle, ``(T, N, 3)``,
                held for the frame's substeps; default none.
            params: ``{name: tensor}`` for names declared in ``params=`` at
                construction, each shaped like the model array (``(S,)`` for
                ``spring_stiffness``, ``(tris, 3)`` for ``tri_materials``,
                ``(num_worlds, 3)`` for ``gravity``, ``(B, 3, 3)`` for ``body_inertia``, ...).
                ``particle_mass`` / ``body_mass`` [kg] are accepted in place of the
                inverse masses.
            body_q0: initial body poses ``(B, 7)`` (position [m], quaternion (x, y, z, w));
                body_qd0: initial body velocities ``(B, 6)`` (v of the com [m/s], omega
                [rad/s], world); default: the model's.
            body_f: external wrench per frame and body ``(T, B, 6)`` (force [N] at the com,
                torque [N m], world).
            joint_target_pos, joint_target_vel, joint_f: drive targets and efforts per
                frame and joint degree of freedom, ``(T, model.joint_dof_count)``.
            joint_q0, joint_qd0: initial joint coordinates ``(model.joint_coord_count,)`` and rates
                ``(model.joint_dof_count,)`` (layout in :mod:`inertia.builder.bodies`), for a solver in
                joint coordinates (:class:`inertia.FeatherstoneSolver`); default: the model's initial
                state's. The jointed bodies' poses and velocities then follow from them (their entries of
                ``body_q0`` / ``body_qd0`` are not read: those set free and kinematic bodies only).

        Returns:
            For a model without bodies ``(q, qd)``: ``(T + 1, N, 3)`` tensors
            (``output="trajectory"``) or ``(N, 3)`` (``output="final"``). For a model
            with bodies a :class:`inertia.rollout.torch_bridge.RolloutResult` with
            ``particle_q``, ``particle_qd`` (None without particles), ``body_q``
            ``(T + 1, B, 7)`` and ``body_qd`` ``(T + 1, B, 6)``, and with a solver in joint
            coordinates ``joint_q`` ``(T + 1, model.joint_coord_count)`` and ``joint_qd``
            ``(T + 1, model.joint_dof_count)`` (None otherwise). Float32, on the
            model's device. With ``batched=True`` every entity dimension above (N, B, D)
            is ``(num_worlds, per_world)`` instead, in inputs and outputs alike.
        """
        from .torch_bridge import run_rollout

        controls = {"particle_f": particle_f, "body_f": body_f, "joint_target_pos": joint_target_pos,
                    "joint_target_vel": joint_target_vel, "joint_f": joint_f}
        return run_rollout(self, {"particle_q": q0, "particle_qd": qd0, "body_q": body_q0, "body_qd": body_qd0,
                                  "joint_q": joint_q0, "joint_qd": joint_qd0}, controls, params)

    def step(self, q=None, qd=None, particle_f=None, params=None, **bodies):
        """One frame from the given state under one frame's controls: the closed-loop building block.

        Takes what ``__call__`` takes with the frame dimension left out (``particle_f``
        ``(N, 3)``, ``body_f`` ``(B, 6)``, ``joint_target_pos`` ``(D,)``, ...) and returns the
        next frame's state in the same structure (``(q, qd)`` or a ``RolloutResult``).
        Build the rollout with ``frames=1``; a policy can then compute each frame's
        controls from the state it returned (see examples/). Memory per frame is the
        state kept by autograd; the frame is re-simulated in the backward pass.
        """
        if self.frames != 1:
            raise ValueError("Rollout.step() needs a rollout built with frames=1")
        f = None if particle_f is None else particle_f.unsqueeze(0)
        per_frame = {k: (v.unsqueeze(0) if k in Layout.CONTROL_NAMES and v is not None else v)
                     for k, v in bodies.items()}
        out = self(q, qd, f, params, **per_frame)
        if self.output == "final":
            return out
        last = [None if x is None else x[-1] for x in out]
        return type(out)(*last) if hasattr(out, "_fields") else tuple(last)

    # ------------------------------------------------------------------ forward
    def _write_params(self, params: dict) -> None:
        for name, value in params.items():
            dst = getattr(self.model, name)
            src = wp.from_torch(value.detach().contiguous().reshape(dst.shape + _vec_shape(dst)), dtype=dst.dtype)
            wp.copy(dst, src)

    def _simulate_frame(self, a, b, control, contacts):
        """Advance ``a`` by one frame through ping-pong states; returns the state holding the result."""
        model, solver = self.model, self.solver
        for _ in range(self.substeps):
            model.collide(a, contacts, check_overflow=False)
            solver.step(a, b, control, contacts, self.dt)
            a, b = b, a
        return a, b

    def forward(self, x0: torch.Tensor, controls: torch.Tensor | None, params: dict):
        """Simulate without a tape. Returns (trajectory, checkpoints); both fresh torch tensors.

        ``x0``: the packed initial state ``(S,)`` float32; ``controls``: packed per-frame
        controls ``(T, C)`` float32 or None; ``params``: model-array name -> float32 tensor.
        Already validated. The trajectory is ``(T + 1, S)`` (``(1, S)`` for ``output="final"``).
        """
        S, T = self.layout.state_size, self.frames
        dev = x0.device
        self._refresh_graphs()
        self._write_params(params)
        ckpt = torch.empty((self.segment_count, S), dtype=torch.float32, device=dev)
        traj = torch.empty((T + 1 if self.output == "trajectory" else 1, S), dtype=torch.float32, device=dev)
        ckpt_w, traj_w = _wp(ckpt), _wp(traj)
        u_w = None if controls is None else _wp(controls)

        a, b = self._fwd
        self.layout.copy_state_in(a, _wp(x0))
        if self._sync_bodies is not None:
            self._sync_bodies(a)  # the jointed bodies where the initial joint coordinates put them
        if self.output == "trajectory":
            self.layout.copy_state_out(traj_w[0], a)
        self.solver.step_count = 0
        solver_checks = self.solver.check_finite
        self.solver.check_finite = solver_checks or self.check_finite
        self._fwd_contacts.reset_peak()
        try:
            self._forward_frames(a, b, u_w, ckpt_w, traj_w)
        finally:
            self.solver.check_finite = solver_checks
        # one host read per rollout; the backward pass re-simulates the same steps, so it finds the same contacts
        self._fwd_contacts.check_overflow(since_reset=True)
        self.last_contact_peak = tuple(int(c) for c in self._fwd_contacts.peak_counts.numpy())
        if not self.check_finite and not bool(torch.isfinite(traj[-1]).all()):
            warnings.warn("the rollout produced NaN/inf (the simulation blew up: a smaller time step or softer "
                          "materials usually help); build the Rollout with check_finite=True to find the first "
                          "stage and step", RuntimeWarning, stacklevel=4)
        return traj, ckpt

    def _forward_frames(self, a, b, u_w, ckpt_w, traj_w) -> None:
        T, k = self.frames, self.checkpoint_every
        if u_w is None:
            self._frame_control.zero_()
        for frame in range(T):
            if frame % k == 0:
                self.layout.copy_state_out(ckpt_w[frame // k], a)
            if u_w is not None:
                wp.copy(self._frame_control, u_w[frame])
            a, b = self._run(("frame", a is self._fwd[0]), lambda a=a, b=b: self._simulate_frame(
                a, b, self._control, self._fwd_contacts), result=(a, b) if self.substeps % 2 == 0 else (b, a))
            if self.output == "trajectory":
                self.layout.copy_state_out(traj_w[frame + 1], a)
        if self.output == "final":
            self.layout.copy_state_out(traj_w[0], a)

    def _graph_inputs(self) -> tuple:
        """The Python scalars a captured graph froze (dt, damping, contact settings, iterations, ...)."""
        def scalars(obj):
            return tuple(sorted((k, v) for k, v in vars(obj).items()
                                if isinstance(v, (bool, int, float, str)) and k != "step_count"))
        return (self.dt, self.substeps, scalars(self.model), scalars(self.solver))

    def _refresh_graphs(self) -> None:
        """Drop captured graphs when a scalar they froze has changed since they were captured."""
        inputs = self._graph_inputs()
        if getattr(self, "_graphs_for", None) != inputs:
            self._graphs.clear()
            self._warm.clear()
            self._graphs_for = inputs

    def _run(self, key, work, result=None):
        """Run ``work()`` plainly the first time, then from a graph captured on the second call.

        ``result``: what ``work()`` returns (needed when the graph replays instead of it).
        """
        if not self.capture or self.solver.check_finite:  # the solver's checks read the device back
            with plain_calls(self.solver.replay, self.model.collision.replay):  # capture=False: no graphs at all
                return work()
        graph = self._graphs.get(key)
        if graph is not None:
            wp.capture_launch(graph)
            return result
        if key not in self._warm:
            self._warm.add(key)
            return work()
        with wp.ScopedCapture(device=self.model.device) as cap:  # records, runs nothing
            out = work()
        self._graphs[key] = cap.graph
        wp.capture_launch(cap.graph)
        return out

    # ------------------------------------------------------------------ backward
    def _segment_buffers(self, peak=None):
        """States and per-step Contacts of one recorded segment, allocated once and reused.

        ``peak``: the largest contact counts of the forward pass being differentiated. The
        re-simulation finds exactly those contacts again, so the per-step lists are sized to
        it (they dominate a segment's memory at the default capacities) and grown when a later
        forward pass finds more.
        """
        model = self.model
        steps = self.checkpoint_every * self.substeps
        enable_gradients()  # before the segment's capture: its kernels are recompiled with their adjoints
        if self._seg_states is None:
            self._seg_states = [model.state(requires_grad=True) for _ in range(steps + 1)]
            self._carry = wp.zeros(self.layout.state_size, dtype=float, device=model.device)
            # the controls of the segment's frames, copied in per segment (gradients come out of here)
            self._seg_control = wp.zeros((self.checkpoint_every, max(1, self.layout.control_size)), dtype=float,
                                         device=model.device, requires_grad=True)
            self._seg_controls = [model.control(requires_grad=False) for _ in range(self.checkpoint_every)]
            for i, control in enumerate(self._seg_controls):
                self._point_control(control, self._seg_control[i])
        fwd = self._fwd_contacts
        caps = (fwd.soft_contact_max, fwd.particle_pair_max, fwd.rigid_pair_max, fwd.rigid_contact_max)
        if peak is not None:
            caps = tuple(min(c, p) for c, p in zip(caps, peak))
        have = getattr(self, "_seg_caps", None)
        if have is None or any(c > h for c, h in zip(caps, have)):
            if have is not None:
                caps = tuple(max(c, h) for c, h in zip(caps, have))
            self._seg_contacts = [model.contacts(*caps) for _ in range(steps)]
            self._seg_caps = caps
            self._graphs.pop("segment", None)  # it replayed the old contact buffers
            self._warm.discard("segment")
            model.collision.prepare(fwd)  # scratch allocated here, outside the segment's capture (shared)
        return self._seg_states, self._seg_contacts

    def _record_segment(self, f0: int, f1: int):
        """Re-simulate frames [f0, f1) on tapes: one tape per step when checking, else one for all."""
        states, contacts = self._seg_states, self._seg_contacts
        model, solver = self.model, self.solver
        tapes = []
        tape = wp.Tape()
        per_step = self.check_finite or self.record_grad_norms
        j = 0
        for frame in range(f0, f1):
            control = self._seg_controls[frame - f0]
            for _ in range(self.substeps):
                if per_step:
                    tape = wp.Tape()
                with tape:
                    if j == 0 and self._sync_bodies is not None:
                        # the same poses the checkpoint holds; recorded so that their adjoint (the output's,
                        # seeded at this frame) reaches the joint coordinates
                        self._sync_bodies(states[0])
                    model.collide(states[j], contacts[j], check_overflow=False, record_history=False)
                    solver.step(states[j], states[j + 1], control, contacts[j], self.dt)
                if per_step or not tapes:
                    tapes.append(tape)
                j += 1
        return tapes

    def backward(self, x0, controls, params: dict, ckpt, grad_traj, need_control: bool, contact_peak=None):
        """Adjoints of the initial state, controls and parameters, given the trajectory's adjoint.

        ``grad_traj``: ``(T + 1, S)`` (or ``(1, S)`` for ``output="final"``) or None.
        ``contact_peak``: ``last_contact_peak`` of the forward pass being differentiated.

        Returns ``(grad_x0 (S,), grad_controls (T, C) or None, {name: grad})`` as torch tensors.
        """
        model = self.model
        self._refresh_graphs()
        saved = {name: wp.clone(getattr(model, name)) for name in params}
        try:
            return self._backward(x0, controls, params, ckpt, grad_traj, need_control, contact_peak)
        finally:
            for name in params:  # also when the backward pass raised (e.g. NonFiniteError)
                wp.copy(getattr(model, name), saved[name])

    def _backward(self, x0, controls, params, ckpt, grad_traj, need_control, contact_peak):
        model, layout = self.model, self.layout
        T, k, S = self.frames, self.checkpoint_every, self.substeps
        self._write_params(params)  # another forward may have changed them since
        for name in params:
            getattr(model, name).grad.zero_()
        states, _ = self._segment_buffers(contact_peak)
        u_w = None if controls is None else _wp(controls.contiguous())
        grad_u = torch.zeros_like(controls) if (controls is not None and need_control) else None
        grad_u_w = None if grad_u is None else _wp(grad_u)
        if u_w is None:
            self._seg_control.zero_()
        ckpt_w = _wp(ckpt)
        g_w = None if grad_traj is None else _wp(grad_traj.contiguous())
        carry = self._carry
        norms = np.zeros((T + 1, 2)) if self.record_grad_norms else None

        for s in reversed(range(self.segment_count)):
            f0, f1 = s * k, min(T, (s + 1) * k)
            steps = (f1 - f0) * S
            for st in states[: steps + 1]:
                st.zero_grad()  # and the solver's per-step buffers: their adjoints accumulate otherwise
            self._seg_control.grad.zero_()
            layout.copy_state_in(states[0], ckpt_w[s])
            if u_w is not None:
                for frame in range(f0, f1):
                    wp.copy(self._seg_control[frame - f0], u_w[frame])
            # seed adjoints (the re-simulation writes values only, so seeding first is the same):
            # output adjoints at this segment's frames, the later segment's at its end
            for frame in range(f0, f1 + 1):
                st = states[(frame - f0) * S]
                if frame == f1 and f1 < T:
                    layout.copy_grad_in(st, carry)
                    continue
                row = frame if self.output == "trajectory" else (0 if frame == T else None)
                if row is not None and g_w is not None:
                    layout.copy_grad_in(st, g_w[row])
            if norms is None and not self.check_finite and f1 - f0 == k:
                # a full-length segment: always the same kernels on the same buffers, so capturable
                self._run("segment", lambda f0=f0, f1=f1: self._backward_segment(f0, f1))
            else:
                self._run_backward(self._record_segment(f0, f1), f0, f1, norms)
            layout.copy_grad_out(carry, states[0])
            if grad_u_w is not None:
                for frame in range(f0, f1):
                    wp.copy(grad_u_w[frame], self._seg_control.grad[frame - f0])

        if norms is not None:
            self.grad_norms = norms
        grads = {}
        for name, value in params.items():
            g = wp.to_torch(getattr(model, name).grad).clone()
            grads[name] = g.reshape(value.shape)
        return wp.to_torch(carry).clone().to(x0.device), grad_u, grads

    def _backward_segment(self, f0: int, f1: int) -> None:
        """Re-simulate frames [f0, f1) on one tape and run it backwards (a full segment's captured work)."""
        tape = self._record_segment(f0, f1)[0]
        with self._flush:
            tape.backward()

    def _run_backward(self, tapes, f0, f1, norms) -> None:
        S = self.substeps
        if len(tapes) == 1 and norms is None and not self.check_finite:
            with self._flush:
                tapes[0].backward()
            return
        # One tape per step. Warp's adjoint of an array store consumes (zeroes) the stored
        # element's gradient, so a frame's adjoint is read just before the backward pass of the
        # step that wrote it, when every later step has added its part.
        for j in reversed(range(len(tapes))):
            if norms is not None and (j + 1) % S == 0:
                self._record_norm(norms, f0 + (j + 1) // S, self._seg_states[j + 1])
            with self._flush:  # the adjoints only: the norms' numpy arithmetic keeps gradual underflow
                if self.check_finite:
                    self._backward_checked(tapes[j], f0 + j // S, j % S)
                else:
                    tapes[j].backward()
        if norms is not None and f0 == 0:
            self._record_norm(norms, 0, self._seg_states[0])

    def _record_norm(self, norms, frame: int, state) -> None:
        sq = np.zeros(2)
        for f in self.layout.state:
            g = getattr(state, f.name).grad.numpy().astype(np.float64)
            sq[1 if f.name in Layout.VELOCITIES else 0] += float((g * g).sum())
        norms[frame] = np.sqrt(sq)

    @staticmethod
    def _backward_checked(tape, frame: int, substep: int) -> None:
        """Run each recorded kernel's adjoint alone; raise at the first that writes a NaN/inf."""
        single = wp.Tape()
        for launch in reversed(tape.launches):
            single.launches = [launch]
            single.backward()
            if callable(launch):  # a hand-written adjoint (solvers/constraints/hand_adjoint.py) names its kernel
                kernel, inputs = getattr(launch, "kernel", None), getattr(launch, "inputs", None)
                if kernel is None:
                    continue
            else:
                kernel, inputs = launch[0], launch[3]
            for i, a in enumerate(inputs):
                if isinstance(a, wp.array) and a.requires_grad and a.grad is not None:
                    bad = first_nonfinite(a.grad)
                    if bad is not None:
                        raise NonFiniteError(
                            f"non-finite gradient in argument {i} [{bad}] written by the backward pass of kernel "
                            f"'{kernel.key}' at frame {frame}, substep {substep}",
                            kernel.key, frame, f"argument {i}", bad,
                        )


def _vec_shape(a: wp.array) -> tuple:
    """Trailing element shape of a Warp array's dtype (``(3,)`` for vec3, ``()`` for float)."""
    return tuple(getattr(a.dtype, "_shape_", ()))
