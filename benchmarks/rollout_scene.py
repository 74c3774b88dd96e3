"""benchmarks/rollout.py's scene, solver choice, memory readings and child-process runner (shared with
rollout_newton.py): a (N x N)-cell cloth with run.py's material, unpinned, falling onto the ground."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "rollout.py")  # the children run ``rollout.py --child SPEC``

DT = 1.0 / 2400.0  # the semi-implicit solver step [s], as in benchmarks/run.py; see solver_dt()
# [m] above the ground: contact after ~0.07 s (full) / ~0.01 s (tiny), i.e. ~170 / ~25 semi-implicit steps
DROP_HEIGHT = {"full": 0.2, "tiny": 0.06}
DROP_SPEED = 2.0  # [m/s] downwards

FULL = {"size": 32, "height": DROP_HEIGHT["full"], "substeps": 10, "ratio_steps": 1000,
        "memory_steps": (100, 1000, 10000), "repeats": 5}
TINY = {"size": 4, "height": DROP_HEIGHT["tiny"], "substeps": 2, "ratio_steps": 40, "memory_steps": (10, 40),
        "repeats": 2}


# ------------------------------------------------------------------------------------ scene
def loss_weights(n_particles: int) -> np.ndarray:
    """Per-particle loss weights w_i, (N, 3). Not uniform: with one w for all particles the internal forces'
    gradients would cancel (they sum to zero) and the gradient would be free fall's, the same for any k."""
    i = np.arange(n_particles, dtype=np.float64)[:, None]
    return np.hstack([np.sin(1.7 * i), np.cos(0.9 * i), 1.0 + 0.5 * np.sin(0.37 * i)]).astype(np.float32)


def cloth_params(n: int, height: float) -> dict:
    """The cloth of benchmarks/run.py (material, cell, mass, radius), unpinned, centred, low and falling."""
    return {
        "dim_x": n, "dim_y": n, "cell": 0.1, "mass": 0.1, "pos": (-0.05 * n, -0.05 * n, height),
        "vel": (0.0, 0.0, -DROP_SPEED), "tri_ke": 1.0e3, "tri_ka": 1.0e3, "tri_kd": 10.0, "edge_ke": 1.0,
        "edge_kd": 0.01, "radius": 0.04,
    }


def expected_counts(n: int) -> dict:
    from bench_scenes import ClothScene

    return ClothScene().expected_counts((n, n))


def build_inertia(n: int, height: float, device):
    from bench_scenes import Scene

    p = cloth_params(n, height)
    b = Scene._inertia_builder()  # ground plane and contact material shared with run.py
    b.add_cloth_grid(
        p["dim_x"], p["dim_y"], pos=p["pos"], vel=p["vel"], cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
        tri_ke=p["tri_ke"], tri_ka=p["tri_ka"], tri_kd=p["tri_kd"], edge_ke=p["edge_ke"], edge_kd=p["edge_kd"],
        particle_radius=p["radius"],
    )
    return b.finalize(device=device)


def make_solver(name: str, model):
    """Solvers come from bench_scenes.SOLVERS, with the settings they state for the cloth scene."""
    from bench_scenes import SOLVERS

    return SOLVERS[name](model, "cloth")


def solver_dt(name: str) -> float:
    """The solver step [s] the solver states for the cloth scene (semi_implicit 1/2400, xpbd 1/600)."""
    from bench_scenes import SOLVERS

    return SOLVERS[name].settings("cloth")["dt"]


def counts_of(model) -> dict:
    return {"particles": model.particle_count, "triangles": model.tri_count, "edges": model.edge_count,
            "springs": model.spring_count, "tets": model.tet_count, "shapes": model.shape_count}


# ------------------------------------------------------------------------------------ memory helpers
def _proc_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_bytes() -> int:
    kb = _proc_status_kb("VmRSS")
    if kb is None:  # not Linux: current RSS unknown, use the peak
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb * 1024


def peak_bytes() -> int:
    kb = _proc_status_kb("VmHWM")
    if kb is None:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb * 1024


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not possible (then the peak includes warm-up)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None



def grad_checksum(gq0: np.ndarray, gqd0: np.ndarray) -> dict:
    gq0, gqd0 = np.ascontiguousarray(gq0, np.float32), np.ascontiguousarray(gqd0, np.float32)
    h = hashlib.sha256(gq0.tobytes() + gqd0.tobytes()).hexdigest()[:16]
    return {"q0_norm": float(np.linalg.norm(gq0.astype(np.float64))),
            "qd0_norm": float(np.linalg.norm(gqd0.astype(np.float64))),
            "finite": bool(np.isfinite(gq0).all() and np.isfinite(gqd0).all()), "sha256_16": h}



def run_child(spec: dict, python: str, timeout: float) -> dict:
    cmd = [python, BENCH, "--child", json.dumps(spec)]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=os.path.dirname(HERE))
    except subprocess.TimeoutExpired:
        return {"status": f"timeout: did not finish in {timeout:.0f} s (--child-timeout)", "wall_s": timeout}
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"status": f"error: exit code {proc.returncode}", "stderr_tail": tail, "wall_s": wall}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    res = json.loads(lines[-1])
    res["status"] = "ok"
    res["wall_s"] = wall
    return res

