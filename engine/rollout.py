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

Torch tensors go in and come out through :mod:`inertia.torch_bridge`
(``rollout(q0, qd0, particle_f=..., params=...)``); this module holds the
simulation side.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import warp as wp

from .diagnostics import NonFiniteError, first_nonfinite

# Model arrays that a rollout can differentiate with respect to. ``particle_mass``
# is handled by the torch bridge, which turns it into ``particle_inv_mass``.
DIFFERENTIABLE_PARAMS = (
    "particle_inv_mass",
    "particle_radius",
    "spring_rest_length",
    "spring_stiffness",
    "spring_damping",
    "tri_materials",
    "edge_rest_angle",
    "edge_bending_properties",
    "tet_materials",
    "shape_material_ke",
    "shape_material_kd",
    "shape_material_mu",
    "gravity",
)

_STATE_BYTES_PER_PARTICLE = 3 * 12  # particle_q, particle_qd, particle_f (vec3 float32)


def _wp(t: torch.Tensor, dtype=wp.vec3) -> wp.array:
    """Zero-copy Warp view of a contiguous float32 torch tensor (detached: Warp never sees autograd)."""
    return wp.from_torch(t.detach(), dtype=dtype)


class Rollout:
    """Simulate ``frames`` frames of ``substeps`` solver steps each, differentiably.

    Args:
        model: the :class:`inertia.Model`.
        solver: a solver built on ``model`` (e.g. :class:`inertia.SemiImplicitSolver`).
        frames: number of frames T. Controls and outputs are per frame.
        frame_dt: frame length [s]; each solver step is ``frame_dt / substeps``.
        substeps: solver steps per frame.
        params: names of model arrays to differentiate with respect to (see
            ``DIFFERENTIABLE_PARAMS``, plus ``"particle_mass"``).
        checkpoint_every: frames per checkpointed segment k. ``None`` picks the
            k of least memory (about ``sqrt(T)``, weighted by what a frame
            costs); ``frames`` records the whole rollout on one tape (no
            checkpointing).
        memory_budget: bytes allowed for checkpoints plus one recorded
            segment; the largest k that fits is used (fewer, longer segments).
            Raises ``ValueError`` if even the best k does not fit.
        output: ``"trajectory"`` returns positions and velocities at every
            frame, shape ``(T + 1, N, 3)`` (frame 0 is the initial state);
            ``"final"`` returns only the last frame, ``(N, 3)``, so memory stays
            independent of T.
        check_finite: debugging. Forward: the solver names the first stage and
            step that produced a NaN/inf. Backward: every kernel's adjoint is run
            on its own and checked; :class:`inertia.NonFiniteError` names the
            kernel, frame and substep where a gradient first became non-finite.
        record_grad_norms: after each backward pass, ``grad_norms`` (shape
            ``(T + 1, 2)``) holds the norm of the loss gradient w.r.t. the
            (positions, velocities) of every frame (one tape per step and a host
            read per frame: slower).
        soft_contact_max, particle_pair_max: contact capacities per step (see
            :meth:`inertia.Model.contacts`).
        capture: replay each frame of the forward pass, and each segment's
            re-simulation and backward pass, from a graph captured once with
            ``wp.ScopedCapture`` (the same kernels on the same buffers, so the
            same results bitwise; much less Python launch overhead). Default:
            on, unless ``check_finite`` or ``record_grad_norms`` is set.

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
                 capture: bool | None = None):
        if solver.model is not model:
            raise ValueError("the solver was built for another model")
        if model.particle_count == 0:
            raise ValueError("Rollout needs a model with particles (this one has none)")
        if model.body_count:
            # its checkpoints, inputs and outputs are particle states: bodies would silently carry over
            raise NotImplementedError("Rollout differentiates particle models only so far; for rigid bodies "
                                      "record the steps on a wp.Tape (one State per step)")
        if int(frames) != frames or frames < 1:
            raise ValueError(f"frames must be a positive integer, got {frames!r}")
        if int(substeps) != substeps or substeps < 1:
            raise ValueError(f"substeps must be a positive integer, got {substeps!r}")
        if not (isinstance(frame_dt, (int, float)) and math.isfinite(frame_dt) and frame_dt > 0):
            raise ValueError(f"frame_dt must be a finite number > 0 (seconds), got {frame_dt!r}")
        if output not in ("trajectory", "final"):
            raise ValueError(f"output must be 'trajectory' or 'final', got {output!r}")
        self.model, self.solver = model, solver
        self.frames, self.substeps = int(frames), int(substeps)
        self.frame_dt = float(frame_dt)
        self.dt = self.frame_dt / self.substeps
        self.output = output
        self.check_finite = bool(check_finite)
        self.record_grad_norms = bool(record_grad_norms)
        self.grad_norms: np.ndarray | None = None
        self._contact_caps = (soft_contact_max, particle_pair_max)
        diagnostics = self.check_finite or self.record_grad_norms
        if capture and diagnostics:
            raise ValueError("capture=True cannot be combined with check_finite or record_grad_norms, which read "
                             "the device back between kernels")
        self.capture = (not diagnostics) if capture is None else bool(capture)

        self.param_names = tuple(params)
        if len(set(self.param_names)) != len(self.param_names):
            raise ValueError(f"params lists a name twice: {self.param_names}")
        if "particle_mass" in self.param_names and "particle_inv_mass" in self.param_names:
            raise ValueError("declare particle_mass or particle_inv_mass, not both (they are the same array)")
        for name in self.param_names:
            if name != "particle_mass" and name not in DIFFERENTIABLE_PARAMS:
                raise ValueError(f"cannot differentiate with respect to {name!r}; choose from "
                                 f"{('particle_mass',) + DIFFERENTIABLE_PARAMS}")
        for name in self._warp_param_names(self.param_names):
            a = getattr(model, name)
            if not a.requires_grad:
                a.requires_grad = True  # allocates .grad once, here rather than in backward()

        # forward buffers (no gradients): two ping-pong states and one Contacts
        self._fwd = (model.state(requires_grad=False), model.state(requires_grad=False))
        self._fwd_contacts = model.contacts(*self._contact_caps)
        self.checkpoint_every = self._choose_segment(checkpoint_every, memory_budget)
        self.segment_count = -(-self.frames // self.checkpoint_every)
        self._control = model.control(requires_grad=False)
        # fixed buffers the steps read their forces from (a captured graph replays fixed addresses)
        self._frame_force = wp.zeros(model.particle_count, dtype=wp.vec3, device=model.device)
        self._graphs: dict = {}  # captured graphs, by what they run
        self._warm: set = set()  # what has run once uncaptured (modules loaded, per-state buffers allocated)
        self._seg_states = None  # allocated at the first backward pass, then reused
        self.last_contact_peak = None  # largest contact counts of the last forward pass

    # ------------------------------------------------------------------ torch
    def __call__(self, q0=None, qd0=None, particle_f=None, params=None):
        """Run the rollout on torch tensors; differentiable with ``loss.backward()``.

        Args:
            q0, qd0: initial positions [m] and velocities [m/s], ``(N, 3)``;
                default: the model's initial state (no gradient).
            particle_f: external force [N] per frame and particle, ``(T, N, 3)``,
                held for the frame's substeps; default none.
            params: ``{name: tensor}`` for names declared in ``params=`` at
                construction, each shaped like the model array (``(S,)`` for
                ``spring_stiffness``, ``(tris, 3)`` for ``tri_materials``,
                ``(1, 3)`` for ``gravity``, ...). ``particle_mass`` [kg] is
                accepted in place of ``particle_inv_mass``.

        Returns:
            ``(q, qd)``: ``(T + 1, N, 3)`` tensors (``output="trajectory"``) or
            ``(N, 3)`` (``output="final"``), float32, on the model's device.
        """
        from .torch_bridge import run_rollout

        q, qd = run_rollout(self, q0, qd0, particle_f, params)
        if self.output == "final":
            return q[0], qd[0]
        return q, qd

    def step(self, q, qd, particle_f=None, params=None):
        """One frame from ``(q, qd)`` under force ``particle_f`` ``(N, 3)``: the closed-loop building block.

        Build the rollout with ``frames=1``; a policy can then compute each
        frame's forces from the state it returned (see examples/). Memory per
        frame is the (q, qd) kept by autograd; the frame is re-simulated in
        the backward pass.
        """
        if self.frames != 1:
            raise ValueError("Rollout.step() needs a rollout built with frames=1")
        f = None if particle_f is None else particle_f.unsqueeze(0)
        q_out, qd_out = self(q, qd, f, params)
        return (q_out, qd_out) if self.output == "final" else (q_out[-1], qd_out[-1])

    # ------------------------------------------------------------------ sizing
    @staticmethod
    def _warp_param_names(names):
        return tuple("particle_inv_mass" if n == "particle_mass" else n for n in names)

    def _contact_bytes(self) -> int:
        # after a backward pass the per-step lists have the size the forward pass needed
        soft, pairs = getattr(self, "_seg_caps", (self._fwd_contacts.soft_contact_max,
                                                    self._fwd_contacts.particle_pair_max))
        return 8 * max(1, soft) + 8 * max(1, pairs) + 8 + 8

    def memory_estimate(self, checkpoint_every: int | None = None) -> dict:
        """Bytes held for the backward pass with segments of ``checkpoint_every`` frames.

        ``checkpoints``: saved (q, qd) per segment; ``segment``: the states (with
        gradients), the solver's per-step buffers (XPBD's iterates) and the contact
        lists of one recorded segment (at the forward pass's capacities until a
        backward pass has sized them to the contacts found); ``trajectory``: the
        outputs. Not counted: tape bookkeeping (Python objects) and the particle
        hash grid (a fixed 2 MiB at the default 64^3 cells, shared by all steps).
        """
        k = self.checkpoint_every if checkpoint_every is None else int(checkpoint_every)
        n = self.model.particle_count
        seg_steps = k * self.substeps
        ckpt = -(-self.frames // k) * n * 24
        solver_bytes = getattr(self.solver, "state_buffer_bytes", None)
        per_step = self._contact_bytes() + (solver_bytes(True) if solver_bytes else 0)
        seg = (seg_steps + 1) * n * _STATE_BYTES_PER_PARTICLE * 2 + seg_steps * per_step
        traj = (self.frames + 1 if self.output == "trajectory" else 1) * n * 24
        return {"checkpoints": ckpt, "segment": seg, "trajectory": traj, "total": ckpt + seg + traj}

    def _choose_segment(self, checkpoint_every, memory_budget) -> int:
        if checkpoint_every is not None:
            k = int(checkpoint_every)
            if k != checkpoint_every or not 1 <= k <= self.frames:
                raise ValueError(f"checkpoint_every must be an integer in [1, frames={self.frames}], "
                                 f"got {checkpoint_every!r}")
            return k
        cost = {k: self._backward_bytes(k) for k in self._candidate_ks()}
        best = min(cost, key=lambda k: (cost[k], -k))
        if memory_budget is None:
            return best
        fitting = [k for k, c in cost.items() if c <= memory_budget]
        if not fitting:
            raise ValueError(f"memory_budget={memory_budget} bytes is too small: the least a backward pass of "
                             f"{self.frames} frames needs is {cost[best]} bytes (checkpoint_every={best})")
        return max(fitting)

    def _backward_bytes(self, k: int) -> int:
        m = self.memory_estimate(k)
        return m["checkpoints"] + m["segment"]

    def _candidate_ks(self):
        # every k up to a few thousand; beyond, a geometric sweep (the cost is convex in k)
        if self.frames <= 4096:
            return range(1, self.frames + 1)
        ks = set(np.unique(np.geomspace(1, self.frames, 400).astype(int)).tolist())
        ks.add(self.frames)
        return sorted(ks)

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

    def forward(self, q0: torch.Tensor, qd0: torch.Tensor, particle_f: torch.Tensor | None, params: dict):
        """Simulate without a tape. Returns (q, qd, checkpoints); all fresh torch tensors.

        ``q0``, ``qd0``: (N, 3) float32; ``particle_f``: (T, N, 3) float32 or None;
        ``params``: model-array name -> float32 tensor. Already validated.
        """
        model = self.model
        n, T = model.particle_count, self.frames
        dev = q0.device
        self._refresh_graphs()
        self._write_params(params)
        ckpt = torch.empty((self.segment_count, 2, n, 3), dtype=torch.float32, device=dev)
        frames_out = T + 1 if self.output == "trajectory" else 1
        q_out = torch.empty((frames_out, n, 3), dtype=torch.float32, device=dev)
        qd_out = torch.empty((frames_out, n, 3), dtype=torch.float32, device=dev)
        ckpt_w, q_w, qd_w = _wp(ckpt.view(-1, n, 3)), _wp(q_out), _wp(qd_out)
        f_w = None if particle_f is None else _wp(particle_f)

        a, b = self._fwd
        wp.copy(a.particle_q, _wp(q0))
        wp.copy(a.particle_qd, _wp(qd0))
        if self.output == "trajectory":
            wp.copy(q_w[0], a.particle_q)
            wp.copy(qd_w[0], a.particle_qd)
        self.solver.step_count = 0
        solver_checks = self.solver.check_finite
        self.solver.check_finite = solver_checks or self.check_finite
        self._fwd_contacts.reset_peak()
        try:
            self._forward_frames(a, b, f_w, ckpt_w, q_w, qd_w)
        finally:
            self.solver.check_finite = solver_checks
        # one host read per rollout; the backward pass re-simulates the same steps, so it finds the same contacts
        self._fwd_contacts.check_overflow(since_reset=True)
        self.last_contact_peak = tuple(int(c) for c in self._fwd_contacts.peak_counts.numpy())
        if not self.check_finite and not bool(torch.isfinite(q_out[-1]).all() and torch.isfinite(qd_out[-1]).all()):
            warnings.warn("the rollout produced NaN/inf (the simulation blew up: a smaller time step or softer "
                          "materials usually help); build the Rollout with check_finite=True to find the first "
                          "stage and step", RuntimeWarning, stacklevel=4)
        return q_out, qd_out, ckpt

    def _forward_frames(self, a, b, f_w, ckpt_w, q_w, qd_w) -> None:
        T, k = self.frames, self.checkpoint_every
        self._control.particle_f = self._frame_force
        if f_w is None:
            self._frame_force.zero_()
        for frame in range(T):
            if frame % k == 0:
                s = frame // k
                wp.copy(ckpt_w[2 * s], a.particle_q)
                wp.copy(ckpt_w[2 * s + 1], a.particle_qd)
            if f_w is not None:
                wp.copy(self._frame_force, f_w[frame])
            a, b = self._run(("frame", a is self._fwd[0]), lambda a=a, b=b: self._simulate_frame(
                a, b, self._control, self._fwd_contacts), result=(a, b) if self.substeps % 2 == 0 else (b, a))
            if self.output == "trajectory":
                wp.copy(q_w[frame + 1], a.particle_q)
                wp.copy(qd_w[frame + 1], a.particle_qd)
        if self.output == "final":
            wp.copy(q_w[0], a.particle_q)
            wp.copy(qd_w[0], a.particle_qd)

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
        if self._seg_states is None:
            self._seg_states = [model.state(requires_grad=True) for _ in range(steps + 1)]
            n = model.particle_count
            self._carry = (wp.zeros(n, dtype=wp.vec3, device=model.device),
                           wp.zeros(n, dtype=wp.vec3, device=model.device))
            # the forces of the segment's frames, copied in per segment (gradients come out of here)
            self._seg_force = wp.zeros((self.checkpoint_every, n), dtype=wp.vec3, device=model.device,
                                       requires_grad=True)
        fwd = self._fwd_contacts
        caps = (fwd.soft_contact_max, fwd.particle_pair_max)
        if peak is not None:
            caps = (min(caps[0], peak[0]), min(caps[1], peak[1]))
        have = getattr(self, "_seg_caps", None)
        if have is None or caps[0] > have[0] or caps[1] > have[1]:
            if have is not None:
                caps = (max(caps[0], have[0]), max(caps[1], have[1]))
            self._seg_contacts = [model.contacts(*caps) for _ in range(steps)]
            self._seg_caps = caps
            self._graphs.pop("segment", None)  # it replayed the old contact buffers
            self._warm.discard("segment")
            if fwd.particle_grid is None and model.particle_collide and model.particle_count:
                d = fwd.grid_dim
                fwd.particle_grid = wp.HashGrid(d, d, d, device=model.device)
            for c in self._seg_contacts:  # the grid only serves detection: the forward pass's serves all steps
                c.particle_grid = fwd.particle_grid
        return self._seg_states, self._seg_contacts

    def _record_segment(self, f0: int, f1: int):
        """Re-simulate frames [f0, f1) on tapes: one tape per step when checking, else one for all."""
        states, contacts = self._seg_states, self._seg_contacts
        model, solver = self.model, self.solver
        tapes = []
        tape = wp.Tape()
        per_step = self.check_finite or self.record_grad_norms
        j = 0
        control = self._control
        for frame in range(f0, f1):
            control.particle_f = self._seg_force[frame - f0]
            for _ in range(self.substeps):
                if per_step:
                    tape = wp.Tape()
                with tape:
                    model.collide(states[j], contacts[j], check_overflow=False, record_history=False)
                    solver.step(states[j], states[j + 1], control, contacts[j], self.dt)
                if per_step or not tapes:
                    tapes.append(tape)
                j += 1
        return tapes

    def backward(self, q0, qd0, particle_f, params: dict, ckpt, grad_q, grad_qd, need_control: bool,
                 contact_peak=None):
        """Adjoints of the initial state, controls and parameters, given the output adjoints.

        ``contact_peak``: ``last_contact_peak`` of the forward pass being differentiated.

        Returns ``(grad_q0, grad_qd0, grad_particle_f or None, {name: grad})`` as torch tensors.
        """
        model = self.model
        self._refresh_graphs()
        saved = {name: wp.clone(getattr(model, name)) for name in params}
        try:
            return self._backward(q0, qd0, particle_f, params, ckpt, grad_q, grad_qd, need_control, contact_peak)
        finally:
            for name in params:  # also when the backward pass raised (e.g. NonFiniteError)
                wp.copy(getattr(model, name), saved[name])

    def _backward(self, q0, qd0, particle_f, params, ckpt, grad_q, grad_qd, need_control, contact_peak):
        model = self.model
        n, T, k, S = model.particle_count, self.frames, self.checkpoint_every, self.substeps
        dev = q0.device
        self._write_params(params)  # another forward may have changed them since
        for name in params:
            getattr(model, name).grad.zero_()
        states, _ = self._segment_buffers(contact_peak)
        f_w = None if particle_f is None else _wp(particle_f.contiguous())
        grad_f = torch.zeros_like(particle_f) if (particle_f is not None and need_control) else None
        grad_f_w = None if grad_f is None else _wp(grad_f)
        if f_w is None:
            self._seg_force.zero_()
        ckpt_w = _wp(ckpt.view(-1, n, 3))
        gq_w = None if grad_q is None else _wp(grad_q.contiguous())
        gqd_w = None if grad_qd is None else _wp(grad_qd.contiguous())
        carry_q, carry_qd = self._carry
        norms = np.zeros((T + 1, 2)) if self.record_grad_norms else None

        for s in reversed(range(self.segment_count)):
            f0, f1 = s * k, min(T, (s + 1) * k)
            steps = (f1 - f0) * S
            for st in states[: steps + 1]:
                st.zero_grad()  # and the solver's per-step buffers: their adjoints accumulate otherwise
            self._seg_force.grad.zero_()
            wp.copy(states[0].particle_q, ckpt_w[2 * s])
            wp.copy(states[0].particle_qd, ckpt_w[2 * s + 1])
            if f_w is not None:
                for frame in range(f0, f1):
                    wp.copy(self._seg_force[frame - f0], f_w[frame])
            # seed adjoints (the re-simulation writes values only, so seeding first is the same):
            # output adjoints at this segment's frames, the later segment's at its end
            for frame in range(f0, f1 + 1):
                st = states[(frame - f0) * S]
                if frame == f1 and f1 < T:
                    wp.copy(st.particle_q.grad, carry_q)
                    wp.copy(st.particle_qd.grad, carry_qd)
                    continue
                row = frame if self.output == "trajectory" else (0 if frame == T else None)
                if row is None:
                    continue
                if gq_w is not None:
                    wp.copy(st.particle_q.grad, gq_w[row])
                if gqd_w is not None:
                    wp.copy(st.particle_qd.grad, gqd_w[row])
            if norms is None and not self.check_finite and f1 - f0 == k:
                # a full-length segment: always the same kernels on the same buffers, so capturable
                self._run("segment", lambda f0=f0, f1=f1: self._record_segment(f0, f1)[0].backward())
            else:
                self._run_backward(self._record_segment(f0, f1), f0, f1, norms)
            wp.copy(carry_q, states[0].particle_q.grad)
            wp.copy(carry_qd, states[0].particle_qd.grad)
            if grad_f_w is not None:
                for frame in range(f0, f1):
                    wp.copy(grad_f_w[frame], self._seg_force.grad[frame - f0])

        if norms is not None:
            self.grad_norms = norms
        grads = {}
        for name, value in params.items():
            g = wp.to_torch(getattr(model, name).grad).clone()
            grads[name] = g.reshape(value.shape)
        grad_q0 = wp.to_torch(carry_q).clone().to(dev)
        grad_qd0 = wp.to_torch(carry_qd).clone().to(dev)
        return grad_q0, grad_qd0, grad_f, grads

    def _run_backward(self, tapes, f0, f1, norms) -> None:
        S = self.substeps
        if len(tapes) == 1 and norms is None and not self.check_finite:
            tapes[0].backward()
            return
        # One tape per step. Warp's adjoint of an array store consumes (zeroes) the stored
        # element's gradient, so a frame's adjoint is read just before the backward pass of the
        # step that wrote it, when every later step has added its part.
        for j in reversed(range(len(tapes))):
            if norms is not None and (j + 1) % S == 0:
                self._record_norm(norms, f0 + (j + 1) // S, self._seg_states[j + 1])
            if self.check_finite:
                self._backward_checked(tapes[j], f0 + j // S, j % S)
            else:
                tapes[j].backward()
        if norms is not None and f0 == 0:
            self._record_norm(norms, 0, self._seg_states[0])

    @staticmethod
    def _record_norm(norms, frame: int, state) -> None:
        norms[frame] = (np.linalg.norm(state.particle_q.grad.numpy()), np.linalg.norm(state.particle_qd.grad.numpy()))

    @staticmethod
    def _backward_checked(tape, frame: int, substep: int) -> None:
        """Run each recorded kernel's adjoint alone; raise at the first that writes a NaN/inf."""
        single = wp.Tape()
        for launch in reversed(tape.launches):
            single.launches = [launch]
            single.backward()
            if callable(launch):
                continue
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
