"""Smoke test of benchmarks/run.py: a tiny run must finish and report sane figures.

Runs the benchmark in a subprocess (as a user would) for both registered solvers (semi-implicit and
XPBD), reads the JSON it writes and checks that every figure is finite and positive, that each
scene was built at the tiny size with the particle, element, body, joint and shape counts worked out
here by hand, and that each solver ran at the time step and settings it states (XPBD: 20 Jacobi
iterations for cloth and soft, 10 for granular, 8 for the rigid scenes; the semi-implicit solver's
rigid scenes at the 1 ms of their tests). The rigid scenes (a 2x2x1 box pile, a 4-link chain) must
keep every body above the ground, the pile's boxes at least resting on it. The method's fields are
checked for their shape, not their values: one rate per round and mode, the load of every timed block,
and the sanity verdict of a 0.25 s window (``--tiny``) in every row.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import background
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")

# tiny sizes: cloth 8x8 cells, granular 6x6x6 particles, soft 4x4x2 cells (5 tets per cell); boxes 2x2x1 (one
# body and one shape each, plus the ground: no joints), chain of 4 links (one body, capsule and revolute joint each)
EXPECTED = {
    "cloth": {"size": [8, 8], "particles": 9 * 9, "triangles": 2 * 8 * 8, "tets": 0, "bodies": 0, "joints": 0},
    "granular": {"size": [6, 6, 6], "particles": 6 * 6 * 6, "triangles": 0, "tets": 0, "bodies": 0, "joints": 0},
    "soft": {"size": [4, 4, 2], "particles": 5 * 5 * 3, "triangles": 0, "tets": 5 * 4 * 4 * 2, "bodies": 0,
             "joints": 0},
    "boxes": {"size": [2, 2, 1], "particles": 0, "triangles": 0, "tets": 0, "bodies": 4, "joints": 0, "shapes": 5},
    "chain": {"size": [4], "particles": 0, "triangles": 0, "tets": 0, "bodies": 4, "joints": 4, "shapes": 5},
}
RIGID = ("boxes", "chain")


SOLVERS = ["semi_implicit", "xpbd"]
# the step and solver settings each solver states per scene (bench_scenes.SOLVERS), written out by hand
DT = {"semi_implicit": {"*": 1.0 / 2400.0, "boxes": 1.0e-3, "chain": 1.0e-3},
      "xpbd": {"*": 1.0 / 600.0, "boxes": 1.0 / 1200.0}}
XPBD_KWARGS = {"cloth": {"iterations": 20, "relaxation": 1.5}, "granular": {"iterations": 10, "relaxation": 1.0},
               "soft": {"iterations": 20, "relaxation": 1.5},
               "boxes": {"iterations": 8, "relaxation": 1.0, "velocity_iterations": 0},
               "chain": {"iterations": 8, "relaxation": 1.0, "velocity_iterations": 0}}
# XPBD constraint kernels launched once per iteration in each scene (no springs in any scene)
XPBD_PER_ITERATION = {
    "cloth": ["solve_triangle_constraints_kernel", "solve_bending_constraints_kernel"],
    "granular": [],
    "soft": ["solve_tet_constraints_kernel"],
}
XPBD_ALWAYS = ["solve_shape_contacts_kernel", "solve_particle_contacts_kernel", "add_corrections_vec3f"]
# rigid scenes (no particles: no particle kernels): body contacts and corrections every iteration, joints where
# there are joints; no restitution pass (velocity_iterations=0, as Newton's twins: none of its kernels launch)
XPBD_RIGID_PER_ITERATION = {
    "boxes": ["solve_body_contacts_kernel", "apply_body_corrections_kernel"],
    "chain": ["solve_body_contacts_kernel", "solve_joints_kernel", "apply_body_corrections_kernel"],
}
XPBD_VELOCITY_PASS = ["solve_contact_velocities_kernel", "add_corrections_spatial_vectorf"]
XPBD_VELOCITY_PASS_ONCE = ["count_pushing_contacts_kernel", "prepare_contact_velocities_kernel"]
XPBD_RIGID_ONCE = ["body_frames_kernel"]  # the first iterate's; apply_body_corrections writes the later ones
# shape-shape collision: AABBs, sweep keys, running max once; the kernels that emit into a contact list three
# times: append, then count and select, which return at once unless the list overflowed, with one plan kernel
# per list in between (engine/collision/selection.py); once where the list's capacity holds every candidate the
# model can have (the 5 shapes of the rigid scenes have at most 10 pairs: their plane pairs and sweep run once)
RIGID_DETECTION = ["shape_aabb_kernel", "sweep_keys_kernel", "shared_running_max_kernel", "plane_pairs_kernel",
                   "sweep_kernel"]
RIGID_EMITTING = ["narrow_phase_kernel"]
# each list's emitting kernels (the shape pairs: plane pairs and the sweep)
LISTS = {"soft contacts": ["detect_particle_shape_kernel"], "particle pairs": ["detect_particle_pairs_kernel"],
         "shape pairs": ["plane_pairs_kernel", "sweep_kernel"], "shape contacts": ["narrow_phase_kernel"]}
EMITTING = [k for kernels in LISTS.values() for k in kernels]
# kernels built per set of shape types (inertia.collision.sdf): their names end in the set's tag ("_plane")
PER_SHAPE_TYPES = ("detect_particle_shape_kernel", "particle_shape_contact_kernel", "solve_shape_contacts_kernel")


def launches_by_kernel(row) -> dict:
    """A row's launches per kernel, a per-shape-type kernel counted under its general name."""
    out = {}
    for key, n in row["launches_by_kernel"].items():
        name = next((k for k in PER_SHAPE_TYPES if key.startswith(k + "_")), key)
        out[name] = out.get(name, 0) + n
    return out
