"""Smoke test of benchmarks/sim_rate.py (simulated seconds per second next to MuJoCo at each engine's largest
sane step): a tiny run (4-link chain, 2x2x1 pile, the KUKA arm; 0.3 s windows, at most 2 sanity tries per
search, 2 rounds) must finish and write a document of the right shape. MuJoCo (and pybullet_data, for the
arm's URDF) are optional, like Newton: without them the run is inertia-only and says so. Timings are not
checked, only that they are consistent: ``sim`` = steps/s x the row's step.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys

import background
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "sim_rate.py")
HAVE_MUJOCO = importlib.util.find_spec("mujoco") is not None
HAVE_ARM = importlib.util.find_spec("pybullet_data") is not None
SCENES = ["chain", "boxes"] + (["arm"] if HAVE_ARM else [])
SOLVERS = ["semi_implicit", "xpbd"]
# the steps the solvers state (bench_scenes.SOLVERS) and MuJoCo's default, where each search starts [s]
REGISTERED = {("semi_implicit", "chain"): 1e-3, ("semi_implicit", "boxes"): 1e-3, ("semi_implicit", "arm"): 1e-3,
              ("xpbd", "chain"): 1 / 600, ("xpbd", "boxes"): 1 / 1200, ("xpbd", "arm"): 1 / 600}


RUN = background.job("sim_rate", lambda out: [
    sys.executable, SCRIPT, "--tiny", "--scenes", ",".join(SCENES), "--solvers", ",".join(SOLVERS),
    "--json", os.path.join(out, "tiny.json")] + ([] if HAVE_MUJOCO else ["--no-mujoco"]), timeout=600, cwd=ROOT,
    fixture="doc")


@pytest.fixture(scope="module")
def doc():
    return RUN.json("tiny.json")


def test_document_shape(doc):
    assert doc["schema"] == "inertia-sim-rate/1"
    assert doc["config"]["window_s"] == 0.3 and doc["config"]["rounds"] == 2
    engines = [("inertia", s) for s in SOLVERS] + ([("mujoco", "mujoco")] if HAVE_MUJOCO else [])
    assert [(r["scene"], r["engine"], r["solver"]) for r in doc["results"]] == [
        (scene, e, s) for scene in SCENES for e, s in engines]
    assert doc["mujoco"].startswith("mujoco ") == HAVE_MUJOCO


@pytest.mark.parametrize("scene", SCENES)
def test_rows_state_their_step_search_sanity_and_rates(doc, scene):
    ladder = doc["config"]["dt_ladder"]
    for r in [r for r in doc["results"] if r["scene"] == scene]:
        assert "error" not in r, r.get("error")
        start = 0.002 if r["engine"] == "mujoco" else REGISTERED[(r["solver"], scene)]
        assert r["registered_dt"] == pytest.approx(start, rel=1e-12)
        tries = r["dt_search"]
        assert 1 <= len(tries) <= 2  # --tiny: at most two sanity tries
        assert tries[0]["dt"] == pytest.approx(start, rel=1e-9) or tries[-1]["dt"] == pytest.approx(start, rel=1e-9)
        for t in tries:
            assert any(math.isclose(t["dt"], d, rel_tol=1e-9) for d in ladder) or math.isclose(t["dt"], start)
            assert isinstance(t["sane"], bool) and t["simulated_s"] > 0
        sane = [t["dt"] for t in tries if t["sane"]]
        if r["sane_step_found"]:
            assert r["dt"] == pytest.approx(max(sane)) and r["sanity"]["sane"] is True
        else:
            assert not sane and r["dt"] == pytest.approx(start)
        assert r["sanity"]["dt"] == pytest.approx(r["dt"]) and r["sanity"]["window_s"] == 0.3
        assert (r["sanity"]["max_joint_gap_m"] is not None) == (r["engine"] == "inertia" and scene != "boxes")
        for mode in ("python", "graph"):
            fig = r[mode]
            assert len(fig["samples"]) == 2 and fig["min"] <= fig["median"] <= fig["max"]
            for k in ("median", "min", "max"):
                assert fig["sim"][k] == pytest.approx(fig[k] * r["dt"], rel=1e-12)
        assert r["graph_kind"] == ("native" if r["engine"] == "mujoco" else "graph")
        assert len(r["load"]["blocks"]) == 4
        if HAVE_MUJOCO:
            ref = [m for m in doc["results"] if m["scene"] == scene and m["engine"] == "mujoco"][0]
            assert r["vs_mujoco"] == pytest.approx(r["graph"]["sim"]["median"] / ref["graph"]["sim"]["median"])


@pytest.mark.skipif(not HAVE_MUJOCO, reason="MuJoCo is optional (pip install -e '.[bench]')")
def test_mujoco_twins_have_the_scenes_masses_and_bodies(doc):
    """The twins are built from the same parameters: the 4-link chain's 4 links of 29.3 g (capsule r = 1 cm,
    8 cm cylinder, 1000 kg/m^3), the pile's 4 boxes of 1 kg; the arm's 7 moving links (the base is welded)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from bench_mujoco import MuJoCoRunner
    from bench_scenes import SCENES as ALL

    chain = MuJoCoRunner(ALL["chain"], (4,))
    link = 1000.0 * (math.pi * 0.01 ** 2 * 0.08 + 4.0 / 3.0 * math.pi * 0.01 ** 3)
    assert chain.counts()["bodies"] == 4 and chain.model.body_mass[1:] == pytest.approx([link] * 4, rel=1e-9)
    boxes = MuJoCoRunner(ALL["boxes"], (2, 2, 1))
    assert boxes.counts()["bodies"] == 4 and boxes.model.body_mass[1:] == pytest.approx([1.0] * 4, rel=1e-9)
    if HAVE_ARM:
        arm = MuJoCoRunner(ALL["arm"], (1,))
        assert arm.model.nv == 7 and sum(arm.model.body_mass) == pytest.approx(4 + 4 + 3 + 2.7 + 1.7 + 1.8 + 0.3)
