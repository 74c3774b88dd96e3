"""Smoke test of benchmarks/replay_rate.py: tiny cells of both maximal-coordinate solvers, rates recorded."""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import replay_rate  # noqa: E402


def test_replay_rate_rows(tmp_path):
    doc = replay_rate.main(["--tiny", "--cells", "boxes:xpbd,chain:semi_implicit", "--blocks", "2", "--quiet",
                            "--json", str(tmp_path / "rate.json")])
    assert json.loads((tmp_path / "rate.json").read_text())["schema"] == "inertia-replay-rate/1"
    assert [(r["scene"], r["solver"]) for r in doc["rows"]] == [("boxes", "xpbd"), ("chain", "semi_implicit")]
    for r in doc["rows"]:
        assert len(r["rates"]) == 2 and all(x > 0 for x in r["rates"])
        assert r["min"] <= r["median"] <= r["max"]


def test_replay_rate_graph_mode(tmp_path):
    """--graph: the steps replayed from one captured graph of two (an even step count per block)."""
    doc = replay_rate.main(["--tiny", "--graph", "--cells", "chain:semi_implicit", "--blocks", "2", "--quiet"])
    row = doc["rows"][0]
    assert row["steps_per_block"] % 2 == 0 and all(x > 0 for x in row["rates"])