DETECTION_PASSES = 3


def detection_launches(by: dict) -> tuple:
    """(launches of emitting and plan kernels, lists that ran all three passes), checking that every list's
    kernels ran once (it cannot overflow) or three times with one plan kernel."""
    total, selected = 0, 0
    for kernels in LISTS.values():
        counts = {by[k] for k in kernels if k in by}
        assert counts <= {1} or counts == {DETECTION_PASSES}, (kernels, by)
        total += sum(by.get(k, 0) for k in kernels)
        selected += counts == {DETECTION_PASSES}
    assert by.get("plan_selection_kernel", 0) == selected, by
    return total + selected, selected
CASES = [(scene, solver) for scene in EXPECTED for solver in SOLVERS]


def dt_of(solver, scene):
    return DT[solver].get(scene, DT[solver]["*"])


def _row(doc, scene, solver):
    (row,) = [r for r in doc["results"] if r["scene"] == scene and r["solver"] == solver]
    return row


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


TINY_RUN = background.job("run", lambda out: [
    sys.executable, RUN, "--tiny", "--no-newton", "--solvers", ",".join(SOLVERS), "--json",
    os.path.join(out, "tiny.json")], timeout=600, cwd=ROOT, fixture="report")


@pytest.fixture(scope="module")
def report():
    return TINY_RUN.json("tiny.json"), TINY_RUN.result().stdout


def test_document_shape(report):
    doc, stdout = report
    assert doc["schema"] == "inertia-benchmark/2"
    m = doc["machine"]
    assert m["warp"] and m["device"] == "cpu" and m["cores_logical"] >= 1
    assert doc["newton"].startswith("skipped")
    assert doc["comparisons"] == []
    assert doc["config"]["solvers"] == SOLVERS and doc["config"]["rounds"] == 2
    assert [(r["scene"], r["solver"]) for r in doc["results"]] == CASES
    assert all(r["engine"] == "inertia" for r in doc["results"])
    # the human table precedes the JSON on stdout, one row per scene and solver
    lines = stdout.split("\n{", 1)[0].splitlines()
    for name, solver in CASES:
        size = "x".join(map(str, EXPECTED[name]["size"]))
        assert sum(1 for line in lines if line.split()[:4] == [name, size, solver, "inertia"]) == 1, (name, solver)


@pytest.mark.parametrize("scene,solver", CASES)
def test_scene_counts(report, scene, solver):
    doc, _ = report
    row = _row(doc, scene, solver)
    exp = EXPECTED[scene]
    assert row["size"] == exp["size"]
    for key in ("particles", "triangles", "tets", "bodies", "joints") + (("shapes",) if scene in RIGID else ()):
        assert row["counts"][key] == exp[key], (scene, key, row["counts"])
    assert row["counts_match"] is True


