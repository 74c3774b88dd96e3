"""Particles against shapes (static, or on bodies at their current pose) and the ground.

A (particle, shape) pair becomes a contact candidate when the particle's
sphere comes within ``model.contact_margin`` of the shape, with the shape
placed by ``shape_world_pose`` (its body's current pose from
``state.body_q``). Shapes without ``SHAPE_FLAG_COLLIDE_PARTICLES`` are skipped.
Detection only selects pairs (not differentiated); the solvers recompute the
distances, and make the force act on the shape's body too. When there are more
candidates than ``soft_contact_max``, the deepest are kept (``selection.py``).
"""

import functools

import warp as wp

from ..kernel_args import ArgBundle
from ..types import PARTICLE_FLAG_ACTIVE, SHAPE_FLAG_COLLIDE_PARTICLES
from .sdf import ShapeGeometry, shape_geometry, shape_sdf_at_for, shape_types, shape_world_pose, type_tag
from .selection import Overflow, claim_slot, overflow_idle, overflow_selection

# detection selects candidates (integers) and is launched off the tape: no adjoint kernels to compile
wp.set_module_options({"enable_backward": False})


@wp.struct
class SoftContacts:
    """The particle-shape contact list of :class:`inertia.Contacts` (``soft_contact_*``) as kernels read it."""

    capacity: int  # soft_contact_max
    count: wp.array(dtype=wp.int32)  # contacts requested (may exceed the capacity)
    particle: wp.array(dtype=wp.int32)
    shape: wp.array(dtype=wp.int32)


# soft_contacts(contacts): the SoftContacts of contacts.soft_contact_*
soft_contacts = ArgBundle(SoftContacts, "soft_contact_", capacity="soft_contact_max")


@wp.struct
class ParticleShapeFilter:
    """Which (particle, shape) pairs may touch at all, and the margin within which they are kept (of a model)."""

    particle_flags: wp.array(dtype=wp.int32)
    particle_world: wp.array(dtype=wp.int32)
    shape_flags: wp.array(dtype=wp.int32)
    shape_world: wp.array(dtype=wp.int32)
    margin: float  # [m] beyond the particle's radius (model.contact_margin)


particle_shape_filter = ArgBundle(ParticleShapeFilter, margin="contact_margin")  # of a model


@wp.func
def may_touch(keep: ParticleShapeFilter, p: int, s: int):
    """An active particle and a shape that collides with particles, the shape shared or in the particle's world."""
    if (keep.particle_flags[p] & PARTICLE_FLAG_ACTIVE) == 0:
        return False
    if (keep.shape_flags[s] & SHAPE_FLAG_COLLIDE_PARTICLES) == 0:
        return False
    w = keep.shape_world[s]
    return w < 0 or w == keep.particle_world[p]


@functools.cache
def detect_particle_shape_kernel_for(types: frozenset):
    """``detect_particle_shape_kernel`` for the shape types in ``types`` (``sdf.shape_types(model)``), in a Warp
    module of its own: a scene compiles only the distance functions of the shapes it has."""
    sdf_at = shape_sdf_at_for(types)

    @wp.kernel(name=f"detect_particle_shape_kernel_{type_tag(types)}", module="unique", enable_backward=False)
    def detect_particle_shape_kernel(
        # Model:
        particle_radius: wp.array(dtype=float),
        shapes: ShapeGeometry,
        keep: ParticleShapeFilter,
        # Data in:
        particle_q: wp.array(dtype=wp.vec3),
        body_q: wp.array(dtype=wp.transform),
        # In:
        overflow: Overflow,
        # Data out:
        out: SoftContacts,
    ):
        p, s = wp.tid()
        if overflow_idle(overflow, out.count, out.capacity):
            return
        if not may_touch(keep, p, s):
            return
        margin = keep.margin
        r = particle_radius[p]
        sd = wp.static(sdf_at)(shapes, s, shape_world_pose(shapes, body_q, s), particle_q[p], r + margin + 1.0)
        gap = sd[3] - r  # negative: the particle overlaps the shape
        if gap < margin:
            slot = claim_slot(overflow, out.count, out.capacity, gap)
            if slot >= 0:
                out.particle[slot] = p
                out.shape[slot] = s

    wp.set_module_options({"enable_backward": False}, detect_particle_shape_kernel.module)  # the module's too
    return detect_particle_shape_kernel


def detect_particle_shape_contacts(model, state, contacts) -> None:
    """Stage: every (particle, shape) pair closer than radius + margin becomes a contact candidate (the deepest
    ``soft_contact_max`` of them when there are more: ``selection.py``)."""
    if model.particle_count == 0 or model.shape_count == 0:
        return
    out = soft_contacts(contacts)
    inputs = [model.particle_radius, shape_geometry(model), particle_shape_filter(model), state.particle_q,
              state.body_q]

    kernel = detect_particle_shape_kernel_for(shape_types(model))

    def emit(overflow):
        # detection only selects candidates (integers): off the tape, so a backward pass does not replay it
        wp.launch(kernel, dim=(model.particle_count, model.shape_count), record_tape=False,
                  inputs=[*inputs, overflow], outputs=[out], device=model.device)

    overflow_selection(model).run(emit, contacts.soft_contact_count, contacts.soft_contact_max,
                                  most=model.particle_count * model.shape_count)
