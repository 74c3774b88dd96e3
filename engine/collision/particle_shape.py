"""Particles against shapes (static, or on bodies at their current pose) and the ground.

A (particle, shape) pair becomes a contact candidate when the particle's
sphere comes within ``model.contact_margin`` of the shape, with the shape
placed by ``shape_world_transform`` (its body's current pose from
``state.body_q``). Shapes without ``SHAPE_FLAG_COLLIDE_PARTICLES`` are skipped.
Detection only selects pairs (not differentiated); the solvers recompute the
distances, and make the force act on the shape's body too.
"""

import warp as wp

from ..types import PARTICLE_FLAG_ACTIVE, SHAPE_FLAG_COLLIDE_PARTICLES
from .sdf import shape_sdf_world, shape_world_transform


@wp.kernel
def detect_particle_shape_kernel(
    particle_q: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    shape_body: wp.array(dtype=wp.int32),
    shape_type: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_source_ptr: wp.array(dtype=wp.uint64),
    shape_world: wp.array(dtype=wp.int32),
    shape_flags: wp.array(dtype=wp.int32),
    margin: float,
    contact_max: int,
    contact_count: wp.array(dtype=wp.int32),
    contact_particle: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
):
    p, s = wp.tid()
    if (particle_flags[p] & PARTICLE_FLAG_ACTIVE) == 0:
        return
    if (shape_flags[s] & SHAPE_FLAG_COLLIDE_PARTICLES) == 0:
        return
    w = shape_world[s]
    if w >= 0 and w != particle_world[p]:
        return
    reach = particle_radius[p] + margin
    X = shape_world_transform(shape_body, shape_transform, body_q, s)
    sd = shape_sdf_world(shape_type[s], shape_scale[s], shape_source_ptr[s], X, particle_q[p], reach + 1.0)
    if sd[3] < reach:
        slot = wp.atomic_add(contact_count, 0, 1)
        if slot < contact_max:
            contact_particle[slot] = p
            contact_shape[slot] = s


def detect_particle_shape_contacts(model, state, contacts) -> None:
    """Stage: every (particle, shape) pair closer than radius + margin becomes a contact candidate."""
    if model.particle_count == 0 or model.shape_count == 0:
        return
    # detection only selects candidates (integers): off the tape, so a backward pass does not replay it
    wp.launch(
        detect_particle_shape_kernel,
        dim=(model.particle_count, model.shape_count),
        record_tape=False,
        inputs=[
            state.particle_q, model.particle_radius, model.particle_flags, model.particle_world, state.body_q,
            model.shape_body, model.shape_type, model.shape_transform, model.shape_scale, model.shape_source_ptr,
            model.shape_world, model.shape_flags, model.contact_margin, contacts.soft_contact_max,
        ],
        outputs=[contacts.soft_contact_count, contacts.soft_contact_particle, contacts.soft_contact_shape],
        device=model.device,
    )
