"""The restitution pass of rigid contacts (Müller et al. 2020, 3.5), after the velocities are recovered.

Every shape-shape contact that pushed in the position pass (lambda_n > 0) gets the
normal velocity -e v_n(start of step), or 0 below the solver's
``restitution_threshold`` [m/s], in ``velocity_iterations`` Jacobi iterations,
mass-split over the contacts that pushed (a box landing flat needs several
iterations, a ball one). The poses do not move in this pass, so each contact's
geometry (normal, lever arms, the bodies' responses to a normal impulse, the
target velocity) is computed once into a ``contact_velocity_row`` and the
iterations only read it: a handful of dot products per contact.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_geometry import RigidContacts, rigid_contact_geometry, stored_contact_count
from ...collision.sdf import ShapeGeometry
from ...kinematics import point_velocity
from ..forces.contact_sides import contact_threads, rigid_contact_sides, rigid_contact_threads
from ..step_data import stage
from .body_frames import body_frame, point_motion
from .body_jacobi import split_factors
from .jacobi import add_corrections

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def count_pushing_contacts_kernel(
    # Model:
    shapes: ShapeGeometry,
    # Data in:
    contacts: RigidContacts,
    lam: wp.array(dtype=wp.vec2),
    # In:
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    split: wp.array(dtype=float),
):
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        if lam[c][0] <= 0.0:
            continue
        _s0, _s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
        if b0 >= 0:
            wp.atomic_add(split, b0, 1.0)
        if b1 >= 0:
            wp.atomic_add(split, b1, 1.0)


# What one contact's velocity iterations need, fixed for the pass (the poses do not move in it):
# [0:3] the normal n (world, from shape 1 to shape 0), [3:6] r0 x n, [6:9] r1 x n (lever arms from each body's
# centre of mass), [9:12] and [12:15] the angular velocity change of body 0 and body 1 per unit normal impulse
# (I_w^-1 (r x n), unsplit), [15] the target normal velocity max(-e v_n(start), 0) [m/s], [16] the split
# inverse mass along n (w_n; 0: the contact takes no part in the pass).
contact_velocity_row = wp.types.vector(length=17, dtype=float)


@wp.kernel
def prepare_contact_velocities_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    shapes: ShapeGeometry,
    shape_restitution: wp.array(dtype=float),
    # Data in:
    body_q_start: wp.array(dtype=wp.transform),
    body_qd_start: wp.array(dtype=wp.spatial_vector),
    contacts: RigidContacts,
    body_q: wp.array(dtype=wp.transform),
    body_motion: wp.array(dtype=wp.transform),
    split: wp.array(dtype=float),
    lam: wp.array(dtype=wp.vec2),
    # In:
    restitution_threshold: float,
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    rows: wp.array(dtype=contact_velocity_row),
):
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        row = contact_velocity_row()
        if lam[c][0] > 0.0:  # only contacts that pushed in the position pass
            s0, s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
            g = rigid_contact_geometry(body_q, shapes, contacts, c, 0.0)
            f0 = body_frame(body_q, body_com, body_inv_mass, body_inv_inertia, split, b0)
            f1 = body_frame(body_q, body_com, body_inv_mass, body_inv_inertia, split, b1)
            n = g.normal
            rn0 = wp.cross(g.p0 - f0.com, n)
            rn1 = wp.cross(g.p1 - f1.com, n)
            # the normal velocity the contact points had when the step began (same material points)
            start0 = g.p0 - point_motion(body_motion, f0, b0, g.p0)
            start1 = g.p1 - point_motion(body_motion, f1, b1, g.p1)
            v_start = point_velocity(body_q_start, body_qd_start, body_com, b0, start0) - point_velocity(
                body_q_start, body_qd_start, body_com, b1, start1)
            vn_start = wp.dot(n, v_start)
            e = 0.5 * (shape_restitution[s0] + shape_restitution[s1])
            if vn_start > -restitution_threshold:
                e = 0.0
            # body_frame scales by the split factor; the unsplit body moves (add_positional's rule)
            a0 = f0.inv_inertia * rn0
            a1 = f1.inv_inertia * rn1
            if b0 >= 0:
                a0 = a0 / split[b0]
            if b1 >= 0:
                a1 = a1 / split[b1]
            w_n = f0.inv_mass + wp.dot(rn0, f0.inv_inertia * rn0) + f1.inv_mass + wp.dot(rn1, f1.inv_inertia * rn1)
            if w_n > 0.0:
                for i in range(3):
                    row[i] = n[i]
                    row[3 + i] = rn0[i]
                    row[6 + i] = rn1[i]
                    row[9 + i] = a0[i]
                    row[12 + i] = a1[i]
                row[15] = wp.max(-e * vn_start, 0.0)
                row[16] = w_n
        rows[c] = row


@wp.func
def row_vec3(row: contact_velocity_row, at: int):
    return wp.vec3(row[at], row[at + 1], row[at + 2])


@wp.func
def body_velocity(body_qd: wp.array(dtype=wp.spatial_vector), b: int):
    if b < 0:
        return wp.spatial_vector()
    return body_qd[b]


@wp.kernel
def solve_contact_velocities_kernel(
    # Model:
    body_inv_mass: wp.array(dtype=float),
    shapes: ShapeGeometry,
    # Data in:
    contacts: RigidContacts,
    rows: wp.array(dtype=contact_velocity_row),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # In:
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    dqd: wp.array(dtype=wp.spatial_vector),
):
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        row = rows[c]
        w_n = row[16]
        if w_n <= 0.0:
            continue
        _s0, _s1, b0, b1 = rigid_contact_sides(shapes, contacts, c)
        n = row_vec3(row, 0)
        qd0 = body_velocity(body_qd, b0)
        qd1 = body_velocity(body_qd, b1)
        # n . (v + omega x r) = n . v + omega . (r x n)
        vn = (wp.dot(n, wp.spatial_top(qd0)) + wp.dot(wp.spatial_bottom(qd0), row_vec3(row, 3))
              - wp.dot(n, wp.spatial_top(qd1)) - wp.dot(wp.spatial_bottom(qd1), row_vec3(row, 6)))
        j = (row[15] - vn) / w_n
        if b0 >= 0:
            wp.atomic_add(dqd, b0, wp.spatial_vector(n * (j * body_inv_mass[b0]), row_vec3(row, 9) * j))
        if b1 >= 0:
            wp.atomic_sub(dqd, b1, wp.spatial_vector(n * (j * body_inv_mass[b1]), row_vec3(row, 12) * j))


@stage("velocity update", writes=lambda data: {"body_q": data.state_out.body_q,
                                                         "body_qd": data.state_out.body_qd})
def solve_contact_velocities(model, data) -> None:
    """Stage: restitution of the contacts that pushed, ``velocity_iterations`` Jacobi iterations, into
    ``state_out.body_qd``.

    Reads the solved poses (``state_out.body_q``) and the contacts' final multipliers; buffers:
    ``body_qd`` (iterations, bodies) the velocity iterates, row 0 the velocities recovered from the
    poses, ``body_dqd`` their changes, ``contact_split`` this pass's splitting factors (the contacts
    that pushed, to the power of the solver's exponent), ``contact_rows`` one ``contact_velocity_row``
    per contact, the geometry the iterations share (computed once: the poses do not move in this pass).
    """
    if model.body_count == 0:
        return
    b, solver = data.buffers, data.solver
    qd, dqd = b.rows.body_qd, b.rows.body_dqd
    iterations = len(dqd)
    b.body_dqd.zero_()
    threads = rigid_contact_threads(model.device, contact_threads(model, data).rigid)
    if threads:
        lam = b.rows.contact_lambda[-1]
        b.contact_split.zero_()
        wp.launch(count_pushing_contacts_kernel, dim=threads, device=model.device,
                  inputs=[data.shapes, data.rigid_contacts, lam, threads], outputs=[b.contact_split])
        split_factors(model, solver.split_exponent, b.contact_split)
        wp.launch(prepare_contact_velocities_kernel, dim=threads, device=model.device,
                  inputs=[model.body_com, model.body_inv_mass, model.body_inv_inertia, data.shapes,
                          model.shape_material_restitution, data.state_in.body_q, data.state_in.body_qd,
                          data.rigid_contacts, data.state_out.body_q, b.rows.body_motion[-1], b.contact_split, lam,
                          solver.restitution_threshold, threads],
                  outputs=[b.contact_rows])
    for k in range(iterations):
        if threads:
            wp.launch(solve_contact_velocities_kernel, dim=threads, device=model.device,
                      inputs=[model.body_inv_mass, data.shapes, data.rigid_contacts, b.contact_rows, qd[k], threads],
                      outputs=[dqd[k]])
        out = qd[k + 1] if k + 1 < iterations else data.state_out.body_qd
        add_corrections(model, model.body_count, qd[k], dqd[k], out)
