"""Differentiable rollouts: :class:`Rollout` (checkpointed forward and backward passes, graph replay) and its
PyTorch bridge. Importing this package does not import torch; :class:`Rollout` does, when first used."""

from .params import DIFFERENTIABLE_PARAMS, PARAM_ALIASES


def __getattr__(name):
    if name == "Rollout":
        from .rollout import Rollout

        return Rollout
    raise AttributeError(f"module 'inertia.rollout' has no attribute {name!r}")


__all__ = ["Rollout", "DIFFERENTIABLE_PARAMS", "PARAM_ALIASES"]
