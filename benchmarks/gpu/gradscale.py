"""Section 3 of the GPU check: gradients at scale, a batched ``inertia.Rollout`` forward and backward over up to
4,096 worlds.

Scene: ``worlds`` copies of the 7-DoF arm (FeatherstoneSolver, dt 1 ms: ``frames`` frames of 5 substeps),
each world with its own start ``joint_q0`` and per-frame drive targets ``joint_target_pos``, both
differentiated together with the per-world ``joint_armature``; the loss is a fixed weighted sum of every
frame's joint coordinates and end-link positions. Then the 20-body robot (XPBD, contacts, free base) the same
way (``body_qd0``, ``body_f`` controls, ``body_mass``), at the world counts the budget allows.

Per point: the Rollout is built, called three times untimed (the first runs each graph's work plainly, the
second captures the frame and segment graphs, the third replays them), then ``repeats`` timed calls of
forward (``rollout(...)``) and backward (``loss.backward()``), each bracketed by a device synchronize:
median forward and backward seconds, ``backward_over_forward``, world-steps/s of each; memory: Warp bytes
allocated for the rollout (its checkpoints, segment states and contacts; ``AllocationWatch`` peak) next to
``Rollout.memory_estimate()``, and on CUDA torch's peak (outputs, gradients) and the memory pool's.
"""

from __future__ import annotations

import gc
import statistics
import time

import numpy as np
import warp as wp

import scenes as S
from common import AllocationWatch, Budget, device_memory, guarded

DEVICE_WORLDS = [64, 512, 4096]
CPU_WORLDS = [4, 16]
TINY_WORLDS = [2, 4]


def _arm_problem(model, dev, frames, rng):
    import torch

    w = model.joint_dof_count // 7
    q0 = np.tile(np.asarray(S.ARM_Q0, np.float32), (w, 1)) + rng.uniform(-0.2, 0.2, (w, 7))
    targets = np.asarray(S.ARM_TARGET, np.float32) + rng.uniform(-0.3, 0.3, (frames, w, 7))
    inputs = {"joint_q0": torch.tensor(q0.astype(np.float32), device=dev, requires_grad=True),
              "joint_target_pos": torch.tensor(targets.astype(np.float32), device=dev, requires_grad=True)}
    params = {"joint_armature": torch.full((w, 7), 0.02, device=dev, requires_grad=True)}
    return inputs, params


def _robot_problem(model, dev, frames, rng):
    import torch

    w = model.num_worlds
    b = model.body_count // w
    qd0 = np.zeros((w, b, 6), np.float32)
    qd0[..., :3] = rng.uniform(-0.1, 0.1, (w, b, 3))
    f = rng.uniform(-0.5, 0.5, (frames, w, b, 6)).astype(np.float32)
    inputs = {"body_qd0": torch.tensor(qd0, device=dev, requires_grad=True),
              "body_f": torch.tensor(f, device=dev, requires_grad=True)}
    params = {"body_mass": torch.tensor(model.body_mass.numpy().reshape(w, b), device=dev, requires_grad=True)}
    return inputs, params


PROBLEMS = {
    "arm_featherstone": {"model": lambda d, w: S.arm_model(d, worlds=w), "solver": "featherstone", "scene": "arm",
                         "problem": _arm_problem, "frames": 20, "substeps": 5},
    "robot_xpbd": {"model": lambda d, w: S.robot_model(d, worlds=w), "solver": "xpbd", "scene": "robot",
                   "problem": _robot_problem, "frames": 10, "substeps": 4},
}


