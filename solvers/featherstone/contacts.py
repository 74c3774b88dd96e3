"""Shape-shape contacts in joint space: mass-independent penalty contact through the contact Jacobian.

Each contact of ``Contacts.rigid_contact_*`` is evaluated at the step's joint-space poses with
:func:`inertia.collision.contact_geometry.rigid_contact_geometry` (depth r [m], normal n from shape 1
towards shape 0, surface points p0, p1; the force acts at their midpoint x). Its Jacobian row for
degree of freedom d of an articulation is the velocity of x it causes, ``J_d = S_d,lin + S_d,ang x
(x - p_ref)`` for the joints on the path from the root to the contact's body (zero elsewhere); both
sides (body 0 with +, body 1 with -) in their own articulations.

The contact model, MuJoCo's solref idea as a spring-damper: each touching contact i gets the mass

    m_i = 1 / max(sum_j D_ij, D_ii)        D = J_n H0^-1 J_n^T  (J_n = n . J over the touching contacts;
                                                                H0 = M + armature + dt D_joints)

and the normal force ``f_n = m_i ((1 / (tc zeta))^2 r - (2 / tc) v_n)``, a mass-spring-damper of time
constant ``tc`` (``contact_timeconst``, [s]) and damping ratio ``zeta`` (``contact_dampratio``; 1:
critically damped, no bounce) whatever the masses involved. The row sum shares the mass among the
contacts that push it together: a box on four corners (or a robot on four feet) sinks under its
weight as one spring of its whole mass and time constant tc would, g tc^2 (1 mm at tc = 0.01 s),
where each corner's own effective mass (the diagonal, its rotation included) would be too small;
the diagonal takes over where the other contacts pull the other way (a seesaw). MuJoCo solves the
coupled contacts as one constraint problem instead; this keeps each contact a spring-damper, with
two passes (z_i = L0^-1 J_i^T, summed per articulation; then D_i. = z_i . sum_j z_j). Friction is smoothed Coulomb, ``f_t = -mu f_n v_t / sqrt(|v_t|^2 + eps^2)`` (mu: the mean
of the two shapes', eps: ``model.friction_smoothing`` unless the solver is given one).

Both are integrated implicitly in the contact's own articulations: the normal stiffness and damping
(``dt (b + dt k) J_n^T J_n``) and the friction as a damping of its coefficient at the step's start
(``dt c_t J_t^T J_t``, ``c_t = mu f_n / sqrt(|v_t|^2 + eps^2)``) join the matrix that is solved, so a
stiff contact or a small eps stays stable at any dt. The coupling between two different
articulations through a contact is explicit (each side sees the other at its velocity at the start of
the step). The force is one-sided: a contact whose explicit normal force ``k r - (b + dt k) v_n``
would pull is dropped for the step.

Differentiable (``wp.Tape``) through poses, velocities, masses, inertias and friction while the set
of active contacts stays the same; which contacts exist is decided by ``model.collide`` (no gradient).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_geometry import ContactGeometry, RigidContacts, rigid_contact_geometry, stored_contact_count
from ...collision.sdf import ShapeGeometry
from .spatial import point_velocity
from .topology import Tree, articulation_block

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def dof_moves_body(tree: Tree, d: int, b: int):
    """Whether dof ``d`` is on the path from its tree's root to body ``b`` (-1: the world, never)."""
    if b < 0:
        return False
    sb = tree.body_slot[b]
    sd = tree.dof_slot[d]
    return sb >= sd and sb < tree.slot_end[sd]


@wp.func
def dof_point_velocity(tree: Tree, dof_S: wp.array(dtype=wp.spatial_vector), d: int, b: int, r: wp.vec3):
    """Velocity of body ``b``'s point at ``r`` (relative to p_ref) per unit rate of dof ``d`` (0 off its path)."""
    if dof_moves_body(tree, d, b):
        return point_velocity(dof_S[d], r)
    return wp.vec3(0.0)


@wp.func
def contact_column(tree: Tree, dof_S: wp.array(dtype=wp.spatial_vector), d: int, b0: int, b1: int, r: wp.vec3):
    """Column d of the contact's relative-velocity Jacobian (body 0's point minus body 1's)."""
    return dof_point_velocity(tree, dof_S, d, b0, r) - dof_point_velocity(tree, dof_S, d, b1, r)


@wp.func
def side_velocity(tree: Tree, art_ref: wp.array(dtype=wp.vec3),
                  body_v: wp.array(dtype=wp.spatial_vector), body_X: wp.array(dtype=wp.transform),
                  body_qd_in: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3), b: int,
                  x: wp.vec3):
    """Velocity [m/s] of body b's material point at world x (a kinematic body's from its own velocity)."""
    if b < 0:
        return wp.vec3(0.0)
    a = tree.body_art[b]
    if a >= 0:
        return point_velocity(body_v[b], x - art_ref[a])
    v = body_qd_in[b]
    return wp.spatial_top(v) + wp.cross(wp.spatial_bottom(v), x - wp.transform_point(body_X[b], body_com[b]))


