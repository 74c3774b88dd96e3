"""Smoke test of benchmarks/worlds.py: a tiny run (1 and 4 worlds, no Newton) must finish and report sane figures.

Runs the benchmark in a subprocess (as a user would), reads the JSON it writes and checks each row's
entity counts against num_worlds x the per-world counts worked out here by hand (the 8x8-cell cloth:
81 particles, 128 triangles, 176 bending edges; the box + 2-link pendulum: 3 bodies, 2 revolute
joints, 3 shapes; plus one shared ground plane), that the copies evolved alike (every world's
entities within 1 mm of world 0's, offsets removed), that the states are finite and above the
ground, that world-steps/s = steps/s x num_worlds and is positive, and that the build-time row
(replicate + finalize of 16 copies of the 20-body robot) is there with 16 x its counts.
"""

from __future__ import annotations

import math
import os
import sys

import background
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "worlds.py")

WORLDS = [1, 4]
SCENES = ["box_pendulum", "cloth"]
SOLVERS = ["semi_implicit", "xpbd"]
PER_WORLD = {
    "box_pendulum": {"particles": 0, "triangles": 0, "edges": 0, "bodies": 3, "joints": 2, "shapes": 3},
    "cloth": {"particles": 9 * 9, "triangles": 2 * 8 * 8, "edges": 8 * 9 + 9 * 8 + 8 * 8 - 2 * 16, "bodies": 0,
              "joints": 0, "shapes": 0},
}
# per world: a revolute joint has one coordinate and one dof
WORLD_COUNTS = {
    "box_pendulum": {"particles": 0, "bodies": 3, "joints": 2, "joint_coords": 2, "joint_dofs": 2},
    "cloth": {"particles": 81, "bodies": 0, "joints": 0, "joint_coords": 0, "joint_dofs": 0},
}
DT = {("box_pendulum", "semi_implicit"): 1.0e-3, ("box_pendulum", "xpbd"): 1.0 / 1200.0,
      ("cloth", "semi_implicit"): 1.0 / 2400.0, ("cloth", "xpbd"): 1.0 / 600.0}
# the legged robot: torso + 4 legs x 4 links + head + 2 tail links; shapes: torso box, 16 capsules, 4 feet,
# head, 2 tail capsules; joints: one per body (free, 16 revolute, fixed, 2 ball)
ROBOT = {"bodies": 20, "shapes": 24, "joints": 20}
COPIES = 16
CASES = [(s, v, n) for s in SCENES for v in SOLVERS for n in WORLDS]


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


RUN = background.job("worlds", lambda out: [
    sys.executable, SCRIPT, "--worlds", ",".join(map(str, WORLDS)), "--no-newton", "--repeats", "2", "--block-s",
    "0.01", "--max-steps", "4", "--warmup", "1", "--build-copies", str(COPIES), "--build-repeats", "1", "--json",
    os.path.join(out, "tiny.json")], timeout=600, cwd=ROOT, fixture="report")


@pytest.fixture(scope="module")
def report():
    return RUN.json("tiny.json"), RUN.result().stdout


def _row(doc, scene, solver, n):
    (row,) = [r for r in doc["results"] if (r["scene"], r["solver"], r["num_worlds"]) == (scene, solver, n)]
    return row


def test_document_shape(report):
    doc, stdout = report
    assert doc["schema"] == "inertia-worlds-benchmark/1"
    assert doc["newton"].startswith("skipped") and doc["comparisons"] == []
    assert [(r["scene"], r["solver"], r["num_worlds"]) for r in doc["results"]] == CASES
    assert all(r["engine"] == "inertia" for r in doc["results"])
    assert doc["config"]["per_world"] == PER_WORLD
    lines = stdout.split("\n{", 1)[0].splitlines()
    for scene, solver, n in CASES:
        assert sum(1 for ln in lines if ln.split()[:4] == [scene, solver, "inertia", str(n)]) == 1, (scene, solver, n)


@pytest.mark.parametrize("scene,solver,n", CASES)
def test_counts_are_num_worlds_times_one_world(report, scene, solver, n):
    doc, _ = report
    row = _row(doc, scene, solver, n)
    for key, per in PER_WORLD[scene].items():
        expected = n * per + (1 if key == "shapes" else 0)  # the ground plane, shared by every world
        assert row["counts"][key] == expected, (key, row["counts"])
    assert row["counts_match"] is True
    assert row["model_worlds"] == n
    assert row["world_counts"] == WORLD_COUNTS[scene]


@pytest.mark.parametrize("scene,solver,n", CASES)
def test_figures(report, scene, solver, n):
    doc, _ = report
    row = _row(doc, scene, solver, n)
    assert math.isclose(row["dt"], DT[(scene, solver)], rel_tol=1e-12)
    for mode in ("python", "graph"):
        fig = row[mode]
        assert "error" not in fig, fig
        assert len(fig["samples"]) == 2 and _positive(fig["median"])
        assert math.isclose(fig["world_steps_per_s"], fig["median"] * n, rel_tol=1e-12)
    assert row["finite"] is True
    assert row["final_min_height"] > 0.0  # nothing fell through the shared ground
    assert row["final_max_speed"] < 5.0  # a few steps from rest: nothing blew up
    # identical copies stay identical (float32 rounding of the 1-1.5 m offsets: ~1e-7 m)
    assert row["max_world_deviation_m"] is not None and row["max_world_deviation_m"] < 1.0e-3
    assert _positive(row["build_s"]) and _positive(row["probe_step_s"])
    assert row["steps_simulated"] > 2 * 2


def test_build_time_row(report):
    doc, stdout = report
    (b,) = doc["builds"]
    assert b["engine"] == "inertia" and b["copies"] == COPIES
    c = b["counts"]
    assert c["robot_bodies"] == ROBOT["bodies"] and c["worlds"] == COPIES
    assert (c["bodies"], c["joints"], c["shapes"]) == (COPIES * ROBOT["bodies"], COPIES * ROBOT["joints"],
                                                       COPIES * ROBOT["shapes"] + 1)
    assert _positive(b["replicate_s"]) and _positive(b["finalize_s"])
    assert math.isclose(b["total_s"], b["replicate_s"] + b["finalize_s"], rel_tol=1e-9)
    assert f"build: replicate + finalize of {COPIES} copies of a 20-body robot" in stdout
