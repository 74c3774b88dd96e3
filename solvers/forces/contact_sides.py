"""What the contact kernels of both solvers share: which particle, shapes and bodies a contact joins.

A particle-shape contact (``Contacts.soft_contact_*``) joins a particle and a shape, perhaps on a body
(:func:`soft_contact_sides`); a shape-shape contact (``Contacts.rigid_contact_*``) two shapes and their bodies
(:func:`rigid_contact_sides`); a body -1 is the world. The particle-shape kernels (``contact.py``,
``constraints/particle_contacts.py``) call the signed distance of the shape under a particle, so each is built
once per set of shape types a model has (:func:`kernel_per_shape_types`): a scene compiles only the distance
functions of the shapes it has. Each solver's contact stages launch over the same capacities
(:func:`contact_threads`).
"""

import functools
from typing import NamedTuple

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_geometry import RigidContacts, list_threads
from ...collision.particle_shape import SoftContacts
from ...collision.sdf import ShapeGeometry, shape_sdf_at_for, type_tag


class ContactThreads(NamedTuple):
    """Threads of each kind of contact stage; 0: nothing to do."""

    soft: int  # particle-shape: the candidates' capacity (0 without shapes)
    # particle pairs: one thread per particle up to the pair capacity, each taking every n-th pair (the list's
    # capacity is ~12 per particle and mostly empty; even an idle thread costs its share in the adjoint kernel)
    pairs: int
    rigid: int  # shape-shape: the contacts' capacity (0 without bodies)


def contact_threads(model, data) -> ContactThreads:
    """The :class:`ContactThreads` of a step's contacts (all 0 without contacts)."""
    contacts = data.contacts
    if contacts is None:
        return ContactThreads(0, 0, 0)
    return ContactThreads(contacts.soft_contact_max if model.shape_count else 0,
                          min(model.particle_count, contacts.particle_pair_max) if model.particle_collide else 0,
                          contacts.rigid_contact_max if model.body_count else 0)


# threads of a shape-shape contact kernel looping over the contacts found (one on a CPU, one per slot on a GPU)
rigid_contact_threads = list_threads


def kernel_per_shape_types(build):
    """A cached function of a set of shape types (``sdf.shape_types(model)``) giving ``build(sdf_at, tag)``: a
    kernel (``module="unique"``, named with ``tag``) that calls ``sdf_at``, the signed distance compiled for those
    types only. Its module compiles its backward code once gradients are wanted."""

    @functools.cache
    def kernel_for(types: frozenset):
        kernel = build(shape_sdf_at_for(types), type_tag(types))
        on_demand(kernel.module)  # a module of its own: backward compiled once gradients are wanted
        return kernel

    return kernel_for


@wp.func
def soft_contact_sides(contacts: SoftContacts, shapes: ShapeGeometry, c: int):
    """(particle, shape, the shape's body or -1) of particle-shape contact ``c``."""
    s = contacts.shape[c]
    return contacts.particle[c], s, shapes.body[s]


@wp.func
def rigid_contact_sides(shapes: ShapeGeometry, contacts: RigidContacts, c: int):
    """(shape 0, shape 1, body 0, body 1) of shape-shape contact ``c`` (a body -1: the world)."""
    s0 = contacts.shape0[c]
    s1 = contacts.shape1[c]
    return s0, s1, shapes.body[s0], shapes.body[s1]
