"""Input checks shared by the builder's mixins: each names what was wrong and where it was written."""

from __future__ import annotations

import math

import warp as wp

# The largest float32: a value beyond it is finite here but becomes inf in the model's float32 arrays.
FLOAT32_MAX = 3.4028234663852886e38


def _representable(v: float) -> bool:
    return math.isfinite(v) and abs(v) <= FLOAT32_MAX


def vec3(value, name: str) -> tuple:
    try:
        v = tuple(float(x) for x in value)
    except TypeError:
        raise TypeError(f"{name} must be a 3-vector, got {value!r}") from None
    if len(v) != 3:
        raise ValueError(f"{name} must have 3 components, got {len(v)}")
    if not all(_representable(x) for x in v):
        raise ValueError(f"{name} must be finite (and within float32 range, |x| <= 3.4e38), got {v}")
    return v


def finite(value, name: str, minimum: float | None = None, strict: bool = False, maximum: float | None = None) -> float:
    """A float that is finite in float32 too (the model stores float32), and within [minimum, maximum]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not _representable(v):
        raise ValueError(f"{name} must be finite (and within float32 range, |x| <= 3.4e38), got {value!r}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {v}")
    return v


def index(i, count: int, what: str, allow_world: bool = False) -> int:
    """An integer index in [0, count) (or -1 for the world when ``allow_world``)."""
    if isinstance(i, bool) or int(i) != i:
        raise TypeError(f"{what} {i!r} is not an integer")
    i = int(i)
    if allow_world and i == -1:
        return i
    if i < 0 or i >= count:
        world = "-1 (the world)" if allow_world else ""
        valid = f"0..{count - 1}" if count else ""
        expected = " or ".join(x for x in (world, valid) if x) or "nothing: none are defined yet"
        raise IndexError(f"{what} {i} does not exist: expected {expected} ({count} defined)")
    return i


def transform(xform, name: str = "xform") -> wp.transform:
    """A ``wp.transform`` from ``None`` (identity), a transform, or ``(position, quaternion (x, y, z, w))``.

    Quaternions are normalized; a zero or non-finite one is rejected.
    """
    if xform is None:
        return wp.transform_identity()
    if isinstance(xform, wp.transform):
        p, q = xform.p, xform.q
    else:
        try:
            p, q = xform
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a wp.transform or (position, quaternion), got {xform!r}") from None
    p = vec3(p, f"{name} position")
    q = tuple(float(x) for x in q)
    n = math.sqrt(sum(x * x for x in q)) if len(q) == 4 and all(_representable(x) for x in q) else float("nan")
    if len(q) != 4 or not math.isfinite(n) or n < 1e-9:
        raise ValueError(f"{name} rotation must be a non-zero quaternion (x, y, z, w), got {q}")
    return wp.transform(wp.vec3(*p), wp.quat(*(x / n for x in q)))


def quaternion(q, name: str) -> tuple:
    """A unit quaternion (x, y, z, w) from a non-zero, finite one (normalized)."""
    try:
        q = tuple(float(x) for x in q)
    except TypeError:
        raise TypeError(f"{name} must be a quaternion (x, y, z, w), got {q!r}") from None
    n = math.sqrt(sum(x * x for x in q)) if len(q) == 4 and all(_representable(x) for x in q) else float("nan")
    if not (math.isfinite(n) and n >= 1e-9):
        raise ValueError(f"{name} must be a non-zero, finite quaternion (x, y, z, w), got {q}")
    return tuple(x / n for x in q)
