"""Finite-value checks that name the stage and step where a simulation first went wrong."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import numpy as np
import warp as wp


class NonFiniteError(FloatingPointError):
    """A NaN or inf appeared. ``stage``, ``step``, ``array`` and ``index`` say where first."""

    def __init__(self, message: str, stage: str, step: int, array: str, index: int):
        super().__init__(message)
        self.stage, self.step, self.array, self.index = stage, step, array, index


class NonFiniteWarning(RuntimeWarning):
    """A simulation went non-finite (NaN/inf positions or velocities), reported once when first seen."""


class StabilityWarning(RuntimeWarning):
    """A time step beyond the explicit solver's estimated stable step (reported once per step size)."""


def _package_dirs() -> tuple:
    # the folders of inertia's three packages (engine/, solvers/, integrators/ in a checkout; one tree when
    # installed), with a trailing separator so that a sibling folder sharing a prefix is not taken for one
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = {here}
    for name in ("solvers", "integrators"):  # found, not imported (they import this module)
        spec = importlib.util.find_spec(f"{__package__}.{name}")
        if spec is not None and spec.submodule_search_locations:
            dirs |= {os.path.abspath(d) for d in spec.submodule_search_locations}
    return tuple(os.path.join(d, "") for d in dirs)


_PACKAGE_DIRS = None


def _passed_through() -> tuple:
    """Folders whose frames stand between a user's call and inertia's (torch's autograd calls a Rollout's
    forward; Warp and contextlib wrap calls): a warning is not attributed to them either."""
    import contextlib

    dirs = [os.path.dirname(os.path.abspath(wp.__file__)), os.path.abspath(contextlib.__file__)]
    torch = sys.modules.get("torch")  # only when the user imported it (inertia never imports it eagerly)
    if torch is not None and getattr(torch, "__file__", None):
        dirs.append(os.path.dirname(os.path.abspath(torch.__file__)))
    return tuple(os.path.join(d, "") if os.path.isdir(d) else d for d in dirs)


def warn(message: str, category=RuntimeWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside inertia (the user's line), however deep the
    engine's own calls are (a step may run directly, through :mod:`inertia.replay`, or inside a Rollout's
    torch autograd function)."""
    global _PACKAGE_DIRS
    if _PACKAGE_DIRS is None:
        _PACKAGE_DIRS = _package_dirs()
    skip = _PACKAGE_DIRS + _passed_through()
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(skip):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level + 1)


def first_nonfinite(a: wp.array) -> int | None:
    """Index of the first element of ``a`` holding a NaN or inf, or None (reads ``a`` to the host)."""
    if a is None or a.size == 0:
        return None
    values = a.numpy().reshape(a.shape[0], -1)
    bad = ~np.isfinite(values).all(axis=1)
    return int(np.argmax(bad)) if bad.any() else None


def check_finite(stage: str, step: int, **arrays) -> None:
    """Raise :class:`NonFiniteError` naming ``stage`` and ``step`` if any array holds a non-finite value."""
    for name, a in arrays.items():
        i = first_nonfinite(a)
        if i is not None:
            raise NonFiniteError(
                f"non-finite value in {name}[{i}] = {a.numpy()[i]} after stage '{stage}' of step {step}",
                stage, step, name, i,
            )
