"""What an XPBD constraint needs of a rigid body (Müller et al. 2020): its frame, inverse masses, corrections.

**Corrections of a body.** A constraint acting on body b through an impulse P
[kg m] at the lever arm r (world, from the centre of mass) moves it by

    dx = P / m,     dtheta = I_w^-1 (r x P)           (I_w = R I R^T, world)

and a purely rotational one (angular impulse P [kg m^2]) by dtheta = I_w^-1 P.
Along a direction n the body's generalized inverse mass is
w = 1/m + (r x n)^T I_w^-1 (r x n) (positional) or n^T I_w^-1 n (rotational).
The world and kinematic bodies have w = 0: constraints never move them.

A :class:`BodyFrame` holds what a constraint reads of one body on the current
iterate, with the body's mass-splitting factor s_b (``jacobi.py``) folded into
its inverse mass and inertia; :func:`add_positional` / :func:`add_angular`
add a correction to the iteration's accumulator, which
``body_jacobi.apply_body_corrections`` applies. The frames of every body on an
iterate (centre of mass, split world inverse inertia) are computed once per
iterate (:func:`eval_body_frames`, then by ``apply_body_corrections``) and
read by the contacts (:func:`cached_body_frame`). :func:`point_motion` is how far a material point
moved since the step began, from the body's step-local motion (friction, depenetration, joint rates).
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..forces.body_dynamics import rotated_inertia
from ..step_data import stage

on_demand(__name__)  # backward code compiled once gradients are wanted


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
    return wp.transform_point(pose, com), rotated_inertia(pose, inv_inertia) * split


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


@wp.kernel
def body_frames_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    split: wp.array(dtype=float),
    # Data out:
    com_out: wp.array(dtype=wp.vec3),
    inv_inertia_out: wp.array(dtype=wp.mat33),
):
    b = wp.tid()
    com, inv_inertia = world_frame(body_q[b], body_com[b], body_inv_inertia[b], split[b])
    com_out[b] = com
    inv_inertia_out[b] = inv_inertia


@stage("body frames")
def eval_body_frames(model, data) -> None:
    """Stage: each body's centre of mass and split world inverse inertia on the first iterate, once per body.

    The contact kernel reads them (``cached_body_frame``) instead of rotating the inertia at both ends of
    every contact (a box in a pile has ten contacts or more). The later iterates' frames come from
    ``body_jacobi.apply_body_corrections``, which writes them with the poses.
    """
    if model.body_count == 0:
        return
    b = data.buffers
    wp.launch(body_frames_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_inertia, b.rows.body_q[0], b.split],
              outputs=[b.rows.frame_com[0], b.rows.frame_inv_inertia[0]])


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
def tangent_basis(n: wp.vec3):
    """Two unit vectors that make (t1, t2, n) orthonormal for unit ``n`` (Duff et al. 2017: no branch but the
    sign of n_z, continuous elsewhere)."""
    sign = 1.0
    if n[2] < 0.0:
        sign = -1.0
    a = -1.0 / (sign + n[2])
    b = n[0] * n[1] * a
    return wp.vec3(1.0 + sign * n[0] * n[0] * a, sign * b, -sign * n[0]), wp.vec3(b, sign + n[1] * n[1] * a, -n[1])


@wp.func
def solve_tangent_rows(f0: BodyFrame, r0: wp.vec3, f1: BodyFrame, r1: wp.vec3, n: wp.vec3, rhs: wp.vec3):
    """x in the plane normal to unit ``n`` with P K x = P rhs (P = 1 - n n^T), K the two points' summed
    :func:`point_inv_mass_matrix`: what ``solve_rows(K, 0, rhs, n, True)`` gives, as the 2 x 2 system of K in
    a tangent basis (t_i^T K t_j = (1/m) t_i . t_j + (r x t_i)^T I_w^-1 (r x t_j) per body), without forming K.
    The answer does not depend on the basis (only on the plane), so neither does its derivative."""
    t1, t2 = tangent_basis(n)
    a1 = wp.cross(r0, t1)
    a2 = wp.cross(r0, t2)
    c1 = wp.cross(r1, t1)
    c2 = wp.cross(r1, t2)
    Ia2 = f0.inv_inertia * a2
    Ic2 = f1.inv_inertia * c2
    m = f0.inv_mass + f1.inv_mass
    k11 = m + wp.dot(a1, f0.inv_inertia * a1) + wp.dot(c1, f1.inv_inertia * c1)
    k12 = wp.dot(a1, Ia2) + wp.dot(c1, Ic2)
    k22 = m + wp.dot(a2, Ia2) + wp.dot(c2, Ic2)
    b1 = wp.dot(t1, rhs)
    b2 = wp.dot(t2, rhs)
    det = k11 * k22 - k12 * k12
    x = wp.vec3(0.0)
    if det > 0.0:
        x = t1 * ((k22 * b1 - k12 * b2) / det) + t2 * ((k11 * b2 - k12 * b1) / det)
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
def point_motion(motion: wp.array(dtype=wp.transform), f: BodyFrame, b: int, x: wp.vec3):
    """How far the material point of body ``b`` now at world ``x`` moved since the step began [m] (the world: 0).

    ``motion[b]`` = (dc, dq) is the body's motion this step (``integrators/xpbd_bodies.py``) and ``f`` its frame on
    the current iterate. With r = x - c the lever arm now and dq^-1 r the one at the start, the point moved by
    dc + r - dq^-1 r; the rotation's part is written as 2 w (v x r) - 2 v x (v x r) (dq = (v, w)), which stays
    as precise as the (small) rotation itself wherever the body is: no difference of two world positions.
    """
    if b < 0:
        return wp.vec3(0.0)
    m = motion[b]
    dq = wp.transform_get_rotation(m)
    v = wp.vec3(dq[0], dq[1], dq[2])
    vxr = wp.cross(v, x - f.com)
    return wp.transform_get_translation(m) + 2.0 * dq[3] * vxr - 2.0 * wp.cross(v, vxr)
