"""Smoke test of benchmarks/ab_package.py: the FeatherstoneSolver package at HEAD loaded beside the working
tree's in one process (a fresh interpreter beside the test session: tests/background.py), the bits compared and
the two graphs timed alternately. Timings are not checked, only that they are consistent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import background
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "ab_package.py")
HAVE_GIT = shutil.which("git") is not None and subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode == 0

# (no git: nothing to run; the fixture skips)
RUN = background.job("ab_package", lambda out: [
    sys.executable, SCRIPT, "--rev", "HEAD", "--tiny", "--cells", "arm", "--quiet",
    "--json", os.path.join(out, "ab.json")], timeout=600, cwd=ROOT, fixture="doc") if HAVE_GIT else None


@pytest.fixture(scope="module")
def doc():
    if RUN is None:
        pytest.skip("benchmarks/ab_package.py reads the old package from git")
    return RUN.json("ab.json")


def test_ab_package_smoke(doc):
    assert doc["schema"] == "inertia-ab-package/1"
    row = doc["rows"][0]
    assert row["scene"] == "arm" and len(row["steps_per_s_new"]) == len(row["steps_per_s_old"]) == 2
    assert all(x > 0 for x in row["steps_per_s_new"] + row["steps_per_s_old"])
    r = row["ratio_new_over_old"]
    assert r["min"] <= r["median"] <= r["max"]
    # the same source gives the same bits (unless the working tree's package differs from HEAD's)
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "solvers/featherstone"], cwd=ROOT).returncode
    if changed == 0:
        assert row["same_bits"], (row["digest_new"], row["digest_old"])
