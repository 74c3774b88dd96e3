"""Denormals flushed to zero inside a backward pass on a CPU (engine/autodiff/denormals.py), and only there.

The reference for what a denormal product is: numpy's float32 arithmetic (IEEE 754, gradual underflow), run
in this thread before and after the bracket, so the test also checks that the register is given back.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
import torch
import warp as wp

import inertia
from conftest import DEVICE
from inertia.autodiff.denormals import FlushDenormals

TINY = np.float32(1.0e-30)
HALF_MIN = np.float32(1.0e-9)  # TINY * HALF_MIN = 1e-39: below float32's smallest normal, 1.18e-38


@wp.kernel
def product_kernel(a: wp.array(dtype=float), b: wp.array(dtype=float), out: wp.array(dtype=float)):
    out[0] = a[0] * b[0]


# the sticky exception flags of x86's MXCSR (bits 0-5; 0x10 = underflow: a result below the smallest normal),
# read and cleared: whether the kernels launched since the last read made a denormal (the test's witness that
# its scene makes some, so that the equality it checks is not vacuous)
@wp.func_native("""
#if defined(__x86_64__) || defined(_M_X64)
    unsigned int csr = __builtin_ia32_stmxcsr();
    flags[0] = (int)(csr & 0x3fu);
    __builtin_ia32_ldmxcsr(csr & ~0x3fu);
#endif
""")
def _take_float_flags(flags: wp.array(dtype=wp.int32)): ...


@wp.kernel
def take_float_flags_kernel(flags: wp.array(dtype=wp.int32)):
    _take_float_flags(flags)


def take_underflow() -> bool:
    flags = wp.zeros(1, dtype=wp.int32, device="cpu")
    wp.launch(take_float_flags_kernel, dim=1, inputs=[flags], device="cpu")
    return bool(int(flags.numpy()[0]) & 0x10)


X86 = platform.machine().lower() in ("x86_64", "amd64")


def _product(out):
    a = wp.array([TINY], dtype=float, device=DEVICE)
    b = wp.array([HALF_MIN], dtype=float, device=DEVICE)
    wp.launch(product_kernel, dim=1, inputs=[a, b, out], device=DEVICE)
    return float(out.numpy()[0])


def _numpy_product() -> float:
    return float(TINY * HALF_MIN)


@pytest.mark.skipif(not wp.get_device(DEVICE).is_cpu, reason="the flush is a CPU register; GPUs do nothing")
def test_flush_inside_the_bracket_only():
    expected = _numpy_product()
    assert 0.0 < abs(expected) < np.finfo(np.float32).tiny  # gradual underflow in this thread, before
    out = wp.zeros(1, dtype=float, device=DEVICE)
    assert _product(out) == pytest.approx(expected, rel=1e-6)  # Warp's kernels keep denormals by default
    flush = FlushDenormals(DEVICE)
    with flush:
        assert _product(out) == 0.0
    assert _product(out) == pytest.approx(expected, rel=1e-6)
    assert _numpy_product() == expected  # the thread's register given back: numpy as before
    if X86:
        take_underflow()
        with flush:
            _product(out)
        assert take_underflow()  # flushed: the underflow flag says a denormal result was replaced by 0


@pytest.mark.skipif(not wp.get_device(DEVICE).is_cpu, reason="the flush is a CPU register; GPUs do nothing")
def test_flush_recorded_in_a_captured_graph():
    """Entering and leaving inside a capture records both launches; each replay flushes and restores."""
    a = wp.array([TINY], dtype=float, device=DEVICE)
    b = wp.array([HALF_MIN], dtype=float, device=DEVICE)
    out = wp.zeros(1, dtype=float, device=DEVICE)
    plain = wp.zeros(1, dtype=float, device=DEVICE)
    flush = FlushDenormals(DEVICE)
    with wp.ScopedCapture(device=DEVICE) as cap:
        with flush:
            wp.launch(product_kernel, dim=1, inputs=[a, b, out], device=DEVICE)
        wp.launch(product_kernel, dim=1, inputs=[a, b, plain], device=DEVICE)
    for _ in range(2):
        out.fill_(1.0)
        plain.fill_(0.0)
        wp.capture_launch(cap.graph)
        assert float(out.numpy()[0]) == 0.0
        assert float(plain.numpy()[0]) == pytest.approx(_numpy_product(), rel=1e-6)
    assert _numpy_product() != 0.0


def test_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("INERTIA_FLUSH_DENORMALS", "0")
    assert FlushDenormals(DEVICE).store is None


def test_rollout_gradient_of_a_cloth_at_rest_unchanged_by_the_flush():
    """A cloth lying on the ground (where the bending adjoint's denormals come from) through a checkpointed XPBD
    rollout, with the flush and without it (gradual underflow: the reference, whose denormals the MXCSR underflow
    flag witnesses): the flushed values are below 1.2e-38, far below the float32 rounding of any gradient entry."""
    b = inertia.ModelBuilder()
    b.add_ground_plane(mu=0.5)
    b.add_cloth_grid(6, 6, pos=(-0.3, -0.3, 0.02), cell_x=0.1, cell_y=0.1, mass=0.05, tri_ke=1.0e3, tri_ka=1.0e3,
                     tri_kd=10.0, edge_ke=1.0, edge_kd=0.01, particle_radius=0.02)
    model = b.finalize(device=DEVICE)
    solver = inertia.XPBDSolver(model, iterations=10)
    q0 = wp.to_torch(model.particle_q).clone()
    w = torch.sin(torch.arange(q0.numel(), dtype=torch.float32)).reshape(q0.shape)

    def grad(flush: bool):
        r = inertia.Rollout(model, solver, frames=4, frame_dt=1.0 / 60.0, substeps=5, checkpoint_every=2,
                            output="final")
        if not flush:
            r._flush.store = None
        q = q0.clone().requires_grad_(True)
        x, _ = r(q, torch.zeros_like(q0))
        loss = (x * w).sum()
        take_underflow()
        loss.backward()
        return q.grad.numpy().copy(), take_underflow()

    (g_flush, _), (g_plain, underflowed) = grad(True), grad(False)
    if X86 and wp.get_device(DEVICE).is_cpu:
        assert underflowed, "the unflushed backward pass made no denormal: this scene no longer tests the flush"
    assert np.isfinite(g_flush).all() and np.abs(g_flush).max() > 0.0
    # a flushed value changes a sum only where the sum itself is below ~1e-31, so the two can differ by no more
    # than float32 rounding of the largest entry (they were bitwise equal here; 1e-6 of it leaves room for a host
    # whose rounding puts some tiny intermediate sum on the other side)
    np.testing.assert_allclose(g_flush, g_plain, rtol=0.0, atol=1e-6 * np.abs(g_plain).max())
