"""How many shape pairs and contact points a model can ever have: bounds that let a list skip the overflow selection.

Every contact list has a fixed capacity, and one that overflows keeps its deepest candidates through the
selection's second and third passes (``selection.py``). A list whose capacity holds every candidate the model
can have never overflows, and skips those passes (``OverflowSelection.run(most=...)``): for a robot that does not
collide with itself, standing on the ground, the pairs and contacts of its ``collide`` (the Unitree A1's 18
launches become 10). :func:`possible_pairs_and_contacts` counts them in NumPy, once per model
(``broad_phase.ShapeBroadPhase``), from the same rules as the broad phase's filter
``broad_phase.shapes_may_collide`` (tests/test_overflow.py checks the count against that filter on random scenes).
"""

from __future__ import annotations

import numpy as np

from ..types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_PLANE, GEO_SPHERE, SHAPE_FLAG_COLLIDE_SHAPES

# more candidate pairs than this (within each world, and with the shared shapes) are not counted one by one
PAIR_COUNT_MAX = 2_000_000  # (~100 MB of index arrays at most)
# the most contact points a pair of a shape with a plane gets, by the shape's type (narrow_phase's table,
# POINTS_PLANE: sphere centre; capsule end points; box corners; cylinder rims, 8 points and a searched one
# each); a mesh: its vertices
PLANE_PAIR_POINTS = {int(GEO_SPHERE): 1, int(GEO_CAPSULE): 2, int(GEO_BOX): 8, int(GEO_CYLINDER): 18}


def _pairs_within(groups: np.ndarray) -> tuple:
    """Index pairs (i < j) of positions within each run of equal values of the sorted ``groups``."""
    n = len(groups)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    ends = np.r_[starts[1:], n]
    run_end = np.repeat(ends, ends - starts)  # per position: the end of its run
    partners = run_end - np.arange(n) - 1  # positions after it in its run
    first = np.repeat(np.arange(n), partners)
    offsets = np.repeat(np.cumsum(partners) - partners, partners)
    second = first + 1 + (np.arange(len(first)) - offsets)
    return first, second


def possible_pairs_and_contacts(model) -> tuple:
    """(pairs, contact points): how many shape pairs can pass ``broad_phase.shapes_may_collide``, and how many contact
    points the narrow phase can make of them, at most, from the shapes as they are at the model's first
    ``collide`` (their bodies, worlds, collision groups and masks, flags and the bodies' exclusions; every body
    counted as dynamic, whatever its inverse mass, which a rollout may learn). The contact bound is given only
    where every such pair has a plane (a robot or a pile of boxes on the ground), else None; both are None
    where there are more than :data:`PAIR_COUNT_MAX` candidates to count.

    Like the plane table beside it, the bound is taken once: collision groups, masks, flags or exclusions
    changed in place after the first ``collide`` can let more pairs through than it counted, and a list that
    then overflows keeps an arbitrary subset instead of its deepest candidates (its count still runs past the
    capacity, so ``Contacts.check`` warns). Set them before the first ``collide``, or call
    ``model.collision.reset_broad_phase()`` after changing them."""
    types, flags, body = model.shape_type.numpy(), model.shape_flags.numpy(), model.shape_body.numpy()
    world = model.shape_world.numpy()
    group = model.shape_collision_group.numpy().astype(np.int64)
    mask = model.shape_collision_mask.numpy().astype(np.int64)
    offsets, excluded = model.body_exclusion_offsets.numpy(), model.body_exclusions.numpy()
    nb = max(model.body_count, 1)
    codes = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets)) * nb + excluded
    ids = np.flatnonzero((flags & int(SHAPE_FLAG_COLLIDE_SHAPES)) != 0)
    shared = ids[world[ids] < 0]
    own = ids[world[ids] >= 0]
    own = own[np.argsort(world[own], kind="stable")]
    sizes = np.bincount(world[own]) if len(own) else np.zeros(0, np.int64)
    if int((sizes * (sizes - 1) // 2).sum()) + len(own) * len(shared) + len(shared) ** 2 // 2 > PAIR_COUNT_MAX:
        return None, None
    i1, j1 = _pairs_within(world[own])  # same world
    i2, j2 = _pairs_within(np.zeros(len(shared), np.int64))  # shared with shared
    a = np.concatenate([own[i1], shared[i2], np.repeat(own, len(shared))])
    b = np.concatenate([own[j1], shared[j2], np.tile(shared, len(own))])
    ba, bb = body[a].astype(np.int64), body[b].astype(np.int64)
    ok = (ba != bb) & ((ba >= 0) | (bb >= 0))
    ok &= ((group[a] & mask[b]) != 0) & ((group[b] & mask[a]) != 0)
    both = (ba >= 0) & (bb >= 0)
    if len(codes):  # excluded only where the exclusion is recorded both ways (the kernel reads one)
        ok &= ~(both & np.isin(ba * nb + bb, codes) & np.isin(bb * nb + ba, codes))
    points = np.zeros(len(types), dtype=np.int64)
    for t, k in PLANE_PAIR_POINTS.items():
        points[types == t] = k
    meshes = np.flatnonzero(types == int(GEO_MESH))  # model.shape_meshes holds their meshes in this order
    for s, mesh in zip(meshes, model.shape_meshes):
        points[s] = int(mesh.points.shape[0])
    plane = types == int(GEO_PLANE)
    with_plane = ok & (plane[a] | plane[b])
    pairs = int(ok.sum())
    contacts = int((points[a] + points[b])[with_plane].sum())
    return pairs, (contacts if int(with_plane.sum()) == pairs else None)
