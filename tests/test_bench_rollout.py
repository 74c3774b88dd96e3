"""Smoke test of benchmarks/rollout.py: a tiny run must finish and report sane, consistent figures.

Runs the benchmark in a subprocess (as a user would) at --tiny size: a 4x4-cell cloth (5 x 5 = 25
particles, 2 x 16 = 32 triangles, 40 interior edges), 2 substeps per frame, section 1 at T = 40
steps (20 frames), section 2 at T = 10 and 40. Checks that every figure is finite and positive,
that checkpointing is estimated to need less memory than one tape, and that the gradients are the
same with and without checkpointing (the CPU backward pass is bitwise reproducible for every k).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks", "rollout.py")

# the tiny configuration, worked out by hand
CELLS = 4
PARTICLES = (CELLS + 1) ** 2  # 25
TRIANGLES = 2 * CELLS * CELLS  # 32
EDGES = (2 * CELLS * (CELLS + 1) + CELLS * CELLS) - 4 * CELLS  # all edges minus the boundary: 56 - 16 = 40
SUBSTEPS = 2
RATIO_STEPS, RATIO_FRAMES = 40, 20
MEMORY_STEPS = [10, 40]
RATIO_KS = [1, 4, 20]  # k = 1, round(sqrt(20)) = 4, 20 frames = one tape (the default k is one of these)


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_rollout") / "tiny.json"
    proc = subprocess.run([sys.executable, BENCH, "--tiny", "--json", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"benchmarks/rollout.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    with open(out) as f:
        doc = json.load(f)
    return doc, proc.stdout


def test_document_and_counts(report):
    doc, stdout = report
    assert doc["schema"] == "inertia-rollout-benchmark/1"
    assert doc["machine"]["warp"] and doc["machine"]["device"] == "cpu"
    c = doc["config"]
    assert c["tiny"] is True and c["size"] == CELLS and c["substeps"] == SUBSTEPS and c["solver"] == "semi_implicit"
    assert c["ratio_steps"] == RATIO_STEPS and c["memory_steps"] == MEMORY_STEPS
    assert doc["counts"]["particles"] == PARTICLES
    assert doc["counts"]["triangles"] == TRIANGLES
    assert doc["counts"]["edges"] == EDGES
    assert doc["counts"]["tets"] == 0 and doc["counts"]["shapes"] == 1  # the ground plane
    assert doc["counts_match"] is True
    # the human table comes first, then the JSON document
    head, _, tail = stdout.partition("\n{")
    assert "1. backward / forward" in head and "2. peak memory" in head and "3. newton:" in head
    assert json.loads("{" + tail) == doc


def test_newton_section(report):
    doc, stdout = report
    if doc["newton"].startswith("skipped"):  # the usual case: newton is not installed in this environment
        assert doc["newton_results"] == []
        assert "3. newton: skipped" in stdout
    else:
        assert [r["steps"] for r in doc["newton_results"]] == MEMORY_STEPS
        for r in doc["newton_results"]:
            assert r["status"] == "ok", r
            assert _positive(r["ratio"]) and r["counts"]["particles"] == PARTICLES


def test_ratio_figures(report):
    doc, _ = report
    ra = doc["ratio"]
    assert (ra["steps"], ra["frames"], ra["substeps"]) == (RATIO_STEPS, RATIO_FRAMES, SUBSTEPS)
    ks = [r["checkpoint_every"] for r in ra["configs"]]
    assert ks == RATIO_KS
    assert ra["default_k"] in ks
    for r in ra["configs"]:
        k = r["checkpoint_every"]
        assert r["segments"] == -(-RATIO_FRAMES // k)
        for key in ("forward_s", "backward_s"):
            fig = r[key]
            assert _positive(fig["median"]) and fig["min"] <= fig["median"] <= fig["max"], (k, key, fig)
            assert len(fig["samples"]) == doc["config"]["repeats"]
        assert math.isclose(r["forward_per_step_ms"], 1e3 * r["forward_s"]["median"] / RATIO_STEPS, rel_tol=1e-9)
        assert math.isclose(r["backward_per_step_ms"], 1e3 * r["backward_s"]["median"] / RATIO_STEPS, rel_tol=1e-9)
        assert _positive(r["ratio"]) and _positive(r["ratio_of_medians"])
        assert r["finite"] is True and r["grad"]["finite"] is True
        assert _positive(r["memory_estimate"]["total"])
    # the cloth reaches the ground within T = 40 steps (contact is part of what is differentiated): its
    # lowest particle is closer to the ground than its radius, yet held above where free fall would be
    t = RATIO_STEPS / 2400.0
    free_fall = 0.06 - 2.0 * t - 0.5 * 9.81 * t * t  # 2.5 cm
    for r in ra["configs"]:
        assert free_fall + 0.005 < r["min_height"] < 0.04, r["min_height"]


def test_gradients_agree_for_every_k(report):
    doc, _ = report
    configs = doc["ratio"]["configs"]
    ref = configs[0]["grad"]
    assert _positive(ref["q0_norm"]) and _positive(ref["qd0_norm"])
    for r in configs:
        assert r["grad_repeatable"] is True, r["checkpoint_every"]
        assert r["grad"]["q0_norm"] == ref["q0_norm"], (r["checkpoint_every"], r["grad"], ref)
        assert r["grad"]["qd0_norm"] == ref["qd0_norm"], (r["checkpoint_every"], r["grad"], ref)
        assert r["grad"]["sha256_16"] == ref["sha256_16"], (r["checkpoint_every"], r["grad"], ref)
    # section 2 runs each configuration in a fresh process: the same gradients, with or without checkpoints
    for steps in MEMORY_STEPS:
        rows = [m for m in doc["memory"] if m["steps"] == steps]
        assert sorted(m["mode"] for m in rows) == ["checkpointed", "none"]
        assert rows[0]["grad"]["sha256_16"] == rows[1]["grad"]["sha256_16"], steps
        assert rows[0]["grad"]["qd0_norm"] == rows[1]["grad"]["qd0_norm"], steps
    (m40,) = [m for m in doc["memory"] if m["steps"] == RATIO_STEPS and m["mode"] == "none"]
    assert m40["grad"]["sha256_16"] == ref["sha256_16"]  # and the same as section 1's at that horizon
    (m10,) = [m for m in doc["memory"] if m["steps"] == 10 and m["mode"] == "none"]
    assert m10["grad"]["qd0_norm"] != ref["qd0_norm"]  # a different horizon gives a different gradient


def test_memory_figures(report):
    doc, _ = report
    rows = doc["memory"]
    assert [(m["steps"], m["mode"]) for m in rows] == [(t, mode) for t in MEMORY_STEPS
                                                       for mode in ("checkpointed", "none")]
    for m in rows:
        assert m["status"] == "ok", m
        frames = m["steps"] // SUBSTEPS
        assert m["frames"] == frames and m["substeps"] == SUBSTEPS
        if m["mode"] == "none":
            assert m["checkpoint_every"] == frames and m["segments"] == 1
        else:
            assert 1 <= m["checkpoint_every"] < frames
            assert m["segments"] == -(-frames // m["checkpoint_every"])
        assert m["memory_estimate_at_build"] == m["estimate"]  # the child built the same rollout
        # and its backward pass sized the per-step contact lists down to what the forward pass found
        assert m["memory_estimate"]["total"] < m["memory_estimate_at_build"]["total"]
        assert m["counts"]["particles"] == PARTICLES
        for key in ("measured", "rss_before", "peak_rss", "forward_s", "backward_s", "wall_s"):
            assert _positive(m[key]), (m["steps"], m["mode"], key, m[key])
        assert _positive(m["measured_over_estimate"])
        assert m["finite"] is True and m["grad"]["finite"] is True
    largest = max(MEMORY_STEPS)
    (ck,) = [m for m in rows if m["steps"] == largest and m["mode"] == "checkpointed"]
    (none,) = [m for m in rows if m["steps"] == largest and m["mode"] == "none"]
    assert ck["estimate"]["total"] < none["estimate"]["total"]
    assert ck["estimate"]["segment"] < none["estimate"]["segment"]
    assert ck["estimate"]["checkpoints"] > none["estimate"]["checkpoints"]
