"""Sanity of a simulation over a long window: is what the benchmark times a result anyone would keep?

    python benchmarks/sanity.py --scene chain --solver semi_implicit --seconds 10      # inertia, with a time series
    python benchmarks/sanity.py --scene boxes --solver xpbd --engine newton --seconds 12
    python benchmarks/sanity.py --scene arm --engine mujoco --dt 0.002 --seconds 10

A fresh runner is stepped for ``seconds`` of simulated time (>= 10 s in the benchmarks; the timing
runs stay short, this pass is separate) by its fastest replay (a captured graph of two steps, or
MuJoCo's ``mj_step(nstep)``), and observed every ``sample_s`` (``bench_observe``: the same float64
arithmetic for every engine). The verdict, ``sane``, holds when every criterion below holds
(``CRITERIA``; ``failures`` names the ones that did not and when they first failed):

* ``finite``: every position and velocity finite at every sample (and no MuJoCo warning of an unstable
  simulation, which MuJoCo *resets* to its initial state and goes on from: ``engine_warning``);
* ``energy``: kinetic + gravitational energy never more than ``energy_gain_max`` (5 %) above its start
  (every scene only loses energy physically: contacts, friction, damping; elastic energy is not
  counted, so a compressed body reads low, never high);
* ``ground``: no particle or body centre of mass below ``ground_floor_m`` (-1 cm): nothing fell through;
* ``joints`` (maximal-coordinate engines, scenes with joints): every joint's anchors within
  ``joint_gap_max_m`` (5 mm, the bound of the chain tests) at every sample;
* ``rest`` (scenes that must come to rest: ``REST_EXPECTED``; windows of 5 s or more): the fastest
  point (|v| + |omega| x the radius of gyration) below ``rest_speed`` (5 cm/s) over the last
  ``rest_window_s`` (1 s) of the window, and never again above ``moving_again_speed`` (0.5 m/s) once
  settled (``settled_at_s``: the first time it stayed below ``rest_speed`` for ``settle_hold_s``,
  0.5 s; ``moving_again_at_s``: a pile that settled and then topples).

A run that goes non-finite or gains 100x its energy stops there (``aborted_at_s``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from bench_observe import energy, point_speeds  # noqa: E402
from machine import now  # noqa: E402
from timing import Stepper  # noqa: E402

CRITERIA = {
    "energy_gain_max": 0.05,  # of the start's kinetic + potential energy
    "ground_floor_m": -0.01,
    "joint_gap_max_m": 0.005,
    "rest_speed": 0.05,  # [m/s]
    "moving_again_speed": 0.5,  # [m/s]
    "rest_window_s": 1.0,
    "settle_hold_s": 0.5,  # settled: below rest_speed at every sample of this long
    "rest_min_window_s": 5.0,  # shorter windows (the smoke tests') do not judge rest
    "abort_energy_factor": 100.0,
}
# scenes whose motion must end at rest within the window (the chain and the arm swing: little damping)
# (the cloth hangs from its pinned edge and keeps swinging: 5.5 m/s after 10 s at 16x16 in both engines)
REST_EXPECTED = {"boxes": True, "granular": True, "soft": True, "cloth": False, "chain": False, "arm": False}
SERIES_EVERY_S = 0.1  # [s] spacing of the stored time series


def run_sanity(runner, seconds: float, sample_s: float = 0.02, series: bool = False, rest=None,
               stop_early: bool = False) -> dict:
    """Step ``runner`` (fresh, at t = 0) for ``seconds`` and judge it; see the module docstring.

    ``stop_early``: stop at the first sample where the energy, ground or joint criterion fails (the verdict
    cannot change any more; sim_rate.py's step search), not only on a blow-up."""
    dt = runner.dt
    per = max(2, 2 * round(sample_s / dt / 2))  # steps between samples: even, for the graph's step pairs
    samples = max(1, math.ceil(seconds / (per * dt)))
    st = Stepper(runner)
    t0 = now()
    st.prepare(0)  # one python step (t = dt), then the capture
    if st.fast_kind is None:
        mode = "python"
    else:
        mode = "graph" if st.fast_kind == "graph" else "native"
    obs = runner.observation()  # after the first step: t = dt
    e0 = energy(obs)
    t_series, e_series, v_series, z_series, g_series, n_moving = [], [], [], [], [], []
    finite_ok, aborted, unstable = True, None, None
    check = getattr(runner, "instability", None)  # MuJoCo's warnings (it resets an unstable simulation)
    crit = CRITERIA
    for k in range(samples):
        (st.fast if st.fast_kind else st.python)(per)
        obs = runner.observation()
        t = (1 + (k + 1) * per) * dt
        finite = all(np.isfinite(obs[key]).all() for key in ("x", "v", "w"))
        if check is not None and unstable is None:
            unstable = check()
            finite = finite and unstable is None
        speeds = point_speeds(obs) if finite else np.array([np.inf])
        e = energy(obs) if finite else math.inf
        gaps = obs.get("gaps")
        moving = obs["m"] > 0
        t_series.append(t)
        e_series.append(e)
        v_series.append(float(speeds.max()) if speeds.size else 0.0)
        z_series.append(float(obs["x"][moving, 2].min()) if finite and moving.any() else math.nan)
        g_series.append(float(gaps.max()) if gaps is not None and gaps.size else (0.0 if gaps is not None else None))
        n_moving.append(int((speeds > crit["moving_again_speed"]).sum()))
        if not finite or e > e0 + crit["abort_energy_factor"] * abs(e0):
            finite_ok = finite_ok and finite
            aborted = t
            break
        if stop_early and (e > e0 + crit["energy_gain_max"] * abs(e0) or z_series[-1] < crit["ground_floor_m"]
                           or (g_series[-1] or 0.0) > crit["joint_gap_max_m"]):
            break
    wall = now() - t0
    out = judge(runner.scene.name, dt, seconds, per, mode, e0, t_series, e_series, v_series, z_series, g_series,
                n_moving, finite_ok, aborted, wall, series, REST_EXPECTED.get(runner.scene.name, False)
                if rest is None else rest)
    if unstable is not None:
        out["failures"].insert(0, unstable)
        out["sane"] = False
    out["engine_warning"] = unstable
    return out


def _first(ts, flags):
    for t, f in zip(ts, flags):
        if f:
            return round(t, 4)
    return None


def judge(scene, dt, seconds, per, mode, e0, ts, es, vs, zs, gs, n_moving, finite_ok, aborted, wall, series,
          rest_expected) -> dict:
    crit = CRITERIA
    es_a, vs_a = np.array(es, dtype=np.float64), np.array(vs, dtype=np.float64)
    failures = []
    if not finite_ok:
        failures.append(f"non-finite at {aborted:.3f} s")
    gain = (float(np.nanmax(es_a)) - e0) / abs(e0) if len(es_a) and e0 else None
    e_fail = _first(ts, es_a > e0 + crit["energy_gain_max"] * abs(e0))
    if e_fail is not None:
        failures.append(f"energy {100 * gain:+.1f} % of the start's (first above +{100 * crit['energy_gain_max']:.0f} % "
                        f"at {e_fail:.2f} s)")
    zmin = float(np.nanmin(zs)) if len(zs) and not np.isnan(zs).all() else None
    z_fail = _first(ts, [z < crit["ground_floor_m"] for z in zs])
    if z_fail is not None:
        failures.append(f"below the ground: {1e3 * zmin:.1f} mm (first at {z_fail:.2f} s)")
    has_gaps = any(g is not None for g in gs)
    gap_max = gap_at = g_fail = None
    if has_gaps:
        garr = np.array([g if g is not None else np.nan for g in gs], dtype=np.float64)
        gap_max = float(np.nanmax(garr)) if not np.isnan(garr).all() else None
        gap_at = round(ts[int(np.nanargmax(garr))], 4) if gap_max is not None else None
        g_fail = _first(ts, garr > crit["joint_gap_max_m"])
        if g_fail is not None:
            failures.append(f"joint gap {1e3 * gap_max:.1f} mm at {gap_at:.2f} s (first above "
                            f"{1e3 * crit['joint_gap_max_m']:.0f} mm at {g_fail:.2f} s)")
    below = vs_a < crit["rest_speed"]
    hold = max(1, round(crit["settle_hold_s"] / (per * dt)))
    settled = _first(ts, [below[i:i + hold].all() and i + hold <= len(below) for i in range(len(below))])
    again = None
    if settled is not None:
        again = _first([t for t in ts if t > settled], [v > crit["moving_again_speed"] for t, v in zip(ts, vs_a)
                                                         if t > settled])
    tail = [v for t, v in zip(ts, vs_a) if t >= ts[-1] - crit["rest_window_s"] - 1e-9] if ts else []
    final_speed = float(max(tail)) if tail else None
    rest_judged = rest_expected and seconds >= crit["rest_min_window_s"]
    if rest_judged:
        if final_speed is None or not final_speed < crit["rest_speed"]:
            failures.append(f"not at rest: {final_speed:.3f} m/s over the last {crit['rest_window_s']:g} s")
        if again is not None:
            moved = max(n for t, n in zip(ts, n_moving) if t > settled)
            failures.append(f"at rest at {settled:.2f} s, moving again from {again:.2f} s (up to {moved} "
                            f"bodies/particles above {crit['moving_again_speed']} m/s)")
    if aborted is not None and finite_ok:
        failures.append(f"energy x{es_a[-1] / e0:.0f} at {aborted:.2f} s: stopped")
    out = {
        "sane": not failures, "failures": failures, "window_s": seconds, "simulated_s": round(ts[-1], 4) if ts else 0,
        "dt": dt, "steps_per_sample": per, "samples": len(ts), "mode": mode, "wall_s": round(wall, 2),
        "criteria": {**crit, "rest_expected": rest_expected}, "rest_judged": rest_judged, "aborted_at_s": aborted,
        "energy_start_J": e0, "energy_max_J": float(np.nanmax(es_a)) if len(es_a) else None,
        "energy_final_J": float(es_a[-1]) if len(es_a) else None, "energy_gain": gain,
        "energy_first_over_s": e_fail, "min_height_m": zmin, "max_speed_m_s": float(np.nanmax(vs_a)) if len(vs_a) else None,
        "final_max_speed_m_s": final_speed, "settled_at_s": settled, "moving_again_at_s": again,
        "max_joint_gap_m": gap_max, "max_joint_gap_at_s": gap_at, "joint_gap_first_over_s": g_fail,
    }
    if series:
        every = max(1, round(SERIES_EVERY_S / (per * dt)))
        idx = list(range(every - 1, len(ts), every))
        if ts and idx[-1:] != [len(ts) - 1]:
            idx.append(len(ts) - 1)
        out["series"] = {"t": [round(ts[i], 4) for i in idx], "energy_J": [es[i] for i in idx],
                         "max_speed_m_s": [vs[i] for i in idx], "min_height_m": [zs[i] for i in idx],
                         "max_joint_gap_m": [gs[i] for i in idx], "moving": [n_moving[i] for i in idx]}
    return out


def make_runner(engine: str, scene: str, size, solver: str, device="cpu", dt=None):
    """A fresh runner of any engine (``dt`` overrides the solver's step: the step search of sim_rate.py)."""
    from bench_scenes import SCENES, InertiaRunner

    sc = SCENES[scene]
    size = tuple(size) if size else sc.default_size
    if engine == "inertia":
        return InertiaRunner(sc, size, device, solver, dt=dt)
    if engine == "newton":
        from bench_newton import NewtonRunner

        return NewtonRunner(sc, size, device, solver, dt=dt)
    if engine == "mujoco":
        from bench_mujoco import MuJoCoRunner

        return MuJoCoRunner(sc, size, dt=dt)
    raise ValueError(f"engine {engine!r}: expected inertia, newton or mujoco")


def cell_sanity(spec: dict) -> dict:
    """The sanity of one cell from a spec {engine, scene, size, solver, seconds, dt?, series?} (also run as a child)."""
    r = make_runner(spec["engine"], spec["scene"], spec.get("size"), spec.get("solver", ""), spec.get("device", "cpu"),
                    spec.get("dt"))
    return run_sanity(r, spec["seconds"], spec.get("sample_s", 0.02), series=spec.get("series", False))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scene", required=False)
    p.add_argument("--size", default="", help="the scene's size (default: its default size)")
    p.add_argument("--solver", default="semi_implicit", help="a name in bench_scenes.SOLVERS (inertia, newton)")
    p.add_argument("--engine", default="inertia", help="inertia, newton or mujoco")
    p.add_argument("--seconds", type=float, default=10.0, help="simulated window [s]")
    p.add_argument("--dt", type=float, default=None, help="override the solver's step [s]")
    p.add_argument("--sample-s", type=float, default=0.02, help="simulated seconds between observations")
    p.add_argument("--json", default=None, help="write the result (with its time series) here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING
    wp.config.quiet = True
    wp.init()
    if args.child:  # run.py --sanity-jobs > 1: one cell per process, the result as the last line
        print(json.dumps(cell_sanity(json.loads(args.child))))
        return {}
    from bench_scenes import SCENES, parse_size

    if args.scene not in SCENES:
        raise SystemExit(f"--scene: choose from {', '.join(SCENES)}")
    size = parse_size(args.size, SCENES[args.scene].ndim) if args.size else None
    if args.engine == "mujoco":
        args.solver = "mujoco"  # MuJoCo's own (mj_step defaults)
    res = cell_sanity({"engine": args.engine, "scene": args.scene, "size": size, "solver": args.solver,
                       "seconds": args.seconds, "dt": args.dt, "sample_s": args.sample_s, "series": True})
    s = res["series"]
    print(f"{args.engine} {args.scene} {args.solver} dt={res['dt']:.6g} s, {res['simulated_s']} s simulated "
          f"in {res['wall_s']} s ({res['mode']})")
    print(f"{'t [s]':>7} {'energy [J]':>12} {'max speed':>10} {'min z [m]':>10} {'max gap [mm]':>12} {'moving':>6}")
    for i, t in enumerate(s["t"]):
        gap = s["max_joint_gap_m"][i]
        print(f"{t:7.2f} {s['energy_J'][i]:12.4g} {s['max_speed_m_s'][i]:10.4g} {s['min_height_m'][i]:10.4f} "
              f"{'-' if gap is None else format(1e3 * gap, '.2f'):>12} {s['moving'][i]:6d}")
    print("sane" if res["sane"] else "NOT SANE: " + "; ".join(res["failures"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
