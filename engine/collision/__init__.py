"""Collision detection: fills :class:`inertia.Contacts` with the pairs the force kernels will look at.

Each stage is its own kernel; ``collide`` reads as their list. Nothing here is
differentiated (it only selects pairs): the force kernels recompute distances
from the current positions, and they carry the gradients.
"""

from ..contacts import Contacts
from .particle_particle import detect_particle_pairs
from .particle_shape import detect_particle_shape_contacts


def collide(model, state, contacts: Contacts) -> None:
    """Clear the counters, find particle-shape contacts and particle-particle pairs, keep the peak counts."""
    if state.particle_q is None or state.particle_q.shape[0] != model.particle_count:
        raise ValueError("collide(): state does not belong to this model (particle count differs)")
    if str(state.particle_q.device) != str(model.device) or str(contacts.device) != str(model.device):
        raise ValueError(
            f"collide(): arrays on different devices (model {model.device}, state {state.particle_q.device}, "
            f"contacts {contacts.device})"
        )
    contacts.clear()
    detect_particle_shape_contacts(model, state, contacts)
    detect_particle_pairs(model, state, contacts)
    contacts.record_peak()


__all__ = ["collide", "detect_particle_shape_contacts", "detect_particle_pairs"]
