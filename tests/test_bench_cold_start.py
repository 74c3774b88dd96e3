"""Smoke test of benchmarks/cold_start.py: one run with the kernel cache as it is (seconds), figures add up."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import cold_start  # noqa: E402


def test_cold_start_figures(tmp_path):
    # --after runs the semi-implicit cloth first, untimed (with the cache as it is: seconds), then the timed one
    r = cold_start.main(["--warm", "--runs", "1", "--after", "semi_implicit", "--json", str(tmp_path / "cold.json")])
    assert r["cache"] == "warm"
    run = r["runs"][0]
    assert run["total_s"] >= run["import_s"] + run["build_s"] + run["first_step_s"] - 1e-6
    assert run["modules"], "Warp's module report was not parsed"
    assert not run["torch_imported"]  # import inertia must not import torch
