"""Particle-particle broad phase: a cell list searched over half shells, each close unordered pair once (i < j).

Cells are cubes of edge ``2 * particle_max_radius + contact_margin`` [m], so two particles that can
interact lie in the same cell or in adjacent ones. A cell (and the particle's world) hashes into one of
``grid_dim^3`` buckets; the particles are sorted by bucket. Each particle then looks at the particles
after it in its own cell and at the 13 neighbour cells of one half shell (offsets after (0, 0, 0) in
(z, y, x) lexicographic order): of two adjacent cells exactly one sees the other as a forward
neighbour, so every pair is visited once, where a full 27-cell query visits it from both sides.
Buckets are numbered x fastest, so the cells x - 1 .. x + 1 of a row are consecutive buckets and their
particles one run of slots: the 13 cells are read as 5 slot ranges (more where x wraps).

Buckets alias (far-apart cells share one): a candidate only counts when its own cell and world are the
ones being looked at, so aliasing costs time, never a missed or repeated pair. Each world's buckets are
shifted by a hash of the world index, so worlds stacked at one place (``replicate(spacing=0)``) spread
over the buckets instead of piling into the same ones.
"""

import warp as wp

from ..kernel_args import ArgBundle
from ..types import PARTICLE_FLAG_ACTIVE
from .contact_sink import PairList, append_pair, particle_pairs
from .selection import Overflow, overflow_idle, overflow_selection

# Detection only selects pairs (the force kernels recompute the geometry and carry the gradients): its
# kernels are launched off the tape and need no adjoints. The pair search's row and cell loops stay loops
# (max_unroll 1): unrolled, its 19 inlined copies of add_close_pairs took 0.92 s to compile instead of
# 0.52 s, for no measured gain in speed (4,096-particle granular step 1.01 ms either way) and the same bits.
wp.set_module_options({"enable_backward": False, "max_unroll": 1})

# Cell coordinates are clamped to +-2^30 so that neighbour offsets (+-1) stay inside int32; clamping keeps
# neighbouring cells neighbours, so particles that far out only share cells, costing time.
CELL_COORD_LIMIT = wp.constant(float(1 << 30))


@wp.func
def shares_element(i: int, j: int, offsets: wp.array(dtype=wp.int32), neighbours: wp.array(dtype=wp.int32)):
    for k in range(offsets[i], offsets[i + 1]):
        if neighbours[k] == j:
            return True
    return False


@wp.func
def cell_coordinate(x: float, cell_width: float):
    u = x / cell_width
    if not wp.isfinite(u):
        u = 0.0  # a blown-up particle still gets a valid cell (its distance test then fails)
    return int(wp.floor(wp.clamp(u, -CELL_COORD_LIMIT, CELL_COORD_LIMIT)))


@wp.func
def wrap(c: int, dim: int):
    m = c % dim  # C remainder: negative for negative c
    if m < 0:
        m += dim
    return m


@wp.func
def wrap_step(c: int, dim: int):
    """``wrap`` for c in [-1, dim], without a division."""
    if c < 0:
        return c + dim
    if c >= dim:
        return c - dim
    return c


@wp.func
def wrap_sum(a: int, b: int, dim: int):
    """``wrap(a + b)`` for a, b in [0, dim), without a division."""
    c = a + b
    if c >= dim:
        c -= dim
    return c


@wp.func
def world_shift(world: int, multiplier: wp.int64, dim: int):
    return int(wrap(int((wp.int64(world) * multiplier) % wp.int64(dim)), dim))


@wp.struct
class SortedParticles:
    """A :class:`ParticleCellList` as its kernels read and write it (the particles sorted by cell bucket)."""

    keys: wp.array(dtype=wp.int32)  # bucket per sorted slot
    ids: wp.array(dtype=wp.int32)  # particle per sorted slot
    bucket_slots: wp.array(dtype=wp.vec2i)  # each bucket's slot range [first, end)
    xr: wp.array(dtype=wp.vec4)  # position [m] and radius [m] per sorted slot
    cell: wp.array(dtype=wp.vec4i)  # integer cell coordinates and world per sorted slot
    dim: int  # buckets per axis


