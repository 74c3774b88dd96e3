"""Rigid bodies in XPBD (Müller et al. 2020): positional corrections of bodies, contacts between shapes.

**Corrections of a body.** A constraint acting on body b through an impulse P
[kg m] at the lever arm r (world, from the centre of mass) moves it by

    dx = P / m,     dtheta = I_w^-1 (r x P)           (I_w = R I R^T, world)

and a purely rotational one (angular impulse P [kg m^2]) by dtheta = I_w^-1 P.
Along a direction n the body's generalized inverse mass is
w = 1/m + (r x n)^T I_w^-1 (r x n) (positional) or n^T I_w^-1 n (rotational).
The world and kinematic bodies have w = 0: constraints never move them.

**Jacobi iterations with mass splitting.** Every constraint of an iteration
reads the same body iterate and adds its (dx, dtheta) to that iteration's
accumulator; :func:`apply_body_corrections` then moves each body by the sum
(dtheta as a first-order quaternion update, renormalized). Summing the
corrections of n constraints that all fix the same error would overshoot n
times, so each body b is split into parts (Tonge et al. 2012): a constraint
uses the inverse mass s_b w_b of its part,

    dlambda = (-C - alpha~ lambda) / (s_a w_a + s_b w_b + alpha~),

and applies w dlambda to the whole body. s_b = n_b^p with n_b the constraints
on body b this step (:func:`count_body_constraints`: its joint rows, its
shape-shape contacts that penetrate at the predicted poses, the particle
contacts on its shapes) and p the solver's ``splitting``: 1 ("full", never
overshoots) or 1/2 ("sqrt", the default, as for particles). Why 1/2 helps:
the corners of a resting box each see the box's rotational inverse mass too
(for a cube corner 3/m of its 4/m), which cancels only in their sum, so full
splitting corrects a flat contact by 1/4 per iteration; 1/sqrt(n) by 1/2
(measured: the settling of a 5-box stack and the creep of a box stuck on a
slope fall 2-5x). At convergence the multipliers (lambda / dt^2 is a
constraint's force) are the physical ones whatever s is. The counts are
integers and carry no gradient.

**Contacts** (``Contacts.rigid_contact_*``): the geometry of each candidate is
re-evaluated on the current iterate by ``rigid_contact_geometry``; while the
depth d > 0 the pair is pushed apart along the normal (dlambda_n = d / w,
zero compliance). Friction is positional and Coulomb-bounded: the relative
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

from ...collision.contact_geometry import rigid_contact_geometry
from ...kinematics import body_pose


# ---------------------------------------------------------------------------------------------- body primitives
@wp.struct
class BodyFrame:
    """What a constraint needs of one body at the current iterate (the world: everything zero)."""

    pose: wp.transform
    com: wp.vec3  # centre of mass, world [m]
    inv_mass: float  # [1/kg], times the body's mass-splitting factor
    inv_inertia: wp.mat33  # world [1/(kg m^2)], times the factor


@wp.func
def world_frame(pose: wp.transform, com: wp.vec3, inv_inertia: wp.mat33, split: float):
    """(centre of mass in world, split world inverse inertia) of a body at ``pose``."""
    rot = wp.quat_to_matrix(wp.transform_get_rotation(pose))
    return wp.transform_point(pose, com), rot * inv_inertia * wp.transpose(rot) * split


@wp.func
def static_frame():
    """The world's frame: nothing gives."""
    f = BodyFrame()
    f.pose = wp.transform_identity()
    f.com = wp.vec3(0.0)
    f.inv_mass = 0.0
    f.inv_inertia = wp.mat33(0.0)
    return f


@wp.func
def body_frame(
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    split: wp.array(dtype=float),
    b: int,
):
    f = static_frame()
    if b >= 0:
        pose = body_q[b]
        com, inv_inertia = world_frame(pose, body_com[b], body_inv_inertia[b], split[b])
        f.pose = pose
        f.com = com
        f.inv_mass = body_inv_mass[b] * split[b]
        f.inv_inertia = inv_inertia
    return f


@wp.kernel
def body_frames_kernel(
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    split: wp.array(dtype=float),
    com_out: wp.array(dtype=wp.vec3),
    inv_inertia_out: wp.array(dtype=wp.mat33),
):
    b = wp.tid()
    com, inv_inertia = world_frame(body_q[b], body_com[b], body_inv_inertia[b], split[b])
    com_out[b] = com
    inv_inertia_out[b] = inv_inertia


