"""Particles in a FeatherstoneSolver step: the SemiImplicitSolver's particle stages, coupled to the bodies.

A robot that holds cloth, pokes a soft body or sweeps granular matter steps its particles exactly as the
SemiImplicitSolver does: the Control's particle forces, springs, membranes, bending, tetrahedra,
particle-shape and particle-particle contact (the same stage functions, :mod:`inertia.solvers.forces`),
then symplectic Euler of the particles (``inertia.integrators.integrate_particles``); the same
model and step give the same particle trajectory bit for bit where no body is touched.

Coupling, explicit and first order like the particles' own step: the reaction of every particle-shape
contact on a shape's body is added to the Control's body wrench (``body_f_ext`` of the step's data, on
the output state), and the articulation's dynamics take that sum as the external wrench of the step. Both
sides see the same contact force from the same input state, so momentum passes between particles and
bodies exactly (tested on a free body in zero gravity). The mass-scaled contact gains take a body's own
mass and inertia as its side of the effective mass (its articulated inertia is larger), so a contact on a
link of a chain is at most as stiff as the gains say and never stiffer: stable where the particles' own
contact with a static shape is (``inertia.solvers.forces.contact``).

The particles' forces are explicit, so their step is bounded as in the SemiImplicitSolver: the solver
estimates it at construction (``solver.stable_steps``) and warns (:class:`inertia.StabilityWarning`) before a
step beyond it, as that solver does.

Differentiable like the rest of the step: every array written here belongs to the output state or its
step data, and ``state_in`` is only read.
"""

from __future__ import annotations

from types import SimpleNamespace

from ...collision.contact_sink import particle_pairs
from ...collision.particle_shape import soft_contacts
from ...collision.sdf import shape_geometry
from ...integrators import integrate_particles
from ..forces import (
    apply_controls,
    eval_bending_forces,
    eval_particle_pair_contact_forces,
    eval_particle_shape_contact_forces,
    eval_spring_forces,
    eval_tetrahedron_forces,
    eval_triangle_forces,
)
from ..forces.contact import penalty_law
from ..semi_implicit import explicit_stable_steps, warn_beyond_stable_step
from ..step_data import StepData as ForceStageData

# the explicit bounds that concern particles (the joints' are implicit in this solver)
PARTICLE_BOUNDS = ("particle contact", "elastic forces")


def particle_stable_steps(model) -> dict:
    """The SemiImplicitSolver's stable-step estimate of the particles' forces (:mod:`inertia.stability`)."""
    return {k: v for k, v in explicit_stable_steps(model).items() if k in PARTICLE_BOUNDS}


def check_particle_time_step(solver, dt: float) -> None:
    """Warn once per step size beyond the particles' stable step (a Python comparison: capturable)."""
    solver._checked_dt = dt
    warn_beyond_stable_step(solver.stable_steps, dt)


def step_particles(solver, state_in, state_out, control, contacts, dt: float, body_f_ext) -> None:
    """Advance the particles of ``state_in`` into ``state_out`` by ``dt`` [s]; write the Control's body wrench
    plus the particles' contact reactions into ``body_f_ext`` (None: the model has no bodies)."""
    model = solver.model
    # the force stages accumulate into data.state_out's particle_f and body_f: the body side goes to the
    # step's external wrench, which the articulation reads, instead of the reported state_out.body_f
    out = SimpleNamespace(particle_f=state_out.particle_f,
                          body_f=body_f_ext if body_f_ext is not None else state_out.body_f)
    with_contacts = contacts is not None
    data = ForceStageData(state_in, out, control, contacts, dt, None, solver, shape_geometry(model), None,
                          penalty_law(model), None, soft_contacts(contacts) if with_contacts else None,
                          particle_pairs(contacts) if with_contacts else None)
    apply_controls(model, data)
    eval_spring_forces(model, data)
    eval_triangle_forces(model, data)
    eval_bending_forces(model, data)
    eval_tetrahedron_forces(model, data)
    eval_particle_shape_contact_forces(model, data)
    eval_particle_pair_contact_forces(model, data)
    integrate_particles(model, state_in, state_out.particle_f, dt, state_out.particle_q, state_out.particle_qd)
    solver._check("particles", particle_q=state_out.particle_q, particle_qd=state_out.particle_qd)
