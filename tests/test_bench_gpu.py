"""benchmarks/gpu/check.py, the GPU check, run here on the CPU at tiny sizes so that it never rots.

``check.py --device cpu --tiny`` compares the CPU with itself: parity must hold bitwise, every captured step
and backward segment must replay without allocating, and every section must produce its figures and the PNG.
Also checked here: the bulk builders of the million-particle scenes give the builder's own model, the 1-ulp
nudge is one ulp, and the tolerance rule tells a planted change in the physics from rounding.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np
import pytest
import warp as wp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU = os.path.join(ROOT, "benchmarks", "gpu")
for p in (os.path.join(ROOT, "benchmarks"), GPU):
    if p not in sys.path:
        sys.path.insert(0, p)

import background  # noqa: E402
import common  # noqa: E402
import large_scenes  # noqa: E402
import parity  # noqa: E402
import parity_cases  # noqa: E402
from bench_scenes import SCENES  # noqa: E402


# --no-newton: where Newton is installed it imports pxr itself, and this checks that our code does not
CHECK = background.job("gpu_check", lambda out: [sys.executable, os.path.join(GPU, "check.py"), "--device", "cpu",
                                                 "--tiny", "--no-newton", "--out", out], timeout=1500, cwd=ROOT,
                       fixture="report")


@pytest.fixture(scope="module")
def report():
    proc = CHECK.result()
    out = pathlib.Path(CHECK.folder)
    path = out / "gpu_check.json"
    assert path.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(path) as f:
        doc = json.load(f)
    return doc, out, proc


def test_document_and_exit_status(report):
    doc, out, proc = report
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert doc["schema"] == "inertia-gpu-check/1" and doc["tiny"]
    assert set(doc["sections"]) == {"parity", "capacity", "scale", "gradients"}
    assert all(s["status"] == "ok" for s in doc["sections"].values()), {k: s.get("error") for k, s in
                                                                        doc["sections"].items()}
    assert doc["pxr_imported"] is False  # usd-core is not on the GPU machine
    assert doc["chart"]["png"] and os.path.getsize(out / "throughput_vs_size.png") > 10_000


def test_parity_and_capture_pass_bitwise_on_cpu_vs_cpu(report):
    par = report[0]["sections"]["parity"]
    assert par["passed"] and not par["failed"] and not par["skipped_for_time"]
    names = set(par["cases"])
    expected = {c.name for c in parity_cases.all_cases()}
    assert names == expected
    for solver in ("semi_implicit", "xpbd", "featherstone"):
        assert any(n.endswith(solver) for n in names), solver
    for name, case in par["cases"].items():
        assert "error" not in case, (name, case.get("error"))
        assert case["parity"]["passed"] and case["parity"]["bitwise"], name  # the same device: same arithmetic
        assert case["capture"]["passed"] and case["capture"]["bitwise"], name  # replays are the plain loop
        assert case["capture"]["allocations"] == 0, (name, par["allocations_in_capture"])
        assert case["capture"].get("graphs_ok", True), (name, case["capture"].get("graphs"))
        for field in case["parity"]["fields"].values():
            assert field["spread"] > 0 or field["scale"] == 0  # the nudged runs did move
    assert par["allocations_in_capture"]["allocations_in_capture"] == 0
    rollout = par["cases"]["rollout_cloth_semi_implicit"]
    assert "segment" in rollout["capture"]["graphs"] and rollout["capture"]["segments"] >= 2
    assert any(k.startswith("grad_") for k in rollout["parity"]["fields"])


def test_scale_gradients_and_capacity_report_figures(report):
    s = report[0]["sections"]
    rows = [r for sweep in s["scale"]["device"].values() for r in sweep["rows"]]
    assert {r["scene"] for r in rows} == {"cloth", "granular", "robot", "arm"}
    for r in rows:
        assert "error" not in r, r
        assert r["entity_steps_per_s"] > 0 and r["finite"] and r["warp_bytes"] > 0, r
    assert {r["solver"] for r in rows if r["scene"] == "robot"} == {"semi_implicit", "xpbd", "featherstone"}
    assert s["scale"]["newton"] == {}  # --no-newton
    for problem in s["gradients"]["problems"].values():
        assert problem["rows"]
        for r in problem["rows"]:
            assert r["gradients_finite"] and r["backward_over_forward"] > 0 and r["warp_bytes"] > 0, r
            assert "segment" in r["graphs"]
    cap = s["capacity"]["cases"]
    assert all(c["same_result"] for c in cap.values())  # launching over the live count computes the same step
    # on a CPU the narrow phase, the XPBD mass splitting and the solvers' shape-shape contact kernels loop over
    # what was found (one thread, never a launch over the capacity); on a GPU they launch one thread per slot
    # and would be listed
    over = {r["kernel"] for r in cap["pile_xpbd"]["over_capacity"]}
    assert not over & {"narrow_phase_kernel", "count_contact_constraints_kernel", "solve_body_contacts_kernel"}, over
    # ... while the particle-shape contacts still launch over the soft contact capacity, and are found
    assert "solve_shape_contacts_kernel_plane" in {r["kernel"] for r in cap["cloth_xpbd"]["over_capacity"]}


def test_chart_mode_rewrites_the_png_from_the_json(report, tmp_path):
    import check

    doc, out, _ = report
    assert check.main(["--chart", str(out / "gpu_check.json"), "--out", str(tmp_path)]) == 0
    assert os.path.getsize(tmp_path / "throughput_vs_size.png") > 10_000


def _model_arrays(model) -> dict:
    return {k: v.numpy() for k, v in vars(model).items() if isinstance(v, wp.array)}


@pytest.mark.parametrize("scene,size", [("cloth", (5, 4)), ("cloth", (8, 8)), ("granular", (4, 3, 5))])
def test_bulk_builders_give_the_builders_model(scene, size):
    ref = _model_arrays(SCENES[scene].build_inertia(size, "cpu"))
    bulk = _model_arrays(large_scenes.BUILDERS[scene](size, "cpu"))
    assert ref.keys() == bulk.keys()
    for name, a in ref.items():
        b = bulk[name]
        assert a.shape == b.shape and a.dtype == b.dtype, name
        if np.issubdtype(a.dtype, np.floating):
            # vectorized NumPy rounds the rest poses' float64 arithmetic differently in the last bits: a
            # float32 entry may differ by 1 ulp of the array's largest entry (e.g. an off-diagonal 1e-15 vs 0)
            np.testing.assert_allclose(a, b, rtol=0, atol=common.EPS32 * max(1.0, float(np.abs(a).max(initial=0.0))),
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_nudge_moves_every_nonzero_value_by_one_ulp():
    rng = np.random.default_rng(0)
    v = np.array([1.0, -3.5, 0.0, 1e-20, 4096.0, -0.1], np.float32)
    n = common.nudge(v, rng)
    assert n.dtype == np.float32 and n[2] == 0.0
    steps = np.abs(n.astype(np.float64) - v.astype(np.float64))
    nonzero = v != 0
    # one ulp: the spacing at v (or just below it, when v is a power of two and the nudge goes down)
    assert np.all((steps[nonzero] == np.spacing(np.abs(v[nonzero]))) |
                  (steps[nonzero] == np.spacing(np.abs(v[nonzero])) / 2))


def test_the_tolerance_tells_a_changed_step_from_rounding():
    """A 1 % longer time step (a defect far smaller than a race or a lost contact) fails the parity rule on the
    cloth's 240 steps, while a held-out nudged run passes it well inside the tolerance."""
    case = next(c for c in parity_cases.step_cases() if c.name == "cloth_semi_implicit")
    steps = case.steps
    ref = parity.run_plain(case, "cpu", steps)["samples"]["particle_q"]
    spreads = [parity.run_plain(case, "cpu", steps, nudge_seed=s)["samples"]["particle_q"]
               for s in parity.NUDGE_SEEDS]
    held_out = parity.run_plain(case, "cpu", steps, nudge_seed=4)["samples"]["particle_q"]
    verdict = common.judge(ref, spreads, held_out)
    assert verdict["passed"] and verdict["ratio"] < 0.5 and not verdict["bitwise"], verdict
    changed = parity_cases.StepCase(case.name, case.covers, case.build, case.solver, case.dt * 1.01, case.steps,
                                    case.tiny_steps)
    other = parity.run_plain(changed, "cpu", steps)["samples"]["particle_q"]
    verdict = common.judge(ref, spreads, other)
    assert not verdict["passed"] and verdict["ratio"] > 2, verdict
