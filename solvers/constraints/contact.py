"""Contact constraints for XPBD: non-penetration C = distance - radius >= 0 with Coulomb friction.

Each pass projects a penetrating particle out along the contact normal by its
depth d, and removes the tangential motion of this step up to mu * d: all of
it when that is within the friction cone (static friction), else a slice of
length mu * d (dynamic friction, i.e. a velocity change of mu * d / dt). For a
particle resting on flat ground d = g dt^2 in the first pass, so the friction
decelerates a sliding particle by mu g, as Coulomb says. Contacts are hard
(zero compliance) and read the candidates that ``model.collide`` found; the
geometry is re-evaluated at every iterate, so gradients follow it. Contact
corrections are applied in full, never over-relaxed (an over-relaxed contact
bounces) nor split among a particle's other constraints (a particle of a
soft body belongs to dozens; splitting would let it sink for many
iterations).

Shapes on rigid bodies make the contact two-way: the shape is placed by its
body's current iterate, the multiplier uses the generalized inverse mass
w_p + n_b (1/m + (r x n)^T I_w^-1 (r x n)) (r from the body's centre of mass
to the surface point under the particle, n_b the body's mass-splitting count,
see ``body_contact``), and the particle and the body receive equal and
opposite impulses, so linear momentum is conserved. Friction limits the slip
of the particle relative to the body's material point under it, with the
same budget mu * depth. A kinematic body pushes particles and takes nothing
back; a static shape gives bitwise the corrections it gave before bodies
existed. No restitution and no velocity pass for particle contacts.
"""

import warp as wp

from ...collision.sdf import shape_sdf_world
from .body_contact import (
    add_positional,
    body_frame,
    point_inv_mass_matrix,
    positional_inv_mass,
    solve_rows,
    start_of_step,
)


@wp.func
def friction_correction(motion_t: wp.vec3, limit: float):
    """The part of the tangential motion that friction with budget ``limit`` [m] cancels."""
    lt = wp.length(motion_t)
    result = wp.vec3(0.0)
    if lt <= limit:
        result = motion_t
    else:
        result = motion_t * (limit / lt)
    return result


@wp.kernel
def solve_shape_contacts_kernel(
    x: wp.array(dtype=wp.vec3),
    x_start: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    shape_type: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_source_ptr: wp.array(dtype=wp.uint64),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_start: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_split: wp.array(dtype=float),
    contact_count: wp.array(dtype=wp.int32),
    contact_particle: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
    delta: wp.array(dtype=wp.vec3),
    body_delta: wp.array(dtype=wp.spatial_vector),
):
    c = wp.tid()
    if c >= contact_count[0]:
        return
    p = contact_particle[c]
    s = contact_shape[c]
    b = shape_body[s]
    r = radius[p]
    xp = x[p]
    if b < 0:
        # a static shape: the particle alone moves
        if inv_mass[p] == 0.0:
            return
        sd = shape_sdf_world(shape_type[s], shape_scale[s], shape_source_ptr[s], shape_transform[s], xp,
                             2.0 * r + 1.0)
        depth = r - sd[3]
        if depth <= 0.0:
            return
        n = wp.vec3(sd[0], sd[1], sd[2])
        motion = xp - x_start[p]
        motion_t = motion - n * wp.dot(n, motion)
        corr = n * depth - friction_correction(motion_t, shape_mu[s] * depth)
        wp.atomic_add(delta, p, corr)
        return
    # a shape on a body: equal and opposite corrections, split by generalized inverse mass
    X = body_q[b] * shape_transform[s]
    sd = shape_sdf_world(shape_type[s], shape_scale[s], shape_source_ptr[s], X, xp, 2.0 * r + 1.0)
    depth = r - sd[3]
    if depth <= 0.0:
        return
    n = wp.vec3(sd[0], sd[1], sd[2])
    fb = body_frame(body_q, body_com, body_inv_mass, body_inv_inertia, body_split, b)
    surface = xp - n * sd[3]
    rb = surface - fb.com
    wp_ = inv_mass[p]
    w_n = wp_ + positional_inv_mass(fb, rb, n)
    if w_n == 0.0:
        return
    # the particle's tangential motion relative to the body's material point under it, since the step began
    motion = (xp - x_start[p]) - (surface - start_of_step(fb.pose, body_q_start[b], b, surface))
    motion_t = motion - n * wp.dot(n, motion)
    slip = friction_correction(motion_t, shape_mu[s] * depth)
    impulse = n * (depth / w_n)
    # the tangential impulse that removes `slip`, solved in the tangent plane with the pair's inverse mass
    # matrix: no slip direction to normalize, so a contact that sticks exactly (slip 0) keeps its derivative
    K = wp.identity(n=3, dtype=float) * wp_ + point_inv_mass_matrix(fb, rb)
    impulse = impulse - solve_rows(K, 0.0, slip, n, True)
    wp.atomic_add(delta, p, impulse * wp_)
    add_positional(body_delta, b, fb, body_split, rb, -impulse)


