"""Timing: steppers that advance a runner by the README's loop or by its fastest replay, and the
alternated rounds that time many of them in one process.

A *cell* is one simulation (engine, scene, solver) that is timed. ``alternate_rounds`` times every cell
once per round, round after round, so that every engine sees the same stretch of machine load: a
slow minute on a shared machine lands on all of them rather than on whichever ran then. Within a
round the cells run in order on even rounds and in reverse on odd ones, and each cell's two modes
swap order likewise. Each block records its rate and the machine load while it ran
(``machine.LoadMeter``). ``measure()`` is the older one-runner measurement that ``worlds.py`` uses.
"""

from __future__ import annotations

import statistics

import numpy as np
import warp as wp

from machine import LoadMeter, cache_entries, loadavg, now, summarize_load


def sync(device):
    if device is not None:
        wp.synchronize_device(device)


def graph_ops(graph):
    """Device operations recorded in a captured graph (kernel launches, memsets, copies, hash-grid builds).

    On the CPU, Warp records a capture as an APIC operation list whose length it exposes; on CUDA
    this count is not available here, so None.
    """
    cap = getattr(graph, "_apic_capture", None)
    try:
        return int(cap.operation_count) if cap is not None else None
    except Exception:
        return None


def count_launches(runner) -> tuple:
    """Kernel launches of one collide+step between two fresh states, by kernel name.

    Every call of ``wp.launch`` / ``wp.launch_tiled`` is counted while the step runs (the module
    attributes are wrapped for its duration), also those made with ``record_tape=False`` (inertia's
    broad and narrow phase), which a ``wp.Tape`` would not record. Non-kernel work (memsets, copies,
    sorts, hash-grid builds) is not counted: ``graph_ops_per_step`` has it. (0, {}) for a runner that
    does not launch Warp kernels (MuJoCo).
    """
    if not hasattr(runner, "new_states"):
        return 0, {}
    a, b = runner.new_states()
    names = {}
    originals = {name: getattr(wp, name) for name in ("launch", "launch_tiled") if hasattr(wp, name)}

    def counting(original):
        def launch(*args, **kwargs):
            kernel = kwargs.get("kernel", args[0] if args else None)
            key = getattr(kernel, "key", str(kernel))
            names[key] = names.get(key, 0) + 1
            return original(*args, **kwargs)
        return launch

    try:
        for name, original in originals.items():
            setattr(wp, name, counting(original))
        runner.step_fresh(a, b)
    finally:
        for name, original in originals.items():
            setattr(wp, name, original)
    return sum(names.values()), names


def rate_summary(samples) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": [round(s, 3) for s in samples]}


