"""SemiImplicitSolver: explicit forces, then symplectic Euler.

One step reads as its stages: external forces and wrenches from Control, then
every internal force (springs, membranes, bending, tetrahedra, joints), then
contact forces between shapes on bodies, of particles against shapes (two-way
where a shape sits on a body) and between particles, then integration.
Forces accumulate in ``state_out.particle_f`` and wrenches in
``state_out.body_f``, so ``state_in`` is left untouched and each recorded step
has buffers of its own (no clearing between steps, nothing to alias).
"""

from __future__ import annotations

import math

import warp as wp

from ..integrators import integrate_bodies, integrate_particles
from ..kinematics import eval_ik
from .forces import (
    apply_control_forces,
    apply_control_wrenches,
    eval_bending_forces,
    eval_body_contact_forces,
    eval_joint_forces,
    eval_particle_pair_contact_forces,
    eval_particle_shape_contact_forces,
    eval_spring_forces,
    eval_tetrahedron_forces,
    eval_triangle_forces,
)
from .solver import SolverBase


class SemiImplicitSolver(SolverBase):
    """Semi-implicit (symplectic) Euler with explicit force evaluation.

    Cheap per step and fully differentiable through ``wp.Tape``, but explicit:
    stiff materials and contacts need small steps (the grid defaults are
    stable at dt = 1/2400 s, i.e. 40 substeps of a 60 Hz frame).

    Args:
        model: the :class:`inertia.Model`.
        check_finite: raise :class:`inertia.NonFiniteError` naming the first
            stage and step that produced a NaN/inf (debugging; slow).

    Rigid bodies: joints are stiff springs scaled by each joint's effective mass
    (``model.joint_attach_ke`` [1/s^2], ``joint_attach_kd`` [1/s]; see
    :mod:`inertia.solvers.forces.joints`), contacts are penalty springs with
    smoothed Coulomb friction (:mod:`inertia.solvers.forces.body_contact`).
    """

    def __init__(self, model, check_finite: bool = False):
        super().__init__(model, check_finite)
        for name in ("joint_attach_ke", "joint_attach_kd"):
            value = getattr(model, name, 0.0)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f"model.{name} must be a finite number >= 0, got {value!r}")
        # drive inputs when the step gets no Control (allocated once: step() allocates nothing)
        self._zero_dofs = wp.zeros(max(model.joint_dof_count, 1), dtype=float, device=model.device)

    def prepare_state(self, state) -> None:
        """Allocate ``state``'s per-step buffer now instead of at its first step as ``state_out``.

        The buffer: each body's count of active contacts (the mass split of the friction
        bound, :mod:`inertia.solvers.forces.body_contact`); models without bodies have none.
        """
        self._contact_counts(state)

    def _contact_counts(self, state):
        if self.model.body_count == 0:
            return None
        counts = getattr(state, "_body_contact_counts", None)
        if counts is None or counts.shape[0] != self.model.body_count:
            counts = wp.zeros(self.model.body_count, dtype=wp.int32, device=self.model.device)
            state._body_contact_counts = counts
        return counts

    def _joint_inputs(self, control):
        """(target_pos, target_vel, effort) per joint dof: the Control's arrays, zeros where it has none."""
        if control is None:
            return self._zero_dofs, self._zero_dofs, self._zero_dofs
        return tuple(a if a is not None else self._zero_dofs
                     for a in (control.joint_target_pos, control.joint_target_vel, control.joint_f))

    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        self._validate(state_in, state_out, control, contacts, dt)
        model = self.model
        f = state_out.particle_f
        body_f = state_out.body_f
        if self.check_finite:
            self._check("input", particle_q=state_in.particle_q, particle_qd=state_in.particle_qd,
                        body_q=state_in.body_q, body_qd=state_in.body_qd)

        apply_control_forces(model, control, f)
        apply_control_wrenches(model, control, body_f)
        self._check("control forces", particle_f=f, body_f=body_f)
        eval_spring_forces(model, state_in, f)
        self._check("springs", particle_f=f)
        eval_triangle_forces(model, state_in, f)
        self._check("triangles", particle_f=f)
        eval_bending_forces(model, state_in, f)
        self._check("bending", particle_f=f)
        eval_tetrahedron_forces(model, state_in, f)
        self._check("tetrahedra", particle_f=f)
        eval_joint_forces(model, state_in, *self._joint_inputs(control), body_f)
        self._check("joints", body_f=body_f)
        eval_body_contact_forces(model, state_in, contacts, dt, body_f, self._contact_counts(state_out))
        self._check("shape-shape contact", body_f=body_f)
        eval_particle_shape_contact_forces(model, state_in, contacts, dt, f, body_f)
        self._check("particle-shape contact", particle_f=f, body_f=body_f)
        eval_particle_pair_contact_forces(model, state_in, contacts, dt, f)
        self._check("particle-particle contact", particle_f=f)
        integrate_particles(model, state_in, f, dt, state_out)
        integrate_bodies(model, state_in, body_f, dt, state_out)
        self._check("integrate", particle_q=state_out.particle_q, particle_qd=state_out.particle_qd,
                    body_q=state_out.body_q, body_qd=state_out.body_qd)
        eval_ik(model, state_out)

        self.step_count += 1
        return state_out
