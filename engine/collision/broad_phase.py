"""Shape-shape broad phase: the unordered shape pairs whose bounding boxes come within the contact margin.

Each collidable shape gets a world AABB from its current pose (its body's pose
times its local pose): exact per type for spheres, boxes, capsules and
cylinders, the bounding sphere ``model.shape_radius`` about the origin for
meshes, grown by ``model.rigid_contact_margin`` on every side.

Finite shapes go through a sweep and prune along one axis, the axis along
which the shape centres spread most within their worlds (summed over worlds,
chosen on the device each call: how the worlds are laid out does not change
how any one of them is swept). The sort
key is (world, lower bound on that axis), so the worlds of a many-world model
are swept separately even when they sit on top of each other; shapes of the
shared world -1 are met by every world through a second sweep over their
segment, which stops early with the running maximum of its upper bounds. Work
is a sort (a counting kernel up to ``RANK_SORT_MAX`` shapes, a radix sort
beyond) plus the pairs that overlap along the axis (not n^2: 1,000 boxes on a
grid test a few tens of thousands of pairs, not 500,000).

Planes (infinite, always static) are not swept: every finite shape is tested
against the shared planes and its own world's (a plane per world stays linear
in the number of worlds), and kept when its AABB reaches the plane's positive
side within the margin.

A pair is kept (written once into ``contacts.rigid_pair`` as (lower index,
higher index)) when the AABBs overlap and all of these filters pass:

- both shapes have ``SHAPE_FLAG_COLLIDE_SHAPES``;
- they are on different bodies (two static shapes share "body" -1);
- at least one is on a dynamic body (``body_inv_mass > 0``): static and
  kinematic shapes never need contact between themselves;
- worlds: ``shape_world`` -1 (shared) meets every world, otherwise only equal worlds;
- collision bits: ``(group_a & mask_b) != 0`` and ``(group_b & mask_a) != 0``;
- the body pair is not in ``model.body_exclusion_offsets`` / ``body_exclusions``
  (a joint's parent and child unless the joint was added with ``collide_parent=True``).

``rigid_pair_count`` counts every pair requested, also past the capacity, so
``Contacts.check_overflow`` reports an undersized buffer; the list then keeps the
pairs whose AABBs overlap most (``selection.py``). The buffers of the
sweep belong to the model (allocated on its first ``collide``), so that
``collide`` allocates nothing afterwards and can be captured in a graph.

Not differentiated: the broad phase only selects pairs (its kernels are not
recorded on a ``wp.Tape``); the solvers recompute every contact's geometry
from the current poses, and the gradients flow through that.
"""

from __future__ import annotations


import numpy as np
import warp as wp

from ..diagnostics import warn
from ..kernel_args import ArgBundle
from ..types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_PLANE, GEO_SPHERE, SHAPE_FLAG_COLLIDE_SHAPES
from .candidate_bounds import possible_pairs_and_contacts
from .contact_sink import PairList, append_pair, rigid_pairs
from .selection import Overflow, overflow_idle, overflow_selection
from .sdf import ShapeGeometry, shape_geometry, shape_world_pose

wp.set_module_options({"enable_backward": False})

# sort key of shapes that are not swept (planes, shapes that do not collide with shapes): after every world
NOT_SWEPT = wp.constant(wp.int64(1 << 62))
SEGMENT_BITS = wp.constant(wp.int64(32))
RANK_SORT_MAX = 128  # up to this many shapes the sweep's sort is a counting kernel, beyond it a radix sort
LOW_MASK = wp.constant(wp.int64(0xFFFFFFFF))


@wp.struct
class ShapeFilter:
    """What decides whether two shapes may collide at all (see the module docstring)."""

    shape_body: wp.array(dtype=wp.int32)
    shape_flags: wp.array(dtype=wp.int32)
    shape_world: wp.array(dtype=wp.int32)
    shape_group: wp.array(dtype=wp.int32)
    shape_mask: wp.array(dtype=wp.int32)
    body_inv_mass: wp.array(dtype=float)
    exclusion_offsets: wp.array(dtype=wp.int32)
    exclusions: wp.array(dtype=wp.int32)


# of a model: filled from its current arrays at each collide (a Rollout that learns body masses gives
# body_inv_mass a gradient array after the first collide may have run)
shape_filter = ArgBundle(ShapeFilter, shape_group="shape_collision_group", shape_mask="shape_collision_mask",
                         exclusion_offsets="body_exclusion_offsets", exclusions="body_exclusions")


