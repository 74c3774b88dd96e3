"""Protection against the classic wrong-gradient bug: reusing a state the tape still needs.

A ``wp.Tape`` keeps references to the arrays each launch read and wrote. If a
later recorded step writes into one of them (the ping-pong ``state_0, state_1 =
state_1, state_0`` loop of a plain simulation), the backward pass reads the
overwritten values and returns a gradient that is silently wrong. The solver
calls :func:`guard_step` before every step; while a tape is recording it keeps,
on that tape, the device pointers of every state array recorded so far and
raises :class:`TapeReuseError` when ``state_out`` would overwrite one of them.
A recorded step also switches on the kernels' backward code (:mod:`.backward_code`).
The bookkeeping is a Python set per tape: no device work, no host sync.
"""

from __future__ import annotations

import warp as wp

from ..state import STATE_ARRAYS as _STATE_ARRAYS
from .backward_code import enable_gradients


class TapeReuseError(RuntimeError):
    """A recorded step would overwrite a state that the recording ``wp.Tape`` still needs."""


def recording_tape():
    """The ``wp.Tape`` being recorded right now, or None."""
    try:
        return wp._src.context.runtime.tape
    except AttributeError:  # pragma: no cover - a Warp without this internal
        return None



def gradients_if_recording() -> None:
    """Switch on the kernels' backward code (:mod:`.backward_code`) when a ``wp.Tape`` is recording: for
    the differentiable functions a tape may record without a solver step (``eval_ik``, ``sync_bodies``)."""
    if recording_tape() is not None:
        enable_gradients()


def _registry(tape) -> tuple[set, set]:
    # tape.reset() replaces tape.launches with a new list: a registry made for
    # the old list belongs to a recording that no longer exists.
    reg = getattr(tape, "_inertia_state_arrays", None)
    if reg is None or reg[0] is not tape.launches:
        reg = (tape.launches, set(), set())
        tape._inertia_state_arrays = reg
    return reg[1], reg[2]


def guard_step(state_in, state_out) -> None:
    """Raise :class:`TapeReuseError` if recording ``state_in -> state_out`` would corrupt the tape."""
    tape = recording_tape()
    if tape is None:
        return
    enable_gradients()  # the step's kernels will need their adjoints (compiled at their next launch)
    read, written = _registry(tape)
    for name in _STATE_ARRAYS:
        a = getattr(state_out, name, None)
        if a is None or a.ptr is None:
            continue
        if a.ptr in read or a.ptr in written:
            raise TapeReuseError(
                f"state_out.{name} was already used by an earlier step recorded on this wp.Tape; writing it "
                "again would overwrite values the backward pass needs and give a wrong gradient. Use a new "
                "State (model.state()) for every recorded step, or inertia.Rollout, which manages this for you."
            )
    for name in _STATE_ARRAYS:
        a = getattr(state_in, name, None)
        if a is not None and a.ptr is not None:
            read.add(a.ptr)
        b = getattr(state_out, name, None)
        if b is not None and b.ptr is not None:
            written.add(b.ptr)