def eval_body_frames(model, body_q, split, com_out, inv_inertia_out) -> None:
    """Stage: each body's centre of mass and split world inverse inertia on iterate ``body_q``, once per body.

    The contact kernel reads them (``cached_body_frame``) instead of rotating the inertia at both ends of
    every contact (a box in a pile has ten contacts or more). The first iterate's frames come from here,
    the later ones from :func:`apply_body_corrections`, which writes them with the poses.
    """
    if model.body_count == 0:
        return
    wp.launch(body_frames_kernel, dim=model.body_count, inputs=[body_q, model.body_com, model.body_inv_inertia, split],
              outputs=[com_out, inv_inertia_out], device=model.device)


@wp.func
def cached_body_frame(
    body_q: wp.array(dtype=wp.transform),
    frame_com: wp.array(dtype=wp.vec3),
    frame_inv_inertia: wp.array(dtype=wp.mat33),
    body_inv_mass: wp.array(dtype=float),
    split: wp.array(dtype=float),
    b: int,
):
    """``body_frame`` from the frames ``eval_body_frames`` wrote for this iterate."""
    f = static_frame()
    if b >= 0:
        f.pose = body_q[b]
        f.com = frame_com[b]
        f.inv_mass = body_inv_mass[b] * split[b]
        f.inv_inertia = frame_inv_inertia[b]
    return f


@wp.func
def positional_inv_mass(f: BodyFrame, r: wp.vec3, n: wp.vec3):
    rn = wp.cross(r, n)
    return f.inv_mass + wp.dot(rn, f.inv_inertia * rn)


@wp.func
def angular_inv_mass(f: BodyFrame, n: wp.vec3):
    return wp.dot(n, f.inv_inertia * n)


@wp.func
def point_inv_mass_matrix(f: BodyFrame, r: wp.vec3):
    """K = 1/m 1 - [r]x I_w^-1 [r]x: the velocity change at lever arm ``r`` per unit impulse (3x3)."""
    rx = wp.skew(r)
    return wp.identity(n=3, dtype=float) * f.inv_mass - rx * f.inv_inertia * rx


@wp.func
def solve_rows(K: wp.mat33, alpha: float, rhs: wp.vec3, axis: wp.vec3, in_plane: bool):
    """x with (K + alpha 1) x = rhs; with ``in_plane``, restricted to the plane normal to unit ``axis``.

    A constraint on a vector (a point, a rotation) solved as three rows at once: unlike |d| as one
    scalar row along d / |d|, the correction stays differentiable where d passes through zero.
    """
    M = K + wp.identity(n=3, dtype=float) * alpha
    b = rhs
    if in_plane:
        P = wp.identity(n=3, dtype=float) - wp.outer(axis, axis)
        M = P * M * P + wp.outer(axis, axis)
        b = P * rhs
    x = wp.vec3(0.0)
    if wp.determinant(M) > 0.0:
        x = wp.inverse(M) * b
    return x


@wp.func
def add_positional(delta: wp.array(dtype=wp.spatial_vector), b: int, f: BodyFrame, split: wp.array(dtype=float),
                   r: wp.vec3, impulse: wp.vec3):
    """Add the correction of ``impulse`` [kg m] at lever arm ``r`` to body ``b`` (the unsplit body moves)."""
    if b >= 0:
        s = 1.0 / split[b]
        wp.atomic_add(delta, b, wp.spatial_vector(impulse * (f.inv_mass * s),
                                                  f.inv_inertia * wp.cross(r, impulse) * s))


@wp.func
def add_angular(delta: wp.array(dtype=wp.spatial_vector), b: int, f: BodyFrame, split: wp.array(dtype=float),
                impulse: wp.vec3):
    """Add the rotation of angular ``impulse`` [kg m^2] to body ``b``."""
    if b >= 0:
        s = 1.0 / split[b]
        wp.atomic_add(delta, b, wp.spatial_vector(wp.vec3(0.0), f.inv_inertia * impulse * s))


@wp.func
def start_of_step(X_now: wp.transform, X_start: wp.transform, b: int, x: wp.vec3):
    """Where the material point of body ``b`` now at ``x`` was when the step began (the world: ``x``)."""
    if b < 0:
        return x
    return wp.transform_point(X_start, wp.transform_point(wp.transform_inverse(X_now), x))


