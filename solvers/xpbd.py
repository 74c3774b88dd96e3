"""XPBDSolver: extended position-based dynamics (Macklin, Müller & Chentanez 2016), differentiable.

One step reads as its stages: take the external forces from Control, predict
positions, then run ``iterations`` Jacobi iterations of every constraint
(distance constraints for springs, membrane constraints for triangles,
dihedral constraints for bending edges, neo-Hookean constraints for
tetrahedra, contacts against shapes and between particles) and apply their corrections,
then recover velocities from the positions. Multipliers start at zero every
step.

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

import warp as wp

from ..integrators import predict_positions, update_velocities
from .constraints import (
    apply_corrections,
    jacobi_scales,
    solve_distance_constraints,
    solve_particle_contacts,
    solve_bending_constraints,
    solve_shape_contacts,
    solve_tet_constraints,
    solve_triangle_constraints,
)
from .forces import apply_control_forces
from .solver import SolverBase


class _IterationBuffers:
    """The iterates x_0..x_K, corrections and spring multipliers of one step."""

    def __init__(self, model, iterations: int, requires_grad: bool):
        n, s, t = model.particle_count, model.spring_count, model.tet_count
        tri, e = model.tri_count, model.edge_count
        with wp.ScopedDevice(model.device):
            self.x = wp.zeros((iterations + 1, n), dtype=wp.vec3, requires_grad=requires_grad)
            self.delta = wp.zeros((iterations, n), dtype=wp.vec3, requires_grad=requires_grad)
            self.spring_lambda = wp.zeros((iterations + 1, max(s, 1)), dtype=float, requires_grad=requires_grad)
            # (deviatoric, volumetric) multipliers per tet
            self.tet_lambda = wp.zeros((iterations + 1, max(t, 1)), dtype=wp.vec2, requires_grad=requires_grad)
            self.tri_lambda = wp.zeros((iterations + 1, max(tri, 1)), dtype=wp.vec2, requires_grad=requires_grad)
            self.edge_lambda = wp.zeros((iterations + 1, max(e, 1)), dtype=float, requires_grad=requires_grad)
        self.iterations, self.requires_grad = iterations, requires_grad

    def zero_grad(self) -> None:
        if self.requires_grad:
            for a in self._arrays():
                a.grad.zero_()

    def bytes(self) -> int:
        per = 1 + (1 if self.requires_grad else 0)
        return per * sum(a.capacity for a in self._arrays())

    def _arrays(self):
        return (self.x, self.delta, self.spring_lambda, self.tri_lambda, self.edge_lambda, self.tet_lambda)


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
    steps give the model a ``contact_margin`` of at least the distance a
    particle travels in one step.

    """

    def __init__(self, model, iterations: int = 10, relaxation: float = 1.0, splitting: str = "sqrt",
                 check_finite: bool = False):
        super().__init__(model, check_finite)
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

    def state_buffer_bytes(self, requires_grad: bool) -> int:
        """Bytes of the per-iteration buffers that every output state of a step carries."""
        m, k = self.model, self.iterations
        lam = 4 * max(m.spring_count, 1) + 8 * max(m.tri_count, 1) + 4 * max(m.edge_count, 1) + 8 * max(m.tet_count, 1)
        values = (k + 1) * m.particle_count * 12 + k * m.particle_count * 12 + (k + 1) * lam
        return values * (2 if requires_grad else 1)

    def prepare_state(self, state) -> None:
        """Allocate the per-iteration buffers of ``state`` now instead of at its first step."""
        self._buffers(state)

    def _buffers(self, state) -> _IterationBuffers:
        buf = getattr(state, "_xpbd_buffers", None)
        if buf is None or buf.iterations != self.iterations or buf.requires_grad != state.requires_grad():
            buf = _IterationBuffers(self.model, self.iterations, state.requires_grad())
            state._xpbd_buffers = buf
        return buf

    def step(self, state_in, state_out, control, contacts, dt: float):
        """Advance ``state_in`` by ``dt`` seconds into ``state_out``. Contacts come from ``model.collide``."""
        self._validate(state_in, state_out, control, contacts, dt)
        model = self.model
        it = self._buffers(state_out)
        if self.check_finite:
            self._check("input", particle_q=state_in.particle_q, particle_qd=state_in.particle_qd)

        apply_control_forces(model, control, state_out.particle_f)
        predict_positions(model, state_in, state_out.particle_f, dt, it.x[0])
        self._check("predict", x=it.x[0])
        it.delta.zero_()
        for k in range(self.iterations):
            solve_distance_constraints(model, state_in, it.x[k], self.scales["spring"], it.spring_lambda[k],
                                       it.spring_lambda[k + 1], dt, it.delta[k])
            solve_triangle_constraints(model, state_in, it.x[k], self.scales["tri"], it.tri_lambda[k],
                                       it.tri_lambda[k + 1], dt, it.delta[k])
            solve_bending_constraints(model, state_in, it.x[k], self.scales["edge"], it.edge_lambda[k],
                                      it.edge_lambda[k + 1], dt, it.delta[k])
            solve_tet_constraints(model, state_in, it.x[k], self.scales["tet"], it.tet_lambda[k], it.tet_lambda[k + 1],
                                  dt, it.delta[k])
            solve_shape_contacts(model, state_in, it.x[k], contacts, it.delta[k])
            solve_particle_contacts(model, state_in, it.x[k], contacts, it.delta[k])
            apply_corrections(model, it.x[k], it.delta[k], it.x[k + 1])
            self._check(f"iteration {k}", x=it.x[k + 1])
        update_velocities(model, state_in, it.x[self.iterations], dt, state_out)
        self._check("velocity update", particle_q=state_out.particle_q, particle_qd=state_out.particle_qd)

        self.step_count += 1
        return state_out
