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

Both runs are the example as a user starts it, ``python examples/distributed.py``,
in subprocesses with a timeout (this process never joins a process group), run as
background jobs (tests/background.py), one after the other, each in a folder of its own:
they rendezvous through a file store in that folder (no TCP port picked,
closed and reused), every process waits at a barrier before it leaves the
group, and each process's stderr goes to its own file (with
``PYTHONFAULTHANDLER=1`` and ``TORCH_SHOW_CPP_STACKTRACES=1``: Python and C++
stacks of a crash), shown in the assertion message when a run fails.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import background
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "distributed.py")
WORLDS_PER_PROCESS = 2
FRAMES = 12
# warm, a run takes ~5 s; with a cold kernel cache on 2 cores the processes compile the rollout's kernels first
TIMEOUT_S = 420


def _example(procs: int):
    """The example with ``procs`` processes on 2 x WORLDS_PER_PROCESS worlds, one optimizer step, as a background
    job (tests/background.py) writing into its own folder."""
    def cmd(folder):
        return [sys.executable, EXAMPLE, "--procs", str(procs), "--worlds", str(2 * WORLDS_PER_PROCESS), "--iters",
                "1", "--frames", str(FRAMES), "--quiet", "--out", folder, "--result-dir", folder, "--log-dir", folder,
                "--rendezvous", os.path.join(folder, "rendezvous"), "--timeout", str(TIMEOUT_S)]

    env = dict(os.environ, PYTHONFAULTHANDLER="1", TORCH_SHOW_CPP_STACKTRACES="1")
    return background.job(f"distributed_{procs}", cmd, timeout=TIMEOUT_S, cwd=ROOT, env=env)


RUNS = {2: _example(2), 1: _example(1)}


def report(run_dir, procs: int, stdout: str, stderr: str) -> str:
    """The launcher's output and every rank's stderr (their last 4,000 characters each)."""
    parts = [f"----- launcher stdout -----\n{stdout[-4000:]}", f"----- launcher stderr -----\n{stderr[-4000:]}"]
    for name in [f"rank{r}.stderr" for r in range(procs)]:
        path = run_dir / name
        text = path.read_text(errors="replace") if path.exists() else "(no file)"
        parts.append(f"----- {name} -----\n{text[-4000:]}")
    return "\n".join(parts)


def finished(procs: int) -> pathlib.Path:
    """The folder of the run with ``procs`` processes, checked to have exited 0 within the timeout."""
    job = RUNS[procs]
    try:
        proc = job.result()
    except subprocess.TimeoutExpired:
        raise AssertionError(f"python examples/distributed.py --procs {procs}: killed after {TIMEOUT_S} s\n"
                             + report(pathlib.Path(job.folder), procs, "", "")) from None
    run_dir = pathlib.Path(job.folder)
    assert proc.returncode == 0, (f"python examples/distributed.py --procs {procs}: exit {proc.returncode}\n"
                                  + report(run_dir, procs, proc.stdout, proc.stderr))
    return run_dir


def test_two_processes_give_the_gradient_of_one():
    two, one_dir = finished(2), finished(1)
    ranks = [torch.load(two / f"rank{r}.pt") for r in range(2)]
    one = torch.load(one_dir / "rank0.pt")  # a group of one

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
    # the file store is gone once every process has left the group
    assert not (two / "rendezvous").exists() and not (one_dir / "rendezvous").exists()
    # rank 0 wrote its own worlds (global 0 and 1), one time sample per frame
    from pxr import Usd, UsdGeom

    stage = Usd.Stage.Open(str(two / "distributed.usda"))
    assert stage.GetPrimAtPath("/world/bodies/box_1") and not stage.GetPrimAtPath("/world/bodies/box_2")
    translate = UsdGeom.Xformable(stage.GetPrimAtPath("/world/bodies/box_0")).GetOrderedXformOps()[0]
    assert len(translate.GetAttr().GetTimeSamples()) == FRAMES + 1
