"""The parameters a rollout can differentiate with respect to: one registry for :class:`inertia.Rollout`,
its torch bridge and its batched (many-world) views.

Each entry is a name users pass in ``Rollout(params=...)``, the model arrays it is written to and the
entity its first dimension counts. Most are a model field declared with ``param=True`` in
:mod:`inertia.schema`, written as is. Three are user-facing forms of fields the kernels read, with the
derived values computed in torch by the bridge (so autograd chains their gradients back):
``particle_mass`` (written as ``particle_inv_mass``), ``body_mass`` (``body_mass`` and ``body_inv_mass``) and
``body_inertia`` (``body_inertia`` and ``body_inv_inertia``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schema import MODEL, MODEL_FIELDS


@dataclass(frozen=True)
class Param:
    name: str  # what users pass
    writes: tuple  # the model arrays it is written to (derived ones computed by the torch bridge)
    entity: str  # what its first dimension counts ("world" for gravity: one per world already)
    unit: str


# user-facing forms whose derived values the bridge computes (inertia.rollout.torch_bridge.DERIVED)
DERIVED_PARAMS = {
    "particle_mass": ("particle_inv_mass",),
    "body_mass": ("body_mass", "body_inv_mass"),
    "body_inertia": ("body_inertia", "body_inv_inertia"),
}

PARAMS = {f.name: Param(f.name, (f.name,), f.entity, f.unit) for f in MODEL_FIELDS if f.param}
for _name, _writes in DERIVED_PARAMS.items():
    _f = MODEL.get(_name) or MODEL[_writes[0]]
    PARAMS[_name] = Param(_name, _writes, _f.entity, _f.unit)
del _name, _writes, _f

# Model arrays a rollout can differentiate with respect to, written as they are
DIFFERENTIABLE_PARAMS = tuple(f.name for f in MODEL_FIELDS if f.param)
# user-facing name -> the model arrays it is written to, where that is not the name itself
PARAM_ALIASES = dict(DERIVED_PARAMS)


def warp_param_names(names) -> tuple:
    """The model arrays that the declared parameter ``names`` write."""
    out = []
    for n in names:
        out.extend(PARAMS[n].writes if n in PARAMS else (n,))
    return tuple(out)


def param_entity(name: str) -> str | None:
    """The entity a parameter's (or a written model array's) first dimension counts."""
    p = PARAMS.get(name)
    if p is not None:
        return p.entity
    f = MODEL.get(name)
    return None if f is None else f.entity


def idle_params(model, names) -> list:
    """Messages for declared parameters that some entries of ``model`` leave out of every force, so their
    gradient there is zero by construction: a shape's absolute ``ke`` / ``kd`` where it uses mass-scaled
    gains (``shape_material_tau`` > 0), its ``tau`` / ``zeta`` where it uses the absolute ones (tau = 0)."""
    out = []
    if model.shape_count == 0:
        return out
    tau = model.shape_material_tau.numpy()
    for name, idle, mode in (("shape_material_ke", tau > 0.0, "mass-scaled gains (shape_material_tau > 0)"),
                             ("shape_material_kd", tau > 0.0, "mass-scaled gains (shape_material_tau > 0)"),
                             ("shape_material_tau", tau == 0.0, "absolute gains (shape_material_tau = 0)"),
                             ("shape_material_zeta", tau == 0.0, "absolute gains (shape_material_tau = 0)")):
        if name in names and idle.any():
            out.append(f"{name}: {int(idle.sum())} of {len(tau)} shapes use {mode}, so {name} does not act on "
                       f"them and its gradient there is zero (see inertia.builder.shapes for the two modes)")
    return out
