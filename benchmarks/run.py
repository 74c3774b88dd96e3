"""Throughput benchmark of inertia's solvers, with Newton side by side when it is installed.

    python benchmarks/run.py                                  # every scene at its default size
    python benchmarks/run.py --scenes boxes,chain --sizes 8x8x4,64   # the rigid scenes, larger
    python benchmarks/run.py --scenes cloth --sizes 128x128 --repeats 7 --json out.json
    python benchmarks/run.py --tiny --no-newton               # smoke run (seconds)
    python benchmarks/run.py --cold                           # compile every kernel into an empty cache
    python benchmarks/run.py --solvers semi_implicit,xpbd --newton-python /work/venv-newton/bin/python

Prints a table and a JSON document (also written to ``--json``). See benchmarks/README.md for
what each figure means and how it is measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # also when run.py is imported rather than executed
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

SCHEMA = "inertia-benchmark/1"


# ------------------------------------------------------------------------------------ helpers
def _now():
    return time.perf_counter()


def _sync(device):
    wp.synchronize_device(device)


def _loadavg():
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _cache_entries(path) -> set:
    try:
        return set(os.listdir(path))
    except OSError:
        return set()


def _graph_ops(graph):
    """Device operations recorded in a captured graph (kernel launches, memsets, copies, hash-grid builds).

    On the CPU, Warp records a capture as an APIC operation list whose length it exposes; on CUDA
    this count is not available here, so None.
    """
    cap = getattr(graph, "_apic_capture", None)
    try:
        return int(cap.operation_count) if cap is not None else None
    except Exception:
        return None


def _count_launches(runner) -> tuple:
    """Kernel launches of one collide+step between two fresh states, by kernel name.

    Every call of ``wp.launch`` / ``wp.launch_tiled`` is counted while the step runs (the module
    attributes are wrapped for its duration), also those made with ``record_tape=False`` (inertia's
    broad and narrow phase), which a ``wp.Tape`` would not record. Non-kernel work (memsets, copies,
    sorts, hash-grid builds) is not counted: ``graph_ops_per_step`` has it.
    """
    a, b = runner.new_states()
    names = {}
    originals = {name: getattr(wp, name) for name in ("launch", "launch_tiled") if hasattr(wp, name)}

    def counting(original):
        def launch(*args, **kwargs):
            kernel = kwargs.get("kernel", args[0] if args else None)
            key = getattr(kernel, "key", str(kernel))
            names[key] = names.get(key, 0) + 1
            return original(*args, **kwargs)
        return launch

    try:
        for name, original in originals.items():
            setattr(wp, name, counting(original))
        runner.step_fresh(a, b)
    finally:
        for name, original in originals.items():
            setattr(wp, name, original)
    return sum(names.values()), names


def _rate(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": [round(s, 3) for s in samples]}


def measure(runner, steps: int, repeats: int, warmup: int, cache_dir: str | None, graph: bool = True,
            cache_before: set | None = None) -> dict:
    """Time one runner; returns the figures of one result row (see README.md, "Method").

    ``cache_before``: the kernel cache's entries before the runner was built, so that modules
    compiled while building (some engines launch kernels in ``finalize``) count as well.
    """
    dev = runner.device
    res = {"engine": runner.engine, "counts": runner.counts(), "dt": runner.dt, "notes": list(runner.notes)}
    load_start = _loadavg()

    before = cache_before if cache_before is not None else (_cache_entries(cache_dir) if cache_dir else set())
    _sync(dev)
    t = _now()
    runner.step()  # first step: loads (and compiles, when not cached) every module it launches
    _sync(dev)
    res["first_step_s"] = _now() - t
    new = _cache_entries(cache_dir) - before if cache_dir else set()
    res["modules_compiled"] = len(new)
    res["cache"] = "cold" if new else "warm"

    for _ in range(warmup):
        runner.step()
    _sync(dev)

    cap_graph, cap_err = None, None
    if graph:
        try:
            t = _now()
            with wp.ScopedCapture(device=dev) as cap:
                runner.step()
                runner.step()  # a pair of steps: the ping-pong states end where they started
            res["capture_s"] = _now() - t
            cap_graph = cap.graph
            for _ in range(max(1, warmup // 2)):
                wp.capture_launch(cap_graph)
            _sync(dev)
        except Exception as e:  # a solver that syncs with the host cannot be captured
            cap_err = f"{type(e).__name__}: {e}"
            cap_graph = None

    pairs = max(1, steps // 2)
    py_rates, graph_rates = [], []
    for _ in range(repeats):  # interleaved, so both modes see the same stretch of the simulation
        _sync(dev)
        t = _now()
        for _ in range(2 * pairs):
            runner.step()
        _sync(dev)
        py_rates.append(2 * pairs / (_now() - t))
        if cap_graph is not None:
            t = _now()
            for _ in range(pairs):
                wp.capture_launch(cap_graph)
            _sync(dev)
            graph_rates.append(2 * pairs / (_now() - t))

    n = res["counts"]["particles"]
    entities = n + res["counts"].get("bodies", 0)  # particles and rigid bodies: what the solver integrates
    res["python"] = _rate(py_rates)
    res["python"]["particle_steps_per_s"] = res["python"]["median"] * n
    res["python"]["entity_steps_per_s"] = res["python"]["median"] * entities
    res["python"]["sim_s_per_wall_s"] = res["python"]["median"] * runner.dt
    if graph_rates:
        res["graph"] = _rate(graph_rates)
        res["graph"]["particle_steps_per_s"] = res["graph"]["median"] * n
        res["graph"]["entity_steps_per_s"] = res["graph"]["median"] * entities
        res["graph"]["sim_s_per_wall_s"] = res["graph"]["median"] * runner.dt
        ops = _graph_ops(cap_graph)
        res["graph_ops_per_step"] = ops / 2 if ops is not None else None
    else:
        res["graph"] = {"error": cap_err or "graph capture disabled"}
        res["graph_ops_per_step"] = None
    del cap_graph

    # steps that advanced the simulation (capture only records; it does not step)
    graph_steps = (2 * max(1, warmup // 2) + repeats * 2 * pairs) if graph_rates else 0
    res["steps_simulated"] = 1 + warmup + repeats * 2 * pairs + graph_steps
    res["sim_time_s"] = res["steps_simulated"] * runner.dt

    q = runner.positions()  # particles, then the bodies' centres of mass
    res["finite"] = bool(np.isfinite(q).all())
    res["final_min_height"] = float(q[:, 2].min()) if len(q) else None
    qd = runner.velocities()
    res["final_max_speed"] = float(np.linalg.norm(qd, axis=1).max()) if len(qd) else None
    res["contacts"] = runner.contact_counts()
    res["launches_per_step"], res["launches_by_kernel"] = _count_launches(runner)
    # other load on the machine: the 1-minute load average when the row started and ended (None if unknown)
    res["loadavg_1min"] = {"start": load_start, "end": _loadavg(), "cores": os.cpu_count()}
    return res


# ------------------------------------------------------------------------------------ machine
def machine_info(device) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {
        "cpu": cpu, "cores_logical": os.cpu_count(), "cores_usable": usable, "platform": platform.platform(),
        "python": platform.python_version(), "numpy": np.__version__, "warp": wp.__version__,
        "device": str(device), "device_name": getattr(device, "name", str(device)),
        "kernel_cache_dir": wp.config.kernel_cache_dir,
    }
    try:
        import inertia

        info["inertia"] = inertia.__version__
    except Exception:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=HERE, capture_output=True, text=True,
                               timeout=5)
        if rev.returncode == 0:
            info["git"] = rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except Exception:
        pass
    return info


# ------------------------------------------------------------------------------------ output
def _fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


def table(doc) -> str:
    head = ("scene", "size", "solver", "engine", "particles", "bodies", "dt", "build s", "1st step s", "cache",
            "steps/s py", "steps/s graph", "sim s/s py", "sim s/s graph", "Mpart-steps/s", "Ment-steps/s", "launches",
            "graph ops")
    rows = [head]
    for r in doc["results"]:
        g = r["graph"]
        best = g.get("particle_steps_per_s", r["python"]["particle_steps_per_s"])
        best_entities = g.get("entity_steps_per_s", r["python"].get("entity_steps_per_s"))
        rows.append((
            r["scene"], "x".join(map(str, r["size"])), r["solver"], r["engine"], str(r["counts"]["particles"]),
            str(r["counts"].get("bodies", 0)), f"1/{round(1 / r['dt'])}", _fmt(r["build_s"], ".2f"),
            _fmt(r["first_step_s"], ".3f"), r["cache"],
            _fmt(r["python"]["median"], ".1f"), _fmt(g.get("median"), ".1f"),
            _fmt(r["python"].get("sim_s_per_wall_s"), ".4f"), _fmt(g.get("sim_s_per_wall_s"), ".4f"),
            _fmt(best / 1e6, ".2f"), _fmt(best_entities / 1e6 if best_entities is not None else None, ".3f"),
            str(r["launches_per_step"]), _fmt(r["graph_ops_per_step"], ".0f"),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i >= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append("sim s/s = simulated seconds per wall-clock second (steps/s x dt; 1.0 = real time); "
                 "M*-steps/s: graph mode (python without a graph); ent = particles + bodies")
    for c in doc["comparisons"]:
        if c.get("error"):
            lines.append(f"{c['scene']} {c['solver']}: newton failed: {c['error']}")
            continue
        lines.append(
            f"{c['scene']} {c['solver']}: inertia / newton throughput = {_fmt(c['ratio_python'], '.2f')} "
            f"(python loop), {_fmt(c['ratio_graph'], '.2f')} (graph); same dt, so per step = per simulated second"
        )
    for c in doc.get("solver_comparisons", []):
        lines.append(
            f"{c['scene']} {c['engine']} {c['solver']} / {c['baseline']}: steps/s x {_fmt(c['steps_ratio_python'], '.3f')} (py), "
            f"x {_fmt(c['steps_ratio_graph'], '.3f')} (graph); dt x {c['dt_ratio']:g}; simulated seconds per wall "
            f"second x {_fmt(c['sim_ratio_python'], '.3f')} (py), x {_fmt(c['sim_ratio_graph'], '.3f')} (graph)"
        )
    if doc.get("newton"):
        lines.append(f"newton: {doc['newton']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main
def _parse_sizes(scenes, text):
    from bench_scenes import SCENES, parse_size

    sizes = {}
    if not text:
        return sizes
    items = [s for s in text.split(",") if s]
    positional = [s for s in items if "=" not in s]
    if positional and len(positional) != len(scenes):
        raise SystemExit(f"--sizes: give one size per scene ({len(scenes)}) or name=size entries")
    for name, s in zip(scenes, positional):
        sizes[name] = parse_size(s, SCENES[name].ndim)
    for item in items:
        if "=" in item:
            name, s = item.split("=", 1)
            if name not in SCENES:
                raise SystemExit(f"--sizes: unknown scene {name!r}")
            sizes[name] = parse_size(s, SCENES[name].ndim)
    return sizes


def solver_comparisons(results, solvers) -> list:
    """Each solver against the first one listed, per scene and engine: per step and per simulated second."""
    out = []
    if len(solvers) < 2:
        return out
    base = solvers[0]
    for r in results:
        if r["solver"] == base:
            continue
        ref = [b for b in results if b["solver"] == base and b["scene"] == r["scene"] and b["engine"] == r["engine"]]
        if not ref:
            continue
        b = ref[0]

        def ratio(mode, key):
            x, y = r[mode].get(key), b[mode].get(key)
            return x / y if x and y else None

        out.append({"scene": r["scene"], "engine": r["engine"], "solver": r["solver"], "baseline": base,
                    "dt_ratio": r["dt"] / b["dt"],
                    "steps_ratio_python": ratio("python", "median"), "steps_ratio_graph": ratio("graph", "median"),
                    "sim_ratio_python": ratio("python", "sim_s_per_wall_s"),
                    "sim_ratio_graph": ratio("graph", "sim_s_per_wall_s")})
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenes", default="cloth,granular,soft,boxes,chain",
                   help="comma list of cloth, granular, soft, boxes, chain (default: all)")
    p.add_argument("--sizes", default="",
                   help="one size per scene (64x64,32x32x32,16x16x4,4x4x4,32) or name=size")
    p.add_argument("--solvers", default="semi_implicit",
                   help="comma list of names in bench_scenes.SOLVERS (semi_implicit, xpbd)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=None, help="timed blocks per mode (median reported)")
    p.add_argument("--steps", type=int, default=None, help="steps per timed block (rounded up to even)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps after the first step")
    p.add_argument("--json", default=None, help="also write the JSON document here")
    p.add_argument("--no-newton", action="store_true", help="skip Newton even if it is installed")
    p.add_argument("--newton-python", default=None,
                   help="an interpreter where `import newton` works, used when it does not work in this one: "
                        "the Newton rows then run there, one subprocess per scene and solver")
    p.add_argument("--newton-child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-graph", action="store_true", help="skip the graph-captured measurement")
    p.add_argument("--tiny", action="store_true", help="tiny sizes and few steps (smoke test)")
    p.add_argument("--cold", action="store_true", help="use an empty temporary kernel cache (measures compile)")
    p.add_argument("--quiet", action="store_true", help="print only the JSON document")
    return p.parse_args(argv)


def newton_child(spec: dict) -> dict:
    """One Newton row measured in this process (run.py --newton-child, under --newton-python)."""
    from bench_newton import NewtonRunner, import_newton
    from bench_scenes import SCENES

    newton_mod, err = import_newton()
    if newton_mod is None:
        raise SystemExit(f"newton does not import here: {err}")
    device = wp.get_device(spec["device"])
    cache_dir = wp.config.kernel_cache_dir
    cache_before = _cache_entries(cache_dir) if cache_dir else set()
    t = _now()
    runner = NewtonRunner(SCENES[spec["scene"]], spec["size"], device, spec["solver"])
    row = {"build_s": _now() - t, "newton_version": newton_mod.__version__, "python_executable": sys.executable}
    row.update(measure(runner, spec["steps"], spec["repeats"], spec["warmup"], cache_dir, graph=spec["graph"],
                       cache_before=cache_before))
    return row


def run_newton_child(python: str, spec: dict, timeout: float = 3600.0):
    """(row, None) or (None, error) from ``python run.py --newton-child SPEC``."""
    cmd = [python, os.path.abspath(__file__), "--newton-child", json.dumps(spec)]
    try:  # cwd: not the repository root, where benchmarks/ sits next to a stdlib-shadowing name
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
    from bench_newton import import_newton

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


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.newton_child:
        spec = json.loads(args.newton_child)
        if spec.get("cache_dir"):  # --cold: the parent's empty cache for Newton's modules
            wp.config.kernel_cache_dir = spec["cache_dir"]
        wp.config.log_level = wp.LOG_WARNING
        wp.init()
        row = newton_child(spec)
        print(json.dumps(row))
        return row
    tmp_cache = None
    if args.cold:
        tmp_cache = tempfile.mkdtemp(prefix="inertia-bench-cache-")
        wp.config.kernel_cache_dir = tmp_cache
    wp.config.log_level = wp.LOG_WARNING
    wp.init()

    from bench_scenes import SCENES, SOLVERS, InertiaRunner

    scenes = [s for s in args.scenes.split(",") if s]
    for s in scenes:
        if s not in SCENES:
            raise SystemExit(f"unknown scene {s!r}; choose from {', '.join(SCENES)}")
    solvers = [s for s in args.solvers.split(",") if s]
    for s in solvers:
        if s not in SOLVERS:
            raise SystemExit(f"unknown solver {s!r}; choose from {', '.join(SOLVERS)}")
    sizes = _parse_sizes(scenes, args.sizes)
    steps = args.steps if args.steps is not None else (10 if args.tiny else 60)
    repeats = args.repeats if args.repeats is not None else (2 if args.tiny else 5)
    warmup = args.warmup if args.warmup is not None else (2 if args.tiny else 10)
    if steps < 1 or repeats < 1 or warmup < 0:
        raise SystemExit("--steps and --repeats must be >= 1, --warmup >= 0")
    device = wp.get_device(args.device)
    cache_dir = wp.config.kernel_cache_dir

    newton_mode, newton_mod, newton_status = find_newton(args)
    if newton_mode is not None:
        from bench_newton import NEWTON_SOLVERS, NewtonRunner

    doc = {
        "schema": SCHEMA,
        "machine": machine_info(device),
        "config": {"steps_per_block": 2 * max(1, steps // 2), "repeats": repeats, "warmup": warmup,
                   "cold_cache": bool(args.cold), "tiny": bool(args.tiny), "solvers": solvers},
        "newton": newton_status,
        "results": [],
        "comparisons": [],
    }
    if newton_mode == "inprocess":
        doc["machine"]["newton"] = newton_mod.__version__
    elif newton_mode == "subprocess":
        doc["machine"]["newton"] = newton_status.split()[1]
        doc["machine"]["newton_python"] = newton_mod

    for name in scenes:
        scene = SCENES[name]
        size = sizes.get(name, scene.tiny_size if args.tiny else scene.default_size)
        for solver in solvers:
            engines = [("inertia", InertiaRunner)]
            if newton_mode is not None and solver in NEWTON_SOLVERS:
                engines.append(("newton", NewtonRunner))
            rows = {}
            for engine, cls in engines:
                if engine == "newton" and newton_mode == "subprocess":
                    spec = {"scene": name, "size": list(size), "solver": solver, "device": args.device,
                            "cache_dir": os.path.join(tmp_cache, "newton") if tmp_cache else None,
                            "steps": steps, "repeats": repeats, "warmup": warmup, "graph": not args.no_graph}
                    res, err = run_newton_child(newton_mod, spec)
                    if res is None:
                        doc["comparisons"].append({"scene": name, "solver": solver, "error": err,
                                                   "ratio_python": None, "ratio_graph": None})
                        continue
                    row = {"scene": name, "size": list(size), "solver": solver, "build_s": res.pop("build_s"),
                           "settings": SOLVERS[solver].settings(name), **res}
                    doc["results"].append(row)
                    rows[engine] = row
                    continue
                cache_before = _cache_entries(cache_dir) if cache_dir else set()
                t = _now()
                try:
                    runner = cls(scene, size, device, solver)
                except Exception as e:
                    if engine == "inertia":
                        raise
                    doc["comparisons"].append({"scene": name, "solver": solver, "error": f"{type(e).__name__}: {e}",
                                               "ratio_python": None, "ratio_graph": None})
                    continue
                build_s = _now() - t
                row = {"scene": name, "size": list(size), "solver": solver, "build_s": build_s,
                       "settings": SOLVERS[solver].settings(name)}
                row.update(measure(runner, steps, repeats, warmup, cache_dir, graph=not args.no_graph,
                                   cache_before=cache_before))
                if engine == "inertia":
                    expected = scene.expected_counts(size)
                    row["expected_counts"] = expected
                    row["counts_match"] = all(row["counts"][k] == v for k, v in expected.items())
                doc["results"].append(row)
                rows[engine] = row
                del runner
            if "inertia" in rows and "newton" in rows:
                ours, theirs = rows["inertia"], rows["newton"]

                def ratio(mode):
                    a, b = ours[mode].get("median"), theirs[mode].get("median")
                    return a / b if a and b else None

                doc["comparisons"].append({
                    "scene": name, "solver": solver, "ratio_python": ratio("python"), "ratio_graph": ratio("graph"),
                    "counts": {"inertia": ours["counts"], "newton": theirs["counts"]},
                    "notes": theirs["notes"],
                })

    doc["solver_comparisons"] = solver_comparisons(doc["results"], solvers)
    if tmp_cache:
        shutil.rmtree(tmp_cache, ignore_errors=True)
    text = json.dumps(doc, indent=2)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    if not args.quiet:
        print(table(doc))
        print()
    print(text)
    return doc


if __name__ == "__main__":
    main()
