"""Penalty contact between shapes (rigid bodies against each other and against static shapes).

Each contact of ``Contacts.rigid_contact_*`` (a point fixed on shape 0, with
radius ``thickness0``, near shape 1) is evaluated from the current body poses
by :func:`inertia.collision.contact_geometry.rigid_contact_geometry`: depth d
[m], normal n (from shape 1 towards shape 0), and the surface points p0, p1.
The force acts at their midpoint x, on body 0 and, opposite, on body 1, so a
contact conserves linear and angular momentum exactly:

    f_n = max(ke d - kd v_n g, 0)                         (as particle contact, incl. contact_smoothing)
    f_t = friction_force(v_t, f_n, mu, eps, m_t, dt)      (smoothed Coulomb; m_t below)
    F   = n f_n + f_t   on body 0 at x,   -F on body 1 at x

v = v0(x) - v1(x) is the relative velocity of the two bodies' material points
at x (v_n = n . v < 0 while approaching, v_t its tangential part). The
friction bound that keeps one explicit step from reversing the sliding uses
the pair's effective mass along the sliding direction t, rotation included,
with each body's mass split among its active contacts:
m_t = 1 / (n0 w0 + n1 w1), w = 1/m + |r x t|^2 in the inverse inertia (r from
the centre of mass to x), n = how many contacts of this step touch that body.
Without the split, the 4 corners of a resting box each stop the whole box in
one step, together reverse it, and a stack chatters (a body's yaw rate flipped
sign every step); with it, the contacts of a body can at most stop it. The
counts are integers and carry no gradient; they are a per-step buffer of the
step's output state (``state_out.step_buffers.body_contact_counts``), so a recorded step keeps its own.

Materials of the two shapes combine by arithmetic means: ke = (ke0 + ke1) / 2
[N/m], kd = (kd0 + kd1) / 2 [N s/m], mu = (mu0 + mu1) / 2, so two shapes of the
same material contact with that material. Static and kinematic sides take
no force. Differentiable (``wp.Tape``) through poses, velocities, masses and
materials while the contact set stays the same; which contacts exist is
decided by ``model.collide`` and carries no gradient.
"""

import warp as wp

from ...collision.contact_geometry import RigidContacts, rigid_contact_geometry
from ...collision.sdf import ShapeGeometry
from ...kinematics import point_velocity
from ..step_data import stage
from .body_dynamics import inverse_mass_along, inverse_mass_of, wrench_at
from .contact import PenaltyLaw, contact_depth, contact_gate, contact_reach, friction_force


@wp.func
def contact_bodies(body_inv_mass: wp.array(dtype=float), shapes: ShapeGeometry, contacts: RigidContacts, c: int):
    """(shape 0, shape 1, body 0, body 1, body 0 dynamic, body 1 dynamic) of contact ``c``."""
    s0 = contacts.shape0[c]
    s1 = contacts.shape1[c]
    b0 = shapes.body[s0]
    b1 = shapes.body[s1]
    return s0, s1, b0, b1, inverse_mass_of(body_inv_mass, b0) > 0.0, inverse_mass_of(body_inv_mass, b1) > 0.0


@wp.func
def active_contact(body_q: wp.array(dtype=wp.transform), shapes: ShapeGeometry, contacts: RigidContacts, c: int,
                   law: PenaltyLaw):
    """Contact ``c``'s geometry at the current poses; its depth is -1e30 when it exerts no force."""
    g = rigid_contact_geometry(body_q, shapes, contacts, c, law.rigid_contact_margin)
    smoothing = law.contact_smoothing
    if g.depth <= -contact_reach(smoothing) or (smoothing <= 0.0 and g.depth <= 0.0):
        g.depth = -1.0e30
    return g


