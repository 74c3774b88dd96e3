"""Throughput of inertia's solvers next to Newton's, engines alternated in one process, each row with the
machine load while it ran and the sanity of a long window of the same simulation.

    python benchmarks/run.py --solvers semi_implicit,xpbd --json results.json   # the suite (Newton when it imports)
    python benchmarks/run.py --scenes boxes,chain --rounds 9                    # the rigid scenes, more rounds
    python benchmarks/run.py --tiny --no-newton                                 # smoke run (seconds)
    python benchmarks/run.py --cold                                             # compile into an empty cache
    python benchmarks/run.py --sanity-s 0                                       # timing only

Method (benchmarks/README.md has the details): 1. sanity: every cell (engine, scene, solver) is run
fresh for ``--sanity-s`` simulated seconds (10) and judged by ``sanity.py``; 2. timing: every cell is
built fresh, stepped once (compiles), warmed up and captured, then all cells are timed in
``--rounds`` rounds (5), one block each per round and mode (python loop, graph replay), cells in
order on even rounds and reversed on odd ones; each row reports median [min, max] over its rounds,
the load while its blocks ran, and its sanity verdict. Prints a table and a JSON document.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # also when run.py is imported rather than executed
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

from machine import cache_entries, machine_info, now  # noqa: E402
from report import emit, run_table  # noqa: E402
from timing import Cell, alternate_rounds, cell_figures, count_launches, final_state, graph_ops, paired_ratios  # noqa: E402

SCHEMA = "inertia-benchmark/2"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenes", default="cloth,granular,soft,boxes,chain",
                   help="comma list of cloth, granular, soft, boxes, chain, arm (default: the five with a Newton twin)")
    p.add_argument("--sizes", default="", help="one size per scene (64x64,32x32x32,16x16x4,4x4x4,32) or name=size")
    p.add_argument("--solvers", default="semi_implicit,xpbd", help="comma list of names in bench_scenes.SOLVERS")
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=None, help="timing rounds (median [min, max] over them; 5)")
    p.add_argument("--steps", type=int, default=None, help="steps per timed block (default: from --block-s)")
    p.add_argument("--block-s", type=float, default=0.5, help="target wall time of the slower engine's block [s]")
    p.add_argument("--max-steps", type=int, default=2000, help="at most this many steps per block")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps after the first step (10)")
    p.add_argument("--sanity-s", type=float, default=None, help="simulated seconds of the sanity pass (10; 0: none)")
    p.add_argument("--sanity-jobs", type=int, default=1, help="sanity cells run at a time (subprocesses when > 1)")
    p.add_argument("--json", default=None, help="also write the JSON document here")
    p.add_argument("--no-newton", action="store_true", help="skip Newton even if it is installed")
    p.add_argument("--no-graph", action="store_true", help="skip the graph-captured measurement")
    p.add_argument("--tiny", action="store_true", help="tiny sizes, 2 rounds, 0.25 s sanity (smoke test)")
    p.add_argument("--cold", action="store_true", help="use an empty temporary kernel cache (measures compile)")
    p.add_argument("--quiet", action="store_true", help="print only the JSON document")
    return p.parse_args(argv)


def parse_sizes(scenes, text):
    from bench_scenes import SCENES, parse_size

    sizes = {}
    items = [s for s in (text or "").split(",") if s]
    positional = [s for s in items if "=" not in s]
    if positional and len(positional) != len(scenes):
        raise SystemExit(f"--sizes: give one size per scene ({len(scenes)}) or name=size entries")
    for name, s in zip(scenes, positional):
        sizes[name] = parse_size(s, SCENES[name].ndim)
    for item in items:
        if "=" in item:
            name, s = item.split("=", 1)
            if name not in SCENES:
                raise SystemExit(f"--sizes: unknown scene {name!r}")
            sizes[name] = parse_size(s, SCENES[name].ndim)
    return sizes


def plan_cells(scenes, solvers, sizes, tiny, newton_mod) -> list:
    """[(engine, scene, size, solver)] in scene, solver, engine order; Newton where it has a twin."""
    from bench_scenes import SCENES, SOLVERS

    out = []
    for name in scenes:
        size = sizes.get(name, SCENES[name].tiny_size if tiny else SCENES[name].default_size)
        for solver in solvers:
            if not SOLVERS[solver].applies_to(name):
                continue
            out.append(("inertia", name, tuple(size), solver))
            if newton_mod is not None:
                from bench_newton import NEWTON_SOLVERS, NewtonRunner

                if solver in NEWTON_SOLVERS and hasattr(NewtonRunner, "_build_" + name):
                    out.append(("newton", name, tuple(size), solver))
    return out


def sanity_pass(plan, seconds: float, jobs: int, device: str, log) -> dict:
    """{(engine, scene, solver): sanity verdict} of a fresh run of every planned cell (sanity.py)."""
    from sanity import cell_sanity

    specs = {(e, s, v): {"engine": e, "scene": s, "size": list(size), "solver": v, "seconds": seconds,
                         "device": device} for e, s, size, v in plan}
    out = {}
    if jobs <= 1:
        for key, spec in specs.items():
            try:
                out[key] = cell_sanity(spec)
            except Exception as e:
                out[key] = {"sane": False, "failures": [f"error: {type(e).__name__}: {e}"], "error": True}
            log(f"sanity {' '.join(key)}: {'sane' if out[key]['sane'] else '; '.join(out[key]['failures'])}")
        return out

    def child(spec):
        proc = subprocess.run([sys.executable, os.path.join(HERE, "sanity.py"), "--child", json.dumps(spec)],
                              capture_output=True, text=True, cwd=HERE)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {"sane": False, "failures": [f"error: {(proc.stderr or proc.stdout)[-600:]}"], "error": True}
        return json.loads(lines[-1])

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(child, spec): key for key, spec in specs.items()}
        for f in concurrent.futures.as_completed(futures):
            out[futures[f]] = f.result()
            log(f"sanity {' '.join(futures[f])}: {'sane' if out[futures[f]]['sane'] else 'NOT SANE'}")
    return out


def build_cell(engine, scene, size, solver, device, cache_dir, warmup, graph):
    from bench_scenes import SCENES, InertiaRunner

    before = cache_entries(cache_dir) if cache_dir else set()
    t = now()
    if engine == "inertia":
        runner = InertiaRunner(SCENES[scene], size, device, solver)
    else:
        from bench_newton import NewtonRunner

        runner = NewtonRunner(SCENES[scene], size, device, solver)
    build_s = now() - t
    cell = Cell((engine, scene, solver), runner, 2)
    cell.stepper.prepare(warmup, graph=graph)
    new = cache_entries(cache_dir) - before if cache_dir else set()
    cell.meta = {"size": list(size), "build_s": build_s, "modules_compiled": len(new),
                 "cache": "cold" if new else "warm"}
    cell.meta["probe_step_s"] = cell.probe()  # per mode: the step time that sizes the blocks
    return cell


def row_of(cell, sanity) -> dict:
    from bench_scenes import SCENES

    r, st = cell.runner, cell.stepper
    engine, scene, solver = cell.key
    counts = r.counts()
    n = counts["particles"]
    row = {"scene": scene, "size": cell.meta["size"], "solver": solver, "engine": engine,
           "build_s": cell.meta["build_s"], "settings": r.settings, "counts": counts, "dt": r.dt,
           "notes": list(r.notes), "first_step_s": st.first_step_s, "modules_compiled": cell.meta["modules_compiled"],
           "cache": cell.meta["cache"], "capture_s": st.capture_s, "rounds": len(cell.rates["python"]),
           "steps_per_block": cell.steps_per_block}
    figs = cell_figures(cell, r.dt, n + counts.get("bodies", 0), n)
    row.update({"python": figs["python"], "graph": figs["graph"], "graph_kind": figs["graph_kind"],
                "load": figs["load"]})
    ops = graph_ops(st.graph) if st.graph is not None else None
    row["graph_ops_per_step"] = ops / 2 if ops is not None else None
    row["steps_simulated"] = st.steps
    row["sim_time_s"] = st.steps * r.dt
    final_state(r, row)
    row["launches_per_step"], row["launches_by_kernel"] = count_launches(r)
    if engine == "inertia":
        row["expected_counts"] = SCENES[scene].expected_counts(tuple(cell.meta["size"]))
        row["counts_match"] = all(counts[k] == v for k, v in row["expected_counts"].items())
    row["sanity"] = sanity
    return row


def solver_comparisons(results, solvers) -> list:
    """Each solver against the first one listed, per scene and engine: per step and per simulated second."""
    out = []
    if len(solvers) < 2:
        return out
    base = solvers[0]
    for r in results:
        if r["solver"] == base:
            continue
        ref = [b for b in results if b["solver"] == base and b["scene"] == r["scene"] and b["engine"] == r["engine"]]
        if not ref:
            continue
        b = ref[0]

        def ratio(mode, key):
            x, y = r[mode].get(key), b[mode].get(key)
            return x / y if x and y else None

        out.append({"scene": r["scene"], "engine": r["engine"], "solver": r["solver"], "baseline": base,
                    "dt_ratio": r["dt"] / b["dt"],
                    "steps_ratio_python": ratio("python", "median"), "steps_ratio_graph": ratio("graph", "median"),
                    "sim_ratio_python": ratio("python", "sim_s_per_wall_s"),
                    "sim_ratio_graph": ratio("graph", "sim_s_per_wall_s")})
    return out


def main(argv=None) -> dict:
    args = parse_args(argv)
    tmp_cache = None
    if args.cold:
        tmp_cache = tempfile.mkdtemp(prefix="inertia-bench-cache-")
        wp.config.kernel_cache_dir = tmp_cache
    wp.config.log_level = wp.LOG_WARNING
    wp.config.quiet = True
    wp.init()

    from bench_newton import find_newton
    from bench_scenes import SCENES, SOLVERS

    scenes = [s for s in args.scenes.split(",") if s]
    for s in scenes:
        if s not in SCENES:
            raise SystemExit(f"unknown scene {s!r}; choose from {', '.join(SCENES)}")
    solvers = [s for s in args.solvers.split(",") if s]
    for s in solvers:
        if s not in SOLVERS:
            raise SystemExit(f"unknown solver {s!r}; choose from {', '.join(SOLVERS)} (featherstone: registered "
                             "when inertia.FeatherstoneSolver exists)")
    sizes = parse_sizes(scenes, args.sizes)
    rounds = args.rounds if args.rounds is not None else (2 if args.tiny else 5)
    warmup = args.warmup if args.warmup is not None else (2 if args.tiny else 10)
    sanity_s = args.sanity_s if args.sanity_s is not None else (0.25 if args.tiny else 10.0)
    steps = args.steps if args.steps is not None else (10 if args.tiny else None)
    if rounds < 1 or warmup < 0 or (steps is not None and steps < 1) or sanity_s < 0:
        raise SystemExit("--rounds and --steps must be >= 1, --warmup and --sanity-s >= 0")
    device = wp.get_device(args.device)
    cache_dir = wp.config.kernel_cache_dir
    newton_mod, newton_status = find_newton(args.no_newton)
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))

    doc = {"schema": SCHEMA, "machine": machine_info(device),
           "config": {"rounds": rounds, "warmup": warmup, "steps_per_block": steps, "block_s": args.block_s,
                      "sanity_s": sanity_s, "cold_cache": bool(args.cold), "tiny": bool(args.tiny),
                      "solvers": solvers, "scenes": scenes, "argv": sys.argv[1:] if argv is None else list(argv)},
           "newton": newton_status, "results": [], "comparisons": []}
    if newton_mod is not None:
        doc["machine"]["newton"] = newton_mod.__version__
    plan = plan_cells(scenes, solvers, sizes, args.tiny, newton_mod)

    t0 = now()
    sanity = sanity_pass(plan, sanity_s, args.sanity_jobs, args.device, log) if sanity_s > 0 else {}
    doc["sanity_wall_s"] = now() - t0

    cells = []
    for engine, scene, size, solver in plan:
        try:
            cells.append(build_cell(engine, scene, size, solver, device, cache_dir, warmup, not args.no_graph))
        except Exception as e:
            if engine == "inertia":
                raise
            doc["comparisons"].append({"scene": scene, "solver": solver, "error": f"{type(e).__name__}: {e}"})
    for scene in scenes:  # both engines of a scene and solver time the same steps per block
        for solver in solvers:
            pair = [c for c in cells if c.key[1:] == (scene, solver)]
            if not pair:
                continue
            for mode in ("python", "graph"):
                probes = [c.meta["probe_step_s"][mode] for c in pair if mode in c.meta["probe_step_s"]]
                if not probes:
                    continue
                n = steps if steps is not None else int(min(args.max_steps, max(2, round(args.block_s / max(probes)))))
                for c in pair:
                    c.set_steps(n, mode)
    t0 = now()
    alternate_rounds(cells, rounds, progress=lambda r: log(f"round {r + 1}/{rounds} done"))
    doc["timing_wall_s"] = now() - t0

    by_key = {}
    for c in cells:
        row = row_of(c, sanity.get(c.key))
        doc["results"].append(row)
        by_key[c.key] = (c, row)
    for (engine, scene, solver), (c, row) in by_key.items():
        if engine != "inertia" or ("newton", scene, solver) not in by_key:
            continue
        cn, theirs = by_key[("newton", scene, solver)]

        def ratio(mode, a=row, b=theirs):
            x, y = a[mode].get("median"), b[mode].get("median")
            return x / y if x and y else None

        doc["comparisons"].append({
            "scene": scene, "solver": solver, "ratio_python": ratio("python"), "ratio_graph": ratio("graph"),
            "paired": paired_ratios(c, cn), "counts": {"inertia": row["counts"], "newton": theirs["counts"]},
            "sane": {"inertia": (row["sanity"] or {}).get("sane"), "newton": (theirs["sanity"] or {}).get("sane")},
            "notes": theirs["notes"]})
    doc["solver_comparisons"] = solver_comparisons(doc["results"], solvers)
    if tmp_cache:
        shutil.rmtree(tmp_cache, ignore_errors=True)
    return emit(doc, args.json, None if args.quiet else run_table(doc))


if __name__ == "__main__":
    main()
