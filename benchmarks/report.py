"""Plain-text tables of run.py's and sim_rate.py's JSON documents (the README's come from readme_table.py)."""

from __future__ import annotations

import json

from machine import fmt


def emit(doc: dict, path: str | None, table: str | None = None, indent: int = 1) -> dict:
    """The end of a benchmark: its ``table`` (text, if any) and a blank line, then its JSON document, which
    is also written to ``path`` (``--json``)."""
    text = json.dumps(doc, indent=indent)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
    if table is not None:
        print(table)
        print()
    print(text)
    return doc


def grid(head, rows, left: int = 4) -> list:
    rows = [tuple(head)] + [tuple(r) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def spread(fig, spec=".1f", scale=1.0) -> str:
    """'median [min, max]' of a figure dict, or '-'."""
    if not fig or fig.get("median") is None:
        return "-"
    return (f"{fmt(fig['median'] * scale, spec)} [{fmt(fig['min'] * scale, spec)}, "
            f"{fmt(fig['max'] * scale, spec)}]")


def sanity_word(s) -> str:
    if not s:
        return "-"
    return "sane" if s.get("sane") else "NOT SANE"


def load_text(load) -> str:
    oc = (load or {}).get("others_cores")
    return f"{oc['median']:.2f}/{oc['max']:.2f}" if oc else "-"


def run_table(doc) -> str:
    head = ("scene", "size", "solver", "engine", "particles", "bodies", "dt", "build s", "1st step s", "cache",
            "steps/s py [min, max]", "steps/s graph [min, max]", "sim s/s graph", "Ment-steps/s", "launches",
            "graph ops", "others' cores med/max", "sanity")
    rows = []
    for r in doc["results"]:
        g = r["graph"]
        best = g.get("entity_steps_per_s", r["python"].get("entity_steps_per_s"))
        rows.append((
            r["scene"], "x".join(map(str, r["size"])), r["solver"], r["engine"], str(r["counts"]["particles"]),
            str(r["counts"].get("bodies", 0)), f"1/{round(1 / r['dt'])}", fmt(r["build_s"], ".2f"),
            fmt(r["first_step_s"], ".3f"), r["cache"], spread(r["python"]), spread(g),
            fmt(g.get("sim_s_per_wall_s"), ".4f"), fmt(best / 1e6 if best is not None else None, ".3f"),
            str(r["launches_per_step"]), fmt(r["graph_ops_per_step"], ".0f"), load_text(r.get("load")),
            sanity_word(r.get("sanity"))))
    lines = grid(head, rows)
    lines.append("median [min, max] over the rounds; sim s/s = simulated seconds per wall-clock second; others' cores: "
                 "CPU used by other processes while the row's blocks ran (cores)")
    for c in doc["comparisons"]:
        if c.get("error"):
            lines.append(f"{c['scene']} {c['solver']}: newton failed: {c['error']}")
            continue
        p = c.get("paired") or {}
        lines.append(
            f"{c['scene']} {c['solver']}: inertia / newton = {fmt(c['ratio_graph'], '.2f')} graph, paired per round "
            f"{spread(p.get('graph'), '.2f')}; {fmt(c['ratio_python'], '.2f')} python loop, paired "
            f"{spread(p.get('python'), '.2f')}; sane: inertia {c['sane']['inertia']}, newton {c['sane']['newton']}")
    for c in doc.get("solver_comparisons", []):
        lines.append(
            f"{c['scene']} {c['engine']} {c['solver']} / {c['baseline']}: steps/s x {fmt(c['steps_ratio_python'], '.3f')} "
            f"(py), x {fmt(c['steps_ratio_graph'], '.3f')} (graph); dt x {c['dt_ratio']:g}; simulated seconds per wall "
            f"second x {fmt(c['sim_ratio_python'], '.3f')} (py), x {fmt(c['sim_ratio_graph'], '.3f')} (graph)")
    for r in doc["results"]:
        s = r.get("sanity")
        if s and not s.get("sane"):
            lines.append(f"NOT SANE over {s.get('window_s')} s: {r['engine']} {r['scene']} {r['solver']}: "
                         + "; ".join(s["failures"]))
    if doc.get("newton"):
        lines.append(f"newton: {doc['newton']}")
    return "\n".join(lines)


def sim_rate_table(doc) -> str:
    head = ("scene", "engine", "solver", "largest sane dt", "sim s/s loop [min, max]", "sim s/s fast [min, max]",
            "fast", "vs MuJoCo (fast)", "others' cores med/max", "sanity at that dt")
    rows = []
    for r in doc["results"]:
        if r.get("error"):
            rows.append((r["scene"], r["engine"], r["solver"], "-", "-", "-", "-", "-", "-", r["error"][:60]))
            continue
        rows.append((r["scene"], r["engine"], r["solver"], f"{r['dt']:.6g}",
                     spread(r["python"].get("sim"), ".3f"), spread(r["graph"].get("sim"), ".3f"),
                     r.get("graph_kind") or "-",
                     fmt(r.get("vs_mujoco"), ".2f"), load_text(r.get("load")), sanity_word(r.get("sanity"))))
    lines = grid(head, rows, left=3)
    lines.append(f"each engine at the largest step of the ladder whose {doc['config']['window_s']:g} s window is sane "
                 "(dt_search in the JSON); sim s/s = simulated seconds per wall-clock second")
    return "\n".join(lines)
