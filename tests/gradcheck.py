"""Helpers for the gradient tests: a re-runnable rollout, central differences, relative errors.

The engine runs in float32. A rollout is a deterministic function of its
parameters (the CPU kernels accumulate in a fixed order), so central
differences with a step of ~1e-3..1e-2 of a parameter's scale are accurate to
a few 1e-4 relative; the tape gradient is compared against them with a
relative error that has a small floor (see :func:`rel_error`).
"""

from __future__ import annotations

import numpy as np
import warp as wp

import inertia


@wp.kernel
def weighted_sum_kernel(
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    wq: wp.array(dtype=wp.vec3),
    wqd: wp.array(dtype=wp.vec3),
    out: wp.array(dtype=float),
):
    i = wp.tid()
    wp.atomic_add(out, 0, wp.dot(q[i], wq[i]) + wp.dot(qd[i], wqd[i]))


class Rollout:
    """``steps`` steps of a model, re-runnable for finite differences.

    The loss is ``sum(wq * q_T) + sum(wqd * qd_T)`` for fixed weights. ``states[0]``
    is never written by a step, so a parameter perturbed there (``particle_q`` /
    ``particle_qd``) or in the model stays until restored.
    """

    def __init__(self, model, steps: int, dt: float, wq=None, wqd=None, collide: bool = False, seed: int = 0,
                 solver=None):
        self.model, self.steps, self.dt, self.collide = model, steps, dt, collide
        rng = np.random.default_rng(seed)
        n = model.particle_count
        self.wq_np = rng.uniform(-1.0, 1.0, (n, 3)) if wq is None else np.asarray(wq, dtype=np.float64).reshape(n, 3)
        self.wqd_np = np.zeros((n, 3)) if wqd is None else np.asarray(wqd, dtype=np.float64).reshape(n, 3)
        self.wq = wp.array(self.wq_np.astype(np.float32), dtype=wp.vec3, device=model.device)
        self.wqd = wp.array(self.wqd_np.astype(np.float32), dtype=wp.vec3, device=model.device)
        self.states = [model.state() for _ in range(steps + 1)]
        self.control = model.control()
        self.contacts = model.contacts() if collide else None
        self.solver = solver if solver is not None else inertia.SemiImplicitSolver(model)

    def _run(self):
        s = self.states
        for t in range(self.steps):
            if self.collide:
                self.model.collide(s[t], self.contacts)
            self.solver.step(s[t], s[t + 1], self.control, self.contacts, self.dt)

    def loss(self) -> float:
        """Forward only; the loss in float64 from the final float32 state."""
        self._run()
        q = self.states[-1].particle_q.numpy().astype(np.float64)
        qd = self.states[-1].particle_qd.numpy().astype(np.float64)
        return float(np.sum(q * self.wq_np) + np.sum(qd * self.wqd_np))

    def backward(self) -> float:
        """Forward under a tape, then backward: gradients land in the ``.grad`` of every input array."""
        loss = wp.zeros(1, dtype=float, device=self.model.device, requires_grad=True)
        tape = wp.Tape()
        with tape:
            self._run()
            last = self.states[-1]
            wp.launch(weighted_sum_kernel, dim=self.model.particle_count,
                      inputs=[last.particle_q, last.particle_qd, self.wq, self.wqd], outputs=[loss],
                      device=self.model.device)
        tape.backward(loss)
        self.tape = tape
        return float(loss.numpy()[0])


def central_difference(f, array: wp.array, entries, eps) -> np.ndarray:
    """Central differences of ``f()`` w.r.t. entries of a float ``wp.array`` (perturbed in place, then restored).

    ``entries``: flat indices into ``array.numpy()``. ``eps``: scalar or one per entry.
    """
    base = array.numpy().copy()
    flat = base.reshape(-1)
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (len(entries),))
    out = np.zeros(len(entries))
    try:
        for n, (e, h) in enumerate(zip(entries, eps)):
            vals = []
            for sign in (1.0, -1.0):
                p = flat.copy()
                p[e] = flat[e] + sign * h
                # the step actually taken in float32
                array.assign(p.reshape(base.shape))
                vals.append(f())
            taken = float(np.float32(flat[e] + h)) - float(np.float32(flat[e] - h))
            out[n] = (vals[0] - vals[1]) / taken
    finally:
        array.assign(base)
    return out


def directional_difference(f, array: wp.array, direction, h: float) -> float:
    """Central difference of ``f()`` along ``direction`` (same shape as ``array``): compare with ``grad . direction``."""
    base = array.numpy().copy()
    d = np.asarray(direction, dtype=np.float64).reshape(base.shape)
    try:
        array.assign((base + h * d).astype(base.dtype))
        plus = f()
        array.assign((base - h * d).astype(base.dtype))
        minus = f()
    finally:
        array.assign(base)
    return (plus - minus) / (2.0 * h)


def grad_dot(array: wp.array, direction) -> float:
    return float(np.sum(array.grad.numpy().astype(np.float64) * np.asarray(direction).reshape(array.grad.shape)))


def rel_error(g, g_fd, floor: float = 1e-2) -> np.ndarray:
    """Per-entry ``|g - g_fd| / max(|g|, |g_fd|, floor * max|g_fd|, 1e-12)``.

    The floor (relative to the largest finite-difference entry) keeps entries
    that are nearly zero from dominating through rounding noise alone.
    """
    g, g_fd = np.asarray(g, dtype=np.float64).ravel(), np.asarray(g_fd, dtype=np.float64).ravel()
    scale = np.maximum.reduce([np.abs(g), np.abs(g_fd), np.full(g.shape, floor * np.max(np.abs(g_fd))),
                               np.full(g.shape, 1e-12)])
    return np.abs(g - g_fd) / scale


def grad_entries(array: wp.array, entries) -> np.ndarray:
    return array.grad.numpy().reshape(-1)[list(entries)].astype(np.float64)


def check(name: str, g, g_fd, tol: float, floor: float = 1e-2) -> float:
    """Assert the max relative error is below ``tol``; return it (and print it for ``pytest -s``)."""
    err = rel_error(g, g_fd, floor)
    worst = float(err.max())
    print(f"[gradcheck] {name}: max rel err {worst:.2e} (tol {tol:.0e}) over {err.size} entries")
    assert np.all(np.isfinite(g)), f"{name}: non-finite tape gradient {g}"
    assert np.max(np.abs(g_fd)) > 0.0, f"{name}: finite differences are all zero: the check would be vacuous"
    assert worst < tol, f"{name}: max rel err {worst:.3e} >= {tol}\n tape {np.asarray(g)}\n fd   {np.asarray(g_fd)}"
    return worst
