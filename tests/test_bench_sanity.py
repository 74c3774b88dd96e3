"""The sanity pass's arithmetic (benchmarks/bench_observe.py, benchmarks/sanity.py) against hand-worked cases.

No simulation here: observations and time series are made up in the test, so each criterion is checked on a
case whose verdict is known (a settled pile that topples, a chain whose joints part, an energy gain), and
the energy and joint-gap formulas against closed forms in float64.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_observe import GRAVITY, energy, joint_gaps, maximal_observation, point_speeds, quat_matrix  # noqa: E402
from sanity import CRITERIA, judge  # noqa: E402


def _quat_about(axis, angle):
    a = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return np.concatenate([a * math.sin(angle / 2), [math.cos(angle / 2)]])


def test_energy_of_a_spinning_falling_box_is_the_closed_form():
    """A 2 kg box (inertia diag(0.1, 0.2, 0.3) kg m^2) rotated 0.7 rad about (1, 2, 3), its com 0.1 m off the
    body origin, at 3 m/s with omega = (1, -2, 0.5) rad/s: 1/2 m v^2 + 1/2 omega^T R I R^T omega + m g z_com."""
    q = _quat_about((1, 2, 3), 0.7)
    body_q = np.concatenate([[0.3, -0.2, 1.5], q])[None]
    com_local = np.array([[0.0, 0.0, 0.1]])
    inertia = np.diag([0.1, 0.2, 0.3])[None]
    w = np.array([1.0, -2.0, 0.5])
    body_qd = np.concatenate([[3.0, 0.0, 0.0], w])[None]
    obs = maximal_observation(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), body_q, body_qd, [2.0], inertia,
                              com_local)
    R = quat_matrix(q[None])[0]
    assert np.allclose(R @ R.T, np.eye(3), atol=1e-14) and np.isclose(np.linalg.det(R), 1.0)
    z_com = 1.5 + (R @ com_local[0])[2]
    expected = 0.5 * 2.0 * 9.0 + 0.5 * w @ (R @ inertia[0] @ R.T) @ w + 2.0 * GRAVITY * z_com
    assert energy(obs) == pytest.approx(expected, rel=1e-14)
    # the point speed bound: |v| + |omega| sqrt(tr I / m)
    assert point_speeds(obs)[0] == pytest.approx(3.0 + np.linalg.norm(w) * math.sqrt(0.6 / 2.0), rel=1e-14)


def test_pinned_particles_and_kinematic_bodies_count_for_nothing():
    obs = maximal_observation([[0, 0, 1.0], [0, 0, 2.0]], [[1.0, 0, 0], [5.0, 0, 0]], [0.5, 0.0],
                              np.array([[0, 0, 3.0, 0, 0, 0, 1.0]]), np.array([[0, 0, 0, 7.0, 0, 0]]), [0.0],
                              np.eye(3)[None], np.zeros((1, 3)))
    assert energy(obs) == pytest.approx(0.5 * 0.5 * 1.0 + 0.5 * GRAVITY * 1.0, rel=1e-14)
    assert point_speeds(obs).tolist() == [1.0]


def test_joint_gaps_measure_the_anchor_separation_in_world():
    """A revolute joint between the world anchor (0, 0, 2) and a body turned 90 degrees about z whose anchor is
    (0.5, 0, 0) in its frame: the body at (0, -0.5, 2) holds it (gap 0); moved by (0, 0, 3 mm), 3 mm."""
    q = _quat_about((0, 0, 1), math.pi / 2)
    ident = [0, 0, 0, 0, 0, 0, 1.0]
    xp = np.array([[0, 0, 2.0, 0, 0, 0, 1.0]])
    xc = np.array([[0.5, 0, 0, 0, 0, 0, 1.0]])
    held = np.concatenate([[0.0, -0.5, 2.0], q])[None]
    assert joint_gaps(held, [-1], [0], xp, xc, [True])[0] == pytest.approx(0.0, abs=1e-15)
    moved = held + np.array([[0, 0, 0.003, 0, 0, 0, 0]])
    assert joint_gaps(moved, [-1], [0], xp, xc, [True])[0] == pytest.approx(0.003, rel=1e-12)
    # between two bodies: the parent's anchor moves with the parent
    two = np.array([ident, [1.0, 0, 0, 0, 0, 0, 1.0]])
    gap = joint_gaps(two, [0], [1], [[0.5, 0, 0, 0, 0, 0, 1.0]], [[-0.5, 0, 0, 0, 0, 0, 1.0]], [True])
    assert gap[0] == pytest.approx(0.0, abs=1e-15)
    assert joint_gaps(two, [0], [1], xp, xc, [False]).size == 0


def _series(ts, e, v, z=None, g=None, moving=None):
    z = z if z is not None else [0.05] * len(ts)
    g = g if g is not None else [None] * len(ts)
    moving = moving if moving is not None else [int(x > CRITERIA["moving_again_speed"]) for x in v]
    return ts, e, v, z, g, moving


def test_a_pile_that_settles_and_then_topples_is_not_sane():
    ts = [0.1 * (k + 1) for k in range(100)]  # 10 s
    v = [2.0 if t < 0.8 else (0.01 if t < 2.0 else 1.5) for t in ts]
    res = judge("boxes", 1e-3, 10.0, 100, "graph", 100.0, *_series(ts, [100.0] * 100, v), True, None, 1.0, False,
                True)
    assert res["sane"] is False and res["rest_judged"] is True
    assert res["settled_at_s"] == pytest.approx(0.8) and res["moving_again_at_s"] == pytest.approx(2.0)
    assert any("moving again from 2.00 s" in f for f in res["failures"])
    assert any(f.startswith("not at rest") for f in res["failures"])
    # the same pile staying at rest is sane
    v = [2.0 if t < 0.8 else 0.01 for t in ts]
    res = judge("boxes", 1e-3, 10.0, 100, "graph", 100.0, *_series(ts, [100.0] * 100, v), True, None, 1.0, True,
                True)
    assert res["sane"] is True and res["moving_again_at_s"] is None and len(res["series"]["t"]) == 100


def test_energy_gain_and_parted_joints_are_reported_with_their_first_time():
    ts = [0.1 * (k + 1) for k in range(100)]
    e = [37.0 if t < 5.5 else 40000.0 for t in ts]
    g = [0.003 if t < 2.4 else 0.17 for t in ts]
    res = judge("chain", 1e-3, 10.0, 100, "graph", 37.0, *_series(ts, e, [5.0] * 100, g=g), True, None, 1.0,
                False, False)
    assert res["sane"] is False
    assert res["energy_first_over_s"] == pytest.approx(5.5) and res["joint_gap_first_over_s"] == pytest.approx(2.4)
    assert res["max_joint_gap_m"] == pytest.approx(0.17) and res["energy_gain"] == pytest.approx(40000 / 37 - 1)
    # a chain swinging for the whole window with its joints held is sane (no rest expected)
    res = judge("chain", 1e-3, 10.0, 100, "graph", 37.0, *_series(ts, [36.9] * 100, [5.0] * 100, g=[0.003] * 100),
                True, None, 1.0, False, False)
    assert res["sane"] is True and res["rest_judged"] is False


def test_something_below_the_ground_or_non_finite_fails():
    ts = [0.1, 0.2, 0.3]
    res = judge("soft", 1e-3, 0.3, 100, "graph", 10.0, *_series(ts, [10.0] * 3, [0.0] * 3, z=[0.02, -0.02, -0.5]),
                True, None, 1.0, False, True)
    assert res["sane"] is False and "below the ground" in res["failures"][0]
    res = judge("soft", 1e-3, 0.3, 100, "graph", 10.0, *_series([0.1], [math.inf], [math.inf]), False, 0.1, 1.0,
                False, True)
    assert res["sane"] is False and res["failures"][0] == "non-finite at 0.100 s"
