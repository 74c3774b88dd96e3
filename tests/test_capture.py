"""examples/capture.py at a tiny size: a captured collide + step replays bitwise the plain loop."""

from __future__ import annotations

import os
import sys

import numpy as np
import warp as wp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

import capture  # noqa: E402

from conftest import DEVICE  # noqa: E402


def test_captured_steps_replay_the_plain_loop_bitwise(tmp_path):
    usd = str(tmp_path / "capture.usda")
    r = capture.main(["--dim", "4", "--frames", "3", "--substeps", "10", "--device", DEVICE, "--usd", usd])
    assert r["particles"] == 25 and r["steps"] == 30
    assert r["identical"] and r["finite"]
    assert r["plain_steps_per_s"] > 0 and r["graph_steps_per_s"] > 0
    assert r["lowest_z"] < 1.2  # it fell: the replay did simulate
    from pxr import Usd, UsdGeom

    stage = Usd.Stage.Open(usd)
    points = UsdGeom.Points(stage.GetPrimAtPath("/world/particles")).GetPointsAttr()
    assert points.GetTimeSamples() == [0.0, 1.0, 2.0] and r["usd_record_ms_per_frame"] > 0


def test_replay_continues_from_where_the_graph_left_off():
    """Recording runs nothing; each replay advances the same buffers by a pair of steps."""
    model = capture.build(4, DEVICE)
    sim = capture.Simulation(model, 1.0 / 2400)
    graph = sim.capture()
    ref = capture.Simulation(capture.build(4, DEVICE), 1.0 / 2400)
    for _ in range(3):  # capture() steps one pair for real before recording, then two replays
        ref.step_pair()
    q_before = sim.s0.particle_q.numpy().copy()
    wp.capture_launch(graph)
    wp.capture_launch(graph)
    assert not np.array_equal(q_before, sim.s0.particle_q.numpy())
    np.testing.assert_array_equal(sim.s0.particle_q.numpy(), ref.s0.particle_q.numpy())
    np.testing.assert_array_equal(sim.s0.particle_qd.numpy(), ref.s0.particle_qd.numpy())
