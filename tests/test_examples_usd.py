"""Smoke test of the main demo at a tiny size, and a check of what the USD recorder writes."""

import os
import sys

import numpy as np
import pytest
from pxr import Usd, UsdGeom

import inertia

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import demo  # noqa: E402


def test_demo_runs_and_loss_falls(tmp_path):
    out = str(tmp_path / "demo.usda")
    result = demo.main(["--iterations", "4", "--duration", "0.25", "--substeps", "10", "--out", out])
    assert result["final_loss"] < result["initial_loss"]
    assert os.path.exists(out) and os.path.exists(result["usd_first"])


def record_three_frames(path, model, fps, snapshot, substeps, dt, collide):
    """Record three frames of a SemiImplicitSolver run to ``path``, ``substeps`` steps of ``dt`` apart (with
    contacts when ``collide``, else none and no control); returns ``snapshot(state)`` of each recorded state."""
    s0, s1 = model.state(), model.state()
    control, contacts = (model.control(), model.contacts()) if collide else (None, None)
    solver = inertia.SemiImplicitSolver(model)
    snapshots = []
    with inertia.UsdRecorder(path, model, fps=fps) as rec:
        for _ in range(3):
            rec.record(s0)
            snapshots.append(snapshot(s0))
            for _ in range(substeps):
                if collide:
                    model.collide(s0, contacts)
                solver.step(s0, s1, control, contacts, dt)
                s0, s1 = s1, s0
    return snapshots


def test_usd_recorder_writes_time_samples(tmp_path):
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_cloth_grid(2, 2, pos=(0.0, 0.0, 1.0))
    model = b.finalize(device="cpu")
    path = str(tmp_path / "cloth.usda")
    frames = record_three_frames(path, model, 30, lambda s: s.particle_q.numpy().copy(), 10, 1.0 / 2400,
                                 collide=True)
    stage = Usd.Stage.Open(path)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert stage.GetTimeCodesPerSecond() == 30
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0.0, 2.0)
    points = UsdGeom.Points(stage.GetPrimAtPath("/world/particles")).GetPointsAttr()
    assert points.GetTimeSamples() == [0.0, 1.0, 2.0]
    for k, expected in enumerate(frames):
        np.testing.assert_allclose(np.array(points.Get(float(k))), expected, rtol=0, atol=1e-7)
    # widths: sampled when the radii change (here only at the first frame), held in between
    widths = UsdGeom.Points(stage.GetPrimAtPath("/world/particles")).GetWidthsAttr()
    assert widths.GetTimeSamples() == [0.0]
    np.testing.assert_allclose(np.array(widths.Get(2.0)), 2.0 * model.particle_radius.numpy(), rtol=1e-7)
    assert not np.allclose(frames[0], frames[-1])  # the cloth really moved between samples


def test_usd_recorder_writes_bodies_with_their_shapes(tmp_path):
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=((0.0, 0.0, 2.0), (0.0, 0.0, 0.0, 1.0)), angular_velocity=(0.0, 0.0, 3.0),
                      label="falling box")
    b.add_shape_box(body, hx=0.1, hy=0.2, hz=0.3, label="hull")
    b.add_shape_cylinder(body, xform=((0.0, 0.0, 0.4), (0.0, 0.0, 0.0, 1.0)), radius=0.05, half_height=0.1,
                         label="mast")
    model = b.finalize(device="cpu")
    path = str(tmp_path / "body.usdc")
    poses = record_three_frames(path, model, 60, lambda s: s.body_q.numpy()[0].copy(), 4, 1.0 / 240,
                                collide=False)
    stage = Usd.Stage.Open(path)
    prim = stage.GetPrimAtPath("/world/bodies/falling_box")
    ops = UsdGeom.Xformable(prim).GetOrderedXformOps()
    assert [op.GetOpName() for op in ops] == ["xformOp:translate", "xformOp:orient"]
    assert ops[0].GetTimeSamples() == [0.0, 1.0, 2.0]
    for k, pose in enumerate(poses):
        np.testing.assert_allclose(np.array(ops[0].Get(float(k))), pose[:3], atol=1e-6)
        q = ops[1].Get(float(k))
        np.testing.assert_allclose([*q.GetImaginary(), q.GetReal()], pose[3:], atol=1e-6)
    assert poses[0][2] > poses[-1][2]  # it fell between samples
    cube = UsdGeom.Cube(stage.GetPrimAtPath("/world/bodies/falling_box/hull/geom"))
    assert cube.GetSizeAttr().Get() == 2.0
    cyl = UsdGeom.Cylinder(stage.GetPrimAtPath("/world/bodies/falling_box/mast/geom"))
    assert abs(cyl.GetRadiusAttr().Get() - 0.05) < 1e-7 and abs(cyl.GetHeightAttr().Get() - 0.2) < 1e-7
    assert stage.GetPrimAtPath("/world/shapes/ground/geom").IsValid()


def test_a_simulation_that_raises_midway_leaves_a_valid_file_with_the_frames_so_far(tmp_path):
    b = inertia.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0))
    model = b.finalize(device="cpu")
    state = model.state()
    path = tmp_path / "partial.usda"
    try:
        with inertia.UsdRecorder(str(path), model, fps=30) as rec:
            for k in range(5):
                state.particle_q.assign(np.array([[0.0, 0.0, 1.0 - 0.1 * k]], dtype=np.float32))
                rec.record(state)
                if k == 2:
                    raise RuntimeError("the simulation blew up")
    except RuntimeError:
        pass
    stage = Usd.Stage.Open(str(path))
    points = UsdGeom.Points(stage.GetPrimAtPath("/world/particles")).GetPointsAttr()
    assert points.GetTimeSamples() == [0.0, 1.0, 2.0]
    assert abs(points.Get(2.0)[0][2] - 0.8) < 1e-6
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]  # no temporary file left behind


def test_record_frames_writes_a_finished_trajectory_and_checks_its_shape(tmp_path):
    b = inertia.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=(0.1, 0.1, 0.1), label="puck")
    b.add_shape_cylinder(body, radius=0.1, half_height=0.02, density=0.0)
    model = b.finalize(device="cpu")
    poses = np.zeros((4, 1, 7), dtype=np.float32)
    poses[:, 0, 6] = 1.0
    poses[:, 0, 0] = [0.0, 0.1, 0.2, 0.3]
    with inertia.UsdRecorder(str(tmp_path / "traj.usdc"), model) as rec:
        assert rec.record_frames(body_q=poses) == 4
        with pytest.raises(ValueError, match=r"body_q has frames of shape \(2, 7\), the model needs \(1, 7\)"):
            rec.record_frames(body_q=np.zeros((3, 2, 7)))
    stage = Usd.Stage.Open(str(tmp_path / "traj.usdc"))
    op = UsdGeom.Xformable(stage.GetPrimAtPath("/world/bodies/puck")).GetOrderedXformOps()[0]
    assert [op.Get(float(k))[0] for k in range(4)] == pytest.approx([0.0, 0.1, 0.2, 0.3], abs=1e-7)
