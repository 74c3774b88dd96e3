"""XPBDSolver: extended position-based dynamics (Macklin, Müller & Chentanez 2016), differentiable.

One step reads as its stages: take the external forces, wrenches and joint
efforts from Control, predict particles and bodies, then run ``iterations``
Jacobi iterations of every constraint (distance constraints for springs,
membrane constraints for triangles, dihedral constraints for bending edges,
neo-Hookean constraints for tetrahedra, contacts against shapes (two-way for
shapes on bodies) and between particles, contacts between shapes, joints) and
apply their corrections, then recover velocities from the positions, give
the rigid contacts restitution and dynamic friction, and update the joint
coordinates. Multipliers start at zero every step. Rigid bodies follow Müller
et al. 2020 ("Detailed Rigid Body Simulation with Extended Position Based
Dynamics"), with Jacobi iterations and mass splitting instead of their
Gauss-Seidel sweep (``constraints/body_frames.py``, ``jacobi.py``, ``rigid_contacts.py``,
``joints.py``).

Why Jacobi: every constraint of an iteration reads the same iterate and
writes into that iteration's correction buffer, so an iteration is one kernel
per constraint type (no colouring pass) and each iterate lives in an array of
its own: ``wp.Tape`` keeps them all and differentiates the whole solve. The
iterates are step-local (displacements since the step began; see the class
docstring and ``integrators/xpbd.py``). Those
per-iteration buffers (iterates, corrections, multipliers; declared once in
``XPBD_BUFFERS``) belong to the *output* state of the step
(``state_out.step_buffers``), allocated the first time a state is written (or
up front with :meth:`XPBDSolver.prepare_state`) and reused from then on, so
``step()`` allocates nothing in a steady loop and a recorded rollout, which
uses a new state per step, holds exactly the buffers its backward pass needs.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np
import warp as wp

from .. import compile_ahead
from ..diagnostics import warn
from ..integrators import predict_bodies, predict_positions, update_body_velocities, update_velocities
from .constraints import (
    apply_body_corrections,
    apply_corrections,
    apply_joint_efforts,
    clear_corrections,
    count_body_constraints,
    eval_body_frames,
    jacobi_scales,
    joint_rows_per_body,
    solve_bending_constraints,
    solve_body_contacts,
    solve_contact_velocities,
    solve_distance_constraints,
    solve_joints,
    solve_particle_contacts,
    solve_shape_contacts,
    solve_tet_constraints,
    solve_triangle_constraints,
)
from .constraints.joints import vec8 as joint_multipliers
from .constraints.restitution import contact_velocity_row
from .forces import apply_controls
from .solver import SolverBase, replayed, update_joint_coordinates
from .step_data import Buffer, StepBufferSpec, stage

# The per-step buffers. Dimensions: "iterate" (K + 1: the prediction and every iteration's result),
# "iteration" (K), "velocity_iteration" (of the restitution pass), and the entities; every entity size
# is at least 1, so a model without bodies (or springs, ...) runs the same stage list (those stages
# return at once).
XPBD_BUFFERS = StepBufferSpec(
    # particles
    Buffer("dx", wp.vec3, ("iterate", "particle"),
           "displacement iterates dx_0..dx_K [m]: x_k = x_start + dx_k (dx_0: the prediction)"),
    Buffer("delta", wp.vec3, ("iteration", "particle"), "each iteration's summed corrections [m]"),
    Buffer("particle_qd_pred", wp.vec3, ("particle",), "the prediction's velocity [m/s] (not read again)"),
    Buffer("spring_lambda", wp.float32, ("iterate", "spring"), "distance constraint multipliers"),
    Buffer("tri_lambda", wp.vec2, ("iterate", "triangle"), "(stretch, area) multipliers"),
    Buffer("edge_lambda", wp.float32, ("iterate", "edge"), "bending multipliers"),
    Buffer("tet_lambda", wp.vec2, ("iterate", "tetrahedron"), "(deviatoric, volumetric) multipliers"),
    # bodies
    Buffer("body_q", wp.transform, ("iterate", "body"), "pose iterates (row 0: the prediction), from body_motion"),
    Buffer("body_motion", wp.transform, ("iterate", "body"),
           "each iterate's motion since the step began: (centre of mass displacement [m], rotation)"),
    Buffer("body_delta", wp.spatial_vector, ("iteration", "body"), "each iteration's summed (dx, dtheta)"),
    Buffer("body_qd_pred", wp.spatial_vector, ("body",), "the prediction's velocity (v*, w*)"),
    Buffer("frame_com", wp.vec3, ("iterate", "body"), "each iterate's centre of mass in world [m]"),
    Buffer("frame_inv_inertia", wp.mat33, ("iterate", "body"), "each iterate's split world inverse inertia"),
    Buffer("contact_lambda", wp.vec2, ("iterate", "rigid_contact"), "(normal, friction) multipliers per contact"),
    Buffer("joint_lambda", joint_multipliers, ("iterate", "joint"), "attachment (3), alignment (3), limit, drive"),
    Buffer("body_qd", wp.spatial_vector, ("velocity_iteration", "body"),
           "velocity iterates of the restitution pass (row 0: recovered from the poses)"),
    Buffer("body_dqd", wp.spatial_vector, ("velocity_iteration", "body"), "their changes"),
    Buffer("contact_rows", contact_velocity_row, ("rigid_contact",), "the restitution pass's contact geometry"),
    Buffer("split", wp.float32, ("body",), "mass-splitting factor of the position pass", grad=False),
    Buffer("contact_split", wp.float32, ("body",), "mass-splitting factor of the restitution pass", grad=False),
)


# Each Jacobi iteration is a dozen kernel launches and a row of every iterate buffer (with a view object per row):
# past this many per step, substeps are always the better use of the time (Macklin et al. 2019)
MAX_ITERATIONS = 10_000


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _count(name: str, v, least: int = 1) -> int:
    """``v`` as an iteration count in [least, MAX_ITERATIONS], or a ValueError naming ``name`` and the value."""
    if not (_is_real(v) and math.isfinite(v) and v == int(v) and least <= v <= MAX_ITERATIONS):
        raise ValueError(f"{name} must be an integer in [{least}, {MAX_ITERATIONS}], got {v!r} (each iteration of a "
                         "step is a dozen launches and its own buffers: for more accuracy use substeps)")
    return int(v)


def device_memory_bytes(device) -> int | None:
    """The memory of ``device`` in bytes (a CUDA device's total, the host's physical memory), None if unknown."""
    device = wp.get_device(device)
    if device.is_cuda:
        return int(device.total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


# ---------------------------------------------------------------------------------------------- integration stages
@stage("predict", writes=lambda data: {"dx": data.buffers.rows.dx[0], "body_q": data.buffers.rows.body_q[0]})
def predict(model, data) -> None:
    """Stage: iterate 0, the particles' and bodies' unconstrained motion over dt under gravity and
    ``state_out.particle_f`` / ``body_f`` (the symplectic Euler step; its velocities kept aside), and the poses
    it reaches."""
    state, out, b, dt = data.state_in, data.state_out, data.buffers, data.dt
    rows = b.rows
    predict_positions(model, state, out.particle_f, dt, rows.dx[0], b.particle_qd_pred)
    predict_bodies(model, state, out.body_f, dt, rows.body_motion[0], rows.body_q[0], b.body_qd_pred)


@stage("velocity update", writes=lambda data: {n: getattr(data.state_out, n) for n in ("particle_q", "particle_qd")})
def recover_velocities(model, data) -> None:
    """Stage: the solved positions and poses into ``state_out``, the velocities their motion implies into
    ``state_out.particle_qd`` and velocity iterate 0 of the bodies (the restitution pass starts from it)."""
    state, out, b, dt = data.state_in, data.state_out, data.buffers, data.dt
    rows = b.rows
    update_velocities(model, state, rows.dx[-1], dt, out.particle_q, out.particle_qd)
    # without a restitution pass (velocity_iterations=0) the recovered velocities are the step's
    qd = rows.body_qd[0] if data.solver.velocity_iterations else out.body_qd
    update_body_velocities(model, rows.body_motion[0], rows.body_q[0], b.body_qd_pred, rows.body_motion[-1],
                           rows.body_q[-1], dt, out.body_q, qd)


class XPBDSolver(SolverBase):
    """Extended position-based dynamics with Jacobi iterations.

    Springs become distance constraints with compliance ``1 / spring_stiffness``
    [m/N] and damping ``spring_damping`` [N s/m]; triangles and bending edges
    become the stretch/area and dihedral constraints of the SemiImplicitSolver's
    membrane and bending energies (``tri_materials``, ``edge_bending_properties``);
    tetrahedra become the
    deviatoric and volumetric constraints of the same stable neo-Hookean energy
    the SemiImplicitSolver uses (``tet_materials``); static shapes, the ground and
    particle pairs become hard contacts with Coulomb friction (``mu`` of the
    shape, ``model.particle_mu`` between particles). Stiffness does not depend
    on the time step (XPBD's point); with too few iterations constraints come
    out softer than their stiffness says (the residual after each iteration is
    in ``tests/test_xpbd.py``). Jacobi converges slowly on stiff soft bodies
    at large steps: prefer substeps to iterations (Macklin et al. 2019), e.g.
    10 substeps of 20 iterations per 60 Hz frame for a 50 kPa cube.

    Args:
        model: the :class:`inertia.Model`.
        iterations: Jacobi iterations per step (default 10).
        relaxation: omega, the factor on each constraint's (mass-split)
            correction; 1.5 converges faster on soft bodies and cloth, 1.0 is
            the safe default. Contacts are never over-relaxed.
        splitting: how a constraint's correction is shared among the n
            constraints on its particles: ``"sqrt"`` (1/sqrt(n), default: fast)
            or ``"full"`` (1/n: never overshoots, converges slowly; for stiff
            cloth at large steps, where ``"sqrt"`` with many iterations can
            jitter). Both reach the same equilibrium when converged.
        check_finite: raise :class:`inertia.NonFiniteError` naming the first
            stage and step that produced a NaN/inf (debugging; slow).

    Contacts are hard (inequality) constraints: a contact that begins within a
    step's iterations is a kink in the solve, so gradients across an impact
    are those of the discrete solve and central differences straddling it
    disagree with them by several percent (``contact_smoothing`` applies to the
    SemiImplicitSolver's penalty contact only, so far).

    Collision candidates come from ``model.collide(state_in, ...)``: for large
    steps give the model a ``contact_margin`` (particles) and
    ``rigid_contact_margin`` (shapes) of at least the distance a particle or
    body travels in one step.

    Rigid bodies (Müller et al. 2020): predicted by the symplectic-Euler body
    step (angular momentum form, so a free body keeps its angular momentum),
    corrected by shape-shape contacts (hard non-penetration, Coulomb-bounded
    positional friction, then restitution on the velocities), by
    particle contacts on their shapes (two-way) and by joints (hard attachment
    and alignment, limits, compliant PD drives), all with mass splitting in
    the Jacobi iterations (``constraints/jacobi.py``). Rigid contacts and
    joints converge like the rest of Jacobi: prefer substeps (Müller et al.
    use many substeps of one iteration; 10-20 substeps of 4-8 iterations per
    60 Hz frame hold stacks and chains, ``tests/test_rigid_xpbd.py``).
    ``body_f`` of the output state holds the external wrench of the step
    (Control.body_f plus the joint efforts), not the constraint forces.
    Differentiable through body poses, velocities, masses, materials, drive
    targets and gains; the kinks (contacts starting, stick/slip switches,
    limits engaging) are listed in the constraint modules. The joint rows each
    body counts for mass splitting (a drive where its gains are > 0, a limit where one is finite)
    are fixed when the solver is built: build it after setting drive gains and
    limits (a drive switched on later is solved, but split as if absent).

    Args (rigid bodies; ``splitting`` applies to them too, see
    ``constraints/jacobi.py``):
        restitution_threshold: [m/s] contacts approaching slower than this at
            the start of a step do not bounce (e = 0): a resting body would
            otherwise jitter on the velocity gravity gives it in one step.
        velocity_iterations: Jacobi iterations of the restitution pass (a box
            landing on four corners gets ~1 - 2^-k of its bounce with "sqrt").
            0 skips the pass (Newton's ``enable_restitution=False``): nothing
            bounces (``shape_material_restitution`` is ignored, with a warning
            where a shape sets it) and a contact keeps the separating velocity
            its position correction gave it (its overlap / dt, at most
            ``max_depenetration_velocity``) instead of the pass's zero normal
            velocity; about a tenth less time a step in a resting pile.
        joint_linear_compliance: [m/N] of the joints' attachment rows (0: hard).
        joint_angular_compliance: [rad/(N m)] of their alignment rows (0: hard).
        max_depenetration_velocity: [m/s] the fastest any contact (particle-shape,
            particle-particle, shape-shape) separates a pair that already overlapped
            when the step began (default 1 m/s; after PhysX's maxDepenetrationVelocity;
            ``math.inf``: none). Contacts a step creates are resolved in full as
            before; an overlap at the start (bodies or particles created inside each
            other, an unconverged stack, a particle that sank while its contact
            buffer was full) is pushed out at most this fast instead of at depth / dt
            (two radius-0.1 m particles 0.08 m apart left at 144 m/s at dt = 1/2400 s).
            1 m/s resolves a step's unconverged remainder (micrometres) at once at
            any practical step (1.7 mm per step at 600 Hz) and leaves an overlap at
            walking speed.

    **Step-local coordinates.** The iterates are what moved since the step
    began (particle displacements, each body's motion), not world positions
    (``integrators/xpbd.py``): friction, contacts and joints behave the same at
    any distance from the origin (a sliding box stops at 0.2864 m at x = 0, 6,
    30 and 100 m at dt = 1/2400 s; it stopped at 0.90 m at x = 30 m when the
    iterates were world positions, whose float32 spacing there exceeds a step's
    friction correction), and velocities carry no rounding error of the
    positions' spacing over dt, so a passive chain's error shrinks with the step
    (a 7-DoF arm's error used to grow from 0.07 to 1.28 rad as dt went from 1e-3
    to 2e-4 s). ``iterations`` and ``velocity_iterations`` are at most
    ``MAX_ITERATIONS`` (10,000); a solver whose per-step buffers cannot fit the
    device's memory is refused with the estimate (``MemoryError``).
    """

    step_buffer_spec = XPBD_BUFFERS
    # differentiable model parameters the step does not read (a rollout refuses to differentiate them): the
    # penalty contact's mass-scaled gains (contacts here are positional constraints)
    unused_params = ("shape_material_tau", "shape_material_zeta")

    def __init__(self, model, iterations: int = 10, relaxation: float = 1.0, splitting: str = "sqrt",
                 check_finite: bool = False, restitution_threshold: float = 0.1, velocity_iterations: int = 4,
                 joint_linear_compliance: float = 0.0, joint_angular_compliance: float = 0.0,
                 max_depenetration_velocity: float = 1.0):
        super().__init__(model, check_finite)
        self.iterations = _count("iterations", iterations)
        self.velocity_iterations = _count("velocity_iterations", velocity_iterations, least=0)
        if self.velocity_iterations == 0 and model.body_count:
            self.unused_params = (*type(self).unused_params, "shape_material_restitution")
            if model.shape_count and np.any(model.shape_material_restitution.numpy() > 0.0):
                warn("XPBDSolver(velocity_iterations=0) runs no restitution pass: the restitution of this model's "
                     "shapes is ignored (nothing bounces)")
        if not (_is_real(relaxation) and 0.0 < relaxation < 2.0):
            raise ValueError(f"relaxation must be a number in (0, 2), got {relaxation!r}")
        self.relaxation = float(relaxation)
        for name, v in (("restitution_threshold", restitution_threshold),
                        ("joint_linear_compliance", joint_linear_compliance),
                        ("joint_angular_compliance", joint_angular_compliance)):
            if not (_is_real(v) and math.isfinite(v) and v >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        self.restitution_threshold = float(restitution_threshold)
        self.joint_linear_compliance = float(joint_linear_compliance)
        self.joint_angular_compliance = float(joint_angular_compliance)
        if not (_is_real(max_depenetration_velocity) and max_depenetration_velocity > 0.0):
            raise ValueError("max_depenetration_velocity must be a number > 0 [m/s] (math.inf: no limit), got "
                             f"{max_depenetration_velocity!r}")
        self.max_depenetration_velocity = float(max_depenetration_velocity)
        if splitting not in ("sqrt", "full"):
            raise ValueError(f"splitting must be 'sqrt' or 'full', got {splitting!r}")
        self.splitting = splitting
        self._check_memory(self.buffer_sizes(0))  # before anything is allocated (contacts' share: at the first step)
        self.scales = jacobi_scales(model, self.relaxation, splitting)
        self.split_exponent = 0.5 if splitting == "sqrt" else 1.0  # bodies: n^p, as the particles' 1/sqrt(n) or 1/n
        self.joint_rows = joint_rows_per_body(model)
        compile_ahead.for_solver(self, XPBDSolver)

    def buffer_sizes(self, rigid_contact_max: int) -> dict:
        m, k = self.model, self.iterations
        rigid = rigid_contact_max if m.body_count else 0
        sizes = {"iterate": k + 1, "iteration": k, "velocity_iteration": max(self.velocity_iterations, 1),
                 "particle": max(m.particle_count, 1), "spring": max(m.spring_count, 1),
                 "triangle": max(m.tri_count, 1), "edge": max(m.edge_count, 1), "tetrahedron": max(m.tet_count, 1),
                 "body": max(m.body_count, 1), "joint": max(m.joint_count, 1), "rigid_contact": max(rigid, 1)}
        if rigid_contact_max:
            self._check_memory(sizes, rigid_contact_max)
        return sizes

    def _check_memory(self, sizes: dict, rigid_contact_max: int = 0) -> None:
        """Refuse per-step buffers larger than the device's memory (before allocating them), naming the estimate."""
        need = self.step_buffer_spec.nbytes(sizes, requires_grad=False)
        have = device_memory_bytes(self.model.device)
        if have is not None and need > have:
            contacts = f" and contacts of rigid_contact_max={rigid_contact_max}" if rigid_contact_max else ""
            raise MemoryError(
                f"XPBDSolver(iterations={self.iterations}, velocity_iterations={self.velocity_iterations}): the "
                f"buffers of one step (every Jacobi iterate is kept for the tape) need about {need / 2**30:.1f} GiB "
                f"for this model{contacts} (twice that when recorded for gradients), more than the "
                f"{have / 2**30:.1f} GiB of {self.model.device}. Use fewer iterations (and more substeps), or a "
                "smaller model or contact capacity.")

    @replayed
    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        model = self.model
        data = self.begin_step(state_in, state_out, control, contacts, dt)

        apply_controls(model, data)
        apply_joint_efforts(model, data)
        predict(model, data)
        count_body_constraints(model, data)
        eval_body_frames(model, data)
        clear_corrections(model, data)
        for k in range(self.iterations):  # iteration k reads iterate k, writes iterate k + 1
            solve_distance_constraints(model, data, k)
            solve_triangle_constraints(model, data, k)
            solve_bending_constraints(model, data, k)
            solve_tet_constraints(model, data, k)
            solve_shape_contacts(model, data, k)
            solve_particle_contacts(model, data, k)
            solve_body_contacts(model, data, k)
            solve_joints(model, data, k)
            apply_corrections(model, data, k)
            apply_body_corrections(model, data, k)
        recover_velocities(model, data)
        if self.velocity_iterations:
            solve_contact_velocities(model, data)
        update_joint_coordinates(model, data)

        self.step_count += 1
        return state_out
