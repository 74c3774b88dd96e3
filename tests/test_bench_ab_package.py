"""Smoke test of benchmarks/ab_package.py: the FeatherstoneSolver package at HEAD loaded beside the working
tree's in one process, the bits compared and the two graphs timed alternately."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import ab_package  # noqa: E402


def _git_ok() -> bool:
    return shutil.which("git") is not None and subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode == 0


@pytest.mark.skipif(not _git_ok(), reason="benchmarks/ab_package.py reads the old package from git")
def test_ab_package_smoke(tmp_path):
    doc = ab_package.main(["--rev", "HEAD", "--tiny", "--cells", "arm", "--quiet", "--json", str(tmp_path / "ab.json")])
    assert json.loads((tmp_path / "ab.json").read_text())["schema"] == "inertia-ab-package/1"
    row = doc["rows"][0]
    assert row["scene"] == "arm" and len(row["steps_per_s_new"]) == len(row["steps_per_s_old"]) == 2
    assert all(x > 0 for x in row["steps_per_s_new"] + row["steps_per_s_old"])
    r = row["ratio_new_over_old"]
    assert r["min"] <= r["median"] <= r["max"]
    # the same source gives the same bits (unless the working tree's package differs from HEAD's)
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "solvers/featherstone"], cwd=ROOT).returncode
    if changed == 0:
        assert row["same_bits"], (row["digest_new"], row["digest_old"])
    import inertia
    assert inertia.FeatherstoneSolver.__module__.startswith("inertia.solvers.featherstone.")  # restored
