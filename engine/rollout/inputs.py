"""Checks of the torch tensors a rollout takes: shape, dtype, device, finiteness."""

from __future__ import annotations

import torch

# the argument names users pass for each state array
STATE_ARGS = {"particle_q": "q0", "particle_qd": "qd0", "body_q": "body_q0", "body_qd": "body_qd0",
              "joint_q": "joint_q0", "joint_qd": "joint_qd0"}


def as_input(name: str, t, shape: tuple, device: torch.device) -> torch.Tensor:
    """Check one tensor input and return it as contiguous float32 (a differentiable cast when needed)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    if t.device != device:
        raise ValueError(f"{name} is on device {t.device}, but the model is on device {device}; move it with .to('{device}')")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return t.to(torch.float32).contiguous()
