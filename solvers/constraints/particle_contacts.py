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
back. No restitution and no velocity pass for particle contacts.

**Initial overlaps** (:func:`contact_push`): a contact pushes its pair apart by
its depth, but never further than a relative motion of ``max_push`` = the
solver's ``max_depenetration_velocity`` x dt along the normal since the step
began. A contact that a step creates (the pair approached by more than it
overlaps) is unaffected; an overlap that was there when the step began (two
particles created inside each other, a particle that sank in while its
contact buffer was full) separates at that speed instead of depth / dt (two
radius-0.1 m particles 0.08 m apart used to leave at 144 m/s at dt = 1/2400 s).
Motions are step-local (``jacobi.py``): friction and the push read the
displacement since the step began, exact at any distance from the origin.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_sink import PairList, stored_pair_count
from ...collision.particle_shape import SoftContacts
from ...collision.sdf import ShapeGeometry, shape_sdf_at_for, shape_types
from ...types import GEO_PLANE
from ..forces.contact_sides import contact_threads, kernel_per_shape_types, soft_contact_sides
from ..step_data import stage
from . import hand_adjoint
from .body_frames import (
    add_positional,
    body_frame,
    point_inv_mass_matrix,
    point_motion,
    positional_inv_mass,
    solve_rows,
)

on_demand(__name__)  # backward code compiled once gradients are wanted


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


@wp.func
def contact_push(depth: float, normal_motion: float, max_push: float):
    """How far a contact pushes its pair apart this iteration [m]: the depth, but no further than a relative
    motion of ``max_push`` (= max depenetration speed x dt) along the normal since the step began.

    A contact made this step (the pair approached: ``normal_motion`` < 0) pushes out its whole depth as
    before; an overlap present when the step began (``depth`` > -``normal_motion``) separates at no more than
    the max depenetration speed instead of depth / dt.
    """
    return wp.min(depth, max_push - normal_motion)


def _solve_shape_contacts_kernel(sdf_at, tag: str):
    @wp.kernel(name=f"solve_shape_contacts_kernel_{tag}", module="unique")
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
        contacts: SoftContacts,
        dx: wp.array(dtype=wp.vec3),
        body_q: wp.array(dtype=wp.transform),
        body_motion: wp.array(dtype=wp.transform),
        body_split: wp.array(dtype=float),
        # In:
        max_push: float,
        # Data out:
        delta: wp.array(dtype=wp.vec3),
        body_delta: wp.array(dtype=wp.spatial_vector),
    ):
        c = wp.tid()
        if c >= contacts.count[0]:
            return
        p, s, b = soft_contact_sides(contacts, shapes, c)
        r = radius[p]
        xp = x_start[p] + dx[p]
        if b < 0:
            # a static shape: the particle alone moves
            if inv_mass[p] == 0.0:
                return
            sd = wp.static(sdf_at)(shapes, s, shapes.transform[s], xp, 2.0 * r + 1.0)
            n = wp.vec3(sd[0], sd[1], sd[2])
            motion = dx[p]
            push = contact_push(r - sd[3], wp.dot(n, motion), max_push)
            if push <= 0.0:
                return
            motion_t = motion - n * wp.dot(n, motion)
            corr = n * push - friction_correction(motion_t, shape_mu[s] * push)
            wp.atomic_add(delta, p, corr)
            return
        # a shape on a body: equal and opposite corrections, split by generalized inverse mass
        X = body_q[b] * shapes.transform[s]
        sd = wp.static(sdf_at)(shapes, s, X, xp, 2.0 * r + 1.0)
        if r - sd[3] <= 0.0:
            return
        n = wp.vec3(sd[0], sd[1], sd[2])
        fb = body_frame(body_q, body_com, body_inv_mass, body_inv_inertia, body_split, b)
        surface = xp - n * sd[3]
        rb = surface - fb.com
        wp_ = inv_mass[p]
        w_n = wp_ + positional_inv_mass(fb, rb, n)
        if w_n == 0.0:
            return
        # the particle's motion relative to the body's material point under it, since the step began
        motion = dx[p] - point_motion(body_motion, fb, b, surface)
        push = contact_push(r - sd[3], wp.dot(n, motion), max_push)
        if push <= 0.0:
            return
        motion_t = motion - n * wp.dot(n, motion)
        slip = friction_correction(motion_t, shape_mu[s] * push)
        impulse = n * (push / w_n)
        # the tangential impulse that removes `slip`, solved in the tangent plane with the pair's inverse mass
        # matrix: no slip direction to normalize, so a contact that sticks exactly (slip 0) keeps its derivative
        K = wp.identity(n=3, dtype=float) * wp_ + point_inv_mass_matrix(fb, rb)
        impulse = impulse - solve_rows(K, 0.0, slip, n, True)
        wp.atomic_add(delta, p, impulse * wp_)
        add_positional(body_delta, b, fb, body_split, rb, -impulse)

    return solve_shape_contacts_kernel