@wp.kernel
def apply_body_corrections_kernel(
    pose: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    split: wp.array(dtype=float),
    delta: wp.array(dtype=wp.spatial_vector),
    pose_out: wp.array(dtype=wp.transform),
    com_out: wp.array(dtype=wp.vec3),
    inv_inertia_out: wp.array(dtype=wp.mat33),
):
    b = wp.tid()
    X = pose[b]
    d = delta[b]
    dx = wp.spatial_top(d)
    dtheta = wp.spatial_bottom(d)
    com = body_com[b]
    q = wp.transform_get_rotation(X)
    q_new = q + wp.quat(dtheta[0], dtheta[1], dtheta[2], 0.0) * q * 0.5
    # Always the full update, so a correction that happens to be exactly zero still carries its derivative;
    # only the renormalization is skipped when nothing turned: then q_new is q bit for bit, the com terms
    # below cancel exactly, and an untouched body keeps its pose bit for bit.
    if wp.length_sq(dtheta) > 0.0:
        q_new = wp.normalize(q_new)
    p_new = wp.transform_get_translation(X) + dx + (wp.quat_rotate(q, com) - wp.quat_rotate(q_new, com))
    X_new = wp.transform(p_new, q_new)
    pose_out[b] = X_new
    com_w, inv_inertia_w = world_frame(X_new, com, body_inv_inertia[b], split[b])
    com_out[b] = com_w
    inv_inertia_out[b] = inv_inertia_w


def apply_body_corrections(model, pose, delta, split, pose_out, com_out, inv_inertia_out) -> None:
    """Stage: body iterate k+1 = iterate k moved by iteration k's summed corrections, and its body frames."""
    if model.body_count == 0:
        return
    wp.launch(apply_body_corrections_kernel, dim=model.body_count,
              inputs=[pose, model.body_com, model.body_inv_inertia, split, delta],
              outputs=[pose_out, com_out, inv_inertia_out], device=model.device)


# ---------------------------------------------------------------------------------------------- counts
@wp.kernel
def count_contact_constraints_kernel(
    body_q: wp.array(dtype=wp.transform),
    shape_body: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    shape_type: wp.array(dtype=wp.int32),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_source_ptr: wp.array(dtype=wp.uint64),
    rigid_point0: wp.array(dtype=wp.vec3),
    rigid_thickness0: wp.array(dtype=float),
    rigid_normal1: wp.array(dtype=wp.vec3),
    rigid_count: wp.array(dtype=wp.int32),
    rigid_shape0: wp.array(dtype=wp.int32),
    rigid_shape1: wp.array(dtype=wp.int32),
    rigid_max: int,
    soft_count: wp.array(dtype=wp.int32),
    soft_shape: wp.array(dtype=wp.int32),
    soft_max: int,
    split: wp.array(dtype=float),
):
    c = wp.tid()
    if c < rigid_max and c < rigid_count[0]:
        b0 = shape_body[rigid_shape0[c]]
        s1 = rigid_shape1[c]
        b1 = shape_body[s1]
        thickness = rigid_thickness0[c]
        g = rigid_contact_geometry(rigid_point0[c], thickness, b0, s1, body_q, shape_body, shape_transform,
                                   shape_type, shape_scale, shape_source_ptr, thickness + 1.0, rigid_normal1[c])
        if g.depth <= 0.0:
            b0 = -1
            b1 = -1
        if b0 >= 0:
            wp.atomic_add(split, b0, 1.0)
        if b1 >= 0:
            wp.atomic_add(split, b1, 1.0)
    if c < soft_max and c < soft_count[0]:
        b = shape_body[soft_shape[c]]
        if b >= 0:
            wp.atomic_add(split, b, 1.0)


@wp.kernel
def split_factors_kernel(exponent: float, split: wp.array(dtype=float)):
    b = wp.tid()
    split[b] = wp.pow(wp.max(split[b], 1.0), exponent)


def count_body_constraints(model, body_q, contacts, joint_rows, exponent: float, split) -> None:
    """Stage: each body's mass-splitting factor this step, n^exponent (n >= 1).

    n: the body's joint rows, its shape-shape contacts that penetrate at the predicted poses
    ``body_q`` (candidates that do not touch would only slow the others down), and the
    particle-contact candidates on its shapes.
    """
    if model.body_count == 0:
        return
    wp.copy(split, joint_rows)
    n = 0
    if contacts is not None:
        n = max(contacts.rigid_contact_max, contacts.soft_contact_max if model.shape_count else 0)
    if n > 0:
        wp.launch(count_contact_constraints_kernel, dim=n,
                  inputs=[body_q, model.shape_body, model.shape_transform, model.shape_type, model.shape_scale,
                          model.shape_source_ptr, contacts.rigid_contact_point0, contacts.rigid_contact_thickness0,
                          contacts.rigid_contact_normal1, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                          contacts.rigid_contact_shape1,
                          contacts.rigid_contact_max, contacts.soft_contact_count, contacts.soft_contact_shape,
                          contacts.soft_contact_max],
                  outputs=[split], device=model.device)
    wp.launch(split_factors_kernel, dim=model.body_count, inputs=[float(exponent)], outputs=[split],
              device=model.device)


