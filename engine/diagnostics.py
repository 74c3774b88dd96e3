"""Finite-value checks that name the stage and step where a simulation first went wrong."""

from __future__ import annotations

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
