"""Shared helpers for the optimisation examples: progress bar, loss plot, USD export, summary line.

Nothing here is physics; every example builds its own scene and loss.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def add_common_args(parser, iters: int, frames: int, substeps: int, lr: float):
    """The options every example shares (sizes, learning rate, output directory, device)."""
    parser.add_argument("--iters", type=int, default=iters, help="optimiser iterations")
    parser.add_argument("--frames", type=int, default=frames, help="60 Hz frames per rollout")
    parser.add_argument("--substeps", type=int, default=substeps, help="solver steps per frame")
    parser.add_argument("--lr", type=float, default=lr, help="Adam learning rate")
    parser.add_argument("--out", default=OUT_DIR, help="output directory (USD and PNG)")
    parser.add_argument("--device", default="cpu", help="Warp device")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def example_parser(doc: str, iters: int, frames: int, substeps: int, lr: float) -> argparse.ArgumentParser:
    """A parser that prints the example's docstring as written, with the options every example shares."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    return add_common_args(parser, iters=iters, frames=frames, substeps=substeps, lr=lr)


def add_identified_parameter(parser, name: str, true: float, guess: float, what: str):
    """``--true-NAME`` (the value the observations are made with) and ``--guess-NAME`` (where the
    identification starts) of one parameter an example identifies; ``what`` names it, with its unit."""
    parser.add_argument(f"--true-{name}", type=float, default=true, help=f"true {what}")
    parser.add_argument(f"--guess-{name}", type=float, default=guess, help=f"initial guess of the {what}")


def init_warp():
    import warp as wp

    # keep the examples' output to their progress: no init banner or module-load lines
    wp.config.log_level = getattr(wp, "LOG_WARNING", 30)
    wp.init()


class Progress:
    """A one-line text progress bar (``\\r``-redrawn on a terminal, one line per update otherwise)."""

    def __init__(self, total: int, label: str = "", width: int = 24, quiet: bool = False, stream=None):
        self.total, self.label, self.width, self.quiet = max(1, int(total)), label, width, quiet
        self.stream = sys.stdout if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()

    def update(self, it: int, loss: float, extra: str = "") -> None:
        if self.quiet:
            return
        done = min(self.total, it + 1)
        filled = int(round(self.width * done / self.total))
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self.start
        eta = elapsed / done * (self.total - done)
        line = (f"{self.label} [{bar}] {done:>{len(str(self.total))}}/{self.total}  loss {loss:.4e}  "
                f"{elapsed:5.1f}s (eta {eta:4.1f}s) {extra}")
        if self.tty:
            self.stream.write("\r" + line.ljust(110))
            if done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def optimize(evaluate, optimizer, iters: int, label: str, describe, schedule=None, quiet: bool = False):
    """Gradient descent: ``iters`` times ``loss, *extras = evaluate()``, ``loss.backward()``, ``optimizer.step()``
    (then ``schedule.step()``, if given), with a progress line ``describe(*extras)``. Returns the loss history
    (ending with the loss after the last step) and that final evaluation's outputs, made without gradients."""
    import torch

    history = []
    bar = Progress(iters, label, quiet=quiet)
    for it in range(iters):
        loss, *extras = evaluate()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if schedule is not None:
            schedule.step()
        history.append(loss.item())
        bar.update(it, history[-1], describe(*extras))
    with torch.no_grad():
        final = evaluate()
    history.append(final[0].item())
    return history, final


def pyplot_or_none(enables: str):
    """``matplotlib.pyplot`` on the file-only Agg backend, or None (printing what installing matplotlib
    ``enables``) where matplotlib is missing: a plot is a by-product, never a reason to fail."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: `pip install matplotlib` enables {enables}")
        return None
    return plt


def save_figure(plt, fig, ax, path: str, xlabel: str, ylabel: str, title: str) -> str:
    """Label ``ax`` (both grids on), write ``fig`` as a PNG at ``path`` (its folder made) and close it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def save_loss_plot(history, path: str, title: str, ylabel: str = "loss"):
    """Save a log-scale loss curve as PNG; returns the path, or None when matplotlib is missing."""
    plt = pyplot_or_none("the loss-curve plot")
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(np.arange(len(history)), np.maximum(np.asarray(history, dtype=float), 1e-30), "-o", ms=3)
    return save_figure(plt, fig, ax, path, "iteration", ylabel, title)


def write_usd(path: str, model, q_frames=None, fps: float = 60.0, body_q_frames=None) -> str:
    """Write particle positions ``q_frames`` ``(T + 1, N, 3)`` and/or body poses ``body_q_frames``
    ``(T + 1, B, 7)`` (torch or numpy) as one USD time sample per frame."""
    import inertia

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with inertia.UsdRecorder(path, model, fps=fps) as rec:
        rec.record_frames(particle_q=q_frames, body_q=body_q_frames)
    return path


def _rounded(v):
    if isinstance(v, float):
        return float(f"{v:.6g}") if math.isfinite(v) else v
    if isinstance(v, (list, tuple)):
        return [_rounded(x) for x in v]
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def finish(name: str, history, values: dict, usd_path: str, png_path, start: float) -> dict:
    """Print the summary line and return the result dict every example's ``main`` returns."""
    initial, final = float(history[0]), float(history[-1])
    result = {
        "example": name,
        "initial_loss": initial,
        "final_loss": final,
        "ratio": initial / max(final, 1e-30),
        **values,
        "history": [float(h) for h in history],
        "usd": usd_path,
        "png": png_path,
        "seconds": round(time.perf_counter() - start, 2),
    }
    shown = {k: v for k, v in result.items() if k != "history"}
    print("SUMMARY " + json.dumps(_rounded(shown)), flush=True)
    return result
