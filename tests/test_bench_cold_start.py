"""Smoke test of benchmarks/cold_start.py: one run with the kernel cache as it is (seconds), figures add up.

The run is the script as a user starts it, a background job (tests/background.py); ``--after`` first runs the
semi-implicit cloth, untimed, then the timed one."""

from __future__ import annotations

import os
import sys

import background

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "cold_start.py")
RUN = background.job("cold_start", lambda out: [sys.executable, SCRIPT, "--warm", "--runs", "1", "--after",
                                                "semi_implicit", "--json", os.path.join(out, "cold.json")],
                     timeout=600, cwd=ROOT)


def test_cold_start_figures():
    r = RUN.json("cold.json")
    assert r["schema"] == "inertia-cold-start/1" and r["cache"] == "warm" and r["after"] == "semi_implicit"
    run = r["runs"][0]
    assert run["total_s"] >= run["import_s"] + run["build_s"] + run["first_step_s"] - 1e-6
    assert run["modules"], "Warp's module report was not parsed"
    assert not run["torch_imported"]  # import inertia must not import torch
