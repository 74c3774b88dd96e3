"""Smoke test of benchmarks/rollout.py: a tiny run must finish and report sane, consistent figures.

Runs the benchmark in a subprocess (as a user would) at --tiny size: a 4x4-cell cloth (5 x 5 = 25
particles, 2 x 16 = 32 triangles, 40 interior edges), 2 substeps per frame, section 1 at T = 40
steps (20 frames), section 2 at T = 10 and 40. Checks that every figure is finite and positive,
that checkpointing is estimated to need less memory than one tape, and that the gradients are the
same with and without checkpointing (the CPU backward pass is bitwise reproducible for every k).

The README's "peak memory, 32x32 cloth, 10,000 steps" figure is the full benchmark's measured output
(``python benchmarks/rollout.py``, minutes); ``test_checkpointed_memory_grows_like_sqrt_T...`` checks
the property behind it on the full-size cloth without running it: ``Rollout.memory_estimate()``.

The same for the XPBD solver, shorter (it launches ~20x the kernels per step): ``--solver xpbd``
with its stated cloth settings (dt = 1/600 s, 20 iterations, relaxation 1.5), section 1 at T = 20
steps (10 frames), section 2 at T = 20 only. Both runs are background jobs (tests/background.py).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys

import background
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


# the XPBD run, worked out by hand
XPBD_ARGS = ["--solver", "xpbd", "--ratio-steps", "20", "--memory-steps", "20"]
XPBD_DT = 1.0 / 600.0
XPBD_KWARGS = {"iterations": 20, "relaxation": 1.5}
XPBD_STEPS, XPBD_FRAMES = 20, 10
XPBD_KS = [1, 3, 10]  # k = 1, round(sqrt(10)) = 3, 10 frames = one tape (plus the default k if it is none of these)
RADIUS = 0.04


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _tiny_run(extra):
    return lambda out: [sys.executable, BENCH, "--tiny", *extra, "--json", os.path.join(out, "tiny.json")]


RUNS = {name: background.job(f"rollout_{name}", _tiny_run(extra), timeout=600, cwd=ROOT, fixture="runs")
        for name, extra in (("semi_implicit", []), ("xpbd", XPBD_ARGS))}


@pytest.fixture(scope="module")
def runs():
    """Both tiny benchmark runs (semi-implicit, XPBD); {name: (doc, stdout)}."""
    res = {}
    for name, job in RUNS.items():
        res[name] = (job.json("tiny.json"), job.result().stdout)
    return res


@pytest.fixture(scope="module")
def report(runs):
    return runs["semi_implicit"]


@pytest.fixture(scope="module")
def xpbd_report(runs):
    return runs["xpbd"]


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


# ------------------------------------------------------------------ XPBD
def test_xpbd_document(xpbd_report, report):
    doc, stdout = xpbd_report
    c = doc["config"]
    assert c["solver"] == "xpbd" and c["solver_kwargs"] == XPBD_KWARGS
    assert math.isclose(c["dt"], XPBD_DT, rel_tol=1e-12) and math.isclose(c["frame_dt"], SUBSTEPS * XPBD_DT,
                                                                           rel_tol=1e-12)
    assert c["ratio_steps"] == XPBD_STEPS and c["memory_steps"] == [XPBD_STEPS] and c["substeps"] == SUBSTEPS
    assert doc["counts"] == report[0]["counts"] and doc["counts_match"] is True  # the same cloth
    assert math.isclose(report[0]["config"]["dt"], 1.0 / 2400.0, rel_tol=1e-12)
    assert "solver xpbd" in stdout and "dt = 1/600 s" in stdout
    # section 3 never runs Newton next to XPBD (here newton is usually not installed at all)
    assert doc["newton"].startswith("skipped") and doc["newton_results"] == []


def test_xpbd_ratio_figures(xpbd_report):
    doc, _ = xpbd_report
    ra = doc["ratio"]
    assert (ra["steps"], ra["frames"], ra["substeps"]) == (XPBD_STEPS, XPBD_FRAMES, SUBSTEPS)
    assert math.isclose(ra["sim_time_s"], XPBD_STEPS * XPBD_DT, rel_tol=1e-12)
    ks = [r["checkpoint_every"] for r in ra["configs"]]
    assert ks == sorted(set(XPBD_KS) | {ra["default_k"]})
    ref = ra["configs"][0]["grad"]
    assert _positive(ref["q0_norm"]) and _positive(ref["qd0_norm"])
    for r in ra["configs"]:
        k = r["checkpoint_every"]
        assert r["segments"] == -(-XPBD_FRAMES // k)
        for key in ("forward", "backward"):
            fig = r[f"{key}_s"]
            assert _positive(fig["median"]) and fig["min"] <= fig["median"] <= fig["max"], (k, key, fig)
            assert math.isclose(r[f"{key}_per_step_ms"], 1e3 * fig["median"] / XPBD_STEPS, rel_tol=1e-9)
            # per simulated second: the per-step time / dt
            assert math.isclose(r[f"{key}_s_per_sim_s"], fig["median"] / (XPBD_STEPS * XPBD_DT), rel_tol=1e-9)
        assert _positive(r["ratio"]) and r["finite"] is True and r["grad"]["finite"] is True
        assert r["grad_repeatable"] is True
        assert r["grad"] == ref, k  # bitwise the same gradients for every k
        # free fall would be below the ground by now (0.06 - 2 t - g t^2 / 2 = -1.2 cm): XPBD's hard contact
        # holds the lowest particle at its radius
        assert abs(r["min_height"] - RADIUS) < 2e-3, r["min_height"]


def test_xpbd_memory_figures(xpbd_report, report):
    doc, _ = xpbd_report
    rows = doc["memory"]
    assert [(m["steps"], m["mode"]) for m in rows] == [(XPBD_STEPS, "checkpointed"), (XPBD_STEPS, "none")]
    for m in rows:
        assert m["status"] == "ok", m
        for key in ("measured", "forward_s", "backward_s"):
            assert _positive(m[key]), (m["mode"], key, m[key])
        assert m["grad"] == doc["ratio"]["configs"][0]["grad"]  # fresh processes: the same gradients
    ck, none = rows
    assert none["checkpoint_every"] == XPBD_FRAMES and 1 <= ck["checkpoint_every"] < XPBD_FRAMES
    assert ck["estimate"]["total"] < none["estimate"]["total"]
    # each recorded XPBD step keeps its iterates, corrections and multipliers (21 + 20 iterates of 25 particles
    # and 21 x (32 triangles + 40 edges) multipliers, with gradients): per step of a segment over 10x what the
    # semi-implicit solver keeps
    semi = [m for m in report[0]["memory"] if m["mode"] == "none" and m["steps"] == 40][0]
    per_step = none["estimate"]["segment"] / XPBD_STEPS
    assert per_step > 10 * semi["estimate"]["segment"] / 40, (per_step, semi["estimate"]["segment"])


# ------------------------------------------------------------------ the README's memory figure
@pytest.fixture(scope="module")
def full_size_cloth():
    """benchmarks/rollout.py's full-size scene (32x32 cloth, semi-implicit, 10 substeps a frame), built in this
    process from the benchmark's own code (imported by path; its sys.path entry is removed again)."""
    spec = importlib.util.spec_from_file_location("benchmarks_rollout", BENCH)
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
        full = module.FULL
        case = module.InertiaCase(full["size"], full["height"], "semi_implicit", full["substeps"])
    finally:
        sys.path[:] = saved
    return case, full