# ---------------------------------------------------------------------------------------------- position pass
@wp.kernel
def solve_body_contacts_kernel(
    body_q: wp.array(dtype=wp.transform),
    body_q_start: wp.array(dtype=wp.transform),
    frame_com: wp.array(dtype=wp.vec3),
    frame_inv_inertia: wp.array(dtype=wp.mat33),
    body_inv_mass: wp.array(dtype=float),
    split: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    shape_type: wp.array(dtype=wp.int32),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_source_ptr: wp.array(dtype=wp.uint64),
    shape_mu: wp.array(dtype=float),
    contact_count: wp.array(dtype=wp.int32),
    contact_shape0: wp.array(dtype=wp.int32),
    contact_shape1: wp.array(dtype=wp.int32),
    contact_point0: wp.array(dtype=wp.vec3),
    contact_thickness0: wp.array(dtype=float),
    contact_normal1: wp.array(dtype=wp.vec3),
    lambda_in: wp.array(dtype=wp.vec2),
    delta: wp.array(dtype=wp.spatial_vector),
    lambda_out: wp.array(dtype=wp.vec2),
):
    c = wp.tid()
    lam = lambda_in[c]
    dlam_n = float(0.0)
    dlam_t = float(0.0)
    if c < contact_count[0]:
        s0 = contact_shape0[c]
        s1 = contact_shape1[c]
        b0 = shape_body[s0]
        b1 = shape_body[s1]
        thickness = contact_thickness0[c]
        g = rigid_contact_geometry(contact_point0[c], thickness, b0, s1, body_q, shape_body, shape_transform,
                                   shape_type, shape_scale, shape_source_ptr, thickness + 1.0, contact_normal1[c])
        f0 = cached_body_frame(body_q, frame_com, frame_inv_inertia, body_inv_mass, split, b0)
        f1 = cached_body_frame(body_q, frame_com, frame_inv_inertia, body_inv_mass, split, b1)
        n = g.normal
        r0 = g.p0 - f0.com
        r1 = g.p1 - f1.com
        w_n = positional_inv_mass(f0, r0, n) + positional_inv_mass(f1, r1, n)
        if w_n > 0.0:
            if g.depth > 0.0:
                dlam_n = g.depth / w_n
                add_positional(delta, b0, f0, split, r0, n * dlam_n)
                add_positional(delta, b1, f1, split, r1, -n * dlam_n)
            lam_n = lam[0] + dlam_n
            if lam_n > 0.0:
                # static friction: undo the tangential slip of the two contact points since the step began
                start0 = start_of_step(f0.pose, body_pose(body_q_start, b0), b0, g.p0)
                start1 = start_of_step(f1.pose, body_pose(body_q_start, b1), b1, g.p1)
                slip = (g.p0 - start0) - (g.p1 - start1)
                slip_t = slip - n * wp.dot(n, slip)
                mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
                budget = wp.max(mu * lam_n - lam[1], 0.0)
                # sticking: the impulse that removes all of the slip, solved in the tangent plane with the
                # pair's inverse mass matrix (no slip direction to normalize: a contact that sticks exactly,
                # slip 0, keeps its derivative); sliding: the rest of the Coulomb budget along the slip
                K = point_inv_mass_matrix(f0, r0) + point_inv_mass_matrix(f1, r1)
                impulse = solve_rows(K, 0.0, -slip_t, n, True)
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


def solve_body_contacts(model, state_in, body_q, contacts, split, frame_com, frame_inv_inertia, lambda_in, lambda_out,
                        delta) -> None:
    """Stage: non-penetration and static friction of every shape-shape contact on body iterate ``body_q``.

    ``frame_com``, ``frame_inv_inertia``: the bodies' frames on that iterate (``eval_body_frames``).
    """
    if contacts is None or model.body_count == 0 or contacts.rigid_contact_max == 0:
        return
    wp.launch(
        solve_body_contacts_kernel,
        dim=contacts.rigid_contact_max,
        inputs=[body_q, state_in.body_q, frame_com, frame_inv_inertia, model.body_inv_mass, split,
                model.shape_body, model.shape_transform, model.shape_type, model.shape_scale,
                model.shape_source_ptr, model.shape_material_mu, contacts.rigid_contact_count,
                contacts.rigid_contact_shape0, contacts.rigid_contact_shape1, contacts.rigid_contact_point0,
                contacts.rigid_contact_thickness0, contacts.rigid_contact_normal1, lambda_in],
        outputs=[delta, lambda_out],
        device=model.device,
    )