@pytest.mark.parametrize("scene,solver", CASES)
def test_scene_figures(report, scene, solver):
    doc, _ = report
    row = _row(doc, scene, solver)
    n = EXPECTED[scene]["particles"]
    dt = dt_of(solver, scene)
    assert math.isclose(row["dt"], dt, rel_tol=1e-12)
    assert math.isclose(row["settings"]["dt"], dt, rel_tol=1e-12)
    assert row["settings"]["kwargs"] == (XPBD_KWARGS[scene] if solver == "xpbd" else {})
    for key in ("build_s", "first_step_s", "capture_s", "sim_time_s"):
        assert _positive(row[key]), (key, row[key])
    for mode in ("python", "graph"):
        fig = row[mode]
        assert "error" not in fig, fig
        assert _positive(fig["median"]) and fig["min"] <= fig["median"] <= fig["max"]
        assert len(fig["samples"]) == doc["config"]["rounds"] == row["rounds"]
        assert math.isclose(fig["particle_steps_per_s"], fig["median"] * n, rel_tol=1e-9)
        entities = n + EXPECTED[scene]["bodies"]
        assert math.isclose(fig["entity_steps_per_s"], fig["median"] * entities, rel_tol=1e-9)
        assert math.isclose(fig["sim_s_per_wall_s"], fig["median"] * dt, rel_tol=1e-9)
    # every scene runs at least: two detection kernels, force reset, two contact kernels, integration
    assert row["launches_per_step"] >= 6
    assert sum(row["launches_by_kernel"].values()) == row["launches_per_step"]
    assert row["graph_ops_per_step"] >= row["launches_per_step"]
    assert row["finite"] is True
    assert row["steps_simulated"] > doc["config"]["steps_per_block"]
    assert math.isclose(row["sim_time_s"], row["steps_simulated"] * dt, rel_tol=1e-9)
    assert row["cache"] in ("warm", "cold")
    # stable: nothing sank through the ground or blew up. Free fall from rest reaches < 1.5 m/s within these
    # steps; XPBD resolves the granular block's initial jitter overlaps in one step (overlap / dt): ~3 m/s
    assert 0.0 < row["final_max_speed"] < 5.0, row["final_max_speed"]
    assert row["final_min_height"] > 0.0


@pytest.mark.parametrize("scene,solver", CASES)
def test_every_row_has_its_load_and_its_sanity_verdict(report, scene, solver):
    """The machine load of each timed block (one per round and mode) and the sanity pass's verdict, in the row."""
    doc, stdout = report
    row = _row(doc, scene, solver)
    rounds = doc["config"]["rounds"]
    load = row["load"]
    assert load["cores"] >= 1 and len(load["blocks"]) == 2 * rounds  # python + graph in each round
    assert sorted(b["round"] for b in load["blocks"]) == sorted(2 * list(range(rounds)))
    for b in load["blocks"]:
        assert b["mode"] in ("python", "graph") and b["wall_s"] > 0
        # None where /proc/stat is unreadable or the block is too short to read (< 0.1 s: the tiny run's)
        assert b["others_cores"] is None or 0.0 <= b["others_cores"] <= load["cores"]
    assert row["steps_per_block"]["python"] >= 2 and row["steps_per_block"]["graph"] >= 2
    s = row["sanity"]
    assert s["window_s"] == doc["config"]["sanity_s"] == 0.25
    assert s["simulated_s"] >= 0.25 and s["dt"] == pytest.approx(dt_of(solver, scene), rel=1e-12)
    assert s["mode"] == "graph" and s["samples"] >= 1
    for key in ("energy_start_J", "energy_max_J", "energy_final_J", "energy_gain", "min_height_m", "max_speed_m_s",
                "final_max_speed_m_s"):
        assert isinstance(s[key], float) and math.isfinite(s[key]), (key, s[key])
    assert s["energy_start_J"] > 0.0  # everything starts above the ground (potential energy from z = 0)
    assert s["criteria"]["energy_gain_max"] == 0.05 and s["rest_judged"] is False  # 0.25 s: too short for rest
    # the chain's joint gaps are measured (maximal coordinates); the other scenes have no joints
    assert (s["max_joint_gap_m"] is not None) == (scene == "chain")
    # the tiny scenes are sane over their short window (each criterion is a physical bound; see sanity.py)
    assert s["sane"] is True and s["failures"] == [], s["failures"]
    if scene == "chain":
        assert s["max_joint_gap_m"] < 0.005


@pytest.mark.parametrize("scene,solver", [(s, v) for s in RIGID for v in SOLVERS])
def test_rigid_scenes_stay_above_the_ground(report, scene, solver):
    """Positions are the bodies' centres of mass: the boxes (half extent 5 cm, dropped 1 cm) land and rest on
    the ground with their centres near 5 cm (penalty contact sinks them a millimetre or so, never 1 cm); the
    chain hangs from 0.8 m above its own length and never comes within 0.5 m of it."""
    doc, _ = report
    row = _row(doc, scene, solver)
    assert row["counts"]["particles"] == 0
    if scene == "boxes":
        assert 0.04 < row["final_min_height"] < 0.061, row["final_min_height"]
        assert row["contacts"]["rigid_contacts"] > 0  # box-ground points, found within the 1 cm margin
    else:
        assert row["final_min_height"] > 0.5, row["final_min_height"]
        # hinged links of a 4-link chain released from horizontal: below sqrt(2 g 0.4 m) = 2.8 m/s at the tip's
        # centre; a separated joint would let a link fall freely (and the scene would not count as a chain)
        assert row["final_max_speed"] < 3.0, row["final_max_speed"]
    assert row["contacts"]["particle_shape"] == 0 and row["contacts"]["particle_pairs"] == 0


