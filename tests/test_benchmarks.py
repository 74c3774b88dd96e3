"""Smoke test of benchmarks/run.py: a tiny run must finish and report sane figures.

Runs the benchmark in a subprocess (as a user would), reads the JSON it writes and checks that
every figure is finite and positive and that each scene was built at the tiny size with the
particle and element counts worked out here by hand.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")

# tiny sizes: cloth 8x8 cells, granular 6x6x6 particles, soft 4x4x2 cells (5 tets per cell)
EXPECTED = {
    "cloth": {"size": [8, 8], "particles": 9 * 9, "triangles": 2 * 8 * 8, "tets": 0},
    "granular": {"size": [6, 6, 6], "particles": 6 * 6 * 6, "triangles": 0, "tets": 0},
    "soft": {"size": [4, 4, 2], "particles": 5 * 5 * 3, "triangles": 0, "tets": 5 * 4 * 4 * 2},
}


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "tiny.json"
    proc = subprocess.run(
        [sys.executable, RUN, "--tiny", "--no-newton", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"benchmarks/run.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    with open(out) as f:
        doc = json.load(f)
    return doc, proc.stdout


def test_document_shape(report):
    doc, stdout = report
    assert doc["schema"] == "inertia-benchmark/1"
    m = doc["machine"]
    assert m["warp"] and m["device"] == "cpu" and m["cores_logical"] >= 1
    assert doc["newton"].startswith("skipped")
    assert doc["comparisons"] == []
    assert [r["scene"] for r in doc["results"]] == list(EXPECTED)
    assert all(r["engine"] == "inertia" for r in doc["results"])
    # the human table precedes the JSON on stdout, one row per scene
    for name in EXPECTED:
        assert any(line.startswith(name) for line in stdout.splitlines())


@pytest.mark.parametrize("scene", list(EXPECTED))
def test_scene_counts(report, scene):
    doc, _ = report
    (row,) = [r for r in doc["results"] if r["scene"] == scene]
    exp = EXPECTED[scene]
    assert row["size"] == exp["size"]
    for key in ("particles", "triangles", "tets"):
        assert row["counts"][key] == exp[key], (scene, key, row["counts"])
    assert row["counts_match"] is True


@pytest.mark.parametrize("scene", list(EXPECTED))
def test_scene_figures(report, scene):
    doc, _ = report
    (row,) = [r for r in doc["results"] if r["scene"] == scene]
    n = EXPECTED[scene]["particles"]
    for key in ("build_s", "first_step_s", "capture_s", "sim_time_s"):
        assert _positive(row[key]), (key, row[key])
    for mode in ("python", "graph"):
        fig = row[mode]
        assert "error" not in fig, fig
        assert _positive(fig["median"]) and fig["min"] <= fig["median"] <= fig["max"]
        assert len(fig["samples"]) == doc["config"]["repeats"]
        assert math.isclose(fig["particle_steps_per_s"], fig["median"] * n, rel_tol=1e-9)
    # every scene runs at least: two detection kernels, force reset, two contact kernels, integration
    assert row["launches_per_step"] >= 6
    assert sum(row["launches_by_kernel"].values()) == row["launches_per_step"]
    assert row["graph_ops_per_step"] >= row["launches_per_step"]
    assert row["finite"] is True
    assert row["steps_simulated"] > doc["config"]["steps_per_block"]
    assert row["cache"] in ("warm", "cold")
