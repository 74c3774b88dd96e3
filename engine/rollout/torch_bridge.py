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
  another device, NaN/inf, negative masses, inputs for bodies or particles the
  model does not have, an inertia that is not symmetric positive definite.

With ``Rollout(..., batched=True)`` every state, control and output has a
leading ``num_worlds`` dimension; :mod:`inertia.rollout.worlds` reshapes
them to and from the flat layout here (views, so gradients pass unchanged).

The autograd function itself sees packed rows (:mod:`inertia.rollout.layout`):
one flat initial state, one flat control row per frame; packing and unpacking
are torch operations, so gradients reach each named input and output.
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import torch
import warp as wp

from .inputs import STATE_ARGS as _STATE_ARGS, as_input as _as_input
from .layout import Layout
from ..schema import MODEL
from .params import PARAM_ALIASES

RolloutResult = namedtuple("RolloutResult", "particle_q particle_qd body_q body_qd joint_q joint_qd",
                           defaults=(None, None))
RolloutResult.__doc__ = """States of a rollout of a model with bodies: each ``(T + 1, count, width)`` (or one frame).

``particle_q`` / ``particle_qd`` are None for a model without particles; ``body_q`` is
``(..., B, 7)`` (position, quaternion (x, y, z, w)), ``body_qd`` ``(..., B, 6)`` (v of the com,
omega; world); ``joint_q`` ``(..., joint_coord_count)`` and ``joint_qd`` ``(..., joint_dof_count)``
with a solver in joint coordinates (FeatherstoneSolver), else None. With ``Rollout(..., batched=True)``
each count is ``num_worlds, per_world``."""

class _RolloutFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rollout, names, x0, controls, *values):
        params = dict(zip(names, values))
        traj, ckpt = rollout.forward(x0, controls, params)
        ctx.rollout, ctx.names, ctx.ckpt = rollout, names, ckpt
        ctx.contact_peak = rollout.last_contact_peak
        ctx.save_for_backward(x0, controls, *values)
        return traj

    @staticmethod
    def backward(ctx, grad_traj):
        x0, controls, *values = ctx.saved_tensors
        need = ctx.needs_input_grad
        gx0, gu, gparams = ctx.rollout.backward(
            x0, controls, dict(zip(ctx.names, values)), ctx.ckpt, grad_traj,
            need_control=controls is not None and need[3], contact_peak=ctx.contact_peak,
        )
        grads = [gparams[n] if need[4 + i] else None for i, n in enumerate(ctx.names)]
        return (None, None, gx0 if need[2] else None, gu, *grads)


def _param_shape(model, name: str) -> tuple:
    a = getattr(model, name)
    return tuple(a.shape) + tuple(getattr(a.dtype, "_shape_", ()))


def _inverse_where_positive(x: torch.Tensor) -> torch.Tensor:
    """1 / x where x > 0, else 0 (mass 0 stays kinematic); differentiable."""
    safe = torch.where(x > 0, x, torch.ones_like(x))
    return torch.where(x > 0, 1.0 / safe, torch.zeros_like(x))


def _param_values(model, name: str, value: torch.Tensor) -> list:
    """The (model array, value) pairs a user parameter writes; derived values computed in torch."""
    f = MODEL.get(name)
    if f is not None and f.minimum is not None and bool((value < f.minimum).any()):
        bad = float(value[value < f.minimum].flatten()[0])
        raise ValueError(f"params['{name}'] must be >= {f.minimum} [{f.unit}] (as the builder requires), got {bad}")
    if f is not None and f.maximum is not None and bool((value > f.maximum).any()):
        bad = float(value[value > f.maximum].flatten()[0])
        raise ValueError(f"params['{name}'] must be <= {f.maximum}, got {bad}")
    if name == "particle_radius" and bool((value > model.particle_max_radius).any()):
        # collision detection sizes its search (hash-grid cells, query radius) from finalize()'s radii
        raise ValueError(f"params['particle_radius'] exceeds the largest radius the model was built with "
                         f"({model.particle_max_radius} m): contacts would be missed; build the model with the "
                         "largest radius you will use")
    if name == "body_inv_mass":
        dynamic = torch.from_numpy(model.body_inv_mass.numpy() > 0).to(value.device)
        if bool((dynamic != (value > 0)).any()):
            # a kinematic body has no inertia to move with, and a dynamic one cannot be switched off here
            raise ValueError("params['body_inv_mass'] must be > 0 exactly where the model's bodies are dynamic "
                             "(0 for kinematic bodies)")
    derive = DERIVED.get(name)
    return [(name, value)] if derive is None else derive(model, value)


def _particle_mass(model, value):
    return [("particle_inv_mass", _inverse_where_positive(value))]


def _body_mass(model, value):
    dynamic = torch.from_numpy(model.body_inv_mass.numpy() > 0).to(value.device)
    if bool((dynamic & (value <= 0)).any()):
        raise ValueError("params['body_mass'] must be > 0 for dynamic bodies")
    return [("body_mass", value), ("body_inv_mass", torch.where(dynamic, _inverse_where_positive(value),
                                                                 torch.zeros_like(value)))]