@pytest.mark.parametrize("scene", list(XPBD_PER_ITERATION))
def test_xpbd_runs_its_iterations(report, scene):
    """One collide + XPBD step launches every constraint kernel once per iteration (and nothing twice)."""
    doc, _ = report
    row = _row(doc, scene, "xpbd")
    k = XPBD_KWARGS[scene]["iterations"]
    by = launches_by_kernel(row)
    per_iteration = XPBD_PER_ITERATION[scene] + XPBD_ALWAYS
    for name in per_iteration:
        assert by.get(name) == k, (name, by)
    once = {n: c for n, c in by.items() if n not in per_iteration + EMITTING + ["plan_selection_kernel"]}
    assert set(once.values()) == {1}, once  # detection, forces, predict, velocity update
    detection, selected = detection_launches(by)
    assert selected >= 1  # the particle pairs (12 per particle) can overflow: selected when they do
    assert row["launches_per_step"] == k * len(per_iteration) + len(once) + detection
    assert "predict_particle_motion_kernel" in by  # the prediction is the symplectic Euler step (step-local)


@pytest.mark.parametrize("scene", RIGID)
def test_rigid_xpbd_runs_its_iterations_and_every_step_detects_shape_contacts(report, scene):
    """Launches are counted also where they are not recorded on a tape (the broad and narrow phase)."""
    doc, _ = report
    row = _row(doc, scene, "xpbd")
    k = XPBD_KWARGS[scene]["iterations"]
    by = launches_by_kernel(row)
    for name in XPBD_RIGID_PER_ITERATION[scene]:
        assert by.get(name) == k, (name, by)
    for name in XPBD_VELOCITY_PASS + XPBD_VELOCITY_PASS_ONCE:
        assert name not in by, (name, by)
    for name in XPBD_RIGID_ONCE:
        assert by.get(name) == 1, (name, by)
    for name in RIGID_DETECTION:
        assert by.get(name) == 1, (name, by)
        assert launches_by_kernel(_row(doc, scene, "semi_implicit")).get(name) == 1, name
    for name in RIGID_EMITTING:
        assert by.get(name) == DETECTION_PASSES, (name, by)
        assert launches_by_kernel(_row(doc, scene, "semi_implicit")).get(name) == DETECTION_PASSES, name
    assert detection_launches(by)[1] == 1  # the contact points (no bound on them)
    assert not any("particle" in name for name in by), by
    assert ("solve_joints_kernel" in by) == (scene == "chain")


@pytest.mark.parametrize("scene", list(EXPECTED))
def test_solver_comparison_per_step_and_per_simulated_second(report, scene):
    doc, stdout = report
    (c,) = [c for c in doc["solver_comparisons"] if c["scene"] == scene]
    assert (c["solver"], c["baseline"], c["engine"]) == ("xpbd", "semi_implicit", "inertia")
    ratio = dt_of("xpbd", scene) / dt_of("semi_implicit", scene)  # 4 (particle scenes), 5/6 (boxes), 5/3 (chain)
    assert math.isclose(c["dt_ratio"], ratio, rel_tol=1e-12)
    ours, base = _row(doc, scene, "xpbd"), _row(doc, scene, "semi_implicit")
    for mode in ("python", "graph"):
        steps = ours[mode]["median"] / base[mode]["median"]
        assert math.isclose(c[f"steps_ratio_{mode}"], steps, rel_tol=1e-9)
        assert math.isclose(c[f"sim_ratio_{mode}"], ratio * steps, rel_tol=1e-9)  # k x the step: k x the time
    assert f"{scene} inertia xpbd / semi_implicit" in stdout


def test_chart_plots_throughput_against_size(tmp_path):
    out = tmp_path / "chart.png"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "chart.py"), "--scenes", "cloth,chain", "--sizes",
         "cloth=4x4/6x6,chain=2/4", "--no-newton", "--repeats", "1", "--steps", "2", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "chart.json") as f:
        rows = json.load(f)["rows"]
    cloth = sorted(r["entities"] for r in rows if r["scene"] == "cloth")
    chain = sorted(r["entities"] for r in rows if r["scene"] == "chain")
    assert cloth == [25, 49] and chain == [2, 4]
    assert all(_positive(r["entity_steps_per_s"]) for r in rows)
    assert out.stat().st_size > 1000  # a PNG with the lines in it