class Stepper:
    """Advances one runner. ``python(n)``: n calls of ``runner.step()`` (the README's loop); ``fast(n)``:
    the runner's fastest way to take n steps: a captured Warp graph of two steps (the ping-pong states
    end where they started) replayed n / 2 times, or the runner's own ``native_steps(n)`` (MuJoCo's
    ``mj_step(nstep=n)``). ``fast_kind`` says which ("graph", "native"), None where neither works
    (``fast_error`` says why). ``steps`` counts the steps taken (a capture records, it does not step)."""

    def __init__(self, runner):
        self.runner, self.device = runner, getattr(runner, "device", None)
        self.graph, self.fast_kind, self.fast_error, self.steps = None, None, None, 0
        self.first_step_s = self.capture_s = None

    def python(self, n: int):
        for _ in range(n):
            self.runner.step()
        sync(self.device)
        self.steps += n

    def fast(self, n: int):
        if self.fast_kind == "native":
            self.runner.native_steps(n)
        else:
            for _ in range(n // 2):
                wp.capture_launch(self.graph)
            sync(self.device)
        self.steps += n if self.fast_kind == "native" else 2 * (n // 2)

    def run(self, mode: str, n: int):
        (self.python if mode == "python" else self.fast)(n)

    def prepare(self, warmup: int, graph: bool = True):
        """First step (loads, and compiles when not cached, every module it launches), ``warmup`` steps, then
        the capture of the fast mode (skipped with ``graph=False``)."""
        sync(self.device)
        t = now()
        self.python(1)
        self.first_step_s = now() - t
        self.python(warmup)
        if hasattr(self.runner, "native_steps"):
            self.fast_kind = "native"
            return self
        if not graph:
            self.fast_error = "graph capture disabled"
            return self
        try:
            t = now()
            with wp.ScopedCapture(device=self.device) as cap:
                self.runner.step()
                self.runner.step()
            self.capture_s = now() - t
            self.graph, self.fast_kind = cap.graph, "graph"
        except Exception as e:  # a solver that syncs with the host cannot be captured
            self.fast_error = f"{type(e).__name__}: {e}"
        return self


class Cell:
    """One timed simulation: its runner, stepper, steps per block and the samples of every round."""

    def __init__(self, key, runner, steps_per_block: int):
        self.key, self.runner, self.stepper = key, runner, Stepper(runner)
        self.steps_per_block = {}
        self.set_steps(steps_per_block)
        self.rates = {"python": [], "graph": []}
        self.loads = []

    def set_steps(self, n: int, mode: str | None = None):
        """Steps per block of ``mode`` (both when None): even, for whole graph pairs, at least 2."""
        for m in ((mode,) if mode else ("python", "graph")):
            self.steps_per_block[m] = max(2, 2 * ((int(n) + 1) // 2))

    def modes(self):
        return ("python", "graph") if self.stepper.fast_kind else ("python",)

    def probe(self, steps: int = 4) -> dict:
        """Wall seconds per step of each mode, from ``steps`` steps (sizes the blocks)."""
        out = {}
        for mode in self.modes():
            t = now()
            self.stepper.run(mode, steps)
            out[mode] = (now() - t) / steps
        return out


def alternate_rounds(cells, rounds: int, progress=None):
    """Time every cell in ``rounds`` rounds (see the module docstring); samples land in each cell."""
    for r in range(rounds):
        order = cells if r % 2 == 0 else cells[::-1]
        for cell in order:
            modes = cell.modes() if r % 2 == 0 else cell.modes()[::-1]
            for mode in modes:
                sync(cell.stepper.device)
                meter = LoadMeter().start()
                cell.stepper.run(mode, cell.steps_per_block[mode])
                load = meter.stop()
                cell.rates[mode].append(cell.steps_per_block[mode] / load["wall_s"])
                cell.loads.append({"round": r, "mode": mode, **load})
        if progress:
            progress(r)


def cell_figures(cell, dt: float, entities: int, particles: int) -> dict:
    """The timing figures of a row: per mode median [min, max] steps/s, simulated seconds per wall second,
    entity-steps/s, and the load while the cell's blocks ran."""
    out = {}
    for mode in ("python", "graph"):
        xs = cell.rates[mode]
        if not xs:
            out[mode] = {"error": cell.stepper.fast_error or "not measured"}
            continue
        fig = rate_summary(xs)
        fig["particle_steps_per_s"] = fig["median"] * particles
        fig["entity_steps_per_s"] = fig["median"] * entities
        fig["sim_s_per_wall_s"] = fig["median"] * dt
        fig["sim_s_per_wall_s_range"] = [fig["min"] * dt, fig["max"] * dt]
        out[mode] = fig
    out["graph_kind"] = cell.stepper.fast_kind
    out["load"] = summarize_load(cell.loads)
    out["load"]["blocks"] = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()}
                             for s in cell.loads]
    return out


def paired_ratios(a, b) -> dict | None:
    """Per round a / b of two cells' rates in each mode: median [min, max] (the rounds pair the blocks that
    ran closest in time, so a load change cancels in each ratio)."""
    out = {}
    for mode in ("python", "graph"):
        xs, ys = a.rates[mode], b.rates[mode]
        if xs and ys and len(xs) == len(ys):
            r = [x / y for x, y in zip(xs, ys)]
            out[mode] = {"median": statistics.median(r), "min": min(r), "max": max(r),
                         "samples": [round(v, 4) for v in r]}
        else:
            out[mode] = None
    return out


# ------------------------------------------------------------------------------------ one runner (worlds.py)
def measure(runner, steps: int, repeats: int, warmup: int, cache_dir: str | None, graph: bool = True,
            cache_before: set | None = None) -> dict:
    """Time one runner alone: first step, warm-up, capture, then ``repeats`` interleaved python and graph
    blocks of ``steps`` steps (worlds.py's method; run.py alternates engines with ``alternate_rounds``)."""
    res = {"engine": runner.engine, "counts": runner.counts(), "dt": runner.dt, "notes": list(runner.notes)}
    load_start = loadavg()
    before = cache_before if cache_before is not None else (cache_entries(cache_dir) if cache_dir else set())
    st = Stepper(runner).prepare(warmup, graph=graph)
    res["first_step_s"] = st.first_step_s
    new = cache_entries(cache_dir) - before if cache_dir else set()
    res["modules_compiled"], res["cache"] = len(new), ("cold" if new else "warm")
    if st.capture_s is not None:
        res["capture_s"] = st.capture_s
        st.fast(2 * max(1, warmup // 2))
    cell = Cell(None, runner, steps)
    cell.stepper = st
    for _ in range(repeats):
        for mode in cell.modes():
            t = now()
            st.run(mode, cell.steps_per_block[mode])
            cell.rates[mode].append(cell.steps_per_block[mode] / (now() - t))
    n = res["counts"]["particles"]
    entities = n + res["counts"].get("bodies", 0)
    figs = cell_figures(cell, runner.dt, entities, n)
    res["python"], res["graph"] = figs["python"], figs["graph"]
    ops = graph_ops(st.graph) if st.graph is not None else None
    res["graph_ops_per_step"] = ops / 2 if ops is not None else None
    st.graph = None
    res["steps_simulated"] = st.steps
    res["sim_time_s"] = st.steps * runner.dt
    final_state(runner, res)
    res["launches_per_step"], res["launches_by_kernel"] = count_launches(runner)
    res["loadavg_1min"] = {"start": load_start, "end": loadavg(), "cores": __import__("os").cpu_count()}
    return res


def final_state(runner, res: dict) -> None:
    """``finite``, ``final_min_height`` (lowest particle or body centre of mass) and ``final_max_speed``."""
    q = runner.positions()
    res["finite"] = bool(np.isfinite(q).all())
    res["final_min_height"] = float(q[:, 2].min()) if len(q) else None
    qd = runner.velocities()
    res["final_max_speed"] = float(np.linalg.norm(qd, axis=1).max()) if len(qd) else None
    res["contacts"] = runner.contact_counts()
