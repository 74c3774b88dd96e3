"""Denormal floats flushed to zero while a backward pass runs on a CPU.

Adjoint terms that scale with a nearly satisfied constraint's tiny multiplier step (a cloth lying at rest:
bending steps ~1e-14, terms of its gradient's adjoint ~1e-32) meet the tiny tangential components of that
constraint's gradient, and their products fall below float32's smallest normal number (1.2e-38). On x86 every
such denormal result costs a microcode assist (~100 cycles): in a 32x32 XPBD cloth's backward pass 86 % of the
bending adjoint's threads made one, and the adjoint kernels took 2.6-2.8x the re-simulation instead of 2.2-2.4x
(``benchmarks/README.md``, the XPBD section). Values that small cannot change any sum they join that is above
~1e-31, so the rollout's gradients kept their bits (SHA-256 of the benchmark's gradients, unchanged).

:class:`FlushDenormals` brackets a backward pass with a one-thread kernel that swaps the flush bits of the
calling thread's floating-point control register (x86 MXCSR flush-to-zero and denormals-are-zero, bits 15
and 6; AArch64 FPCR bit 24) with a stored word: entering sets them, leaving puts the thread's own back (the
sticky exception flags stay as the kernels left them). Warp runs CPU kernels, and replays CPU
graphs, in the calling thread, so the setting covers the kernels launched between the two, is recorded into
a captured graph like any launch, and leaves the user's own numpy and torch arithmetic as it was. GPUs handle
denormals at full speed: on a CUDA device it does nothing. ``INERTIA_FLUSH_DENORMALS=0`` turns it off (to
measure it, or to rule it out).
"""

from __future__ import annotations

import os
import platform

import warp as wp

_MODULE = __name__  # a module of its own, compiled at the first backward pass on a CPU
wp.set_module_options({"enable_backward": False}, _MODULE)

# swaps the flush bits of the calling thread's float control register with those in ``store[0]``: entering, the
# store holds the bits to set and receives the thread's own; leaving, the same swap puts them back (and the store
# holds the flush bits again, ready for the next backward pass)
_SWAP_FLUSH_BITS = """
#if defined(__x86_64__) || defined(_M_X64)
    unsigned int csr = __builtin_ia32_stmxcsr();
    unsigned int want = (unsigned int)store[0] & 0x8040u;
    store[0] = (int)(csr & 0x8040u);
    __builtin_ia32_ldmxcsr((csr & ~0x8040u) | want);
#elif defined(__aarch64__)
    unsigned long long fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    unsigned long long want = (unsigned long long)(unsigned int)store[0] & (1ull << 24);
    store[0] = (int)(fpcr & (1ull << 24));
    __asm__ volatile("msr fpcr, %0" : : "r"((fpcr & ~(1ull << 24)) | want));
#endif
"""
FLUSH_BITS = {"x86_64": 0x8040, "amd64": 0x8040, "aarch64": 1 << 24, "arm64": 1 << 24}  # FTZ | DAZ; FZ


@wp.func_native(_SWAP_FLUSH_BITS)
def _swap_flush_bits(store: wp.array(dtype=wp.int32)): ...


@wp.kernel(module=_MODULE)
def swap_flush_bits_kernel(
    # Data out:
    store: wp.array(dtype=wp.int32),  # flush bits to set; receives the calling thread's (one word)
):
    _swap_flush_bits(store)


def flush_enabled() -> bool:
    """False when ``INERTIA_FLUSH_DENORMALS=0``."""
    return os.environ.get("INERTIA_FLUSH_DENORMALS", "1") != "0"


class FlushDenormals:
    """``with FlushDenormals(device): tape.backward()``: the kernels launched inside run with denormals flushed
    to zero on a CPU (module docstring); nothing on a GPU or an unknown CPU. Allocates its one-word store here,
    so that entering and leaving it inside a graph capture allocates nothing. Not re-entrant (one store)."""

    def __init__(self, device):
        self.device = wp.get_device(device)
        bits = FLUSH_BITS.get(platform.machine().lower())
        on = self.device.is_cpu and bits is not None and flush_enabled()
        self.store = wp.array([bits], dtype=wp.int32, device=self.device) if on else None

    def _swap(self) -> None:
        if self.store is not None:
            wp.launch(swap_flush_bits_kernel, dim=1, inputs=[self.store], device=self.device, record_tape=False)

    def __enter__(self):
        self._swap()
        return self

    def __exit__(self, *exc) -> None:
        self._swap()