@wp.func
def body_is_dynamic(f: ShapeFilter, body: int):
    return body >= 0 and f.body_inv_mass[body] > 0.0


@wp.func
def bodies_excluded(f: ShapeFilter, a: int, b: int):
    for k in range(f.exclusion_offsets[a], f.exclusion_offsets[a + 1]):
        if f.exclusions[k] == b:
            return True
    return False


@wp.func
def shapes_may_collide(f: ShapeFilter, a: int, b: int):
    """The filters of the module docstring, for shapes ``a`` and ``b`` (everything but their geometry)."""
    if (f.shape_flags[a] & SHAPE_FLAG_COLLIDE_SHAPES) == 0 or (f.shape_flags[b] & SHAPE_FLAG_COLLIDE_SHAPES) == 0:
        return False
    ba = f.shape_body[a]
    bb = f.shape_body[b]
    if ba == bb:
        return False
    if not (body_is_dynamic(f, ba) or body_is_dynamic(f, bb)):
        return False
    wa = f.shape_world[a]
    wb = f.shape_world[b]
    if wa >= 0 and wb >= 0 and wa != wb:
        return False
    if (f.shape_group[a] & f.shape_mask[b]) == 0 or (f.shape_group[b] & f.shape_mask[a]) == 0:
        return False
    if ba >= 0 and bb >= 0:
        if bodies_excluded(f, ba, bb):
            return False
    return True


@wp.func
def abs_vec(v: wp.vec3):
    return wp.vec3(wp.abs(v[0]), wp.abs(v[1]), wp.abs(v[2]))


@wp.func
def shape_half_extent(geo_type: int, scale: wp.vec3, radius: float, rot: wp.quat):
    """Half extents [m] of the world AABB of a shape rotated by ``rot`` (about its origin)."""
    ex = wp.quat_rotate(rot, wp.vec3(1.0, 0.0, 0.0))
    ey = wp.quat_rotate(rot, wp.vec3(0.0, 1.0, 0.0))
    ez = wp.quat_rotate(rot, wp.vec3(0.0, 0.0, 1.0))
    h = wp.vec3(radius)  # meshes (and anything else): the bounding sphere
    if geo_type == GEO_SPHERE:
        h = wp.vec3(scale[0])
    elif geo_type == GEO_BOX:
        h = abs_vec(ex) * scale[0] + abs_vec(ey) * scale[1] + abs_vec(ez) * scale[2]
    elif geo_type == GEO_CAPSULE:
        h = abs_vec(ez) * scale[1] + wp.vec3(scale[0])
    elif geo_type == GEO_CYLINDER:
        # a disc of radius r normal to a reaches r sqrt(1 - a_i^2) along axis i
        disc = wp.vec3(wp.sqrt(wp.max(1.0 - ez[0] * ez[0], 0.0)), wp.sqrt(wp.max(1.0 - ez[1] * ez[1], 0.0)),
                       wp.sqrt(wp.max(1.0 - ez[2] * ez[2], 0.0)))
        h = abs_vec(ez) * scale[1] + disc * scale[0]
    return h


@wp.struct
class SortedBounds:
    """The sweep's buffers (of the model's ShapeBroadPhase): the AABB and key kernels fill them, the sort orders
    ``keys`` / ``values``, the pair search reads them."""

    keys: wp.array(dtype=wp.int64)  # sorted (world + 1, lower bound along the axis) keys
    values: wp.array(dtype=wp.int32)  # the shape of each sorted key
    upper_keys: wp.array(dtype=wp.int64)  # per shape: its (world + 1, upper bound) key
    aabb_lower: wp.array(dtype=wp.vec3)  # per shape [m]
    aabb_upper: wp.array(dtype=wp.vec3)
    sweep_axis: wp.array(dtype=wp.int32)  # [0]: the axis swept along


sorted_bounds = ArgBundle(SortedBounds)  # of the model's ShapeBroadPhase buffers


@wp.func
def is_swept(shapes: ShapeGeometry, f: ShapeFilter, s: int):
    return shapes.type[s] != GEO_PLANE and (f.shape_flags[s] & SHAPE_FLAG_COLLIDE_SHAPES) != 0


