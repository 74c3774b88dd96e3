"""What one step of the FeatherstoneSolver computes, kept on the step's output state.

Every intermediate the backward pass needs (coordinates, poses, motion subspaces, spatial inertias and
twists, bias forces, the matrices and their factors, the contact Jacobian solves) is an array of the
``StepData`` of the state the step writes (``state.step_buffers``), allocated the first time a state
is written (or by ``FeatherstoneSolver.prepare_state``) and reused by later steps into that state. A
recorded rollout uses a new state per step, so it holds exactly one ``StepData`` per recorded step and
nothing is overwritten before the backward pass reads it.

A step evaluates the dynamics once (semi-implicit Euler) or four times (RK4): one ``StageData`` per
evaluation. The arrays marked "zero on entry" gather sums with atomic adds; :meth:`StepData.clear`
zeroes them at the start of each step (memsets, so ``step()`` stays capturable).
"""

from __future__ import annotations

import warp as wp

# (name, dtype, size key): size keys "coord", "dof", "matrix", "body", "art", "zdof" (contact, side, dof),
# "side" (contact, side), "contact"
_STAGE = (
    ("art_ref", wp.vec3, "art"), ("body_X", wp.transform, "body"), ("body_I", wp.spatial_matrix, "body"),
    ("body_Ic", wp.spatial_matrix, "body"), ("body_v", wp.spatial_vector, "body"),
    ("body_a", wp.spatial_vector, "body"), ("body_fb", wp.spatial_vector, "body"),
    ("body_fsub", wp.spatial_vector, "body"), ("dof_S", wp.spatial_vector, "dof"), ("tau_joint", float, "dof"),
    ("diag", float, "dof"), ("bias", float, "dof"), ("tau_contact", float, "dof"), ("H0", float, "matrix"),
    ("L0", float, "matrix"), ("partial0", float, "matrix"), ("y", float, "dof"), ("partial_y", float, "dof"),
    ("partial_x", float, "dof"), ("dqd", float, "dof"),
)
_STAGE_CONTACT = (
    ("H", float, "matrix"), ("L", float, "matrix"), ("partial", float, "matrix"), ("z", float, "zdof"),
    ("z_partial", float, "zdof"), ("inv_mass", float, "side"), ("z_sum", float, "dof"), ("row_sum", float, "contact"),
)
_STAGE_ZERO = ("body_Ic", "body_fsub", "tau_contact")
_STAGE_CONTACT_ZERO = ("inv_mass", "z_sum", "row_sum")
# zeroed only for the taped kernels: the forward-only twins a CPU step runs off the tape (linalg.forward_only)
# sum in locals and never touch these (each memset is a graph node: 7 of them were a fifth of a 7-DoF arm's step)
_STAGE_TAPED_ZERO = ("partial0", "partial_y", "partial_x")
_STAGE_CONTACT_TAPED_ZERO = ("partial", "z_partial")
# the step's own: gathered input, result, the output's twists (scratch of the body outputs), the external
# wrench on each body (the Control's plus the particles' contact reactions; :mod:`.particles`)
_STEP = (("q", float, "coord"), ("qd", float, "dof"), ("q_next", float, "coord"), ("qd_next", float, "dof"),
         ("twist", wp.spatial_vector, "body"), ("body_f_ext", wp.spatial_vector, "body"))
# RK4 only: the states of stages 2..4 and the weighted rates
_RK4 = (("stage_q", float, "coord3"), ("stage_qd", float, "dof3"), ("u", float, "dof"), ("dv", float, "dof"))
# a model with velocity limits, per stage: their impulses' system, its factor and solve
# (dynamics.rate_limit_kernel; RK4 limits each stage's rates as Euler its new ones)
_LIMIT = (("limit_coupling", float, "dof"), ("limit_H", float, "matrix"), ("limit_rhs", float, "dof"),
          ("limit_partial", float, "matrix"), ("limit_L", float, "matrix"), ("limit_partial_y", float, "dof"),
          ("limit_y", float, "dof"), ("limit_partial_x", float, "dof"), ("limit_dqd", float, "dof"),
          ("limit_zero", float, "dof"))
_LIMIT_TAPED_ZERO = ("limit_coupling", "limit_partial", "limit_partial_y", "limit_partial_x")
_FLOATS = {float: 1, wp.vec3: 3, wp.transform: 7, wp.spatial_vector: 6, wp.spatial_matrix: 36}


