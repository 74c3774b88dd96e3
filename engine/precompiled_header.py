"""Keep Warp's CPU precompiled header between processes, beside the kernel cache.

Warp compiles CPU kernels with clang and a precompiled header (PCH) of its native headers. It builds
that header in a temporary folder of its own for each compiling thread and deletes it at exit, so
every process that compiles anything first spends seconds building it: with Warp 1.19 on this project's
2-core machine a trivial kernel takes 2.5-4 s to compile in a fresh process, and 0.2-0.3 s once the
header exists (``benchmarks/cold_start.py`` shows it: the first module of each thread takes ~2.7 s,
every later one 0.15-0.9 s). A user who adds one feature to a cached scene, or a test suite whose
subprocesses each compile a module or two, pays the header again every time.

:func:`install` wraps Warp's CPU compile (``warp._src.build.build_cpu``): before a compile, a header
stored in ``<kernel cache>/wp_inertia_pch_<install>/`` is copied into the thread's own folder (clang then
uses it instead of building one); after, a header the compile built, or rebuilt, is stored (written
under a temporary name, then renamed, so no process ever reads half a file). Warp's own isolation of
one folder per thread and process stays as it was: nothing writes into a folder another thread reads.

Why this is safe: Warp names the header file by the options it was built with (block size, tiles,
optimization level, a hash), the kernel cache folder is per Warp version and the store per Warp install
(its path and header time), so a stored header only ever meets the compile it was built for; only
headers that a CPU compile built are stored (a CUDA compile's share the folder). A header that does not fit (damaged, or older than Warp's
native headers) is rejected by Warp: it deletes it, compiles without a header (clang prints its errors
about the header, and Warp "retrying" without it; the module builds) and builds a fresh header at its next compile.
The rejected header is then dropped from the store, and the fresh one stored when it is built.
``warp.clear_kernel_cache()`` removes the store with the modules (its name starts with ``wp_``).

Only an optimization: nothing computed depends on it. Off with ``INERTIA_KEEP_PCH=0`` (read at
``import inertia``), and not installed when Warp's internals differ from what it wraps (``installed``
says whether it is).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import threading

STORE = "wp_inertia_pch"  # folder prefix in Warp's kernel cache; the wp_ prefix makes clear_kernel_cache remove it
installed = False
_seeded: dict = {}  # thread folder -> {file name: ((size, mtime_ns) of the copy, of the stored file)}


def _store_dir() -> str | None:
    """``<kernel cache>/wp_inertia_pch_<install>``: a header records the absolute paths and times of the Warp
    headers it was built from, so two installs of one Warp version (two virtual environments) sharing a cache
    keep a store each instead of rejecting each other's header at every compile."""
    import hashlib

    import warp as wp

    cache = wp.config.kernel_cache_dir
    if not cache:
        return None
    native = os.path.join(os.path.dirname(os.path.abspath(wp.__file__)), "native")
    builtin = os.path.join(native, "builtin.h")
    key = f"{native}:{os.stat(builtin).st_mtime_ns if os.path.exists(builtin) else 0}"
    return os.path.join(cache, f"{STORE}_{hashlib.sha1(key.encode()).hexdigest()[:12]}")


def _stamp(path: str) -> tuple:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def seed(pch_dir: str, store: str) -> None:
    """Copy the stored headers that ``pch_dir`` lacks into it (once per folder)."""
    if pch_dir in _seeded:
        return
    copied = {}
    for src in glob.glob(os.path.join(store, "*.pch")):
        dst = os.path.join(pch_dir, os.path.basename(src))
        if not os.path.exists(dst):
            stored = _stamp(src)
            shutil.copyfile(src, dst)
            copied[os.path.basename(dst)] = (_stamp(dst), stored)
    _seeded[pch_dir] = copied


def headers(pch_dir: str) -> dict:
    """{file name: (size, mtime_ns)} of the headers in ``pch_dir``."""
    return {os.path.basename(p): _stamp(p) for p in glob.glob(os.path.join(pch_dir, "*.pch"))}


def publish(pch_dir: str, store: str, before: dict | None = None) -> None:
    """Store every header in ``pch_dir`` that the compile built (new or changed since ``before``, the folder's
    :func:`headers` when it began; a CUDA compile's headers, which share the folder, are never taken), and
    drop a stored header that Warp rejected: it deletes a header clang cannot use, compiles without one,
    and builds a fresh one at its next compile."""
    copied = _seeded.setdefault(pch_dir, {})
    os.makedirs(store, exist_ok=True)
    for name, (_, stored) in list(copied.items()):
        if not os.path.exists(os.path.join(pch_dir, name)):
            del copied[name]
            target = os.path.join(store, name)
            try:
                if _stamp(target) == stored:  # not a header another process has stored since
                    os.remove(target)
            except FileNotFoundError:
                pass
    for src in glob.glob(os.path.join(pch_dir, "*.pch")):
        name = os.path.basename(src)
        stamp = _stamp(src)
        if before is not None and before.get(name) == stamp:
            continue  # not this compile's
        if name in copied and copied[name][0] == stamp:
            continue  # the stored header, used as it was
        tmp = os.path.join(store, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, os.path.join(store, name))  # atomic: readers see the old file or the new one
        except OSError:
            if os.path.exists(tmp):
                os.remove(tmp)  # a full disk: leave no half-copied file behind
            raise
        copied[name] = (stamp, _stamp(os.path.join(store, name)))


def _keeping(build_cpu):
    @functools.wraps(build_cpu)
    def build_cpu_keeping_header(*args, **kwargs):
        pch_dir = kwargs.get("pch_dir")
        store = _store_dir() if pch_dir and kwargs.get("use_precompiled_headers") else None
        if store is not None:
            try:
                seed(pch_dir, store)
                before = headers(pch_dir)
            except OSError:
                store = None  # an unreadable or full cache: compile as Warp would
        result = build_cpu(*args, **kwargs)
        if store is not None:
            try:
                publish(pch_dir, store, before)
            except OSError:
                pass  # the next process builds its own header, as without this module
        return result

    build_cpu_keeping_header.inertia_keeps_pch = True
    return build_cpu_keeping_header


def install() -> bool:
    """Wrap Warp's CPU compile so its precompiled header outlives the process (see the module doc).
    Returns ``installed``."""
    global installed
    if os.environ.get("INERTIA_KEEP_PCH", "1") == "0":
        return installed
    try:
        import inspect

        from warp._src import build
    except ImportError:
        return installed
    fn = getattr(build, "build_cpu", None)
    if fn is None or getattr(fn, "inertia_keeps_pch", False):
        installed = fn is not None
        return installed
    params = inspect.signature(fn).parameters
    if "pch_dir" not in params or "use_precompiled_headers" not in params:
        return installed  # a Warp whose compile we do not know
    build.build_cpu = _keeping(fn)
    installed = True
    return installed
