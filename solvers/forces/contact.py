"""Penalty contact with smoothed Coulomb friction, and an optional smoothed normal force.

Normal: f_n = max(ke * d - kd * v_n * g, 0) along the contact normal, where d is
the penetration depth and g = 1 (plain penalty contact) unless the model's
``contact_smoothing`` h [m] is > 0. Then d is replaced by h * softplus(depth / h)
and g by sigmoid(depth / h): the force rises smoothly from zero, starting
``SMOOTH_CONTACT_REACH * h`` before the surfaces touch, instead of switching on at
depth 0. Deep in contact (depth >> h) it is the plain force again; a body at rest
sits h * ln(e^(m g / (ke h)) - 1) deep instead of m g / ke (always shallower,
and above the surface once h > m g / (ke ln 2)): the little physical stiffness
traded for gradients that do not jump with the step at which contact begins.
Friction scales with f_n, so with h > 0 it too starts (weakly) just before touch.
Friction: f_t = -min(mu f_n |v_t| / sqrt(|v_t|^2 + eps^2), m |v_t| / dt) * v_t / |v_t|,
where eps = ``model.friction_smoothing`` [m/s] makes Coulomb's law smooth (so it
is differentiable at v_t = 0) and the second bound keeps an explicit step from
reversing the sliding direction (m is the reduced mass of the pair). When
sliding faster than eps, the deceleration is mu g on flat ground, as Coulomb says.
"""

import warp as wp

from ...collision.sdf import shape_sdf_world
from ...types import SMOOTH_CONTACT_REACH


@wp.func
def contact_depth(depth: float, h: float):
    """Effective penetration: ``depth`` itself when h = 0, else h * softplus(depth / h) (always > 0)."""
    if h <= 0.0:
        return depth
    x = depth / h
    return h * (wp.max(x, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(x))))


@wp.func
def contact_gate(depth: float, h: float):
    """Weight of the normal damping: 1 when h = 0, else sigmoid(depth / h) (the slope of contact_depth)."""
    if h <= 0.0:
        return 1.0
    return 1.0 / (1.0 + wp.exp(-depth / h))


@wp.func
def contact_reach(h: float):
    """How far outside contact (depth < 0) a contact still pushes [m]."""
    return SMOOTH_CONTACT_REACH * h


@wp.func
def friction_force(vt: wp.vec3, fn: float, mu: float, eps: float, mass: float, dt: float):
    speed_sq = wp.dot(vt, vt)
    speed = wp.sqrt(speed_sq + 1.0e-20)
    coulomb = mu * fn * speed / wp.sqrt(speed_sq + eps * eps)
    magnitude = wp.min(coulomb, mass * speed / dt)
    return -vt * (magnitude / speed)


@wp.kernel
def particle_shape_contact_kernel(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    shape_type: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_source_ptr: wp.array(dtype=wp.uint64),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    contact_count: wp.array(dtype=wp.int32),
    contact_particle: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
    friction_eps: float,
    smoothing: float,
    dt: float,
    f: wp.array(dtype=wp.vec3),
):
    c = wp.tid()
    if c >= contact_count[0]:
        return
    p = contact_particle[c]
    s = contact_shape[c]
    w = inv_mass[p]
    if w == 0.0:
        return  # kinematic particles are not pushed by static shapes
    r = radius[p]
    sd = shape_sdf_world(shape_type[s], shape_scale[s], shape_source_ptr[s], shape_transform[s], x[p], 2.0 * r + 1.0)
    depth = r - sd[3]
    if depth <= -contact_reach(smoothing) or (smoothing <= 0.0 and depth <= 0.0):
        return
    n = wp.vec3(sd[0], sd[1], sd[2])
    vp = v[p]
    vn = wp.dot(n, vp)
    d = contact_depth(depth, smoothing)
    fn = wp.max(shape_ke[s] * d - shape_kd[s] * vn * contact_gate(depth, smoothing), 0.0)
    ft = friction_force(vp - n * vn, fn, shape_mu[s], friction_eps, 1.0 / w, dt)
    wp.atomic_add(f, p, n * fn + ft)


@wp.kernel
def particle_pair_contact_kernel(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    pair_count: wp.array(dtype=wp.int32),
    pairs: wp.array(dtype=wp.vec2i),
    ke: float,
    kd: float,
    mu: float,
    friction_eps: float,
    smoothing: float,
    dt: float,
    f: wp.array(dtype=wp.vec3),
):
    c = wp.tid()
    if c >= pair_count[0]:
        return
    i = pairs[c][0]
    j = pairs[c][1]
    w = inv_mass[i] + inv_mass[j]
    if w == 0.0:
        return
    d = x[i] - x[j]
    dist = wp.length(d)
    depth = radius[i] + radius[j] - dist
    if depth <= -contact_reach(smoothing) or (smoothing <= 0.0 and depth <= 0.0) or dist < 1.0e-12:
        return
    n = d / dist
    vrel = v[i] - v[j]
    vn = wp.dot(n, vrel)
    fn = wp.max(ke * contact_depth(depth, smoothing) - kd * vn * contact_gate(depth, smoothing), 0.0)
    fc = n * fn + friction_force(vrel - n * vn, fn, mu, friction_eps, 1.0 / w, dt)
    # equal and opposite: contact conserves momentum exactly
    wp.atomic_add(f, i, fc)
    wp.atomic_sub(f, j, fc)


def eval_particle_shape_contact_forces(model, state, contacts, dt: float, particle_f) -> None:
    if contacts is None or model.shape_count == 0 or contacts.soft_contact_max == 0:
        return
    wp.launch(
        particle_shape_contact_kernel,
        dim=contacts.soft_contact_max,
        inputs=[
            state.particle_q, state.particle_qd, model.particle_radius, model.particle_inv_mass,
            model.shape_type, model.shape_transform, model.shape_scale, model.shape_source_ptr,
            model.shape_material_ke, model.shape_material_kd, model.shape_material_mu,
            contacts.soft_contact_count, contacts.soft_contact_particle, contacts.soft_contact_shape,
            model.friction_smoothing, model.contact_smoothing, dt,
        ],
        outputs=[particle_f],
        device=model.device,
    )


def eval_particle_pair_contact_forces(model, state, contacts, dt: float, particle_f) -> None:
    if contacts is None or not model.particle_collide or contacts.particle_pair_max == 0:
        return
    wp.launch(
        particle_pair_contact_kernel,
        dim=contacts.particle_pair_max,
        inputs=[
            state.particle_q, state.particle_qd, model.particle_radius, model.particle_inv_mass,
            contacts.particle_pair_count, contacts.particle_pair,
            model.particle_ke, model.particle_kd, model.particle_mu, model.friction_smoothing,
            model.contact_smoothing, dt,
        ],
        outputs=[particle_f],
        device=model.device,
    )
