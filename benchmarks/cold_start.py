"""Cold start: seconds from ``import inertia`` to the end of the first step, with an empty kernel cache.

    python benchmarks/cold_start.py                       # the 32 x 32 cloth, SemiImplicitSolver, 3 runs
    python benchmarks/cold_start.py --solver xpbd --runs 1 --json cold.json
    python benchmarks/cold_start.py --warm --runs 1       # the cache as it is (smoke test; seconds)
    python benchmarks/cold_start.py --solver xpbd --after semi_implicit   # a new solver in a used cache

Each run is a fresh interpreter (``python -c``) with ``WARP_CACHE_PATH`` set to a new empty folder, so
every kernel module the scene uses is compiled: what a user feels the first time. The scene is issue
20's: a 32 x 32 cloth (0.03 m cells, 0.01 kg particles) 1 m over a ground plane, one
``collide`` + ``step`` at 1/2400 s. Reported per run: the import, the build (builder, finalize, solver
construction, which compiles the modules of the first collide + step ahead, two threads at once:
``inertia.compile_ahead``), the first collide + step, the total, every module compiled with its seconds
(Warp's own report; their sum counts both threads, so it exceeds the wall time), and whether torch was
imported (it should not be). The median total and the machine load go in the JSON.
``INERTIA_COMPILE_AHEAD=0`` measures the serial compile of the first step. ``--after SOLVER`` first runs
that solver's cloth, untimed, in each run's new cache, and then times ``--solver``'s: what a returning
user pays for a feature their cache lacks (the modules it adds, and Warp's precompiled header unless
it is kept between processes: ``inertia.precompiled_header``, ``INERTIA_KEEP_PCH=0`` to compare).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CHILD = r"""
import sys, time
t0 = time.perf_counter()
import warp as wp
wp.config.quiet = False
import inertia
t1 = time.perf_counter()
b = inertia.ModelBuilder()
b.add_ground_plane()
b.add_cloth_grid(32, 32, pos=(0.0, 0.0, 1.0), cell_x=0.03, cell_y=0.03, mass=0.01)
model = b.finalize()
solver = inertia.XPBDSolver(model) if sys.argv[1] == "xpbd" else inertia.SemiImplicitSolver(model)
s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
t2 = time.perf_counter()
model.collide(s0, contacts)
solver.step(s0, s1, control, contacts, 1.0 / 2400.0)
wp.synchronize()
t3 = time.perf_counter()
print("COLD", t1 - t0, t2 - t1, t3 - t2, t3 - t0, "torch" in sys.modules)
"""
MODULE = re.compile(r"Module (\S+) \w+ load on device '\S+' took ([\d.]+) ms\s+\((\w+)\)")


def one_run(solver: str, warm: bool, after: str | None = None) -> dict:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        if not warm:
            env["WARP_CACHE_PATH"] = cache
        if after is not None:  # untimed: the cache then holds that scene's modules, as a returning user's would
            subprocess.run([sys.executable, "-c", CHILD, after], env=env, capture_output=True, check=True)
        out = subprocess.run([sys.executable, "-c", CHILD, solver], env=env, capture_output=True, text=True,
                             check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("COLD "))
    imp, build, first, total, torch = line.split()[1:]
    modules = [{"module": m, "s": float(ms) / 1000.0, "how": how} for m, ms, how in MODULE.findall(out)]
    return {"import_s": float(imp), "build_s": float(build), "first_step_s": float(first),
            "total_s": float(total), "torch_imported": torch == "True", "modules": modules,
            "compiled_s": sum(m["s"] for m in modules if m["how"] == "compiled")}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--solver", default="semi_implicit", choices=("semi_implicit", "xpbd"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warm", action="store_true", help="keep the kernel cache (smoke test)")
    p.add_argument("--after", default=None, choices=("semi_implicit", "xpbd"),
                   help="first run this solver's cloth, untimed, in the same new cache: the cost of a new "
                        "feature in a cache that holds another scene's kernels")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from machine import machine_info
    from report import emit

    runs = [one_run(args.solver, args.warm, args.after) for _ in range(args.runs)]
    totals = [r["total_s"] for r in runs]
    result = {"schema": "inertia-cold-start/1", "machine": machine_info("cpu"), "solver": args.solver,
              "cache": "warm" if args.warm else "empty" if args.after is None else f"after {args.after}",
              "after": args.after, "keep_pch": os.environ.get("INERTIA_KEEP_PCH", "1") != "0",
              "median_total_s": statistics.median(totals), "min_total_s": min(totals), "max_total_s": max(totals), "runs": runs}
    print(f"{args.solver}, {result['cache']} kernel cache, {len(runs)} runs: total {result['median_total_s']:.2f} s "
          f"[{min(totals):.2f}, {max(totals):.2f}] (import {runs[-1]['import_s']:.2f}, build {runs[-1]['build_s']:.2f}, "
          f"first step {runs[-1]['first_step_s']:.2f}; compiling {runs[-1]['compiled_s']:.2f} s summed over threads); "
          f"torch imported: "
          f"{runs[-1]['torch_imported']}")
    for m in sorted(runs[-1]["modules"], key=lambda m: -m["s"]):
        if m["how"] == "compiled":
            print(f"  {m['module']:45s} {m['s']:6.2f} s")
    return emit(result, args.json)


if __name__ == "__main__":
    main()
