"""Penalty contact between shapes (rigid bodies against each other and against static shapes).

Each contact of ``Contacts.rigid_contact_*`` (a point fixed on shape 0, with
radius ``thickness0``, near shape 1) is evaluated from the current body poses
by :func:`inertia.collision.contact_geometry.rigid_contact_geometry`: depth d
[m], normal n (from shape 1 towards shape 0), and the surface points p0, p1.
Its forces act at their midpoint x, on body 0 and, opposite, on body 1, so a
contact conserves linear and angular momentum exactly.

Gains: each shape's material gives (ke_s, kd_s), mass-scaled (tau_s > 0) from the contact's effective
mass along the normal, m_n = 1 / (w0(n) + w1(n)), with w(t) = 1/m + |r x t|^2 in the world inverse
inertia (r from the centre of mass to x; 0 for static and kinematic sides): ke_s = m_n / tau_s^2, kd_s =
2 zeta_s m_n / tau_s; or the absolute ke_s, kd_s (tau_s = 0). The contact takes the means ke = (ke_0 +
ke_1) / 2, kd = (kd_0 + kd_1) / 2 and mu = (mu_0 + mu_1) / 2, so two shapes of the same material contact
with that material. (:mod:`inertia.solvers.forces.contact`: rest depth, rebound, stability.)

A step applies, per contact:

1. the spring n ke d (``contact_depth`` with ``contact_smoothing``), explicitly, with the other forces;
2. after every other force of the step (joints, drives, springs, particles): the damper n f_d and the
   friction f_t that the velocities at the *end* of the step call for. With v* = v + dt M^-1 (f + m g) each
   body's velocity under everything else, and v(x) the relative velocity at x after the step,

       f_d = max(-kd g v_n(x), -ke d)     (damping at the end-of-step normal velocity; never pulling)
       f_t = the force that stops the slip v_t(x) in this step, onto Coulomb's disk |f_t| <= mu (ke d + f_d)

   solved together by ``SemiImplicitSolver.contact_iterations`` Jacobi sweeps over all contacts. Each
   sweep evaluates v(x) from v* and the previous sweep's forces, and moves every contact's f_d and f_t
   ``contact_relaxation`` times the way to their targets (the last sweep plainly), each contact taking
   its share of a body's mass: the Jacobi denominators come from n0 K0(x) + n1 K1(x), K a body's inverse
   mass matrix at x and n its count of active contacts (``state_out.step_buffers.body_contact_counts``),
   along n for the damper and (bounded) in the contact plane for friction, so a body's contacts can at
   most stop it together, and sweeps converge for any relaxation in (0, 2).

Why at the end of the step: a damper evaluated at the step's start is explicit and caps the stable
damping rate (a light capsule link of 3.7 g effective mass met kd dt / m = 2.7 > 2 in the 32-link chain,
and blew it apart); at the end it removes velocity without overshooting, for any number of contacts.
Friction alike: evaluated at the start (the old law, a viscous bound m |v_t| / dt near rest), a body
under a steady tangential load crept at ~4 g sin(theta) dt (6.8 mm/s on a 10 deg slope at 1 ms) and
stacks and piles walked apart; stopping the predicted slip holds them (measured on that slope: 4.3 mm/s
with 1 sweep, 0.13 with 4, 0.034 with 6 (the default), 0.010 with 8, 3e-4 with 16; a 64-box pile still
for 12 s), while sliding contacts, whose stopping force exceeds mu f_n, get exactly Coulomb's mu f_n
against the slip (no smoothing speed: ``friction_smoothing`` is for particle contacts only), so a cube
decelerates at mu g and stops after v0^2 / (2 mu g).

The friction's denominator is a scalar, the larger eigenvalue of the pair's split response in the contact
plane (``largest_in_plane``): a scalar keeps each step's correction along the slip, so that a sliding
contact's fixed point is Coulomb's force exactly opposite to its slip (a matrix inverse bends it by the
anisotropy of the response: a 40 deg slide accelerated 9 % too fast); the largest eigenvalue keeps the
sweeps convergent for any slip direction and is smooth in the inputs (the response along the slip's own
direction is not: at rest the slip's direction is rounding noise, and gradients through held contacts
came out 1 % off their finite differences).

Differentiable (``wp.Tape``) through poses, velocities, masses, materials (ke, kd, tau, zeta, mu) and the
other forces of the step while the contact set stays the same (the stick / slip switch is a kink of the
projection, continuous); which contacts exist is decided by ``model.collide`` and carries no gradient.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_geometry import ContactGeometry, RigidContacts, rigid_contact_geometry, stored_contact_count
from ...collision.sdf import ShapeGeometry
from ...integrators.euler import world_gravity
from ...integrators.euler_bodies import com_velocity_after
from ..step_data import stage
from .body_dynamics import (
    inverse_mass_along,
    inverse_mass_matrix,
    inverse_mass_of,
    world_inverse_inertia,
    wrench_at,
)
from .contact import PenaltyLaw, beyond_reach, contact_depth, contact_gate, coulomb_projection, penalty_gains
from .contact_sides import contact_threads, rigid_contact_sides, rigid_contact_threads

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def contact_bodies(body_inv_mass: wp.array(dtype=float), shapes: ShapeGeometry, contacts: RigidContacts, c: int):
    """(shape 0, shape 1, body 0, body 1, body 0 dynamic, body 1 dynamic) of contact ``c``."""
    s0, s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
    return s0, s1, b0, b1, inverse_mass_of(body_inv_mass, b0) > 0.0, inverse_mass_of(body_inv_mass, b1) > 0.0


@wp.func
def active_contact(body_q: wp.array(dtype=wp.transform), shapes: ShapeGeometry, contacts: RigidContacts, c: int,
                   law: PenaltyLaw):
    """Contact ``c``'s geometry at the current poses; its depth is -1e30 when it exerts no force."""
    g = rigid_contact_geometry(body_q, shapes, contacts, c, law.rigid_contact_margin)
    if beyond_reach(g.depth, law.contact_smoothing):
        g.depth = -1.0e30
    return g


