"""SemiImplicitSolver: explicit forces, then symplectic Euler.

One step reads as its stages: external forces and wrenches from Control, then
every internal force (springs, membranes, bending, tetrahedra, joints), then
contact forces between shapes on bodies (their springs), of particles against
shapes (two-way where a shape sits on a body) and between particles, then the
shape-shape contacts' damping and friction from the velocities all of that
predicts for the end of the step, then integration.
Forces accumulate in ``state_out.particle_f`` and wrenches in
``state_out.body_f``, so ``state_in`` is left untouched and each recorded step
has buffers of its own (no clearing between steps, nothing to alias).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import warp as wp

from .. import compile_ahead
from ..integrators import integrate_bodies, integrate_particles
from ..schema import STATE_CHECKPOINT, STATE_FIELDS
from ..diagnostics import StabilityWarning, warn
from ..stability import elastic_time_step, smallest, stable_time_steps
from .forces import (
    apply_controls,
    eval_bending_forces,
    eval_body_contact_forces,
    eval_body_contact_sweeps,
    eval_joint_forces,
    eval_particle_pair_contact_forces,
    eval_particle_shape_contact_forces,
    eval_spring_forces,
    eval_tetrahedron_forces,
    eval_triangle_forces,
)
from .solver import SolverBase, replayed, update_joint_coordinates
from .step_data import Buffer, StepBufferSpec, stage

# Steps above this fraction of the estimated stable step are warned about: the step at which test scenes
# blow up lies within 12 % below the estimate (tests/test_stability.py)
STABILITY_MARGIN = 0.85

# Per-step buffers of shape-shape friction (solvers/forces/body_contact.py): the counts each body's mass is
# split by (integers: no gradient), and the wrench of every other force of the step that its predicted
# velocities are taken from.
SEMI_IMPLICIT_BUFFERS = StepBufferSpec(
    Buffer("body_contact_counts", wp.int32, ("body",), "active shape-shape contacts per body this step", grad=False),
    Buffer("body_f_other", wp.spatial_vector, ("body",), "the step's wrench on each body before the sweeps [N, N m]"),
    Buffer("body_qd_pred", wp.spatial_vector, ("body",), "each body's (v, w) after the step without them"),
    Buffer("body_com_world", wp.vec3, ("body",), "each body's centre of mass in world [m]"),
    Buffer("body_inv_inertia_world", wp.mat33, ("body",), "each body's world inverse inertia [1/(kg m^2)]"),
    Buffer("contact_point", wp.vec3, ("rigid_contact",), "each active contact's point of action [m]"),
    Buffer("contact_normal", wp.vec3, ("rigid_contact",), "its normal"),
    Buffer("contact_law", wp.vec3, ("rigid_contact",), "its (spring force [N], damping [N s/m], mu); spring -1: "
           "inactive"),
    Buffer("contact_response", wp.vec2, ("rigid_contact",), "its Jacobi denominators: the pair's split inverse "
           "mass [1/kg] along the normal and (bound) in the contact plane"),
    Buffer("contact_forces", wp.vec4, ("contact_iterate", "rigid_contact"),
           "each contact's (normal damping force, friction force) [N] after each sweep (row 0: zero)"),
    Buffer("body_contact_wrench", wp.spatial_vector, ("contact_iterate", "body"),
           "each body's summed damping and friction wrench after each sweep (row 0: zero)"),
)


@stage("integrate", writes=lambda data: {name: getattr(data.state_out, name) for name in STATE_CHECKPOINT})
def integrate(model, data) -> None:
    """Stage: symplectic Euler of particles and bodies under ``state_out.particle_f`` / ``body_f`` and gravity."""
    state, out, dt = data.state_in, data.state_out, data.dt
    integrate_particles(model, state, out.particle_f, dt, out.particle_q, out.particle_qd)
    integrate_bodies(model, state, out.body_f, dt, out.body_q, out.body_qd)


def elastic_forces(model, x):
    """Internal forces [N] (springs, membranes, bending, tets) at particle positions ``x`` (n, 3), velocities
    zero: the stages' own kernels, on scratch states."""
    s_in, s_out = model.state(requires_grad=False), model.state(requires_grad=False)
    s_in.particle_q.assign(x.astype("float32"))
    s_in.particle_qd.zero_()
    s_out.particle_f.zero_()
    data = SimpleNamespace(state_in=s_in, state_out=s_out, dt=1.0, check_finite=False, step_index=0)
    for stage_fn in (eval_spring_forces, eval_triangle_forces, eval_bending_forces, eval_tetrahedron_forces):
        stage_fn(model, data)
    return s_out.particle_f.numpy().astype("float64")


def explicit_stable_steps(model) -> dict:
    """``{kind: (dt_max [s], index)}``: the largest stable step of every explicit force kind (host NumPy, once;
    :mod:`inertia.stability`), the particles' elastic elements together by power iteration on their force
    kernels (exact at rest)."""
    steps = {k: v for k, v in stable_time_steps(model).items()
             if k not in ("springs", "triangles", "bending", "tetrahedra")}
    if model.particle_count:
        elastic, particle = elastic_time_step(model, lambda x: elastic_forces(model, x))
        if math.isfinite(elastic):
            steps["elastic forces"] = (elastic, particle)
    return steps


