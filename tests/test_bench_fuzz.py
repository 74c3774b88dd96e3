"""Smoke test of benchmarks/fuzz.py (the larger fuzz run): a few scenes, few steps, its counts add up."""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import fuzz  # noqa: E402


def test_fuzz_run_counts(tmp_path):
    path = tmp_path / "fuzz.json"
    counts = fuzz.main(["--examples", "4", "--steps", "20", "--json", str(path)])
    assert counts["scenes"] == 4 and 0 <= counts["silent"] <= counts["nonfinite"] <= 4
    assert counts["stability_first"] <= counts["nonfinite"]
    assert counts["silent"] == 0  # what the engine owes every valid scene
    assert json.loads(path.read_text())["schema"] == "inertia-fuzz/1"