@wp.func
def side_range(a0: int, a1: int):
    """The sides (0: body 0's articulation, 1: body 1's) a contact acts on: [first, end); one side when both
    bodies are in the same articulation (their Jacobian columns are subtracted there)."""
    first = wp.where(a0 >= 0, 0, 1)
    end = wp.where(a1 >= 0 and a1 != a0, 2, 1)
    return first, end


@wp.func
def contact_sides(shape_body: wp.array(dtype=wp.int32), tree: Tree, s0: int, s1: int):
    """(body 0, body 1, articulation of body 0, of body 1); -1 for the world or a body outside every tree."""
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    a0 = wp.where(b0 >= 0, tree.body_art[wp.max(b0, 0)], -1)
    a1 = wp.where(b1 >= 0, tree.body_art[wp.max(b1, 0)], -1)
    return b0, b1, a0, a1


@wp.func
def contact_on_trees(shapes: ShapeGeometry, tree: Tree, body_X: wp.array(dtype=wp.transform),
                     contacts: RigidContacts, c: int, margin: float):
    """(body 0, body 1, their articulations, geometry) of stored contact ``c`` (< ``stored_contact_count``), as
    both passes read it; the geometry's depth is 0 (the passes skip the contact) when it touches no tree."""
    b0, b1, a0, a1 = contact_sides(shapes.body, tree, contacts.shape0[c], contacts.shape1[c])
    if a0 < 0 and a1 < 0:
        return b0, b1, a0, a1, ContactGeometry()
    return b0, b1, a0, a1, rigid_contact_geometry(body_X, shapes, contacts, c, margin)


def _contact_jacobian_kernel(taped: bool):
    """Pass 1's kernel; ``taped``: the differentiable one (the forward substitution's sums gathered by atomic
    adds in ``z_partial``, see :mod:`.linalg`), else its forward-only twin (sums in a local: the same float
    additions in the same order, so the same bits; ``z_partial`` neither read nor written, nor zeroed)."""

    @wp.kernel(name="contact_jacobian_kernel" if taped else "contact_jacobian_forward_kernel",
               enable_backward=taped)
    def contact_jacobian_kernel(
        # Model:
        shapes: ShapeGeometry,
        tree: Tree,
        # Data in:
        body_X: wp.array(dtype=wp.transform),
        art_ref: wp.array(dtype=wp.vec3),
        dof_S: wp.array(dtype=wp.spatial_vector),
        L0: wp.array(dtype=float),
        contacts: RigidContacts,
        # In:
        margin: float,
        max_dofs: int,
        stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
        # Data out:
        z_partial: wp.array(dtype=float),  # zero on entry (taped only); (contact, side, dof)
        z: wp.array(dtype=float),  # L0^-1 J_n^T per contact side
        inv_mass: wp.array(dtype=float),  # zero on entry; (contact, side): the diagonal of D
        z_sum: wp.array(dtype=float),  # zero on entry; per dof: the sum of every touching contact's z
    ):
        """Pass 1 of the contacts: each touching contact's z = L0^-1 J_n^T and their sum per articulation."""
        thread = wp.tid()
        for c in range(thread, stored_contact_count(contacts), stride):
            b0, b1, a0, a1, g = contact_on_trees(shapes, tree, body_X, contacts, c, margin)
            # skipped: a contact outside every tree, or no penetration
            if g.depth > 0.0:
                x = 0.5 * (g.p0 + g.p1)
                n = g.normal
                # per side: z = L0^-1 J_n^T by forward substitution; inv_mass = |z|^2 (the contact's diagonal of
                # D); z_sum += z. Written inline (not in a wp.func): Warp replays a function call in the reverse
                # pass, atomic adds included
                first, end = side_range(a0, a1)
                for k in range(first, end):
                    a = wp.where(k == 0, a0, a1)
                    d0, nd, m0 = articulation_block(tree, a)
                    zb = (c * 2 + k) * max_dofs
                    r = x - art_ref[a]
                    for i in range(nd):
                        below = float(0.0)
                        if wp.static(taped):
                            for j in range(i):
                                wp.atomic_add(z_partial, zb + i, L0[m0 + i * nd + j] * z[zb + j])
                            below = z_partial[zb + i]
                        else:
                            for j2 in range(i):
                                below += L0[m0 + i * nd + j2] * z[zb + j2]
                        jn = wp.dot(n, contact_column(tree, dof_S, d0 + i, b0, b1, r))
                        zi = (jn - below) / L0[m0 + i * nd + i]
                        z[zb + i] = zi
                        wp.atomic_add(inv_mass, c * 2 + k, zi * zi)
                        wp.atomic_add(z_sum, d0 + i, zi)

    return contact_jacobian_kernel


contact_jacobian_kernel = _contact_jacobian_kernel(True)
contact_jacobian_forward_kernel = _contact_jacobian_kernel(False)