def substeps_for(stable_steps: dict, dt: float, max_substeps: int) -> int:
    """The fewest equal substeps (at most ``max_substeps``) that bring a step of ``dt`` [s] within
    ``STABILITY_MARGIN`` times the smallest of ``stable_steps`` (1: ``dt`` is within it, or nothing bounds it)."""
    worst = smallest(stable_steps)
    if worst is None or dt <= STABILITY_MARGIN * worst[2]:
        return 1
    return max(1, min(int(max_substeps), math.ceil(dt / (STABILITY_MARGIN * worst[2]))))


def warn_beyond_stable_step(stable_steps: dict, dt: float, substeps: int = 1) -> None:
    """A :class:`inertia.StabilityWarning` if ``dt`` [s] is beyond ``STABILITY_MARGIN`` times the smallest of
    ``stable_steps`` (from :func:`explicit_stable_steps`), naming its kind and element; ``substeps``: how many
    substeps the solver splits such a step into (1: none, the step runs as given and likely blows up)."""
    worst = smallest(stable_steps)
    if worst is None or dt <= STABILITY_MARGIN * worst[2]:
        return
    kind, index, limit = worst
    element = (f"particle {index}" if kind in ("particle contact", "elastic forces") else
               f"joint {index}" if kind.startswith("joint") else f"element {index}")
    head = (f"dt = {dt:.3g} s is beyond the stable step of explicit integration for {kind} (about {limit:.3g} s, "
            f"set by {element}; inertia.stability)")
    if substeps > 1 and dt / substeps <= STABILITY_MARGIN * limit:
        warn(
            f"{head}: each step runs as {substeps} substeps of {dt / substeps:.3g} s, so it stays stable at "
            f"{substeps} times the cost (max_substeps). For the cost of one step: heavier or softer elements, or the "
            "XPBDSolver, which is stable at any step.", StabilityWarning)
        return
    split = f" even in {substeps} substeps (max_substeps)" if substeps > 1 else ""
    warn(
        f"{head}: the simulation will likely blow up{split}. Use dt <= {STABILITY_MARGIN * limit:.3g} s (more "
        "substeps), heavier or softer elements, or the XPBDSolver, which is stable at any step.",
        StabilityWarning)


