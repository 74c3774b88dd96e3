"""The machine a benchmark ran on, and how loaded it was while it ran.

``machine_info(device)``: CPU, cores, Python, NumPy, Warp, device, kernel cache, git revision.
``LoadMeter``: around a timed block, the 1-minute load average and the CPU time that *other*
processes used (from ``/proc/stat``, all CPUs' busy time, minus this process's own CPU time), as
``others_cores``: the average number of cores busy with other work while the block ran (0 on an idle
machine; 1.0 on a 2-core machine means half of it was taken). ``None`` where ``/proc`` is not readable.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import time

import numpy as np
import warp as wp

HERE = os.path.dirname(os.path.abspath(__file__))


def now() -> float:
    return time.perf_counter()


def loadavg():
    """The 1-minute load average (runnable + uninterruptible processes), or None."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _busy_jiffies():
    """Busy time of all CPUs [clock ticks] since boot (user, nice, system, irq, softirq, steal), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class LoadMeter:
    """``start()`` then ``stop()`` -> {wall_s, others_cores, loadavg_1min}; see the module docstring.

    ``others_cores`` = (busy CPU seconds of the whole machine - this process's CPU seconds) / wall seconds.
    /proc/stat counts in clock ticks (10 ms), so over a 0.5 s block it resolves 0.02 cores.
    """

    def start(self):
        self._wall, self._own, self._busy, self._load = now(), time.process_time(), _busy_jiffies(), loadavg()
        return self

    def stop(self) -> dict:
        wall = now() - self._wall
        own = time.process_time() - self._own
        busy = _busy_jiffies()
        others = None
        # /proc/stat counts 10 ms ticks: below 0.1 s a block's reading is mostly rounding, so none is given
        if busy is not None and self._busy is not None and wall >= 0.1:
            others = min(float(os.cpu_count() or 1), max(0.0, ((busy - self._busy) / _TICK - own) / wall))
        return {"wall_s": wall, "others_cores": others, "loadavg_1min": self._load}


def summarize_load(samples) -> dict:
    """Median and max of ``others_cores`` and of the load average over a cell's blocks."""
    out = {"cores": os.cpu_count()}
    for key in ("others_cores", "loadavg_1min"):
        xs = [s[key] for s in samples if s.get(key) is not None]
        out[key] = ({"median": round(float(np.median(xs)), 3), "max": round(max(xs), 3)} if xs else None)
    return out


def cache_entries(path) -> set:
    try:
        return set(os.listdir(path))
    except OSError:
        return set()


def fmt(v, spec):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


def machine_info(device) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {
        "cpu": cpu, "cores_logical": os.cpu_count(), "cores_usable": usable, "platform": platform.platform(),
        "python": platform.python_version(), "numpy": np.__version__, "warp": wp.__version__,
        "device": str(device), "device_name": getattr(device, "name", str(device)),
        "kernel_cache_dir": wp.config.kernel_cache_dir, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }
    try:
        import inertia

        info["inertia"] = inertia.__version__
    except Exception:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                             timeout=5)
        # +dirty: tracked files changed (untracked ones, such as the results being written, do not count)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, timeout=5)
        if rev.returncode == 0:
            info["git"] = rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except Exception:
        pass
    return info
