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
its own: ``wp.Tape`` keeps them all and differentiates the whole solve. Those
per-iteration buffers (iterates, corrections, multipliers; declared once in
``XPBD_BUFFERS``) belong to the *output* state of the step
(``state_out.step_buffers``), allocated the first time a state is written (or
up front with :meth:`XPBDSolver.prepare_state`) and reused from then on, so
``step()`` allocates nothing in a steady loop and a recorded rollout, which
uses a new state per step, holds exactly the buffers its backward pass needs.
"""

from __future__ import annotations

import math

import warp as wp

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
from .solver import SolverBase, update_joint_coordinates
from .step_data import Buffer, StepBufferSpec, stage

# The per-step buffers. Dimensions: "iterate" (K + 1: the prediction and every iteration's result),
# "iteration" (K), "velocity_iteration" (of the restitution pass), and the entities; every entity size
# is at least 1, so a model without bodies (or springs, ...) runs the same stage list (those stages
# return at once).
XPBD_BUFFERS = StepBufferSpec(
    # particles
    Buffer("x", wp.vec3, ("iterate", "particle"), "position iterates x_0..x_K [m] (x_0: the prediction)"),
    Buffer("delta", wp.vec3, ("iteration", "particle"), "each iteration's summed corrections [m]"),
    Buffer("particle_qd_pred", wp.vec3, ("particle",), "the prediction's velocity [m/s] (not read again)"),
    Buffer("spring_lambda", wp.float32, ("iterate", "spring"), "distance constraint multipliers"),
    Buffer("tri_lambda", wp.vec2, ("iterate", "triangle"), "(stretch, area) multipliers"),
    Buffer("edge_lambda", wp.float32, ("iterate", "edge"), "bending multipliers"),
    Buffer("tet_lambda", wp.vec2, ("iterate", "tetrahedron"), "(deviatoric, volumetric) multipliers"),
    # bodies
    Buffer("body_q", wp.transform, ("iterate", "body"), "pose iterates (row 0: the prediction)"),
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


# ---------------------------------------------------------------------------------------------- integration stages
@stage("predict", writes=lambda data: {"x": data.buffers.rows.x[0], "body_q": data.buffers.rows.body_q[0]})
def predict(model, data) -> None:
    """Stage: iterate 0, the particles' and bodies' unconstrained positions and poses after dt under gravity and
    ``state_out.particle_f`` / ``body_f`` (the symplectic Euler step; its velocities kept aside)."""
    state, out, b, dt = data.state_in, data.state_out, data.buffers, data.dt
    predict_positions(model, state, out.particle_f, dt, b.rows.x[0], b.particle_qd_pred)
    predict_bodies(model, state, out.body_f, dt, b.rows.body_q[0], b.body_qd_pred)


@stage("velocity update", writes=lambda data: {n: getattr(data.state_out, n) for n in ("particle_q", "particle_qd")})
def recover_velocities(model, data) -> None:
    """Stage: the solved positions and poses into ``state_out``, the velocities they imply into
    ``state_out.particle_qd`` and velocity iterate 0 of the bodies (the restitution pass starts from it)."""
    state, out, b, dt = data.state_in, data.state_out, data.buffers, data.dt
    rows = b.rows
    update_velocities(model, state, rows.x[-1], dt, out.particle_q, out.particle_qd)
    update_body_velocities(model, rows.body_q[0], b.body_qd_pred, rows.body_q[-1], dt, out.body_q, rows.body_qd[0])


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
    limits engaging) are listed in the constraint modules. Velocities come
    from float32 poses, so they are quantized by the poses' resolution over
    dt (3e-5 m/s at 1 m from the origin at dt = 1/480 s): keep scenes whose
    gradients matter near the origin. The joint rows each body counts for mass
    splitting (a drive where its gains are > 0, a limit where one is finite)
    are fixed when the solver is built: build it after setting drive gains and
    limits (a drive switched on later is solved, but split as if absent).

    Args (rigid bodies; ``splitting`` applies to them too, see
    ``constraints/jacobi.py``):
        restitution_threshold: [m/s] contacts approaching slower than this at
            the start of a step do not bounce (e = 0): a resting body would
            otherwise jitter on the velocity gravity gives it in one step.
        velocity_iterations: Jacobi iterations of the restitution pass (a box
            landing on four corners gets ~1 - 2^-k of its bounce with "sqrt").
        joint_linear_compliance: [m/N] of the joints' attachment rows (0: hard).
        joint_angular_compliance: [rad/(N m)] of their alignment rows (0: hard).
    """

    step_buffer_spec = XPBD_BUFFERS

    def __init__(self, model, iterations: int = 10, relaxation: float = 1.0, splitting: str = "sqrt",
                 check_finite: bool = False, restitution_threshold: float = 0.1, velocity_iterations: int = 4,
                 joint_linear_compliance: float = 0.0, joint_angular_compliance: float = 0.0):
        super().__init__(model, check_finite)
        if int(velocity_iterations) != velocity_iterations or velocity_iterations < 1:
            raise ValueError(f"velocity_iterations must be a positive integer, got {velocity_iterations!r}")
        self.velocity_iterations = int(velocity_iterations)
        for name, v in (("restitution_threshold", restitution_threshold),
                        ("joint_linear_compliance", joint_linear_compliance),
                        ("joint_angular_compliance", joint_angular_compliance)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        self.restitution_threshold = float(restitution_threshold)
        self.joint_linear_compliance = float(joint_linear_compliance)
        self.joint_angular_compliance = float(joint_angular_compliance)
        if int(iterations) != iterations or iterations < 1:
            raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
        if not 0.0 < float(relaxation) < 2.0:
            raise ValueError(f"relaxation must be in (0, 2), got {relaxation!r}")
        self.iterations = int(iterations)
        self.relaxation = float(relaxation)
        if splitting not in ("sqrt", "full"):
            raise ValueError(f"splitting must be 'sqrt' or 'full', got {splitting!r}")
        self.splitting = splitting
        self.scales = jacobi_scales(model, self.relaxation, splitting)
        self.split_exponent = 0.5 if splitting == "sqrt" else 1.0  # bodies: n^p, as the particles' 1/sqrt(n) or 1/n
        self.joint_rows = joint_rows_per_body(model)

    def buffer_sizes(self, rigid_contact_max: int) -> dict:
        m, k = self.model, self.iterations
        rigid = rigid_contact_max if m.body_count else 0
        return {"iterate": k + 1, "iteration": k, "velocity_iteration": self.velocity_iterations,
                "particle": max(m.particle_count, 1), "spring": max(m.spring_count, 1),
                "triangle": max(m.tri_count, 1), "edge": max(m.edge_count, 1), "tetrahedron": max(m.tet_count, 1),
                "body": max(m.body_count, 1), "joint": max(m.joint_count, 1), "rigid_contact": max(rigid, 1)}

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
        solve_contact_velocities(model, data)
        update_joint_coordinates(model, data)

        self.step_count += 1
        return state_out
