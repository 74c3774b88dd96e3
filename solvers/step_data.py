"""What a solver keeps per step, declared once: its buffers, their sizes, and the data its stages share.

A solver declares the arrays one step needs beyond the State (XPBD: every Jacobi iterate, correction
and multiplier; the semi-implicit solver: the bodies' contact counts) as a :class:`StepBufferSpec` of
:class:`Buffer` declarations, each with a dtype and its dimensions named by what they count
(``"particle"``, ``"iterate"``, ...). The spec allocates them (:meth:`StepBufferSpec.allocate`) and
counts their bytes (:meth:`StepBufferSpec.nbytes`) from the same declaration, so a memory estimate
cannot drift from what a step allocates.

The buffers of a step belong to its *output* state, ``state_out.step_buffers`` (allocated the first
time a state is written, reused from then on: a steady loop allocates nothing, and a recorded rollout,
which writes a new State per step, keeps exactly the buffers its backward pass needs);
``State.zero_grad`` zeroes their gradients with the state's.

Stages: every stage of a step is a function ``stage(model, data, *args)`` of the model and the
step's :class:`StepData` (inputs, outputs, buffers, the solver's settings and kernel structs), declared
with :func:`stage`, which names the stage and the arrays it writes: with ``check_finite`` on, those are
checked for NaN/inf after it runs (a host read: debugging only), so a step's code lists its stages
and nothing else.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace

import warp as wp

from ..diagnostics import check_finite


@dataclass(frozen=True)
class Buffer:
    """One declared per-step array: ``dims`` name its dimensions (sizes given at allocation)."""

    name: str
    dtype: object
    dims: tuple
    doc: str
    grad: bool = True  # allocated with a gradient when the step is recorded (integer counts: never)


class StepBufferSpec:
    """A solver's per-step buffers: allocation and byte counts from one declaration."""

    def __init__(self, *buffers: Buffer):
        names = [b.name for b in buffers]
        if len(set(names)) != len(names):
            raise ValueError(f"StepBufferSpec: duplicate buffer names in {names}")
        self.buffers = buffers

    def shape(self, buffer: Buffer, sizes: dict) -> tuple:
        return tuple(int(sizes[d]) for d in buffer.dims)

    def nbytes(self, sizes: dict, requires_grad: bool) -> int:
        """Bytes the buffers of one step take (gradients included when the step is recorded)."""
        total = 0
        for b in self.buffers:
            n = math.prod(self.shape(b, sizes)) * wp.types.type_size_in_bytes(b.dtype)
            total += n * (2 if requires_grad and b.grad else 1)
        return total

    def allocate(self, sizes: dict, device, requires_grad: bool) -> "StepBuffers":
        return StepBuffers(self, sizes, device, requires_grad)


class StepBuffers:
    """The allocated buffers of a :class:`StepBufferSpec`: one ``wp.array`` attribute per declared buffer.

    ``rows.<name>[k]``: row k of a buffer with more than one dimension (the views are made once here:
    a view costs microseconds of Python, and a step reads dozens).
    """

    def __init__(self, spec: StepBufferSpec, sizes: dict, device, requires_grad: bool):
        self.spec, self.sizes, self.requires_grad = spec, sizes, bool(requires_grad)
        rows = {}
        with wp.ScopedDevice(device):
            for b in spec.buffers:
                a = wp.zeros(spec.shape(b, sizes), dtype=b.dtype, requires_grad=self.requires_grad and b.grad)
                setattr(self, b.name, a)
                if a.ndim > 1:
                    rows[b.name] = tuple(a[k] for k in range(a.shape[0]))
        self.rows = SimpleNamespace(**rows)

    def fits(self, spec: StepBufferSpec, sizes: dict, requires_grad: bool) -> bool:
        return self.spec is spec and self.requires_grad == requires_grad and (self.sizes is sizes
                                                                              or self.sizes == sizes)

    def arrays(self):
        return [getattr(self, b.name) for b in self.spec.buffers]

    def zero_grad(self) -> None:
        for a in self.arrays():
            if a.grad is not None:
                a.grad.zero_()

    def nbytes(self) -> int:
        """Bytes allocated (gradients included): what :meth:`StepBufferSpec.nbytes` predicts."""
        return sum(a.capacity + (a.grad.capacity if a.grad is not None else 0) for a in self.arrays())


class StepData:
    """Everything the stages of one step read and write, passed to each as ``data``.

    ``state_in`` / ``state_out`` / ``control`` / ``contacts`` / ``dt`` [s]: the step's arguments;
    ``buffers``: the step's :class:`StepBuffers` (on ``state_out``); ``solver``: the solver (its
    settings); ``shapes`` / ``joints`` / ``penalty_law``: the kernel structs of the model's shapes,
    joints and penalty contact settings; ``rigid_contacts`` / ``soft_contacts`` / ``particle_pairs``:
    those of ``contacts``' lists (None without contacts); ``check_finite``, ``step_index``: for the
    finite checks of :func:`stage`.
    """

    __slots__ = ("state_in", "state_out", "control", "contacts", "dt", "buffers", "solver", "shapes", "joints",
                 "penalty_law", "rigid_contacts", "soft_contacts", "particle_pairs", "check_finite", "step_index")

    def __init__(self, state_in, state_out, control, contacts, dt, buffers, solver, shapes, joints, penalty_law,
                 rigid_contacts, soft_contacts, particle_pairs):
        self.state_in, self.state_out, self.control, self.contacts = state_in, state_out, control, contacts
        self.dt, self.buffers, self.solver = dt, buffers, solver
        self.shapes, self.joints, self.penalty_law = shapes, joints, penalty_law
        self.rigid_contacts, self.soft_contacts, self.particle_pairs = rigid_contacts, soft_contacts, particle_pairs
        self.check_finite, self.step_index = solver.check_finite, solver.step_count

    def joint_controls(self) -> tuple:
        """(target_pos, target_vel, effort) per joint dof: the Control's arrays, the solver's zeros for missing ones."""
        control, zeros = self.control, self.solver.zero_dofs
        if control is None:
            return zeros, zeros, zeros
        return tuple(a if a is not None else zeros
                     for a in (control.joint_target_pos, control.joint_target_vel, control.joint_f))


def stage(name: str, writes=None):
    """Declare a step stage ``fn(model, data, *args)``.

    ``name``: how errors name it (``str.format``-ed with the stage's extra arguments, e.g.
    ``"iteration {0}"``); ``writes(data, *args)``: ``{label: array}`` of what it wrote, checked for
    non-finite values after it runs when the step's ``data.check_finite`` is on (None: nothing to check).
    """

    def declare(fn):
        @functools.wraps(fn)
        def run(model, data, *args):
            fn(model, data, *args)
            if writes is not None and data.check_finite:
                check_finite(name.format(*args), data.step_index, **writes(data, *args))

        run.stage_name = name
        return run

    return declare