@wp.kernel
def shape_aabb_kernel(
    # Model:
    shapes: ShapeGeometry,
    f: ShapeFilter,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    # In:
    margin: float,
    # Data out:
    sweep: SortedBounds,
    centre_moments: wp.array2d(dtype=wp.float64),
):
    """Each shape's world AABB (``sweep.aabb_lower`` / ``aabb_upper``) and the moments of the swept centres."""
    s = wp.tid()
    X = shape_world_pose(shapes, body_q, s)
    c = wp.transform_get_translation(X)
    h = shape_half_extent(shapes.type[s], shapes.scale[s], shapes.radius[s], wp.transform_get_rotation(X))
    h = h + wp.vec3(margin)
    sweep.aabb_lower[s] = c - h
    sweep.aabb_upper[s] = c + h
    if is_swept(shapes, f, s):
        # first and second moments of the centres, per world (row world + 1): the sweep axis is the one of
        # largest spread within the worlds, so a world is swept alike however the others are laid out
        w = f.shape_world[s] + 1
        for i in range(3):
            x = wp.float64(c[i])
            wp.atomic_add(centre_moments, w, i, x)
            wp.atomic_add(centre_moments, w, 3 + i, x * x)
        wp.atomic_add(centre_moments, w, 6, wp.float64(1.0))


@wp.kernel
def sweep_axis_kernel(
    # Data in:
    centre_moments: wp.array2d(dtype=wp.float64),
    # In:
    worlds: int,
    # Data out:
    sweep_axis: wp.array(dtype=wp.int32),
):
    """The axis of the largest summed within-world variance of the centres (world -1's only if it is alone)."""
    spread = wp.vec3d()
    for w in range(1, worlds + 1):
        n = wp.max(centre_moments[w, 6], wp.float64(1.0))
        for i in range(3):
            spread[i] = spread[i] + centre_moments[w, 3 + i] - centre_moments[w, i] * centre_moments[w, i] / n
    if spread[0] + spread[1] + spread[2] <= wp.float64(0.0):
        n = wp.max(centre_moments[0, 6], wp.float64(1.0))
        for i in range(3):
            spread[i] = centre_moments[0, 3 + i] - centre_moments[0, i] * centre_moments[0, i] / n
    axis = int(0)
    best = wp.float64(-1.0)
    for i in range(3):
        if spread[i] > best:
            best = spread[i]
            axis = i
    sweep_axis[0] = axis


@wp.func
def ordered_bits(x: float):
    """An int64 in [0, 2^32) that orders as the float ``x`` does (IEEE bits, negatives flipped)."""
    if x == 0.0:
        x = 0.0  # -0 and +0 must get one key: touching bounds would otherwise be ordered apart
    bits = wp.cast(x, wp.int32)
    if bits < 0:
        bits = bits ^ 0x7FFFFFFF
    return wp.int64(bits) + wp.int64(2147483648)


@wp.kernel
def sweep_keys_kernel(
    # Model:
    shapes: ShapeGeometry,
    f: ShapeFilter,
    # Data out:
    sweep: SortedBounds,
):
    """The sort's (world + 1, lower bound) key and (world + 1, upper bound) key of each shape, from its AABB."""
    s = wp.tid()
    axis = sweep.sweep_axis[0]
    sweep.values[s] = s
    if not is_swept(shapes, f, s):
        sweep.keys[s] = NOT_SWEPT
        sweep.upper_keys[s] = NOT_SWEPT
        return
    segment = wp.int64(f.shape_world[s] + 1) << SEGMENT_BITS  # world -1 first, then 0, 1, ...
    sweep.keys[s] = segment + ordered_bits(sweep.aabb_lower[s][axis])
    sweep.upper_keys[s] = segment + ordered_bits(sweep.aabb_upper[s][axis])


@wp.kernel
def rank_sort_kernel(
    # In:
    n: int,
    # Data out:
    keys: wp.array(dtype=wp.int64),
    values: wp.array(dtype=wp.int32),
):
    """Sort keys[:n] (with their values) into keys[n:2n] by counting, for each, the keys before it.

    O(n^2) work in one launch: for the few shapes of a small scene it beats a radix sort, whose fixed
    cost (~125 us on a CPU) dominated their collide (benchmarks/README.md).
    """
    i = wp.tid()
    key = keys[i]
    rank = int(0)
    for j in range(n):
        other = keys[j]
        if other < key or (other == key and j < i):
            rank += 1
    keys[n + rank] = key
    values[n + rank] = values[i]


