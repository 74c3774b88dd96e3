"""SemiImplicitSolver: explicit forces, then symplectic Euler.

One step reads as its stages: external forces from Control, then every
internal force (springs, membranes, bending, tetrahedra), then contact forces
against shapes and between particles, then integration. Forces accumulate in
``state_out.particle_f``, so ``state_in`` is left untouched and each recorded
step has buffers of its own (no clearing between steps, nothing to alias).
"""

from __future__ import annotations

from ..integrators import integrate_bodies, integrate_particles
from ..kinematics import eval_ik
from .forces import (
    apply_control_forces,
    apply_control_wrenches,
    eval_bending_forces,
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
    """

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
        eval_particle_shape_contact_forces(model, state_in, contacts, dt, f)
        self._check("particle-shape contact", particle_f=f)
        eval_particle_pair_contact_forces(model, state_in, contacts, dt, f)
        self._check("particle-particle contact", particle_f=f)
        integrate_particles(model, state_in, f, dt, state_out)
        integrate_bodies(model, state_in, body_f, dt, state_out)
        self._check("integrate", particle_q=state_out.particle_q, particle_qd=state_out.particle_qd,
                    body_q=state_out.body_q, body_qd=state_out.body_qd)
        eval_ik(model, state_out)

        self.step_count += 1
        return state_out
