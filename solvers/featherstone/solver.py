"""FeatherstoneSolver: articulated rigid bodies in joint coordinates, implicit joint forces, differentiable.

One step, per articulation (one thread each; every world's trees are articulations of one model):

    gather (q, qd) from state_in        State.joint_q / joint_qd; a free body's body_q / body_qd
    forward kinematics                  poses, motion subspaces S, spatial inertias, twists, RNEA forward pass
    joint forces                        drives, damping, friction, limits, effort clamp (explicit part, D)
    composite rigid bodies              bias forces C = RNEA backward pass; H0 = M + armature + dt D
    Cholesky of H0
    contacts (if any)                   effective masses from H0's factor, forces, implicit terms into H
    Cholesky of H, solve                H dqd = dt (tau - C)
    velocity limits (if any)            rates beyond them held there by impulses on their joints: H with those
                                        dofs prescribed, factored and solved again (skipped where none is beyond)
    integrate                           qd' = qd + dqd, q' from qd' (quaternions by the exponential map)
    outputs                             State.joint_q / joint_qd, body_q / body_qd by forward kinematics

Why the composite-rigid-body algorithm and a dense Cholesky per articulation rather than the O(n)
articulated-body algorithm (ABA): the implicit terms make the solved matrix M + dt D + dt J^T K J,
and the contact terms J^T K J are dense in the dofs of the touching chain, which ABA's recursion
cannot absorb (it takes only diagonal joint-space terms); MuJoCo builds the same dense factor for
the same reason. For robots (n = 7 to 30 dofs per tree) the O(n^3) factor is a few thousand flops,
comparable to the O(n) recursions' constant factors, and it is one branch-free pattern for every
tree: a batch of many worlds is one launch with one thread per articulation, each walking the same
loop bounds. The contact effective masses need H0^-1 J^T, which the factor gives by one triangular
solve per contact. And the factor is the natural thing to keep for the backward pass: ABA's
intermediate articulated inertias would be as many per-body 6x6 matrices as there are bodies, to be
stored per step all the same.

Differentiable through ``wp.Tape``: every kernel writes each array element once (sums gather with
atomic adds into scratch arrays, see :mod:`.linalg`), and everything a step computes lives in the
StepData of its output state (:mod:`.step_data`), never in a solver-owned buffer, and ``state_in`` is
never written. Capturable: ``step()`` allocates nothing after a state's first step as output (or after
:meth:`FeatherstoneSolver.prepare_state`) and reads nothing back. Off the tape on a CPU, a contact-free
Euler step runs all of the stages above in one launch (:mod:`.fused_step`, the same functions and bits).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import warp as wp

from ... import compile_ahead
from ...autodiff.tape import gradients_if_recording
from ...collision.contact_geometry import rigid_contacts
from ...collision.sdf import shape_geometry
from ...diagnostics import StabilityWarning, warn
from ...kinematics import joint_topology
from ...types import JOINT_PRISMATIC, JOINT_REVOLUTE
from ..forces.contact_sides import rigid_contact_threads
from ..solver import SolverBase, replayed
from . import contacts as contact_stage
from . import dynamics, fused_step, kinematics, linalg
from .particles import check_particle_time_step, particle_stable_steps, step_particles
from .step_data import StepData, step_data_bytes
from .topology import Topology


class FeatherstoneSolver(SolverBase):
    """Joint-space (reduced-coordinate) dynamics of articulated rigid bodies; semi-implicit Euler.

    ``State.joint_q`` / ``joint_qd`` are the integrated state of every body in a joint tree (revolute,
    prismatic, ball, fixed and free joints; a revolute angle is not wrapped to [-pi, pi]); a dynamic
    body that is the child of no joint is a free body (its ``body_q`` / ``body_qd`` are its coordinates).
    Every step writes ``body_q`` / ``body_qd`` of the output state from its joint coordinates, so
    collision detection, recorders and rollout outputs see the bodies as usual. A step reads
    ``joint_q`` / ``joint_qd`` of its input state (and ``body_q`` / ``body_qd`` of free and kinematic
    bodies), never the poses of jointed bodies: after editing ``joint_q`` of a state, call
    :meth:`sync_bodies` so that collision detection sees the same poses.

    Joint forces (per degree of freedom, :mod:`inertia.solvers.featherstone.dynamics`): PD drives
    (``joint_target_ke`` / ``_kd`` to ``Control.joint_target_pos`` / ``_vel``, revolute and prismatic),
    ``Control.joint_f``, ``joint_armature``, ``joint_damping`` and ``joint_friction`` (smoothed Coulomb),
    limits (``joint_limit_*`` springs, one-sided), ``joint_effort_limit`` (clamps drive + effort) and
    ``joint_velocity_limit`` (a new rate beyond it is held at it by an impulse on that joint, which the rest
    of the tree answers through the step's matrix: internal, so a floating base keeps its momentum, where
    clamping the rate alone would leave it the reaction to the unclamped impulse; the solver looks for
    finite ones at construction, and without one only clamps). Drives, damping, friction and limits are
    implicit: stable at any gain and dt. Contacts (:mod:`inertia.solvers.featherstone.contacts`) are
    mass-independent spring-dampers mapped through the contact Jacobian, also implicit; ``shape_material_ke`` / ``kd`` /
    ``tau`` / ``zeta`` / ``restitution`` and ``model.contact_smoothing`` are not used there. Particles
    (cloth, soft bodies, springs, granular) step as in the SemiImplicitSolver, with the same materials and
    contact settings, and push the bodies they touch (:mod:`.particles`): a robot can hold cloth. Their
    contacts read the input state's ``body_q`` / ``body_qd`` (as collision does), so after editing
    ``joint_q``, :meth:`sync_bodies` is needed for them too.

    Args:
        model: the :class:`inertia.Model`.
        integrator: ``"euler"`` (default): semi-implicit Euler, first order, with the drives, damping,
            friction, limits and contacts implicit (stable at any gain and dt; what robots with drives and
            contacts want). Its Coriolis forces are explicit, so on long chaotic passive motion its energy
            wanders, as MuJoCo's Euler does (the undamped Kuka of the tests gains 73 J in 10 s at dt 1 ms,
            MuJoCo's Euler 63 J). ``"rk4"``: classic fourth-order Runge-Kutta with every force explicit
            (four evaluations per step; for smooth, passive or softly driven motion, as MuJoCo's RK4: the
            same Kuka keeps its energy to 5e-5 of its kinetic energy); stiff drives or contacts need dt well
            below their time scale there. Velocity limits act on every stage's acceleration (:meth:`_rk4`).
        contact_timeconst: time constant of a contact's normal spring-damper [s] (MuJoCo's solref[0]).
            The default, 5 ms, sinks a body resting under its own weight by g tc^2 = 0.25 mm and matches
            the stance of MuJoCo's default contact (solref 0.02 s, whose impedance solimp 0.9-0.95 makes
            the constraint d / (1 - d) = 9-19 times stiffer than its spring: tests/test_featherstone.py
            compares the A1's standing height). Any value is stable (implicit); at least ~2 dt resolves
            the contact's motion instead of settling it within a step.
        contact_dampratio: its damping ratio (1: critically damped, no bounce; MuJoCo's solref[1]).
        friction_smoothing: slip speed eps [m/s] of the smoothed Coulomb friction of contacts
            (None: ``model.friction_smoothing``); a tangential load below mu f_n creeps at
            eps r / sqrt(1 - r^2), r its ratio to mu f_n.
        joint_friction_smoothing: the same for ``joint_friction`` [rad/s or m/s].
        check_finite: raise :class:`inertia.NonFiniteError` naming the first stage and step that
            produced a NaN/inf (debugging; slow).
    """

    # every per-dof joint dynamics field is simulated (SolverBase warns about the ones a solver ignores)
    ignores_joint_fields = ()
    # what a step reads of its input state (what a rollout checkpoints and restores); particles: see __init__
    state_inputs = ("body_q", "body_qd", "joint_q", "joint_qd")
    # differentiable model parameters the step does not read (a rollout refuses to differentiate them); with
    # particles, their contact reads the shapes' gains (see __init__). body_inv_mass: the articulation reads
    # body_mass (a particle contact's effective mass alone would give a partial gradient)
    unused_params = ("body_inv_mass", "shape_material_ke", "shape_material_kd", "shape_material_tau",
                     "shape_material_zeta", "shape_material_restitution")

    def __init__(self, model, integrator: str = "euler", contact_timeconst: float = 0.005,
                 contact_dampratio: float = 1.0, friction_smoothing: float | None = None,
                 joint_friction_smoothing: float = 1.0e-3, check_finite: bool = False):
        super().__init__(model, check_finite)
        if integrator not in ("euler", "rk4"):
            raise ValueError(f"FeatherstoneSolver: integrator must be 'euler' or 'rk4', got {integrator!r}")
        self.integrator = integrator
        self.stable_steps, self._checked_dt = {}, None  # the particles' explicit step bounds (.particles)
        if model.particle_count:
            self.state_inputs = ("particle_q", "particle_qd") + type(self).state_inputs
            self.unused_params = ("body_inv_mass", "shape_material_restitution")
        self.contact_timeconst = _positive(contact_timeconst, "contact_timeconst")
        self.contact_dampratio = _positive(contact_dampratio, "contact_dampratio")
        eps = model.friction_smoothing if friction_smoothing is None else friction_smoothing
        self.friction_smoothing = _positive(eps, "friction_smoothing")
        self.joint_friction_smoothing = _positive(joint_friction_smoothing, "joint_friction_smoothing")
        self.topology = Topology(model)
        # velocity limits act as joint impulses (dynamics.rate_limit_kernel) where any is finite at construction
        limits = model.joint_velocity_limit.numpy() if model.joint_dof_count else ()
        self.rate_limits = bool(self.topology.dof_count and np.isfinite(limits).any())
        dev = model.device
        # inputs of a step taken without a Control (read only: never written)
        self._zero_dofs = wp.zeros(max(model.joint_dof_count, 1), dtype=float, device=dev)
        self._zero_wrenches = wp.zeros(max(model.body_count, 1), dtype=wp.spatial_vector, device=dev)
        compile_ahead.for_solver(self, FeatherstoneSolver)  # before the estimate below launches the particle forces
        if model.particle_count:
            self.stable_steps = particle_stable_steps(model)

    # ------------------------------------------------------------------ per-state buffers
    def state_buffer_bytes(self, requires_grad: bool, rigid_contact_max: int = 0, dt: float | None = None) -> int:
        """Bytes of the StepData every output state of a step carries (``rigid_contact_max``: its Contacts';
        ``dt`` [s] changes nothing: this solver never splits a step)."""
        return step_data_bytes(self.model, self.topology, self._stages, requires_grad, rigid_contact_max,
                               self.rate_limits)

    @property
    def _stages(self) -> int:
        return 1 if self.integrator == "euler" else 4

    def prepare_state(self, state, contacts=None) -> None:
        """Allocate ``state``'s StepData now instead of at its first step as output (for ``contacts``)."""
        self._step_data(state, contacts)

    def _step_data(self, state, contacts) -> StepData:
        model = self.model
        rigid_max = contacts.rigid_contact_max if contacts is not None and model.body_count else 0
        data = state.step_buffers  # the state's one slot for a step's buffers (solvers/step_data.py)
        if (not isinstance(data, StepData) or data.rigid_contact_max != rigid_max
                or data.requires_grad != state.requires_grad() or data.stage_count != self._stages
                or data.rate_limits != self.rate_limits):
            data = StepData(model, self.topology, self._stages, rigid_max, state.requires_grad(), self.rate_limits)
            state.step_buffers = data
        return data

    # ------------------------------------------------------------------ state set-up
    def sync_bodies(self, state) -> None:
        """Set ``state.body_q`` / ``body_qd`` of every jointed body from ``state.joint_q`` / ``joint_qd``.

        Differentiable (recorded on a running ``wp.Tape``): the gradient of the poses flows to the
        joint coordinates. Its buffers belong to ``state``.
        """
        model, topo = self.model, self.topology
        if topo.slot_count == 0:
            return
        gradients_if_recording()
        buf = getattr(state, "_featherstone_sync", None)
        if buf is None:
            g = state.requires_grad()
            with wp.ScopedDevice(model.device):
                buf = (wp.zeros(max(topo.coord_count, 1), dtype=float, requires_grad=g),
                       wp.zeros(max(topo.dof_count, 1), dtype=float, requires_grad=g),
                       wp.zeros(max(model.body_count, 1), dtype=wp.spatial_vector, requires_grad=g))
            state._featherstone_sync = buf
        q, qd, twist = buf
        # only the model joints' coordinates: free bodies' are read from their own body_q / body_qd, which the
        # body outputs leave alone (a state array read by one launch and written by a later one would be
        # flagged by wp.config.verify_autograd_array_access)
        dev = model.device
        if topo.coord_count:
            wp.launch(kinematics.gather_joints_kernel, dim=topo.coord_count, inputs=[topo.coord_state, state.joint_q],
                      outputs=[q], device=dev)
        if topo.dof_count:
            wp.launch(kinematics.gather_joints_kernel, dim=topo.dof_count, inputs=[topo.dof_state, state.joint_qd],
                      outputs=[qd], device=dev)
        self._body_outputs(q, qd, 1, twist, state)

    def _gather(self, state, q, qd) -> None:
        topo, dev = self.topology, self.model.device
        if topo.coord_count or topo.dof_count:
            wp.launch(kinematics.gather_state_kernel, dim=max(topo.coord_count, topo.dof_count),
                      inputs=[topo.tree, state.joint_q, state.body_q, state.joint_qd, state.body_qd, topo.coord_count,
                              topo.dof_count], outputs=[q, qd], device=dev)

    def _body_outputs(self, q, qd, from_state: int, twist, state) -> None:
        m, topo = self.model, self.topology
        wp.launch(kinematics.body_output_kernel, dim=topo.articulation_count,
                  inputs=[joint_topology(m), m.body_com, topo.tree, q, qd, from_state],
                  outputs=[twist, state.body_q, state.body_qd], device=m.device)

    # ------------------------------------------------------------------ the step
    def _controls(self, control):
        if control is None:
            return self._zero_wrenches, self._zero_dofs, self._zero_dofs, self._zero_dofs
        pick = [getattr(control, n, None) for n in ("body_f", "joint_target_pos", "joint_target_vel", "joint_f")]
        return (pick[0] if pick[0] is not None else self._zero_wrenches,
                *(a if a is not None else self._zero_dofs for a in pick[1:]))

    @replayed
    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        self._validate(state_in, state_out, control, contacts, dt)
        model, topo, dev = self.model, self.topology, self.model.device
        dt = float(dt)
        controls = self._controls(control)
        data = (self._step_data(state_out, contacts)
                if (topo.slot_count or topo.kinematic_bodies.size or model.particle_count) else None)
        if model.particle_count:  # the particles' step; their reactions on bodies join the Control's wrench
            if dt != self._checked_dt:
                check_particle_time_step(self, dt)
            step_particles(self, state_in, state_out, control, contacts, dt,
                           data.body_f_ext if model.body_count else None)
            controls = (data.body_f_ext, *controls[1:])
        if model.body_count:
            wp.copy(state_out.body_f, controls[0])
        if topo.kinematic_bodies.size:
            for k, st in enumerate(data.stages):  # contacts read a kinematic body's pose from each stage's body_X
                wp.launch(kinematics.kinematic_bodies_kernel, dim=topo.kinematic_bodies.size,
                          inputs=[topo.kinematic, state_in.body_q, state_in.body_qd, model.body_com, dt, int(k == 0)],
                          outputs=[st.body_X, state_out.body_q, state_out.body_qd], device=dev)
        if topo.slot_count == 0:
            self.step_count += 1
            return state_out
        if self.step_count == 0 and model.joint_dof_count and not wp.get_device(dev).is_capturing:
            warn_start_outside_limits(model, state_in.joint_q.numpy())
        if self.check_finite:
            self._check("input", joint_q=state_in.joint_q, joint_qd=state_in.joint_qd)
        if self._fused_step_applies(data):
            self._fused_step(data, controls, state_in, state_out, dt)
        else:
            self._stage_kernels_step(data, controls, contacts, state_in, state_out, dt)
        self._check("integrate", joint_q=state_out.joint_q, joint_qd=state_out.joint_qd, body_q=state_out.body_q,
                    body_qd=state_out.body_qd)
        self.step_count += 1
        return state_out

    def _stage_kernels_step(self, data, controls, contacts, state_in, state_out, dt: float) -> None:
        """The step as a launch per stage (see the module doc): on a tape, on a GPU, with contacts, RK4 or
        ``check_finite``; otherwise :meth:`_fused_step` runs the same stages in one launch."""
        model, topo, dev = self.model, self.topology, self.model.device
        data.clear(taped=not linalg.forward_only(model.device))
        self._gather(state_in, data.q, data.qd)
        if self.integrator == "euler":
            stage = data.stages[0]
            # the velocity limits act on qd_n + dqd, with the matrix that gave dqd
            self._evaluate(stage, data.q, data.qd, controls, contacts, state_in, state_out, dt, dt, 1.0,
                           (stage.H if stage.with_contacts else stage.H0, data.qd, 1.0))
            self._advance(data.q, data.qd, stage.dqd, stage.dqd, 1.0, dt, True, data.q_next, data.qd_next,
                          rate_impulse=stage)
        else:
            self._rk4(data, controls, contacts, state_in, state_out, dt)
        if model.joint_coord_count or model.joint_dof_count:  # virtual free joints write no State joint entries
            n_q, n_qd = topo.coord_count if model.joint_coord_count else 0, topo.dof_count if model.joint_dof_count else 0
            wp.launch(kinematics.scatter_state_kernel, dim=max(n_q, n_qd),
                      inputs=[topo.tree, data.q_next, data.qd_next, n_q, n_qd],
                      outputs=[state_out.joint_q, state_out.joint_qd], device=dev)
        self._body_outputs(data.q_next, data.qd_next, 0, data.twist, state_out)

    def _fused_step_applies(self, data) -> bool:
        """Whether this step runs as :mod:`.fused_step`'s one launch: a CPU off the tape, Euler, no rigid contacts in
        the step's buffers and no ``check_finite`` (which checks each stage's output)."""
        return (self.integrator == "euler" and not data.with_contacts and not self.check_finite
                and linalg.forward_only(self.model.device))

    def _fused_step(self, data, controls, state_in, state_out, dt: float) -> None:
        """:func:`.fused_step.euler_step_forward_kernel`: the Euler step's stages in one launch (the same bits)."""
        m, topo, st = self.model, self.topology, data.stages[0]
        body_f, target_pos, target_vel, joint_f = controls
        rate = self.rate_limits
        limits = (st.limit_zero, st.limit_H, st.limit_L, st.limit_y, st.limit_dqd) if rate else (st.dqd,) * 5
        wp.launch(fused_step.euler_step_forward_kernel, dim=topo.articulation_count,
                  inputs=[joint_topology(m), m.body_com, m.body_mass, m.body_inertia, m.body_world, m.gravity,
                          m.joint_target_ke, m.joint_target_kd, m.joint_limit_lower, m.joint_limit_upper,
                          m.joint_limit_ke, m.joint_limit_kd, m.joint_armature, m.joint_damping, m.joint_friction,
                          m.joint_effort_limit, m.joint_velocity_limit, topo.tree, state_in.joint_q, state_in.body_q,
                          state_in.joint_qd, state_in.body_qd, body_f, target_pos, target_vel, joint_f, limits[0],
                          self.joint_friction_smoothing, dt, int(rate), int(m.joint_coord_count > 0),
                          int(m.joint_dof_count > 0)],
                  outputs=[data.q, data.qd, st.art_ref, st.body_X, st.body_I, st.body_v, st.body_a, st.body_fb,
                           st.dof_S, st.tau_joint, st.diag, st.body_Ic, st.body_fsub, st.bias, st.tau_contact, st.H0,
                           st.L0, st.y, st.dqd, *limits[1:], data.q_next, data.qd_next, data.twist, state_out.joint_q,
                           state_out.joint_qd, state_out.body_q, state_out.body_qd], device=m.device)

    def _rk4(self, data, controls, contacts, state_in, state_out, dt: float) -> None:
        """Classic RK4 of (q, qd), every force explicit: a_k = M^-1 (tau - C) at stage k's state.

        Velocity limits: each a_k takes the impulses that keep qd_n + dt a_k within them, solved with stage k's
        own M (internal there, as every other force of a_k): then every stage's rates, the weighted rates that
        move the positions and the new rates (convex combinations of qd_n + dt a_k) are within the limits. (A
        correction of the new rates alone, with M(q_n), would cancel the stages' limit-spring pushes with
        impulses at another configuration, and move the base by what they differ: 22 kg m/s on the A1's knee
        snap at dt 0.25 ms.)"""
        q, qd, st = data.q, data.qd, data.stages
        weights = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)  # of each stage's contact wrenches in body_f
        self._evaluate(st[0], q, qd, controls, contacts, state_in, state_out, 0.0, 1.0, weights[0], (st[0].H0, qd, dt))
        velocities = [qd]
        for k, h in enumerate((0.5 * dt, 0.5 * dt, dt)):
            qk, qdk = data.stage_qs[k], data.stage_qds[k]
            # stage k + 2: q_n (+) h v_(k+1), qd_n + h a_(k+1)
            self._advance(q, qd, st[k].dqd, velocities[k], h, h, False, qk, qdk, clamp=False, rate_impulse=st[k],
                          impulse_scale=h / dt)
            self._evaluate(st[k + 1], qk, qdk, controls, contacts, state_in, state_out, 0.0, 1.0, weights[k + 1],
                           (st[k + 1].H0, qd, dt))
            velocities.append(qdk)
        limited = [(s.limit_dqd if self.rate_limits else s.dqd) for s in st]
        wp.launch(dynamics.rk4_combine_kernel, dim=self.topology.dof_count,
                  inputs=[*velocities, *(s.dqd for s in st), *limited, 1.0 / dt, int(self.rate_limits)],
                  outputs=[data.u, data.dv], device=self.model.device)
        self._advance(q, qd, data.dv, data.u, dt, dt, False, data.q_next, data.qd_next)

    def _rate_limits(self, data, H, qd, dv, h_v: float) -> None:
        """data.limit_dqd (a StageData's): the rate change of the velocity limits' joint impulses where qd + h_v dv
        exceeds them (``H``: the matrix that gave dv; :func:`.dynamics.rate_limit_kernel`), with the
        differentiable kernels (off the tape on a CPU, ``dynamics.solve_forward_kernel`` does this in the
        solve's launch)."""
        if not self.rate_limits:
            return
        m, topo = self.model, self.topology
        wp.launch(dynamics.rate_limit_kernel, dim=topo.articulation_count,
                  inputs=[m.joint_velocity_limit, topo.tree, H, qd, dv, h_v],
                  outputs=[data.limit_coupling, data.limit_H, data.limit_rhs], device=m.device)
        linalg.factor(topo, data.limit_H, data.limit_partial, data.limit_L)
        linalg.solve(topo, data.limit_L, data.limit_rhs, data.limit_zero, data.limit_zero, 1.0, data.limit_partial_y,
                     data.limit_y, data.limit_partial_x, data.limit_dqd)
        self._check("velocity limits", limit_H=data.limit_H, limit_dqd=data.limit_dqd)

    def _advance(self, q, qd, dv, u, h_v: float, h_q: float, use_new_velocity: bool, q_out, qd_out,
                 clamp: bool = True, rate_impulse=None, impulse_scale: float = 1.0) -> None:
        """``rate_impulse``: the StageData whose velocity limits' rate change (times ``impulse_scale``) joins qd'
        (:meth:`_rate_limits`)."""
        m, topo = self.model, self.topology
        with_impulse = rate_impulse is not None and self.rate_limits
        wp.launch(dynamics.advance_kernel, dim=topo.slot_count,
                  inputs=[joint_topology(m), m.joint_velocity_limit, m.body_com, topo.tree, q, qd, dv, u,
                          rate_impulse.limit_dqd if with_impulse else dv, h_v, h_q, int(use_new_velocity), int(clamp),
                          int(with_impulse), float(impulse_scale)],
                  outputs=[q_out, qd_out], device=m.device)

    def _evaluate(self, stage, q, qd, controls, contacts, state_in, state_out, implicit_dt: float, solve_dt: float,
                  wrench_weight: float, limits: tuple) -> None:
        """One evaluation of the dynamics at (q, qd) into ``stage``: stage.dqd = (H)^-1 solve_dt (tau - C), then the
        velocity limits' rate change (:meth:`_rate_limits`) with ``limits`` = (the matrix, the rates, h_v).

        ``implicit_dt``: the dt of the implicit terms (0: every force explicit, H = M + armature, as RK4 needs).
        """
        model, topo, dev = self.model, self.topology, self.model.device
        body_f, target_pos, target_vel, joint_f = controls
        wp.launch(kinematics.forward_kinematics_kernel, dim=topo.articulation_count,
                  inputs=[joint_topology(model), model.body_com, model.body_mass, model.body_inertia, model.body_world,
                          model.gravity, topo.tree, q, qd, body_f],
                  outputs=[stage.art_ref, stage.body_X, stage.body_I, stage.body_v, stage.body_a, stage.body_fb,
                           stage.dof_S], device=dev)
        self._check("forward kinematics", body_X=stage.body_X, body_fb=stage.body_fb)
        wp.launch(dynamics.joint_forces_kernel, dim=topo.dof_count,
                  inputs=[model.joint_target_ke, model.joint_target_kd, model.joint_limit_lower,
                          model.joint_limit_upper, model.joint_limit_ke, model.joint_limit_kd, model.joint_armature,
                          model.joint_damping, model.joint_friction, model.joint_effort_limit, topo.tree, q, qd,
                          target_pos, target_vel, joint_f, self.joint_friction_smoothing, implicit_dt],
                  outputs=[stage.tau_joint, stage.diag], device=dev)
        self._check("joint forces", tau_joint=stage.tau_joint, diag=stage.diag)
        with_contacts = stage.with_contacts
        wp.launch(dynamics.composite_kernel, dim=topo.articulation_count,
                  inputs=[topo.tree, stage.body_I, stage.body_fb, stage.dof_S, stage.diag, int(with_contacts)],
                  outputs=[stage.body_Ic, stage.body_fsub, stage.bias, stage.H0, stage.H if with_contacts else stage.H0],
                  device=dev)
        if not linalg.forward_only(dev):  # on a tape or a GPU: the differentiable kernels, one stage each
            linalg.factor(topo, stage.H0, stage.partial0, stage.L0)
            self._check("mass matrix", H0=stage.H0, L0=stage.L0, bias=stage.bias)
            L = stage.L0
            if with_contacts:
                self._contacts(stage, contacts, state_in, state_out, implicit_dt, wrench_weight)
                linalg.factor(topo, stage.H, stage.partial, stage.L)
                self._check("contacts", tau_contact=stage.tau_contact, H=stage.H, L=stage.L)
                L = stage.L
            linalg.solve(topo, L, stage.tau_joint, stage.tau_contact, stage.bias, solve_dt, stage.partial_y, stage.y,
                         stage.partial_x, stage.dqd)
            self._rate_limits(stage, limits[0], limits[1], stage.dqd, limits[2])
            return
        # a CPU off the tape: the last factor, the solve and the velocity limits in one launch (the contacts need
        # H0's factor first; an articulation no contact touched reuses it for H's)
        A, L = stage.H0, stage.L0
        if with_contacts:
            linalg.factor(topo, stage.H0, stage.partial0, stage.L0)
            self._check("mass matrix", H0=stage.H0, L0=stage.L0, bias=stage.bias)
            self._contacts(stage, contacts, state_in, state_out, implicit_dt, wrench_weight)
            A, L = stage.H, stage.L
        H_limits, limit_qd, h_v = limits
        rate = self.rate_limits
        wp.launch(dynamics.solve_forward_kernel, dim=topo.articulation_count,
                  inputs=[model.joint_velocity_limit, topo.tree, A, stage.H0, stage.L0, stage.tau_joint,
                          stage.tau_contact, stage.bias, H_limits, limit_qd,
                          stage.limit_zero if rate else stage.dqd, int(with_contacts), solve_dt, int(rate), h_v],
                  outputs=[L, stage.y, stage.dqd, *((stage.limit_H, stage.limit_L, stage.limit_y, stage.limit_dqd)
                                                      if rate else (stage.dqd,) * 4)], device=dev)
        if with_contacts:
            self._check("contacts", tau_contact=stage.tau_contact, H=stage.H, L=stage.L)
        else:
            self._check("mass matrix", H0=stage.H0, L0=stage.L0, bias=stage.bias)
        if rate:  # (limit_H: written only where a rate is beyond its limit, so not checked here)
            self._check("velocity limits", limit_dqd=stage.limit_dqd)

    def _contacts(self, stage, contacts, state_in, state_out, dt: float, wrench_weight: float) -> None:
        model, topo, dev = self.model, self.topology, self.model.device
        lists = [rigid_contacts(contacts)]  # the kernel structs of the contact lists and the shapes (kernel_args)
        shapes = [shape_geometry(model)]
        max_dofs = max(topo.max_dofs, 1)
        # on a CPU one thread loops over the contacts found, not one per slot of the capacity (the chain's 2,304
        # mostly empty slots; rigid_contact_threads)
        threads = rigid_contact_threads(dev, contacts.rigid_contact_max)
        if threads == 0:
            return
        jacobian = (contact_stage.contact_jacobian_forward_kernel if linalg.forward_only(dev)
                    else contact_stage.contact_jacobian_kernel)
        wp.launch(jacobian, dim=threads,
                  inputs=[*shapes, topo.tree, stage.body_X, stage.art_ref, stage.dof_S, stage.L0, *lists,
                          model.rigid_contact_margin, max_dofs, threads],
                  outputs=[stage.z_partial, stage.z, stage.inv_mass, stage.z_sum], device=dev)
        wp.launch(contact_stage.contact_force_kernel, dim=threads,
                  inputs=[*shapes, model.shape_material_mu, model.body_com, topo.tree, stage.body_X, stage.body_v,
                          state_in.body_qd, stage.art_ref, stage.dof_S, stage.z, stage.inv_mass, stage.z_sum, *lists,
                          model.rigid_contact_margin, self.contact_timeconst, self.contact_dampratio,
                          self.friction_smoothing, max_dofs, dt, wrench_weight, threads],
                  outputs=[stage.row_sum, stage.tau_contact, stage.H, state_out.body_f], device=dev)


