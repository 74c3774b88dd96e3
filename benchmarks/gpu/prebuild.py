"""Compile every inertia module for a CUDA architecture here, without a GPU, into a Warp kernel cache that the
GPU check then loads instead of compiling (``check.py --kernel-cache DIR``).

    python benchmarks/gpu/prebuild.py --arch 90 --out .gpu/kcache      # sm_90: H100 / H200

Why: Warp compiles a module at its first use; NVRTC takes minutes for the largest (the narrow phase: over 3
CPU-minutes for sm_90 on the development machine, against 46 s for the CPU), which would spend most of a GPU
check's time. Warp names a cached binary by a hash of the module's code and options (not the machine), so a
cache compiled here from the same sources and the same warp-lang is found there. The modules are hashed as
``check.py``'s preload sees them: right after import, before any kernel made on first use exists (those few
compile there). Writes ``prebuild.json`` (seconds per module) into the cache folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.dirname(HERE), HERE):
    if p not in sys.path:
        sys.path.insert(0, p)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, default=90, help="CUDA compute capability x 10 (90: Hopper)")
    ap.add_argument("--out", required=True, help="kernel cache folder to fill")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="modules compiled at a time")
    args = ap.parse_args(argv)

    import warp as wp

    wp.config.kernel_cache_dir = os.path.abspath(args.out)
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    from common import engine_modules

    mods, skipped = engine_modules()

    def one(m):
        t0 = time.perf_counter()
        try:
            wp.compile_aot_module(m, arch=args.arch)
            return m.name, round(time.perf_counter() - t0, 2), None
        except RuntimeError as e:  # a module of functions only: nothing to compile
            return m.name, round(time.perf_counter() - t0, 2), str(e)[:120]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, mods))
    out = {"arch": args.arch, "warp": wp.__version__, "seconds": round(time.perf_counter() - t0, 1),
           "modules": {n: {"seconds": s, "note": e} for n, s, e in results}, "not_imported": skipped}
    with open(os.path.join(args.out, "prebuild.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