@wp.func
def penalty_spring(
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_tau: wp.array(dtype=float),
    shape_zeta: wp.array(dtype=float),
    law: PenaltyLaw,
    g: ContactGeometry,
    s0: int,
    s1: int,
    b0: int,
    b1: int,
):
    """(point x [m], spring force ke d [N], damping coefficient kd g [N s/m]) of an active contact."""
    x = 0.5 * (g.p0 + g.p1)
    n = g.normal
    m_n = 1.0 / (inverse_mass_along(body_q, body_com, body_inv_mass, body_inv_inertia, b0, x, n)
                 + inverse_mass_along(body_q, body_com, body_inv_mass, body_inv_inertia, b1, x, n))
    ke0, kd0 = penalty_gains(shape_tau[s0], shape_zeta[s0], shape_ke[s0], shape_kd[s0], m_n)
    ke1, kd1 = penalty_gains(shape_tau[s1], shape_zeta[s1], shape_ke[s1], shape_kd[s1], m_n)
    smoothing = law.contact_smoothing
    spring = 0.5 * (ke0 + ke1) * contact_depth(g.depth, smoothing)
    return x, spring, 0.5 * (kd0 + kd1) * contact_gate(g.depth, smoothing)


@wp.kernel
def body_contact_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    shapes: ShapeGeometry,
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_tau: wp.array(dtype=float),
    shape_zeta: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    law: PenaltyLaw,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    contacts: RigidContacts,
    # In:
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    body_f: wp.array(dtype=wp.spatial_vector),
    counts: wp.array(dtype=wp.int32),
    contact_point: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_law: wp.array(dtype=wp.vec3),
):
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        contact_law[c] = wp.vec3(-1.0, 0.0, 0.0)  # inactive unless found active below
        s0, s1, b0, b1, dynamic0, dynamic1 = contact_bodies(body_inv_mass, shapes, contacts, c)
        if not dynamic0 and not dynamic1:
            continue
        g = active_contact(body_q, shapes, contacts, c, law)
        if g.depth == -1.0e30:
            continue
        x, spring, damping = penalty_spring(body_q, body_com, body_inv_mass, body_inv_inertia, shape_ke, shape_kd,
                                            shape_tau, shape_zeta, law, g, s0, s1, b0, b1)
        force = g.normal * spring
        if dynamic0:
            wp.atomic_add(body_f, b0, wrench_at(body_q, body_com, b0, force, x))
            wp.atomic_add(counts, b0, 1)
        if dynamic1:
            wp.atomic_sub(body_f, b1, wrench_at(body_q, body_com, b1, force, x))
            wp.atomic_add(counts, b1, 1)
        # what the sweeps read: where, across which plane, (spring force, damping coefficient, mu)
        contact_point[c] = x
        contact_normal[c] = g.normal
        contact_law[c] = wp.vec3(spring, damping, 0.5 * (shape_mu[s0] + shape_mu[s1]))


