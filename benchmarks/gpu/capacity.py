"""Section: which kernels launch over a contact buffer's capacity rather than its live count, and what their
idle threads cost per step on this device.

A step's contact kernels are launched with ``dim`` = a capacity (``Contacts.rigid_contact_max``, ...); each
thread past the live count (``contacts.*_count[0]``, on the device) returns at once. (On a CPU the narrow
phase, the XPBD mass splitting and the solvers' shape-shape contact kernels instead run one thread looping over
what was found, ``contact_geometry.list_threads``, so they are not listed there.) A launch dimension cannot
come from a device value without a host read, which a captured step cannot make.

For each scene: warm-up steps (contacts develop), then one ``collide`` + ``step`` from state ``a`` into ``b``
with ``wp.launch`` wrapped: a launch is *over capacity* when its ``dim`` equals a contact capacity and it
passes that buffer's live-count array (directly or inside a kernel struct). That step (``a`` -> ``b``: ``a`` is
never written, so replaying it recomputes the same ``b``) is captured twice: as the engine launches it, and
with each over-capacity launch's ``dim`` cut to the live count found (a host read made before capturing). Both
graphs are replayed and timed (best of ``ROUNDS`` blocks of ``REPLAYS``); ``idle_s_per_step`` is the
difference, and ``same_result`` says whether both produced the same ``b`` (bitwise): the count-bounded launch
computes the same step.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

import scenes as S
from bench_scenes import SCENES, SOLVERS
from common import guarded

CAPACITIES = ("soft_contact_max", "particle_pair_max", "rigid_pair_max", "rigid_contact_max")
COUNTS = {"soft_contact_max": "soft_contact_count", "particle_pair_max": "particle_pair_count",
          "rigid_pair_max": "rigid_pair_count", "rigid_contact_max": "rigid_contact_count"}
REPLAYS, ROUNDS = 10, 3


def _cases(tiny: bool) -> list:
    """(label, build(device) -> model, solver factory, dt, warm-up steps)."""
    return [
        ("pile_semi_implicit", lambda d: SCENES["boxes"].build_inertia((2, 2, 1) if tiny else (4, 4, 4), d),
         lambda m: SOLVERS["semi_implicit"](m, "boxes"), 1e-3, 20 if tiny else 150),
        ("pile_xpbd", lambda d: SCENES["boxes"].build_inertia((2, 2, 1) if tiny else (4, 4, 4), d),
         lambda m: SOLVERS["xpbd"](m, "boxes"), 1.0 / 1200, 20 if tiny else 150),
        ("robot_featherstone", lambda d: S.robot_model(d, worlds=2 if tiny else 64),
         lambda m: S.make_solver("featherstone", m, "robot"), 1e-3, 10 if tiny else 50),
        ("robot_xpbd", lambda d: S.robot_model(d, worlds=2 if tiny else 64),
         lambda m: S.make_solver("xpbd", m, "robot"), 1.0 / 600, 10 if tiny else 30),
        ("granular_semi_implicit", lambda d: SCENES["granular"].build_inertia((6, 6, 6) if tiny else (32, 32, 32), d),
         lambda m: SOLVERS["semi_implicit"](m, "granular"), 1.0 / 2400, 20 if tiny else 100),
        ("cloth_xpbd", lambda d: SCENES["cloth"].build_inertia((8, 8) if tiny else (32, 32), d),
         lambda m: SOLVERS["xpbd"](m, "cloth"), 1.0 / 600, 10 if tiny else 50),
    ]


class _Launches:
    """Wraps ``wp.launch`` (the module attribute the engine calls): logs every call, and with ``cut`` set
    ({kernel key: dim}) launches those kernels at that dim instead."""

    def __init__(self, cut=None):
        self.calls, self.cut, self._orig = [], cut or {}, None

    def __enter__(self):
        self._orig = wp.launch

        def launch(kernel, dim, *args, **kwargs):
            self.calls.append((kernel, dim, args, kwargs))
            if kernel.key in self.cut and dim == self.cut[kernel.key][0]:
                dim = self.cut[kernel.key][1]
            return self._orig(kernel, dim, *args, **kwargs)

        wp.launch = launch
        return self

    def __exit__(self, *exc):
        wp.launch = self._orig


def _counts_read(args, kwargs, count_ptrs: dict) -> set:
    """Names of the capacities whose live-count array a launch passes, as an array or inside a struct."""
    values = list(args) + [v for k in ("inputs", "outputs") for v in kwargs.get(k, [])]
    found = set()
    for v in values:
        arrays = [v] if isinstance(v, wp.array) else []
        cls = getattr(v, "_cls", None)  # a wp.struct instance: its array fields
        if cls is not None:
            arrays += [getattr(v, f) for f in getattr(cls, "vars", {}) if isinstance(getattr(v, f, None), wp.array)]
        found |= {count_ptrs[a.ptr] for a in arrays if a.ptr in count_ptrs}
    return found


def _graph_time(graph, device) -> float:
    wp.capture_launch(graph)  # the first replay (uploads the graph on CUDA) is not timed
    wp.synchronize_device(device)
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(REPLAYS):
            wp.capture_launch(graph)
        wp.synchronize_device(device)
        best = min(best, (time.perf_counter() - t0) / REPLAYS)
    return best


def measure_case(label, build, make_solver, dt, warm, device) -> dict:
    model = build(device)
    solver = make_solver(model)
    # every call plain: this counts the launches of one step as it makes them (inertia.replay would replay)
    solver.replay.enabled = model.collision.replay.enabled = False
    a, b = model.state(), model.state()
    control, contacts = model.control(), model.contacts()
    for _ in range(warm):  # let the contacts develop (the pile lands, the block settles)
        model.collide(a, contacts, check_overflow=False)
        solver.step(a, b, control, contacts, dt)
        a, b = b, a

    def step():
        model.collide(a, contacts, check_overflow=False)
        solver.step(a, b, control, contacts, dt)

    with _Launches() as log:
        step()
    wp.synchronize_device(device)
    caps = {name: getattr(contacts, name) for name in CAPACITIES}
    live = {name: int(getattr(contacts, COUNTS[name]).numpy()[0]) for name in CAPACITIES}
    count_ptrs = {getattr(contacts, COUNTS[name]).ptr: name for name in CAPACITIES}
    rows, cut = {}, {}
    for kernel, dim, args, kwargs in log.calls:
        d = dim if isinstance(dim, int) else (dim[0] if len(dim) == 1 else None)
        read = _counts_read(args, kwargs, count_ptrs)
        match = [n for n in CAPACITIES if d is not None and caps[n] > 0 and d == caps[n] and n in read]
        if not match:
            continue
        name = match[0]
        row = rows.setdefault(kernel.key, {"kernel": kernel.key, "buffer": name, "capacity": caps[name],
                                           "live": live[name], "launches_per_step": 0})
        row["launches_per_step"] += 1
        cut[kernel.key] = (dim, max(1, live[name]))
    fields = [f for f in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q", "joint_qd")
              if getattr(b, f).size]
    results, times = {}, {}
    for variant, c in (("capacity", {}), ("live", cut)):
        with _Launches(c):
            with wp.ScopedCapture(device=device) as cap:
                step()
        times[variant] = _graph_time(cap.graph, device)
        results[variant] = [getattr(b, f).numpy().copy() for f in fields]
    same = all(np.array_equal(x, y, equal_nan=True) for x, y in zip(results["capacity"], results["live"]))
    return {"scene": label, "capacities": caps, "live_counts": live,
            "occupancy": {n: (live[n] / caps[n] if caps[n] else None) for n in CAPACITIES},
            "launches_per_step": len(log.calls), "over_capacity": list(rows.values()),
            "step_s_capacity": times["capacity"], "step_s_live": times["live"],
            "idle_s_per_step": times["capacity"] - times["live"],
            "idle_fraction": (times["capacity"] - times["live"]) / times["capacity"], "same_result": same}


def run(device, tiny: bool, budget) -> dict:
    dev = wp.get_device(device)
    out = {}
    for label, build, make_solver, dt, warm in _cases(tiny):
        if budget.left() <= 0:
            out[label] = {"status": "skipped", "reason": "no time left"}
            continue
        out[label] = guarded(measure_case, label, build, make_solver, dt, warm, dev)
    errors = [k for k, v in out.items() if v.get("status") == "error"]
    mismatch = [k for k, v in out.items() if v.get("same_result") is False]
    return {"status": "ok" if not errors else "partial", "device": str(dev), "cases": out,
            "summary": {k: {"idle_s_per_step": v.get("idle_s_per_step"), "idle_fraction": v.get("idle_fraction"),
                            "occupancy": v.get("occupancy")} for k, v in out.items() if "idle_s_per_step" in v},
            "errors": errors, "count_bounded_differs": mismatch, "replays": REPLAYS, "rounds": ROUNDS}
