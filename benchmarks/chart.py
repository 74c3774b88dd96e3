"""Throughput vs problem size, both engines, as a PNG chart (and the JSON rows behind it).

    python benchmarks/chart.py                                   # cloth 16^2..64^2, granular 8^3..24^3
    python benchmarks/chart.py --scenes cloth,boxes --sizes cloth=16x16/32x32/64x64,boxes=2x2x2/4x4x4 \\
        --solvers semi_implicit,xpbd --out benchmarks/out/chart.png

Each point is one ``benchmarks/run.py`` row (median of its timed blocks): entity-steps per second
(particles + bodies, times steps per second) against the entity count, graph-replay mode, one line per
scene, solver and engine (Newton dashed). Sizes are given per scene as ``name=size/size/...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))  # _common: the examples' figure helpers

from _common import pyplot_or_none, save_figure  # noqa: E402

DEFAULT_SIZES = {"cloth": "16x16/32x32/64x64", "granular": "8x8x8/16x16x16/24x24x24", "soft": "4x4x2/8x8x4/16x16x4",
                 "boxes": "2x2x2/4x4x4/6x6x6", "chain": "8/32/128"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenes", default="cloth,granular")
    p.add_argument("--sizes", default="", help="name=size/size/... per scene, comma separated (defaults above)")
    p.add_argument("--solvers", default="semi_implicit")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3, help="timing rounds per point (run.py --rounds)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--no-newton", action="store_true")
    p.add_argument("--out", default=os.path.join(HERE, "out", "throughput_vs_size.png"))
    return p.parse_args(argv)


def sweep(args) -> list:
    """Run run.py once per scene and size; returns the result rows (with their engine and entity count)."""
    import run

    sizes = dict(DEFAULT_SIZES)
    for item in (s for s in args.sizes.split(",") if s):
        name, value = item.split("=", 1)
        sizes[name] = value
    rows = []
    for scene in (s for s in args.scenes.split(",") if s):
        for size in sizes[scene].split("/"):
            # no sanity pass: a throughput sweep (run.py's rows carry the sanity verdicts)
            argv = ["--scenes", scene, "--sizes", f"{scene}={size}", "--solvers", args.solvers, "--device",
                    args.device, "--rounds", str(args.repeats), "--sanity-s", "0", "--quiet"]
            if args.steps is not None:
                argv += ["--steps", str(args.steps)]
            if args.no_newton:
                argv.append("--no-newton")
            doc = run.main(argv)
            for r in doc["results"]:
                counts = r["counts"]
                entities = counts.get("particles", 0) + counts.get("bodies", 0)
                rate = r["graph"].get("median") or r["python"]["median"]
                rows.append({"scene": scene, "size": size, "solver": r["solver"], "engine": r["engine"],
                             "entities": entities, "steps_per_s": rate, "entity_steps_per_s": rate * entities,
                             "mode": "graph" if r["graph"].get("median") else "python"})
    return rows


def plot(rows, path: str):
    """Write the chart; returns the path, or None without matplotlib."""
    plt = pyplot_or_none("the chart")
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = sorted({(r["scene"], r["solver"], r["engine"]) for r in rows})
    for scene, solver, engine in lines:
        pts = sorted((r["entities"], r["entity_steps_per_s"]) for r in rows
                     if (r["scene"], r["solver"], r["engine"]) == (scene, solver, engine))
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], "--" if engine == "newton" else "-", marker="o",
                  label=f"{scene} {solver} ({engine})")
    ax.legend(fontsize=7)
    return save_figure(plt, fig, ax, path, "entities (particles + bodies)", "entity-steps per second (graph replay)",
                       "throughput vs problem size")


def main(argv=None) -> dict:
    args = parse_args(argv)
    rows = sweep(args)
    png = plot(rows, args.out)
    out = {"rows": rows, "png": png}
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
