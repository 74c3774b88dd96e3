"""inertia.precompiled_header: Warp's CPU precompiled header kept beside the kernel cache.

The behaviour checked is what makes it safe, not its speed (that is benchmarks/cold_start.py's): a
compile stores the header it built; a later process uses the stored header as it is (clang accepts it:
had it been rejected, Warp would have deleted it and the store would have changed); a damaged stored
header costs a compile without a header, never a wrong or failed one, and is replaced; ``INERTIA_KEEP_PCH=0`` leaves Warp
alone. Each case is a fresh interpreter with its own empty kernel cache, compiling a new one-kernel
module whose result is checked.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from inertia import precompiled_header

CHILD = r"""
import sys
import numpy as np
import warp as wp
import inertia
sys.path.insert(0, sys.argv[1])
import {name} as m
a = wp.zeros(3, dtype=float, device="cpu")
wp.launch(m.k, 3, [a], device="cpu")
assert np.allclose(a.numpy(), [{value}, {value} + 1.0, {value} + 2.0]), a.numpy()
print("INSTALLED", inertia.precompiled_header.installed)
"""

KERNEL = """
import warp as wp

@wp.kernel
def k(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = float(i) + {value}
"""


def compile_new_module(tmp_path, cache, name, value, keep=True):
    """A fresh interpreter that compiles (and checks) one new kernel module with kernel cache ``cache``."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / f"{name}.py").write_text(KERNEL.format(value=value))
    env = dict(os.environ, WARP_CACHE_PATH=str(cache), INERTIA_KEEP_PCH="1" if keep else "0")
    out = subprocess.run([sys.executable, "-c", CHILD.format(name=name, value=value), str(src)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def stored_headers(cache):
    return glob.glob(os.path.join(str(cache), "*", precompiled_header.STORE + "_*", "*.pch"))


def test_stored_header_is_used_as_is_and_a_damaged_one_is_replaced(tmp_path):
    cache = tmp_path / "cache"
    assert "INSTALLED True" in compile_new_module(tmp_path, cache, "first", 1.5)
    (header,) = stored_headers(cache)
    size, mtime = os.path.getsize(header), os.stat(header).st_mtime_ns
    assert size > 100_000  # a real header (4.6 MB with Warp 1.19), not an empty file

    # A second process compiling another module takes the stored header: clang accepted it, or Warp would
    # have built a new one and the store would have been rewritten.
    assert "INSTALLED True" in compile_new_module(tmp_path, cache, "second", 2.5)
    assert stored_headers(cache) == [header]
    assert (os.path.getsize(header), os.stat(header).st_mtime_ns) == (size, mtime)

    # A damaged header (cut short, as by a full disk): Warp rejects it and compiles without a header, never
    # failing or compiling wrongly, and the rejected header leaves the store (the next compile stores a new
    # one: the publish test below).
    with open(header, "r+b") as f:
        f.truncate(size // 10)
    compile_new_module(tmp_path, cache, "third", 3.5)
    assert stored_headers(cache) == []
    assert not glob.glob(os.path.join(os.path.dirname(header), ".*.tmp"))  # no temporary file left behind


def test_off_switch_leaves_warp_alone(tmp_path):
    cache = tmp_path / "cache"
    assert "INSTALLED False" in compile_new_module(tmp_path, cache, "plain", 0.5, keep=False)
    assert stored_headers(cache) == []


def test_publish_stores_built_headers_but_not_unchanged_copies(tmp_path):
    store, thread_dir = tmp_path / "store", tmp_path / "thread"
    store.mkdir()
    thread_dir.mkdir()
    (store / "a.pch").write_bytes(b"stored a")
    precompiled_header.seed(str(thread_dir), str(store))
    assert (thread_dir / "a.pch").read_bytes() == b"stored a"

    (thread_dir / "cuda.pch").write_bytes(b"nvrtc")  # a CUDA compile's, earlier: not a CPU compile's to store
    at_start = precompiled_header.headers(str(thread_dir))
    (thread_dir / "b.pch").write_bytes(b"built b")  # a header this thread's compile built
    before = os.stat(store / "a.pch").st_mtime_ns
    precompiled_header.publish(str(thread_dir), str(store), at_start)
    assert (store / "b.pch").read_bytes() == b"built b"
    assert os.stat(store / "a.pch").st_mtime_ns == before  # the unchanged copy is not written back

    at_start = precompiled_header.headers(str(thread_dir))
    (thread_dir / "a.pch").write_bytes(b"rebuilt a")  # Warp rebuilt the copied header
    os.utime(thread_dir / "a.pch", ns=(before + 10**9, before + 10**9))
    precompiled_header.publish(str(thread_dir), str(store), at_start)
    assert (store / "a.pch").read_bytes() == b"rebuilt a"
    assert sorted(p.name for p in store.iterdir()) == ["a.pch", "b.pch"]

    # A stored header that Warp rejected (deleted from the thread's folder) leaves the store too.
    other = tmp_path / "other_thread"
    other.mkdir()
    precompiled_header.seed(str(other), str(store))
    (other / "b.pch").unlink()
    precompiled_header.publish(str(other), str(store))
    assert sorted(p.name for p in store.iterdir()) == ["a.pch"]


@pytest.mark.parametrize("missing", ["pch_dir", "use_precompiled_headers"])
def test_not_installed_over_an_unknown_compile_signature(monkeypatch, missing):
    from warp._src import build

    args = "obj_path, cpp_path, " + ("use_precompiled_headers=False" if missing == "pch_dir" else "pch_dir=None")
    namespace: dict = {}
    exec(f"def build_cpu({args}):\n    return None", namespace)  # a Warp whose compile lacks `missing`
    monkeypatch.setattr(build, "build_cpu", namespace["build_cpu"])
    monkeypatch.setattr(precompiled_header, "installed", False)
    assert precompiled_header.install() is False
    assert build.build_cpu is namespace["build_cpu"]
