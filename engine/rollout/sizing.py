"""How much memory a rollout's backward pass holds, and the checkpoint length that minimises it.

A mixin of :class:`inertia.Rollout` (it reads the rollout's model, solver,
layout, frames and contact capacities): the estimate counts checkpoints, one
recorded segment (states with gradients, the solver's per-step buffers, the
per-step contact lists) and the outputs.
"""

from __future__ import annotations

import numpy as np


class RolloutSizing:
    """``memory_estimate`` and the choice of ``checkpoint_every`` (default, or within ``memory_budget``)."""

    def _contact_bytes(self) -> int:
        # after a backward pass the per-step lists have the size the forward pass needed
        c = self._fwd_contacts
        soft, pairs, rpairs, rcontacts = getattr(self, "_seg_caps", (
            c.soft_contact_max, c.particle_pair_max, c.rigid_pair_max, c.rigid_contact_max))
        particle = 8 * max(1, soft) + 8 * max(1, pairs) + 8 + 8
        # shape-shape: pairs (vec2i), then per contact two indices, a point, a thickness and a normal
        rigid = 8 * max(1, rpairs) + 36 * max(1, rcontacts) + 8 if self.model.body_count else 0
        return particle + rigid

    def memory_estimate(self, checkpoint_every: int | None = None) -> dict:
        """Bytes held for the backward pass with segments of ``checkpoint_every`` frames.

        ``checkpoints``: saved states per segment; ``segment``: the states (with
        gradients), the solver's per-step buffers (XPBD's iterates) and the contact
        lists of one recorded segment (at the forward pass's capacities until a
        backward pass has sized them to the contacts found); ``trajectory``: the
        outputs. Not counted: tape bookkeeping (Python objects) and the particle
        cell list (8 bytes per bucket, ``grid_dim^3`` of them, and 64 bytes per particle; shared by all steps).
        """
        k = self.checkpoint_every if checkpoint_every is None else int(checkpoint_every)
        row = 4 * self.layout.state_size
        seg_steps = k * self.substeps
        ckpt = -(-self.frames // k) * row
        solver_bytes = getattr(self.solver, "state_buffer_bytes", None)
        solver_part = 0
        dt = self.dt  # a step beyond the stable one may run as substeps, each with its own State
        if solver_bytes is not None and self.model.body_count:  # XPBD keeps multipliers per rigid contact
            c = self._fwd_contacts
            solver_part = solver_bytes(True, rigid_contact_max=getattr(self, "_seg_caps", (0, 0, 0,
                                                                                          c.rigid_contact_max))[3],
                                       dt=dt)
        elif solver_bytes is not None:
            solver_part = solver_bytes(True, dt=dt)
        per_step = self._contact_bytes() + solver_part
        seg = (seg_steps + 1) * self.layout.state_bytes(self.model) * 2 + seg_steps * per_step
        traj = (self.frames + 1 if self.output == "trajectory" else 1) * row
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
