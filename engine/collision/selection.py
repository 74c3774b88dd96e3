"""When a contact list overflows, keep its deepest candidates: detection in up to three passes, all on the device.

Every list of :class:`inertia.Contacts` has a fixed capacity. Appending candidates in the order threads
happen to find them fills it with an arbitrary subset when more are found: measured before this module,
a cloth on the ground with too small a ``soft_contact_max`` kept the contacts of its first particles and
let the others fall through the ground (and be flung out once they got a slot, from deep below), and 17
of 27 boxes fell through the ground with too small a ``rigid_contact_max``. So a list that overflows is
filled again with its deepest candidates:

1. **append** (every call): the emitting kernel appends each candidate and counts them all
   (``count`` goes on past the capacity, so ``Contacts.check_overflow`` still names the argument to raise).
2. **count** (only when pass 1 overflowed): the same kernel runs again and histograms the candidates'
   gaps [m] (their signed distance: negative when they overlap) into :data:`GAP_BINS` logarithmic bins;
   one thread (:func:`plan_selection_kernel`) then finds the bin where the deepest ``capacity``
   candidates end.
3. **select** (only when pass 1 overflowed): the kernel runs a third time and writes the candidates of
   the bins below that one, then those of that bin while slots remain, over slots 0..capacity - 1.

The bins are 1/32 of an octave wide (|gap| from 2^-30 to 2^10 m, both signs), so what is kept is the
deepest ``capacity`` candidates to within 2.2 % of their gap; ties in the last bin go to whichever
thread comes first. The resolution matters for penalty contact: a contact switched on at depth d1 and
off again at d2 < d1 does the work ke (d1^2 - d2^2) / 2 with nothing taken back, and a cloth landing on
a quarter of the contacts it needs rebounded above its release height with bins of a quarter octave
(19 %), below it with these.

Passes 2 and 3 return at once when nothing overflowed (each thread reads the count), so a list that fits
costs two extra launches and one of a single thread (none when its capacity holds every candidate the
model can have: the default ``soft_contact_max`` with up to four shapes; the shape pairs when
``rigid_pair_max`` holds every pair the broad phase's filter can pass, and the contacts too where each of
those pairs has a plane, such as robots that do not collide with themselves on the ground,
``candidate_bounds.possible_pairs_and_contacts``); nothing is read back to
the host and nothing branches on the host, so detection stays capturable. The scratch (the histogram, its
octave sums and four counters) belongs to the model's collision pipeline and serves its lists in turn.

What a too-small buffer gives is then a worse but sane simulation: a particle or a box that sinks
becomes deeper than the rest and gets a slot, and the solvers push it out (the XPBDSolver no faster
than its ``max_depenetration_velocity``).
"""

import warp as wp

wp.set_module_options({"enable_backward": False})

PASS_APPEND = wp.constant(0)
PASS_COUNT = wp.constant(1)
PASS_SELECT = wp.constant(2)

# Bins: 32 per octave of |gap| from 2^-30 m (1 nm; anything closer to zero is "touching") to 2^10 m, for each
# sign, grouped by octave (the plan scans the octaves' sums, then the 32 bins of one octave):
# groups 0..39 the overlaps (deepest first), group 40 touching (its first bin), groups 41..80 the gaps.
GAP_MIN_LOG2 = wp.constant(-30.0)
BINS_PER_GROUP = wp.constant(32)
OCTAVES = wp.constant(40)
GROUPS = 2 * 40 + 1
GAP_BINS = GROUPS * 32

# scratch layout: [0] the last bin kept, [1] candidates in the bins below it, [2] slots handed out below it,
# [3] slots handed out in it, then the octave sums and the bins (zero between uses: the plan clears them)
THRESHOLD = wp.constant(0)
BELOW = wp.constant(1)
BELOW_TAKEN = wp.constant(2)
TIES_TAKEN = wp.constant(3)
GROUP_SUMS = wp.constant(4)
HISTOGRAM = wp.constant(4 + GROUPS)
SCRATCH_SIZE = 4 + GROUPS + GAP_BINS


@wp.struct
class Overflow:
    """Which pass an emitting kernel runs (module docstring) and the pipeline's selection scratch."""

    pass_index: int  # PASS_APPEND, PASS_COUNT or PASS_SELECT
    scratch: wp.array(dtype=wp.int32)


@wp.func
def gap_bin(gap: float):
    """The histogram bin of a candidate's gap [m]: non-decreasing in the gap (deeper: lower)."""
    a = wp.abs(gap)
    b = OCTAVES * BINS_PER_GROUP  # touching (also NaN)
    if a > 9.3e-10:  # 2^-30
        q = int(wp.floor((wp.log2(a) - GAP_MIN_LOG2) * float(BINS_PER_GROUP)))
        q = wp.clamp(q, 0, OCTAVES * BINS_PER_GROUP - 1)
        if gap < 0.0:
            b = OCTAVES * BINS_PER_GROUP - 1 - q
        else:
            b = (OCTAVES + 1) * BINS_PER_GROUP + q
    return b


