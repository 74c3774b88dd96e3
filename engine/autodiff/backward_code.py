"""Backward code compiled when gradients are first wanted, not before.

Warp compiles a module's forward and adjoint (backward) code together, and the adjoints are most of the
compile time of a differentiable kernel: a cold start of the 32 x 32 cloth takes 7.3 s with them and
5.5 s without (``benchmarks/cold_start.py``). A plain forward simulation never runs them. So inertia's
differentiable kernel modules start forward-only, and the first time gradients are wanted, every one of
them is switched to forward + backward (:func:`enable_gradients`): Warp recompiles each module at its
next launch, or loads it from the kernel cache.

Gradients are wanted when a ``wp.Tape`` records a solver step (``autodiff.tape.guard_step``),
``eval_ik`` or the FeatherstoneSolver's ``sync_bodies``; when ``model.state(requires_grad=True)`` makes a
state that carries gradients; and when a :class:`~inertia.Rollout` runs a backward pass. A launch
recorded before the switch still gets its adjoint: Warp looks a backward kernel up when the adjoint
launches, after the switch. The forward code is the same either way, bit for bit
(``tests/test_backward_code.py``). On CUDA drivers older than 12.3, which cannot compile inside a graph
capture, call :func:`enable_gradients` before capturing a recorded step yourself.

Detection and other kernels that are never differentiated keep ``enable_backward=False`` for good and
are not registered here.
"""

from __future__ import annotations

import warp as wp

_modules: list = []  # the Warp modules of inertia's differentiable kernels, in registration order
_enabled = False


def on_demand(module) -> None:
    """Compile the backward code of Warp ``module`` (a name, e.g. ``__name__`` at the top of a kernel
    file, or a ``wp.Module``, e.g. a ``module="unique"`` kernel's ``kernel.module``) only once gradients
    are wanted."""
    if isinstance(module, str):
        module = wp.get_module(module)
    if any(m is module for m in _modules):
        return
    _modules.append(module)
    if not _enabled:
        wp.set_module_options({"enable_backward": False}, module)


def enable_gradients() -> None:
    """Compile inertia's kernels with their backward code from now on (for the rest of the process).

    Called for you when a ``wp.Tape`` records a step and when a Rollout that needs gradients is built;
    call it yourself before recording inertia's kernels on a tape some other way. Costs nothing once
    enabled; the first call makes every module already compiled forward-only compile again at its next
    launch (a few seconds with a cold kernel cache, well under one with a warm one)."""
    global _enabled
    if _enabled:
        return
    _enabled = True
    for m in _modules:
        wp.set_module_options({"enable_backward": True}, m)


def gradients_enabled() -> bool:
    """Whether inertia's kernels compile with their backward code (:func:`enable_gradients` was called)."""
    return _enabled


def registered_modules() -> tuple:
    """The Warp modules whose backward code compiles on demand (for tests and benchmarks)."""
    return tuple(_modules)
