"""PyTorch bridge: a rollout as one ``torch.autograd.Function``.

``rollout(q0, qd0, particle_f=..., params={...})`` takes torch tensors and
returns torch tensors; ``loss.backward()`` fills ``.grad`` on exactly the
inputs that require it. What the bridge guarantees:

* User tensors are never written: inputs are read (zero-copy when they are
  contiguous float32 on the model's device) and copied into the rollout's own
  buffers; outputs and gradients are fresh tensors.
* Every graph owns its data. The forward pass saves the inputs, the
  checkpoints and the value of every declared parameter (a snapshot of the
  model's array for those not passed) in the autograd context, and the
  backward pass re-simulates from them, so calling the rollout again before
  ``backward()``, or calling ``backward(retain_graph=True)`` twice, gives the
  same gradients. Passed parameter values stay in the model's arrays after
  the call (that is where the solver reads them); ``particle_mass`` is
  written as ``particle_inv_mass``.
* Bad input is refused with a clear message: wrong shape, non-float dtype,
  another device, NaN/inf, negative masses.
"""

from __future__ import annotations

import torch
import warp as wp


class _RolloutFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rollout, names, q0, qd0, particle_f, *values):
        params = dict(zip(names, values))
        q, qd, ckpt = rollout.forward(q0, qd0, particle_f, params)
        ctx.rollout, ctx.names, ctx.ckpt = rollout, names, ckpt
        ctx.contact_peak = rollout.last_contact_peak
        ctx.save_for_backward(q0, qd0, particle_f, *values)
        return q, qd

    @staticmethod
    def backward(ctx, grad_q, grad_qd):
        q0, qd0, particle_f, *values = ctx.saved_tensors
        need = ctx.needs_input_grad
        gq0, gqd0, gf, gparams = ctx.rollout.backward(
            q0, qd0, particle_f, dict(zip(ctx.names, values)), ctx.ckpt, grad_q, grad_qd,
            need_control=particle_f is not None and need[4], contact_peak=ctx.contact_peak,
        )
        grads = [gparams[n] if need[5 + i] else None for i, n in enumerate(ctx.names)]
        return (None, None, gq0 if need[2] else None, gqd0 if need[3] else None, gf, *grads)


def _as_input(name: str, t, shape: tuple, device: torch.device) -> torch.Tensor:
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


def _param_shape(model, name: str) -> tuple:
    a = getattr(model, "particle_inv_mass" if name == "particle_mass" else name)
    return tuple(a.shape) + tuple(getattr(a.dtype, "_shape_", ()))


def run_rollout(rollout, q0=None, qd0=None, particle_f=None, params=None):
    """Differentiable rollout over torch tensors; see :meth:`inertia.Rollout.__call__`."""
    model = rollout.model
    dev = model.torch_device
    n = model.particle_count
    if q0 is None:
        q0 = wp.to_torch(model.particle_q).clone()
    if qd0 is None:
        qd0 = wp.to_torch(model.particle_qd).clone()
    q0 = _as_input("q0", q0, (n, 3), dev)
    qd0 = _as_input("qd0", qd0, (n, 3), dev)
    if particle_f is not None:
        particle_f = _as_input("particle_f", particle_f, (rollout.frames, n, 3), dev)

    params = dict(params or {})
    unknown = set(params) - set(rollout.param_names)
    if unknown:
        raise ValueError(f"params {sorted(unknown)} were not declared in Rollout(params=...); declared: "
                         f"{list(rollout.param_names)}")
    names, values = [], []
    for name in rollout.param_names:
        if name not in params:
            # Not passed: this call simulates with the model's current value. Snapshot it, so
            # that this graph's backward pass re-simulates with it even if a later call changes
            # the model's array (a constant: no gradient).
            warp_name = "particle_inv_mass" if name == "particle_mass" else name
            names.append(warp_name)
            values.append(wp.to_torch(getattr(model, warp_name)).detach().clone().reshape(
                _param_shape(model, warp_name)))
            continue
        value = _as_input(f"params[{name!r}]", params[name], _param_shape(model, name), dev)
        if name == "particle_radius" and bool((value > model.particle_max_radius).any()):
            # collision detection sizes its search (hash-grid cells, query radius) from finalize()'s radii
            raise ValueError(f"params['particle_radius'] exceeds the largest radius the model was built with "
                             f"({model.particle_max_radius} m): contacts would be missed; build the model with the "
                             "largest radius you will use")
        if name == "particle_inv_mass" and bool((value < 0).any()):
            raise ValueError("params['particle_inv_mass'] has negative entries (0 means kinematic)")
        if name == "particle_mass":
            if bool((value < 0).any()):
                raise ValueError("params['particle_mass'] has negative entries (0 means kinematic)")
            # inverse mass is what the kernels read; mass 0 stays kinematic (inverse 0)
            value = torch.where(value > 0, 1.0 / torch.where(value > 0, value, torch.ones_like(value)),
                                torch.zeros_like(value))
            name = "particle_inv_mass"
        names.append(name)
        values.append(value)
    return _RolloutFunction.apply(rollout, tuple(names), q0, qd0, particle_f, *values)
