"""Smoke test of the main demo at a tiny size, and a check of what the USD recorder writes."""

import os
import sys

import numpy as np
from pxr import Usd, UsdGeom

import inertia

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import demo  # noqa: E402


def test_demo_runs_and_loss_falls(tmp_path):
    out = str(tmp_path / "demo.usda")
    result = demo.main(["--iterations", "4", "--duration", "0.25", "--substeps", "10", "--out", out])
    assert result["final_loss"] < result["initial_loss"]
    assert os.path.exists(out) and os.path.exists(result["usd_first"])


def test_usd_recorder_writes_time_samples(tmp_path):
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_cloth_grid(2, 2, pos=(0.0, 0.0, 1.0))
    model = b.finalize(device="cpu")
    s0, s1 = model.state(), model.state()
    control, contacts = model.control(), model.contacts()
    solver = inertia.SemiImplicitSolver(model)
    path = str(tmp_path / "cloth.usda")
    frames = []
    with inertia.UsdRecorder(path, model, fps=30) as rec:
        for _ in range(3):
            rec.record(s0)
            frames.append(s0.particle_q.numpy().copy())
            for _ in range(10):
                model.collide(s0, contacts)
                solver.step(s0, s1, control, contacts, 1.0 / 2400)
                s0, s1 = s1, s0
    stage = Usd.Stage.Open(path)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert stage.GetTimeCodesPerSecond() == 30
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0.0, 2.0)
    points = UsdGeom.Points(stage.GetPrimAtPath("/world/particles")).GetPointsAttr()
    assert points.GetTimeSamples() == [0.0, 1.0, 2.0]
    for k, expected in enumerate(frames):
        np.testing.assert_allclose(np.array(points.Get(float(k))), expected, rtol=0, atol=1e-7)
    assert not np.allclose(frames[0], frames[-1])  # the cloth really moved between samples
