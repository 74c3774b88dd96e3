"""State (what changes every step) and Control (what a controller sets)."""

from __future__ import annotations

import warp as wp

from .schema import CONTROL_FIELDS, STATE_FIELDS
from .signed import Signed

# every array a State holds (what assign() copies and the tape guard watches)
STATE_ARRAYS = tuple(f.name for f in STATE_FIELDS)


class State(Signed):
    """Time-varying quantities of a model.

    Attributes:
        particle_q: particle positions [m], ``wp.array(dtype=wp.vec3)``.
        particle_qd: particle velocities [m/s], ``wp.array(dtype=wp.vec3)``.
        particle_f: total force [N] that acted on each particle during the step
            that *produced* this state (written by ``solver.step`` into
            ``state_out``; ``state_in`` is never written). Users apply external
            forces through :class:`Control`, not here.
        body_q: body poses in world, ``wp.array(dtype=wp.transform)`` (position [m],
            quaternion (x, y, z, w)).
        body_qd: body velocities, ``wp.array(dtype=wp.spatial_vector)``: linear velocity
            of the centre of mass [m/s] first, then angular velocity [rad/s], both in world.
        body_f: total wrench (force [N] at the centre of mass, then torque [N m]; world)
            that acted on each body during the step that produced this state, gravity
            excluded, as ``particle_f``. External wrenches go in :class:`Control`.
        joint_q, joint_qd: joint coordinates and their rates (layout per joint type in
            ``inertia.builder.bodies``), computed from ``body_q`` / ``body_qd``: by
            ``model.state()`` and as the last stage of every ``solver.step()``.

    step_buffers: the per-step buffers of the solver step that wrote this state
    (XPBD's iterates and multipliers, ...; declared by the solver's
    ``step_buffer_spec``), or None: the backward pass of that step reads them.
    substep_states: the intermediate States of that step when the solver split
    it into substeps (the SemiImplicitSolver beyond its stable step), each with
    its own step buffers; empty otherwise.

    Create states with :meth:`inertia.Model.state`; never share one State between
    two places of a recorded rollout (the tape needs every intermediate state).
    In a many-world model, :meth:`inertia.Model.reset_worlds` puts chosen worlds of a
    state back to the initial state and leaves the others untouched.
    """

    # the per-step buffers of the solver step that wrote this state (set by the solver; not a schema field)
    step_buffers = None
    substep_states = ()  # the intermediate States of a step split into substeps (set by the solver)

    def __init__(self):
        for name in STATE_ARRAYS:
            setattr(self, name, None)

    @property
    def particle_count(self) -> int:
        return 0 if self.particle_q is None else self.particle_q.shape[0]

    @property
    def body_count(self) -> int:
        return 0 if self.body_q is None else self.body_q.shape[0]

    def assign(self, other: "State") -> None:
        """Copy every array of ``other`` into this state (same model)."""
        for name in STATE_ARRAYS:
            src, dst = getattr(other, name), getattr(self, name)
            if src is not None and dst is not None:
                wp.copy(dst, src)

    def requires_grad(self) -> bool:
        return bool(self.particle_q is not None and self.particle_q.requires_grad)

    def zero_grad(self) -> None:
        """Zero the gradients of this state's arrays and of its per-step buffers (``step_buffers``)."""
        for name in STATE_ARRAYS:
            a = getattr(self, name)
            if a is not None and a.grad is not None:
                a.grad.zero_()
        if self.step_buffers is not None:
            self.step_buffers.zero_grad()
        for state in self.substep_states:
            state.zero_grad()


class Control(Signed):
    """Inputs a controller sets before each step.

    Attributes:
        particle_f: external force [N] per particle, ``wp.array(dtype=wp.vec3)``.
            Applied once in every step until changed; the solver never clears it.
        body_f: external wrench per body, ``wp.array(dtype=wp.spatial_vector)``: force [N]
            at the centre of mass, then torque [N m], both in world.
        joint_target_pos, joint_target_vel: drive targets per joint degree of freedom
            (``model.joint_dof_count`` entries, laid out as ``State.joint_qd``) [m or rad,
            m/s or rad/s]; a drive acts where ``model.joint_target_ke`` / ``_kd`` are > 0
            (revolute and prismatic joints).
        joint_f: effort per joint degree of freedom: force [N] along a prismatic axis,
            torque [N m] about a revolute axis.
    """

    def __init__(self):
        for f in CONTROL_FIELDS:
            setattr(self, f.name, None)

    def clear(self) -> None:
        """Set all external inputs and drive targets to zero."""
        for name in (f.name for f in CONTROL_FIELDS):
            a = getattr(self, name)
            if a is not None:
                a.zero_()
