"""Contacts between shapes in XPBD (Müller et al. 2020): non-penetration and Coulomb-bounded static friction.

Each candidate of ``Contacts.rigid_contact_*`` has its geometry
re-evaluated on the current iterate by ``rigid_contact_geometry``; while the
depth d > 0 the pair is pushed apart along the normal (dlambda_n = d / w,
zero compliance), but no further than the solver's ``max_depenetration_velocity``
x dt of relative normal motion since the step began (``particle_contacts.contact_push``:
an overlap present at the step's start separates at that speed, not at d / dt).
The slip is the contact points' relative motion since the step began, from the
bodies' step-local motion (``body_frames.point_motion``): as precise at any
distance from the origin (a sliding box stops where it does at the origin,
also 100 m out). Friction is positional and Coulomb-bounded: the relative
tangential displacement of the two contact points since the step began is
undone while that keeps the accumulated lambda_t <= mu lambda_n (sticking),
else lambda_t stops at mu lambda_n (sliding: the friction impulse is mu times
the normal one, dynamic friction). After the velocities are recovered from the
poses, the restitution pass (``restitution.py``, Müller et al. 2020, 3.5) gives every
contact that pushed (lambda_n > 0) the normal velocity -e v_n(start of step),
or 0 below ``restitution_threshold`` [m/s], in ``velocity_iterations`` Jacobi
iterations (mass-split over the contacts that pushed; a box landing flat needs
several, a ball one).
Materials combine by arithmetic means (mu = (mu0 + mu1) / 2, e = (e0 + e1) / 2),
as in the SemiImplicitSolver.

Departure from Müller et al.: they take static friction positionally and
dynamic friction on the velocities. With Jacobi iterations and mass splitting a
contact's static check sees only its share of the normal multiplier while the
others may already stick, and the two frictions add up: a box on a 35 degree
slope with mu = 0.5 crept at 2.5 cm/s instead of sliding at 1.6 m/s^2. The
Coulomb-bounded positional friction slides at g (sin - mu cos) within 1 %.
What Jacobi leaves unconverged per step shows as a slow creep of stuck
contacts, of order (residual fraction) g sin(theta) dt (0.3 mm/s at 20 degrees,
dt = 1/1200 s, 8 iterations; ``tests/test_rigid_xpbd.py``).

Gradients (``wp.Tape``) follow poses, velocities, masses and materials while
the contact set and each contact's regime (separated / sticking / sliding) stay
the same; a contact that starts, or a regime that switches, within a step is a
kink.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_geometry import RigidContacts, rigid_contact_geometry, stored_contact_count
from ...collision.sdf import ShapeGeometry
from ..forces.contact_sides import contact_threads, rigid_contact_sides, rigid_contact_threads
from ..step_data import stage
from .body_frames import (
    add_positional,
    cached_body_frame,
    point_motion,
    positional_inv_mass,
    solve_tangent_rows,
)
from .particle_contacts import contact_push

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def solve_body_contacts_kernel(
    # Model:
    body_inv_mass: wp.array(dtype=float),
    shapes: ShapeGeometry,
    shape_mu: wp.array(dtype=float),
    # Data in:
    contacts: RigidContacts,
    body_q: wp.array(dtype=wp.transform),
    body_motion: wp.array(dtype=wp.transform),
    frame_com: wp.array(dtype=wp.vec3),
    frame_inv_inertia: wp.array(dtype=wp.mat33),
    split: wp.array(dtype=float),
    lambda_in: wp.array(dtype=wp.vec2),
    # In:
    max_push: float,
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    delta: wp.array(dtype=wp.spatial_vector),
    lambda_out: wp.array(dtype=wp.vec2),
):
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        lam = lambda_in[c]
        dlam_n = float(0.0)
        dlam_t = float(0.0)
        s0, s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
        g = rigid_contact_geometry(body_q, shapes, contacts, c, 0.0)
        f0 = cached_body_frame(body_q, frame_com, frame_inv_inertia, body_inv_mass, split, b0)
        f1 = cached_body_frame(body_q, frame_com, frame_inv_inertia, body_inv_mass, split, b1)
        n = g.normal
        r0 = g.p0 - f0.com
        r1 = g.p1 - f1.com
        w_n = positional_inv_mass(f0, r0, n) + positional_inv_mass(f1, r1, n)
        if w_n > 0.0:
            # how far the two contact points moved relative to each other since the step began (step-local:
            # as precise as the motion itself wherever the bodies are)
            slip = point_motion(body_motion, f0, b0, g.p0) - point_motion(body_motion, f1, b1, g.p1)
            push = contact_push(g.depth, wp.dot(n, slip), max_push)
            if push > 0.0:
                dlam_n = push / w_n
                add_positional(delta, b0, f0, split, r0, n * dlam_n)
                add_positional(delta, b1, f1, split, r1, -n * dlam_n)
            lam_n = lam[0] + dlam_n
            if lam_n > 0.0:
                # static friction: undo the tangential slip of the two contact points since the step began
                slip_t = slip - n * wp.dot(n, slip)
                mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
                budget = wp.max(mu * lam_n - lam[1], 0.0)
                # sticking: the impulse that removes all of the slip, solved in the tangent plane with the
                # pair's inverse mass matrix (no slip direction to normalize: a contact that sticks exactly,
                # slip 0, keeps its derivative); sliding: the rest of the Coulomb budget along the slip
                impulse = solve_tangent_rows(f0, r0, f1, r1, n, -slip_t)
                dlam_t = wp.sqrt(wp.dot(impulse, impulse) + 1.0e-30)
                if dlam_t > budget:
                    length = wp.length(slip_t)
                    impulse = wp.vec3(0.0)
                    dlam_t = float(0.0)
                    if length > 1.0e-12:
                        t = slip_t / length
                        w_t = positional_inv_mass(f0, r0, t) + positional_inv_mass(f1, r1, t)
                        dlam_t = wp.min(length / w_t, budget)
                        impulse = -t * dlam_t
                add_positional(delta, b0, f0, split, r0, impulse)
                add_positional(delta, b1, f1, split, r1, -impulse)
        # one store per multiplier: a second store to the same element would get its adjoint twice
        lambda_out[c] = wp.vec2(lam[0] + dlam_n, lam[1] + dlam_t)


@stage("shape-shape contact")
def solve_body_contacts(model, data, k: int) -> None:
    """Stage: non-penetration and static friction of every shape-shape contact on body iterate k.

    The bodies' frames on that iterate come from ``eval_body_frames`` / ``apply_body_corrections``.
    """
    threads = rigid_contact_threads(model.device, contact_threads(model, data).rigid)
    if threads == 0:
        return
    b = data.buffers
    rows = b.rows
    wp.launch(solve_body_contacts_kernel, dim=threads, device=model.device,
              inputs=[model.body_inv_mass, data.shapes, model.shape_material_mu, data.rigid_contacts,
                      rows.body_q[k], rows.body_motion[k], rows.frame_com[k], rows.frame_inv_inertia[k], b.split,
                      rows.contact_lambda[k], data.solver.max_depenetration_velocity * data.dt, threads],
              outputs=[rows.body_delta[k], rows.contact_lambda[k + 1]])
