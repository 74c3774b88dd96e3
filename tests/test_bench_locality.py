"""Smoke test of benchmarks/locality.py: tiny blocks in grid and random particle order, the same physics."""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import locality  # noqa: E402


def test_locality_rows(tmp_path):
    doc = locality.main(["--tiny", "--json", str(tmp_path / "loc.json")])
    assert json.loads((tmp_path / "loc.json").read_text())["schema"] == "inertia-locality/1"
    rows = doc["rows"]
    assert [(r["n"], r["order"]) for r in rows] == [(4, "grid"), (4, "random"), (5, "grid"), (5, "random")]
    for grid, shuffled in zip(rows[0::2], rows[1::2]):
        assert grid["finite"] and shuffled["finite"] and grid["ms_per_step"] > 0
        assert grid["particles"] == shuffled["particles"] == grid["n"] ** 3
        # a permutation of the indices changes no distance: the same pairs are found
        assert grid["particle_pairs"] == shuffled["particle_pairs"] > 0
