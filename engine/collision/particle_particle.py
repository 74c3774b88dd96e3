"""Particle-particle broad phase through ``wp.HashGrid``: each close unordered pair once (i < j)."""

import warp as wp

from ..types import PARTICLE_FLAG_ACTIVE


@wp.func
def shares_element(i: int, j: int, offsets: wp.array(dtype=wp.int32), neighbours: wp.array(dtype=wp.int32)):
    for k in range(offsets[i], offsets[i + 1]):
        if neighbours[k] == j:
            return True
    return False


@wp.kernel
def detect_particle_pairs_kernel(
    grid: wp.uint64,
    particle_q: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    exclusion_offsets: wp.array(dtype=wp.int32),
    exclusions: wp.array(dtype=wp.int32),
    max_radius: float,
    margin: float,
    pair_max: int,
    pair_count: wp.array(dtype=wp.int32),
    pairs: wp.array(dtype=wp.vec2i),
):
    i = wp.tid()
    if (particle_flags[i] & PARTICLE_FLAG_ACTIVE) == 0:
        return
    xi = particle_q[i]
    ri = particle_radius[i]
    query = wp.hash_grid_query(grid, xi, ri + max_radius + margin)
    j = int(0)
    while wp.hash_grid_query_next(query, j):
        if j > i and (particle_flags[j] & PARTICLE_FLAG_ACTIVE) != 0 and particle_world[j] == particle_world[i]:
            if wp.length(particle_q[j] - xi) < ri + particle_radius[j] + margin:
                if not shares_element(i, j, exclusion_offsets, exclusions):
                    slot = wp.atomic_add(pair_count, 0, 1)
                    if slot < pair_max:
                        pairs[slot] = wp.vec2i(i, j)


def detect_particle_pairs(model, state, contacts) -> None:
    """Stage: rebuild the hash grid on the current positions, then list the close pairs."""
    if not model.particle_collide or model.particle_count < 2 or contacts.particle_pair_max == 0:
        return
    if contacts.particle_grid is None:
        d = contacts.grid_dim
        contacts.particle_grid = wp.HashGrid(d, d, d, device=model.device)
    cell = 2.0 * model.particle_max_radius + model.contact_margin
    contacts.particle_grid.build(state.particle_q, cell)
    wp.launch(
        detect_particle_pairs_kernel,
        dim=model.particle_count,
        inputs=[
            contacts.particle_grid.id, state.particle_q, model.particle_radius, model.particle_flags,
            model.particle_world, model.particle_exclusion_offsets, model.particle_exclusions,
            model.particle_max_radius, model.contact_margin, contacts.particle_pair_max,
        ],
        outputs=[contacts.particle_pair_count, contacts.particle_pair],
        device=model.device,
    )
