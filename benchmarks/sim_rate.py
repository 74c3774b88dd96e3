"""Simulated seconds per wall-clock second of the rigid scenes next to MuJoCo, each engine at the largest step
where its result is sane.

    python benchmarks/sim_rate.py --json sim_rate.json          # chain (32), boxes (64), arm (KUKA iiwa); ~10 min
    python benchmarks/sim_rate.py --scenes chain --rounds 9
    python benchmarks/sim_rate.py --tiny                        # smoke run (seconds)
    python benchmarks/sim_rate.py --fixed-dt                    # no search: each solver's registered step

1. Step search, per (engine, scene, solver): from the solver's registered step (bench_scenes.SOLVERS;
   MuJoCo: its default 2 ms) walk the ladder ``DT_LADDER``: while the step is sane, try the next larger
   one; if it is not, the next smaller one, until sane. Each try is a fresh ``--window-s`` (10 s) sanity
   run (sanity.py; stopped at its first failure). The chosen step is the largest sane one seen; the
   JSON keeps every try (``dt_search``: step, sane, failures).
2. Timing: every (engine, scene, solver) at its chosen step, alternated in ``--rounds`` rounds as in
   run.py (python loop and fast mode: a captured graph for inertia, ``mj_step(nstep)`` for MuJoCo);
   ``sim`` = steps/s x dt, median [min, max]; ``vs_mujoco`` = our fast mode's simulated seconds per
   second / MuJoCo's (``vs_mujoco_python``: the loops').
XPBD keeps its per-scene iteration count at every step (8); a larger step is not a cheaper step for it.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

from machine import machine_info, now  # noqa: E402
from report import emit, sim_rate_table  # noqa: E402
from timing import Cell, alternate_rounds, cell_figures  # noqa: E402

SCHEMA = "inertia-sim-rate/1"
# [s]; from coarse to fine
DT_LADDER = (1 / 100, 1 / 200, 1 / 300, 1 / 400, 1 / 500, 1 / 600, 1 / 800, 1 / 1000, 1 / 1200, 1 / 1600, 1 / 2000,
             1 / 2400, 1 / 3200, 1 / 4000, 1 / 6000, 1 / 8000, 1 / 12000, 1 / 16000)
MUJOCO_DEFAULT_DT = 0.002


def registered_dt(engine, scene, solver) -> float:
    if engine == "mujoco":
        return MUJOCO_DEFAULT_DT
    from bench_scenes import SOLVERS

    return SOLVERS[solver].settings(scene)["dt"]


def search_step(engine, scene, size, solver, window_s, ladder, device, log, fixed=False, max_tries=99) -> dict:
    """The largest sane step of the ladder, walking from the registered one (see the module docstring)."""
    from sanity import make_runner, run_sanity

    start = registered_dt(engine, scene, solver)
    near = [d for d in ladder if abs(d - start) <= 1e-9 * start]  # 1/600 written as FRAME_DT / 10
    ladder = sorted(set(ladder) | ({start} if not near else set()), reverse=True)  # coarse to fine
    i = ladder.index(near[0] if near else start)
    tried = {}

    def judge(k):
        if k not in tried and len(tried) >= max_tries:
            return False  # the try budget is spent: counts as not sane, so the walk stops
        if k not in tried:
            r = make_runner(engine, scene, size, solver, device, dt=ladder[k])
            s = run_sanity(r, window_s, stop_early=True)
            tried[k] = s
            log(f"  {engine} {scene} {solver} dt={ladder[k]:.6g}: "
                f"{'sane' if s['sane'] else '; '.join(s['failures'])}")
        return tried[k]["sane"]

    chosen = None
    if fixed:
        judge(i)
        chosen = i if tried[i]["sane"] else None
    elif judge(i):
        chosen = i
        while chosen > 0 and judge(chosen - 1):
            chosen -= 1
    else:
        k = i + 1
        while k < len(ladder) and not judge(k):
            k += 1
        chosen = k if k < len(ladder) else None
    if chosen is not None and chosen not in tried:
        chosen = None
    steps = [{"dt": ladder[k], "sane": tried[k]["sane"], "failures": tried[k]["failures"],
              "simulated_s": tried[k]["simulated_s"], "wall_s": tried[k]["wall_s"]} for k in sorted(tried)]
    pick = chosen if chosen is not None else i
    return {"dt": ladder[pick], "registered_dt": start, "sane_step_found": chosen is not None,
            "sanity": tried[pick], "dt_search": steps}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenes", default="chain,boxes,arm", help="comma list of chain, boxes, arm")
    p.add_argument("--solvers", default=None,
                   help="inertia solvers (default: semi_implicit, xpbd and featherstone when inertia has it)")
    p.add_argument("--no-mujoco", action="store_true", help="inertia only")
    p.add_argument("--window-s", type=float, default=None, help="simulated seconds of each sanity try (10)")
    p.add_argument("--rounds", type=int, default=None, help="timing rounds (5)")
    p.add_argument("--block-s", type=float, default=0.5, help="target wall time of a block [s]")
    p.add_argument("--fixed-dt", action="store_true", help="no step search: the registered steps")
    p.add_argument("--max-tries", type=int, default=None, help="sanity tries per search (tiny: 2)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--tiny", action="store_true", help="tiny scenes, 0.3 s windows, 2 rounds (smoke test)")
    p.add_argument("--json", default=None)
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    wp.config.quiet = True
    wp.init()
    from bench_mujoco import import_mujoco
    from bench_scenes import SCENES, SOLVERS
    from sanity import make_runner

    scenes = [s for s in args.scenes.split(",") if s]
    for s in scenes:
        if s not in ("chain", "boxes", "arm"):
            raise SystemExit(f"--scenes: {s!r} has no MuJoCo twin (chain, boxes, arm)")
    solvers = ([s for s in args.solvers.split(",") if s] if args.solvers else
               [s for s in ("semi_implicit", "xpbd", "featherstone") if s in SOLVERS])
    for s in solvers:
        if s not in SOLVERS:
            raise SystemExit(f"unknown solver {s!r}; choose from {', '.join(SOLVERS)}")
    window = args.window_s if args.window_s is not None else (0.3 if args.tiny else 10.0)
    rounds = args.rounds if args.rounds is not None else (2 if args.tiny else 5)
    max_tries = args.max_tries if args.max_tries is not None else (2 if args.tiny else 99)
    mujoco, err = (None, "skipped (--no-mujoco)") if args.no_mujoco else import_mujoco()
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    device = wp.get_device(args.device)
    doc = {"schema": SCHEMA, "machine": machine_info(device),
           "config": {"scenes": scenes, "solvers": solvers, "window_s": window, "rounds": rounds, "tiny": args.tiny,
                      "fixed_dt": args.fixed_dt, "dt_ladder": list(DT_LADDER), "block_s": args.block_s,
                      "argv": sys.argv[1:] if argv is None else list(argv)},
           "mujoco": (f"mujoco {mujoco.__version__}" if mujoco is not None else
                      err if args.no_mujoco else f"not available ({err}); pip install -e '.[bench]'"),
           "results": []}
    plan = []
    for scene in scenes:
        size = SCENES[scene].tiny_size if args.tiny else SCENES[scene].default_size
        plan += [("inertia", scene, size, s) for s in solvers if SOLVERS[s].applies_to(scene)]
        if mujoco is not None:
            plan.append(("mujoco", scene, size, "mujoco"))

    t0 = now()
    searches = {}
    for engine, scene, size, solver in plan:
        try:
            searches[(engine, scene, solver)] = search_step(engine, scene, size, solver, window, DT_LADDER,
                                                            args.device, log, fixed=args.fixed_dt,
                                                            max_tries=max_tries)
        except Exception as e:  # e.g. the arm without pybullet_data: the row says why
            searches[(engine, scene, solver)] = {"error": f"{type(e).__name__}: {e}"}
            log(f"  {engine} {scene} {solver}: {type(e).__name__}: {e}")
    doc["search_wall_s"] = now() - t0

    cells = []
    for engine, scene, size, solver in plan:
        found = searches[(engine, scene, solver)]
        if "error" in found:
            doc["results"].append({"engine": engine, "scene": scene, "solver": solver, "error": found["error"]})
            continue
        r = make_runner(engine, scene, size, solver, args.device, dt=found["dt"])
        c = Cell((engine, scene, solver), r, 2)
        c.stepper.prepare(10)
        for mode, per_step in c.probe().items():
            c.set_steps(min(200000, round(args.block_s / max(per_step, 1e-9))), mode)
        c.found, c.size = found, size
        cells.append(c)
    t0 = now()
    alternate_rounds(cells, rounds, progress=lambda k: log(f"round {k + 1}/{rounds} done"))
    doc["timing_wall_s"] = now() - t0

    for c in cells:
        engine, scene, solver = c.key
        counts = c.runner.counts()
        figs = cell_figures(c, c.runner.dt, counts.get("bodies", 0), 0)
        for mode in ("python", "graph"):
            f = figs[mode]
            if "median" in f:
                f["sim"] = {k: f[k] * c.runner.dt for k in ("median", "min", "max")}
        doc["results"].append({
            "engine": engine, "scene": scene, "solver": solver, "size": list(c.size), "counts": counts,
            "dt": c.runner.dt, "registered_dt": c.found["registered_dt"], "sane_step_found": c.found["sane_step_found"],
            "dt_search": c.found["dt_search"], "sanity": c.found["sanity"], "settings": c.runner.settings,
            "notes": list(c.runner.notes), "steps_per_block": c.steps_per_block, "python": figs["python"],
            "graph": figs["graph"], "graph_kind": figs["graph_kind"], "load": figs["load"]})
    for row in doc["results"]:
        ref = [r for r in doc["results"] if r["engine"] == "mujoco" and r["scene"] == row["scene"] and "error" not in r]
        if "error" in row or not ref:
            continue
        for mode, key in (("graph", "vs_mujoco"), ("python", "vs_mujoco_python")):
            a, b = row[mode].get("sim"), ref[0][mode].get("sim")
            row[key] = a["median"] / b["median"] if a and b else None
    return emit(doc, args.json, None if args.quiet else sim_rate_table(doc))


if __name__ == "__main__":
    main()