# solve_shape_contacts_kernel_for(types): the kernel for the shape types in ``types`` (``sdf.shape_types(model)``)
solve_shape_contacts_kernel_for = kernel_per_shape_types(_solve_shape_contacts_kernel)


PLANES = frozenset((GEO_PLANE,))
_plane_sdf_at = shape_sdf_at_for(PLANES)


@wp.kernel(enable_backward=False, module=hand_adjoint.module_of(__name__))
def solve_plane_contacts_adjoint_kernel(
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
    contacts: SoftContacts,
    dx: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_motion: wp.array(dtype=wp.transform),
    body_split: wp.array(dtype=float),
    # In:
    max_push: float,
    adj_delta: wp.array(dtype=wp.vec3),
    adj_body_delta: wp.array(dtype=wp.spatial_vector),
    # Data out:
    adj_radius: wp.array(dtype=float),
    adj_inv_mass: wp.array(dtype=float),
    adj_body_com: wp.array(dtype=wp.vec3),
    adj_body_inv_mass: wp.array(dtype=float),
    adj_body_inv_inertia: wp.array(dtype=wp.mat33),
    adj_shape_mu: wp.array(dtype=float),
    adj_x_start: wp.array(dtype=wp.vec3),
    adj_dx: wp.array(dtype=wp.vec3),
    adj_body_q: wp.array(dtype=wp.transform),
    adj_body_motion: wp.array(dtype=wp.transform),
    adj_body_split: wp.array(dtype=float),
):
    """Hand-written adjoint of ``solve_shape_contacts_kernel_plane`` for a model whose shapes are all static
    planes (:func:`solve_shape_contacts` checks it; the body arguments are unused then, as in the forward
    kernel's static branch). Warp's generated adjoint cost 3.0x the forward kernel (it replays the forward,
    then each function's forward again inside its adjoint); this computes the forward values once and
    reverses them: the plane's distance is the particle's height along the world normal n (constant), so
    d depth / d x = -n. ``adj_delta`` is the gradient of the corrections the forward kernel added into (read);
    the rest are added into (None: skipped), as in :mod:`.hand_adjoint`. Its first lines restate the forward
    kernel's static branch rather than sharing a ``wp.func`` with it: a function there would cost the other
    shape types' generated adjoint one more forward evaluation (measured on a looping variant of the kernel:
    3.5x -> 4.6x its forward, benchmarks/README.md)."""
    c = wp.tid()
    if c >= contacts.count[0]:
        return
    p, s, b = soft_contact_sides(contacts, shapes, c)
    if inv_mass[p] == 0.0 or not adj_delta:
        return
    r = radius[p]
    xp = x_start[p] + dx[p]
    sd = _plane_sdf_at(shapes, s, shapes.transform[s], xp, 2.0 * r + 1.0)
    n = wp.vec3(sd[0], sd[1], sd[2])
    motion = dx[p]
    depth = r - sd[3]
    free = max_push - wp.dot(n, motion)
    push = wp.min(depth, free)
    if push <= 0.0:
        return
    mu = shape_mu[s]
    motion_t = motion - n * wp.dot(n, motion)
    limit = mu * push
    lt = wp.length(motion_t)
    # corr = n push - friction_correction(motion_t, limit); delta[p] += corr
    a = adj_delta[p]
    adj_push = wp.dot(n, a)
    adj_mt = -a
    if lt > limit:
        # friction_correction = motion_t q, q = limit / lt: adj q = -a . motion_t
        q = limit / lt
        adj_q = -wp.dot(a, motion_t)
        adj_mt = -a * q - motion_t * (adj_q * q / (lt * lt))
        adj_limit = adj_q / lt
        adj_push += mu * adj_limit
        if adj_shape_mu:
            wp.atomic_add(adj_shape_mu, s, push * adj_limit)
    # motion_t = motion - n (n . motion)
    adj_motion = adj_mt - n * wp.dot(n, adj_mt)
    # push = min(depth, free): Warp's adjoint of min sends a tie to its second argument
    adj_x = wp.vec3(0.0)
    if depth < free:
        adj_x = n * (-adj_push)  # depth = r - n . (x - plane point)
        if adj_radius:
            wp.atomic_add(adj_radius, p, adj_push)
    else:
        adj_motion -= n * adj_push
    if adj_x_start:
        wp.atomic_add(adj_x_start, p, adj_x)
    if adj_dx:
        wp.atomic_add(adj_dx, p, adj_x + adj_motion)