sorted_particles = ArgBundle(SortedParticles, xr="sorted_xr", cell="sorted_cell", dim="grid_dim")  # of a cell list


@wp.kernel
def assign_buckets_kernel(
    # Model:
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    # Data in:
    particle_q: wp.array(dtype=wp.vec3),
    # In:
    cell_width: float,
    # Data out:
    cells: wp.array(dtype=wp.vec4i),
    grid: SortedParticles,
):
    """Each particle's cell (``cells``, unsorted) and its bucket as the sort's key (``grid.keys``, ``grid.ids``)."""
    i = wp.tid()
    dim = grid.dim
    x = particle_q[i]
    w = particle_world[i]
    cx = cell_coordinate(x[0], cell_width)
    cy = cell_coordinate(x[1], cell_width)
    cz = cell_coordinate(x[2], cell_width)
    cells[i] = wp.vec4i(cx, cy, cz, w)
    grid.ids[i] = i
    if (particle_flags[i] & PARTICLE_FLAG_ACTIVE) != 0:
        bx = wrap(cx, dim)
        by = wrap(cy, dim)
        bz = wrap(cz, dim)
        if w != 0:  # one shift per world keeps a world's neighbouring cells in neighbouring buckets
            bx = wrap_sum(bx, world_shift(w, wp.int64(73856093), dim), dim)
            by = wrap_sum(by, world_shift(w, wp.int64(19349663), dim), dim)
            bz = wrap_sum(bz, world_shift(w, wp.int64(83492791), dim), dim)
        grid.keys[i] = (bz * dim + by) * dim + bx  # x fastest, as the builders lay particles out
    else:
        grid.keys[i] = dim * dim * dim  # past every bucket: inactive particles sort last and are never looked at


@wp.kernel
def index_sorted_particles_kernel(
    # Model:
    particle_radius: wp.array(dtype=float),
    # Data in:
    particle_q: wp.array(dtype=wp.vec3),
    cells: wp.array(dtype=wp.vec4i),
    # In:
    n: int,
    # Data out:
    grid: SortedParticles,
):
    """Each bucket's slot range and the particles' data in slot order, from the sorted ``grid.keys`` / ``grid.ids``."""
    s = wp.tid()
    dim = grid.dim
    # the first slot of a bucket's run writes the run's slot range (buckets left empty stay (0, 0) from the
    # clear before this kernel)
    keys = grid.keys
    b = keys[s]
    first = s == 0
    if not first:
        first = keys[s - 1] != b
    if first and b < dim * dim * dim:
        t = s + 1
        while t < n and keys[t] == b:
            t += 1
        grid.bucket_slots[b] = wp.vec2i(s, t)
    # the particles' data in slot order: a bucket's candidates are then read contiguously
    i = grid.ids[s]
    x = particle_q[i]
    grid.xr[s] = wp.vec4(x[0], x[1], x[2], particle_radius[i])
    grid.cell[s] = cells[i]


@wp.struct
class PairFilter:
    """Which close particle pairs are kept: none sharing an element (``model.particle_exclusion_*``), within
    the margin."""

    exclusion_offsets: wp.array(dtype=wp.int32)
    exclusions: wp.array(dtype=wp.int32)
    margin: float  # [m] beyond the sum of the radii


pair_filter = ArgBundle(PairFilter, "particle_", margin="contact_margin")  # of a model


@wp.func
def run_of_three(b: int, bucket_slots: wp.array(dtype=wp.vec2i)):
    """The slot range of buckets b, b + 1, b + 2 together (contiguous: the slots are sorted by bucket)."""
    r0 = bucket_slots[b]
    r1 = bucket_slots[b + 1]
    r2 = bucket_slots[b + 2]
    t0 = r2[0]
    if r1[1] > 0:
        t0 = r1[0]
    if r0[1] > 0:
        t0 = r0[0]
    return wp.vec2i(t0, wp.max(wp.max(r0[1], r1[1]), r2[1]))


