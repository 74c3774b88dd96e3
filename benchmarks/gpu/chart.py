"""The GPU check's PNG: entity-steps per second against entities (particles + bodies), device and CPU on one
log-log chart, one line per scene and solver (device solid, CPU dashed, Newton dotted), graph replay.

Written by ``check.py`` at the end of a run, or later from its JSON: ``check.py --chart RESULTS.json``.
"""

from __future__ import annotations

import os


def rows_of(doc: dict) -> list:
    """Every measured throughput row of a check JSON: (label, kind, entities, entity_steps_per_s)."""
    scale = doc.get("sections", {}).get("scale", {})
    out = []
    for part, kind in (("device", "device"), ("cpu", "cpu")):
        for scene, sweep in (scale.get(part) or {}).items():
            for r in sweep.get("rows", []):
                if r.get("entity_steps_per_s") and r.get("finite", True):
                    dev = r.get("device", "")
                    kind_r = "cpu" if dev.startswith("cpu") else "device"
                    out.append((f"{scene} {r['solver']} ({dev})", kind_r, r["entities"], r["entity_steps_per_s"]))
    for scene, sweep in (scale.get("newton") or {}).items():
        for r in (sweep or {}).get("rows", []):
            if r.get("entity_steps_per_s"):
                out.append((f"{scene} {r['solver']} (newton, {r.get('device', '')})", "newton", r["entities"],
                            r["entity_steps_per_s"]))
    return out


def plot(doc: dict, path: str):
    """Write the chart to ``path``; returns the path, or None (with the reason) without matplotlib or rows."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return None, f"matplotlib is not installed ({e}): run `check.py --chart JSON` where it is"
    rows = rows_of(doc)
    if not rows:
        return None, "no throughput rows to chart"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 6))
    style = {"device": "-", "cpu": "--", "newton": ":"}
    for label in sorted({r[0] for r in rows}):
        pts = sorted((e, v, k) for lab, k, e, v in rows if lab == label)
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], style[pts[0][2]], marker="o", markersize=3,
                  label=label)
    machine = doc.get("machine", {})
    ax.set_xlabel("entities (particles + bodies)")
    ax.set_ylabel("entity-steps per second (graph replay)")
    ax.set_title(f"inertia throughput vs size: {machine.get('device_name', '')} / {machine.get('cpu', '')}"[:110],
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, None