def _body_inertia(model, value):
    dynamic = torch.from_numpy(model.body_inv_mass.numpy() > 0).to(value.device)
    if not torch.allclose(value, value.transpose(-1, -2), rtol=1e-5, atol=1e-8):
        raise ValueError("params['body_inertia'] must be symmetric")
    if bool(dynamic.any()) and not bool((torch.linalg.eigvalsh(value[dynamic].detach()) > 0).all()):
        raise ValueError("params['body_inertia'] must be positive definite for dynamic bodies")
    inverse = torch.zeros_like(value)
    inverse[dynamic] = torch.linalg.inv(value[dynamic])
    return [("body_inertia", value), ("body_inv_inertia", inverse)]


# the torch derivation of each parameter the registry lists as derived (inertia.rollout.params.DERIVED_PARAMS)
DERIVED = {"particle_mass": _particle_mass, "body_mass": _body_mass, "body_inertia": _body_inertia}


def run_rollout(rollout, states: dict, controls: dict, params):
    """Differentiable rollout over torch tensors; see :meth:`inertia.Rollout.__call__`."""

    model, layout = rollout.model, rollout.layout
    dev = model.torch_device
    T = rollout.frames
    views = rollout.world_views  # batched=True: leading world dimensions, reshaped to the flat layout here
    for name, t in states.items():
        if t is not None and name not in layout.state_names:
            if name.startswith("joint"):
                raise ValueError(f"{_STATE_ARGS[name]} was given but {type(rollout.solver).__name__} does not "
                                 "integrate joint coordinates (the FeatherstoneSolver does)"
                                 + ("" if rollout.model.joint_count else "; the model has no joints"))
            raise ValueError(f"{_STATE_ARGS[name]} was given but the model has no "
                             f"{'bodies' if name.startswith('body') else 'particles'}")
    if "joint_q" in layout.state_names and rollout.model.joint_count:
        for name in ("body_q", "body_qd"):
            t = states.get(name)
            if isinstance(t, torch.Tensor) and t.requires_grad:
                warnings.warn(f"{_STATE_ARGS[name]} requires grad, but with {type(rollout.solver).__name__} the "
                              f"jointed bodies follow joint_q0 / joint_qd0: their entries of {_STATE_ARGS[name]} are "
                              "not read and get a zero gradient (pass joint_q0 / joint_qd0)", RuntimeWarning,
                              stacklevel=3)
    for name, t in controls.items():
        if t is not None and name not in layout.control_names:
            raise ValueError(f"{name} was given but the model has no "
                             f"{'joints' if name.startswith('joint') else name.split('_')[0] + 's'}")
    if views is not None:
        states, controls = views.flatten_inputs(layout, T, states, controls, dev)
    x = {}
    for f in layout.state:
        t = states.get(f.name)
        if t is None:
            # the model's initial state (its joint coordinates computed from the initial poses)
            source = rollout.initial_joint_state()[f.name] if f.name.startswith("joint") else getattr(model, f.name)
            t = wp.to_torch(source).detach().clone().reshape(f.shape())
        t = _as_input(_STATE_ARGS[f.name], t, f.shape(), dev)
        if f.name == "joint_q":
            rollout.check_joint_quaternions(t)
        if f.name == "body_q" and bool(((torch.linalg.norm(t[:, 3:].detach(), dim=1) - 1.0).abs() > 1e-2).any()):
            # the first step normalizes them; far from unit length the input is a mistake, not rounding
            raise ValueError("body_q0 quaternions must have unit length (x, y, z, w); normalize them")
        x[f.name] = t
    x0 = layout.pack(layout.state, x, None, dev)
    u0 = None
    if any(controls.get(f.name) is not None for f in layout.control):
        u = {}
        for f in layout.control:
            t = controls.get(f.name)
            u[f.name] = (torch.zeros((T,) + f.shape(), dtype=torch.float32, device=dev) if t is None
                         else _as_input(f.name, t, (T,) + f.shape(), dev))
        u0 = layout.pack(layout.control, u, T, dev)

    params = dict(params or {})
    unknown = set(params) - set(rollout.param_names)
    if unknown:
        raise ValueError(f"params {sorted(unknown)} were not declared in Rollout(params=...); declared: "
                         f"{list(rollout.param_names)}")
    names, values = [], []
    for name in rollout.param_names:
        if name not in params:
            # Not passed: this call simulates with the model's current values. Snapshot them, so
            # that this graph's backward pass re-simulates with them even if a later call changes
            # the model's arrays (constants: no gradient).
            for warp_name in PARAM_ALIASES.get(name, (name,)):
                names.append(warp_name)
                values.append(wp.to_torch(getattr(model, warp_name)).detach().clone().reshape(
                    _param_shape(model, warp_name)))
            continue
        shape = _param_shape(model, PARAM_ALIASES.get(name, (name,))[0])
        value = params[name] if views is None else views.flatten_param(name, params[name], shape, dev)
        value = _as_input(f"params[{name!r}]", value, shape, dev)
        for warp_name, v in _param_values(model, name, value):
            names.append(warp_name)
            values.append(v)
    traj = _RolloutFunction.apply(rollout, tuple(names), x0, u0, *values)
    parts = Layout.unpack(layout.state, traj)
    if rollout.output == "final":
        parts = {k: v[0] for k, v in parts.items()}
    if views is not None:
        parts = views.unflatten_outputs(layout, parts)
    if model.body_count == 0:
        return parts["particle_q"], parts["particle_qd"]
    return RolloutResult(parts.get("particle_q"), parts.get("particle_qd"), parts["body_q"], parts["body_qd"],
                         parts.get("joint_q"), parts.get("joint_qd"))