@wp.func
def add_close_pairs(
    t0: int,
    t1: int,
    x_lo: int,
    x_hi: int,
    ci: wp.vec4i,
    dy: int,
    dz: int,
    i: int,
    xri: wp.vec4,
    grid: SortedParticles,
    keep: PairFilter,
    overflow: Overflow,
    out: PairList,
):
    """Pairs of i with the particles of slots [t0, t1) in cells (x_lo..x_hi, ci.y + dy, ci.z + dz) of i's world."""
    for t in range(t0, t1):
        cj = grid.cell[t]
        # the slots' buckets may also hold other cells and worlds that hash to them
        if cj[1] == ci[1] + dy and cj[2] == ci[2] + dz and cj[3] == ci[3] and cj[0] >= x_lo and cj[0] <= x_hi:
            xrj = grid.xr[t]
            d = wp.vec3(xrj[0] - xri[0], xrj[1] - xri[1], xrj[2] - xri[2])
            radii = xri[3] + xrj[3]
            reach = radii + keep.margin
            dd = wp.dot(d, d)
            if dd < reach * reach:
                j = grid.ids[t]
                if not shares_element(i, j, keep.exclusion_offsets, keep.exclusions):
                    # keeps counting past capacity (overflow is reported) and then keeps the deepest pairs
                    append_pair(out, overflow, i, j, wp.sqrt(dd) - radii)