@wp.func
def lower_bound(keys: wp.array(dtype=wp.int64), n: int, key: wp.int64):
    """First index in the sorted ``keys[:n]`` whose key is >= ``key``."""
    lo = int(0)
    hi = n
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@wp.kernel
def shared_running_max_kernel(
    # Data in:
    sweep: SortedBounds,
    # In:
    n: int,
    # Data out:
    running_upper: wp.array(dtype=float),
):
    # one thread: the shared segment (world -1) is usually a handful of static shapes
    axis = sweep.sweep_axis[0]
    end = lower_bound(sweep.keys, n, wp.int64(1) << SEGMENT_BITS)
    m = float(-1.0e30)
    for j in range(end):
        m = wp.max(m, sweep.aabb_upper[sweep.values[j]][axis])
        running_upper[j] = m


@wp.func
def aabbs_overlap(lo_a: wp.vec3, hi_a: wp.vec3, lo_b: wp.vec3, hi_b: wp.vec3):
    return (lo_a[0] <= hi_b[0] and lo_b[0] <= hi_a[0] and lo_a[1] <= hi_b[1] and lo_b[1] <= hi_a[1]
            and lo_a[2] <= hi_b[2] and lo_b[2] <= hi_a[2])


@wp.func
def aabb_gap(lo_a: wp.vec3, hi_a: wp.vec3, lo_b: wp.vec3, hi_b: wp.vec3):
    """How far apart two AABBs are along the axis that separates them most [m] (negative: minus the least overlap):
    the depth by which an overflowing pair list keeps its pairs (``selection.py``)."""
    g = wp.max(lo_b - hi_a, lo_a - hi_b)
    return wp.max(wp.max(g[0], g[1]), g[2])


@wp.func
def pair_if_overlapping(f: ShapeFilter, sweep: SortedBounds, a: int, lo: wp.vec3, hi: wp.vec3, b: int,
                        overflow: Overflow, out: PairList):
    """Keep the pair (a, b) when b's AABB overlaps a's (``lo``, ``hi``) and the filters pass."""
    if aabbs_overlap(lo, hi, sweep.aabb_lower[b], sweep.aabb_upper[b]):
        if shapes_may_collide(f, a, b):
            append_pair(out, overflow, a, b, aabb_gap(lo, hi, sweep.aabb_lower[b], sweep.aabb_upper[b]))


@wp.kernel
def sweep_kernel(
    # Model:
    f: ShapeFilter,
    # Data in:
    sweep: SortedBounds,
    running_upper: wp.array(dtype=float),
    # In:
    n: int,
    overflow: Overflow,
    # Data out:
    out: PairList,
):
    i = wp.tid()
    if overflow_idle(overflow, out.count, out.capacity):
        return
    keys = sweep.keys
    values = sweep.values
    key = keys[i]
    if key >= NOT_SWEPT:
        return
    a = values[i]
    lo = sweep.aabb_lower[a]
    hi = sweep.aabb_upper[a]
    # same segment (world), later in the sort: a later lower bound beyond our upper bound ends the sweep;
    # the next segment's keys are all larger than ours, so it ends there too
    stop = sweep.upper_keys[a]
    j = i + 1
    while j < n:
        if keys[j] > stop:
            break
        pair_if_overlapping(f, sweep, a, lo, hi, values[j], overflow, out)
        j += 1
    if (key >> SEGMENT_BITS) == wp.int64(0):
        return
    # a shape of a world >= 0 against the shared segment (world -1, sorted first): every shared shape whose
    # lower bound is below our upper bound, walking down until no earlier upper bound can reach our lower one
    shared = lower_bound(keys, n, wp.int64(1) << SEGMENT_BITS)
    axis = sweep.sweep_axis[0]
    j = lower_bound(keys, shared, (stop & LOW_MASK) + wp.int64(1)) - 1
    while j >= 0:
        if running_upper[j] < lo[axis]:
            break
        pair_if_overlapping(f, sweep, a, lo, hi, values[j], overflow, out)
        j -= 1


@wp.struct
class PlanesByWorld:
    """The plane shapes grouped by world + 1 (a CSR; row 0: the shared planes), of the model's ShapeBroadPhase."""

    offsets: wp.array(dtype=wp.int32)  # row r: planes[offsets[r]:offsets[r + 1]]
    planes: wp.array(dtype=wp.int32)


planes_by_world = ArgBundle(PlanesByWorld, offsets="plane_offsets")