def measure(name, worlds, device, repeats, watch, tiny) -> dict:
    import torch

    import inertia

    spec = PROBLEMS[name]
    dev = wp.get_device(device)
    tdev = "cpu" if dev.is_cpu else f"cuda:{dev.ordinal}"
    frames = 4 if tiny else spec["frames"]
    if not tiny:
        gc.collect()  # ~0.3 s with torch loaded: only where the memory figures need it
    base = watch.live
    model = spec["model"](dev, worlds)
    solver = S.make_solver(spec["solver"], model, spec["scene"])
    dt = S.rigid_settings(spec["solver"], spec["scene"])["dt"]
    inputs, params = spec["problem"](model, tdev, frames, np.random.default_rng(0))
    ro = inertia.Rollout(model, solver, frames, dt * spec["substeps"], spec["substeps"], params=tuple(params),
                         batched=True)
    weights = None
    fwd, bwd = [], []
    watch.reset_peak()
    if dev.is_cuda:
        torch.cuda.reset_peak_memory_stats(dev.ordinal)
    for call in range(3 + repeats):
        for v in list(inputs.values()) + list(params.values()):
            v.grad = None
        wp.synchronize_device(dev)
        t0 = time.perf_counter()
        out = ro(**inputs, params=params)
        outs = [o for o in out if o is not None]
        if weights is None:
            wr = np.random.default_rng(7)
            weights = [torch.tensor(wr.uniform(0.5, 1.5, tuple(o.shape)).astype(np.float32), device=tdev)
                       for o in outs]
        loss = sum((o * w).sum() for o, w in zip(outs, weights))
        wp.synchronize_device(dev)
        t1 = time.perf_counter()
        loss.backward()
        wp.synchronize_device(dev)
        t2 = time.perf_counter()
        if call >= 3:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    grads = {k: v.grad for k, v in list(inputs.items()) + list(params.items())}
    finite = all(g is not None and bool(torch.isfinite(g).all()) for g in grads.values())
    f, b = statistics.median(fwd), statistics.median(bwd)
    steps = frames * spec["substeps"]
    row = {"problem": name, "worlds": worlds, "frames": frames, "substeps": spec["substeps"], "dt": dt,
           "checkpoint_every": ro.checkpoint_every, "segments": ro.segment_count, "forward_s": f, "backward_s": b,
           "backward_over_forward": b / f, "forward_samples": fwd, "backward_samples": bwd,
           "forward_world_steps_per_s": worlds * steps / f, "backward_world_steps_per_s": worlds * steps / b,
           "gradients_finite": finite, "gradient_norms": {k: float(g.norm()) for k, g in grads.items()},
           "graphs": sorted(str(k) for k in ro._graphs), "warp_bytes": watch.peak - base}
    try:
        row["memory_estimate"] = int(ro.memory_estimate())
    except Exception as e:  # noqa: BLE001
        row["memory_estimate"] = f"{type(e).__name__}: {e}"
    row.update(device_memory(dev))
    del ro, model, solver
    if not tiny:
        gc.collect()
    return row


def run(device, tiny: bool, budget: Budget) -> dict:
    dev = wp.get_device(device)
    worlds = TINY_WORLDS if tiny else (CPU_WORLDS if dev.is_cpu else DEVICE_WORLDS)
    repeats = 2 if tiny else 3
    out = {}
    with AllocationWatch(dev) as watch:
        for k, name in enumerate(PROBLEMS):
            share = budget.sub(budget.left() / (len(PROBLEMS) - k))
            rows, skipped, last = [], [], None
            for w in worlds:
                predicted = None
                if last is not None:
                    # the CPU runs worlds one after another (time ~ worlds); a GPU runs them side by side until
                    # it is full, so there the time grows more slowly: sqrt is a guess, recorded with the outcome
                    ratio = w / last[0]
                    predicted = last[1] * (ratio if dev.is_cpu else ratio ** 0.5)
                    if predicted > share.left():
                        skipped.append({"worlds": w, "reason": f"predicted {predicted:.0f} s > "
                                                               f"{share.left():.0f} s left"})
                        continue
                t0 = time.perf_counter()
                row = guarded(measure, name, w, dev, repeats, watch, tiny)
                last = (w, time.perf_counter() - t0)
                row.update({"seconds": round(last[1], 2), "predicted_s": predicted})
                rows.append(row)
            out[name] = {"rows": rows, "skipped": skipped}
    errors = [f"{n} {r.get('worlds')}: {r['error']}" for n, v in out.items() for r in v["rows"] if "error" in r]
    return {"status": "ok" if not errors else "partial", "device": str(dev), "problems": out, "errors": errors}
