"""examples/distributed.py at a tiny size: 2 processes x N worlds give the gradient of 1 process x 2N worlds.

The two runs simulate the same 2N worlds (world g is the same in both: drawn
and placed by its global index), and every world's share of the gradient is
computed alike (a batched rollout gives per world the single-world result
bitwise, tests/test_rollout_worlds.py). What differs is only the order of
the float32 sum over worlds of the shared parameters' gradient: one sum of
2N per-world parts in one process, against two sums of N parts added by
``dist.all_reduce``. Float32 summation of a handful of terms of one sign
differs by a few units in the last place (relative 1e-7 .. 1e-6), so the
tolerance is a relative 1e-5.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import distributed  # noqa: E402

WORLDS_PER_PROCESS = 2


def tiny_args(procs: int, out: str):
    return distributed.parse_args(["--procs", str(procs), "--worlds", str(2 * WORLDS_PER_PROCESS), "--iters", "1",
                                   "--frames", "12", "--out", out, "--quiet"])


def test_two_processes_give_the_gradient_of_one(tmp_path):
    two = tmp_path / "two"
    two.mkdir()
    distributed.launch(tiny_args(2, str(two)), result_dir=str(two))  # spawns two processes (gloo on 127.0.0.1)
    ranks = [torch.load(two / f"rank{r}.pt") for r in range(2)]
    one = distributed.launch(tiny_args(1, str(tmp_path / "one")))  # in this process, a group of one

    g1, g2 = one["first_grad"], ranks[0]["first_grad"]
    print(f"d loss / d (log mu, log ke): 1 process x {2 * WORLDS_PER_PROCESS} worlds {g1.tolist()}, "
          f"2 processes x {WORLDS_PER_PROCESS} worlds {g2.tolist()}, relative difference "
          f"{((g1 - g2).abs() / g1.abs()).tolist()}")
    assert bool((g1.abs() > 1e-4).all())  # both parameters matter for this loss
    assert torch.allclose(g2, g1, rtol=1e-5, atol=0.0)
    # both ranks hold the all-reduced gradient, took the same step and hold the same parameters
    assert torch.equal(ranks[1]["first_grad"], g2)
    assert ranks[0]["agree"] and ranks[1]["agree"] and torch.equal(ranks[0]["values"], ranks[1]["values"])
    # the loss over all worlds is the same sum either way
    assert ranks[0]["history"][0] == pytest.approx(one["history"][0], rel=1e-5)
    assert ranks[0]["history"][-1] < ranks[0]["history"][0]  # one Adam step towards the true values
    # rank 0 wrote its own worlds (global 0 and 1), one time sample per frame
    from pxr import Usd, UsdGeom

    stage = Usd.Stage.Open(str(two / "distributed.usda"))
    assert stage.GetPrimAtPath("/world/bodies/box_1") and not stage.GetPrimAtPath("/world/bodies/box_2")
    translate = UsdGeom.Xformable(stage.GetPrimAtPath("/world/bodies/box_0")).GetOrderedXformOps()[0]
    assert len(translate.GetAttr().GetTimeSamples()) == 12 + 1
