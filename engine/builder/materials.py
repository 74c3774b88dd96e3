"""Material parameter helpers."""

from __future__ import annotations


def lame_from_young(young: float, poisson: float) -> tuple[float, float]:
    """Lamé parameters (mu, lambda) [Pa] from Young's modulus E [Pa] and Poisson's ratio nu.

    mu = E / (2 (1 + nu)),  lambda = E nu / ((1 + nu)(1 - 2 nu)); nu must lie in (-1, 0.5).
    """
    if not young > 0.0:
        raise ValueError(f"Young's modulus must be > 0, got {young}")
    if not -1.0 < poisson < 0.5:
        raise ValueError(f"Poisson's ratio must lie in (-1, 0.5), got {poisson}")
    mu = young / (2.0 * (1.0 + poisson))
    lam = young * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson))
    return mu, lam
