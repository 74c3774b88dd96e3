"""Where detection writes: the contact list of :class:`inertia.Contacts` with its detection margin, and index-pair
lists. Every append names the candidate's gap [m] (negative: overlap), so that a list that overflows keeps its
deepest candidates (``selection.py``)."""

import warp as wp

from ..kernel_args import ArgBundle
from .contact_geometry import RigidContacts, rigid_contacts
from .selection import Overflow, claim_slot


@wp.struct
class ContactSink:
    margin: float  # points farther than this from the other shape are not kept [m]
    contacts: RigidContacts
    overflow: Overflow  # the detection pass (selection.py)


@wp.func
def append_contact(sink: ContactSink, s0: int, s1: int, point0: wp.vec3, thickness0: float, normal1: wp.vec3,
                   gap: float):
    """Append one contact with ``gap`` [m] (its surfaces' distance, negative when they overlap); the count goes on
    past the capacity so an overflow shows, and a list that overflows keeps its deepest contacts."""
    out = sink.contacts
    slot = claim_slot(sink.overflow, out.count, out.capacity, gap)
    if slot >= 0:
        out.shape0[slot] = s0
        out.shape1[slot] = s1
        out.point0[slot] = point0
        out.thickness0[slot] = thickness0
        out.normal1[slot] = normal1


def make_sink(model, contacts, overflow: Overflow) -> ContactSink:
    sink = ContactSink()
    sink.margin = model.rigid_contact_margin
    sink.contacts = rigid_contacts(contacts)
    sink.overflow = overflow
    return sink


@wp.struct
class PairList:
    """An index-pair list of :class:`inertia.Contacts` (shape pairs of the broad phase, particle pairs)."""

    capacity: int
    count: wp.array(dtype=wp.int32)  # pairs requested (may exceed the capacity)
    pairs: wp.array(dtype=wp.vec2i)


@wp.func
def append_pair(out: PairList, overflow: Overflow, a: int, b: int, gap: float):
    """Append (min, max) of ``a``, ``b`` with ``gap`` [m] (negative: overlap); the count goes on past the capacity
    so an overflow shows, and a list that overflows keeps its deepest pairs."""
    slot = claim_slot(overflow, out.count, out.capacity, gap)
    if slot >= 0:
        out.pairs[slot] = wp.vec2i(wp.min(a, b), wp.max(a, b))


@wp.func
def stored_pair_count(pairs: PairList):
    """How many pairs ``pairs`` holds: its count, capped at the capacity (the count goes on past it when the list
    overflows, see ``append_pair``). Every reader of a PairList loops over this many."""
    return wp.min(pairs.count[0], pairs.capacity)


# the PairLists of Contacts: the broad phase's shape pairs, the particle pairs
rigid_pairs = ArgBundle(PairList, capacity="rigid_pair_max", count="rigid_pair_count", pairs="rigid_pair")
particle_pairs = ArgBundle(PairList, capacity="particle_pair_max", count="particle_pair_count", pairs="particle_pair")
