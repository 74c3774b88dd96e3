"""Section 2 of the GPU check: throughput vs problem size, on the device and (smaller) on the CPU.

Sweeps (device sizes; ``--tiny`` and the CPU use the first few):

* ``cloth``: run.py's hanging cloth, N x N cells up to 1000 x 1000 (1,002,001 particles, 2M triangles, 3M
  bending edges), built in bulk (``large_scenes``); semi-implicit and XPBD on the same model.
* ``granular``: run.py's granular block, N^3 particles up to 100^3 (1M), particle-particle contact on.
* ``robot``: ``worlds``-many copies of the 20-body robot on one ground, up to 4,096 worlds (81,920 bodies),
  knees driven; semi-implicit, XPBD and the FeatherstoneSolver.
* ``arm``: ``worlds``-many 7-DoF arms on PD drives, up to 4,096 worlds; the same three solvers.

Each point: build (``build_s``), two plain steps (``first_steps_s``: loads kernels, allocates step buffers),
two steps captured with ``wp.ScopedCapture``, one replay timed to size the measurement, then enough replays
for ``target_s`` seconds, bracketed by ``wp.synchronize_device``: ``steps_per_s``,
``entity_steps_per_s`` (x particles + bodies), ``sim_s_per_wall_s``; memory: ``warp_bytes`` = Warp arrays
allocated for the point (model, states, control, contacts, solver and step buffers; ``AllocationWatch``) and,
on CUDA, the memory pool's figures; ``finite`` / ``max_speed`` of the final state (a blown-up run is no
throughput figure). Points are taken in increasing size; a point whose predicted cost (the last point's time
scaled by the size ratio) exceeds what is left of its sweep's budget is skipped and listed.
"""

from __future__ import annotations

import gc
import math
import time

import numpy as np
import warp as wp

import large_scenes
import scenes as S
from bench_scenes import SOLVERS
from common import AllocationWatch, Budget, device_memory, guarded

DEVICE_SWEEPS = {
    "cloth": {"sizes": [32, 64, 128, 256, 512, 1000], "solvers": ["semi_implicit", "xpbd"]},
    "granular": {"sizes": [16, 32, 64, 100], "solvers": ["semi_implicit", "xpbd"]},
    "robot": {"sizes": [1, 16, 256, 1024, 4096], "solvers": ["semi_implicit", "xpbd", "featherstone"]},
    "arm": {"sizes": [1, 16, 256, 1024, 4096], "solvers": ["semi_implicit", "xpbd", "featherstone"]},
}
CPU_SIZES = {"cloth": [32, 64, 128], "granular": [16, 32], "robot": [1, 16, 64], "arm": [1, 16, 64]}
TINY_SIZES = {"cloth": [4, 8], "granular": [4, 6], "robot": [1, 2], "arm": [1, 2]}


def build(scene: str, size: int, device):
    if scene == "cloth":
        return large_scenes.build_cloth((size, size), device)
    if scene == "granular":
        return large_scenes.build_granular((size, size, size), device)
    if scene == "robot":
        return S.robot_model(device, worlds=size)
    return S.arm_model(device, worlds=size)


def settings(scene: str, solver: str) -> dict:
    if scene in ("cloth", "granular"):
        return SOLVERS[solver].settings(scene)
    return S.rigid_settings(solver, scene)


def make_solver(scene: str, solver: str, model):
    if scene in ("cloth", "granular"):
        return SOLVERS[solver](model, scene)
    return S.make_solver(solver, model, scene)


class Runner:
    """collide + step + swap on one model; ``pair()`` = two steps (the states end where they started)."""

    def __init__(self, scene, solver_name, model):
        self.model = model
        self.solver = make_solver(scene, solver_name, model)
        self.dt = settings(scene, solver_name)["dt"]
        self.a, self.b = model.state(), model.state()
        self.control = model.control()
        if scene == "arm":
            S.arm_start(model, self.a, self.solver)
            S.arm_targets(model, self.control)
        elif scene == "robot":
            S.robot_targets(model, self.control)
        self.contacts = model.contacts() if model.shape_count else None

    def pair(self):
        for _ in range(2):
            if self.contacts is not None:
                self.model.collide(self.a, self.contacts, check_overflow=False)
            self.solver.step(self.a, self.b, self.control, self.contacts, self.dt)
            self.a, self.b = self.b, self.a

    def final(self) -> dict:
        qd = [getattr(self.a, f).numpy() for f in ("particle_qd", "body_qd") if getattr(self.a, f).size]
        speed = max((float(np.abs(v).max()) for v in qd), default=0.0)
        out = {"finite": bool(np.isfinite(speed)), "max_speed": speed}
        if self.contacts is not None:
            out["contacts"] = {k: v for k, v in self.contacts.counts().items()}
            out["contact_overflow"] = bool(self.contacts.check_overflow())
        return out


