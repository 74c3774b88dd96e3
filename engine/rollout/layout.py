"""How a rollout packs a model's state and per-frame controls into flat float32 rows.

A rollout moves whole states between Warp and torch: checkpoints, outputs,
adjoints. Packing every state array the model has (particle positions and
velocities, body poses and velocities) into one float32 row per frame keeps
that code the same for particle, rigid and mixed models: a row is cut into
typed Warp views, one per array, with no copies. Controls (per-frame
particle forces, body wrenches, joint targets and efforts) are packed the
same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from ..schema import CONTROL, CONTROL_FIELDS, STATE, STATE_CHECKPOINT, STATE_FIELDS, STATE_VELOCITIES


@dataclass(frozen=True)
class Field:
    name: str  # the State / Control attribute
    dtype: type  # its Warp dtype
    width: int  # floats per entry
    count: int  # entries
    offset: int  # where it starts in a packed row

    @property
    def size(self) -> int:
        return self.width * self.count

    def shape(self) -> tuple:
        """The torch shape of one frame of this field (as users pass and receive it)."""
        return (self.count,) if self.width == 1 else (self.count, self.width)


def _width(dtype) -> int:
    """Floats per entry of a Warp dtype (1 for a scalar)."""
    return int(np.prod(getattr(dtype, "_shape_", ()) or (1,)))


def _layout(specs) -> tuple:
    fields, offset = [], 0
    for name, dtype, width, count in specs:
        if count:
            fields.append(Field(name, dtype, width, count, offset))
            offset += width * count
    return tuple(fields), offset


class Layout:
    """The packed state and control rows of one model."""

    # state arrays in row order (what a step reads of its input state: inertia.schema.STATE_CHECKPOINT, or
    # a solver's ``state_inputs``), the velocities among them (reported with the velocities in grad_norms),
    # and every control array
    STATE = tuple((f.name, f.dtype, _width(f.dtype)) for f in STATE_FIELDS if f.name in STATE_CHECKPOINT)
    VELOCITIES = STATE_VELOCITIES + ("joint_qd",)
    CONTROL = tuple((f.name, f.dtype, _width(f.dtype)) for f in CONTROL_FIELDS)
    CONTROL_NAMES = tuple(c[0] for c in CONTROL)

    def __init__(self, model, state_inputs=None):
        """``state_inputs``: the State arrays a step reads (default ``STATE_CHECKPOINT``; the
        FeatherstoneSolver adds the joint coordinates), packed in schema order."""
        names = STATE_CHECKPOINT if state_inputs is None else tuple(state_inputs)
        specs = tuple((f.name, f.dtype, _width(f.dtype)) for f in STATE_FIELDS if f.name in names)
        self.state, self.state_size = _layout((n, d, w, model.count(STATE[n].entity)) for n, d, w in specs)
        self.control, self.control_size = _layout(
            (n, d, w, model.count(CONTROL[n].entity)) for n, d, w in self.CONTROL)
        self.state_names = tuple(f.name for f in self.state)
        self.control_names = tuple(f.name for f in self.control)

    @staticmethod
    def views(fields, row: wp.array) -> dict:
        """Typed Warp views of a flat float32 Warp array ``row``, one per field (no copies).

        Slices of ``row`` reinterpreted with ``array.view``, so they keep a reference to it
        (graph capture resolves their addresses inside its allocation) and, when ``row`` has
        a gradient, their gradients are the matching parts of ``row.grad``.
        """
        out = {}
        for f in fields:
            part = row[f.offset: f.offset + f.size]
            out[f.name] = part if f.width == 1 else part.reshape((f.count, f.width)).view(f.dtype)
        return out

    def copy_state_in(self, state, row: wp.array) -> None:
        for name, view in self.views(self.state, row).items():
            wp.copy(getattr(state, name), view)

    def copy_state_out(self, row: wp.array, state) -> None:
        for name, view in self.views(self.state, row).items():
            wp.copy(view, getattr(state, name))

    def copy_grad_in(self, state, row: wp.array) -> None:
        for name, view in self.views(self.state, row).items():
            wp.copy(getattr(state, name).grad, view)

    def copy_grad_out(self, row: wp.array, state) -> None:
        for name, view in self.views(self.state, row).items():
            wp.copy(view, getattr(state, name).grad)

    def state_bytes(self, model) -> int:
        """Bytes of one State of ``model``: every declared state array (inertia.schema.STATE_FIELDS)."""
        return 4 * sum(_width(f.dtype) * model.count(f.entity) for f in STATE_FIELDS)

    def pack(self, fields, values: dict, rows: int | None, device) -> torch.Tensor:
        """``(rows, size)`` (or ``(size,)`` when ``rows`` is None) float32 from ``{name: tensor}`` (differentiable)."""
        parts = []
        for f in fields:
            lead = () if rows is None else (rows,)
            parts.append(values[f.name].reshape(lead + (f.size,)))
        if not parts:
            return torch.zeros(() if rows is None else (rows, 0), dtype=torch.float32, device=device)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def unpack(fields, packed: torch.Tensor) -> dict:
        """Views of a packed ``(..., size)`` tensor shaped per field as users see them."""
        lead = packed.shape[:-1]
        return {f.name: packed[..., f.offset: f.offset + f.size].reshape(lead + f.shape()) for f in fields}
