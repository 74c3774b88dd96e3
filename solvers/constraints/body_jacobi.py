"""Jacobi iterations of rigid bodies: mass splitting and applying an iteration's corrections (``jacobi.py``
has the particles' and the iteration scheme).

Summing the corrections of n constraints that all fix the same error would overshoot n
times, so each body b is split into parts (Tonge et al. 2012): a constraint uses the inverse mass
s_b w_b of its part,

    dlambda = (-C - alpha~ lambda) / (s_a w_a + s_b w_b + alpha~),

and applies w dlambda to the whole body (``body_frames.add_positional``). s_b = n_b^p with n_b the
constraints on body b this step (:func:`count_body_constraints`: its joint rows, its shape-shape
contacts that penetrate at the predicted poses, the particle contacts on its shapes) and p the
solver's ``splitting``: 1 ("full", never overshoots) or 1/2 ("sqrt", the default, as for particles).
Why 1/2 helps: the corners of a resting box each see the box's rotational inverse mass too (for a
cube corner 3/m of its 4/m), which cancels only in their sum, so full splitting corrects a flat
contact by 1/4 per iteration; 1/sqrt(n) by 1/2 (measured: the settling of a 5-box stack and the
creep of a box stuck on a slope fall 2-5x). At convergence the multipliers (lambda / dt^2 is a
constraint's force) are the physical ones whatever s is. The counts are integers and carry no
gradient. :func:`apply_body_corrections` adds each body's summed (dx, dtheta) to its motion (dtheta as
a first-order quaternion update of the motion's rotation, renormalized).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_geometry import RigidContacts, rigid_contact_geometry, stored_contact_count
from ...collision.particle_shape import SoftContacts
from ...collision.sdf import ShapeGeometry
from ...integrators.xpbd_bodies import pose_from_motion
from ..forces.contact_sides import contact_threads, rigid_contact_sides, rigid_contact_threads
from ..step_data import stage
from .body_frames import world_frame

on_demand(__name__)  # backward code compiled once gradients are wanted


# ---------------------------------------------------------------------------------------------- mass splitting
@wp.kernel
def count_contact_constraints_kernel(
    # Model:
    shapes: ShapeGeometry,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    contacts: RigidContacts,
    soft: SoftContacts,
    # In:
    stride: int,  # threads: each takes every stride-th stored contact of both lists (rigid_contact_threads)
    # Data out:
    split: wp.array(dtype=float),
):
    t = wp.tid()
    for c in range(t, stored_contact_count(contacts), stride):
        _s0, _s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
        g = rigid_contact_geometry(body_q, shapes, contacts, c, 0.0)
        if g.depth > 0.0:
            if b0 >= 0:
                wp.atomic_add(split, b0, 1.0)
            if b1 >= 0:
                wp.atomic_add(split, b1, 1.0)
    for c2 in range(t, wp.min(soft.count[0], soft.capacity), stride):
        b = shapes.body[soft.shape[c2]]
        if b >= 0:
            wp.atomic_add(split, b, 1.0)


@wp.kernel
def split_factors_kernel(
    # In:
    exponent: float,
    # Data out:
    split: wp.array(dtype=float),
):
    b = wp.tid()
    split[b] = wp.pow(wp.max(split[b], 1.0), exponent)


def split_factors(model, exponent: float, split) -> None:
    """``split`` (constraint counts per body) to mass-splitting factors n^exponent (n >= 1), in place."""
    wp.launch(split_factors_kernel, dim=model.body_count, inputs=[float(exponent)], outputs=[split],
              device=model.device)


@stage("mass splitting")
def count_body_constraints(model, data) -> None:
    """Stage: each body's mass-splitting factor this step, n^exponent (n >= 1), into ``split``.

    n: the body's joint rows, its shape-shape contacts that penetrate at the predicted poses
    (candidates that do not touch would only slow the others down), and the particle-contact
    candidates on its shapes.
    """
    if model.body_count == 0:
        return
    b = data.buffers
    wp.copy(b.split, data.solver.joint_rows)
    threads = contact_threads(model, data)
    # the counts are whole numbers: exact in any order, so one thread on a CPU loops over both lists of contacts
    # found instead of one thread per slot of the larger capacity (the 64-box pile's 4,608, for 640 contacts)
    n = rigid_contact_threads(model.device, max(threads.rigid, threads.soft))
    if n > 0:
        wp.launch(count_contact_constraints_kernel, dim=n, device=model.device,
                  inputs=[data.shapes, b.rows.body_q[0], data.rigid_contacts, data.soft_contacts, n],
                  outputs=[b.split])
    split_factors(model, data.solver.split_exponent, b.split)


# ---------------------------------------------------------------------------------------------- corrections
@wp.kernel
def apply_body_corrections_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    # Data in:
    body_q_start: wp.array(dtype=wp.transform),
    motion: wp.array(dtype=wp.transform),
    split: wp.array(dtype=float),
    delta: wp.array(dtype=wp.spatial_vector),
    # Data out:
    motion_out: wp.array(dtype=wp.transform),
    pose_out: wp.array(dtype=wp.transform),
    com_out: wp.array(dtype=wp.vec3),
    inv_inertia_out: wp.array(dtype=wp.mat33),
):
    b = wp.tid()
    M = motion[b]
    d = delta[b]
    dtheta = wp.spatial_bottom(d)
    dq = wp.transform_get_rotation(M)
    dq_new = dq + wp.quat(dtheta[0], dtheta[1], dtheta[2], 0.0) * dq * 0.5
    # Always the full update, so a correction that happens to be exactly zero still carries its derivative;
    # only the renormalization is skipped when nothing turned: then dq_new is dq bit for bit and an untouched
    # body keeps its pose bit for bit.
    if wp.length_sq(dtheta) > 0.0:
        dq_new = wp.normalize(dq_new)
    M_new = wp.transform(wp.transform_get_translation(M) + wp.spatial_top(d), dq_new)
    motion_out[b] = M_new
    com = body_com[b]
    X_new = pose_from_motion(body_q_start[b], com, M_new)
    pose_out[b] = X_new
    com_w, inv_inertia_w = world_frame(X_new, com, body_inv_inertia[b], split[b])
    com_out[b] = com_w
    inv_inertia_out[b] = inv_inertia_w


@stage("iteration {0}", writes=lambda data, k: {"body_q": data.buffers.rows.body_q[k + 1]})
def apply_body_corrections(model, data, k: int) -> None:
    """Stage: body iterate k + 1 = iterate k moved by iteration k's summed corrections, and its body frames.

    The corrections add to the bodies' motion since the step began (``body_motion``, step-local: see
    ``integrators/xpbd_bodies.py``); the poses are rebuilt from it and the step's start.
    """
    if model.body_count == 0:
        return
    b = data.buffers
    rows = b.rows
    wp.launch(apply_body_corrections_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_inertia, data.state_in.body_q, rows.body_motion[k], b.split,
                      rows.body_delta[k]],
              outputs=[rows.body_motion[k + 1], rows.body_q[k + 1], rows.frame_com[k + 1],
                       rows.frame_inv_inertia[k + 1]])