@wp.kernel
def count_body_contacts_kernel(
    # Model:
    body_inv_mass: wp.array(dtype=float),
    shapes: ShapeGeometry,
    law: PenaltyLaw,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    contacts: RigidContacts,
    # Data out:
    counts: wp.array(dtype=wp.int32),
):
    c = wp.tid()
    if c >= contacts.count[0]:
        return
    s0, s1, b0, b1, dynamic0, dynamic1 = contact_bodies(body_inv_mass, shapes, contacts, c)
    if not dynamic0 and not dynamic1:
        return
    g = active_contact(body_q, shapes, contacts, c, law)
    if g.depth == -1.0e30:
        return
    if dynamic0:
        wp.atomic_add(counts, b0, 1)
    if dynamic1:
        wp.atomic_add(counts, b1, 1)


@wp.kernel
def body_contact_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    shapes: ShapeGeometry,
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    law: PenaltyLaw,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    contacts: RigidContacts,
    counts: wp.array(dtype=wp.int32),
    # In:
    dt: float,
    # Data out:
    body_f: wp.array(dtype=wp.spatial_vector),
):
    c = wp.tid()
    if c >= contacts.count[0]:
        return
    s0, s1, b0, b1, dynamic0, dynamic1 = contact_bodies(body_inv_mass, shapes, contacts, c)
    if not dynamic0 and not dynamic1:
        return
    g = active_contact(body_q, shapes, contacts, c, law)
    if g.depth == -1.0e30:
        return
    smoothing = law.contact_smoothing
    x = 0.5 * (g.p0 + g.p1)
    v = point_velocity(body_q, body_qd, body_com, b0, x) - point_velocity(body_q, body_qd, body_com, b1, x)
    vn = wp.dot(g.normal, v)
    ke = 0.5 * (shape_ke[s0] + shape_ke[s1])
    kd = 0.5 * (shape_kd[s0] + shape_kd[s1])
    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
    fn = wp.max(ke * contact_depth(g.depth, smoothing) - kd * vn * contact_gate(g.depth, smoothing), 0.0)
    vt = v - g.normal * vn
    # effective inverse mass along the sliding direction, each body's mass split among its contacts
    w_t = float(0.0)
    if dynamic0:
        w_t += float(counts[b0]) * inverse_mass_along(body_q, body_com, body_inv_mass, body_inv_inertia, b0, x, vt)
    if dynamic1:
        w_t += float(counts[b1]) * inverse_mass_along(body_q, body_com, body_inv_mass, body_inv_inertia, b1, x, vt)
    force = g.normal * fn + friction_force(vt, fn, mu, law.friction_smoothing, 1.0 / w_t, dt)
    if dynamic0:
        wp.atomic_add(body_f, b0, wrench_at(body_q, body_com, b0, force, x))
    if dynamic1:
        wp.atomic_sub(body_f, b1, wrench_at(body_q, body_com, b1, force, x))


@stage("shape-shape contact", writes=lambda data: {"body_f": data.state_out.body_f})
def eval_body_contact_forces(model, data) -> None:
    """Stage: penalty contact with friction for every shape-shape contact point, into ``state_out.body_f``.

    First each body's number of active contacts (the mass split of the friction bound) into the step
    buffer ``body_contact_counts``.
    """
    contacts = data.contacts
    if contacts is None or model.body_count == 0 or contacts.rigid_contact_max == 0:
        return
    counts, state = data.buffers.body_contact_counts, data.state_in
    counts.zero_()
    wp.launch(count_body_contacts_kernel, dim=contacts.rigid_contact_max, device=model.device,
              inputs=[model.body_inv_mass, data.shapes, data.penalty_law, state.body_q, data.rigid_contacts],
              outputs=[counts])
    wp.launch(body_contact_kernel, dim=contacts.rigid_contact_max, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inv_inertia, data.shapes,
                      model.shape_material_ke, model.shape_material_kd, model.shape_material_mu, data.penalty_law,
                      state.body_q, state.body_qd, data.rigid_contacts, counts, data.dt],
              outputs=[data.state_out.body_f])
