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

from ..integrators import integrate_bodies as integrate_body_step
from ..integrators import integrate_particles as integrate_particle_step
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
from .solver import SolverBase, update_joint_coordinates
from .step_data import Buffer, StepBufferSpec, stage

# Per-step buffers: the counts the friction bound of shape-shape contacts splits each body's mass by
# (solvers/forces/body_contact.py). Integers: no gradient.
SEMI_IMPLICIT_BUFFERS = StepBufferSpec(
    Buffer("body_contact_counts", wp.int32, ("body",), "active shape-shape contacts per body this step", grad=False),
)


@stage("integrate", writes=lambda data: {"particle_q": data.state_out.particle_q,
                                         "particle_qd": data.state_out.particle_qd})
def integrate_particles(model, data) -> None:
    """Stage: symplectic Euler of the particles under ``state_out.particle_f`` and gravity, into ``state_out``."""
    out = data.state_out
    integrate_particle_step(model, data.state_in, out.particle_f, data.dt, out.particle_q, out.particle_qd)


@stage("integrate", writes=lambda data: {"body_q": data.state_out.body_q, "body_qd": data.state_out.body_qd})
def integrate_bodies(model, data) -> None:
    """Stage: symplectic Euler of the bodies under ``state_out.body_f`` and gravity, into ``state_out``."""
    out = data.state_out
    integrate_body_step(model, data.state_in, out.body_f, data.dt, out.body_q, out.body_qd)


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
    Per-step buffer (``state_out.step_buffers``): each body's count of active contacts.
    """

    step_buffer_spec = SEMI_IMPLICIT_BUFFERS

    def __init__(self, model, check_finite: bool = False):
        super().__init__(model, check_finite)
        for name in ("joint_attach_ke", "joint_attach_kd"):
            value = getattr(model, name, 0.0)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f"model.{name} must be a finite number >= 0, got {value!r}")

    def buffer_sizes(self, rigid_contact_max: int) -> dict:
        return {"body": self.model.body_count}

    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        model = self.model
        data = self.begin_step(state_in, state_out, control, contacts, dt)

        apply_control_forces(model, data)
        apply_control_wrenches(model, data)
        eval_spring_forces(model, data)
        eval_triangle_forces(model, data)
        eval_bending_forces(model, data)
        eval_tetrahedron_forces(model, data)
        eval_joint_forces(model, data)
        eval_body_contact_forces(model, data)
        eval_particle_shape_contact_forces(model, data)
        eval_particle_pair_contact_forces(model, data)
        integrate_particles(model, data)
        integrate_bodies(model, data)
        update_joint_coordinates(model, data)

        self.step_count += 1
        return state_out
