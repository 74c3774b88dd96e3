"""Many-world benchmark: throughput vs the number of worlds, and the time to build 1,024 robots.

    python benchmarks/worlds.py                                    # both scenes and solvers, 1..1024 worlds
    python benchmarks/worlds.py --newton-python /work/venv-newton/bin/python --json worlds.json
    python benchmarks/worlds.py --worlds 1,4 --scenes cloth --solvers xpbd --no-newton
    python benchmarks/worlds.py --worlds 1,4 --no-newton --build-copies 16 --block-s 0.01 --max-steps 4   # smoke

1. Throughput: a small scene (``box_pendulum``: a box and a 2-link pendulum; ``cloth``: 8x8 cells),
   built once as a one-world builder and copied ``num_worlds`` times with ``ModelBuilder.replicate``
   (Newton: its own ``replicate`` of its twin, placed at the same offsets), stepped and timed by
   ``run.measure`` (python loop and graph replay, median of ``--repeats`` blocks). Headline:
   world-steps/s = steps/s x num_worlds.
2. Build time: ``replicate`` + ``finalize`` of ``--build-copies`` (1,024) copies of a 20-body legged
   robot (``robot_spec()``: the same bodies, shapes and joints in both engines), median of
   ``--build-repeats``.

Prints two tables and one JSON document (also written to ``--json``); benchmarks/README.md says more.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

from bench_newton import (SCENE_NOTES, SEMI_IMPLICIT_SCENE_NOTES, XPBD_RIGID_SCENE_NOTES,  # noqa: E402
                          NewtonRunner, RIGID_CONTACT_GAP, import_newton)
from bench_scenes import SOLVERS, BoxesScene, ChainScene, ClothScene, InertiaRunner, Scene  # noqa: E402
from machine import cache_entries as _cache_entries  # noqa: E402
from machine import fmt as _fmt  # noqa: E402
from machine import loadavg as _loadavg  # noqa: E402
from machine import machine_info  # noqa: E402
from machine import now as _now  # noqa: E402
from report import emit  # noqa: E402
from timing import measure  # noqa: E402
from timing import sync as _sync  # noqa: E402
from worlds_build import model_worlds, robot_spec, time_robot_build  # noqa: E402

SCHEMA = "inertia-worlds-benchmark/1"
DEFAULT_WORLDS = (1, 4, 16, 64, 256, 1024)
PARENT_OFFSETS: dict = {}  # (scene label, num_worlds) -> offsets, in a Newton child


# ------------------------------------------------------------------------------------ scenes
class WorldScene:
    """A small one-world scene that is replicated ``num_worlds`` times (``size`` = ``(num_worlds,)``).

    ``name`` is the bench_scenes scene whose solver settings (dt, iterations) the copies run at, and
    also selects the matching NewtonRunner path (see :class:`NewtonWorldsRunner`); ``label`` names
    the rows. ``spacing`` [m]: distance between neighbouring copies on the replicate grid.
    Subclasses give ``params()`` (the numbers both engines build from), ``per_world()`` (entity counts
    of one copy) and ``scene_builder()`` (one inertia copy, without the ground).
    """

    label = name = ""
    spacing = 1.0

    def configure_outer(self, b) -> None:
        """Model-wide settings (they are the outer builder's, not copied from the scene)."""

    def offsets(self, num_worlds: int) -> np.ndarray:
        """Offsets [m] of the copies, (num_worlds, 3): inertia's replicate grid (given by the parent process in
        a Newton child, where inertia may not import)."""
        given = PARENT_OFFSETS.get((self.label, num_worlds))
        if given is not None:
            return np.asarray(given, dtype=np.float64)
        from inertia.builder.worlds import grid_offsets

        return grid_offsets(num_worlds, self.spacing, 2)

    def expected_counts(self, size) -> dict:
        (n,) = size
        out = {k: n * v for k, v in self.per_world().items()}
        out["shapes"] = n * self.per_world()["shapes"] + 1  # the shared ground plane
        return out

    def build_inertia(self, size, device):
        (n,) = size
        b = Scene._inertia_builder()  # the shared ground and the particle contact material of run.py's scenes
        self.configure_outer(b)
        b.replicate(self.scene_builder(), n, spacing=self.spacing)
        return b.finalize(device=device)


class BoxPendulumScene(WorldScene):
    """One 10 cm box dropped 1 cm onto the ground (run.py's ``boxes`` at 1x1x1) and a 2-link pendulum of
    run.py's ``chain`` capsules hinged 1 m above the ground, released from horizontal (never touching the box).

    Runs at the ``boxes`` settings: semi-implicit dt = 1 ms (the chain's too), XPBD dt = 1/1200 s with 8
    iterations (the chain's test steps at 1/600 s).
    """

    label, name, spacing = "box_pendulum", "boxes", 1.0

    def params(self, size=None) -> dict:
        return {"box": BoxesScene().params((1, 1, 1)), "chain": ChainScene().params((2,))}

    def per_world(self) -> dict:
        return {"particles": 0, "triangles": 0, "edges": 0, "bodies": 3, "joints": 2, "shapes": 3}

    def configure_outer(self, b) -> None:
        c = self.params()["chain"]
        b.joint_attach_ke, b.joint_attach_kd = c["joint_attach_ke"], c["joint_attach_kd"]

    def scene_builder(self):
        import inertia

        p = self.params()
        b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
        BoxesScene.add_to(b, p["box"])
        ChainScene.add_links(b, p["chain"])
        return b


class ClothWorldScene(WorldScene):
    """run.py's ``cloth`` at 8x8 cells (81 particles, 128 triangles, 176 bending edges) per world."""

    label, name, spacing = "cloth", "cloth", 1.5
    cells = (8, 8)

    def params(self, size=None) -> dict:
        return ClothScene().params(self.cells)

    def per_world(self) -> dict:
        c = ClothScene().expected_counts(self.cells)
        return {"particles": c["particles"], "triangles": c["triangles"], "edges": c["edges"], "bodies": 0,
                "joints": 0, "shapes": 0}

    def scene_builder(self):
        import inertia

        p = self.params()
        b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
        b.add_cloth_grid(
            p["dim_x"], p["dim_y"], pos=p["pos"], cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
            fix_left=p["fix_left"], tri_ke=p["tri_ke"], tri_ka=p["tri_ka"], tri_kd=p["tri_kd"],
            edge_ke=p["edge_ke"], edge_kd=p["edge_kd"], particle_radius=p["radius"],
        )
        return b


WORLD_SCENES = {s.label: s for s in (BoxPendulumScene(), ClothWorldScene())}

WORLDS_NOTES = [
    "Newton: its ModelBuilder.replicate of its twin of the one-world scene, with xforms = our replicate grid's "
    "offsets (Newton's spacing argument would centre the grid), the ground added once, shared (world -1)",
]
BOX_PENDULUM_NEWTON_NOTES = {
    "semi_implicit": SEMI_IMPLICIT_SCENE_NOTES["chain"] + SCENE_NOTES["chain"],
    "xpbd": XPBD_RIGID_SCENE_NOTES["chain"] + SCENE_NOTES["chain"],
}


class NewtonWorldsRunner(NewtonRunner):
    """NewtonRunner of a replicated scene: NewtonRunner's ground, materials, solver, pipeline and stepping.

    NewtonRunner builds its scene by calling ``self._build_<scene.name>(builder, params)`` on a builder that
    already holds the ground; here those methods build the one-world twin into a builder of its own (with
    NewtonRunner's own scene code) and replicate it into that builder.
    """

    def __init__(self, scene: WorldScene, num_worlds: int, device, solver: str):
        self.world_scene, self.num_worlds = scene, int(num_worlds)
        super().__init__(scene, (num_worlds,), device, solver)
        self.notes += WORLDS_NOTES
        if scene.label == "box_pendulum":
            self.notes += BOX_PENDULUM_NEWTON_NOTES[solver]

    def _scene_builder(self):
        n = self.newton
        b = n.ModelBuilder(up_axis=n.Axis.Z, gravity=(0.0, 0.0, -9.81))
        b.rigid_gap = RIGID_CONTACT_GAP
        return b

    def _replicate(self, outer, one):
        xforms = [wp.transform(wp.vec3(*o), wp.quat_identity()) for o in self.world_scene.offsets(self.num_worlds)]
        outer.replicate(one, self.num_worlds, xforms=xforms)

    def _build_cloth(self, b, p):
        one = self._scene_builder()
        super()._build_cloth(one, p)
        self._replicate(b, one)

    def _build_boxes(self, b, p):
        one = self._scene_builder()
        super()._build_boxes(one, p["box"])
        super()._build_chain(one, p["chain"])  # last: its solver kwargs (joint gains, angular_damping 0) apply
        self._replicate(b, one)


# ------------------------------------------------------------------------------------ throughput
def world_deviation(positions, worlds, offsets, per_world) -> float | None:
    """Largest distance [m] between an entity of world k (minus the world's offset) and the same entity of
    world 0: identical copies of a deterministic scene should stay within float32 rounding of the offset."""
    if len(positions) == 0 or len(offsets) < 2:
        return 0.0
    if np.any(np.diff(worlds) < 0):
        return None  # not world by world
    local = (positions - offsets[worlds]).reshape(len(offsets), per_world, 3)
    return float(np.linalg.norm(local - local[0], axis=2).max())


def entity_worlds(model):
    """World of each row of ``runner.positions()``: particles, then bodies."""
    pw, bw = model.particle_world, model.body_world
    parts = [a.numpy() for a in (pw, bw) if a is not None and a.shape[0]]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def measure_point(runner, scene: WorldScene, num_worlds: int, args, cache_dir, cache_before) -> dict:
    """run.measure with a block length chosen from a probe step, plus the world figures."""
    dev = runner.device
    _sync(dev)
    t = _now()
    runner.step()  # loads (compiles) the modules
    _sync(dev)
    probe_first = _now() - t
    t = _now()
    runner.step()
    _sync(dev)
    probe = _now() - t
    steps = int(min(args.max_steps, max(2, round(args.block_s / max(probe, 1e-9)))))
    row = measure(runner, steps, args.repeats, args.warmup, cache_dir, graph=not args.no_graph,
                  cache_before=cache_before)
    row["probe_first_step_s"], row["probe_step_s"] = probe_first, probe
    row["steps_simulated"] += 2
    row["sim_time_s"] = row["steps_simulated"] * runner.dt
    row["num_worlds"] = num_worlds
    for mode in ("python", "graph"):
        if "median" in row[mode]:
            row[mode]["world_steps_per_s"] = row[mode]["median"] * num_worlds
    per = sum(scene.per_world()[k] for k in ("particles", "bodies"))
    row["max_world_deviation_m"] = world_deviation(runner.positions(), entity_worlds(runner.model),
                                                   scene.offsets(num_worlds), per)
    row["model_worlds"] = model_worlds(runner.model)
    return row


def run_points(engine: str, scene: WorldScene, solver: str, worlds, args, device) -> list:
    """Every num_worlds point of one scene and solver in this process (errors become rows with ``error``)."""
    cache_dir = wp.config.kernel_cache_dir
    rows = []
    for n in worlds:
        cache_before = _cache_entries(cache_dir) if cache_dir else set()
        load = _loadavg()
        t = _now()
        try:
            if engine == "inertia":
                runner = InertiaRunner(scene, (n,), device, solver)
            else:
                runner = NewtonWorldsRunner(scene, n, device, solver)
            build_s = _now() - t
            row = measure_point(runner, scene, n, args, cache_dir, cache_before)
        except Exception as e:
            if engine == "inertia":
                raise
            rows.append({"scene": scene.label, "solver": solver, "engine": engine, "num_worlds": n,
                         "error": f"{type(e).__name__}: {e}"})
            continue
        row.update({"scene": scene.label, "solver": solver, "build_s": build_s,
                    "settings": SOLVERS[solver].settings(scene.name)})
        row["loadavg_1min"]["start"] = load
        if engine == "inertia":
            row["expected_counts"] = scene.expected_counts((n,))
            row["counts_match"] = all(row["counts"][k] == v for k, v in row["expected_counts"].items())
            row["world_counts"] = runner.model.world_counts()
        rows.append(row)
        del runner
    return rows


def newton_child(spec: dict) -> dict:
    """Newton's rows (worlds.py --newton-child, run under --newton-python)."""
    args = argparse.Namespace(**spec["args"])
    device = wp.get_device(spec["device"])
    out = {"rows": [], "builds": [], "newton_version": import_newton()[0].__version__}
    for label, n, offsets in spec.get("offsets", []):
        PARENT_OFFSETS[(label, n)] = offsets
    for label, solver in spec["cases"]:
        out["rows"] += run_points("newton", WORLD_SCENES[label], solver, spec["worlds"], args, device)
    if spec.get("build_copies"):
        try:
            out["builds"].append(time_robot_build("newton", spec["build_copies"], spec["build_repeats"], device))
        except Exception as e:
            out["builds"].append({"engine": "newton", "copies": spec["build_copies"],
                                  "error": f"{type(e).__name__}: {e}"})
    return out


def run_newton_child(python: str, spec: dict, timeout: float = 3600.0):
    cmd = [python, os.path.abspath(__file__), "--newton-child", json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout:.0f} s"
    if proc.returncode != 0:
        return None, f"exit code {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]), None


def find_newton(args):
    """(mode, module-or-python, status): mode "inprocess", "subprocess" or None."""
    if args.no_newton:
        return None, None, "skipped (--no-newton)"
    newton_mod, err = import_newton()
    if newton_mod is not None:
        return "inprocess", newton_mod, f"newton {newton_mod.__version__}"
    if args.newton_python:
        probe = "import newton, newton.solvers, warp; print(newton.__version__, warp.__version__)"
        try:
            proc = subprocess.run([args.newton_python, "-c", probe], capture_output=True, text=True, timeout=300,
                                  cwd=HERE)
            if proc.returncode == 0:
                nv, wv = proc.stdout.split()[-2:]
                return "subprocess", args.newton_python, f"newton {nv} (warp {wv}, {args.newton_python})"
            err2 = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
        except Exception as e:
            err2 = f"{type(e).__name__}: {e}"
        return None, None, f"not available ({err}; {args.newton_python}: {err2})"
    return None, None, f"not available ({err})"


# ------------------------------------------------------------------------------------ output
def comparisons(rows) -> list:
    out = []
    for r in rows:
        if r["engine"] != "inertia":
            continue
        twin = [n for n in rows if n["engine"] == "newton" and n["scene"] == r["scene"] and n["solver"] == r["solver"]
                and n["num_worlds"] == r["num_worlds"]]
        if not twin:
            continue
        n = twin[0]
        c = {"scene": r["scene"], "solver": r["solver"], "num_worlds": r["num_worlds"]}
        if "error" in n:
            c["error"] = n["error"]
        for mode in ("python", "graph"):
            a = r[mode].get("median")
            b = n.get(mode, {}).get("median")
            c[f"ratio_{mode}"] = a / b if a and b else None
        out.append(c)
    return out


def _table(head, rows, left=3):
    widths = [max(len(row[i]) for row in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i >= left else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in [head] + rows]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def table(doc) -> str:
    rows = []
    ratio = {(c["scene"], c["solver"], c["num_worlds"]): c for c in doc["comparisons"]}
    for r in doc["results"]:
        if "error" in r:
            rows.append((r["scene"], r["solver"], r["engine"], str(r["num_worlds"])) + ("-",) * 9 + (r["error"][:40],))
            continue
        c = ratio.get((r["scene"], r["solver"], r["num_worlds"]), {}) if r["engine"] == "inertia" else {}
        g, p = r["graph"], r["python"]
        rows.append((r["scene"], r["solver"], r["engine"], str(r["num_worlds"]),
                     str(r["counts"]["particles"] + r["counts"]["bodies"]), _fmt(r["build_s"], ".2f"),
                     _fmt(p["median"], ".1f"), _fmt(g.get("median"), ".1f"),
                     _fmt(p["world_steps_per_s"], ".0f"), _fmt(g.get("world_steps_per_s"), ".0f"),
                     _fmt(c.get("ratio_python"), ".2f"), _fmt(c.get("ratio_graph"), ".2f"),
                     str(r["launches_per_step"]), _fmt(r["max_world_deviation_m"], ".1e")))
    head = ("scene", "solver", "engine", "worlds", "part+bodies", "build s", "steps/s py", "steps/s graph",
            "world-steps/s py", "world-steps/s graph", "ours/newton py", "ours/newton graph", "launches",
            "world dev m")
    lines = _table(head, rows, left=3)
    lines.append("world-steps/s = steps/s x worlds; ours/newton = inertia's steps/s / Newton's at the same worlds "
                 "(same dt); world dev = largest distance of an entity of any world from world 0's (offset removed)")
    if doc["builds"]:
        lines.append("")
        brow = [(b["engine"], str(b["copies"]), str(b["counts"]["bodies"]), str(b["counts"]["shapes"]),
                 str(b["counts"]["joints"]), _fmt(b["replicate_s"], ".3f"), _fmt(b["finalize_s"], ".3f"),
                 _fmt(b["total_s"], ".3f")) if "error" not in b else (b["engine"], str(b["copies"])) + ("-",) * 6
                for b in doc["builds"]]
        lines += _table(("engine", "copies", "bodies", "shapes", "joints", "replicate s", "finalize s", "total s"),
                        brow, left=1)
        lines.append(f"build: replicate + finalize of {doc['config']['build_copies']} copies of a "
                     f"{len(robot_spec())}-body robot (plus one ground plane), median of "
                     f"{doc['config']['build_repeats']} builds")
    lines.append(f"newton: {doc['newton']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worlds", default=",".join(map(str, DEFAULT_WORLDS)), help="comma list of num_worlds")
    p.add_argument("--scenes", default=",".join(WORLD_SCENES), help="comma list of " + ", ".join(WORLD_SCENES))
    p.add_argument("--solvers", default="semi_implicit,xpbd", help="comma list of semi_implicit, xpbd")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3, help="timed blocks per mode (median reported)")
    p.add_argument("--block-s", type=float, default=0.25,
                   help="target seconds per timed block: steps per block = this / one probe step")
    p.add_argument("--max-steps", type=int, default=60, help="at most this many steps per block")
    p.add_argument("--warmup", type=int, default=4, help="untimed steps after the first step")
    p.add_argument("--build-copies", type=int, default=1024, help="robot copies of the build-time row (0: skip)")
    p.add_argument("--build-repeats", type=int, default=3)
    p.add_argument("--json", default=None, help="also write the JSON document here")
    p.add_argument("--no-newton", action="store_true")
    p.add_argument("--newton-python", default=None,
                   help="an interpreter where `import newton` works; Newton's rows then run there, one subprocess "
                        "per scene and solver")
    p.add_argument("--newton-child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-graph", action="store_true")
    p.add_argument("--quiet", action="store_true", help="print only the JSON document")
    return p.parse_args(argv)


def _parse_list(text, allowed, what):
    items = [s for s in text.split(",") if s]
    for s in items:
        if s not in allowed:
            raise SystemExit(f"unknown {what} {s!r}; choose from {', '.join(allowed)}")
    return items


def main(argv=None) -> dict:
    args = parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    if args.newton_child:
        out = newton_child(json.loads(args.newton_child))
        print(json.dumps(out))
        return out
    scenes = _parse_list(args.scenes, WORLD_SCENES, "scene")
    solvers = _parse_list(args.solvers, SOLVERS, "solver")
    try:
        worlds = [int(s) for s in args.worlds.split(",") if s]
    except ValueError:
        raise SystemExit(f"--worlds: expected integers like 1,4,16, got {args.worlds!r}") from None
    if not worlds or min(worlds) < 1:
        raise SystemExit("--worlds: give at least one num_worlds, each >= 1")
    if args.repeats < 1 or args.warmup < 0 or args.block_s <= 0 or args.max_steps < 2 or args.build_copies < 0:
        raise SystemExit("--repeats >= 1, --warmup >= 0, --block-s > 0, --max-steps >= 2, --build-copies >= 0")
    device = wp.get_device(args.device)
    newton_mode, newton_ref, newton_status = find_newton(args)
    timing = {k: getattr(args, k) for k in ("repeats", "block_s", "max_steps", "warmup", "no_graph")}
    doc = {"schema": SCHEMA, "machine": machine_info(device),
           "config": {**timing, "worlds": worlds, "scenes": scenes, "solvers": solvers,
                      "build_copies": args.build_copies, "build_repeats": args.build_repeats,
                      "spacing_m": {s: WORLD_SCENES[s].spacing for s in scenes},
                      "per_world": {s: WORLD_SCENES[s].per_world() for s in scenes}},
           "newton": newton_status, "results": [], "builds": [], "comparisons": []}
    def newton(spec, key, failed):  # Newton's rows or builds, from this process or a --newton-python child
        if newton_mode == "inprocess":
            return newton_child(spec)[key]
        res, err = run_newton_child(newton_ref, spec)
        return res[key] if res else [dict(f, error=err) for f in failed]

    base = {"args": timing, "device": args.device, "cases": [], "worlds": worlds, "build_copies": 0,
            "build_repeats": args.build_repeats}
    for label, solver in [(s, v) for s in scenes for v in solvers]:
        doc["results"] += run_points("inertia", WORLD_SCENES[label], solver, worlds, args, device)
        if newton_mode is not None:
            spec = dict(base, cases=[[label, solver]],
                        offsets=[[label, n, WORLD_SCENES[label].offsets(n).tolist()] for n in worlds])
            doc["results"] += newton(spec, "rows", [{"scene": label, "solver": solver, "engine": "newton",
                                                     "num_worlds": n} for n in worlds])
    if args.build_copies:
        doc["builds"].append(time_robot_build("inertia", args.build_copies, args.build_repeats, device))
        if newton_mode is not None:
            doc["builds"] += newton(dict(base, build_copies=args.build_copies), "builds",
                                    [{"engine": "newton", "copies": args.build_copies}])
    if newton_mode is not None:
        doc["machine"]["newton"] = newton_status
    doc["comparisons"] = comparisons(doc["results"])
    return emit(doc, args.json, None if args.quiet else table(doc), indent=2)


if __name__ == "__main__":
    main()
