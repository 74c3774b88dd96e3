"""Smoke test of benchmarks/stage_split.py: tiny scenes, every solver, collide and step timed apart."""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import stage_split  # noqa: E402


def test_stage_split_rows(tmp_path):
    doc = stage_split.main(["--tiny", "--json", str(tmp_path / "split.json")])
    assert json.loads((tmp_path / "split.json").read_text())["schema"] == "inertia-stage-split/1"
    rows = doc["rows"]
    assert {(r["scene"], r["solver"]) for r in rows} >= {("chain", "semi_implicit"), ("chain", "xpbd"),
                                                         ("boxes", "semi_implicit"), ("boxes", "xpbd")}
    for r in rows:
        assert r["input_state_unchanged"], r  # the step graph writes state 1 only: every replay times one state
        for k in ("collide_us", "step_us"):
            assert 0.0 < r[k]["min"] <= r[k]["median"] <= r[k]["max"], r
            assert len(r[k]["samples"]) == 2  # --tiny: two rounds
        assert 0.0 < r["collide_share"] < 1.0
    boxes = [r for r in rows if r["scene"] == "boxes"]
    assert all(r["rigid_contacts"] > 0 for r in boxes)  # the tiny pile stands on the ground: contacts were timed
