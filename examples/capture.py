"""Graph capture: record collide + step once with ``wp.ScopedCapture``, then replay it.

Small scenes are bound by Python's launch overhead: each step is a dozen kernel
launches, each costing microseconds of host work. Because ``model.collide`` and
``solver.step`` allocate nothing and never read device values back to the host,
a pair of steps (the ping-pong states end where they started) can be captured
once as a graph and replayed with ``wp.capture_launch``, on the CPU as on CUDA.

    python examples/capture.py                 # 32x32 cloth dropping onto a sphere
    python examples/capture.py --dim 8 --frames 10

Prints both throughputs and checks that the replayed simulation is bitwise the
plain one (same kernels, same inputs, same order). Then it replays ``--frames``
more frames and records one per frame into ``examples/out/capture.usda``
(``usdview examples/out/capture.usda``), timing what a recorded frame costs.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import warp as wp

import inertia


def build(dim: int, device=None):
    b = inertia.ModelBuilder()
    b.add_ground_plane()
    b.add_shape_sphere(xform=((0.0, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0)), radius=0.4)
    cell = 1.6 / dim
    b.add_cloth_grid(dim, dim, cell_x=cell, cell_y=cell, pos=(-0.8, -0.8, 1.2))
    return b.finalize(device=device)


class Simulation:
    """The README's minimal loop, with the two states swapped by a pair of steps."""

    def __init__(self, model, dt: float):
        self.model, self.dt = model, dt
        self.s0, self.s1 = model.state(), model.state()
        self.control, self.contacts = model.control(), model.contacts()
        self.solver = inertia.SemiImplicitSolver(model)

    def step_pair(self):
        for a, b in ((self.s0, self.s1), (self.s1, self.s0)):
            self.model.collide(a, self.contacts)
            self.solver.step(a, b, self.control, self.contacts, self.dt)

    def capture(self):
        """Record one pair of steps as a graph (the modules are loaded first: loading cannot be captured)."""
        self.step_pair()
        with wp.ScopedCapture(device=self.model.device) as cap:
            self.step_pair()
        return cap.graph


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=32, help="cloth cells per side")
    p.add_argument("--frames", type=int, default=60, help="60 Hz frames to simulate in each mode")
    p.add_argument("--substeps", type=int, default=40)
    p.add_argument("--device", default=None)
    p.add_argument("--usd", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "capture.usda"),
                   help="where to write the recorded frames")
    args = p.parse_args(argv)
    dt = 1.0 / (60 * args.substeps)
    pairs = args.frames * args.substeps // 2

    plain = Simulation(build(args.dim, args.device), dt)
    replayed = Simulation(build(args.dim, args.device), dt)
    graph = replayed.capture()
    plain.step_pair()  # capture() ran one real pair before recording (recording runs nothing)

    dev = plain.model.device
    wp.synchronize_device(dev)
    t = time.perf_counter()
    for _ in range(pairs):
        plain.step_pair()
    wp.synchronize_device(dev)
    t_plain = time.perf_counter() - t

    t = time.perf_counter()
    for _ in range(pairs):
        wp.capture_launch(graph)
    wp.synchronize_device(dev)
    t_graph = time.perf_counter() - t

    # copies: on the CPU .numpy() is a view, and the recording below steps the replayed simulation on
    q_plain, q_graph = plain.s0.particle_q.numpy().copy(), replayed.s0.particle_q.numpy().copy()
    record_s = 0.0
    os.makedirs(os.path.dirname(os.path.abspath(args.usd)), exist_ok=True)
    with inertia.UsdRecorder(args.usd, replayed.model, fps=60) as rec:
        for _ in range(args.frames):
            for _ in range(args.substeps // 2):
                wp.capture_launch(graph)
            t = time.perf_counter()
            rec.record(replayed.s0)  # reads the positions back: the frame's steps finish first
            record_s += time.perf_counter() - t
    result = {
        "particles": plain.model.particle_count,
        "steps": 2 * pairs,
        "plain_steps_per_s": 2 * pairs / t_plain,
        "graph_steps_per_s": 2 * pairs / t_graph,
        "speedup": t_plain / t_graph,
        "identical": bool(np.array_equal(q_plain, q_graph)),
        "finite": bool(np.isfinite(q_graph).all()),
        "lowest_z": float(q_graph[:, 2].min()),
        "usd": args.usd,
        "usd_frames": args.frames,
        "usd_record_ms_per_frame": 1e3 * record_s / max(1, args.frames),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