@wp.func
def solve_particle_pair(
    x_start: wp.array(dtype=wp.vec3),
    dx: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    i: int,
    j: int,
    mu: float,
    max_push: float,
    delta: wp.array(dtype=wp.vec3),
):
    wi = inv_mass[i]
    wj = inv_mass[j]
    w = wi + wj
    if w == 0.0:
        return
    rel = dx[i] - dx[j]
    d = (x_start[i] - x_start[j]) + rel
    dist = wp.length(d)
    depth = radius[i] + radius[j] - dist
    if depth <= 0.0 or dist < 1.0e-12:
        return
    n = d / dist
    push = contact_push(depth, wp.dot(n, rel), max_push)
    if push <= 0.0:
        return
    rel_t = rel - n * wp.dot(n, rel)
    corr = n * push - friction_correction(rel_t, mu * push)
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
    dx: wp.array(dtype=wp.vec3),
    # In:
    stride: int,
    max_push: float,
    # Data out:
    delta: wp.array(dtype=wp.vec3),
):
    # one thread per particle (``stride`` threads), each taking every n-th pair (``particle_pair_threads``)
    t = wp.tid()
    for c in range(t, stored_pair_count(pairs), stride):
        pair = pairs.pairs[c]
        solve_particle_pair(x_start, dx, radius, inv_mass, pair[0], pair[1], mu, max_push, delta)


@stage("particle-shape contact")
def solve_shape_contacts(model, data, k: int) -> None:
    """Stage: particles of iterate k against shapes; shapes on bodies are placed by body iterate k and pushed back."""
    threads = contact_threads(model, data).soft
    if threads == 0:
        return
    b, state_in = data.buffers, data.state_in
    rows = b.rows
    types = shape_types(model)
    kernel = solve_shape_contacts_kernel_for(types)
    inputs = [model.particle_radius, model.particle_inv_mass, model.body_com, model.body_inv_mass,
              model.body_inv_inertia, data.shapes, model.shape_material_mu, state_in.particle_q,
              data.soft_contacts, rows.dx[k], rows.body_q[k], rows.body_motion[k], b.split,
              data.solver.max_depenetration_velocity * data.dt]
    outputs = [rows.delta[k], rows.body_delta[k]]
    if types == PLANES and model.body_count == 0:  # static planes only: a hand-written adjoint
        hand_adjoint.launch(kernel, solve_plane_contacts_adjoint_kernel, threads, inputs, outputs, model.device)
    else:
        wp.launch(kernel, dim=threads, device=model.device, inputs=inputs, outputs=outputs)


@stage("particle-particle contact")
def solve_particle_contacts(model, data, k: int) -> None:
    """Stage: particle pairs of iterate k pushed apart, with friction."""
    threads = contact_threads(model, data).pairs
    if threads == 0:
        return
    rows = data.buffers.rows
    wp.launch(solve_particle_contacts_kernel, dim=threads, device=model.device,
              inputs=[model.particle_radius, model.particle_inv_mass, model.particle_mu, data.state_in.particle_q,
                      data.particle_pairs, rows.dx[k], threads, data.solver.max_depenetration_velocity * data.dt],
              outputs=[rows.delta[k]])
