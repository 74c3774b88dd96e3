"""Granular cost per particle against size, with particles numbered in grid order and in a random order.

    python benchmarks/locality.py                        # 8k, 16k, 33k, 64k particles; ~2 min on 2 cores
    python benchmarks/locality.py --sizes 20,40 --json locality.json
    python benchmarks/locality.py --tiny                 # smoke run

Issue 20 asked whether re-ordering particles by cell every N steps would pay past 16k particles (the cost
per particle then rose 29 % from 8k to 64k). This measures the two things that decide it, with the
SemiImplicitSolver on ``bench_scenes``' granular block (n x n x n particles on a ground plane, landed for
300 steps first, so each particle touches its neighbours and the ground):

* how the cost of a particle-step grows with n when particles are numbered in grid order (the builder's
  order, and nearly the cell order of the landed block): the cache effect re-ordering could remove;
* the same block with its particle indices randomly permuted (the same physics, bit for bit in the pair
  counts): the most a block whose numbering has lost all locality could gain by being re-ordered.

Each figure: the median over 3 blocks of 40 steps, plain loop (which replays its own graphs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import warp as wp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_scenes import SCENES, SOLVERS  # noqa: E402


def build(n: int, shuffle: bool):
    """The granular block of n^3 particles on a ground plane; ``shuffle``: particle indices permuted."""
    import inertia
    from inertia.schema import MODEL_FIELDS

    p = SCENES["granular"].params((n, n, n))
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_particle_grid(p["dim_x"], p["dim_y"], p["dim_z"], pos=p["pos"], vel=p["vel"], cell_x=p["cell"],
                        cell_y=p["cell"], cell_z=p["cell"], mass=p["mass"], jitter=p["jitter"],
                        radius_mean=p["radius"])
    if shuffle:  # every per-particle builder list, by the schema (so no field is left in the old order)
        count = len(b.particle_q)
        perm = np.random.default_rng(0).permutation(count)
        for f in MODEL_FIELDS:
            if f.entity == "particle" and f.source == "builder" and f.length == "count":
                values = getattr(b, f.name)
                if len(values) == count:
                    setattr(b, f.name, [values[i] for i in perm])
    return b.finalize(device="cpu")


def measure(n: int, shuffle: bool, land: int, steps: int, repeats: int) -> dict:
    spec = SOLVERS["semi_implicit"]
    dt = spec.settings("granular")["dt"]
    model = build(n, shuffle)
    solver = spec(model, "granular")
    s = [model.state(), model.state()]
    control, contacts = model.control(), model.contacts()

    def run(k):
        for _ in range(k):
            model.collide(s[0], contacts)
            solver.step(s[0], s[1], control, contacts, dt)
            s.reverse()

    run(land)
    wp.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run(steps)
        wp.synchronize()
        times.append((time.perf_counter() - t) / steps)
    step_s = statistics.median(times)
    return {"n": n, "particles": model.particle_count, "order": "random" if shuffle else "grid",
            "ms_per_step": step_s * 1e3, "ns_per_particle_step": step_s / model.particle_count * 1e9,
            "ms_per_step_range": [min(times) * 1e3, max(times) * 1e3],
            "particle_pairs": int(contacts.particle_pair_count.numpy()[0]),
            "finite": bool(np.isfinite(s[0].particle_q.numpy()).all())}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20,25,32,40", help="comma list of n (n^3 particles)")
    ap.add_argument("--tiny", action="store_true", help="n = 4, 5 and a few steps (smoke test)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    from machine import machine_info
    from report import emit

    sizes = [4, 5] if args.tiny else [int(x) for x in args.sizes.split(",")]
    land, steps, repeats = (5, 3, 2) if args.tiny else (300, 40, 3)
    rows = []
    for n in sizes:
        for shuffle in (False, True):
            r = measure(n, shuffle, land, steps, repeats)
            rows.append(r)
            print(f"{r['particles']:7d} particles, {r['order']:6s} order: {r['ms_per_step']:8.2f} ms/step, "
                  f"{r['ns_per_particle_step']:6.1f} ns per particle-step ({r['particle_pairs']} pairs)", flush=True)
    return emit({"schema": "inertia-locality/1", "machine": machine_info("cpu"), "land_steps": land,
                 "steps": steps, "repeats": repeats, "rows": rows}, args.json)


if __name__ == "__main__":
    main()