@wp.func
def overflow_idle(sel: Overflow, count: wp.array(dtype=wp.int32), capacity: int):
    """True for a thread of pass 2 or 3 whose list did not overflow: it has nothing to do."""
    return sel.pass_index != PASS_APPEND and count[0] <= capacity


@wp.func
def claim_slot(sel: Overflow, count: wp.array(dtype=wp.int32), capacity: int, gap: float):
    """The slot a candidate with ``gap`` [m] is written to on this pass, or -1 (not written)."""
    slot = int(-1)
    if sel.pass_index == PASS_APPEND:
        slot = wp.atomic_add(count, 0, 1)  # counts past the capacity: the overflow shows
        if slot >= capacity:
            slot = -1
    elif count[0] > capacity:
        b = gap_bin(gap)
        if sel.pass_index == PASS_COUNT:
            wp.atomic_add(sel.scratch, HISTOGRAM + b, 1)
            wp.atomic_add(sel.scratch, GROUP_SUMS + b // BINS_PER_GROUP, 1)
        else:
            last = sel.scratch[THRESHOLD]
            if b < last:
                slot = wp.atomic_add(sel.scratch, BELOW_TAKEN, 1)  # < BELOW by the plan: always within capacity
            elif b == last:
                slot = sel.scratch[BELOW] + wp.atomic_add(sel.scratch, TIES_TAKEN, 1)
                if slot >= capacity:
                    slot = -1
    return slot


@wp.kernel
def plan_selection_kernel(
    # In:
    count: wp.array(dtype=wp.int32),
    capacity: int,
    # Data out:
    scratch: wp.array(dtype=wp.int32),
):
    """One thread: after the count pass, the last bin whose candidates (with all deeper ones) fill the capacity;
    then the histogram is cleared for the next list (only the octaves that hold candidates)."""
    if count[0] <= capacity:
        return
    below = int(0)
    last = int(GAP_BINS - 1)
    found = int(0)
    for g in range(GROUPS):
        n = scratch[GROUP_SUMS + g]
        if n > 0:
            if found == 0 and below + n >= capacity:
                for k in range(BINS_PER_GROUP):
                    m = scratch[HISTOGRAM + g * BINS_PER_GROUP + k]
                    if found == 0:
                        if below + m >= capacity:
                            last = g * BINS_PER_GROUP + k
                            found = 1
                        else:
                            below += m
            elif found == 0:
                below += n
            for k in range(BINS_PER_GROUP):
                scratch[HISTOGRAM + g * BINS_PER_GROUP + k] = 0
            scratch[GROUP_SUMS + g] = 0
    scratch[THRESHOLD] = last
    scratch[BELOW] = below
    scratch[BELOW_TAKEN] = 0
    scratch[TIES_TAKEN] = 0


class OverflowSelection:
    """The selection scratch of one model's collision pipeline and the three passes' kernel arguments."""

    def __init__(self, device):
        self.device = wp.get_device(device)
        self.scratch = wp.zeros(SCRATCH_SIZE, dtype=wp.int32, device=self.device)
        self.passes = []
        for p in (PASS_APPEND, PASS_COUNT, PASS_SELECT):
            s = Overflow()
            s.pass_index = int(p)
            s.scratch = self.scratch
            self.passes.append(s)

    def run(self, emit, count, capacity: int, most: int | None = None) -> None:
        """Fill a list of ``capacity`` whose requested count is ``count`` (``wp.array(int32, 1)``), keeping its
        deepest candidates when it overflows. ``emit(overflow)`` launches the list's emitting kernel(s) with
        the :class:`Overflow` argument of one pass. ``most``: how many candidates there can be at all (from the
        model's sizes; None: no bound), so that a list that can never overflow skips passes 2 and 3 (a
        decision on sizes, not on device values: capturable either way)."""
        append, count_pass, select = self.passes
        emit(append)
        if most is not None and capacity >= most:
            return
        emit(count_pass)
        wp.launch(plan_selection_kernel, dim=1, device=self.device, record_tape=False, inputs=[count, int(capacity)],
                  outputs=[self.scratch])
        emit(select)


def overflow_selection(model) -> OverflowSelection:
    """The model's selection scratch, owned by its collision pipeline (made on first use: prepare it outside a
    graph capture with ``model.collision.prepare``)."""
    return model.collision.overflow_selection()