def measure(runner, device, target_s: float) -> dict:
    """Two plain steps, capture a pair, time replays (see the module docstring)."""
    dev = wp.get_device(device)
    t0 = time.perf_counter()
    runner.pair()
    wp.synchronize_device(dev)
    first = time.perf_counter() - t0
    with wp.ScopedCapture(device=dev) as cap:
        runner.pair()
    wp.capture_launch(cap.graph)  # the first replay uploads the graph: untimed
    wp.synchronize_device(dev)
    t0 = time.perf_counter()
    wp.capture_launch(cap.graph)
    wp.synchronize_device(dev)
    probe = max(time.perf_counter() - t0, 1e-7)
    replays = int(min(500, max(2, math.ceil(target_s / probe))))
    t0 = time.perf_counter()
    for _ in range(replays):
        wp.capture_launch(cap.graph)
    wp.synchronize_device(dev)
    elapsed = time.perf_counter() - t0
    steps = 2 * replays
    return {"first_steps_s": round(first, 4), "steps_timed": steps, "timed_s": round(elapsed, 4),
            "steps_per_s": steps / elapsed, "probe_pair_s": probe}


def _collect(entities: int) -> None:
    """A full garbage collection before and after large points only: with torch loaded one costs ~0.3 s."""
    if entities >= 50_000:
        gc.collect()


def run_point(scene, size, solvers, device, target_s, watch) -> list:
    """Build one model of ``scene`` at ``size`` and measure every solver on it (fresh states each)."""
    dev = wp.get_device(device)
    base = watch.live
    t0 = time.perf_counter()
    model = build(scene, size, dev)
    build_s = time.perf_counter() - t0
    model_bytes = watch.live - base
    rows = []
    for name in solvers:
        watch.reset_peak()
        before = watch.live

        def one():
            t0 = time.perf_counter()
            runner = Runner(scene, name, model)
            setup_s = time.perf_counter() - t0
            m = measure(runner, dev, target_s)
            m["setup_s"] = round(setup_s, 4)
            entities = S.entity_count(model)
            st = settings(scene, name)
            m.update(runner.final())
            m.update({"entities": entities, "entity_steps_per_s": m["steps_per_s"] * entities,
                      "sim_s_per_wall_s": m["steps_per_s"] * st["dt"], "dt": st["dt"],
                      "solver_bytes": watch.peak - before, "warp_bytes": model_bytes + watch.peak - before})
            m.update(device_memory(dev))
            return m

        r = guarded(one)
        r.update({"scene": scene, "size": size, "solver": name, "engine": "inertia", "device": str(dev),
                  "build_s": round(build_s, 3), "model_bytes": model_bytes, "particles": model.particle_count,
                  "bodies": model.body_count, "worlds": model.num_worlds})
        rows.append(r)
        _collect(S.entity_count(model))
    entities = S.entity_count(model)
    del model
    _collect(entities)
    return rows


def predict(rows: list, ratio: float) -> float:
    """Seconds the next point should take, from the last point's rows: what grows with the size (build,
    solver setup, first steps) times ``ratio``, plus the timed replays (fixed by target_s) as they were."""
    if not rows:
        return 0.0
    build = max((r.get("build_s", 0.0) for r in rows), default=0.0)
    grow = sum(r.get("setup_s", 0.0) + r.get("first_steps_s", 0.0) for r in rows)
    fixed = sum(r.get("timed_s", 0.0) + 3 * r.get("probe_pair_s", 0.0) for r in rows)
    return (build + grow) * ratio + fixed


def sweep(scene, sizes, solvers, device, budget: Budget, target_s: float, watch) -> dict:
    rows, skipped, last = [], [], None
    for size in sizes:
        left = budget.left()
        if last is not None:
            prev_size, prev_rows = last
            ratio = (size / prev_size) ** (2 if scene == "cloth" else 3 if scene == "granular" else 1)
            predicted = predict(prev_rows, ratio)
            if predicted > left:
                skipped.append({"size": size, "reason": f"predicted {predicted:.1f} s > {left:.1f} s left"})
                continue
        elif left <= 0:
            skipped.append({"size": size, "reason": "no time left"})
            continue
        point = guarded(run_point, scene, size, solvers, device, target_s, watch)
        if isinstance(point, dict) and "result" in point:
            rows += point["result"]
            last = (size, point["result"])
        else:
            rows.append(dict(point, scene=scene, size=size, engine="inertia", device=str(device)))
    return {"rows": rows, "skipped": skipped}