@wp.kernel
def predict_body_velocities_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f_other: wp.array(dtype=wp.spatial_vector),
    # In:
    dt: float,
    # Data out:
    body_qd_pred: wp.array(dtype=wp.spatial_vector),
    body_com_world: wp.array(dtype=wp.vec3),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
):
    """Each body's (v, w) after the step under every force but friction: v + dt (f / m + g), w + dt I_w^-1 tau
    (the pose held; a kinematic body keeps its velocity), with its world centre of mass and inverse inertia."""
    b = wp.tid()
    qd = body_qd[b]
    v = wp.spatial_top(qd)
    w = wp.spatial_bottom(qd)
    inv_inertia = world_inverse_inertia(body_q, body_inv_inertia, b)
    inv_mass = body_inv_mass[b]
    if inv_mass > 0.0:
        f = body_f_other[b]
        v = com_velocity_after(v, wp.spatial_top(f), inv_mass, world_gravity(gravity, body_world[b]), dt)
        w = w + dt * (inv_inertia * wp.spatial_bottom(f))
    body_qd_pred[b] = wp.spatial_vector(v, w)
    body_com_world[b] = wp.transform_point(body_q[b], body_com[b])
    body_inv_inertia_world[b] = inv_inertia


@wp.func
def swept_velocity(
    body_inv_mass: wp.array(dtype=float),
    body_qd_pred: wp.array(dtype=wp.spatial_vector),
    body_com_world: wp.array(dtype=wp.vec3),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    body_friction: wp.array(dtype=wp.spatial_vector),
    b: int,
    x: wp.vec3,
    dt: float,
):
    """Velocity of body ``b``'s material point at ``x`` after the step under every other force and the friction
    wrench so far (zero for the world)."""
    if b < 0:
        return wp.vec3(0.0)
    pred = body_qd_pred[b]
    f = body_friction[b]
    v = wp.spatial_top(pred) + dt * body_inv_mass[b] * wp.spatial_top(f)
    w = wp.spatial_bottom(pred) + dt * (body_inv_inertia_world[b] * wp.spatial_bottom(f))
    return v + wp.cross(w, x - body_com_world[b])


@wp.func
def split_response(
    body_inv_mass: wp.array(dtype=float),
    body_com_world: wp.array(dtype=wp.vec3),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    counts: wp.array(dtype=wp.int32),
    b: int,
    x: wp.vec3,
):
    """n K: body ``b``'s inverse mass matrix at ``x`` (``inverse_mass_matrix``, the velocity change there per unit
    impulse) times its count n of contacts (its mass split among them); zero for the world and kinematic bodies."""
    if b < 0:
        return wp.mat33(0.0)
    return float(counts[b]) * inverse_mass_matrix(body_inv_mass[b], body_inv_inertia_world[b], x - body_com_world[b])


@wp.func
def largest_in_plane(block: wp.mat33):
    """The larger eigenvalue of a symmetric response ``block`` confined to a plane (its third eigenvalue 0),
    from its invariants, (tr + sqrt(2 |B|^2 - tr^2)) / 2, with the square root kept off 0 by 1e-3 tr: a bound
    on the response along any direction in the plane that is smooth in the block (an eigenvalue is not
    where the two meet) and independent of the slip's direction (which is noise at rest)."""
    tr = wp.trace(block)
    spread = wp.max(2.0 * wp.ddot(block, block) - tr * tr, 0.0)
    return 0.5 * (tr + wp.sqrt(spread + 1.0e-6 * tr * tr))


