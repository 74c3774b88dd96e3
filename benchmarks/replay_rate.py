"""Graph-replay steps/s of a few (scene, solver) cells, for comparing two commits on one machine.

    python benchmarks/replay_rate.py --cells arm:featherstone,chain:featherstone,boxes:xpbd
    python benchmarks/replay_rate.py --graph --cells chain:semi_implicit   # one captured graph, no Python
    python benchmarks/replay_rate.py --tiny                      # smoke run

To compare commits (run.py and sim_rate.py compare engines, not versions): check each out in its own
worktree with its own virtual environment, then run this script in the two alternately, a few times, and
compare the medians; alternating spreads the machine's drift over both. Each cell: the scene at its
default size (``bench_scenes``), the solver at its registered settings, 50 warm-up steps (compiles and
captures the graphs the plain loop replays), then ``--blocks`` blocks of about ``--block-s`` seconds each;
the figure is the median block rate. The machine's load is recorded, as in run.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

from machine import LoadMeter, machine_info, summarize_load  # noqa: E402
from report import emit  # noqa: E402

SCHEMA = "inertia-replay-rate/1"
DEFAULT_CELLS = "arm:featherstone,chain:featherstone,boxes:xpbd,boxes:semi_implicit,cloth:xpbd,chain:xpbd"


def cell_rate(scene: str, solver: str, blocks: int, block_s: float, tiny: bool, graph: bool = False) -> dict:
    """Steps/s of one cell: the median of ``blocks`` blocks of about ``block_s`` seconds. ``graph``: the
    steps replayed from one captured graph of two (run.py's fast mode, ``timing.Stepper``) instead of the
    plain loop: kernels and graph nodes only, no Python."""
    from bench_scenes import SCENES
    from sanity import make_runner
    from timing import Stepper

    size = SCENES[scene].tiny_size if tiny else None
    with warnings.catch_warnings():  # the scenes' own notes (joint fields a solver ignores, substeps)
        warnings.simplefilter("ignore")
        r = make_runner("inertia", scene, size, solver, "cpu")
        stepper = Stepper(r).prepare(5 if tiny else 50, graph=graph)
        if graph and stepper.fast_kind != "graph":
            raise RuntimeError(f"{scene}:{solver}: the steps could not be captured ({stepper.fast_error})")
        run = stepper.fast if graph else stepper.python
        t = time.perf_counter()
        probe = 20
        run(probe)
        steps = max(10, int(probe * block_s / max(time.perf_counter() - t, 1e-9)))
        steps += steps % 2  # the graph takes two steps a replay
        rates, loads = [], []
        for _ in range(blocks):
            meter = LoadMeter().start()
            t = time.perf_counter()
            run(steps)
            rates.append(steps / (time.perf_counter() - t))
            loads.append(meter.stop())
    return {"scene": scene, "solver": solver, "steps_per_block": steps, "rates": rates,
            "median": statistics.median(rates), "min": min(rates), "max": max(rates), "load": summarize_load(loads)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", default=DEFAULT_CELLS, help="comma list of scene:solver")
    p.add_argument("--blocks", type=int, default=3)
    p.add_argument("--block-s", type=float, default=1.5, help="target wall time of a block [s]")
    p.add_argument("--tiny", action="store_true", help="tiny scenes, short blocks (smoke test)")
    p.add_argument("--graph", action="store_true", help="replay a captured graph of two steps (no Python)")
    p.add_argument("--json", default=None)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    wp.config.quiet = True
    wp.init()
    block_s = 0.05 if args.tiny else args.block_s
    cells = [c.split(":") for c in args.cells.split(",")]
    if any(len(c) != 2 for c in cells):
        raise SystemExit(f"--cells: expected scene:solver pairs, got {args.cells!r}")
    rows = [cell_rate(scene, solver, args.blocks, block_s, args.tiny, args.graph) for scene, solver in cells]
    doc = {"schema": SCHEMA, "machine": machine_info("cpu"), "config": {**vars(args), "argv": argv}, "rows": rows}
    table = "\n".join(f"{r['scene']:8s} {r['solver']:14s} {r['median']:12.1f} steps/s [{r['min']:.1f}, {r['max']:.1f}]"
                      for r in rows)
    return emit(doc, args.json, None if args.quiet else table)


if __name__ == "__main__":
    main()
