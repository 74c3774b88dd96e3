"""Batched torch views of a many-world rollout: a leading ``num_worlds`` dimension on every input and output.

A model with ``num_worlds`` worlds simulates them all in one rollout; its
arrays hold the worlds' entities one after the other. When the worlds are
*uniform* (each has the same number of particles, bodies, joint degrees of
freedom, shapes on bodies, springs, triangles, edges and tetrahedra) and
*world-contiguous* (world w's entities of each kind come as one block, in
world order), the flat entity dimension of a state, control or parameter is
exactly ``num_worlds`` blocks of equal size. ``Rollout(..., batched=True)``
then takes and returns tensors with a leading world dimension instead:
``body_q0`` ``(W, B, 7)``, ``body_f`` ``(T, W, B, 6)``, ``joint_target_pos``
``(T, W, D)``, outputs ``body_q`` ``(T + 1, W, B, 7)`` and particle ``q``
``(T + 1, W, N, 3)`` (B, N, D per world). The conversion is a ``reshape`` in
torch around the packed rollout (a view; Warp copies nothing more), so
gradients flow through it unchanged.

Per-world parameters: an array of per-entity values (``particle_mass``,
``body_mass``, ``body_inertia``, ``spring_stiffness``, ``tri_materials``,
``shape_material_mu``, ``joint_target_ke``, ...) may be passed flat, as the
model holds it, or as ``(W, per_world, ...)``. Static shapes (world -1) are
shared by all worlds and have no per-world slot: with the per-world form they
keep the model's value (a constant for that call); pass the flat form to set
or differentiate them. ``gravity`` is ``(W, 3)`` either way: the model holds
one per world.
"""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from .inputs import STATE_ARGS as _STATE_ARGS, as_input as _as_input
from ..schema import CONTROL, STATE
from .params import param_entity


def _np(a) -> np.ndarray:
    return a.numpy() if isinstance(a, wp.array) else np.asarray(a)


def entity_worlds(model) -> dict:
    """The world index of every entity, per kind (host arrays; -1: shared by all worlds).

    Particles, bodies and static shapes carry their world; springs, triangles, edges and
    tetrahedra take the world of their particles (-2 when those disagree: an element that
    joins two worlds), joint coordinates and degrees of freedom the world of the joint's child body.
    """
    pw = _np(model.particle_world).astype(np.int64)
    bw = _np(model.body_world).astype(np.int64)

    def of_elements(indices, count):
        idx = _np(indices).reshape(count, -1).astype(np.int64) if count else np.zeros((0, 1), np.int64)
        w = pw[idx] if count else np.zeros((0, 1), np.int64)
        return np.where((w == w[:, :1]).all(axis=1), w[:, 0], -2)

    qd_start = _np(model.joint_qd_start).astype(np.int64)
    joint_world = bw[_np(model.joint_child).astype(np.int64)] if model.joint_count else np.zeros(0, np.int64)
    dof_world = np.repeat(joint_world, np.diff(qd_start)) if model.joint_count else np.zeros(0, np.int64)
    q_start = _np(model.joint_q_start).astype(np.int64)
    coord_world = np.repeat(joint_world, np.diff(q_start)) if model.joint_count else np.zeros(0, np.int64)
    return {
        "particle": pw,
        "body": bw,
        "joint_dof": dof_world,
        "joint_coord": coord_world,
        "shape": _np(model.shape_world).astype(np.int64),
        "spring": of_elements(model.spring_indices, model.spring_count),
        "triangle": of_elements(model.tri_indices, model.tri_count),
        "edge": of_elements(model.edge_indices, model.edge_count),
        "tetrahedron": of_elements(model.tet_indices, model.tet_count),
    }


