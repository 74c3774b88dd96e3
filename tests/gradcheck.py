"""The finite-difference harness every gradient test uses.

Why it looks like this: the engine runs in float32, and Warp's CPU backend
compiles kernels for the host CPU, so the rounding of a rollout differs from
machine to machine. A gradient check that compares one lone entry's central
difference with a fixed relative tolerance passes or fails with the host. Here
every check is built so that it passes on any CPU for the right reason:

- **Directional derivatives over mixed entries.** The tape gradient g is
  compared with the central difference of the loss along random directions d
  that move every (unmasked) entry of an input at once with random signs and
  sizes, never one low-sensitivity entry alone. The scale of a check is
  ``S = sum_i |g_i d_i|``: a relative error of the gradient in any entry moves
  ``g . d`` by up to that fraction of S.
- **Two step sizes.** ``h1`` and ``h2 = h1 / ratio``; the reference is the
  central difference at h2, and ``|fd(h1) - fd(h2)| / (ratio^2 - 1)`` estimates
  its truncation error (central differences err as h^2).
- **Measured noise.** Along each direction the loss is also evaluated at
  ``line`` points in [-h2, h2]; the residual of a cubic fit through them,
  pooled over every direction and base point of an input, is the loss's
  rounding noise sigma. It reaches a central difference at step h2 as
  ``sigma / (sqrt(2) h2)``.
- **Jittered base points.** The check runs at the test's values and at
  ``base_points - 1`` copies with every input nudged by a few float32 units in
  the last place (what another CPU's rounding does). The spread of ``g . d``
  across them measures the tape's own rounding.
- **A tolerance derived from all that**:
  ``allowed = K * (rounding + truncation + tape spread) + floor * S`` with K = 5
  (the noise estimate pools >= 10 degrees of freedom, so it is within ~1.4x of
  the truth 95 % of the time, and 5 / 1.4 standard deviations is a one in 4,000
  event), and ``floor`` = 2e-4, the float32 rounding a tape gradient of a few
  hundred steps carries. A check also fails when ``allowed > resolve * S``
  (default 5 %): then it could not catch a 5 % error of the gradient, and the
  test must choose a larger step, a longer horizon or a more sensitive loss.

``INERTIA_GRADCHECK_LOG=path`` appends one JSON line per input checked (error,
noise, tolerance), which is how the closing notes' tables are made.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
import warp as wp

import inertia

# Re-run every check on other roundings: ``with nudging(k):`` (the meta-test) or INERTIA_NUDGE_SEED=k for a
# whole session (``INERTIA_NUDGE_SEED=3 python -m pytest tests``) nudges the first base point too.
NUDGE_SEED: int | None = None


def _env_nudge_seed():
    v = os.environ.get("INERTIA_NUDGE_SEED")
    return int(v) if v else None


class nudging:
    """``with nudging(k):`` every check_gradient inside starts from inputs nudged with seed k."""

    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self):
        global NUDGE_SEED
        self.saved, NUDGE_SEED = NUDGE_SEED, self.seed

    def __exit__(self, *exc):
        global NUDGE_SEED
        NUDGE_SEED = self.saved


K_NOISE = 5.0
FLOOR = 2e-4
FLOAT32_ULP = 2.0 ** -23


@dataclass
class Input:
    """One input of a gradient check.

    ``h``: the larger central-difference step, in the input's units along a
    direction whose largest entry is 1 (times ``scale``). ``relative``: scale each
    entry's move by its own magnitude (stiffnesses, masses); else every entry
    moves on the same absolute scale (positions, velocities). ``mask``: entries
    that may move (broadcast to the input's shape); the others stay put.
    ``ratio``: h / h2 for this input, where the default 3 leaves h2 in the noise.
    """

    name: str
    h: float
    relative: bool = False
    mask: np.ndarray | None = None
    scale: np.ndarray | float | None = None
    ratio: float | None = None  # h / h2 for this input (default: the check's)


@dataclass
class Report:
    name: str
    input: str
    error: float = 0.0  # worst |g.d - fd| / S over the lines
    allowed: float = 0.0  # the tolerance at that line / S
    noise: float = 0.0  # sigma, the loss's rounding noise
    h: float = 0.0  # the larger step
    max_allowed: float = 0.0  # the largest tolerance over every line / S (how close it came to `resolve`)
    lines: list = field(default_factory=list)


# ----------------------------------------------------------------------------- problems
class TapeProblem:
    """Inputs that are ``wp.array``s: ``loss()`` runs forward from their contents and returns a float;
    ``backward()`` runs forward under a tape and leaves gradients in the inputs' ``.grad``.

    Two names may share one array (with masks on different entries, e.g. in-plane and normal velocities
    checked with different steps): each name's change from the base is added to the array.
    """

    def __init__(self, arrays: dict, loss, backward):
        self.arrays, self._loss, self._backward = arrays, loss, backward
        self.base = {k: a.numpy().astype(np.float64).copy() for k, a in arrays.items()}

    def _assign(self, values):
        done = {}
        for k, a in self.arrays.items():
            v = done.get(id(a), 0.0) + (np.asarray(values[k], dtype=np.float64) - self.base[k])
            done[id(a)] = v
        for k, a in self.arrays.items():
            if id(a) in done:
                v = self.base[k] + done.pop(id(a))
                a.assign(v.astype(a.numpy().dtype).reshape(a.numpy().shape))

    def loss(self, values) -> float:
        self._assign(values)
        return float(self._loss())

    def grad(self, values) -> dict:
        self._assign(values)
        for a in self.arrays.values():
            a.grad.zero_()
        self._backward()
        return {k: a.grad.numpy().astype(np.float64).copy() for k, a in self.arrays.items()}

    def restore(self):
        self._assign(self.base)


class TorchProblem:
    """Inputs that are torch tensors: ``run(dict of tensors)`` returns a scalar tensor."""

    def __init__(self, run, inputs: dict):
        import torch

        self.torch, self.run = torch, run
        self.dtypes = {k: v.dtype for k, v in inputs.items()}
        self.base = {k: v.detach().double().numpy().copy() for k, v in inputs.items()}

    def _tensors(self, values, grad=False):
        return {k: self.torch.tensor(np.asarray(values[k]), dtype=self.dtypes[k]).requires_grad_(grad)
                for k in self.base}

    def loss(self, values) -> float:
        with self.torch.no_grad():
            return float(self.run(self._tensors(values)).double())

    def grad(self, values) -> dict:
        leaves = self._tensors(values, grad=True)
        self.run(leaves).backward()
        return {k: (v.grad.double().numpy().copy() if v.grad is not None else np.zeros(v.shape))
                for k, v in leaves.items()}

    def restore(self):
        pass


# ----------------------------------------------------------------------------- the check
def nudged(values: dict, rng, ulps: int = 4, steps: dict | None = None) -> dict:
    """Every entry moved by a random whole number of float32 units in the last place, |k| <= ulps.

    An entry that is exactly 0 (a particle at rest) has no such unit: it moves by k * 2^-23 times its
    input's step instead (``steps``: name -> h per entry, 0 where the entry must not move), as far below
    the step as a ulp is below 1.
    """
    out = {}
    for k, v in values.items():
        v = np.asarray(v, dtype=np.float64)
        n = rng.integers(-ulps, ulps + 1, v.shape) * FLOAT32_ULP
        zero = (steps or {}).get(k, 0.0) * n * (v == 0.0)
        out[k] = (v * (1.0 + n) + zero).astype(np.float32).astype(np.float64)
    return out


def _movable(x, inp: Input) -> np.ndarray:
    return np.ones_like(x) if inp.mask is None else np.broadcast_to(np.asarray(inp.mask, dtype=np.float64), x.shape)


def _zero_entry_steps(x, inp: Input) -> np.ndarray:
    """How far :func:`nudged` may move each entry of ``x`` that is exactly 0: the input's step where the check
    moves that entry, and 0 where it never does (masked out, or a relative input's zero: a structural zero,
    such as a fixed particle's inverse mass, whose nudge to 1e-9 would free the particle and let it fall)."""
    s = inp.h * _movable(x, inp)
    if inp.relative:
        s = s * (x != 0.0)
    if inp.scale is not None:
        s = s * np.broadcast_to(np.asarray(inp.scale, dtype=np.float64), x.shape)
    return s


def _direction(x, inp: Input, rng) -> np.ndarray:
    """Random signs and sizes on every entry (a third of them small), the largest 1, times each entry's scale."""
    r = rng.uniform(-1.0, 1.0, x.shape) * np.where(rng.uniform(size=x.shape) < 0.5, 1.0, 0.3)
    s = np.abs(x) if inp.relative else np.ones_like(x)
    if inp.scale is not None:
        s = s * np.broadcast_to(np.asarray(inp.scale, dtype=np.float64), x.shape)
    if inp.mask is not None:
        s = s * np.broadcast_to(np.asarray(inp.mask, dtype=np.float64), x.shape)
    r = np.where(s != 0.0, r, 0.0)
    top = np.abs(r).max() if r.size else 0.0
    assert top > 0.0, f"input {inp.name!r}: no entry may move (mask / scale all zero)"
    return r / top * s


def check_gradient(name: str, problem, inputs, *, directions: int = 2, ratio: float = 3.0, line: int = 7,
                   base_points: int = 2, nudge_seed: int | None = None, resolve: float = 0.05,
                   seed: int = 0) -> list[Report]:
    """Check ``problem``'s reverse-mode gradient against central differences for every input (see the module doc).

    ``nudge_seed``: when given, the first base point is nudged too (the meta-test's re-runs on other
    roundings); otherwise it is the test's own values. Returns one :class:`Report` per input.
    """
    inputs = [i if isinstance(i, Input) else Input(*i) for i in inputs]
    if nudge_seed is None:
        nudge_seed = NUDGE_SEED if NUDGE_SEED is not None else _env_nudge_seed()
    rng = np.random.default_rng(seed)
    base = {k: np.asarray(v, dtype=np.float64) for k, v in problem.base.items()}
    points = []
    for p in range(base_points):
        if p == 0 and nudge_seed is None:
            points.append(base)
        else:
            points.append(nudged(base, np.random.default_rng((nudge_seed or 0) * 7919 + p),
                                  steps={inp.name: _zero_entry_steps(base[inp.name], inp) for inp in inputs}))
    dirs = {inp.name: [_direction(base[inp.name], inp, rng) for _ in range(directions)] for inp in inputs}
    lines = {inp.name: [] for inp in inputs}  # (gd, S, fd1, fd2, residuals, h2) per point and direction
    try:
        for x in points:
            g = problem.grad(x)
            for inp in inputs:
                gi = g[inp.name]
                assert np.all(np.isfinite(gi)), f"{name}: non-finite tape gradient for {inp.name}"
                h1 = inp.h
                h2 = h1 / (inp.ratio or ratio)
                for d in dirs[inp.name]:
                    def at(t):
                        return problem.loss({**x, inp.name: x[inp.name] + t * d})

                    ts = h2 * np.linspace(-1.0, 1.0, line)
                    vals = np.array([at(t) for t in ts])
                    fd2 = (vals[-1] - vals[0]) / (2.0 * h2)
                    fd1 = (at(h1) - at(-h1)) / (2.0 * h1)
                    coef = np.polyfit(ts / h2, vals, 3)
                    resid = vals - np.polyval(coef, ts / h2)
                    lines[inp.name].append(dict(gd=float(np.sum(gi * d)), S=float(np.sum(np.abs(gi * d))),
                                                fd1=fd1, fd2=fd2, resid=resid, h2=h2))
    finally:
        problem.restore()

    reports, failures = [], []
    for inp in inputs:
        ls = lines[inp.name]
        dof = sum(len(entry["resid"]) - 4 for entry in ls)
        sigma = float(np.sqrt(sum(np.sum(entry["resid"] ** 2) for entry in ls) / max(dof, 1)))
        # the tape's own rounding: spread of g . d over the base points, per direction, pooled
        spread = 0.0
        if len(points) > 1:
            gd = np.array([entry["gd"] for entry in ls]).reshape(len(points), directions)
            spread = float(np.sqrt(np.mean((gd - gd.mean(axis=0)) ** 2) * len(points) / (len(points) - 1)))
        rep = Report(name, inp.name, noise=sigma, h=inp.h)
        for k, entry in enumerate(ls):
            S = entry["S"]
            rounding = sigma / (np.sqrt(2.0) * entry["h2"])
            truncation = abs(entry["fd1"] - entry["fd2"]) / ((inp.ratio or ratio) ** 2 - 1.0)
            allowed = K_NOISE * (rounding + truncation + spread) + FLOOR * S
            err = abs(entry["gd"] - entry["fd2"])
            row = dict(point=k // directions, direction=k % directions, tape=entry["gd"], fd=entry["fd2"],
                       fd_h1=entry["fd1"], S=S, rounding=rounding, truncation=truncation, spread=spread,
                       error=err / S if S > 0 else np.inf, allowed=allowed / S if S > 0 else np.inf)
            rep.lines.append(row)
            if not S > 0.0:
                failures.append(f"{inp.name}: the tape gradient is zero along direction {row['direction']}: "
                                f"a vacuous check (or a gradient that was dropped)")
            elif allowed > resolve * S:
                failures.append(
                    f"{inp.name}: cannot resolve the gradient to {resolve:.0%}: tolerance {allowed:.3e} = "
                    f"{allowed / S:.1%} of S = {S:.3e} (loss noise sigma {sigma:.2e} -> {rounding:.2e} at h2 "
                    f"{entry['h2']:.2e}; truncation {truncation:.2e}; tape spread {spread:.2e}): choose another step")
            elif err > allowed:
                failures.append(
                    f"{inp.name} (base point {row['point']}, direction {row['direction']}): tape g.d {entry['gd']:+.6e}"
                    f" vs central difference {entry['fd2']:+.6e} (h1 {entry['fd1']:+.6e}): error {err:.3e} > "
                    f"tolerance {allowed:.3e} (= {K_NOISE:g} x (rounding {rounding:.2e} from loss noise sigma "
                    f"{sigma:.2e} at h2 {entry['h2']:.2e} + truncation {truncation:.2e} + tape spread {spread:.2e})"
                    f" + {FLOOR:g} x S {S:.3e})")
        worst = max(rep.lines, key=lambda r: r["error"] / max(r["allowed"], 1e-300))
        rep.error, rep.allowed = worst["error"], worst["allowed"]
        rep.max_allowed = max(r["allowed"] for r in rep.lines)
        reports.append(rep)
        print(f"[gradcheck] {name} / {inp.name}: error {rep.error:.1e} of S, tolerance {rep.allowed:.1e} "
              f"(noise sigma {sigma:.1e}, {len(ls)} lines)")
    _log(reports)
    assert not failures, f"{name}:\n  " + "\n  ".join(failures)
    return reports


def check_against_reference(name: str, g, g_ref, rtol: float = 1e-4) -> float:
    """Compare a tape gradient with an independent float64 reference (a NumPy re-implementation of the same
    discrete update, differentiated by float64 central differences, exact to ~1e-9 relative).

    The error is measured in the 2-norm over all entries, ``|g - g_ref| / |g_ref|``; what it explains is the
    float32 rounding of the forward and backward passes, about 1e-6 relative for the rollouts of these tests
    (measured 1e-7 .. 3e-5), so the default tolerance is 1e-4.
    """
    g, g_ref = np.asarray(g, dtype=np.float64).ravel(), np.asarray(g_ref, dtype=np.float64).ravel()
    assert np.all(np.isfinite(g)), f"{name}: non-finite tape gradient {g}"
    scale = float(np.linalg.norm(g_ref))
    assert scale > 0.0, f"{name}: the reference gradient is zero: a vacuous check"
    err = float(np.linalg.norm(g - g_ref)) / scale
    print(f"[gradcheck] {name}: error {err:.1e} of |g_ref| (tolerance {rtol:.0e})")
    _log([Report(name, "reference", error=err, allowed=rtol, max_allowed=rtol)])
    assert err < rtol, f"{name}: |g - g_ref| / |g_ref| = {err:.3e} >= {rtol}\n tape {g}\n reference {g_ref}"
    return err


def _log(reports):
    path = os.environ.get("INERTIA_GRADCHECK_LOG")
    if not path:
        return
    with open(path, "a") as f:
        for r in reports:
            f.write(json.dumps(dict(test=os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0], check=r.name,
                                    input=r.input, error=r.error, allowed=r.allowed, max_allowed=r.max_allowed,
                                    noise=r.noise, h=r.h)) + "\n")


# ----------------------------------------------------------------------------- losses on the tape
@wp.kernel
def body_loss_kernel(q: wp.array(dtype=wp.transform), qd: wp.array(dtype=wp.spatial_vector),
                     wq: wp.array(dtype=float), wqd: wp.array(dtype=float), out: wp.array(dtype=float)):
    """out += sum over bodies of wq . (pose as 7 floats) + wqd . (velocity as 6 floats) (flat weights)."""
    b = wp.tid()
    acc = float(0.0)
    for k in range(7):
        acc += q[b][k] * wq[7 * b + k]
    for k in range(6):
        acc += qd[b][k] * wqd[6 * b + k]
    wp.atomic_add(out, 0, acc)


class StepRollout:
    """``steps`` (collide +) solver steps, one State per step, re-runnable for :func:`check_gradient`.

    A subclass gives the loss twice: ``host_loss(last_state) -> float`` (float64 on the host, for the
    finite differences) and ``record_loss(last_state, out)`` (launches the same loss into ``out`` on the
    tape). The finite differences replay the forward pass from a graph captured at the first ``loss()``
    (the same kernels on the same buffers, checked bitwise against the plain loop there): a check
    evaluates the loss ~40 times per input, and a plain loop spends milliseconds a step launching kernels.
    """

    def __init__(self, model, steps: int, dt: float, solver, contacts: bool = True):
        self.model, self.steps, self.dt, self.solver = model, steps, dt, solver
        self.states = [model.state() for _ in range(steps + 1)]
        self.control = model.control()
        self.contacts = model.contacts() if contacts else None
        self.tape, self.graph = None, None

    def host_loss(self, last) -> float:
        raise NotImplementedError

    def record_loss(self, last, out) -> None:
        raise NotImplementedError

    def _run(self, check_overflow=True):
        for t in range(self.steps):
            if self.contacts is not None:
                self.model.collide(self.states[t], self.contacts, check_overflow=check_overflow)
            self.solver.step(self.states[t], self.states[t + 1], self.control, self.contacts, self.dt)

    def loss(self) -> float:
        if self.graph is None:
            self._run()  # plain first: per-state buffers allocated, modules loaded, overflow checked
            plain = self.host_loss(self.states[-1])
            with wp.ScopedCapture(device=self.model.device) as cap:
                self._run(check_overflow=False)
            self.graph = cap.graph
            wp.capture_launch(self.graph)
            assert self.host_loss(self.states[-1]) == plain, "the captured forward must replay the plain loop bitwise"
        else:
            wp.capture_launch(self.graph)
        return self.host_loss(self.states[-1])

    def backward(self) -> float:
        if self.tape is not None:  # the previous backward's gradients (intermediate states, model arrays)
            self.tape.zero()
        out = wp.zeros(1, dtype=float, device=self.model.device, requires_grad=True)
        self.tape = wp.Tape()
        with self.tape:
            self._run()
            self.record_loss(self.states[-1], out)
        self.tape.backward(loss=out)
        return float(out.numpy()[0])

    def problem(self, **arrays) -> TapeProblem:
        return TapeProblem(arrays, self.loss, self.backward)


# ----------------------------------------------------------------------------- particle rollouts
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
    """``steps`` steps of a particle model, re-runnable for finite differences.

    The loss is ``sum(wq * q_T) + sum(wqd * qd_T)``; by default both weights are random
    (``wqd`` scaled by ``velocity_weight`` [s], so that a velocity counts like the distance it
    covers in that time). ``states[0]`` is never written by a step, so an input set there
    (``particle_q`` / ``particle_qd``) or in the model stays until restored.
    """

    def __init__(self, model, steps: int, dt: float, wq=None, wqd=None, collide: bool = False, seed: int = 0,
                 solver=None, velocity_weight: float = 0.1):
        self.model, self.steps, self.dt, self.collide = model, steps, dt, collide
        rng = np.random.default_rng(seed)
        n = model.particle_count
        self.wq_np = rng.uniform(-1.0, 1.0, (n, 3)) if wq is None else np.asarray(wq, dtype=np.float64).reshape(n, 3)
        self.wqd_np = (velocity_weight * rng.uniform(-1.0, 1.0, (n, 3)) if wqd is None
                       else np.asarray(wqd, dtype=np.float64).reshape(n, 3))
        self.wq = wp.array(self.wq_np.astype(np.float32), dtype=wp.vec3, device=model.device)
        self.wqd = wp.array(self.wqd_np.astype(np.float32), dtype=wp.vec3, device=model.device)
        self.states = [model.state() for _ in range(steps + 1)]
        self.control = model.control()
        self.contacts = model.contacts() if collide else None
        self.solver = solver if solver is not None else inertia.SemiImplicitSolver(model)
        self.tape = None

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
        if self.tape is not None:
            self.tape.zero()
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

    def problem(self, **arrays) -> TapeProblem:
        """A :class:`TapeProblem` over the given arrays (e.g. ``qd0=r.states[0].particle_qd``)."""
        return TapeProblem(arrays, self.loss, self.backward)
