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
see ``jacobi``), and the particle and the body receive equal and
opposite impulses, so linear momentum is conserved. Friction limits the slip
of the particle relative to the body's material point under it, with the
same budget mu * depth. A kinematic body pushes particles and takes nothing
back; a static shape gives bitwise the corrections it gave before bodies
existed. No restitution and no velocity pass for particle contacts.
"""

import warp as wp

from ...collision.contact_sink import PairList
from ...collision.particle_shape import SoftContacts
from ...collision.sdf import ShapeGeometry, shape_sdf_at
from ..step_data import stage
from .body_frames import (
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
    # Model:
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    shapes: ShapeGeometry,
    shape_mu: wp.array(dtype=float),
    # Data in:
    x_start: wp.array(dtype=wp.vec3),
    body_q_start: wp.array(dtype=wp.transform),
    contacts: SoftContacts,
    x: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_split: wp.array(dtype=float),
    # Data out:
    delta: wp.array(dtype=wp.vec3),
    body_delta: wp.array(dtype=wp.spatial_vector),
):
    c = wp.tid()
    if c >= contacts.count[0]:
        return
    p = contacts.particle[c]
    s = contacts.shape[c]
    b = shapes.body[s]
    r = radius[p]
    xp = x[p]
    if b < 0:
        # a static shape: the particle alone moves
        if inv_mass[p] == 0.0:
            return
        sd = shape_sdf_at(shapes, s, shapes.transform[s], xp, 2.0 * r + 1.0)
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
    X = body_q[b] * shapes.transform[s]
    sd = shape_sdf_at(shapes, s, X, xp, 2.0 * r + 1.0)
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
    # Model:
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    mu: float,
    # Data in:
    x_start: wp.array(dtype=wp.vec3),
    pairs: PairList,
    x: wp.array(dtype=wp.vec3),
    # In:
    stride: int,
    # Data out:
    delta: wp.array(dtype=wp.vec3),
):
    # one thread per particle (``stride`` threads), each taking every n-th pair: the pair list's capacity is ~12 per
    # particle and mostly empty (a cloth has none), and even an idle thread costs its share in the adjoint kernel
    t = wp.tid()
    for c in range(t, wp.min(pairs.count[0], pairs.capacity), stride):
        pair = pairs.pairs[c]
        solve_particle_pair(x, x_start, radius, inv_mass, pair[0], pair[1], mu, delta)


@stage("particle-shape contact")
def solve_shape_contacts(model, data, k: int) -> None:
    """Stage: particles of iterate k against shapes; shapes on bodies are placed by body iterate k and pushed back."""
    contacts = data.contacts
    if contacts is None or model.shape_count == 0 or contacts.soft_contact_max == 0:
        return
    b, state_in = data.buffers, data.state_in
    rows = b.rows
    wp.launch(solve_shape_contacts_kernel, dim=contacts.soft_contact_max, device=model.device,
              inputs=[model.particle_radius, model.particle_inv_mass, model.body_com, model.body_inv_mass,
                      model.body_inv_inertia, data.shapes, model.shape_material_mu, state_in.particle_q,
                      state_in.body_q, data.soft_contacts, rows.x[k], rows.body_q[k], b.split],
              outputs=[rows.delta[k], rows.body_delta[k]])


@stage("particle-particle contact")
def solve_particle_contacts(model, data, k: int) -> None:
    """Stage: particle pairs of iterate k pushed apart, with friction."""
    contacts = data.contacts
    if contacts is None or not model.particle_collide or contacts.particle_pair_max == 0:
        return
    threads = min(model.particle_count, contacts.particle_pair_max)
    rows = data.buffers.rows
    wp.launch(solve_particle_contacts_kernel, dim=threads, device=model.device,
              inputs=[model.particle_radius, model.particle_inv_mass, model.particle_mu, data.state_in.particle_q,
                      data.particle_pairs, rows.x[k], threads],
              outputs=[rows.delta[k]])