def world_block_counts(model) -> dict:
    """Entities per world of each kind when the model's worlds are uniform and world-contiguous.

    Raises ``ValueError`` naming the first kind that is not (only shapes may be shared,
    world -1, and those may sit anywhere in the shape order).
    """
    W = int(model.num_worlds)
    if W < 1:
        raise ValueError(f"model.num_worlds must be >= 1, got {W}")
    counts = {}
    for kind, world in entity_worlds(model).items():
        own = world[world != -1] if kind == "shape" else world
        what = f"batched=True needs uniform, world-contiguous worlds, but the model's {kind.replace('_', ' ')}s"
        if (own == -2).any():
            raise ValueError(f"{what} include one whose particles belong to different worlds")
        if ((own < 0) | (own >= W)).any():
            bad = int(own[(own < 0) | (own >= W)][0])
            raise ValueError(f"{what} include one in world {bad}, outside 0..num_worlds-1 = 0..{W - 1}"
                             + (" (only static shapes may be shared by all worlds)" if bad == -1 else ""))
        per_world = np.bincount(own, minlength=W)
        if (per_world != per_world[0]).any():
            raise ValueError(f"{what} differ in number per world: {per_world.tolist()}")
        if not (np.diff(own) >= 0).all():
            first = int(np.flatnonzero(np.diff(own) < 0)[0])
            raise ValueError(f"{what} are not contiguous per world: one of world {int(own[first])} is followed "
                             f"by one of world {int(own[first + 1])}")
        counts[kind] = int(per_world[0])
    return counts


class WorldViews:
    """Converts between the batched torch shapes of a uniform many-world model and the flat ones.

    ``counts``: entities per world by kind (``"particle"``, ``"body"``, ``"joint_dof"``,
    ``"shape"``, ``"spring"``, ...). ``num_worlds``: W.
    """

    def __init__(self, model):
        self.model = model
        self.num_worlds = int(model.num_worlds)
        self.counts = world_block_counts(model)
        shape_world = _np(model.shape_world)
        own = np.flatnonzero(shape_world >= 0)
        # shapes interleaved with shared ones are scattered into place; otherwise a reshape suffices
        self._shape_slots = None if len(own) == model.shape_count else torch.from_numpy(own.astype(np.int64))

    def batched_shape(self, kind: str, trailing: tuple) -> tuple:
        return (self.num_worlds, self.counts[kind]) + tuple(trailing)

    @staticmethod
    def _field_kind(field) -> str:
        return (STATE.get(field.name) or CONTROL[field.name]).entity

    def flatten_inputs(self, layout, frames: int, states: dict, controls: dict, device):
        """Check batched state and control tensors and reshape them to the flat layout (views)."""
        flat_states, flat_controls = dict(states), dict(controls)
        for f in layout.state:
            t = states.get(f.name)
            if t is not None:
                shape = self.batched_shape(self._field_kind(f), f.shape()[1:])
                flat_states[f.name] = self._checked(_STATE_ARGS[f.name], t, shape, device).reshape(f.shape())
        for f in layout.control:
            t = controls.get(f.name)
            if t is not None:
                shape = (frames,) + self.batched_shape(self._field_kind(f), f.shape()[1:])
                flat_controls[f.name] = self._checked(f.name, t, shape, device).reshape((frames,) + f.shape())
        return flat_states, flat_controls

    def _checked(self, name: str, t, shape: tuple, device) -> torch.Tensor:
        if isinstance(t, torch.Tensor) and tuple(t.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {shape} (batched rollout: "
                             f"{self.num_worlds} worlds first, then per-world entries)")
        return _as_input(name, t, shape, device)

    def flatten_param(self, name: str, value, flat_shape: tuple, device):
        """A parameter given per world ``(W, per_world, ...)`` as the model's flat array (differentiable);
        the flat form passes through unchanged."""
        kind = param_entity(name)
        if not isinstance(value, torch.Tensor) or tuple(value.shape) == tuple(flat_shape):
            return value
        if kind == "world":  # gravity: the model's array is already one entry per world
            return value
        batched = self.batched_shape(kind, flat_shape[1:])
        if tuple(value.shape) != batched:
            raise ValueError(f"params[{name!r}] has shape {tuple(value.shape)}, expected {tuple(flat_shape)} (flat) "
                             f"or {batched} (per world)")
        value = _as_input(f"params[{name!r}]", value, batched, device)
        flat = value.reshape((-1,) + tuple(flat_shape[1:]))
        if kind != "shape" or self._shape_slots is None:
            return flat
        # static shapes shared by every world keep the model's values (constants for this call)
        base = wp.to_torch(getattr(self.model, name)).detach().clone().reshape(flat_shape).to(device)
        return base.index_put((self._shape_slots.to(device),), flat)

    def unflatten_outputs(self, layout, parts: dict) -> dict:
        """``{name: (..., count, width)}`` rollout outputs as ``(..., W, per_world, width)`` (views)."""
        out = {}
        for f in layout.state:
            t = parts[f.name]
            lead = t.shape[: t.dim() - len(f.shape())]
            out[f.name] = t.reshape(tuple(lead) + self.batched_shape(self._field_kind(f), f.shape()[1:]))
        return out
