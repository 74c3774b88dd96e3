"""Smoke tests of the optimisation examples at tiny sizes: the loss falls, and the USD and PNG are written."""

import math
import os
import sys

import pytest
from pxr import Usd, UsdGeom

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import arm_reach  # noqa: E402
import ball_bounce  # noqa: E402
import cloth_throw  # noqa: E402
import policy  # noqa: E402
import sysid  # noqa: E402


def check_outputs(result, samples: int, png: bool = True):
    """Finite losses that fell, a USD with one time sample per frame, a non-empty loss-curve PNG."""
    history = result["history"]
    assert all(math.isfinite(h) for h in history), history
    assert result["initial_loss"] == history[0] and result["final_loss"] == history[-1]
    assert result["final_loss"] < result["initial_loss"], history
    assert result["ratio"] > 1.0
    usd = result["usd"]
    assert os.path.isfile(usd) and os.path.getsize(usd) > 0
    stage = Usd.Stage.Open(usd)
    points = UsdGeom.Points(stage.GetPrimAtPath("/world/particles")).GetPointsAttr()
    times = points.GetTimeSamples()
    assert len(times) == samples, (len(times), samples)
    assert len(points.Get(times[0])) > 0
    assert points.Get(times[0]) != points.Get(times[-1])  # something moved
    if png:
        assert result["png"] is not None and os.path.isfile(result["png"]) and os.path.getsize(result["png"]) > 0


def test_ball_bounce(tmp_path):
    r = ball_bounce.main(["--iters", "5", "--substeps", "8", "--tail", "5", "--out", str(tmp_path), "--quiet"])
    check_outputs(r, samples=54 + 5 + 1)
    # the throw still bounces off the ground and the wall, and the rollout ends in flight
    assert r["contacts"] == {"ground": True, "wall": True, "airborne_at_end": True}
    assert r["landing_error_m"] ** 2 == pytest.approx(r["final_loss"], rel=1e-4)
    assert r["final_loss"] < 0.5 * r["initial_loss"]  # five Adam steps already halve the error


def test_cloth_throw(tmp_path):
    r = cloth_throw.main(["--iters", "3", "--cells", "2", "--frames", "40", "--out", str(tmp_path), "--quiet"])
    check_outputs(r, samples=41)
    assert r["particles"] == 9
    assert r["com_error_m"] ** 2 == pytest.approx(r["final_loss"], rel=1e-4)


def test_sysid_and_missing_matplotlib(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    r = sysid.main(["--iters", "4", "--frames", "20", "--out", str(tmp_path), "--quiet"])
    check_outputs(r, samples=21, png=False)
    assert r["png"] is None and "pip install matplotlib" in capsys.readouterr().out
    # both estimates moved from the guesses towards the true values
    for name in ("spring_stiffness", "mu"):
        guess_error = abs(r["guess"][name] - r["true"][name]) / r["true"][name]
        assert r["rel_error"][name] < guess_error, (name, r["recovered"][name])


def test_policy(tmp_path):
    r = policy.main(["--iters", "3", "--frames", "15", "--angles", "40", "--hidden", "8", "--out", str(tmp_path),
                     "--quiet"])
    check_outputs(r, samples=16)
    assert os.path.getsize(r["weights"]) > 0
    assert len(r["final_distance_m"]) == 1


def test_arm_reach(tmp_path):
    r = arm_reach.main(["--iters", "3", "--frames", "12", "--substeps", "10", "--out", str(tmp_path), "--quiet"])
    history = r["history"]
    assert all(math.isfinite(h) for h in history) and r["final_loss"] < r["initial_loss"], history
    stage = Usd.Stage.Open(r["usd"])
    ops = UsdGeom.Xformable(stage.GetPrimAtPath("/world/bodies/link1")).GetOrderedXformOps()
    times = ops[0].GetTimeSamples()
    assert len(times) == 13
    assert ops[0].Get(times[0]) != ops[0].Get(times[-1])  # the forearm moved
    assert stage.GetPrimAtPath("/world/bodies/link1/link1_capsule/geom").IsValid()
    assert os.path.isfile(r["png"])
