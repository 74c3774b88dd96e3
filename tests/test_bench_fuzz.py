"""Smoke test of benchmarks/fuzz.py (the larger fuzz run): a few scenes, few steps, its counts add up.

The run is the script as a user starts it, a background job (tests/background.py)."""

from __future__ import annotations

import os
import sys

import background

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "fuzz.py")
RUN = background.job("fuzz", lambda out: [sys.executable, SCRIPT, "--examples", "4", "--steps", "20", "--json",
                                          os.path.join(out, "fuzz.json")], timeout=600, cwd=ROOT)


def test_fuzz_run_counts():
    counts = RUN.json("fuzz.json")
    assert counts["schema"] == "inertia-fuzz/1"
    assert counts["scenes"] == 4 and 0 <= counts["silent"] <= counts["nonfinite"] <= 4
    assert counts["stability_first"] <= counts["nonfinite"]
    assert counts["silent"] == 0  # what the engine owes every valid scene
