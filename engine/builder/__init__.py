"""Scene building: :class:`ModelBuilder` and its parts (particles and elements, grids, shapes, bodies and
joints, many worlds, mass properties, rest geometry, file importers)."""

from .builder import ModelBuilder

__all__ = ["ModelBuilder"]
