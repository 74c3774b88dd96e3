"""Section 1 of the GPU check: the same small scenes on the CPU and on the device, trajectories and gradients
compared to a tolerance derived from float32 rounding, every step and backward segment graph-captured with
no allocation inside a capture.

For every case (``parity_cases``):

* ``cpu``: the CPU reference, a plain Python loop (no capture).
* ``nudged``: three more CPU runs in which every state value is moved by 1 ulp (random direction, seeds 1, 2
  and 3) after every step (a Simulator: after every frame; a Rollout: every input and per-frame control value
  once): their largest difference from ``cpu`` is the ``spread``, what rounding alone does to this scene over
  this many steps. ``common.judge`` turns it into the tolerance (``common.SPREAD_FACTOR``).
* ``device``: the same plain loop on the device, compared to ``cpu``.
* ``graph``: on the device again, two plain steps (they allocate each state's step buffers and load every
  kernel), then ``every`` steps captured once with ``wp.ScopedCapture`` and replayed; compared to ``device``
  (bitwise on the CPU; within the tolerance on CUDA, where atomic sums may land in another order from one run
  to the next). Every Warp allocation made while the device is capturing is recorded (``AllocationWatch``):
  there must be none. A Simulator and a Rollout capture their own graphs; the watch sees their captures too,
  and the rollout's graph keys are checked: each frame parity and every full-length backward segment.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

from common import Budget, guarded, judge, nudge, nudge_warp_array
from parity_cases import STATE_FIELDS, all_cases

NUDGE_SEEDS = (1, 2, 3)  # three nudged CPU runs: the spread is the largest of their differences from the reference


def _fields(model) -> list:
    out = []
    if model.particle_count:
        out += ["particle_q", "particle_qd"]
    if model.body_count:
        out += ["body_q", "body_qd"]
    if model.joint_count:
        out += ["joint_q", "joint_qd"]
    return out


def _sample(state, fields) -> dict:
    return {f: getattr(state, f).numpy().copy() for f in fields}


def _stack(samples: list) -> dict:
    return {f: np.stack([s[f] for s in samples]) for f in samples[0]}


def _nudge_state(state, fields, rng) -> None:
    for f in fields:
        nudge_warp_array(getattr(state, f), rng)


class _Sim:
    """One StepCase simulation on one device: model, two states, control, contacts, solver."""

    def __init__(self, case, device):
        self.case = case
        self.model = case.build(device)
        self.solver = case.solver(self.model)
        self.a, self.b = self.model.state(), self.model.state()
        self.control = self.model.control()
        self.contacts = self.model.contacts() if self.model.shape_count else None
        if case.prepare is not None:
            case.prepare(self.model, self.a, self.control, self.solver)
        self.fields = _fields(self.model)

    def step(self):
        if self.contacts is not None:
            self.model.collide(self.a, self.contacts, check_overflow=False)
        self.solver.step(self.a, self.b, self.control, self.contacts, self.case.dt)
        self.a, self.b = self.b, self.a

    def check_contacts(self) -> dict:
        if self.contacts is None:
            return {}
        overflow = self.contacts.check_overflow(since_reset=True)
        counts = self.contacts.counts(since_reset=True)
        return {"contact_overflow": bool(overflow), "peak_contacts": {k: v for k, v in counts.items()
                                                                     if not k.endswith("_max")}}


def run_plain(case, device, steps: int, nudge_seed: int | None = None) -> dict:
    """Samples of a plain loop (every ``case.every`` steps, the start included); nudged after every step."""
    sim = _Sim(case, device)
    rng = None if nudge_seed is None else np.random.default_rng(nudge_seed)
    if rng is not None:
        _nudge_state(sim.a, sim.fields, rng)
    samples = [_sample(sim.a, sim.fields)]
    for i in range(steps):
        sim.step()
        if rng is not None:
            _nudge_state(sim.a, sim.fields, rng)
        if (i + 1) % case.every == 0:
            samples.append(_sample(sim.a, sim.fields))
    return {"samples": _stack(samples), "contacts": sim.check_contacts()}


def run_graph(case, device, steps: int, watch) -> dict:
    """Two plain steps, then ``case.every`` steps captured once and replayed (samples as run_plain's)."""
    sim = _Sim(case, device)
    samples = [_sample(sim.a, sim.fields)]
    if case.every % 2 or steps % case.every or case.every < 2:
        raise ValueError(f"{case.name}: every ({case.every}) must be even and divide steps ({steps})")
    for i in range(case.every):  # plain: loads modules, allocates both states' step buffers
        sim.step()
    samples.append(_sample(sim.a, sim.fields))
    start = (sim.a, sim.b)
    with watch.capture(case.name) as cap:  # records, runs nothing
        for _ in range(case.every):
            sim.step()
    sim.a, sim.b = start  # an even number of swaps: the replay ends where it starts
    t0 = time.perf_counter()
    for _ in range(steps // case.every - 1):
        wp.capture_launch(cap.graph)
        samples.append(_sample(sim.a, sim.fields))
    return {"samples": _stack(samples), "replay_s": time.perf_counter() - t0}


def run_simulator(case, device, frames: int, capture: bool, nudge_seed: int | None = None) -> dict:
    import inertia

    model = case.build(device)
    sim = inertia.Simulator(model, case.solver(model), case.frame_dt, case.substeps, capture=capture)
    fields = _fields(model)
    rng = None if nudge_seed is None else np.random.default_rng(nudge_seed)
    samples = [_sample(sim.state, fields)]
    for _ in range(frames):
        sim.step(1)
        if rng is not None:
            _nudge_state(sim.state, fields, rng)
        samples.append(_sample(sim.state, fields))
    return {"samples": _stack(samples), "graphs": len(sim._graphs)}


# ------------------------------------------------------------------------------------ rollouts
def _torch_device(device) -> str:
    return "cpu" if wp.get_device(device).is_cpu else f"cuda:{wp.get_device(device).ordinal}"


def run_rollout(case, device, frames: int, calls: int = 1, capture: bool = False,
                nudge_seed: int | None = None) -> dict:
    """``calls`` forward + backward passes of the case's rollout (the same inputs); outputs and gradients of
    each, and the graphs the rollout captured."""
    import torch

    import inertia

    model = case.build(device)
    dev = _torch_device(device)
    ro = inertia.Rollout(model, case.solver(model), frames, case.frame_dt, case.substeps,
                         params=tuple(case.params(model, dev)) if case.params else (),
                         checkpoint_every=case.checkpoint_every, capture=capture, batched=case.batched,
                         **case.rollout_kwargs)
    rng = np.random.default_rng(0)
    inputs = case.inputs(model, dev, rng, frames)
    params = case.params(model, dev) if case.params else {}
    if nudge_seed is not None:  # every input value and every frame's control moved by 1 ulp
        nrng = np.random.default_rng(nudge_seed)
        for group in (inputs, params):
            for k, v in group.items():
                group[k] = torch.tensor(nudge(v.detach().cpu().numpy(), nrng), device=dev, requires_grad=True)
    weights = None
    results = []
    for _ in range(calls):
        for group in (inputs, params):
            for v in group.values():
                v.grad = None
        out = ro(**inputs, params=params) if params else ro(**inputs)
        outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
        if weights is None:  # a fixed weighted sum of every output (not uniform: see benchmarks/rollout.py)
            wr = np.random.default_rng(7)
            weights = [torch.tensor(wr.uniform(0.5, 1.5, tuple(o.shape)).astype(np.float32), device=dev)
                       for o in outs]
        loss = sum((o * w).sum() for o, w in zip(outs, weights))
        loss.backward()
        names = list(getattr(out, "_fields", ("q", "qd")))
        record = {f"out_{n}": o.detach().cpu().numpy() for n, o in zip(names, out) if o is not None}
        for group in (inputs, params):
            for k, v in group.items():
                record[f"grad_{k}"] = v.grad.detach().cpu().numpy().copy()
        results.append(record)
    graphs = sorted(str(k) for k in ro._graphs)
    return {"results": results, "graphs": graphs, "segments": ro.segment_count,
            "checkpoint_every": ro.checkpoint_every}


# ------------------------------------------------------------------------------------ judging
def _judge_all(ref: dict, spreads: list, value: dict) -> dict:
    return {k: judge(ref[k], [s[k] for s in spreads], value[k]) for k in ref}


def _summary(comparisons: dict) -> dict:
    worst = max(comparisons.items(), key=lambda kv: kv[1]["ratio"])
    return {"passed": all(c["passed"] for c in comparisons.values()),
            "bitwise": all(c["bitwise"] for c in comparisons.values()),
            "worst": worst[0], "worst_ratio": worst[1]["ratio"], "fields": comparisons}


def check_step_case(case, device, tiny: bool, watch) -> dict:
    steps = case.tiny_steps if tiny else case.steps
    cpu = run_plain(case, "cpu", steps)
    nudged = [run_plain(case, "cpu", steps, nudge_seed=s)["samples"] for s in NUDGE_SEEDS]
    dev = run_plain(case, device, steps)
    before = len(watch.captured)
    graph = run_graph(case, device, steps, watch)
    return {"steps": steps, "dt": case.dt, "covers": case.covers, "contacts_cpu": cpu["contacts"],
            "contacts_device": dev["contacts"],
            "parity": _summary(_judge_all(cpu["samples"], nudged, dev["samples"])),
            "capture": dict(_summary(_judge_all(dev["samples"], nudged_offsets(cpu, nudged, dev),
                                                graph["samples"])),
                            allocations=len(watch.captured) - before, graph_steps=case.every,
                            replay_s=round(graph["replay_s"], 4))}


def nudged_offsets(cpu: dict, nudged: list, dev: dict) -> list:
    """The nudged runs moved onto the device run (dev + (nudged - cpu)): the same spreads around it, so the
    capture comparison (graph vs device) uses the tolerance of the parity comparison."""
    return [{k: dev["samples"][k] + (n[k] - cpu["samples"][k]) for k in n} for n in nudged]


def check_simulator_case(case, device, tiny: bool, watch) -> dict:
    frames = case.tiny_frames if tiny else case.frames
    cpu = run_simulator(case, "cpu", frames, capture=False)
    nudged = [run_simulator(case, "cpu", frames, capture=False, nudge_seed=s)["samples"] for s in NUDGE_SEEDS]
    before = len(watch.captured)
    plain = run_simulator(case, device, frames, capture=False)
    graph = run_simulator(case, device, frames, capture=True)
    return {"frames": frames, "substeps": case.substeps, "covers": case.covers,
            "parity": _summary(_judge_all(cpu["samples"], nudged, plain["samples"])),
            "capture": dict(_summary(_judge_all(plain["samples"], nudged_offsets(cpu, nudged, plain),
                                                graph["samples"])),
                            allocations=len(watch.captured) - before, graphs=graph["graphs"],
                            graphs_ok=graph["graphs"] >= 1)}


def check_rollout_case(case, device, tiny: bool, watch) -> dict:
    frames = case.tiny_frames if tiny else case.frames
    cpu = run_rollout(case, "cpu", frames)["results"][0]
    nudged = [run_rollout(case, "cpu", frames, nudge_seed=s)["results"][0] for s in NUDGE_SEEDS]
    plain = run_rollout(case, device, frames)["results"][0]
    before = len(watch.captured)
    # three calls: the first runs each graph's work plainly, the second captures, the third replays them all
    graph = run_rollout(case, device, frames, calls=3, capture=True)
    full_segments = frames // graph["checkpoint_every"]
    expect = {"segment"} if full_segments >= 2 else set()
    keys = set(graph["graphs"])
    frames_captured = any(k.startswith("('frame'") for k in keys)
    offsets = [{k: plain[k] + (n[k] - cpu[k]) for k in n} for n in nudged]
    capture = _summary({f"call{i + 1}_{k}": v for i, r in enumerate(graph["results"])
                        for k, v in _judge_all(plain, offsets, r).items()})
    capture.update(allocations=len(watch.captured) - before, graphs=graph["graphs"],
                   graphs_ok=frames_captured and expect <= keys, segments=graph["segments"],
                   checkpoint_every=graph["checkpoint_every"])
    return {"frames": frames, "substeps": case.substeps, "covers": case.covers,
            "parity": _summary(_judge_all(cpu, nudged, plain)), "capture": capture}


CHECKERS = {"steps": check_step_case, "simulator": check_simulator_case, "rollout": check_rollout_case}


def run(device, tiny: bool, budget: Budget, only=None) -> dict:
    """Every parity case (or those named in ``only``) while the budget lasts; the section's JSON."""
    from common import AllocationWatch

    cases = [c for c in all_cases() if only is None or c.name in only]
    out, skipped = {}, []
    with AllocationWatch(device) as watch:
        for case in cases:
            if budget.left() <= 0:
                skipped.append(case.name)
                continue
            t0 = time.perf_counter()
            r = guarded(CHECKERS[case.kind], case, device, tiny, watch)
            r["seconds"] = round(time.perf_counter() - t0, 3)
            r["kind"] = case.kind
            out[case.name] = r
        alloc = watch.summary()
    failed = [n for n, r in out.items() if r.get("status") == "error" or not r["parity"]["passed"]
              or not r["capture"]["passed"] or r["capture"]["allocations"] or not r["capture"].get("graphs_ok", True)]
    return {"status": "ok" if not failed and not skipped else ("failed" if failed else "incomplete"),
            "passed": not failed and not skipped, "failed": failed, "skipped_for_time": skipped,
            "cases": out, "allocations_in_capture": alloc, "state_fields": list(STATE_FIELDS),
            "devices": ["cpu", str(wp.get_device(device))]}
