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


import numpy as np
import warp as wp

from .schema import STATE_FIELDS, WORLD_OF


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


def _reset_entries_kernel(mask_dtype, value_dtype):
    """The reset kernel for one (mask, value) dtype pair.

    One definition, one kernel per pair, each with its own name: Warp 1.19's CPU graph capture keys the
    kernels it replays by name, so overloads of one generic kernel launched in the same graph replay as
    whichever was recorded first (checked: a vec3 launch replayed with the float32 code).
    """

    @wp.kernel(name=f"reset_entries_{mask_dtype.__name__}_{value_dtype.__name__}")
    def reset_entries(
        # In:
        mask: wp.array(dtype=mask_dtype),
        entry_world: wp.array(dtype=wp.int32),
        initial: wp.array(dtype=value_dtype),
        from_initial: int,
        # Data out:
        value: wp.array(dtype=value_dtype),
    ):
        i = wp.tid()
        w = entry_world[i]
        if w < 0:
            return
        if not world_selected(mask[w]):
            return
        if from_initial != 0:
            value[i] = initial[i]
        else:
            value[i] = value_dtype(0.0)

    return reset_entries


RESET_KERNELS = {(m, v): _reset_entries_kernel(m, v) for m in MASK_DTYPES
                 for v in (wp.vec3, wp.transform, wp.spatial_vector, wp.float32)}


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
    initial = {}
    if model.joint_count:  # the joint coordinates of the model's initial poses
        bodies = State()
        bodies.body_q, bodies.body_qd = model.body_q, model.body_qd
        bodies.joint_q, bodies.joint_qd = model._reset_joint_q, model._reset_joint_qd
        eval_ik(model, bodies)
        initial = {"joint_q": model._reset_joint_q, "joint_qd": model._reset_joint_qd}
    for f in STATE_FIELDS:
        dst = getattr(state, f.name)
        if dst is None or dst.shape[0] == 0:
            continue
        src = getattr(model, f.name) if f.source == "model" else initial.get(f.name, dst)
        wp.launch(RESET_KERNELS[m.dtype, f.dtype], dim=dst.shape[0], device=model.device, record_tape=False,
                  inputs=[m, getattr(model, WORLD_OF[f.entity]), src, int(f.source != "zero")], outputs=[dst])
