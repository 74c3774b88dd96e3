"""Cost of a differentiable rollout: backward/forward time ratio and peak memory against the horizon.

    python benchmarks/rollout.py                         # 32x32 cloth, T = 100, 1,000, 10,000 steps (minutes)
    python benchmarks/rollout.py --tiny                  # 4x4 cloth, T = 10, 40 (seconds; smoke test)
    python benchmarks/rollout.py --json out.json --repeats 7
    python benchmarks/rollout.py --newton-python /work/venv-newton/bin/python   # Newton side by side

Scene: a (N x N)-cell cloth (``builder.add_cloth_grid``, the material of benchmarks/run.py's cloth
scene, nothing pinned) starting 0.2 m above a ground plane (--tiny: 0.06 m) and falling at 2 m/s;
it touches the ground after about 0.07 s (--tiny: about 0.01 s). A horizon of T steps is
``frames = T / substeps`` frames of ``substeps`` solver steps each (full size: substeps = 10; --tiny:
substeps = 2) at the solver's own dt (``--solver``: a name in bench_scenes.SOLVERS, with the settings it
states for the cloth scene: semi_implicit dt = 1/2400 s as in run.py, about 170 steps to touch down;
xpbd dt = 1/600 s, 20 iterations, relaxation 1.5, about 45 steps). Every rollout uses ``output="final"`` and the loss ``sum_i q_final[i] . w_i`` with
fixed, non-uniform weights (``loss_weights``); gradients are taken with respect to the initial
positions and velocities, and a checksum of them is recorded for every run.

1. ``ratio``: in one process, for several ``checkpoint_every`` values k (1, the default, round(sqrt
   frames), frames = one tape), the wall time of ``Rollout`` forward (no tape) and backward
   (``loss.backward()``: re-simulate each segment on a tape, then run it backwards), after a warm-up
   run that loads (compiles) every kernel; median of ``--repeats`` runs.
   Per-step times are also given per simulated second (``*_s_per_sim_s``), the figure to compare
   between solvers with different dt.
2. ``memory``: for each T, with the default k ("checkpointed") and k = frames ("none"), one fresh
   subprocess builds the scene, warms the kernels up on a 1-frame rollout, then reads its resident
   set size, resets the peak (``/proc/self/clear_refs``), builds the Rollout and runs forward and
   backward; the figure is peak RSS (VmHWM) minus the RSS before, next to
   ``Rollout.memory_estimate()``.
3. ``newton``: when Newton imports (here, or in the interpreter given by --newton-python), the same
   cloth with Newton's SolverSemiImplicit recorded on one plain ``wp.Tape`` over T steps (Newton has
   no checkpointing), measured the same way in a subprocess. Otherwise the section says "skipped".

Prints a table and a JSON document (also written to ``--json``). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

SCHEMA = "inertia-rollout-benchmark/1"

from report import emit  # noqa: E402
from rollout_newton import child_newton, find_newton_python, measure_newton  # noqa: E402
from rollout_scene import (FULL, TINY, build_inertia, cloth_params,  # noqa: E402, F401
                           counts_of, expected_counts, grad_checksum, loss_weights, make_solver, mem_available,
                           peak_bytes, reset_peak, rss_bytes, run_child, solver_dt)


# ------------------------------------------------------------------------------------ inertia runs
class InertiaCase:
    """One scene + solver; runs ``Rollout`` forward/backward with a given horizon and k."""

    def __init__(self, n: int, height: float, solver: str, substeps: int, device="cpu", capture: bool = True):
        import inertia
        import torch

        self.inertia, self.torch = inertia, torch
        self.n, self.solver_name, self.substeps = n, solver, substeps
        self.capture = capture  # Rollout's graph replay (--no-capture measures the plain Python launches)
        self.dt = solver_dt(solver)
        self.model = build_inertia(n, height, device)
        self.solver = make_solver(solver, self.model)
        self.q0 = wp.to_torch(self.model.particle_q).clone()
        self.qd0 = wp.to_torch(self.model.particle_qd).clone()
        self.w = torch.from_numpy(loss_weights(self.model.particle_count))

    def rollout(self, frames: int, k):
        return self.inertia.Rollout(self.model, self.solver, frames, self.substeps * self.dt, substeps=self.substeps,
                                    checkpoint_every=k, output="final", capture=self.capture)

    def run(self, r) -> dict:
        """Forward + backward once; wall times and a checksum of the gradients."""
        torch = self.torch
        q0 = self.q0.clone().requires_grad_(True)
        qd0 = self.qd0.clone().requires_grad_(True)
        t0 = time.perf_counter()
        q, _ = r(q0, qd0)
        t1 = time.perf_counter()
        loss = (q * self.w).sum()
        loss.backward()
        t2 = time.perf_counter()
        q = q.detach()
        return {"forward_s": t1 - t0, "backward_s": t2 - t1, "loss": float(loss.detach()),
                "finite": bool(torch.isfinite(q).all()), "min_height": float(q[:, 2].min()),
                "grad": grad_checksum(q0.grad.numpy(), qd0.grad.numpy())}


def _ks_for(frames: int, default_k: int) -> list:
    """(k, labels) for k = 1, round(sqrt(frames)), the default and frames, each k once."""
    labels = {}
    for k, label in [(1, "k=1"), (max(1, round(math.sqrt(frames))), "round(sqrt(frames))"),
                     (default_k, "default"), (frames, "one tape (no checkpointing)")]:
        labels.setdefault(k, []).append(label)
    return [(k, labels[k]) for k in sorted(labels)]


def measure_ratio(case: InertiaCase, steps: int, repeats: int) -> dict:
    frames = steps // case.substeps
    default_k = case.rollout(frames, None).checkpoint_every
    warm = case.rollout(frames, 1)
    t = time.perf_counter()
    case.run(warm)  # loads every kernel (compiles the ones not cached)
    first_s = time.perf_counter() - t
    del warm
    out = {"steps": steps, "frames": frames, "substeps": case.substeps, "repeats": repeats, "dt": case.dt,
           "sim_time_s": steps * case.dt,
           "default_k": default_k, "warmup_run_s": first_s, "configs": []}
    for k, labels in _ks_for(frames, default_k):
        load_start = _loadavg()
        r = case.rollout(frames, k)
        case.run(r)  # allocates the segment buffers; not timed
        if getattr(r, "capture", False):
            case.run(r)  # the second run captures the graphs that the timed runs replay; not timed
        runs = [case.run(r) for _ in range(repeats)]
        fwd = [x["forward_s"] for x in runs]
        bwd = [x["backward_s"] for x in runs]
        ratios = [b / f for f, b in zip(fwd, bwd)]
        est = r.memory_estimate()
        out["configs"].append({
            "checkpoint_every": k, "labels": labels, "segments": r.segment_count,
            "capture": bool(getattr(r, "capture", False)),
            "forward_s": _stats(fwd), "backward_s": _stats(bwd),
            "forward_per_step_ms": 1e3 * statistics.median(fwd) / steps,
            "backward_per_step_ms": 1e3 * statistics.median(bwd) / steps,
            # wall seconds per simulated second (steps x dt simulated)
            "forward_s_per_sim_s": statistics.median(fwd) / (steps * case.dt),
            "backward_s_per_sim_s": statistics.median(bwd) / (steps * case.dt),
            "ratio": statistics.median(ratios),
            "ratio_of_medians": statistics.median(bwd) / statistics.median(fwd),
            "ratio_of_mins": min(bwd) / min(fwd),
            "ratio_samples": [round(x, 3) for x in ratios],
            "memory_estimate": est,
            "finite": all(x["finite"] and x["grad"]["finite"] for x in runs),
            "min_height": runs[-1]["min_height"], "loss": runs[-1]["loss"], "grad": runs[-1]["grad"],
            "grad_repeatable": len({x["grad"]["sha256_16"] for x in runs}) == 1,
            # other load on the machine: 1-minute load average before and after this k's runs
            "loadavg_1min": {"start": load_start, "end": _loadavg(), "cores": os.cpu_count()},
        })
        del r
        gc.collect()
    return out


def _loadavg():
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _stats(xs) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "samples": [round(x, 4) for x in xs]}


# ------------------------------------------------------------------------------------ subprocess children
def child_inertia(spec: dict) -> dict:
    """One memory measurement in a fresh process (see the module docstring, 2.)."""
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    case = InertiaCase(spec["size"], spec["height"], spec["solver"], spec["substeps"], spec.get("device", "cpu"),
                       spec.get("capture", True))
    frames = spec["steps"] // spec["substeps"]
    warm = case.rollout(1, None)
    case.run(warm)  # load every kernel before the baseline
    del warm
    gc.collect()
    reset_ok = reset_peak()
    base = rss_bytes()
    peak0 = peak_bytes()
    r = case.rollout(frames, spec["k"])  # k None: the default; its own buffers count
    est_built = r.memory_estimate()  # contact lists at the forward capacities
    peak_built = peak_bytes()
    res = case.run(r)
    peak_all = peak_bytes()
    return {
        "checkpoint_every": r.checkpoint_every, "segments": r.segment_count, "frames": frames,
        # after the backward pass the per-step contact lists are sized to the contacts the forward found
        "memory_estimate": r.memory_estimate(), "memory_estimate_at_build": est_built, "rss_before": base, "peak_before": peak0,
        "peak_after_build": peak_built, "peak_rss": peak_all, "measured": peak_all - base,
        "peak_reset": reset_ok, "counts": counts_of(case.model), **res,
    }


# ------------------------------------------------------------------------------------ sections
def measure_memory(args, cfg, ratio, device) -> list:
    """Section 2: one subprocess per (T, checkpointing); ``--jobs`` of them at a time."""
    from concurrent.futures import ThreadPoolExecutor

    rows, todo = [], []
    per_step = None
    if ratio and ratio["configs"]:
        c = max(ratio["configs"], key=lambda c: c["checkpoint_every"])
        per_step = (c["forward_per_step_ms"] + c["backward_per_step_ms"]) / 1e3
    case = InertiaCase(cfg["size"], cfg["height"], args.solver, cfg["substeps"], device, not args.no_capture)
    avail = mem_available()
    for steps in cfg["memory_steps"]:
        frames = steps // cfg["substeps"]
        for mode, k in (("checkpointed", None), ("none", frames)):
            row = {"steps": steps, "frames": frames, "substeps": cfg["substeps"], "mode": mode}
            r = case.rollout(frames, k)  # for the estimate and the chosen k (cheap: nothing is simulated)
            row["checkpoint_every"] = r.checkpoint_every
            row["segments"] = r.segment_count
            row["estimate"] = r.memory_estimate()
            del r
            row["expected_wall_s"] = per_step * steps if per_step else None
            if avail is not None and row["estimate"]["total"] > 0.7 * avail / max(1, args.jobs):
                row["status"] = (f"not run: estimated {row['estimate']['total'] / 2**30:.1f} GiB > 70% of the "
                                 f"{avail / 2**30:.1f} GiB available (/ --jobs)")
            elif row["expected_wall_s"] and row["expected_wall_s"] > args.child_timeout:
                row["status"] = (f"not run: expected {row['expected_wall_s']:.0f} s (from section 1's per-step "
                                 f"times) > --child-timeout {args.child_timeout:.0f} s")
            else:
                spec = {"kind": "inertia", "capture": not args.no_capture, "size": cfg["size"], "height": cfg["height"],
                        "solver": args.solver,
                        "substeps": cfg["substeps"], "steps": steps, "k": k, "device": args.device}
                todo.append((row, spec))
            rows.append(row)
    del case
    gc.collect()

    def one(item):
        row, spec = item
        res = run_child(spec, sys.executable, args.child_timeout)
        if res["status"] == "ok":
            if res["checkpoint_every"] != row["checkpoint_every"]:
                res["status"] = (f"error: the child chose k={res['checkpoint_every']}, "
                                 f"expected {row['checkpoint_every']}")
            res["measured_over_estimate"] = res["measured"] / res["memory_estimate"]["total"]
        row.update({k2: v for k2, v in res.items() if k2 not in ("frames", "checkpoint_every", "segments")})
        print(f"  memory T={row['steps']} {row['mode']}: {row['status']} ({row['wall_s']:.1f} s)", file=sys.stderr,
              flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, todo))
    return rows


# ------------------------------------------------------------------------------------ output
def _fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


def _mib(b):
    return None if b is None else b / 2**20


def _grid(head, rows) -> list:
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in [head] + rows]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def table(doc) -> str:
    c = doc["config"]
    lines = [f"cloth {c['size']}x{c['size']} ({doc['counts']['particles']} particles), solver {c['solver']} "
             f"{c.get('solver_kwargs', {})}, dt = 1/{round(1 / c['dt'])} s, substeps {c['substeps']}, "
             f"device {doc['machine']['device']}"]
    ra = doc["ratio"]
    lines.append(f"\n1. backward / forward, T = {ra['steps']} steps ({ra['frames']} frames, "
                 f"{ra['steps'] * c['dt']:.3f} s simulated), median of {ra['repeats']}; default k = {ra['default_k']}")
    rows = []
    for r in ra["configs"]:
        rows.append((r["checkpoint_every"], r["segments"], ", ".join(r["labels"]),
                     _fmt(r["forward_per_step_ms"], ".3f"), _fmt(r["backward_per_step_ms"], ".3f"),
                     _fmt(r.get("forward_s_per_sim_s"), ".2f"), _fmt(r.get("backward_s_per_sim_s"), ".2f"),
                     _fmt(r["ratio"], ".2f"), _fmt(r["ratio_of_mins"], ".2f"),
                     _fmt(_mib(r["memory_estimate"]["total"]), ".2f"), r["grad"]["sha256_16"]))
    lines += _grid(("k", "segments", "config", "fwd ms/step", "bwd ms/step", "fwd s/sim s", "bwd s/sim s",
                    "bwd/fwd", "min bwd/min fwd", "est MiB", "grad sha"), rows)
    lines.append("s/sim s = wall seconds per simulated second (per-step time / dt)")
    lines.append("\n2. peak memory (fresh process each; measured = peak RSS - RSS before the rollout)")
    rows = []
    for m in doc["memory"]:
        ok = m.get("status") == "ok"
        rows.append((m["steps"], m["frames"], m["mode"], m["checkpoint_every"],
                     _fmt(_mib(m.get("measured")), ".1f") if ok else m.get("status", "-")[:40],
                     _fmt(_mib(m["estimate"]["total"]), ".1f"), _fmt(m.get("measured_over_estimate"), ".2f"),
                     _fmt(m.get("forward_s"), ".2f"), _fmt(m.get("backward_s"), ".2f"),
                     _fmt((m["backward_s"] / m["forward_s"]) if ok else None, ".2f"),
                     m["grad"]["sha256_16"] if ok else "-"))
    lines += _grid(("T", "frames", "checkpointing", "k", "measured MiB", "est MiB", "meas/est", "fwd s", "bwd s",
                    "bwd/fwd", "grad sha"), rows)
    lines.append(f"\n3. newton: {doc['newton']}")
    if doc["newton_results"]:
        rows = []
        for r in doc["newton_results"]:
            ok = r["status"] == "ok"
            oc, on = r.get("ours_checkpointed", {}), r.get("ours_none", {})
            rows.append((r["steps"], _fmt(r.get("plain_forward_per_step_ms"), ".3f") if ok else r["status"][:40],
                         _fmt(r.get("forward_per_step_ms"), ".3f"), _fmt(r.get("backward_per_step_ms"), ".3f"),
                         _fmt(r.get("ratio"), ".2f"), _fmt(r.get("grad_cost_over_plain"), ".2f"),
                         _fmt(_mib(r.get("measured")), ".1f"), _fmt(oc.get("ratio_over_newton"), ".2f"),
                         _fmt(on.get("ratio_over_newton"), ".2f"), _fmt(oc.get("total_time_over_newton"), ".2f"),
                         _fmt(on.get("total_time_over_newton"), ".2f"), _fmt(oc.get("memory_over_newton"), ".3f"),
                         _fmt(on.get("memory_over_newton"), ".2f")))
        lines += _grid(("T", "plain ms/step", "taped fwd ms/step", "bwd ms/step", "bwd/fwd", "(fwd+bwd)/plain",
                        "peak MiB", "ratio ckpt/N", "ratio none/N", "time ckpt/N", "time none/N", "mem ckpt/N",
                        "mem none/N"), rows)
        lines.append("ckpt / none: ours with the default k / with one tape (section 2's runs at the same T); "
                     "time = forward + backward")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true", help="4x4 cloth, T = 10 and 40 (smoke test, seconds)")
    p.add_argument("--size", type=int, default=None, help="cloth cells per side (default 32; tiny 4)")
    p.add_argument("--substeps", type=int, default=None, help="solver steps per frame (default 10; tiny 2)")
    p.add_argument("--ratio-steps", type=int, default=None, help="horizon T of section 1 (default 1000; tiny 40)")
    p.add_argument("--memory-steps", default=None, help="comma list of horizons T (default 100,1000,10000)")
    p.add_argument("--repeats", type=int, default=None, help="timed runs per k in section 1 (median reported)")
    p.add_argument("--solver", default="semi_implicit", help="a name in bench_scenes.SOLVERS")
    p.add_argument("--device", default="cpu")
    p.add_argument("--child-timeout", type=float, default=900.0,
                   help="seconds one subprocess may take (a longer one is reported as timed out, not run)")
    p.add_argument("--jobs", type=int, default=None,
                   help="section 2 subprocesses at a time (default 1; tiny 2). >1 skews their wall times")
    p.add_argument("--newton-python", default=None, help="an interpreter where `import newton` works")
    p.add_argument("--no-newton", action="store_true", help="skip section 3")
    p.add_argument("--no-memory", action="store_true", help="skip section 2")
    p.add_argument("--no-capture", action="store_true",
                   help="Rollout(capture=False): every launch from Python (the cost graph replay saves)")
    p.add_argument("--json", default=None, help="also write the JSON document here")
    p.add_argument("--quiet", action="store_true", help="print only the JSON document")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        res = child_newton(spec) if spec["kind"] == "newton" else child_inertia(spec)
        print(json.dumps(res))
        return res

    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    from bench_scenes import SOLVERS
    from machine import machine_info

    if args.solver not in SOLVERS:
        raise SystemExit(f"unknown solver {args.solver!r}; choose from {', '.join(SOLVERS)}")
    cfg = dict(TINY if args.tiny else FULL)
    for key in ("size", "substeps", "ratio_steps", "repeats"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.memory_steps:
        cfg["memory_steps"] = tuple(int(s) for s in args.memory_steps.split(",") if s)
    for steps in (cfg["ratio_steps"],) + tuple(cfg["memory_steps"]):
        if steps < cfg["substeps"] or steps % cfg["substeps"]:
            raise SystemExit(f"horizon T={steps} must be a positive multiple of substeps={cfg['substeps']}")
    if cfg["size"] < 1 or cfg["repeats"] < 1:
        raise SystemExit("--size and --repeats must be >= 1")
    device = wp.get_device(args.device)
    if args.jobs is None:
        args.jobs = 2 if args.tiny else 1

    t_all = time.perf_counter()
    case = InertiaCase(cfg["size"], cfg["height"], args.solver, cfg["substeps"], device, not args.no_capture)
    doc = {
        "schema": SCHEMA,
        "machine": machine_info(device),
        "config": {"tiny": bool(args.tiny), "size": cfg["size"], "solver": args.solver, "substeps": cfg["substeps"],
                   "dt": case.dt, "frame_dt": cfg["substeps"] * case.dt, "ratio_steps": cfg["ratio_steps"],
                   "solver_kwargs": SOLVERS[args.solver].settings("cloth")["kwargs"],
                   "memory_steps": list(cfg["memory_steps"]), "repeats": cfg["repeats"], "output": "final",
                   "loss": "sum_i q_final[i] . w_i, w_i = loss_weights(N); gradients w.r.t. q0 and qd0",
                   "scene": cloth_params(cfg["size"], cfg["height"]), "child_timeout_s": args.child_timeout,
                   "jobs": args.jobs,
                   "horizon": "T = frames x substeps solver steps"},
        "counts": counts_of(case.model),
        "expected_counts": expected_counts(cfg["size"]),
    }
    doc["counts_match"] = all(doc["counts"][k] == v for k, v in doc["expected_counts"].items())
    print("1. ratio ...", file=sys.stderr, flush=True)
    doc["ratio"] = measure_ratio(case, cfg["ratio_steps"], cfg["repeats"])
    del case
    gc.collect()
    print("2. memory ...", file=sys.stderr, flush=True)
    doc["memory"] = [] if args.no_memory else measure_memory(args, cfg, doc["ratio"], device)
    py, doc["newton"] = find_newton_python(args)
    if py is not None and args.solver != "semi_implicit":
        # Newton's twin here is SolverSemiImplicit; a Newton SolverXPBD rollout on one tape would keep every
        # iteration's arrays of T steps (no memory guard), so it is left out (run.py times SolverXPBD)
        py, doc["newton"] = None, (f"skipped (section 3 compares with Newton's SolverSemiImplicit only; "
                                   f"solver {args.solver!r})")
    doc["newton_results"] = []
    if py is not None:
        print("3. newton ...", file=sys.stderr, flush=True)
        doc["newton_results"] = measure_newton(args, cfg, py, doc["memory"])
        if not any(r["status"] == "ok" for r in doc["newton_results"]):
            doc["newton"] += " (every run failed; see newton_results)"
    doc["total_wall_s"] = time.perf_counter() - t_all

    return emit(doc, args.json, None if args.quiet else table(doc), indent=2)


if __name__ == "__main__":
    main()