@wp.kernel
def contact_response_kernel(
    # Model:
    body_inv_mass: wp.array(dtype=float),
    shapes: ShapeGeometry,
    # Data in:
    contacts: RigidContacts,
    counts: wp.array(dtype=wp.int32),
    contact_point: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_law: wp.array(dtype=wp.vec3),
    body_com_world: wp.array(dtype=wp.vec3),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    # In:
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    contact_response: wp.array(dtype=wp.vec2),
):
    """Each active contact's Jacobi denominators (the same in every sweep): the pair's inverse mass at x, each
    body's share of its mass (its count of contacts), along the normal and (its bound) in the contact plane."""
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        if contact_law[c][0] < 0.0:
            continue
        x = contact_point[c]
        n = contact_normal[c]
        _s0, _s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
        k = (split_response(body_inv_mass, body_com_world, body_inv_inertia_world, counts, b0, x)
             + split_response(body_inv_mass, body_com_world, body_inv_inertia_world, counts, b1, x))
        plane = wp.identity(n=3, dtype=float) - wp.outer(n, n)
        contact_response[c] = wp.vec2(wp.dot(n, k * n), largest_in_plane(plane * k * plane))


@wp.kernel
def contact_sweep_kernel(
    # Model:
    body_inv_mass: wp.array(dtype=float),
    shapes: ShapeGeometry,
    # Data in:
    contacts: RigidContacts,
    contact_point: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_law: wp.array(dtype=wp.vec3),
    contact_response: wp.array(dtype=wp.vec2),
    body_qd_pred: wp.array(dtype=wp.spatial_vector),
    body_com_world: wp.array(dtype=wp.vec3),
    body_inv_inertia_world: wp.array(dtype=wp.mat33),
    force_in: wp.array(dtype=wp.vec4),
    body_wrench_in: wp.array(dtype=wp.spatial_vector),
    # In:
    relaxation: float,
    dt: float,
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    force_out: wp.array(dtype=wp.vec4),
    body_wrench_out: wp.array(dtype=wp.spatial_vector),
):
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        law = contact_law[c]
        spring = law[0]
        if spring < 0.0:
            continue  # not active this step
        kd = law[1]
        w = contact_response[c]
        _s0, _s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
        x = contact_point[c]
        n = contact_normal[c]
        old = force_in[c]
        damping_old = old[0]
        friction_old = wp.vec3(old[1], old[2], old[3])
        # the relative velocity at x at the end of this step under every other force and these forces so far
        v = (swept_velocity(body_inv_mass, body_qd_pred, body_com_world, body_inv_inertia_world, body_wrench_in, b0, x,
                            dt)
             - swept_velocity(body_inv_mass, body_qd_pred, body_com_world, body_inv_inertia_world, body_wrench_in, b1,
                              x, dt))
        vn = wp.dot(n, v)
        # normal damping -kd v_n at the end of the step (implicit): a Jacobi step on f_d + kd v_n(f_d) = 0, never
        # pulling (the normal force spring + f_d stays >= 0)
        damping = damping_old - relaxation * (damping_old + kd * vn) / (1.0 + kd * dt * w[0])
        damping = wp.max(damping, -spring)
        # friction: the force that stops the slip by the end of the step, against the slip (so that a sliding
        # contact gets Coulomb's mu f_n exactly opposite to it), onto Coulomb's disk of the normal force
        friction = coulomb_projection(friction_old - relaxation * (v - n * vn) / (dt * w[1]),
                                      law[2] * (spring + damping))
        force_out[c] = wp.vec4(damping, friction[0], friction[1], friction[2])
        force = n * damping + friction
        if inverse_mass_of(body_inv_mass, b0) > 0.0:
            wp.atomic_add(body_wrench_out, b0, wp.spatial_vector(force, wp.cross(x - body_com_world[b0], force)))
        if inverse_mass_of(body_inv_mass, b1) > 0.0:
            wp.atomic_sub(body_wrench_out, b1, wp.spatial_vector(force, wp.cross(x - body_com_world[b1], force)))


