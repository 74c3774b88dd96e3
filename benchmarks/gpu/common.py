"""Shared tools of the GPU check: time budgets, sections that record their failure and go on, allocation
watching during graph capture, memory figures, the 1-ulp nudge and the tolerance rule.

Nothing here imports ``pxr`` (usd-core is not on the GPU machine) or anything outside NumPy, Warp and the
standard library.
"""

from __future__ import annotations

import contextlib
import time
import traceback

import numpy as np
import warp as wp

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23: float32's relative spacing at 1.0

# The tolerance rule of every parity comparison (trajectories and gradients):
#   tolerance = SPREAD_FACTOR * spread + FLOOR_ULPS * EPS32 * scale
# ``spread``: the largest difference between the CPU reference and CPU runs whose state (or rollout inputs) was
# nudged by 1 ulp (see ``nudge``): how far float32 rounding alone moves this quantity over this many steps.
# A device sums in another order (CUDA atomics) and contracts other multiply-adds: rounding differences of
# the same size, made at every step, which the per-step nudge models. The factor 10 leaves room for the
# device's per-step differences being a few ulps rather than one and for chaotic growth varying between
# perturbations (the two nudged runs' spreads differ by up to ~3x on the CPU); a real defect (a race, a lost
# contact, a wrong kernel) moves results by orders of magnitude more than rounding does. The floor (8 ulps of
# the quantity's largest magnitude) covers a quantity the nudges cannot move (e.g. pinned particles only).
SPREAD_FACTOR = 10.0
FLOOR_ULPS = 8.0


class Budget:
    """A wall-clock deadline: ``left()`` seconds remain; ``share(fraction)`` is a sub-budget ending earlier."""

    def __init__(self, seconds: float, start: float | None = None):
        self.start = time.perf_counter() if start is None else start
        self.seconds = float(seconds)

    @property
    def end(self) -> float:
        return self.start + self.seconds

    def left(self) -> float:
        return self.end - time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def sub(self, seconds: float) -> "Budget":
        """A budget of at most ``seconds`` from now, never past this one's end."""
        return Budget(max(0.0, min(seconds, self.left())))


