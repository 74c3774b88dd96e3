"""Signed objects: every attribute assignment is counted, so a replay signature costs O(1) per object.

:mod:`inertia.replay` must know whether anything a captured graph froze has changed since: the identity of
an array or object an attribute holds, or the value of a Python scalar. Scanning every attribute of a
model at every call costs tens of microseconds (a model has over a hundred), as much as the replay it
guards. A :class:`Signed` object instead counts the assignments that change an attribute (another object,
or a scalar of another value) in ``_assignments``, and its signature is ``(id, count)``. Names listed in
``_signature_skip`` (counters a call bumps every time, such as ``step_count``) are not counted.
"""

from __future__ import annotations

_SCALARS = (bool, int, float, str, type(None))
_MISSING = object()


def _changes(old, new) -> bool:
    if old is new:
        return False
    if type(old) is type(new) and isinstance(new, _SCALARS):
        return old != new
    return True


class Signed:
    """Mixin: counts the attribute assignments that change what a captured graph would have frozen."""

    _signature_skip: tuple = ()

    def __setattr__(self, name, value):
        if name not in self._signature_skip and _changes(self.__dict__.get(name, _MISSING), value):
            self.__dict__["_assignments"] = self.__dict__.get("_assignments", 0) + 1
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self.__dict__["_assignments"] = self.__dict__.get("_assignments", 0) + 1
        object.__delattr__(self, name)


def signature(*objects) -> tuple:
    """What a graph of a call on ``objects`` froze: per object its identity and, for a :class:`Signed` one, its
    count of assignments; for any other, per attribute (``vars``) the value of a Python scalar or the
    identity of anything else (arrays, structs, buffers)."""
    out = []
    for obj in objects:
        out.append(id(obj))
        if obj is None:
            continue
        if isinstance(obj, Signed):
            out.append(obj.__dict__.get("_assignments", 0))
            continue
        for value in vars(obj).values():
            out.append(value if isinstance(value, _SCALARS) else id(value))
    return tuple(out)