class SemiImplicitSolver(SolverBase):
    """Semi-implicit (symplectic) Euler with explicit force evaluation.

    Cheap per step and fully differentiable through ``wp.Tape``, but explicit:
    stiff materials and contacts need small steps (the grid defaults are
    stable at dt = 1/2400 s, i.e. 40 substeps of a 60 Hz frame).

    Args:
        model: the :class:`inertia.Model`.
        check_finite: raise :class:`inertia.NonFiniteError` naming the first
            stage and step that produced a NaN/inf (debugging; slow).
        contact_iterations: Jacobi sweeps of the shape-shape contacts' damping
            and friction per step (default 6: a 64-box pile rests for 12 s, each
            box within ~2 mm; 1 is the cheapest, and lets a body under a
            tangential load creep at ~1.5 g sin(theta) dt).
        contact_relaxation: how far each sweep but the last moves toward its
            target, in (0, 2) (default 1.8: over-relaxed, for the slow modes of
            bodies with many contacts).
        max_substeps: a step ``dt`` beyond the estimated stable step
            (``stable_dt``, :mod:`inertia.stability`) runs as the fewest equal
            substeps that are within it, at most this many (default 64), and is
            warned about once (:class:`inertia.StabilityWarning`): a stiff or
            light element costs time instead of blowing up. 1: every step runs
            as given (an unstable one is warned about and likely blows up).
            Each substep writes an intermediate State kept on ``state_out``
            (``state_out.substep_states``) so a recorded step differentiates
            through all of them.

    Rigid bodies: joints are stiff springs scaled by each joint's effective mass
    (``model.joint_attach_ke`` [1/s^2], ``joint_attach_kd`` [1/s]; see
    :mod:`inertia.solvers.forces.joints`), contacts are penalty springs scaled by
    each contact's effective mass, with damping and static / Coulomb friction solved
    for the end of the step (:mod:`inertia.solvers.forces.body_contact`).
    Per-step buffers (``state_out.step_buffers``): each body's count of active
    contacts, the contacts' cached geometry and each sweep's forces.
    """

    step_buffer_spec = SEMI_IMPLICIT_BUFFERS
    # joint damping, Coulomb friction and effort limits act on the free dof (solvers/forces/joints.py)
    ignores_joint_fields = ("joint_armature", "joint_velocity_limit")

    def __init__(self, model, check_finite: bool = False, contact_iterations: int = 6,
                 contact_relaxation: float = 1.8, max_substeps: int = 64):
        super().__init__(model, check_finite)
        if isinstance(contact_iterations, bool) or not isinstance(contact_iterations, int) or contact_iterations < 1:
            raise ValueError(f"contact_iterations must be an integer >= 1, got {contact_iterations!r}")
        if (not isinstance(contact_relaxation, (int, float)) or isinstance(contact_relaxation, bool)
                or not 0.0 < contact_relaxation < 2.0):
            raise ValueError(f"contact_relaxation must be a number in (0, 2), got {contact_relaxation!r}")
        if isinstance(max_substeps, bool) or not isinstance(max_substeps, int) or max_substeps < 1:
            raise ValueError(f"max_substeps must be an integer >= 1, got {max_substeps!r}")
        self.contact_iterations = contact_iterations
        self.max_substeps = max_substeps
        self.contact_relaxation = float(contact_relaxation)
        for name in ("joint_attach_ke", "joint_attach_kd"):
            value = getattr(model, name, 0.0)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0.0):
                raise ValueError(f"model.{name} must be a finite number >= 0, got {value!r}")
        self.stable_steps, self._checked_dt = {}, None  # (no substeps in the dry run of compile_ahead)
        compile_ahead.for_solver(self, SemiImplicitSolver)  # before the estimate below launches the element forces
        self.stable_steps = explicit_stable_steps(model)

    @property
    def stable_dt(self) -> float:
        """The largest time step [s] at which every force element is estimated to be stable (inf: any); steps
        above ``STABILITY_MARGIN`` times it are warned about (the estimate can exceed the real limit by ~12 %)."""
        worst = smallest(self.stable_steps)
        return math.inf if worst is None else worst[2]

    def substeps(self, dt: float) -> int:
        """How many equal substeps a step of ``dt`` [s] runs as (1 within the stable step; ``max_substeps``)."""
        return substeps_for(self.stable_steps, dt, self.max_substeps)

    def _check_time_step(self, dt: float, substeps: int) -> None:
        """Warn once per step size beyond the estimated stable step (Python comparisons: capturable)."""
        self._checked_dt = dt
        warn_beyond_stable_step(self.stable_steps, dt, substeps=substeps)

    def buffer_sizes(self, rigid_contact_max: int) -> dict:
        m = self.model
        if m.body_count == 0:  # no shape-shape contact: no rows at all (a particle scene keeps nothing per step)
            return {"body": 0, "rigid_contact": 0, "contact_iterate": 0}
        return {"body": m.body_count, "rigid_contact": max(rigid_contact_max, 1),
                "contact_iterate": self.contact_iterations + 1}

    def state_buffer_bytes(self, requires_grad: bool, rigid_contact_max: int = 0, dt: float | None = None) -> int:
        """Bytes of the per-step buffers every output state of a step carries; with ``dt`` [s], a step split
        into n substeps also carries n - 1 intermediate States and their buffers."""
        one = super().state_buffer_bytes(requires_grad, rigid_contact_max)
        n = 1 if dt is None else self.substeps(dt)
        if n == 1:
            return one
        m = self.model
        state = sum(wp.types.type_size_in_bytes(f.dtype) * m.count(f.entity) for f in STATE_FIELDS)
        return n * one + (n - 1) * state * (2 if requires_grad else 1)

    def substep_states(self, state_out, count: int) -> list:
        """The ``count`` intermediate States of a split step that writes ``state_out`` (allocated once per
        output state and reused: a recorded rollout, which writes a new State per step, keeps each step's)."""
        requires_grad = state_out.requires_grad()
        states = state_out.substep_states
        if len(states) != count or any(s.requires_grad() != requires_grad for s in states):
            states = state_out.substep_states = [self.model.state(requires_grad=requires_grad)
                                                 for _ in range(count)]
        return states

    @replayed
    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``.

        A ``dt`` beyond the stable step runs as substeps (``max_substeps``), each from the same contacts and
        controls."""
        self._validate_dt(dt)  # before it is compared
        n = self.substeps(dt)  # every call: max_substeps or stable_steps may have been edited
        if dt != self._checked_dt:
            self._check_time_step(dt, n)
        if n == 1:
            self._advance(state_in, state_out, control, contacts, dt)
        else:
            states = [state_in, *self.substep_states(state_out, n - 1), state_out]
            for k in range(n):
                self._advance(states[k], states[k + 1], control, contacts, dt / n)
        self.step_count += 1
        return state_out

    def _advance(self, state_in, state_out, control, contacts, dt: float) -> None:
        """One explicit step of ``dt`` [s]: the stages in order."""
        model = self.model
        data = self.begin_step(state_in, state_out, control, contacts, dt)  # validates its inputs

        apply_controls(model, data)
        eval_spring_forces(model, data)
        eval_triangle_forces(model, data)
        eval_bending_forces(model, data)
        eval_tetrahedron_forces(model, data)
        eval_joint_forces(model, data)
        eval_body_contact_forces(model, data)
        eval_particle_shape_contact_forces(model, data)
        eval_particle_pair_contact_forces(model, data)
        eval_body_contact_sweeps(model, data)
        integrate(model, data)
        update_joint_coordinates(model, data)
