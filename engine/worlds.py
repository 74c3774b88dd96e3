"""Many worlds in one Model: the world layout, per-world parameters and the per-world reset.

A model built with ``ModelBuilder.replicate`` / ``add_builder`` holds
``model.num_worlds`` worlds that share every array (one launch simulates them
all) but never interact: contacts, elements and joints stay inside a world;
static shapes of world -1 (a ground plane) are met by every world.

**World of each entity.** ``particle_world``, ``body_world``, ``shape_world``
(-1: shared static shape), ``joint_world``, ``spring_world``, ``tri_world``,
``edge_world``, ``tet_world`` (int32 ``wp.array``s), and per entry of
``State.joint_q`` / ``joint_qd`` (and the Control's per-dof arrays)
``joint_coord_world`` / ``joint_dof_world``.

**Layout.** ``replicate`` appends each copy's entities in one block, world by
world, after what the outer builder held. :meth:`inertia.Model.world_counts`
returns the per-world sizes ``{"particles", "bodies", "joints",
"joint_coords", "joint_dofs"}`` when every world holds the same numbers and
the entities are sorted by world (else None); world ``w``'s bodies are then
``body_q[w * bodies:(w + 1) * bodies]``, and any per-body array reshapes to
``(num_worlds, bodies, ...)`` (likewise particles, joints, coordinates, dofs).
Shapes follow the same rule after the outer builder's own shapes (a shared
ground plane first): ``shape_world`` says which is which.

**Per-world parameters (domain randomization).** Every material and inertial
parameter is an array with one entry per entity, so giving each world its own
value is writing that world's slice (host ``assign`` or a kernel; the solvers
read the arrays every step, and they are differentiable where listed in
``inertia.DIFFERENTIABLE_PARAMS``):

- gravity: ``model.gravity``, one vec3 [m/s^2] per world, e.g.
  ``model.gravity.assign(np.array(g_per_world, np.float32).reshape(num_worlds, 3))``;
- masses and inertias: ``body_mass`` with ``body_inv_mass``, ``body_inertia`` with
  ``body_inv_inertia`` (the kernels read the inverses: set both of a pair),
  ``particle_mass`` with ``particle_inv_mass``;
- friction and contact: ``shape_material_mu``, ``shape_material_ke`` / ``_kd``,
  ``shape_material_restitution`` per shape (a pair's contact uses both shapes'
  values, so a shared ground's values apply to every world: randomize the
  world's own shapes);
- stiffness: ``spring_stiffness`` / ``spring_damping``, ``tri_materials``,
  ``edge_bending_properties``, ``tet_materials``, joint drive and limit gains
  ``joint_target_ke`` / ``_kd``, ``joint_limit_ke`` / ``_kd`` (per dof).

Particles and bodies always belong to a world >= 0; the integrators read
``gravity[world]`` (a world index below 0 would read world 0's).

**Per-world reset.** :func:`reset_worlds` (``model.reset_worlds(state,
mask)``) writes the model's initial particle and body positions and velocities
into the masked worlds of a state (zeroing their ``particle_f`` / ``body_f``)
and their joint coordinates computed from those poses; other worlds are not
touched. Kernels only: with ``mask`` a device array it reads nothing back and
can be captured with ``wp.ScopedCapture``. Not differentiable (it overwrites
state): it raises under a recording ``wp.Tape``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp

from .types import JOINT_COORDS

wp.set_module_options({"enable_backward": False})

MASK_DTYPES = (wp.bool, wp.int32, wp.uint8)


@wp.func
def world_selected(v: wp.bool):
    return v


@wp.func
def world_selected(v: wp.int32):
    return v != 0


@wp.func
def world_selected(v: wp.uint8):
    return v != wp.uint8(0)


@wp.kernel
def reset_particles_kernel(
    mask: wp.array(dtype=Any),
    particle_world: wp.array(dtype=wp.int32),
    q0: wp.array(dtype=wp.vec3),
    qd0: wp.array(dtype=wp.vec3),
    q: wp.array(dtype=wp.vec3),
    qd: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
):
    p = wp.tid()
    w = particle_world[p]
    if w < 0:
        return
    if not world_selected(mask[w]):
        return
    q[p] = q0[p]
    qd[p] = qd0[p]
    f[p] = wp.vec3(0.0)


@wp.kernel
def reset_bodies_kernel(
    mask: wp.array(dtype=Any),
    body_world: wp.array(dtype=wp.int32),
    q0: wp.array(dtype=wp.transform),
    qd0: wp.array(dtype=wp.spatial_vector),
    q: wp.array(dtype=wp.transform),
    qd: wp.array(dtype=wp.spatial_vector),
    f: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    w = body_world[b]
    if w < 0:
        return
    if not world_selected(mask[w]):
        return
    q[b] = q0[b]
    qd[b] = qd0[b]
    f[b] = wp.spatial_vector()


@wp.kernel
def reset_values_kernel(
    mask: wp.array(dtype=Any),
    entry_world: wp.array(dtype=wp.int32),
    src: wp.array(dtype=float),
    dst: wp.array(dtype=float),
):
    i = wp.tid()
    w = entry_world[i]
    if w < 0:
        return
    if not world_selected(mask[w]):
        return
    dst[i] = src[i]


for _t in MASK_DTYPES:
    wp.overload(reset_particles_kernel, {"mask": wp.array(dtype=_t)})
    wp.overload(reset_bodies_kernel, {"mask": wp.array(dtype=_t)})
    wp.overload(reset_values_kernel, {"mask": wp.array(dtype=_t)})


# ---------------------------------------------------------------------------------------------- layout (host)
def add_world_arrays(m, b) -> None:
    """Give model ``m`` (particles, elements, joints already in place) the world arrays of builder ``b``."""
    dev = m.device

    def ints(a):
        a = np.asarray(a, dtype=np.int32).reshape(-1)
        return wp.array(a, dtype=wp.int32, device=dev)

    pw = np.asarray(b.particle_world, dtype=np.int64)
    for name, idx, k in (("spring", b.spring_indices, 2), ("tri", b.tri_indices, 3), ("edge", b.edge_indices, 4),
                         ("tet", b.tet_indices, 4)):
        first = np.asarray(idx, dtype=np.int64).reshape(-1, k)[:, 0]  # an element's particles share a world
        setattr(m, f"{name}_world", ints(pw[first]))
    jw = np.asarray(b.joint_world, dtype=np.int64)
    table = np.array([JOINT_COORDS[t] for t in range(len(JOINT_COORDS))], dtype=np.int64)
    per_joint = table[np.asarray(b.joint_type, dtype=np.int64)].reshape(-1, 2)
    m.joint_coord_world = ints(np.repeat(jw, per_joint[:, 0]))
    m.joint_dof_world = ints(np.repeat(jw, per_joint[:, 1]))
    m._world_counts = _uniform_world_counts(m.num_worlds, pw, np.asarray(b.body_world, dtype=np.int64), jw,
                                            per_joint)
    # the joint coordinates of the initial poses, recomputed by every reset (the initial poses may be edited)
    m._reset_joint_q = wp.zeros(m.joint_coord_count, dtype=float, device=dev)
    m._reset_joint_qd = wp.zeros(m.joint_dof_count, dtype=float, device=dev)


def _uniform_world_counts(num_worlds: int, particle_world, body_world, joint_world, per_joint):
    out = {}
    for name, worlds, weights in (("particles", particle_world, None), ("bodies", body_world, None),
                                  ("joints", joint_world, None), ("joint_coords", joint_world, per_joint[:, 0]),
                                  ("joint_dofs", joint_world, per_joint[:, 1])):
        if len(worlds) and (worlds.min() < 0 or worlds.max() >= num_worlds or np.any(np.diff(worlds) < 0)):
            return None  # shared, out of range, or not sorted by world
        counts = np.bincount(worlds, weights=weights, minlength=num_worlds) if len(worlds) else np.zeros(num_worlds)
        if np.any(counts != counts[0]):
            return None
        out[name] = int(counts[0])
    return out


# ---------------------------------------------------------------------------------------------- reset
def _mask_array(model, mask) -> wp.array:
    w = model.num_worlds
    if isinstance(mask, wp.array):
        if mask.dtype not in MASK_DTYPES:
            names = ", ".join(t.__name__ for t in MASK_DTYPES)
            raise TypeError(f"reset_worlds: mask dtype {mask.dtype.__name__} is not one of {names}")
        if mask.shape != (w,):
            raise ValueError(f"reset_worlds: mask must have shape ({w},) (one entry per world), got {mask.shape}")
        if str(mask.device) != str(model.device):
            raise ValueError(f"reset_worlds: mask is on {mask.device}, the model on {model.device}")
        return mask
    m = np.asarray(mask)
    if m.shape != (w,):
        raise ValueError(f"reset_worlds: mask must have {w} entries (one per world), got shape {m.shape}")
    if m.dtype.kind not in "biu":
        raise TypeError(f"reset_worlds: mask must hold booleans or integers, got dtype {m.dtype}")
    return wp.array((m != 0).astype(np.int32), dtype=wp.int32, device=model.device)


def reset_worlds(model, state, mask) -> None:
    """Write the model's initial state into the worlds of ``state`` selected by ``mask``; leave the others.

    Args:
        state: a State of ``model`` (written in place).
        mask: one entry per world, non-zero / True to reset it: a ``wp.array`` of bool, int32 or
            uint8 on the model's device (nothing is read back: capturable), or anything NumPy reads
            (copied to the device on each call).

    Resets ``particle_q``, ``particle_qd`` (to ``model.particle_q`` / ``particle_qd``), ``body_q``,
    ``body_qd`` (to ``model.body_q`` / ``body_qd``), zeroes ``particle_f`` / ``body_f``, and sets
    ``joint_q`` / ``joint_qd`` to the coordinates of the initial poses (``eval_ik`` of the model's
    initial bodies). Not differentiable: raises under a recording ``wp.Tape``.
    """
    from .kinematics import eval_ik
    from .state import State
    from .autodiff.tape import recording_tape

    if recording_tape() is not None:
        raise RuntimeError("reset_worlds is not differentiable (it overwrites the state): call it outside a "
                           "recording wp.Tape")
    if state.particle_count != model.particle_count or state.body_count != model.body_count:
        raise ValueError(f"reset_worlds: the state has {state.particle_count} particles and {state.body_count} "
                         f"bodies, the model {model.particle_count} and {model.body_count}: not a state of it")
    m = _mask_array(model, mask)
    dev = model.device
    if model.particle_count:
        wp.launch(reset_particles_kernel, dim=model.particle_count, device=dev, record_tape=False,
                  inputs=[m, model.particle_world, model.particle_q, model.particle_qd],
                  outputs=[state.particle_q, state.particle_qd, state.particle_f])
    if model.body_count:
        wp.launch(reset_bodies_kernel, dim=model.body_count, device=dev, record_tape=False,
                  inputs=[m, model.body_world, model.body_q, model.body_qd],
                  outputs=[state.body_q, state.body_qd, state.body_f])
    if model.joint_count:
        initial = State()
        initial.body_q, initial.body_qd = model.body_q, model.body_qd
        initial.joint_q, initial.joint_qd = model._reset_joint_q, model._reset_joint_qd
        eval_ik(model, initial)
        for src, dst, world in ((model._reset_joint_q, state.joint_q, model.joint_coord_world),
                                (model._reset_joint_qd, state.joint_qd, model.joint_dof_world)):
            if src.shape[0]:
                wp.launch(reset_values_kernel, dim=src.shape[0], device=dev, record_tape=False,
                          inputs=[m, world, src], outputs=[dst])