def test_checkpointed_memory_grows_like_sqrt_T_and_is_under_1_percent_of_one_tape(full_size_cloth):
    """What the README's "12.2 MiB / 1,496 MiB (0.8 %)" at T = 10,000 rests on, from the memory model.

    One tape keeps every step's states and contacts: linear in T. With the default checkpoint length k
    (minimising checkpoints (frames / k) + one recorded segment (k frames)) the total is ~2 sqrt(frames x
    checkpoint x segment-frame), so 4x the horizon costs 2x. The README's figures are the benchmark's measured
    RSS growth; the estimates here (13.6 MiB / 1,828 MiB at T = 10,000, 0.75 %) are what Rollout computes
    from its buffers, the same order: this checks the scaling and the fraction, not the measured MiB."""
    case, full = full_size_cloth
    substeps = full["substeps"]
    assert full["size"] == 32 and 10000 in full["memory_steps"]  # the README's row
    checkpointed, one_tape, ks = {}, {}, {}
    for steps in (2500, 10000, 40000):
        frames = steps // substeps
        r = case.rollout(frames, None)  # builds buffers only; nothing is simulated
        ks[steps] = r.checkpoint_every
        checkpointed[steps] = r.memory_estimate()["total"]
        one_tape[steps] = r.memory_estimate(frames)["total"]
    mib = 1 << 20
    print("\n[memory estimate, 32x32 cloth] " + ", ".join(
        f"T = {t}: k = {ks[t]}, checkpointed {checkpointed[t] / mib:.1f} MiB, one tape {one_tape[t] / mib:.0f} MiB "
        f"({checkpointed[t] / one_tape[t]:.2%})" for t in checkpointed))
    # one tape: linear in T (the outputs and the one checkpoint are 26 kB of ~1.8 GB)
    assert one_tape[40000] / one_tape[10000] == pytest.approx(4.0, rel=1e-3)
    assert one_tape[10000] / one_tape[2500] == pytest.approx(4.0, rel=1e-3)
    # checkpointed: like sqrt(T), 2x for 4x the horizon (k is an integer: measured 1.99x both times)
    assert 1.8 < checkpointed[10000] / checkpointed[2500] < 2.2
    assert 1.8 < checkpointed[40000] / checkpointed[10000] < 2.2
    # at the README's horizon: under 1 % of one tape (measured RSS 0.8 %, estimate 0.75 %)
    assert checkpointed[10000] < 0.01 * one_tape[10000]