@wp.func
def solve_particle_pair(
    x: wp.array(dtype=wp.vec3),
    x_start: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    i: int,
    j: int,
    mu: float,
    delta: wp.array(dtype=wp.vec3),
):
    wi = inv_mass[i]
    wj = inv_mass[j]
    w = wi + wj
    if w == 0.0:
        return
    d = x[i] - x[j]
    dist = wp.length(d)
    depth = radius[i] + radius[j] - dist
    if depth <= 0.0 or dist < 1.0e-12:
        return
    n = d / dist
    rel = (x[i] - x_start[i]) - (x[j] - x_start[j])
    rel_t = rel - n * wp.dot(n, rel)
    corr = n * depth - friction_correction(rel_t, mu * depth)
    # split by inverse mass: equal and opposite impulses, so momentum is conserved
    wp.atomic_add(delta, i, corr * (wi / w))
    wp.atomic_sub(delta, j, corr * (wj / w))


@wp.kernel
def solve_particle_contacts_kernel(
    x: wp.array(dtype=wp.vec3),
    x_start: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    pair_count: wp.array(dtype=wp.int32),
    pairs: wp.array(dtype=wp.vec2i),
    pair_max: int,
    stride: int,
    mu: float,
    delta: wp.array(dtype=wp.vec3),
):
    # one thread per particle (``stride`` threads), each taking every n-th pair: the pair list's capacity is ~12 per particle and
    # mostly empty (a cloth has none), and even an idle thread costs its share in the adjoint kernel
    t = wp.tid()
    for c in range(t, wp.min(pair_count[0], pair_max), stride):
        solve_particle_pair(x, x_start, radius, inv_mass, pairs[c][0], pairs[c][1], mu, delta)


def solve_shape_contacts(model, state_in, x, contacts, delta, body_q, body_split, body_delta) -> None:
    """Stage: particles against shapes; shapes on bodies are placed by body iterate ``body_q`` and pushed back.

    ``body_split``: the bodies' mass-splitting counts; ``body_delta``: the bodies' correction accumulator.
    """
    if contacts is None or model.shape_count == 0 or contacts.soft_contact_max == 0:
        return
    wp.launch(
        solve_shape_contacts_kernel,
        dim=contacts.soft_contact_max,
        inputs=[x, state_in.particle_q, model.particle_radius, model.particle_inv_mass,
                model.shape_type, model.shape_body, model.shape_transform, model.shape_scale,
                model.shape_source_ptr, model.shape_material_mu, body_q, state_in.body_q, model.body_com,
                model.body_inv_mass, model.body_inv_inertia, body_split, contacts.soft_contact_count,
                contacts.soft_contact_particle, contacts.soft_contact_shape],
        outputs=[delta, body_delta],
        device=model.device,
    )


def solve_particle_contacts(model, state_in, x, contacts, delta) -> None:
    if contacts is None or not model.particle_collide or contacts.particle_pair_max == 0:
        return
    threads = min(model.particle_count, contacts.particle_pair_max)
    wp.launch(
        solve_particle_contacts_kernel,
        dim=threads,
        inputs=[x, state_in.particle_q, model.particle_radius, model.particle_inv_mass,
                contacts.particle_pair_count, contacts.particle_pair, contacts.particle_pair_max, threads,
                model.particle_mu],
        outputs=[delta],
        device=model.device,
    )
