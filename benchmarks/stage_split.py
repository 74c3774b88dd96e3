"""Where a rigid scene's step goes: ``model.collide`` against ``solver.step``, each replayed alone.

    python benchmarks/stage_split.py                                        # chain, boxes, every solver
    python benchmarks/stage_split.py --scenes chain --solvers featherstone --dt 0.0005 --settle-s 4.5
    python benchmarks/stage_split.py --tiny                                 # smoke run (seconds)

For each (scene, solver): the ``bench_scenes`` scene at the solver's registered step (``--dt`` overrides it for
every row), stepped for ``--settle-s`` simulated seconds from a graph of two steps (so that the pile has
settled and its contacts exist), then two graphs are captured at that state: one ``collide`` and one ``step``
(state 0 into state 1, never swapped: every replay starts from the same state). They are timed in
``--rounds`` rounds, alternating which goes first, each a block of about ``--block-s`` seconds; the figures
are microseconds per call, median [min, max] over the rounds, with the contacts stored at that state and the
machine load of every block (``machine.LoadMeter``). The state is fixed, so a row is the cost at one moment:
a chain whose links touch each other costs more than one whose links do not (``--settle-s`` picks the moment;
``contacts`` says which it was). Nothing here checks the physics (``sanity.py`` and the tests do).

Prints a table and one JSON document (schema ``inertia-stage-split/1``, also written to ``--json``).
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

SCHEMA = "inertia-stage-split/1"


def _graph(fn):
    with wp.ScopedCapture(device="cpu") as cap:
        fn()
    return cap.graph


def _per_call_us(graph, calls: int) -> tuple:
    meter = LoadMeter().start()
    t = time.perf_counter()
    for _ in range(calls):
        wp.capture_launch(graph)
    return 1e6 * (time.perf_counter() - t) / calls, meter.stop()


def row(scene: str, solver: str, size, dt, settle_s: float, rounds: int, block_s: float) -> dict:
    from bench_scenes import InertiaRunner, SCENES

    with warnings.catch_warnings():  # the scenes' own notes (joint fields a solver ignores, substeps)
        warnings.simplefilter("ignore")
        r = InertiaRunner(SCENES[scene], size, "cpu", solver, dt=dt)
    r.step()
    r.step()  # both states written once (per-state buffers allocated) before any capture
    pair = _graph(lambda: (r.step(), r.step()))
    for _ in range(int(round(settle_s / r.dt / 2))):
        wp.capture_launch(pair)
    m, s0, s1 = r.model, r.state_0, r.state_1
    graphs = {"collide": _graph(lambda: m.collide(s0, r.contacts)),
              "step": _graph(lambda: r.solver.step(s0, s1, r.control, r.contacts, r.dt))}
    wp.capture_launch(graphs["collide"])
    contacts = int(r.contacts.rigid_contact_count.numpy()[0])
    fields = [n for n in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q", "joint_qd")
              if getattr(s0, n, None) is not None]
    before = [getattr(s0, n).numpy().tobytes() for n in fields]
    probe = {k: _per_call_us(g, 20)[0] for k, g in graphs.items()}
    calls = {k: max(2, int(block_s * 1e6 / max(us, 1e-3))) for k, us in probe.items()}
    us = {k: [] for k in graphs}
    loads = []
    for i in range(rounds):
        for k in (("collide", "step") if i % 2 == 0 else ("step", "collide")):
            t, load = _per_call_us(graphs[k], calls[k])
            us[k].append(t)
            loads.append(load)
    unchanged = [getattr(s0, n).numpy().tobytes() for n in fields] == before  # every replay starts from it
    stats = {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "samples": [round(x, 3) for x in v]}
             for k, v in us.items()}
    return {"scene": scene, "solver": solver, "size": list(r.size), "dt": r.dt, "settle_s": settle_s,
            "rigid_contacts": contacts, "input_state_unchanged": unchanged, "collide_us": stats["collide"], "step_us": stats["step"],
            "collide_share": stats["collide"]["median"] / (stats["collide"]["median"] + stats["step"]["median"]),
            "calls_per_block": calls, "load": summarize_load(loads)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenes", default="chain,boxes")
    p.add_argument("--solvers", default="semi_implicit,xpbd,featherstone")
    p.add_argument("--dt", type=float, default=None, help="[s] every row's step (default: each solver's registered)")
    p.add_argument("--settle-s", type=float, default=2.0, help="[s] simulated before the graphs are captured")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--block-s", type=float, default=0.3)
    p.add_argument("--tiny", action="store_true", help="the scenes' tiny sizes, 0.01 s settled, 2 short rounds")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    from bench_scenes import SCENES, SOLVERS

    wp.init()
    if a.tiny:
        a.settle_s, a.rounds, a.block_s = 0.01, 2, 0.01
    rows = []
    for scene in a.scenes.split(","):
        size = SCENES[scene].tiny_size if a.tiny else SCENES[scene].default_size
        for solver in a.solvers.split(","):
            if solver not in SOLVERS or not SOLVERS[solver].applies_to(scene):
                continue
            rows.append(row(scene, solver, size, a.dt, a.settle_s, a.rounds, a.block_s))
            x = rows[-1]
            print(f"[stage_split] {scene} {solver} dt {x['dt']:.4g}: collide {x['collide_us']['median']:.1f} us, "
                  f"step {x['step_us']['median']:.1f} us, {x['rigid_contacts']} contacts", file=sys.stderr)
    doc = {"schema": SCHEMA, "machine": machine_info("cpu"), "config": vars(a), "rows": rows}
    lines = ["scene   solver          dt [ms]  contacts  collide us: median [min, max]   step us: median [min, max]"
             "   collide share"]
    for x in rows:
        c, s = x["collide_us"], x["step_us"]
        lines.append(f"{x['scene']:<7} {x['solver']:<15} {1e3 * x['dt']:<8.3g} {x['rigid_contacts']:<9} "
                     f"{c['median']:8.1f} [{c['min']:.1f}, {c['max']:.1f}]{'':10} "
                     f"{s['median']:8.1f} [{s['min']:.1f}, {s['max']:.1f}]{'':8} {x['collide_share']:.2f}")
    return emit(doc, a.json, "\n".join(lines))


if __name__ == "__main__":
    wp.config.quiet = True  # stdout: the table and the JSON only
    main()