@wp.func
def plane_pair(shapes: ShapeGeometry, f: ShapeFilter, sweep: SortedBounds, s: int, p: int, overflow: Overflow,
               out: PairList):
    if not shapes_may_collide(f, s, p):
        return
    # the AABB corner farthest down the plane's normal, on or below the plane (the AABB holds the margin)
    X = shapes.transform[p]  # planes are static: their pose is in world
    n = wp.quat_rotate(wp.transform_get_rotation(X), wp.vec3(0.0, 0.0, 1.0))
    lo = sweep.aabb_lower[s]
    hi = sweep.aabb_upper[s]
    c = (lo + hi) * 0.5
    h = (hi - lo) * 0.5
    lowest = wp.dot(c - wp.transform_get_translation(X), n) - wp.dot(h, abs_vec(n))
    if lowest <= 0.0:
        append_pair(out, overflow, s, p, lowest)


@wp.kernel
def plane_pairs_kernel(
    # Model:
    shapes: ShapeGeometry,
    f: ShapeFilter,
    planes: PlanesByWorld,
    # Data in:
    sweep: SortedBounds,
    # In:
    overflow: Overflow,
    # Data out:
    out: PairList,
):
    """Each shape against the shared planes (row 0 of the CSR) and its own world's (row world + 1) only."""
    s = wp.tid()
    if shapes.type[s] == GEO_PLANE or overflow_idle(overflow, out.count, out.capacity):
        return
    for k in range(planes.offsets[0], planes.offsets[1]):
        plane_pair(shapes, f, sweep, s, planes.planes[k], overflow, out)
    w = f.shape_world[s] + 1
    if w > 0:
        for k in range(planes.offsets[w], planes.offsets[w + 1]):
            plane_pair(shapes, f, sweep, s, planes.planes[k], overflow, out)


class ShapeBroadPhase:
    """The model's buffers for the broad phase (made once, on the model's first ``collide``)."""

    def __init__(self, model):
        n = model.shape_count
        dev = model.device
        types = model.shape_type.numpy()
        flags = model.shape_flags.numpy()
        body = model.shape_body.numpy()
        collides = (flags & int(SHAPE_FLAG_COLLIDE_SHAPES)) != 0
        # no collidable shape on a body: no pair can ever pass the filters, skip the stage entirely
        self.active = bool(np.any(collides & (body >= 0)))
        plane_ids = np.flatnonzero(types == int(GEO_PLANE)).astype(np.int32)
        self.plane_count = len(plane_ids)
        # planes grouped by world + 1 (row 0: shared planes), so a shape meets only those it may collide with
        world = model.shape_world.numpy()
        rows = world[plane_ids] + 1
        order = np.argsort(rows, kind="stable")
        offsets = np.zeros(model.num_worlds + 2, dtype=np.int32)
        np.add.at(offsets, rows + 1, 1)
        self.num_worlds = model.num_worlds
        with wp.ScopedDevice(dev):
            self.planes = wp.array(plane_ids[order] if len(plane_ids) else np.zeros(1, np.int32), dtype=wp.int32)
            self.plane_offsets = wp.array(np.cumsum(offsets).astype(np.int32), dtype=wp.int32)
            self.aabb_lower = wp.zeros(max(n, 1), dtype=wp.vec3)
            self.aabb_upper = wp.zeros(max(n, 1), dtype=wp.vec3)
            self.centre_moments = wp.zeros((model.num_worlds + 1, 7), dtype=wp.float64)
            self.sweep_axis = wp.zeros(1, dtype=wp.int32)
            self.keys = wp.zeros(2 * max(n, 1), dtype=wp.int64)  # radix_sort_pairs wants room for 2n
            self.values = wp.zeros(2 * max(n, 1), dtype=wp.int32)
            self.upper_keys = wp.zeros(max(n, 1), dtype=wp.int64)
            self.running_upper = wp.zeros(max(n, 1), dtype=float)
        self.count_possible(model)
        mesh_pairs = _mesh_mesh_pairs(model, types, flags, body)
        if mesh_pairs:
            names = ", ".join(f"({model.shape_label[a]!r}, {model.shape_label[b]!r})" for a, b in mesh_pairs[:5])
            more = f" and {len(mesh_pairs) - 5} more" if len(mesh_pairs) > 5 else ""
            warn(
                f"mesh-mesh contact is not supported: the mesh shape pairs {names}{more} get no contact points. "
                "Approximate one mesh of each pair with boxes, capsules or spheres, or filter the pair out with "
                "collision_group / collision_mask.", RuntimeWarning)

    def count_possible(self, model) -> None:
        """How many candidates each list can ever hold (None: not bounded here): a list whose capacity holds them
        all never overflows, and skips the overflow selection's second and third passes
        (:func:`possible_pairs_and_contacts`; again after ``model.collision.reset_broad_phase()``)."""
        self.max_pairs, self.max_contacts = possible_pairs_and_contacts(model)