def run_section(name: str, fn, results: dict, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; store its result (or its error and traceback) in ``results[name]``.

    A section that raises records ``{"status": "error", "error": ..., "traceback": ...}`` and the check
    goes on with the next one: one broken feature never loses the others' figures.
    """
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kwargs)
        out = dict(out) if isinstance(out, dict) else {"result": out}
        out.setdefault("status", "ok")
    except Exception as e:  # noqa: BLE001 - recorded, reported, and the next section runs
        out = {"status": "error", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    out["seconds"] = round(time.perf_counter() - t0, 3)
    results[name] = out
    return out


def guarded(fn, *args, **kwargs) -> dict:
    """``fn(...)`` as a dict, or ``{"status": "error", ...}`` if it raised (for the items inside a section)."""
    try:
        out = fn(*args, **kwargs)
        return out if isinstance(out, dict) else {"result": out}
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(limit=8)}


def engine_modules():
    """Import every inertia module that defines kernels (not the USD ones: pxr is not on the GPU machine) and
    return (their Warp modules, the Python modules that failed to import with why)."""
    import importlib
    import pkgutil

    from warp._src.context import user_modules

    import inertia
    import inertia.integrators
    import inertia.solvers

    skipped = []
    for pkg in (inertia, inertia.solvers, inertia.integrators):
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if any(s in m.name for s in ("usd", "recorder")):
                continue
            try:
                importlib.import_module(m.name)
            except Exception as e:  # noqa: BLE001 - an optional importer dependency (e.g. trimesh) is missing
                skipped.append(f"{m.name}: {type(e).__name__}")
    return [m for name, m in sorted(user_modules.items()) if name.startswith("inertia")], skipped


# ---------------------------------------------------------------------------------------------- allocations
def _allocators(device):
    """The allocator objects Warp uses for arrays on ``device`` (CPU: default and pinned; CUDA: default and
    mempool, whichever is current)."""
    out = []
    for name in ("default_allocator", "pinned_allocator", "mempool_allocator"):
        a = getattr(device, name, None)
        if a is not None and all(a is not b for b in out):
            out.append(a)
    return out


def _native_alloc_count():
    """Warp's native allocation counter (every wp_alloc_*, C++-side scratch included), or None when the
    native tracker is not available in this Warp."""
    try:
        from warp._src.context import runtime

        if not runtime.core.wp_alloc_tracker_is_enabled():
            return None
        return int(runtime.core.wp_alloc_tracker_get_total_alloc_count())
    except Exception:  # noqa: BLE001 - a private counter: absent in other Warp versions
        return None


class AllocationWatch:
    """Watches every Warp array allocation on one device while active.

    ``captured``: the allocations made while that device was capturing a graph (``wp.ScopedCapture``), as
    ``(bytes, where)``: a captured step must make none (on CUDA an allocation inside a capture either fails
    or becomes a graph node that allocates on every replay; on the CPU it would be baked into the graph).
    ``live`` / ``peak``: bytes of Warp arrays allocated while watching and not yet freed, and their maximum
    since ``reset_peak()`` (device memory figures that work on CPU and CUDA alike).
    ``native_captured``: allocations counted by Warp's native tracker (C++ scratch of sorts and hash grids
    included) during ``capture()`` blocks, when that tracker is available.
    """

    def __init__(self, device):
        self.device = wp.get_device(device)
        self.captured: list = []
        self.native_captured = 0
        self.native_available = None
        self.live = 0
        self.peak = 0
        self._sizes: dict = {}
        self._saved: list = []
        self.context = ""

    def __enter__(self):
        for a in _allocators(self.device):
            alloc, dealloc = a.allocate, a.deallocate
            self._saved.append((a, alloc, dealloc))
            a.allocate = self._wrap_alloc(alloc)
            a.deallocate = self._wrap_dealloc(dealloc)
        return self

    def __exit__(self, *exc):
        for a, alloc, dealloc in self._saved:
            a.allocate, a.deallocate = alloc, dealloc
        self._saved.clear()

    def _wrap_alloc(self, alloc):
        def allocate(size_in_bytes):
            ptr = alloc(size_in_bytes)
            self._sizes[ptr] = size_in_bytes
            self.live += size_in_bytes
            self.peak = max(self.peak, self.live)
            if self.device.is_capturing:
                self.captured.append((int(size_in_bytes), self._where()))
            return ptr
        return allocate

    def _wrap_dealloc(self, dealloc):
        def deallocate(ptr, size_in_bytes):
            if self._sizes.pop(ptr, None) is not None:
                self.live -= size_in_bytes
            return dealloc(ptr, size_in_bytes)
        return deallocate

    def _where(self) -> str:
        stack = traceback.extract_stack(limit=12)[:-2]
        frames = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in stack if "/warp/" not in f.filename]
        return f"{self.context}: " + " < ".join(reversed(frames[-4:]))

    def reset_peak(self) -> None:
        self.peak = self.live

    @contextlib.contextmanager
    def capture(self, context: str = ""):
        """``wp.ScopedCapture`` on the watched device, counting native allocations made inside it too.

        Yields the ScopedCapture (its ``graph`` is set on exit)."""
        self.context = context
        tracker = None
        try:
            tracker = wp.ScopedMemoryTracker("capture", print=False)
            tracker.__enter__()
        except Exception:  # noqa: BLE001 - an older Warp without the tracker: the Python-side count remains
            tracker = None
        before = _native_alloc_count()
        self.native_available = before is not None
        try:
            with wp.ScopedCapture(device=self.device) as cap:
                yield cap
        finally:
            after = _native_alloc_count()
            if before is not None and after is not None:
                self.native_captured += after - before
            if tracker is not None:
                tracker.__exit__(None, None, None)
            self.context = ""

    def summary(self) -> dict:
        return {"allocations_in_capture": len(self.captured),
                "bytes_in_capture": int(sum(b for b, _ in self.captured)),
                "where": [w for _, w in self.captured[:10]],
                "native_allocations_in_capture": self.native_captured if self.native_available else None}


def device_memory(device) -> dict:
    """Memory in use on a CUDA device (Warp's memory pool, torch's allocator), else {}."""
    device = wp.get_device(device)
    out = {}
    if device.is_cuda:
        with contextlib.suppress(Exception):
            out["warp_mempool_current"] = int(wp.get_mempool_used_mem_current(device))
            out["warp_mempool_high"] = int(wp.get_mempool_used_mem_high(device))
        with contextlib.suppress(Exception):
            import torch

            out["torch_max_allocated"] = int(torch.cuda.max_memory_allocated(device.ordinal))
    return out


# ---------------------------------------------------------------------------------------------- nudges
def nudge(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every float32 entry moved by one unit in the last place, up or down at random (zeros stay zero:
    a 1-ulp step from 0 is a denormal, which no rounding difference produces)."""
    v = np.asarray(values, dtype=np.float32)
    up = rng.random(v.shape) < 0.5
    out = np.where(up, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf)))
    return np.where(v == 0, v, out).astype(np.float32)


def nudge_warp_array(a: wp.array, rng: np.random.Generator) -> None:
    """``nudge`` applied in place to a float32-based Warp array (vec3, transform, spatial_vector, float)."""
    if a is None or a.size == 0:
        return
    a.assign(nudge(a.numpy(), rng))


def difference(ref, other) -> float:
    """Largest absolute difference between two arrays (inf if either has a NaN/inf where the other does not)."""
    a, b = np.asarray(ref, dtype=np.float64), np.asarray(other, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    both_nan = np.isnan(a) & np.isnan(b)
    d = np.where(both_nan, 0.0, d)
    return float(np.nanmax(np.where(np.isnan(d), np.inf, d)))


def judge(ref, spreads: list, device_value) -> dict:
    """The tolerance rule (see SPREAD_FACTOR) for one quantity: the device's difference from the CPU
    reference against the spread of the nudged CPU runs."""
    ref = np.asarray(ref, dtype=np.float64)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    spread = max((difference(ref, s) for s in spreads), default=0.0)
    err = difference(ref, device_value)
    tol = SPREAD_FACTOR * spread + FLOOR_ULPS * EPS32 * scale
    return {"error": err, "spread": spread, "scale": scale, "tolerance": tol,
            "ratio": (err / tol) if tol > 0 else (0.0 if err == 0 else float("inf")),
            "bitwise": bool(err == 0.0), "passed": bool(np.isfinite(err) and err <= tol)}
