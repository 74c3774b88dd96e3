"""Spatial algebra (Featherstone 2008, ch. 2) as ``wp.func``s, in world axes about a reference point.

Every spatial quantity of an articulation is expressed in world axes about the articulation's reference
point ``p_ref`` (the root joint's child frame origin at the start of the step), not about the world
origin: replicated worlds sit metres apart, and about the world origin a twist's linear part
``v_O = v - w x c`` and the inertia's ``m |c|^2`` terms grow with the distance and cancel in float32.
Positions below are relative to ``p_ref``.

Layout (``wp.spatial_vector``): top = angular, bottom = linear, for both kinds of vector:

- motion (twist) ``(w, v)``: angular velocity [rad/s], velocity [m/s] of the body-fixed point at ``p_ref``;
- force (wrench) ``(tau, f)``: torque about ``p_ref`` [N m], force [N].

``wp.dot(motion, force)`` is then the power [W]. (``State.body_qd`` is laid out the other way, linear
first, and holds the centre of mass's velocity; the solver converts at its boundary.)
"""

import warp as wp


@wp.func
def skew(r: wp.vec3):
    return wp.mat33(0.0, -r[2], r[1], r[2], 0.0, -r[0], -r[1], r[0], 0.0)


@wp.func
def spatial_inertia(mass: float, inertia_world: wp.mat33, com: wp.vec3):
    """6x6 inertia about ``p_ref`` of a body of ``mass`` [kg], inertia about its com in world axes, com at ``com``.

    [[I_c + m cx cx^T, m cx], [m cx^T, m 1]] with cx = skew(com).
    """
    cx = skew(com)
    top_left = inertia_world + mass * cx * wp.transpose(cx)
    top_right = mass * cx
    bottom_left = mass * wp.transpose(cx)
    return wp.spatial_matrix(
        top_left[0, 0], top_left[0, 1], top_left[0, 2], top_right[0, 0], top_right[0, 1], top_right[0, 2],
        top_left[1, 0], top_left[1, 1], top_left[1, 2], top_right[1, 0], top_right[1, 1], top_right[1, 2],
        top_left[2, 0], top_left[2, 1], top_left[2, 2], top_right[2, 0], top_right[2, 1], top_right[2, 2],
        bottom_left[0, 0], bottom_left[0, 1], bottom_left[0, 2], mass, 0.0, 0.0,
        bottom_left[1, 0], bottom_left[1, 1], bottom_left[1, 2], 0.0, mass, 0.0,
        bottom_left[2, 0], bottom_left[2, 1], bottom_left[2, 2], 0.0, 0.0, mass,
    )


@wp.func
def motion_cross_motion(v: wp.spatial_vector, m: wp.spatial_vector):
    """v x m (the rate of change of motion vector m carried by a frame moving with twist v)."""
    w = wp.spatial_top(v)
    u = wp.spatial_bottom(v)
    mw = wp.spatial_top(m)
    mu = wp.spatial_bottom(m)
    return wp.spatial_vector(wp.cross(w, mw), wp.cross(w, mu) + wp.cross(u, mw))


@wp.func
def motion_cross_force(v: wp.spatial_vector, f: wp.spatial_vector):
    """v x* f (the rate of change of force vector f carried by a frame moving with twist v)."""
    w = wp.spatial_top(v)
    u = wp.spatial_bottom(v)
    tau = wp.spatial_top(f)
    lin = wp.spatial_bottom(f)
    return wp.spatial_vector(wp.cross(w, tau) + wp.cross(u, lin), wp.cross(w, lin))


@wp.func
def point_velocity(v: wp.spatial_vector, r: wp.vec3):
    """Velocity [m/s] of the body-fixed point at ``r`` (relative to ``p_ref``) of a body with twist ``v``."""
    return wp.spatial_bottom(v) + wp.cross(wp.spatial_top(v), r)


@wp.func
def wrench_at(force: wp.vec3, r: wp.vec3):
    """The spatial force of ``force`` [N] acting at ``r`` (relative to ``p_ref``)."""
    return wp.spatial_vector(wp.cross(r, force), force)


@wp.func
def quat_exp(theta: wp.vec3):
    """Unit quaternion of the rotation vector ``theta`` [rad] (axis times angle).

    Below 1e-4 rad the Taylor series (to theta^4) replaces sin/cos over |theta|: exact in float32 there,
    and differentiable at 0, where the length's gradient is not.
    """
    t2 = wp.dot(theta, theta)
    s = float(0.0)
    c = float(0.0)
    if t2 < 1.0e-8:
        s = 0.5 - t2 / 48.0
        c = 1.0 - t2 / 8.0
    else:
        t = wp.sqrt(t2)
        s = wp.sin(0.5 * t) / t
        c = wp.cos(0.5 * t)
    return wp.quat(theta[0] * s, theta[1] * s, theta[2] * s, c)