LIMIT_START_MARGIN = 0.01  # [rad or m] beyond a limit at the first step: more than a resting load presses in


def warn_start_outside_limits(model, joint_q) -> None:
    """A :class:`inertia.StabilityWarning` naming the revolute and prismatic joints whose coordinate in
    ``joint_q`` (a first step's) lies beyond a limit by more than :data:`LIMIT_START_MARGIN`.

    Their limit springs push them back with ke x, which for a stiff spring on light links (ke dt^2 above
    the link's inertia, as the default ke = 1e4 on a quadruped's calf) is a snap within a step or two: a
    semi-implicit step resolves it only to first order in dt (a floating base's momentum included) and
    explicit RK4 not at all (unless velocity limits bound it). A StabilityWarning: a step that cannot resolve
    the dynamics it is handed (compile_ahead's dry run on scratch states does not repeat it; the first real
    step warns)."""
    types, q_start, qd_start = (a.numpy() for a in (model.joint_type, model.joint_q_start, model.joint_qd_start))
    lower, upper, ke = (a.numpy() for a in (model.joint_limit_lower, model.joint_limit_upper, model.joint_limit_ke))
    found = []
    for j, t in enumerate(types):
        if t != JOINT_REVOLUTE and t != JOINT_PRISMATIC:
            continue
        x, d = float(joint_q[q_start[j]]), qd_start[j]
        excess = max(x - upper[d], lower[d] - x)
        if excess > LIMIT_START_MARGIN and ke[d] > 0.0:
            side, limit = ("upper", upper[d]) if x > upper[d] else ("lower", lower[d])
            unit = "rad" if t == JOINT_REVOLUTE else "m"
            found.append((excess * ke[d], f"'{model.joint_label[j]}' {excess:.3g} {unit} beyond its {side} limit "
                                          f"{limit:.4g}"))
    if not found:
        return
    names = "; ".join(text for _, text in found[:4]) + (f"; and {len(found) - 4} more" if len(found) > 4 else "")
    warn(f"FeatherstoneSolver: {len(found)} joint(s) start outside their limits: {names}. Their limit springs "
         f"push them back with ke x (up to {max(f for f, _ in found):.3g} N m or N here): where ke dt^2 outweighs "
         "the links' inertia, a snap within a step or two (or at the joints' velocity limits), which the "
         "semi-implicit step resolves only to first order in dt (a floating base's momentum and position "
         "included) and explicit RK4, without velocity limits to bound it, not at all. MuJoCo's and PyBullet's "
         "limit constraints pull such a start back over their time constant instead. Start within the limits "
         "(State.joint_q, then sync_bodies), or soften these joints' joint_limit_ke.", StabilityWarning)


def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"FeatherstoneSolver: {name} must be a finite number > 0, got {value!r}")
    return float(value)