def _mesh_mesh_pairs(model, types, flags, body) -> list:
    """Pairs of mesh shapes that pass every filter (host side, once per model): they would get no contact."""
    meshes = np.flatnonzero(((flags & int(SHAPE_FLAG_COLLIDE_SHAPES)) != 0) & (types == int(GEO_MESH)))
    if len(meshes) < 2:
        return []
    world = model.shape_world.numpy()
    group = model.shape_collision_group.numpy()
    mask = model.shape_collision_mask.numpy()
    inv_mass = model.body_inv_mass.numpy()
    offsets, excluded = model.body_exclusion_offsets.numpy(), model.body_exclusions.numpy()

    def dynamic(b):
        return b >= 0 and inv_mass[b] > 0.0

    out = []
    for i, a in enumerate(meshes):
        for b in meshes[i + 1:]:
            ba, bb = body[a], body[b]
            if ba == bb or not (dynamic(ba) or dynamic(bb)):
                continue
            if world[a] >= 0 and world[b] >= 0 and world[a] != world[b]:
                continue
            if (group[a] & mask[b]) == 0 or (group[b] & mask[a]) == 0:
                continue
            if ba >= 0 and bb >= 0 and bb in excluded[offsets[ba]:offsets[ba + 1]]:
                continue
            out.append((int(a), int(b)))
    return out


def shape_broad_phase(model) -> ShapeBroadPhase:
    """The model's broad-phase buffers, owned by its collision pipeline (made on the first call)."""
    return model.collision.broad_phase()


def detect_shape_pairs(model, state, contacts) -> None:
    """Stage: shape AABBs from ``state.body_q``, then plane pairs and the sweep into ``contacts.rigid_pair``."""
    if model.body_count == 0 or model.shape_count < 2:
        return
    bp = shape_broad_phase(model)
    if not bp.active:
        return
    n, dev = model.shape_count, model.device
    shapes = shape_geometry(model)
    keep = shape_filter(model)
    out = rigid_pairs(contacts)
    sweep = sorted_bounds(bp)
    bp.centre_moments.zero_()
    wp.launch(shape_aabb_kernel, dim=n, device=dev, record_tape=False,
              inputs=[shapes, keep, state.body_q, model.rigid_contact_margin], outputs=[sweep, bp.centre_moments])
    wp.launch(sweep_axis_kernel, dim=1, device=dev, record_tape=False, inputs=[bp.centre_moments, bp.num_worlds],
              outputs=[bp.sweep_axis])
    wp.launch(sweep_keys_kernel, dim=n, device=dev, record_tape=False, inputs=[shapes, keep], outputs=[sweep])
    if n <= RANK_SORT_MAX:
        wp.launch(rank_sort_kernel, dim=n, device=dev, record_tape=False, inputs=[n], outputs=[bp.keys, bp.values])
        wp.copy(bp.keys, bp.keys, dest_offset=0, src_offset=n, count=n)
        wp.copy(bp.values, bp.values, dest_offset=0, src_offset=n, count=n)
    else:
        wp.utils.radix_sort_pairs(bp.keys, bp.values, n)
    wp.launch(shared_running_max_kernel, dim=1, device=dev, record_tape=False, inputs=[sweep, n],
              outputs=[bp.running_upper])

    def emit(overflow):
        if bp.plane_count:
            wp.launch(plane_pairs_kernel, dim=n, device=dev, record_tape=False,
                      inputs=[shapes, keep, planes_by_world(bp), sweep, overflow], outputs=[out])
        wp.launch(sweep_kernel, dim=n, device=dev, record_tape=False,
                  inputs=[keep, sweep, bp.running_upper, n, overflow], outputs=[out])

    most = bp.max_pairs if bp.max_pairs is not None else n * (n - 1) // 2
    overflow_selection(model).run(emit, contacts.rigid_pair_count, contacts.rigid_pair_max, most=most)
