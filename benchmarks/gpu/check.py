"""One prepared command that proves inertia correct on a CUDA device and measures how it scales there.

    python benchmarks/gpu/check.py --device cuda:0 --out $OUT/gpu      # on a GPU machine, under 8 minutes
    python benchmarks/gpu/check.py --device cpu --tiny --out /tmp/gpucheck   # the smoke run (tests, seconds)
    python benchmarks/gpu/check.py --chart $OUT/gpu/gpu_check.json     # the PNG again, from a run's JSON

Sections, each time-boxed (``--budget-s``, shared out below) and each recording its own failure in the JSON
while the others go on:

1. ``parity`` (parity.py): small scenes of every solver and feature on the CPU and on the device; trajectories
   and gradients against a tolerance derived from 1-ulp nudged CPU runs; graph capture of every step and
   backward segment, with no allocation inside a capture.
2. ``scale`` (scale.py): throughput vs size up to 1M-particle cloth and granular blocks and 4,096 worlds of a
   20-body robot and a 7-DoF arm (semi-implicit, XPBD, FeatherstoneSolver), memory, the CPU beside it, Newton
   where ``import newton`` works.
3. ``gradients`` (gradscale.py): batched Rollout forward + backward up to 4,096 worlds: time, memory, ratio.
4. ``capacity`` (capacity.py): contact kernels launched over buffer capacity, and what their idle threads cost.

Writes ``gpu_check.json`` (schema ``inertia-gpu-check/1``) and ``throughput_vs_size.png`` into ``--out``. Exit
status 0 when every section ran and parity passed, 1 otherwise. Imports no ``pxr`` (usd-core is not on the GPU
machine): ``pxr_imported`` in the JSON says so after the run. Runs on Python 3.10+ with the torch, NumPy and
warp-lang of the machine; matplotlib only for the chart.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
for p in (BENCH, HERE):  # HERE first on sys.path: its chart.py shadows benchmarks/chart.py
    if p in sys.path:
        sys.path.remove(p)
    sys.path.insert(0, p)

SCHEMA = "inertia-gpu-check/1"
JSON_NAME = "gpu_check.json"
PNG_NAME = "throughput_vs_size.png"
# Shares of the budget, in order; a section gets its share of what is left when it starts, so time one leaves
# unused goes to the next. scale gets its CPU points out of its own share (SCALE_CPU_S).
SHARES = {"preload": 0.25, "parity": 0.30, "capacity": 0.06, "scale": 0.55, "gradients": 1.0}
SCALE_CPU_S = 25.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda:0", help="the device to check against the CPU (default cuda:0)")
    p.add_argument("--out", default=None, help="output folder for the JSON and the PNG")
    p.add_argument("--tiny", action="store_true", help="every section at tiny sizes (seconds): the smoke run")
    p.add_argument("--budget-s", type=float, default=None,
                   help="wall-clock budget of the whole run [s] (default 450; tiny 1500: the smoke run must "
                        "complete even when every kernel compiles first, as on a cold cache in CI)")
    p.add_argument("--sections", default="parity,capacity,scale,gradients",
                   help="comma-separated subset of parity,capacity,scale,gradients")
    p.add_argument("--only-cases", default=None, help="parity: only these comma-separated case names")
    p.add_argument("--no-preload", action="store_true",
                   help="do not compile every inertia module up front (in parallel) before the sections")
    p.add_argument("--no-newton", action="store_true", help="skip Newton even where it imports")
    p.add_argument("--kernel-cache", default=None,
                   help="Warp kernel cache folder to use (e.g. one prebuilt for this GPU by prebuild.py)")
    p.add_argument("--chart", metavar="JSON", default=None, help="only write the PNG from a finished run's JSON")
    return p.parse_args(argv)


def machine(device) -> dict:
    import platform

    import numpy as np
    import warp as wp

    info = {"python": platform.python_version(), "numpy": np.__version__, "warp": wp.__version__,
            "platform": platform.platform(), "cores": os.cpu_count(), "device": str(device)}
    try:
        from run import machine_info

        info.update(machine_info(device))
    except Exception as e:  # noqa: BLE001 - run.py is another script's: its details are optional here
        info["machine_info_error"] = f"{type(e).__name__}: {e}"
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = bool(torch.cuda.is_available())
    except Exception as e:  # noqa: BLE001
        info["torch"] = f"unavailable: {e}"
    dev = wp.get_device(device)
    if dev.is_cuda:
        info.update({"device_name": dev.name, "device_arch": dev.arch,
                     "device_memory_bytes": int(getattr(dev, "total_memory", 0)),
                     "mempool": bool(wp.is_mempool_enabled(dev))})
    return info


def preload(devices, budget) -> dict:
    """Compile (or load from the kernel cache) every inertia module on ``devices``, in parallel threads.

    Warp otherwise compiles each module at its first launch, one at a time; on a fresh machine that is most of
    a run. Modules whose kernels are made on first use (one per dtype) still compile then. ``compiled`` lists
    the modules that were not in the kernel cache (``--kernel-cache``: one prebuilt by prebuild.py)."""
    import warp as wp

    from common import engine_modules

    mods, skipped = engine_modules()
    cache = wp.config.kernel_cache_dir
    before = set(os.listdir(cache)) if os.path.isdir(cache) else set()
    t0 = time.perf_counter()
    workers = max(1, (os.cpu_count() or 2))
    per_device = {}
    for d in devices:
        t1 = time.perf_counter()
        wp._src.context.force_load(device=d, modules=mods, max_workers=workers)
        per_device[str(d)] = round(time.perf_counter() - t1, 2)
    after = set(os.listdir(cache)) if os.path.isdir(cache) else set()
    return {"status": "ok", "modules": len(mods), "workers": workers, "seconds_per_device": per_device,
            "seconds": round(time.perf_counter() - t0, 2), "not_imported": skipped, "kernel_cache": cache,
            "new_cache_entries": sorted(after - before), "budget_left_s": round(budget.left(), 1)}


def write_chart(doc: dict, out_dir: str) -> dict:
    from chart import plot

    path, why = plot(doc, os.path.join(out_dir, PNG_NAME))
    return {"png": path, "reason": why}


def summary(doc: dict) -> dict:
    s = doc["sections"]
    par = s.get("parity", {})
    out = {"parity_passed": par.get("passed"), "parity_failed": par.get("failed"),
           "sections_ok": {k: v.get("status") for k, v in s.items()}}
    if "cases" in par:
        out["worst_parity_ratio"] = max((c["parity"]["worst_ratio"] for c in par["cases"].values()
                                         if "parity" in c), default=None)
    if "scale" in s and "headline" in s["scale"]:
        out["headline"] = s["scale"]["headline"]
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.chart:
        with open(args.chart) as f:
            doc = json.load(f)
        out_dir = args.out or os.path.dirname(os.path.abspath(args.chart))
        r = write_chart(doc, out_dir)
        print(json.dumps(r))
        return 0 if r["png"] else 1
    if not args.out:
        raise SystemExit("--out DIR is required (or --chart JSON)")
    os.makedirs(args.out, exist_ok=True)

    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # no module-load lines (hundreds); the JSON has the timings
    if args.kernel_cache:
        wp.config.kernel_cache_dir = os.path.abspath(args.kernel_cache)
    wp.init()
    from common import Budget, run_section

    total = args.budget_s if args.budget_s is not None else (1500.0 if args.tiny else 450.0)
    budget = Budget(total)
    device = wp.get_device(args.device)
    doc = {"schema": SCHEMA, "argv": sys.argv[1:] if argv is None else list(argv), "tiny": args.tiny,
           "budget_s": total, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine(device),
           "sections": {}}
    json_path = os.path.join(args.out, JSON_NAME)

    def save():
        doc["elapsed_s"] = round(budget.elapsed(), 2)
        doc["pxr_imported"] = "pxr" in sys.modules
        doc["summary"] = summary(doc)
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=1, default=str)

    def share(name):
        return budget.sub(budget.left() * SHARES[name])

    sections = [s for s in args.sections.split(",") if s]
    if not args.no_preload and not args.tiny:
        devices = sorted({wp.get_device("cpu"), device}, key=str)
        run_section("preload", preload, doc["sections"], devices, share("preload"))
        save()
    only = set(args.only_cases.split(",")) if args.only_cases else None
    plan = {"parity": lambda b: __import__("parity").run(device, args.tiny, b, only),
            "capacity": lambda b: __import__("capacity").run(device, args.tiny, b),
            "scale": lambda b: __import__("scale").run(device, args.tiny, b, 0.0 if device.is_cpu else SCALE_CPU_S,
                                                      newton=not args.no_newton),
            "gradients": lambda b: __import__("gradscale").run(device, args.tiny, b)}
    for name in ("parity", "capacity", "scale", "gradients"):
        if name in sections:
            b = share(name)
            run_section(name, plan[name], doc["sections"], b)
            doc["sections"][name]["budget_s"] = round(b.seconds, 1)
            save()
            print(f"[gpu-check] {name}: {doc['sections'][name]['status']} in {doc['sections'][name]['seconds']} s"
                  f" ({budget.left():.0f} s left)", flush=True)
    doc["chart"] = write_chart(doc, args.out)
    save()
    print(json.dumps(doc["summary"], indent=1, default=str))
    print(f"[gpu-check] wrote {json_path} in {budget.elapsed():.1f} s; pxr imported: {'pxr' in sys.modules}")
    ok = all(v.get("status") in ("ok",) for k, v in doc["sections"].items()) and bool(doc["summary"]["parity_passed"]
                                                                                       if "parity" in sections
                                                                                       else True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
