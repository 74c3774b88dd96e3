"""How a rigid body responds to a force or an impulse at a point: what the force stages of bodies share.

The joint springs (``joints.py``) and the penalty contacts (``contact.py``, ``body_contact.py``) need a
body's inverse mass at a world point, along a direction, its world inverse inertia, and the wrench a
force at a point exerts about the centre of mass. The world (body -1) and kinematic bodies (inverse
mass and inertia 0) do not give: their inverse masses are zero.
"""

import warp as wp


@wp.func
def inverse_mass_of(body_inv_mass: wp.array(dtype=float), b: int):
    """Inverse mass [1/kg] of body ``b``; 0 for the world (-1)."""
    if b < 0:
        return 0.0
    return body_inv_mass[b]


@wp.func
def rotated_inertia(pose: wp.transform, inertia: wp.mat33):
    """R I R^T: a body-frame inertia (or inverse inertia) in world, for a body at ``pose``."""
    rot = wp.quat_to_matrix(wp.transform_get_rotation(pose))
    return rot * inertia * wp.transpose(rot)


@wp.func
def world_inverse_inertia(body_q: wp.array(dtype=wp.transform), body_inv_inertia: wp.array(dtype=wp.mat33), b: int):
    """R I^-1 R^T of body ``b`` in world [1/(kg m^2)]; zero for the world."""
    if b < 0:
        return wp.mat33(0.0)
    return rotated_inertia(body_q[b], body_inv_inertia[b])


@wp.func
def inverse_mass_matrix(inv_mass: float, inv_inertia_w: wp.mat33, r: wp.vec3):
    """K = 1/m I + [r]x^T I_w^-1 [r]x [1/kg]: the velocity change at lever arm ``r`` (world, from the centre of
    mass) per unit impulse there, of a body with inverse mass ``inv_mass`` and world inverse inertia
    ``inv_inertia_w``."""
    rx = wp.skew(r)
    return wp.identity(n=3, dtype=float) * inv_mass + wp.transpose(rx) * inv_inertia_w * rx


@wp.func
def body_inverse_mass_at(
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    b: int,
    x: wp.vec3,
):
    """Inverse mass matrix [1/kg] of body ``b`` at world point ``x``: the velocity change there per unit impulse.

    ``inverse_mass_matrix`` with r from the centre of mass to ``x``. Zero for the world (-1) and kinematic
    bodies (inverse mass and inertia 0): they do not give.
    """
    if b < 0:
        return wp.mat33(0.0)
    pose = body_q[b]
    inv_inertia_w = rotated_inertia(pose, body_inv_inertia[b])
    return inverse_mass_matrix(body_inv_mass[b], inv_inertia_w, x - wp.transform_point(pose, body_com[b]))


@wp.func
def inverse_mass_along(
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    b: int,
    x: wp.vec3,
    vt: wp.vec3,
):
    """Inverse mass [1/kg] of body ``b`` at world point ``x`` along the direction of ``vt``: 1/m + |r x t|^2_{I^-1}.

    t = vt / |vt| is taken smoothly (t -> 0 as vt -> 0, leaving 1/m), so the value and its
    gradient stay finite when nothing slides. Zero for the world and kinematic bodies.
    """
    if b < 0:
        return 0.0
    pose = body_q[b]
    t = vt / wp.sqrt(wp.dot(vt, vt) + 1.0e-20)
    r_t = wp.quat_rotate_inv(wp.transform_get_rotation(pose), wp.cross(x - wp.transform_point(pose, body_com[b]), t))
    return body_inv_mass[b] + wp.dot(r_t, body_inv_inertia[b] * r_t)


@wp.func
def wrench_at(
    body_q: wp.array(dtype=wp.transform), body_com: wp.array(dtype=wp.vec3), b: int, f: wp.vec3, x: wp.vec3
):
    """The wrench (force at the centre of mass, torque about it; world) of force ``f`` acting at world point ``x``."""
    com = wp.transform_point(body_q[b], body_com[b])
    return wp.spatial_vector(f, wp.cross(x - com, f))
