"""Call replay: the README's plain ``for`` loop runs its kernels from graphs it captured itself.

A step of a small scene is tens of kernel launches, and on a CPU each ``wp.launch`` spends tens of
microseconds packing its arguments in Python: a plain loop of ``model.collide`` + ``solver.step`` ran
10-50x slower than the same kernels replayed from a captured graph (issue 20). So both calls replay:
the first time a call is made with a given *signature* it runs plainly (loading kernels, allocating
per-state buffers, warning about what it warns about), the second time it is captured with
``wp.ScopedCapture`` and from then on ``wp.capture_launch`` replays it: the same kernels on the same
buffers, so the same bits (tested in ``tests/test_replay.py``).

The signature is everything a captured graph froze: the identity of every array and object the call's
arguments and the model / solver hold (a replaced array is another signature; its contents may change
freely, which is how drive targets and forces are set) and the value of every Python scalar there
(dt, damping, iterations, contact settings: a changed scalar is another signature). Model, State,
Control, Contacts and solvers count the assignments that change an attribute (:mod:`inertia.signed`),
so their part of a signature costs no scan. An attribute's container changed in place (an item of a
dict) is not an assignment: what a step reads is replaced, never mutated (the XPBDSolver's ``scales``
is a read-only mapping). Each replayer keeps the few most recent graphs (``max_graphs``) and strong
references to the states, control and contacts their signatures name (not to its owner, the solver or
model, which outlives it: no reference cycle), so an identity cannot be reused while a graph points at it.

A call runs plainly, never from a graph, while a ``wp.Tape`` records (the tape must see each launch),
while the device is capturing (a user's or :class:`inertia.Simulator`'s own graph), or with ``enabled``
False (``solver.replay.enabled = False``, ``model.collision.replay.enabled = False``).
"""

from __future__ import annotations

import sys
import weakref
from collections import OrderedDict
from contextlib import contextmanager

import warp as wp

from .autodiff.tape import recording_tape
from .diagnostics import warn

PLAIN_ONLY = "plain only"  # a key whose capture failed: its calls run plainly


class Replay:
    """Graphs of one kind of call (a solver's step, a model's collide), by signature.

    ``run(key, held, fn)`` runs ``fn()`` plainly the first time ``key`` is seen, captures it the second time
    and replays the graph from then on. ``held``: the objects the key names besides the replay's owner
    (states, control, contacts), kept alive as long as the graph is (so their identities cannot be reused
    while it points at their arrays); a key counts as seen only while they are alive, so a new object that
    inherits a dead one's identity runs plainly first (allocating its buffers outside any capture).
    A capture that fails (a device that cannot capture, an allocation a device forbids inside a capture)
    runs the call plainly instead, and that key stays plain. When graphs are evicted before they were ever
    replayed (more signatures in rotation than ``max_graphs``), capturing stops: calls run plainly.
    """

    def __init__(self, device, max_graphs: int = 8, max_seen: int = 32, max_wasted: int = 4):
        self.device = wp.get_device(device)
        self.enabled = True
        self.max_graphs, self.max_seen, self.max_wasted = int(max_graphs), int(max_seen), int(max_wasted)
        self._graphs: OrderedDict = OrderedDict()  # key -> [graph, held objects, replays]
        self._seen: OrderedDict = OrderedDict()  # key -> weak references to its held objects, or PLAIN_ONLY
        self.counts = {"plain": 0, "captured": 0, "replayed": 0, "failed": 0, "wasted": 0}

    def clear(self) -> None:
        """Forget every captured graph and seen signature (what they froze no longer holds); settings stay."""
        self._graphs.clear()
        self._seen.clear()

    def active(self) -> bool:
        """Whether calls may replay now (not under a recording tape, not inside another capture)."""
        return self.enabled and recording_tape() is None and not self.device.is_capturing

    def run(self, key, held, fn) -> None:
        entry = self._graphs.get(key)
        if entry is not None:
            self._graphs.move_to_end(key)
            wp.capture_launch(entry[0])
            entry[2] += 1
            self.counts["replayed"] += 1
            return
        seen = self._seen.get(key)
        if seen is None or (seen is not PLAIN_ONLY and any(r() is None for r in seen)):
            self._seen[key] = tuple(weakref.ref(o) for o in held if o is not None)
            self._seen.move_to_end(key)
            if len(self._seen) > self.max_seen:
                self._seen.popitem(last=False)
            self._plain(fn)
            return
        if seen is PLAIN_ONLY or self.counts["wasted"] >= self.max_wasted:
            self._plain(fn)
            return
        graph = self._capture(fn)
        del self._seen[key]
        if graph is None:  # could not capture: ran plainly
            self._seen[key] = PLAIN_ONLY
            return
        self._graphs[key] = [graph, tuple(held), 0]
        if len(self._graphs) > self.max_graphs:
            _, evicted = self._graphs.popitem(last=False)
            if evicted[2] < 2:  # a capture costs about a plain call: it paid off only if replayed again
                self.counts["wasted"] += 1
        self.counts["captured"] += 1
        wp.capture_launch(graph)

    def _plain(self, fn) -> None:
        self.counts["plain"] += 1
        fn()

    def _capture(self, fn):
        """``fn``'s graph (recorded, not run), or None after running ``fn`` plainly when capture failed."""
        capture = wp.ScopedCapture(device=self.device)
        try:
            capture.__enter__()
        except Exception as e:  # a device that cannot capture: plain calls from now on, and say why
            self.enabled = False
            warn(f"inertia.replay is off on {self.device}: graph capture failed ({e}); plain calls from now on.",
                 RuntimeWarning)
            self._plain(fn)
            return None
        try:
            fn()
        except Exception:
            capture.__exit__(*sys.exc_info())  # ends the capture; nothing it recorded ran
            self.counts["failed"] += 1
            self._plain(fn)  # the plain call raises again if the error was fn's own
            return None
        capture.__exit__(None, None, None)
        return capture.graph


@contextmanager
def plain_calls(*replays):
    """Within: the given replays run every call plainly (an uncaptured Simulator or Rollout, for debugging)."""
    saved = [r.enabled for r in replays]
    for r in replays:
        r.enabled = False
    try:
        yield
    finally:
        for r, on in zip(replays, saved):
            r.enabled = on
