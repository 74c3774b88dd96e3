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
Gauss-Seidel sweep (``constraints/body_contact.py``, ``constraints/joints.py``).

Why Jacobi: every constraint of an iteration reads the same iterate and
writes into that iteration's correction buffer, so an iteration is one kernel
per constraint type (no colouring pass) and each iterate lives in an array of
its own: ``wp.Tape`` keeps them all and differentiates the whole solve. Those
per-iteration buffers (iterates, corrections, multipliers) belong to the
*output* state of the step, allocated the first time a state is written
(or up front with :meth:`XPBDSolver.prepare_state`) and reused from then on,
so ``step()`` allocates nothing in a steady loop and a recorded rollout,
which uses a new state per step, holds exactly the buffers its backward pass
needs.
"""

from __future__ import annotations

from collections import namedtuple

import math

import warp as wp

from ..integrators import predict_bodies, predict_positions, update_body_velocities, update_velocities
from ..kinematics import eval_ik
from .constraints import (
    apply_body_corrections,
    apply_corrections,
    apply_joint_efforts,
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
from .forces import apply_control_forces, apply_control_wrenches
from .solver import SolverBase


class _BodyBuffers:
    """The body iterates (poses) 0..K, their corrections, the contact and joint multipliers of one step.

    Sized at least 1 everywhere, so a model without bodies runs the same stage list (every body
    stage returns at once there).
    """

    def __init__(self, model, iterations: int, velocity_iterations: int, rigid_contact_max: int,
                 requires_grad: bool):
        nb, nj, nc = max(model.body_count, 1), max(model.joint_count, 1), max(rigid_contact_max, 1)
        k, g = iterations, requires_grad
        with wp.ScopedDevice(model.device):
            self.q = wp.zeros((k + 1, nb), dtype=wp.transform, requires_grad=g)
            self.delta = wp.zeros((k, nb), dtype=wp.spatial_vector, requires_grad=g)
            self.qd_pred = wp.zeros(nb, dtype=wp.spatial_vector, requires_grad=g)
            # velocity iterates of the restitution pass (row 0: recovered from the poses) and their changes
            self.qd = wp.zeros((velocity_iterations, nb), dtype=wp.spatial_vector, requires_grad=g)
            self.dqd = wp.zeros((velocity_iterations, nb), dtype=wp.spatial_vector, requires_grad=g)
            self.contact_lambda = wp.zeros((k + 1, nc), dtype=wp.vec2, requires_grad=g)
            # each iterate's body frames for the contacts (centre of mass, split world inverse inertia)
            self.frame_com = wp.zeros((k + 1, nb), dtype=wp.vec3, requires_grad=g)
            self.frame_inv_inertia = wp.zeros((k + 1, nb), dtype=wp.mat33, requires_grad=g)
            # the restitution pass's per-contact geometry (constraints.restitution.contact_velocity_row)
            self.contact_rows = wp.zeros(nc, dtype=contact_velocity_row, requires_grad=g)
            self.joint_lambda = wp.zeros((k + 1, nj), dtype=joint_multipliers, requires_grad=g)
            # mass-splitting counts of the position and the velocity pass (integers: no gradient)
            self.split = wp.zeros(nb, dtype=float)
            self.contact_split = wp.zeros(nb, dtype=float)
        self.rigid_contact_max = rigid_contact_max

    def arrays(self):
        return (self.q, self.delta, self.qd_pred, self.qd, self.dqd, self.contact_lambda, self.contact_rows,
                self.frame_com, self.frame_inv_inertia, self.joint_lambda)


_IterationViews = namedtuple("_IterationViews", "x x_next delta spring_lambda spring_lambda_next tri_lambda "
                             "tri_lambda_next edge_lambda edge_lambda_next tet_lambda tet_lambda_next q q_next "
                             "body_delta frame_com frame_com_next frame_inv_inertia frame_inv_inertia_next "
                             "contact_lambda contact_lambda_next joint_lambda joint_lambda_next")


class _IterationBuffers:
    """The iterates x_0..x_K, corrections and spring multipliers of one step, and the bodies' (``bodies``)."""

    def __init__(self, model, iterations: int, requires_grad: bool, rigid_contact_max: int = 0,
                 velocity_iterations: int = 1):
        n, s, t = max(model.particle_count, 1), model.spring_count, model.tet_count  # >= 1: indexable rows
        tri, e = model.tri_count, model.edge_count
        with wp.ScopedDevice(model.device):
            self.x = wp.zeros((iterations + 1, n), dtype=wp.vec3, requires_grad=requires_grad)
            self.delta = wp.zeros((iterations, n), dtype=wp.vec3, requires_grad=requires_grad)
            self.spring_lambda = wp.zeros((iterations + 1, max(s, 1)), dtype=float, requires_grad=requires_grad)
            # (deviatoric, volumetric) multipliers per tet
            self.tet_lambda = wp.zeros((iterations + 1, max(t, 1)), dtype=wp.vec2, requires_grad=requires_grad)
            self.tri_lambda = wp.zeros((iterations + 1, max(tri, 1)), dtype=wp.vec2, requires_grad=requires_grad)
            self.edge_lambda = wp.zeros((iterations + 1, max(e, 1)), dtype=float, requires_grad=requires_grad)
        self.bodies = _BodyBuffers(model, iterations, velocity_iterations, rigid_contact_max, requires_grad)
        self.iterations, self.requires_grad = iterations, requires_grad
        # every iteration's row views, made once: a view costs ~5 us of Python, and a step takes ~30 per iteration
        rb = self.bodies
        self.per_iteration = [_IterationViews(
            self.x[k], self.x[k + 1], self.delta[k], self.spring_lambda[k], self.spring_lambda[k + 1],
            self.tri_lambda[k], self.tri_lambda[k + 1], self.edge_lambda[k], self.edge_lambda[k + 1],
            self.tet_lambda[k], self.tet_lambda[k + 1], rb.q[k], rb.q[k + 1], rb.delta[k], rb.frame_com[k],
            rb.frame_com[k + 1], rb.frame_inv_inertia[k], rb.frame_inv_inertia[k + 1], rb.contact_lambda[k],
            rb.contact_lambda[k + 1], rb.joint_lambda[k], rb.joint_lambda[k + 1]) for k in range(iterations)]
        self.x_first, self.x_last = self.x[0], self.x[iterations]
        self.q_first, self.q_last, self.qd_first = rb.q[0], rb.q[iterations], rb.qd[0]
        self.frame_com_first, self.frame_inv_inertia_first = rb.frame_com[0], rb.frame_inv_inertia[0]
        self.contact_lambda_last = rb.contact_lambda[iterations]

    def zero_grad(self) -> None:
        if self.requires_grad:
            for a in self._arrays():
                a.grad.zero_()

    def bytes(self) -> int:
        per = 1 + (1 if self.requires_grad else 0)
        return per * sum(a.capacity for a in self._arrays())

    def _arrays(self):
        return (self.x, self.delta, self.spring_lambda, self.tri_lambda, self.edge_lambda, self.tet_lambda,
                *self.bodies.arrays())


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
    the Jacobi iterations (``constraints/body_contact.py``). Rigid contacts and
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
    ``constraints/body_contact.py``):
        restitution_threshold: [m/s] contacts approaching slower than this at
            the start of a step do not bounce (e = 0): a resting body would
            otherwise jitter on the velocity gravity gives it in one step.
        velocity_iterations: Jacobi iterations of the restitution pass (a box
            landing on four corners gets ~1 - 2^-k of its bounce with "sqrt").
        joint_linear_compliance: [m/N] of the joints' attachment rows (0: hard).
        joint_angular_compliance: [rad/(N m)] of their alignment rows (0: hard).
    """

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
        # drive targets of a step taken without a Control
        self.zero_dofs = wp.zeros(max(model.joint_dof_count, 1), dtype=float, device=model.device)

    def state_buffer_bytes(self, requires_grad: bool, rigid_contact_max: int = 0) -> int:
        """Bytes of the per-iteration buffers that every output state of a step carries.

        ``rigid_contact_max``: the capacity of the step's ``Contacts`` (their multipliers are per contact).
        """
        m, k = self.model, self.iterations
        lam = 4 * max(m.spring_count, 1) + 8 * max(m.tri_count, 1) + 4 * max(m.edge_count, 1) + 8 * max(m.tet_count, 1)
        values = (k + 1) * m.particle_count * 12 + k * m.particle_count * 12 + (k + 1) * lam
        nb, nj, nc = max(m.body_count, 1), max(m.joint_count, 1), max(rigid_contact_max, 1)
        kv = self.velocity_iterations
        # poses, corrections, velocity iterates, multipliers, restitution rows (17 floats), body frames (12 floats)
        bodies = ((k + 1) * nb * 28 + k * nb * 24 + (1 + 2 * kv) * nb * 24 + (k + 1) * (8 * nc + 32 * nj) + 68 * nc
                  + (k + 1) * nb * 48)
        return (values + bodies) * (2 if requires_grad else 1) + 8 * nb

    def prepare_state(self, state, contacts=None) -> None:
        """Allocate the per-iteration buffers of ``state`` now instead of at its first step (for ``contacts``)."""
        self._buffers(state, contacts)

    def _buffers(self, state, contacts=None) -> _IterationBuffers:
        buf = getattr(state, "_xpbd_buffers", None)
        rigid_max = contacts.rigid_contact_max if contacts is not None and self.model.body_count else 0
        if (buf is None or buf.iterations != self.iterations or buf.requires_grad != state.requires_grad()
                or buf.bodies.rigid_contact_max != rigid_max or buf.bodies.qd.shape[0] != self.velocity_iterations):
            buf = _IterationBuffers(self.model, self.iterations, state.requires_grad(), rigid_max,
                                    self.velocity_iterations)
            state._xpbd_buffers = buf
        return buf

    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        self._validate(state_in, state_out, control, contacts, dt)
        model = self.model
        it = self._buffers(state_out, contacts)
        rb = it.bodies
        if self.check_finite:
            self._check("input", particle_q=state_in.particle_q, particle_qd=state_in.particle_qd,
                        body_q=state_in.body_q, body_qd=state_in.body_qd)

        apply_control_forces(model, control, state_out.particle_f)
        apply_control_wrenches(model, control, state_out.body_f)
        apply_joint_efforts(model, state_in, control, state_out.body_f)
        predict_positions(model, state_in, state_out.particle_f, dt, it.x_first)
        predict_bodies(model, state_in, state_out.body_f, dt, it.q_first, rb.qd_pred)
        self._check("predict", x=it.x_first, body_q=it.q_first)
        count_body_constraints(model, it.q_first, contacts, self.joint_rows, self.split_exponent, rb.split)
        eval_body_frames(model, it.q_first, rb.split, it.frame_com_first, it.frame_inv_inertia_first)
        it.delta.zero_()
        rb.delta.zero_()
        for k, v in enumerate(it.per_iteration):  # iteration k reads iterate k, writes iterate k + 1
            solve_distance_constraints(model, state_in, v.x, self.scales["spring"], v.spring_lambda,
                                       v.spring_lambda_next, dt, v.delta)
            solve_triangle_constraints(model, state_in, v.x, self.scales["tri"], v.tri_lambda, v.tri_lambda_next, dt,
                                       v.delta)
            solve_bending_constraints(model, state_in, v.x, self.scales["edge"], v.edge_lambda, v.edge_lambda_next,
                                      dt, v.delta)
            solve_tet_constraints(model, state_in, v.x, self.scales["tet"], v.tet_lambda, v.tet_lambda_next, dt,
                                  v.delta)
            solve_shape_contacts(model, state_in, v.x, contacts, v.delta, v.q, rb.split, v.body_delta)
            solve_particle_contacts(model, state_in, v.x, contacts, v.delta)
            solve_body_contacts(model, state_in, v.q, contacts, rb.split, v.frame_com, v.frame_inv_inertia,
                                v.contact_lambda, v.contact_lambda_next, v.body_delta)
            solve_joints(model, state_in, control, v.q, rb.split, v.joint_lambda, v.joint_lambda_next, dt,
                         v.body_delta, self.joint_linear_compliance, self.joint_angular_compliance, self.relaxation,
                         self.zero_dofs)
            apply_corrections(model, v.x, v.delta, v.x_next)
            apply_body_corrections(model, v.q, v.body_delta, rb.split, v.q_next, v.frame_com_next,
                                   v.frame_inv_inertia_next)
            self._check(f"iteration {k}", x=v.x_next, body_q=v.q_next)
        update_velocities(model, state_in, it.x_last, dt, state_out)
        update_body_velocities(model, it.q_first, rb.qd_pred, it.q_last, dt, state_out.body_q, it.qd_first)
        solve_contact_velocities(model, state_in, state_out.body_q, rb.qd, contacts, it.contact_lambda_last,
                                 rb.contact_split, rb.contact_rows, rb.dqd, self.restitution_threshold,
                                 self.split_exponent, dt, state_out.body_qd)
        self._check("velocity update", particle_q=state_out.particle_q, particle_qd=state_out.particle_qd,
                    body_q=state_out.body_q, body_qd=state_out.body_qd)
        eval_ik(model, state_out)

        self.step_count += 1
        return state_out
