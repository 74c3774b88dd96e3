"""Collision detection: fills :class:`inertia.Contacts` with the pairs and points the solvers will look at.

:class:`CollisionPipeline` (``model.collision``) runs the stages and owns their scratch; each stage is its own
module: particle-shape candidates (``particle_shape``), particle pairs from a cell list
(``particle_particle``), shape AABBs and sweep-and-prune (``broad_phase``), contact points per pair type
(``narrow_phase``, ``box_box``). Nothing here is differentiated (it only selects pairs and material points):
the solvers recompute distances and normals from the current positions and poses and carry the gradients.
"""

from .pipeline import CollisionPipeline

__all__ = ["CollisionPipeline"]
