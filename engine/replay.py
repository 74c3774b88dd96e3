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
so their part of a signature costs no scan. Each replayer keeps
the few most recent graphs (``max_graphs``) and strong references to what their signatures name, so an
identity can never be reused by another object while a graph points at it.

A call runs plainly, never from a graph, while a ``wp.Tape`` records (the tape must see each launch),
while the device is capturing (a user's or :class:`inertia.Simulator`'s own graph), or with ``enabled``
False (``solver.replay.enabled = False``, ``model.collision.replay.enabled = False``).
"""

from __future__ import annotations

import sys
from collections import OrderedDict

import warp as wp

from .autodiff.tape import recording_tape
from .diagnostics import warn


class Replay:
    """Graphs of one kind of call (a solver's step, a model's collide), by signature.

    ``run(key, objects, fn)`` runs ``fn()`` plainly the first time ``key`` is seen, captures it the second time
    and replays the graph from then on; ``objects`` are kept alive as long as the graph is.
    """

    def __init__(self, device, max_graphs: int = 4, max_seen: int = 32):
        self.device = wp.get_device(device)
        self.enabled = True
        self.max_graphs, self.max_seen = int(max_graphs), int(max_seen)
        self._graphs: OrderedDict = OrderedDict()  # key -> (graph, the objects its key names)
        self._seen: OrderedDict = OrderedDict()  # keys run once plainly
        self.counts = {"plain": 0, "captured": 0, "replayed": 0}

    def active(self) -> bool:
        """Whether calls may replay now (not under a recording tape, not inside another capture)."""
        return self.enabled and recording_tape() is None and not self.device.is_capturing

    def clear(self) -> None:
        self._graphs.clear()
        self._seen.clear()

    def run(self, key, objects, fn) -> None:
        entry = self._graphs.get(key)
        if entry is not None:
            self._graphs.move_to_end(key)
            wp.capture_launch(entry[0])
            self.counts["replayed"] += 1
            return
        if key not in self._seen:
            self._seen[key] = True
            if len(self._seen) > self.max_seen:
                self._seen.popitem(last=False)
            self.counts["plain"] += 1
            fn()
            return
        capture = wp.ScopedCapture(device=self.device)
        try:
            capture.__enter__()  # records, runs nothing
        except Exception as e:  # a device that cannot capture: plain calls from now on, and say why
            self.enabled = False
            warn(f"inertia.replay is off on {self.device}: graph capture failed ({e}); plain calls from now on.",
                 RuntimeWarning)
            fn()
            return
        try:
            fn()
        except BaseException:
            capture.__exit__(*sys.exc_info())  # ends the capture, keeps fn's exception
            raise
        capture.__exit__(None, None, None)
        del self._seen[key]
        self._graphs[key] = (capture.graph, objects)
        if len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        self.counts["captured"] += 1
        wp.capture_launch(capture.graph)
