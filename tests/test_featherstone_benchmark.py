"""Smoke test of benchmarks/featherstone.py: a tiny run (1 and 2 worlds, 4 steps) finishes and reports sane rows.

Runs the script in a subprocess (as a user would), reads the JSON it writes and checks: the schema and
machine block, one row per scene and world count, both engines' figures positive and finite, the
states finite, the degrees of freedom per world (Kuka 7; A1: 6 for the free base and 12 revolute
joints, in both engines), and world-steps/s = steps/s x worlds with the ratio inertia / MuJoCo.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys

import background
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "featherstone.py")


HAVE_REFERENCES = all(importlib.util.find_spec(m) is not None for m in ("mujoco", "pybullet_data"))
RUN = background.job("featherstone_benchmark", lambda out: [sys.executable, SCRIPT, "--tiny", "--json",
                                                            os.path.join(out, "tiny.json")], timeout=600, cwd=ROOT,
                     tests=() if not HAVE_REFERENCES else None, fixture="report" if HAVE_REFERENCES else None)


@pytest.fixture(scope="module")
def report():
    pytest.importorskip("mujoco")
    pytest.importorskip("pybullet_data")
    return RUN.json("tiny.json"), RUN.result().stdout


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_document(report):
    doc, stdout = report
    assert doc["schema"] == "inertia-featherstone-benchmark/1"
    assert {"cpu", "warp", "numpy"} <= set(doc["machine"])
    assert [(r["scene"], r["worlds"]) for r in doc["results"]] == [("kuka", 1), ("kuka", 2), ("a1", 1), ("a1", 2)]
    assert "inertia / MuJoCo" in stdout


@pytest.mark.parametrize("row", range(4))
def test_rows(report, row):
    r = report[0]["results"][row]
    ours, theirs = r["inertia"], r["mujoco"]
    dofs = {"kuka": 7, "a1": 18}[r["scene"]]
    assert ours["dofs_per_world"] == dofs and theirs["dofs_per_world"] == dofs
    assert ours["finite"] and theirs["finite"]
    for x in (ours["steps_per_s_python"], ours["steps_per_s_graph"], theirs["steps_per_s"], r["ratio"]):
        assert _positive(x)
    assert ours["world_steps_per_s"] == pytest.approx(ours["steps_per_s_graph"] * r["worlds"])
    assert theirs["world_steps_per_s"] == pytest.approx(theirs["steps_per_s"] * r["worlds"])
    assert r["ratio"] == pytest.approx(ours["world_steps_per_s"] / theirs["world_steps_per_s"])