def _sizes(model, topology, rigid_contact_max: int) -> dict:
    nc = max(rigid_contact_max, 1)
    return {"coord": topology.coord_count, "dof": topology.dof_count, "matrix": topology.matrix_size,
            "body": model.body_count, "art": topology.articulation_count,
            "zdof": nc * 2 * max(topology.max_dofs, 1), "side": nc * 2, "contact": nc,
            "coord3": 3 * topology.coord_count, "dof3": 3 * topology.dof_count}


def _allocate(obj, specs, sizes, requires_grad) -> tuple:
    for name, dtype, key in specs:
        setattr(obj, name, wp.zeros(max(sizes[key], 1), dtype=dtype, requires_grad=requires_grad))
    return tuple(getattr(obj, n) for n, _, _ in specs)


def _bytes(specs, sizes) -> int:
    return sum(4 * _FLOATS[dtype] * max(sizes[key], 1) for _, dtype, key in specs)


def step_data_bytes(model, topology, stages: int, requires_grad: bool, rigid_contact_max: int = 0,
                    rate_limits: bool = False) -> int:
    """Bytes of the StepData of one output state (gradients included when ``requires_grad``)."""
    sizes = _sizes(model, topology, rigid_contact_max)
    stage = _bytes(_STAGE + (_STAGE_CONTACT if rigid_contact_max > 0 else ()) + (_LIMIT if rate_limits else ()),
                   sizes)
    values = stages * stage + _bytes(_STEP + (_RK4 if stages > 1 else ()), sizes)
    return values * (2 if requires_grad else 1)


class StageData:
    """One evaluation of the dynamics (see :mod:`.solver`): kinematics, forces, matrices, factors, the solve."""

    def __init__(self, sizes, with_contacts: bool, body_count: int, requires_grad: bool, rate_limits: bool):
        specs = _STAGE + (_STAGE_CONTACT if with_contacts else ()) + (_LIMIT if rate_limits else ())
        self.arrays = _allocate(self, specs, sizes, requires_grad)
        self.with_contacts = with_contacts
        self.zero = tuple(getattr(self, n) for n in _STAGE_ZERO + (_STAGE_CONTACT_ZERO if with_contacts else ()))
        self.taped_zero = tuple(getattr(self, n) for n in _STAGE_TAPED_ZERO + (
            _STAGE_CONTACT_TAPED_ZERO if with_contacts else ()) + (_LIMIT_TAPED_ZERO if rate_limits else ()))


class StepData:
    """The per-step arrays of one output state (see the module docstring)."""

    def __init__(self, model, topology, stages: int, rigid_contact_max: int, requires_grad: bool,
                 rate_limits: bool = False):
        self.rigid_contact_max = int(rigid_contact_max)
        self.requires_grad = bool(requires_grad)
        self.with_contacts = self.rigid_contact_max > 0
        self.rate_limits = bool(rate_limits)
        sizes = _sizes(model, topology, self.rigid_contact_max)
        with wp.ScopedDevice(model.device):
            self.stages = [StageData(sizes, self.with_contacts, model.body_count, self.requires_grad, self.rate_limits)
                           for _ in range(stages)]
            arrays = _allocate(self, _STEP + (_RK4 if stages > 1 else ()), sizes, self.requires_grad)
        self._arrays = arrays + tuple(a for st in self.stages for a in st.arrays)
        if stages > 1:  # per-stage views of stages 2..4's states
            nc, nd = max(topology.coord_count, 1), max(topology.dof_count, 1)
            self.stage_qs = [self.stage_q[k * nc:(k + 1) * nc] for k in range(3)]
            self.stage_qds = [self.stage_qd[k * nd:(k + 1) * nd] for k in range(3)]

    @property
    def stage_count(self) -> int:
        return len(self.stages)

    def clear(self, taped: bool = True) -> None:
        """Zero the arrays that gather sums (memsets: capturable); ``taped=False``: not those only the taped
        kernels sum into (a step that runs the forward-only twins, ``linalg.forward_only``)."""
        for st in self.stages:
            for a in st.zero + (st.taped_zero if taped else ()):
                a.zero_()

    def zero_grad(self) -> None:
        if self.requires_grad:
            for a in self._arrays:
                a.grad.zero_()
