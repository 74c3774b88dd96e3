"""Compile a scene's kernels before its first step, two at a time.

A cold start (an empty kernel cache) is mostly compiling: the 32 x 32 cloth's first collide + step loads
11 Warp modules one after the other as their kernels are first launched (``benchmarks/cold_start.py``).
Each compile takes one core, and on the CPU each thread that compiles first builds Warp's precompiled
header (~1.5 s, per thread). So when a solver is built, :func:`for_solver` finds the modules its
collide + step will launch and loads them with the main thread and one worker thread together, both
building their header at once and then taking modules from one queue until none is left.

The modules are found by running ``model.collide`` and ``solver.step`` once on scratch states while
``wp.launch`` only notes each kernel's module (on this thread; other threads launch as usual): a step
launches the same kernels whatever the arrays hold (steps never branch on device values), so this is
exactly the set a real step loads. Nothing of the dry run remains: the scratch objects (contacts of
capacity 1) are dropped, the solver's step count and checked step size are restored, and of its
warnings only those about the model are shown (a StabilityWarning about the dry step's size is not:
the first real step warns about its own). A dry run that raises is abandoned (the real call raises the
same error, in context) and what it found so far is still loaded. Dry runs are one at a time (a lock),
and not for a solver class whose ``step`` is its own (a user's subclass: its ``__init__`` has not
finished when the dry run would call it).

Off with ``inertia.compile_ahead.enabled = False`` or ``INERTIA_COMPILE_AHEAD=0``. With a warm kernel
cache it costs one dry step (milliseconds) and loads from the cache what the first step would have.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import threading
import warnings

import warp as wp

from .autodiff.tape import recording_tape
from .diagnostics import StabilityWarning
from .replay import plain_calls

enabled = os.environ.get("INERTIA_COMPILE_AHEAD", "1") != "0"
DRY_RUN_DT = 1.0e-3  # [s] the dry step's size: any step launches the same kernels (substeps repeat them)


@contextlib.contextmanager
def launches_noted(modules: dict):
    """Within: this thread's ``wp.launch`` calls add their kernel's module to ``modules`` and run nothing."""
    real = wp.launch
    owner = threading.get_ident()

    def note(kernel, *args, **kwargs):
        if threading.get_ident() != owner:
            return real(kernel, *args, **kwargs)
        modules.setdefault(kernel.module.name, kernel.module)
        return None

    wp.launch = note
    try:
        yield modules
    finally:
        wp.launch = real


_dry_run_lock = threading.Lock()  # one dry run at a time: each swaps the process-wide wp.launch


def modules_of_first_step(solver) -> list:
    """The Warp modules a ``model.collide`` + ``solver.step`` launch, in launch order (a dry run)."""
    model = solver.model
    modules: dict = {}
    saved = {name: getattr(solver, name) for name in ("step_count", "_checked_dt") if hasattr(solver, name)}
    with _dry_run_lock, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with launches_noted(modules), plain_calls(solver.replay, model.collision.replay):
                s0, s1, control = model.state(requires_grad=False), model.state(requires_grad=False), model.control()
                contacts = model.contacts(1, 1, 1, 1)
                model.collide(s0, contacts, check_overflow=False)  # no host read of what did not run
                solver.step(s0, s1, control, contacts, DRY_RUN_DT)
        except Exception:  # noqa: BLE001 - only an optimization: the real call raises it again, in context
            pass
        finally:
            for name, value in saved.items():
                setattr(solver, name, value)
    for w in caught:  # what it said about the model (a mesh pair it cannot collide, say), not about the dry dt
        if not issubclass(w.category, StabilityWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return list(modules.values())


class _Worker:
    """One daemon thread that runs submitted functions; it lives for the process, so the precompiled header
    it builds with its first compile serves every later one."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, name="inertia-compile-ahead", daemon=True).start()

    def _run(self) -> None:
        while True:
            fn, done = self.jobs.get()
            try:
                fn()
            finally:
                done.set()

    def submit(self, fn) -> threading.Event:
        done = threading.Event()
        self.jobs.put((fn, done))
        return done


_worker: _Worker | None = None
_worker_lock = threading.Lock()


def _forget_worker() -> None:
    global _worker
    _worker = None  # a forked child has no thread behind the parent's worker: it starts its own


os.register_at_fork(after_in_child=_forget_worker)


def load(modules, device) -> None:
    """Load (compile or read from the kernel cache) ``modules`` on ``device``: on the CPU with this thread and
    the worker together, on CUDA with Warp's own thread pool (``wp.force_load``)."""
    global _worker
    device = wp.get_device(device)
    modules = list(modules)
    if not modules:
        return
    if device.is_cuda:
        wp.force_load(device=device, modules=modules)
        return
    jobs = collections.deque(modules)

    def drain() -> None:
        while True:
            try:
                m = jobs.popleft()
            except IndexError:
                return
            try:
                wp.force_load(device=device, modules=[m], max_workers=1)  # Warp's block_dim for a CPU launch
            except Exception:  # noqa: BLE001 - a module that fails to build raises again at its launch
                pass

    with _worker_lock:
        if _worker is None:
            _worker = _Worker()
    finished = _worker.submit(drain)
    drain()
    finished.wait()


def for_solver(solver, solver_class) -> None:
    """Load the modules of ``solver``'s first collide + step, two threads at once (see the module doc);
    ``solver_class``: the inertia class whose ``__init__`` calls this.

    Not while a ``wp.Tape`` records (the dry step would enter its scratch states in the tape's reuse guard)
    or the device captures a graph, and not for a subclass with its own ``step``: the first step then
    loads its modules itself, as it would without."""
    device = wp.get_device(solver.model.device)
    if (enabled and recording_tape() is None and not device.is_capturing
            and type(solver).step is solver_class.step):
        load(modules_of_first_step(solver), device)
