"""FeatherstoneSolver throughput next to MuJoCo: a 7-DoF arm and a quadruped, 1 / 64 / 1,024 worlds.

    python benchmarks/featherstone.py                             # kuka and a1, 1, 64 and 1024 worlds
    python benchmarks/featherstone.py --scenes a1 --worlds 1,64 --json fs.json
    python benchmarks/featherstone.py --tiny                      # smoke run (1 and 2 worlds, a few steps)

Scenes (the robot files of pybullet_data, loaded by both engines from the same URDF):

- ``kuka``: the Kuka iiwa (``kuka_iiwa/model.urdf``, fixed base) on PD drives (kp 100 N m/rad, kd 5
  N m s/rad) swinging from a bent pose to a target pose; no contact (MuJoCo: contacts disabled).
- ``a1``: the Unitree A1 (``a1/a1.urdf``, free base, 1 g dummy links) dropped 4 cm onto a ground plane,
  standing on PD drives (kp 100, kd 2); foot contacts (robot self-collision off in both engines).

Both at dt 1 ms. inertia: ``FeatherstoneSolver`` with its defaults (semi-implicit Euler, implicit drives,
mass-independent contact), ``collide`` + ``step`` per step, worlds made with ``ModelBuilder.replicate``;
timed as a Python loop and as the replay of a graph captured once (``wp.ScopedCapture``; the same kernels,
bitwise). MuJoCo: ``mj_step`` with ``implicitfast`` (drives as ``position`` actuators with ``kv``), default
contact; one world as a Python loop of ``mj_step``, many worlds with ``mujoco.rollout`` (its C++ thread
pool, ``--threads`` threads, default every usable core). The headline figure is world-steps/s (steps/s x
worlds) and the ratio inertia / MuJoCo. That both engines simulate the same motion is checked by the tests
(tests/test_featherstone.py: the A1's base height after 2 s within 5 mm of MuJoCo's; the passive Kuka against
MuJoCo's RK4), not here.

Prints a table and one JSON document (schema ``inertia-featherstone-benchmark/1``, also written to ``--json``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import warp as wp  # noqa: E402

from machine import fmt as _fmt, loadavg as _loadavg, machine_info  # noqa: E402
from report import emit  # noqa: E402

SCHEMA = "inertia-featherstone-benchmark/1"
DT = 1e-3
KUKA_Q0 = np.array([0.4, 0.8, -0.3, -1.0, 0.5, 0.7, 0.2])
KUKA_TARGET = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0])
A1_STAND = {"hip": 0.0, "upper": 0.9, "lower": -1.8}
A1_Z0 = 0.32


def data_path(name: str) -> str:
    import pybullet_data

    return os.path.join(pybullet_data.getDataPath(), name)


# ------------------------------------------------------------------------------------ inertia
def kuka_scene():
    """The Kuka as in tests/test_featherstone_models.py (built from the URDF's numbers), drives on."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    from test_featherstone_models import kuka_builder

    b = kuka_builder()
    for d in range(7):
        b.joint_target_ke[d], b.joint_target_kd[d] = 100.0, 5.0
    return b


def a1_scene():
    import inertia

    b = inertia.ModelBuilder()
    first = len(b.shape_type)
    b.add_urdf(data_path("a1/a1.urdf"), xform=((0.0, 0.0, A1_Z0), (0.0, 0.0, 0.0, 1.0)), floating=True)
    for s in range(first, len(b.shape_type)):  # no self-collision (MuJoCo: contype / conaffinity)
        b.shape_collision_group[s], b.shape_collision_mask[s] = 2, 1
    for j, t in enumerate(b.joint_type):
        if t == 1:  # revolute
            d = sum(1 if tt in (0, 1) else 3 if tt == 2 else 6 if tt == 4 else 0 for tt in b.joint_type[:j])
            b.joint_target_ke[d], b.joint_target_kd[d] = 100.0, 2.0
    return b


def build_inertia(scene: str, worlds: int):
    import inertia

    one = kuka_scene() if scene == "kuka" else a1_scene()
    b = inertia.ModelBuilder()
    if scene == "a1":
        b.add_ground_plane()
    t0 = time.perf_counter()
    b.replicate(one, worlds, spacing=2.0)
    model = b.finalize()
    build_s = time.perf_counter() - t0
    solver = inertia.FeatherstoneSolver(model)
    control = model.control()
    state = model.state()
    q = state.joint_q.numpy().reshape(worlds, -1)
    target = np.zeros((worlds, model.joint_dof_count // worlds), np.float32)
    if scene == "kuka":
        q[:] = KUKA_Q0
        target[:] = KUKA_TARGET
    else:
        types, qs, qds = (a.numpy()[: model.joint_count // worlds] for a in
                          (model.joint_type, model.joint_q_start, model.joint_qd_start))
        for j, label in enumerate(model.joint_label[: model.joint_count // worlds]):
            if types[j] == 1:
                q[:, qs[j]] = target[:, qds[j]] = A1_STAND[label.split("_")[1]]
    state.joint_q.assign(q.reshape(-1))
    solver.sync_bodies(state)
    control.joint_target_pos.assign(target.reshape(-1))
    contacts = model.contacts() if scene == "a1" else None
    return model, solver, control, contacts, state, build_s


def time_inertia(scene: str, worlds: int, steps: int, repeats: int) -> dict:
    model, solver, control, contacts, a, build_s = build_inertia(scene, worlds)
    b = model.state()

    def pair(check=True):
        for x, y in ((a, b), (b, a)):
            if contacts is not None:
                model.collide(x, contacts, check_overflow=check)
            solver.step(x, y, control, contacts, DT)

    t0 = time.perf_counter()
    pair()  # modules loaded, step data allocated
    wp.synchronize_device(model.device)
    first_s = time.perf_counter() - t0
    loop = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(max(1, steps // 2)):
            pair(check=False)
        wp.synchronize_device(model.device)
        loop.append(2 * max(1, steps // 2) / (time.perf_counter() - t0))
    with wp.ScopedCapture(device=model.device) as cap:
        pair(check=False)
    graph = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(max(1, steps // 2)):
            wp.capture_launch(cap.graph)
        wp.synchronize_device(model.device)
        graph.append(2 * max(1, steps // 2) / (time.perf_counter() - t0))
    q = a.joint_q.numpy()
    return {"engine": "inertia", "worlds": worlds, "dofs_per_world": model.joint_dof_count // worlds,
            "bodies_per_world": model.body_count // worlds, "build_s": round(build_s, 3),
            "first_step_s": round(first_s, 3), "finite": bool(np.isfinite(q).all()),
            "steps_per_s_python": statistics.median(loop), "steps_per_s_graph": statistics.median(graph),
            "samples_graph": [round(x, 2) for x in graph]}


# ------------------------------------------------------------------------------------ MuJoCo
def mujoco_scene(scene: str):
    import mujoco

    spec = mujoco.MjSpec.from_file(data_path("kuka_iiwa/model.urdf" if scene == "kuka" else "a1/a1.urdf"))
    if scene == "a1":
        trunk = spec.body("trunk")
        trunk.add_freejoint()
        trunk.pos = [0.0, 0.0, A1_Z0]
        for g in spec.geoms:
            g.contype, g.conaffinity = 1, 2
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], contype=2, conaffinity=1)
    kp, kd = (100.0, 5.0) if scene == "kuka" else (100.0, 2.0)
    names = []
    for j in spec.joints:
        if j.type == mujoco.mjtJoint.mjJNT_HINGE:
            spec.add_actuator(name=j.name, target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT).set_to_position(kp=kp,
                                                                                                        kv=kd)
            names.append(j.name)
    m = spec.compile()
    m.opt.timestep, m.opt.integrator = DT, mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    if scene == "kuka":
        m.dof_damping[:] = 0.0
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(m)
    if scene == "kuka":
        d.qpos[:] = KUKA_Q0
        ctrl = KUKA_TARGET.copy()
    else:
        ctrl = np.array([A1_STAND[n.split("_")[1]] for n in names])
        for k, n in enumerate(names):
            d.qpos[m.jnt_qposadr[m.joint(n).id]] = ctrl[k]
    d.ctrl[:] = ctrl
    mujoco.mj_forward(m, d)
    return m, d, ctrl


def time_mujoco(scene: str, worlds: int, steps: int, repeats: int, threads: int) -> dict:
    import mujoco

    m, d, ctrl = mujoco_scene(scene)
    out = {"engine": "mujoco", "worlds": worlds, "dofs_per_world": int(m.nv), "bodies_per_world": int(m.nbody - 1)}
    if worlds == 1:
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                mujoco.mj_step(m, d)
            rates.append(steps / (time.perf_counter() - t0))
        out.update(method="mj_step loop", steps_per_s=statistics.median(rates), finite=bool(np.isfinite(d.qpos).all()))
        return out
    from mujoco import rollout

    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, state0, spec)
    initial = np.tile(state0, (worlds, 1))
    control = np.tile(ctrl, (worlds, steps, 1))
    datas = [mujoco.MjData(m) for _ in range(threads)]
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        states, _ = rollout.rollout(m, datas, initial, control, nstep=steps)
        rates.append(steps / (time.perf_counter() - t0))
    out.update(method=f"mujoco.rollout, {threads} threads", steps_per_s=statistics.median(rates),
               finite=bool(np.isfinite(states[:, -1]).all()))
    return out


# ------------------------------------------------------------------------------------ report
def table(doc) -> str:
    head = ("scene", "worlds", "dofs", "inertia steps/s (py)", "inertia steps/s (graph)", "inertia world-steps/s",
            "MuJoCo steps/s", "MuJoCo world-steps/s", "MuJoCo method", "inertia / MuJoCo")
    rows = [head]
    for r in doc["results"]:
        i, m = r["inertia"], r["mujoco"]
        rows.append((r["scene"], str(r["worlds"]), str(i["dofs_per_world"]), _fmt(i["steps_per_s_python"], ".1f"),
                     _fmt(i["steps_per_s_graph"], ".1f"), _fmt(i["world_steps_per_s"], ".0f"),
                     _fmt(m.get("steps_per_s"), ".1f"), _fmt(m.get("world_steps_per_s"), ".0f"),
                     m.get("method", m.get("skipped", "-")), _fmt(r.get("ratio"), ".3f")))
    widths = [max(len(row[k]) for row in rows) for k in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenes", default="kuka,a1")
    p.add_argument("--worlds", default="1,64,1024")
    p.add_argument("--steps", type=int, default=200, help="steps per timed block")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="MuJoCo rollout threads (default: usable cores)")
    p.add_argument("--tiny", action="store_true", help="smoke run: 1 and 2 worlds, 4 steps, 1 repeat")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.tiny:
        args.worlds, args.steps, args.repeats = "1,2", 4, 1
    wp.config.quiet = True
    wp.init()
    scenes = [s for s in args.scenes.split(",") if s]
    for s in scenes:
        if s not in ("kuka", "a1"):
            raise SystemExit(f"unknown scene {s!r}: choose from kuka, a1")
    worlds = [int(w) for w in args.worlds.split(",") if w]
    try:
        threads = args.threads or len(os.sched_getaffinity(0))
    except AttributeError:
        threads = args.threads or os.cpu_count()
    results = []
    for scene in scenes:
        for w in worlds:
            ours = time_inertia(scene, w, args.steps, args.repeats)
            ours["world_steps_per_s"] = ours["steps_per_s_graph"] * w
            try:
                theirs = time_mujoco(scene, w, args.steps, args.repeats, threads)
                theirs["world_steps_per_s"] = theirs["steps_per_s"] * w
                ratio = ours["world_steps_per_s"] / theirs["world_steps_per_s"]
            except ImportError as e:
                theirs, ratio = {"skipped": f"mujoco not importable: {e}"}, None
            results.append({"scene": scene, "worlds": w, "dt": DT, "inertia": ours, "mujoco": theirs, "ratio": ratio})
            print(f"[featherstone] {scene} x{w}: inertia {ours['world_steps_per_s']:.0f} world-steps/s, MuJoCo "
                  f"{theirs.get('world_steps_per_s', float('nan')):.0f}", flush=True)
    doc = {"schema": SCHEMA, "machine": machine_info(wp.get_device()), "loadavg": _loadavg(), "steps": args.steps,
           "repeats": args.repeats, "threads": threads, "results": results}
    print(table(doc))
    return emit(doc, args.json)


if __name__ == "__main__":
    main()