def newton_sweep(scene, sizes, solvers, device, budget: Budget, target_s: float) -> dict:
    """Newton's twin of the cloth / granular scenes at the same sizes (bench_newton.NewtonRunner)."""
    from bench_newton import NewtonRunner, import_newton
    from bench_scenes import SCENES

    newton, err = import_newton()
    if newton is None:
        return {"status": "skipped", "reason": err, "rows": []}
    rows = []
    for size in sizes:
        if budget.left() <= 0:
            break
        dims = (size, size) if scene == "cloth" else (size, size, size)
        for name in solvers:
            def one():
                t0 = time.perf_counter()
                r = NewtonRunner(SCENES[scene], dims, device, name)
                build_s = time.perf_counter() - t0

                class Pair:
                    def pair(self):
                        r.step()
                        r.step()
                m = measure(Pair(), device, target_s)
                n = r.model.particle_count
                m.update({"build_s": build_s, "entities": n, "entity_steps_per_s": m["steps_per_s"] * n})
                return m
            row = guarded(one)
            row.update({"scene": scene, "size": size, "solver": name, "engine": "newton", "device": str(device)})
            rows.append(row)
    return {"status": "ok", "rows": rows}


def run(device, tiny: bool, budget: Budget, cpu_budget_s: float, newton: bool = True) -> dict:
    """Every sweep on the device, then the CPU points (``cpu_budget_s``), then Newton where it imports."""
    dev = wp.get_device(device)
    target = 0.02 if tiny else 0.4
    out = {"device": {}, "cpu": {}, "newton": {}}
    sweeps = list(DEVICE_SWEEPS.items())
    with AllocationWatch(dev) as watch:
        device_budget = budget.sub(budget.left() - (0 if dev.is_cpu else cpu_budget_s))
        for k, (scene, spec) in enumerate(sweeps):
            sizes = TINY_SIZES[scene] if tiny else (CPU_SIZES[scene] if dev.is_cpu else spec["sizes"])
            share = device_budget.sub(device_budget.left() / (len(sweeps) - k))
            out["device"][scene] = sweep(scene, sizes, spec["solvers"], dev, share, target, watch)
    if not dev.is_cpu:  # the CPU beside it, at small sizes, for the chart
        cpu = wp.get_device("cpu")
        with AllocationWatch(cpu) as watch:
            cpu_budget = budget.sub(cpu_budget_s)
            for k, (scene, spec) in enumerate(sweeps):
                sizes = TINY_SIZES[scene] if tiny else CPU_SIZES[scene]
                share = cpu_budget.sub(cpu_budget.left() / (len(sweeps) - k))
                out["cpu"][scene] = sweep(scene, sizes, spec["solvers"], cpu, share, target, watch)
    if newton:
        for scene in ("cloth", "granular"):
            sizes = TINY_SIZES[scene] if tiny else [s for s in DEVICE_SWEEPS[scene]["sizes"] if s <= 256]
            out["newton"][scene] = guarded(newton_sweep, scene, sizes, DEVICE_SWEEPS[scene]["solvers"], dev,
                                           budget.sub(30.0), target)
    rows = [r for part in ("device", "cpu") for s in out[part].values() for r in s["rows"]]
    errors = [f"{r['scene']} {r.get('size')} {r.get('solver')}: {r['error']}" for r in rows if "error" in r]
    out["errors"] = errors
    out["status"] = "ok" if not errors else "partial"
    out["headline"] = headline(out)
    return out


def headline(out) -> dict:
    """The issue's figures: the largest cloth's semi-implicit particle-steps/s (goal >= 1e9 on one H200) and the
    largest robot and arm batch of each solver."""
    h = {}
    for scene, spec in out["device"].items():
        for r in spec["rows"]:
            if "steps_per_s" not in r:
                continue
            key = f"{scene}_{r['solver']}"
            if key not in h or r["size"] > h[key]["size"]:
                h[key] = {"size": r["size"], "entities": r["entities"], "entity_steps_per_s": r["entity_steps_per_s"],
                          "steps_per_s": r["steps_per_s"], "finite": r.get("finite")}
    return h
