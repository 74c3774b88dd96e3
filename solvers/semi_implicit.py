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
import warnings
from types import SimpleNamespace

import warp as wp

from ..integrators import integrate_bodies, integrate_particles
from ..schema import STATE_CHECKPOINT
from ..diagnostics import StabilityWarning
from ..stability import elastic_time_step, smallest, stable_time_steps
from .forces import (
    apply_controls,
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
# Steps above this fraction of the estimated stable step are warned about: the step at which test scenes
# blow up lies within 12 % below the estimate (tests/test_stability.py)
STABILITY_MARGIN = 0.85

SEMI_IMPLICIT_BUFFERS = StepBufferSpec(
    Buffer("body_contact_counts", wp.int32, ("body",), "active shape-shape contacts per body this step", grad=False),
)


@stage("integrate", writes=lambda data: {name: getattr(data.state_out, name) for name in STATE_CHECKPOINT})
def integrate(model, data) -> None:
    """Stage: symplectic Euler of particles and bodies under ``state_out.particle_f`` / ``body_f`` and gravity."""
    state, out, dt = data.state_in, data.state_out, data.dt
    integrate_particles(model, state, out.particle_f, dt, out.particle_q, out.particle_qd)
    integrate_bodies(model, state, out.body_f, dt, out.body_q, out.body_qd)


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
    # joint damping, Coulomb friction and effort limits act on the free dof (solvers/forces/joints.py)
    ignores_joint_fields = ("joint_armature", "joint_velocity_limit")

    def __init__(self, model, check_finite: bool = False):
        super().__init__(model, check_finite)
        for name in ("joint_attach_ke", "joint_attach_kd"):
            value = getattr(model, name, 0.0)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f"model.{name} must be a finite number >= 0, got {value!r}")
        # the largest stable step of every element kind (host NumPy, once; inertia.stability), the particles'
        # elastic elements together by power iteration on their force kernels (exact at rest)
        self.stable_steps = {k: v for k, v in stable_time_steps(model).items()
                             if k not in ("springs", "triangles", "bending", "tetrahedra")}
        elastic, particle = elastic_time_step(model, self._elastic_forces) if model.particle_count else (math.inf, -1)
        if math.isfinite(elastic):
            self.stable_steps["elastic forces"] = (elastic, particle)
        self._checked_dt = None

    def _elastic_forces(self, x):
        """Internal forces [N] (springs, membranes, bending, tets) at positions ``x`` (n, 3), velocities zero."""
        model = self.model
        s_in, s_out = model.state(requires_grad=False), model.state(requires_grad=False)
        s_in.particle_q.assign(x.astype("float32"))
        s_in.particle_qd.zero_()
        s_out.particle_f.zero_()
        data = SimpleNamespace(state_in=s_in, state_out=s_out, dt=1.0, check_finite=False, step_index=0)
        for stage_fn in (eval_spring_forces, eval_triangle_forces, eval_bending_forces, eval_tetrahedron_forces):
            stage_fn(model, data)
        return s_out.particle_f.numpy().astype("float64")

    @property
    def stable_dt(self) -> float:
        """The largest time step [s] at which every force element is estimated to be stable (inf: any); steps
        above ``STABILITY_MARGIN`` times it are warned about (the estimate can exceed the real limit by ~12 %)."""
        worst = smallest(self.stable_steps)
        return math.inf if worst is None else worst[2]

    def _check_time_step(self, dt: float) -> None:
        """Warn once per step size beyond the estimated stable step (a Python comparison: capturable)."""
        self._checked_dt = dt
        worst = smallest(self.stable_steps)
        if worst is None or dt <= STABILITY_MARGIN * worst[2]:
            return
        kind, index, limit = worst
        element = (f"particle {index}" if kind in ("particle contact", "elastic forces") else
                   f"joint {index}" if kind.startswith("joint") else f"element {index}")
        warnings.warn(
            f"dt = {dt:.3g} s is beyond the stable step of explicit integration for {kind} (about {limit:.3g} s, "
            f"set by {element}; inertia.stability): the simulation will likely blow up. Use dt <= "
            f"{STABILITY_MARGIN * limit:.3g} s (more substeps), heavier or softer elements, or the XPBDSolver, "
            "which is stable at any step.", StabilityWarning, stacklevel=3)

    def buffer_sizes(self, rigid_contact_max: int) -> dict:
        return {"body": self.model.body_count}

    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        model = self.model
        data = self.begin_step(state_in, state_out, control, contacts, dt)  # validates dt first
        if dt != self._checked_dt:
            self._check_time_step(dt)

        apply_controls(model, data)
        eval_spring_forces(model, data)
        eval_triangle_forces(model, data)
        eval_bending_forces(model, data)
        eval_tetrahedron_forces(model, data)
        eval_joint_forces(model, data)
        eval_body_contact_forces(model, data)
        eval_particle_shape_contact_forces(model, data)
        eval_particle_pair_contact_forces(model, data)
        integrate(model, data)
        update_joint_coordinates(model, data)

        self.step_count += 1
        return state_out