@wp.kernel
def contact_force_kernel(
    # Model:
    shapes: ShapeGeometry,
    shape_mu: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    tree: Tree,
    # Data in:
    body_X: wp.array(dtype=wp.transform),
    body_v: wp.array(dtype=wp.spatial_vector),
    body_qd_in: wp.array(dtype=wp.spatial_vector),
    art_ref: wp.array(dtype=wp.vec3),
    dof_S: wp.array(dtype=wp.spatial_vector),
    z: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    z_sum: wp.array(dtype=float),
    contacts: RigidContacts,
    # In:
    margin: float,
    timeconst: float,
    dampratio: float,
    friction_eps: float,
    max_dofs: int,
    dt: float,
    wrench_weight: float,
    stride: int,  # threads: each takes every stride-th stored contact (rigid_contact_threads)
    # Data out:
    row_sum: wp.array(dtype=float),  # zero on entry; per contact: its row of D summed
    tau: wp.array(dtype=float),  # generalized contact forces (atomic)
    H: wp.array(dtype=float),  # += the implicit contact terms (atomic)
    body_f: wp.array(dtype=wp.spatial_vector),  # += wrench_weight x contact wrenches (force at the com, torque)
):
    """Pass 2: effective mass, forces, generalized forces and implicit terms of each contact (``dt`` = 0: explicit)."""
    thread = wp.tid()
    for c in range(thread, stored_contact_count(contacts), stride):
        b0, b1, a0, a1, g = contact_on_trees(shapes, tree, body_X, contacts, c, margin)
        if g.depth > 0.0:  # else a contact outside every tree, or no penetration
            s0 = contacts.shape0[c]
            s1 = contacts.shape1[c]
            x = 0.5 * (g.p0 + g.p1)
            n = g.normal
            v_rel = (side_velocity(tree, art_ref, body_v, body_X, body_qd_in, body_com, b0, x)
                     - side_velocity(tree, art_ref, body_v, body_X, body_qd_in, body_com, b1, x))
            vn = wp.dot(n, v_rel)
            vt = v_rel - n * vn
            first, end = side_range(a0, a1)
            for k in range(first, end):  # this contact's row of D summed over every touching contact: z . z_sum
                a = wp.where(k == 0, a0, a1)
                d0 = tree.art_dof_start[a]
                zb = (c * 2 + k) * max_dofs
                for i in range(tree.art_dof_start[a + 1] - d0):
                    wp.atomic_add(row_sum, c, z[zb + i] * z_sum[d0 + i])
            # the contact's share of the mass it moves: its row of D summed over the touching contacts (its own
            # diagonal when the others pull the other way); w <= 0: two bodies welded together in one tree, the
            # contact moves nothing
            w = wp.max(row_sum[c], inv_mass[c * 2] + inv_mass[c * 2 + 1])
            if w > 0.0:
                m_eff = 1.0 / w
                k_n = m_eff / (timeconst * dampratio * timeconst * dampratio)
                b_n = 2.0 * m_eff / timeconst
                f_n = k_n * g.depth - (b_n + dt * k_n) * vn
                if f_n > 0.0:  # else separating faster than the spring pushes: no force this step
                    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
                    c_t = mu * f_n / wp.sqrt(wp.dot(vt, vt) + friction_eps * friction_eps)
                    force = n * f_n - vt * c_t  # on body 0 at x; its opposite on body 1
                    damping_n = dt * (b_n + dt * k_n)
                    damping_t = dt * c_t
                    for k2 in range(first, end):  # tau += J^T force, H += damping_n J_n^T J_n + damping_t J_t^T J_t
                        a2 = wp.where(k2 == 0, a0, a1)
                        e0, ne, n0 = articulation_block(tree, a2)
                        r2 = x - art_ref[a2]
                        for ri in range(ne):
                            col_r = contact_column(tree, dof_S, e0 + ri, b0, b1, r2)
                            wp.atomic_add(tau, e0 + ri, wp.dot(col_r, force))
                            # a dof that moves neither body (off the paths from the root to both) has a zero
                            # column: its row and column of the implicit terms are zero, and skipped; the terms are
                            # symmetric bit for bit (products of two factors, each commutative), so the lower
                            # triangle is computed and added to both halves
                            if dof_moves_body(tree, e0 + ri, b0) or dof_moves_body(tree, e0 + ri, b1):
                                jn_r = wp.dot(n, col_r)
                                for ci in range(ri + 1):
                                    if dof_moves_body(tree, e0 + ci, b0) or dof_moves_body(tree, e0 + ci, b1):
                                        col_c = contact_column(tree, dof_S, e0 + ci, b0, b1, r2)
                                        jn_c = wp.dot(n, col_c)
                                        jj = jn_r * jn_c
                                        h = damping_n * jj + damping_t * (wp.dot(col_r, col_c) - jj)
                                        wp.atomic_add(H, n0 + ri * ne + ci, h)
                                        if ci != ri:
                                            wp.atomic_add(H, n0 + ci * ne + ri, h)
                    if a0 >= 0:
                        com0 = wp.transform_point(body_X[b0], body_com[b0])
                        wp.atomic_add(body_f, b0, wrench_weight * wp.spatial_vector(force, wp.cross(x - com0, force)))
                    if a1 >= 0:
                        com1 = wp.transform_point(body_X[b1], body_com[b1])
                        wp.atomic_sub(body_f, b1, wrench_weight * wp.spatial_vector(force, wp.cross(x - com1, force)))
