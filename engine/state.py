"""State (what changes every step) and Control (what a controller sets)."""

from __future__ import annotations

import warp as wp


class State:
    """Time-varying quantities of a model.

    Attributes:
        particle_q: particle positions [m], ``wp.array(dtype=wp.vec3)``.
        particle_qd: particle velocities [m/s], ``wp.array(dtype=wp.vec3)``.
        particle_f: total force [N] that acted on each particle during the step
            that *produced* this state (written by ``solver.step`` into
            ``state_out``; ``state_in`` is never written). Users apply external
            forces through :class:`Control`, not here.

    Create states with :meth:`inertia.Model.state`; never share one State between
    two places of a recorded rollout (the tape needs every intermediate state).
    """

    def __init__(self):
        self.particle_q: wp.array | None = None
        self.particle_qd: wp.array | None = None
        self.particle_f: wp.array | None = None

    @property
    def particle_count(self) -> int:
        return 0 if self.particle_q is None else self.particle_q.shape[0]

    def assign(self, other: "State") -> None:
        """Copy every array of ``other`` into this state (same model)."""
        for name in ("particle_q", "particle_qd", "particle_f"):
            src, dst = getattr(other, name), getattr(self, name)
            if src is not None and dst is not None:
                wp.copy(dst, src)

    def requires_grad(self) -> bool:
        return bool(self.particle_q is not None and self.particle_q.requires_grad)

    def zero_grad(self) -> None:
        """Zero the gradients of this state's arrays, and of any per-step buffers a solver keeps on it."""
        for name in ("particle_q", "particle_qd", "particle_f"):
            a = getattr(self, name)
            if a is not None and a.grad is not None:
                a.grad.zero_()
        for buffers in self.__dict__.values():
            if hasattr(buffers, "zero_grad") and buffers is not self:
                buffers.zero_grad()


class Control:
    """Inputs a controller sets before each step.

    Attributes:
        particle_f: external force [N] per particle, ``wp.array(dtype=wp.vec3)``.
            Applied once in every step until changed; the solver never clears it.
    """

    def __init__(self):
        self.particle_f: wp.array | None = None

    def clear(self) -> None:
        """Set all external inputs to zero."""
        if self.particle_f is not None:
            self.particle_f.zero_()
