"""Collision detection: fills :class:`inertia.Contacts` with the pairs and points the solvers will look at.

Each stage is its own kernel(s); ``collide`` reads as their list. Nothing here
is differentiated (it only selects pairs and material points): the solvers
recompute distances and normals from the current positions and poses, and
they carry the gradients.
"""

from ..contacts import Contacts
from .broad_phase import detect_shape_pairs
from .narrow_phase import detect_shape_contacts
from .particle_particle import detect_particle_pairs
from .particle_shape import detect_particle_shape_contacts


def _check_arrays(model, state, contacts) -> None:
    if state.particle_q is None or state.particle_q.shape[0] != model.particle_count:
        raise ValueError("collide(): state does not belong to this model (particle count differs)")
    if state.body_q is None or state.body_q.shape[0] != model.body_count:
        have = None if state.body_q is None else state.body_q.shape[0]
        raise ValueError(f"collide(): state does not belong to this model (state.body_q has {have} bodies, "
                         f"the model {model.body_count})")
    devices = {str(a.device) for a in (state.particle_q, state.body_q)} | {str(contacts.device)}
    if devices != {str(model.device)}:
        raise ValueError(
            f"collide(): arrays on different devices (model {model.device}, state.particle_q "
            f"{state.particle_q.device}, state.body_q {state.body_q.device}, contacts {contacts.device})"
        )


def collide(model, state, contacts: Contacts) -> None:
    """Clear the counters; particle-shape contacts; particle pairs; shape pairs (broad phase) and their
    contact points (narrow phase); keep the peak counts."""
    _check_arrays(model, state, contacts)
    contacts.clear()
    detect_particle_shape_contacts(model, state, contacts)
    detect_particle_pairs(model, state, contacts)
    detect_shape_pairs(model, state, contacts)
    detect_shape_contacts(model, state, contacts)
    contacts.record_peak()


__all__ = ["collide", "detect_particle_shape_contacts", "detect_particle_pairs", "detect_shape_pairs",
           "detect_shape_contacts"]
