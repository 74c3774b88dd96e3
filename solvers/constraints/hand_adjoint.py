"""Hand-written adjoints for the XPBD constraint kernels that dominate a backward pass.

Warp's generated adjoint of a kernel replays the kernel's forward code, and inside it the adjoint of each
``wp.func`` replays that function's forward code again before reversing it: the membrane and bending kernels,
a few functions deep, cost 2.7x and 2.6x their forward kernel in their generated adjoints in a 32x32 cloth's
backward pass. Their hand-written adjoints (``triangles.py``, ``bending.py``) compute the forward values once
and reverse them with the closed-form derivatives: 2.0-2.2x and 2.0x (``benchmarks/README.md``, the XPBD
section, for how it was measured and the rollout's backward/forward ratio). The particle-shape contacts of a model
whose shapes are all static planes (``particle_contacts.py``): 3.0x -> 1.1x.

An element kind that has one launches its forward kernel through :func:`launch`: off a tape as usual; while a
``wp.Tape`` records, unrecorded, with a :class:`HandAdjoint` recorded in its place (``tape.record_func``), which
launches the adjoint kernel in the backward pass. The adjoint kernel takes the forward kernel's arguments,
then the gradients of its outputs, then the gradients of its array inputs (None where an array has none: the
kernel skips it), and adds into the last; like Warp's adjoint of an array store, it consumes (zeroes) the
gradient of each output it stored, and it reads the gradient of each output it atomically added into.

Each adjoint kernel lives in a Warp module of its own (:func:`module_of`): a forward simulation never
compiles it (in the kind's module it doubled the membrane's and the bending's compile, +0.7 s of an XPBD
cloth's cold start summed over the two compiling threads).

Tests compare each adjoint kernel with Warp's generated one on the same arguments, every gradient included
(``tests/test_xpbd_hand_adjoints.py``), and rollouts through them with central differences (``test_xpbd.py``).
"""

from __future__ import annotations

import warp as wp

from ...autodiff.tape import recording_tape


def module_of(kind_module: str) -> str:
    """The Warp module of the hand-written adjoint kernels of the constraint kind in ``kind_module`` (a module of
    their own, forward-only for good: they are the adjoint), compiled at their first launch, in a backward pass."""
    name = f"{kind_module}.adjoints"
    wp.set_module_options({"enable_backward": False}, name)
    return name


class HandAdjoint:
    """The backward pass of one forward launch recorded on a tape: its hand-written ``adjoint`` kernel.

    ``kernel``, ``inputs`` and ``outputs`` are the forward launch's (so a check of the gradients a backward
    pass writes can name the kernel, as for a recorded launch: ``Rollout(check_finite=True)``)."""

    __slots__ = ("kernel", "adjoint", "dim", "inputs", "outputs", "device")

    def __init__(self, kernel, adjoint, dim, inputs, outputs, device):
        self.kernel, self.adjoint, self.dim = kernel, adjoint, dim
        self.inputs, self.outputs, self.device = list(inputs), list(outputs), device

    def __call__(self) -> None:
        adj_outputs = [o.grad for o in self.outputs]
        if all(g is None for g in adj_outputs):
            return  # nothing downstream wants a gradient
        adj_inputs = [a.grad if isinstance(a, wp.array) else None for a in self.inputs if isinstance(a, wp.array)]
        wp.launch(self.adjoint, dim=self.dim, inputs=[*self.inputs, *adj_outputs, *adj_inputs], device=self.device)


def launch(kernel, adjoint, dim: int, inputs: list, outputs: list, device) -> None:
    """``wp.launch(kernel, ...)``; while a tape records, its backward pass is ``adjoint`` (:class:`HandAdjoint`)."""
    tape = recording_tape()
    if tape is None:
        wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device)
        return
    wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_tape=False)
    tape.record_func(HandAdjoint(kernel, adjoint, dim, inputs, outputs, device),
                     arrays=[a for a in (*inputs, *outputs)  # (Warp refuses an empty array's gradient here)
                             if isinstance(a, wp.array) and a.grad is not None and a.size > 0])