@wp.kernel
def add_wrenches_kernel(
    # Data in:
    wrench: wp.array(dtype=wp.spatial_vector),
    # Data out:
    body_f: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    wp.atomic_add(body_f, b, wrench[b])


@stage("shape-shape contact", writes=lambda data: {"body_f": data.state_out.body_f})
def eval_body_contact_forces(model, data) -> None:
    """Stage: the penalty springs of every shape-shape contact point, into ``state_out.body_f``.

    Also what the sweeps of :func:`eval_body_contact_sweeps` read, into the step buffers: each body's number
    of active contacts (``body_contact_counts``: the mass split) and each contact's point, normal and
    (spring force, damping coefficient, mu) (``contact_point``, ``contact_normal``, ``contact_law``; a
    negative spring force marks an inactive contact).
    """
    threads = rigid_contact_threads(model.device, contact_threads(model, data).rigid)
    if threads == 0:
        return
    buffers, state = data.buffers, data.state_in
    buffers.body_contact_counts.zero_()
    wp.launch(body_contact_kernel, dim=threads, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inv_inertia, data.shapes,
                      model.shape_material_ke, model.shape_material_kd, model.shape_material_tau,
                      model.shape_material_zeta, model.shape_material_mu, data.penalty_law, state.body_q,
                      data.rigid_contacts, threads],
              outputs=[data.state_out.body_f, buffers.body_contact_counts, buffers.contact_point,
                       buffers.contact_normal, buffers.contact_law])


@stage("shape-shape damping and friction", writes=lambda data: {"body_f": data.state_out.body_f})
def eval_body_contact_sweeps(model, data) -> None:
    """Stage (the last force stage): normal damping and friction of every shape-shape contact, from the
    bodies' velocities predicted under all the other forces of the step (from a copy of ``state_out.body_f``
    so far, the step buffer ``body_f_other``): ``solver.contact_iterations`` Jacobi sweeps, each moving
    every contact's damping and friction ``solver.contact_relaxation`` times the way to the end-of-step
    velocity's (the last sweep plainly), and the last sweep's wrenches into ``state_out.body_f``."""
    threads = rigid_contact_threads(model.device, contact_threads(model, data).rigid)
    if threads == 0:
        return
    solver, state, buffers, dt = data.solver, data.state_in, data.buffers, data.dt
    wp.copy(buffers.body_f_other, data.state_out.body_f)  # a tape records it: the sweeps' inputs stay as they were
    wp.launch(predict_body_velocities_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inv_inertia, model.body_world, model.gravity,
                      state.body_q, state.body_qd, buffers.body_f_other, dt],
              outputs=[buffers.body_qd_pred, buffers.body_com_world, buffers.body_inv_inertia_world])
    wp.launch(contact_response_kernel, dim=threads, device=model.device,
              inputs=[model.body_inv_mass, data.shapes, data.rigid_contacts, buffers.body_contact_counts,
                      buffers.contact_point, buffers.contact_normal, buffers.contact_law, buffers.body_com_world,
                      buffers.body_inv_inertia_world, threads],
              outputs=[buffers.contact_response])
    forces, wrenches = buffers.rows.contact_forces, buffers.rows.body_contact_wrench  # row 0: zeros, never written
    buffers.body_contact_wrench.zero_()
    sweeps = solver.contact_iterations
    for k in range(sweeps):
        # over-relaxed sweeps reach the slow modes of many contacts sooner; the last one is plain, so a lone
        # contact (and any mode one sweep resolves) ends exactly where it should
        relaxation = solver.contact_relaxation if k < sweeps - 1 else 1.0
        wp.launch(contact_sweep_kernel, dim=threads, device=model.device,
                  inputs=[model.body_inv_mass, data.shapes, data.rigid_contacts, buffers.contact_point,
                          buffers.contact_normal, buffers.contact_law, buffers.contact_response, buffers.body_qd_pred,
                          buffers.body_com_world, buffers.body_inv_inertia_world, forces[k], wrenches[k],
                          relaxation, dt, threads],
                  outputs=[forces[k + 1], wrenches[k + 1]])
    wp.launch(add_wrenches_kernel, dim=model.body_count, device=model.device, inputs=[wrenches[sweeps]],
              outputs=[data.state_out.body_f])
