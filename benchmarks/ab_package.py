"""One solver package at two commits in one process: are the results the same bits, and which steps faster?

    python benchmarks/ab_package.py --rev HEAD~1                       # the FeatherstoneSolver, chain, pile, arm
    python benchmarks/ab_package.py --rev 295ea39 --cells chain:0.000417,arm:0.01 --rounds 21
    python benchmarks/ab_package.py --rev HEAD --tiny                  # smoke run

Why one process: this machine's speed drifts by a third or more within minutes, so two checkouts run one
after the other (``replay_rate.py``), or even side by side on the two cores, give ratios that flip from
round to round. Here the package's files at ``--rev`` (``solvers/<package>``, default ``featherstone``)
are written to a temporary folder and imported as ``inertia.solvers.<package>_at_<rev>``: the same engine
around them, their own Warp modules (compiled once, cached like any other). For each cell (a
``bench_scenes`` scene at a step ``dt``; the solver's registered step when none is given) both versions
build the scene through ``bench_scenes`` (``inertia.<class>`` points at the old class while the old one is
built) and:

1. **bits**: step ``--check-steps`` steps from the same start and compare SHA-256 of every state array
   (``same_bits``); a refactor that claims to change no result must say ``true``;
2. **speed**: capture a graph of two steps each, then ``--rounds`` rounds, each replaying the two graphs
   one after the other (the order alternating between rounds) for about ``--block-s`` seconds each; the
   figure is each round's ratio of steps/s, new / old: median [min, max], with the load of every block.

The old package must import against today's engine (a package whose imports have since moved fails to
load, with Python's error). Packages outside ``solvers/`` (the maximal-coordinate solvers' stages in
``solvers/constraints`` and ``solvers/forces``, shared by both) are not supported: the old copy would
serve one solver and not the other.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import warp as wp  # noqa: E402

from machine import LoadMeter, machine_info, summarize_load  # noqa: E402
from report import emit  # noqa: E402

SCHEMA = "inertia-ab-package/1"
DEFAULT_CELLS = "chain:0.0004166666666666667,boxes:0.005,arm:0.01"  # sim_rate.py's largest sane steps
STATE_ARRAYS = ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q", "joint_qd")


def _git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def load_package_at(rev: str, package: str):
    """``solvers/<package>`` as it was at ``rev``, imported as ``inertia.solvers.<package>_at_<sha>``."""
    sha = _git("rev-parse", "--short=7", f"{rev}^{{commit}}").strip()
    folder = f"solvers/{package}"
    files = [f for f in _git("ls-tree", "-r", "--name-only", sha, folder).split() if f.endswith(".py")]
    if not files:
        raise SystemExit(f"--package {package}: no Python files under {folder} at {rev}")
    target = tempfile.mkdtemp(prefix=f"inertia_{package}_{sha}_")
    atexit.register(shutil.rmtree, target, ignore_errors=True)  # read until the last kernel compiles
    for f in files:
        path = os.path.join(target, os.path.relpath(f, folder))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write(_git("show", f"{sha}:{f}"))
    name = f"inertia.solvers.{package}_at_{sha}"
    spec = importlib.util.spec_from_file_location(name, os.path.join(target, "__init__.py"),
                                                  submodule_search_locations=[target])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return sha, module


def build(scene: str, size, solver: str, dt, cls: str, replacement=None):
    """A ``bench_scenes`` runner; with ``replacement``, ``inertia.<cls>`` is that class while it is built."""
    import inertia
    from bench_scenes import SCENES, InertiaRunner

    current = getattr(inertia, cls)
    if replacement is not None:
        setattr(inertia, cls, replacement)
    try:
        with warnings.catch_warnings():  # the scenes' own notes (joint fields a solver ignores, substeps)
            warnings.simplefilter("ignore")
            runner = InertiaRunner(SCENES[scene], size, "cpu", solver, dt=dt)
    finally:
        setattr(inertia, cls, current)
    if replacement is not None and type(runner.solver) is not replacement:
        raise SystemExit(f"--solver {solver} did not build inertia.{cls}: its factory builds "
                         f"{type(runner.solver).__name__}")
    return runner


def state_digest(runner) -> str:
    h = hashlib.sha256()
    for name in STATE_ARRAYS:
        a = getattr(runner.state_0, name, None)
        if a is not None:
            h.update(np.ascontiguousarray(a.numpy()).tobytes())
    return h.hexdigest()[:16]


def two_step_graph(runner):
    with wp.ScopedCapture(device="cpu") as cap:
        runner.step()
        runner.step()
    return cap.graph


def replay_rate(graph, replays: int) -> tuple:
    meter = LoadMeter().start()
    t = time.perf_counter()
    for _ in range(replays):
        wp.capture_launch(graph)
    return 2 * replays / (time.perf_counter() - t), meter.stop()


def cell(scene: str, dt, args, old_cls) -> dict:
    from bench_scenes import SCENES

    size = SCENES[scene].tiny_size if args.tiny else SCENES[scene].default_size
    new = build(scene, size, args.solver, dt, args.cls)
    old = build(scene, size, args.solver, dt, args.cls, old_cls)
    digests = []
    for runner in (new, old):
        for _ in range(args.check_steps):
            runner.step()
        digests.append(state_digest(runner))
    graphs = {"new": two_step_graph(new), "old": two_step_graph(old)}
    probe = 10
    t = time.perf_counter()
    for _ in range(probe):
        wp.capture_launch(graphs["old"])
    replays = max(2, int(probe * args.block_s / max(time.perf_counter() - t, 1e-9)))
    rates = {"new": [], "old": []}
    loads = []
    for r in range(args.rounds):
        for version in (("old", "new") if r % 2 == 0 else ("new", "old")):
            rate, load = replay_rate(graphs[version], replays)
            rates[version].append(rate)
            loads.append(load)
    ratios = [n / o for n, o in zip(rates["new"], rates["old"])]
    return {"scene": scene, "size": list(size), "dt": new.dt, "check_steps": args.check_steps,
            "digest_new": digests[0], "digest_old": digests[1], "same_bits": digests[0] == digests[1],
            "steps_per_block": 2 * replays, "steps_per_s_new": rates["new"], "steps_per_s_old": rates["old"],
            "ratio_new_over_old": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                                   "rounds": [round(x, 4) for x in ratios]},
            "load": summarize_load(loads)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rev", required=True, help="the old commit (anything git rev-parse takes)")
    p.add_argument("--package", default="featherstone", help="a folder of solvers/ (a Python package)")
    p.add_argument("--solver", default="featherstone", help="the bench_scenes SOLVERS entry that builds it")
    p.add_argument("--cls", default="FeatherstoneSolver", help="the inertia attribute its factory calls")
    p.add_argument("--cells", default=DEFAULT_CELLS, help="comma list of scene[:dt]")
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--block-s", type=float, default=0.5, help="target wall time of each version's block [s]")
    p.add_argument("--check-steps", type=int, default=300, help="steps compared bit for bit")
    p.add_argument("--tiny", action="store_true", help="tiny scenes, 2 rounds of short blocks (smoke test)")
    p.add_argument("--json", default=None)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.tiny:
        args.rounds, args.block_s, args.check_steps = 2, 0.02, 5
    wp.config.log_level = wp.LOG_WARNING
    wp.config.quiet = True
    wp.init()
    cells = []
    for c in args.cells.split(","):
        scene, _, dt = c.partition(":")
        cells.append((scene, float(dt) if dt else None))
    sha, old = load_package_at(args.rev, args.package)
    old_cls = getattr(old, args.cls, None)
    if old_cls is None:
        raise SystemExit(f"--cls {args.cls}: solvers/{args.package} at {args.rev} does not export it")
    rows = [cell(scene, dt, args, old_cls) for scene, dt in cells]
    doc = {"schema": SCHEMA, "machine": machine_info("cpu"), "old": {"rev": args.rev, "commit": sha},
           "config": {**vars(args), "argv": argv}, "rows": rows}
    table = "\n".join(
        f"{r['scene']:8s} dt {r['dt']:<10.4g} same bits: {'yes' if r['same_bits'] else 'NO'}   steps/s new / {sha}: "
        f"{r['ratio_new_over_old']['median']:.3f} [{r['ratio_new_over_old']['min']:.3f}, "
        f"{r['ratio_new_over_old']['max']:.3f}] over {args.rounds} rounds" for r in rows)
    return emit(doc, args.json, None if args.quiet else table)


if __name__ == "__main__":
    main()
