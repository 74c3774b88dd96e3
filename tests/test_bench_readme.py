"""The README's benchmark tables are generated from the committed JSON documents, never typed by hand.

``benchmarks/readme_table.py --check`` regenerates the block between its markers from
benchmarks/results/run.json and benchmarks/results/sim_rate.json and fails if the README differs; the
block also has one row per measured (scene, solver) and states the load and the sanity verdicts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "readme_table.py")
RESULTS = [os.path.join("benchmarks", "results", name) for name in ("run.json", "sim_rate.json")]


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_readme_block_is_what_the_committed_results_give():
    proc = _run("--check", *RESULTS)
    assert proc.returncode == 0, proc.stderr


def test_block_has_a_row_per_measurement_with_its_load_and_sanity():
    proc = _run("--print", *RESULTS)
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout
    with open(os.path.join(ROOT, RESULTS[0])) as f:
        run = json.load(f)
    with open(os.path.join(ROOT, RESULTS[1])) as f:
        rate = json.load(f)
    assert run["schema"] == "inertia-benchmark/2" and rate["schema"] == "inertia-sim-rate/1"
    assert not run["config"]["tiny"] and run["config"]["sanity_s"] >= 10.0 and rate["config"]["window_s"] >= 10.0
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and not ln.startswith("| scene")]
    ours = [r for r in run["results"] if r["engine"] == "inertia"]
    assert len(rows) == len(ours) + len(rate["results"])
    for r in ours:
        size = "x".join(map(str, r["size"]))
        (line,) = [ln for ln in rows if ln.startswith(f"| {r['scene']} ({size}) | {r['solver']} |")]
        assert line.split("|")[6].strip().startswith("yes" if r["sanity"]["sane"] else "**no**")
    assert block.count("load while the timed blocks ran") == 2