@wp.kernel
def detect_particle_pairs_kernel(
    # Model:
    keep: PairFilter,
    # Data in:
    grid: SortedParticles,
    # In:
    overflow: Overflow,
    # Data out:
    out: PairList,
):
    s = wp.tid()  # a sorted slot: neighbouring threads read neighbouring buckets
    if overflow_idle(overflow, out.count, out.capacity):
        return
    dim = grid.dim
    b = grid.keys[s]
    if b >= dim * dim * dim:
        return  # inactive
    bx = b % dim
    by = (b // dim) % dim
    bz = b // (dim * dim)
    i = grid.ids[s]
    xri = grid.xr[s]
    ci = grid.cell[s]
    slots = grid.bucket_slots
    # own row: the rest of the own cell, then the cell at x + 1 (the next bucket unless x wraps)
    if bx + 1 < dim:
        t1 = wp.max(slots[b][1], slots[b + 1][1])
        add_close_pairs(s + 1, t1, ci[0], ci[0] + 1, ci, 0, 0, i, xri, grid, keep, overflow, out)
    else:
        add_close_pairs(s + 1, slots[b][1], ci[0], ci[0], ci, 0, 0, i, xri, grid, keep, overflow, out)
        r = slots[b - bx]  # x + 1 wraps to the row's first bucket
        add_close_pairs(r[0], r[1], ci[0] + 1, ci[0] + 1, ci, 0, 0, i, xri, grid, keep, overflow, out)
    # the other forward rows (dy, dz) = (1, 0), (-1, 1), (0, 1), (1, 1), three cells each (x - 1 .. x + 1)
    for k in range(4):
        dy = 1
        dz = 1
        if k == 0:
            dz = 0
        else:
            dy = k - 2
        row = (wrap_step(bz + dz, dim) * dim + wrap_step(by + dy, dim)) * dim
        if bx >= 1 and bx + 1 < dim:  # three consecutive buckets: one slot range
            r = run_of_three(row + bx - 1, slots)
            add_close_pairs(r[0], r[1], ci[0] - 1, ci[0] + 1, ci, dy, dz, i, xri, grid, keep, overflow, out)
        else:
            for dx in range(-1, 2):
                r = slots[row + wrap_step(bx + dx, dim)]
                add_close_pairs(r[0], r[1], ci[0] + dx, ci[0] + dx, ci, dy, dz, i, xri, grid, keep, overflow, out)


class ParticleCellList:
    """The particles sorted by cell bucket, rebuilt by every ``collide()`` into buffers allocated once.

    Per sorted slot: ``keys`` / ``ids`` (int32, ``2 * particle_count``: the radix sort's scratch is the
    upper half) the bucket and the particle index, ``sorted_xr`` (vec4: position [m], radius [m]) and
    ``sorted_cell`` (vec4i: integer cell coordinates, world). Per particle: ``cells`` (vec4i, unsorted).
    ``bucket_slots`` (vec2i, ``grid_dim^3``): each bucket's slot range [first, end), (0, 0) when empty.
    One list may serve many :class:`inertia.Contacts` of the same model (a rollout's per-step contacts).
    """

    def __init__(self, particle_count: int, grid_dim: int, device=None):
        particle_count, grid_dim = int(particle_count), int(grid_dim)
        if particle_count < 0:
            raise ValueError(f"ParticleCellList: particle_count must be >= 0, got {particle_count}")
        if grid_dim < 1 or grid_dim ** 3 >= 2 ** 31 - 1:
            raise ValueError(f"ParticleCellList: grid_dim must be in 1..1290 (grid_dim^3 buckets, int32), "
                             f"got {grid_dim}")
        self.device = wp.get_device(device)
        self.particle_count = particle_count
        self.grid_dim = grid_dim
        self.num_buckets = grid_dim ** 3
        # the keys span 0..num_buckets (inactive particles): sorting only those bits saves radix passes
        self.key_bits = self.num_buckets.bit_length()
        n = max(1, particle_count)
        with wp.ScopedDevice(self.device):
            self.keys = wp.zeros(2 * n, dtype=wp.int32)
            self.ids = wp.zeros(2 * n, dtype=wp.int32)
            self.cells = wp.zeros(n, dtype=wp.vec4i)
            self.sorted_xr = wp.zeros(n, dtype=wp.vec4)
            self.sorted_cell = wp.zeros(n, dtype=wp.vec4i)
            self.bucket_slots = wp.zeros(self.num_buckets, dtype=wp.vec2i)

    def build(self, particle_q, particle_radius, particle_flags, particle_world, cell_width: float) -> None:
        """Sort the particles by bucket of their cell of edge ``cell_width`` [m]; capturable, allocates nothing."""
        n = self.particle_count
        if n == 0:
            return
        grid = sorted_particles(self)
        wp.launch(assign_buckets_kernel, dim=n, device=self.device, record_tape=False,
                  inputs=[particle_flags, particle_world, particle_q, cell_width], outputs=[self.cells, grid])
        wp.utils.radix_sort_pairs(self.keys, self.ids, n, 0, self.key_bits)
        self.bucket_slots.zero_()
        wp.launch(index_sorted_particles_kernel, dim=n, device=self.device, record_tape=False,
                  inputs=[particle_radius, particle_q, self.cells, n], outputs=[grid])


def particle_cell_list(model, contacts) -> ParticleCellList:
    """The model's cell list for ``contacts.grid_dim``, owned by its collision pipeline and shared by every
    Contacts of that grid size (allocated on first use: prepare it outside graph capture)."""
    return model.collision.cell_list(contacts.grid_dim)


def detect_particle_pairs(model, state, contacts) -> None:
    """Stage: rebuild the cell list on the current positions, then list the close pairs."""
    if not model.particle_collide or model.particle_count < 2 or contacts.particle_pair_max == 0:
        return
    cell_width = 2.0 * model.particle_max_radius + model.contact_margin
    if not cell_width > 0.0:
        return  # point particles without margin: no distance is below a reach of 0
    grid = particle_cell_list(model, contacts)
    grid.build(state.particle_q, model.particle_radius, model.particle_flags, model.particle_world, cell_width)
    inputs = [pair_filter(model), sorted_particles(grid)]
    out = particle_pairs(contacts)

    def emit(overflow):
        wp.launch(detect_particle_pairs_kernel, dim=model.particle_count, device=model.device, record_tape=False,
                  inputs=[*inputs, overflow], outputs=[out])

    n = model.particle_count
    overflow_selection(model).run(emit, contacts.particle_pair_count, contacts.particle_pair_max,
                                  most=n * (n - 1) // 2)
