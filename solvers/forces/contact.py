"""Penalty contact: gains scaled by each contact's effective mass, smoothed normal force, Coulomb friction.

Normal force along the contact normal, with d the penetration depth and v_n the normal relative velocity:

    f_n = max(ke d - kd v_n g, 0)

**Gains.** A shape's material gives them in one of two modes (``inertia.builder.shapes`` says how a mode is
chosen; particle pairs use ``model.particle_tau`` / ``particle_zeta`` or ``particle_ke`` / ``particle_kd``):

* mass-scaled (``tau`` > 0, the default): ke = m_eff / tau^2, kd = 2 zeta m_eff / tau, where m_eff is the
  effective mass of this contact along its normal: a particle on a static shape, its mass; a particle on a
  body, 1 / (w_p + w_b(n)); two particles, 1 / (w_i + w_j); two bodies, 1 / (w_0(n) + w_1(n)), with
  w_b(n) = 1/m + |r x n|^2 in the world inverse inertia (r from the centre of mass to the contact) and
  w = 0 for static and kinematic sides. Alone, a contact's depth then obeys d'' = -d / tau^2 - 2 zeta d' / tau
  + load / m_eff: a damped oscillator of period ~2 pi tau whatever the masses, so a 1 g link and a 10 kg
  body sink alike, and the same explicit step is stable for both;
* absolute (``tau`` = 0): the material's ``ke`` [N/m] and ``kd`` [N s/m] as they are.

Shape-shape contacts average the two materials' gains (each computed for the contact's m_eff).

What the mass-scaled law gives (closed forms, tests/test_contact_model.py):

* rest depth: a body resting on one contact, or on contacts that share its weight as their effective
  masses (a sphere, a particle, a box on its 4 corners: m_eff = m/4 each), sinks d = g tau^2 (0.25 mm at
  the default tau = 5 ms). A contact carrying a load L other than its own m_eff g sinks (L / m_eff) tau^2:
  a light link under a heavy one sinks deeper (give it a smaller tau, within the stability limits below);
* rebound: the force is cut at zero, so a contact lets go when ke d = -kd v_n (before d returns to 0), at
  the speed extremum of the damped oscillator: the restitution (rebound over impact speed) is
  e = exp(-2 zeta arccos(zeta) / sqrt(1 - zeta^2)) for zeta < 1 (1 at zeta = 0, 0.51 at 0.25, 0.30 at 0.5),
  exp(-2) = 0.135 at zeta = 1 (the default: critically damped), exp(-2 zeta arccosh(zeta) / sqrt(zeta^2 - 1))
  above; the discrete step adds an error of order dt / tau. For a chosen restitution pick zeta from this
  curve (the XPBDSolver has an explicit restitution instead, ``restitution``).

**Stability** (symplectic Euler; x = dt / tau; lambda <= the number of contacts acting on a body at once,
nearer 1-2 for a body on a flat face, up to ~20 in a pile of boxes with 8-point face manifolds):

* particle contacts are explicit, springs and dampers: stable while lambda x (x + 4 zeta) < 4; at the
  default tau = 5 ms and zeta = 1: x = 0.083 at dt = 1/2400 s (lambda < 11.8), x = 0.33 at 1/600 s
  (lambda < 2.8);
* shape-shape contacts have explicit springs and an implicit damper (``body_contact``): stable while
  lambda x^2 < 4 + 4 zeta lambda x, i.e. for any number of contacts while x < 4 zeta (measured: a pile of 64
  boxes rests at dt = tau = 1 ms), and lambda x^2 < 4 without damping (x = 0.2 at dt = 1 ms: lambda < 100).

**Smoothing.** ``contact_smoothing`` h [m] > 0 replaces d by h * softplus(depth / h) and g = 1 by
sigmoid(depth / h): the force rises smoothly from zero, starting ``SMOOTH_CONTACT_REACH * h`` before the
surfaces touch, instead of switching on at depth 0. Deep in contact (depth >> h) it is the plain force
again; a contact carrying L sits h * ln(e^(L / (ke h)) - 1) deep instead of L / ke (always shallower, and
above the surface once h > L / (ke ln 2)): a little physical stiffness traded for gradients that do not
jump with the step at which contact begins. Friction scales with f_n, so with h > 0 it too starts
(weakly) just before touch.

**Friction of particle contacts** (here): f_t = -min(mu f_n |v_t| / sqrt(|v_t|^2 + eps^2), m |v_t| / dt) *
v_t / |v_t|, where eps = ``model.friction_smoothing`` [m/s] makes Coulomb's law smooth (so it is
differentiable at v_t = 0) and the second bound keeps an explicit step from reversing the sliding
direction (m is the reduced mass of the pair along v_t). When sliding faster than eps, the deceleration
is mu g on flat ground, as Coulomb says. Shape-shape contacts have a static friction that holds instead
(``body_contact``).

Particle-shape contact is two-way: a shape on a body is placed by its body's current pose, the particle's
velocity is taken relative to the body's material point at the contact, and the body receives the
reaction (minus the particle's force) along the particle force's line of action, through the particle's
centre (a particle does not spin, so this keeps angular momentum exactly). The reduced masses of the
gains and of the friction bound then include the body's mass and inertia at that point along the normal
and the sliding direction. A kinematic body pushes particles but takes no reaction.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...collision.contact_sink import PairList, stored_pair_count
from ...collision.particle_shape import SoftContacts
from ...collision.sdf import ShapeGeometry, shape_types, shape_world_pose
from ...kernel_args import ArgBundle
from ...kinematics import point_velocity
from ...types import SMOOTH_CONTACT_REACH
from ..step_data import stage
from .body_dynamics import inverse_mass_along, wrench_at
from .contact_sides import contact_threads, kernel_per_shape_types, soft_contact_sides

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.struct
class PenaltyLaw:
    """The model's settings of penalty contact (scalars of the Model; not differentiated)."""

    friction_smoothing: float  # eps [m/s]
    contact_smoothing: float  # h [m]
    rigid_contact_margin: float  # [m]: how far apart shape-shape contacts were detected
    particle_ke: float  # particle-particle stiffness [N/m] (absolute mode)
    particle_kd: float  # damping [N s/m] (absolute mode)
    particle_tau: float  # time constant [s] (> 0: mass-scaled mode)
    particle_zeta: float  # damping ratio (mass-scaled mode)
    particle_mu: float  # friction coefficient


penalty_law = ArgBundle(PenaltyLaw)  # of a model


@wp.func
def penalty_gains(tau: float, zeta: float, ke: float, kd: float, m_eff: float):
    """(stiffness [N/m], damping [N s/m]) of one material for a contact of effective mass ``m_eff`` [kg].

    Mass-scaled when ``tau`` > 0: m_eff / tau^2 and 2 zeta m_eff / tau; otherwise the absolute ``ke``, ``kd``.
    """
    if tau > 0.0:
        return m_eff / (tau * tau), 2.0 * zeta * m_eff / tau
    return ke, kd


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
def penalty_normal_force(ke: float, kd: float, depth: float, vn: float, h: float):
    """f_n = max(ke d - kd v_n g, 0) [N], the explicit spring and damper of a particle contact (particle-shape
    and particle-pair alike), with d and g smoothed by ``h`` (``contact_depth``, ``contact_gate``). Shape-shape
    contacts split it: the spring explicit, the damper implicit (``body_contact``)."""
    return wp.max(ke * contact_depth(depth, h) - kd * vn * contact_gate(depth, h), 0.0)


@wp.func
def beyond_reach(depth: float, h: float):
    """Whether a contact at ``depth`` [m] exerts no force: h = 0, it does not penetrate; h > 0, it lies more
    than ``SMOOTH_CONTACT_REACH * h`` outside (where softplus and sigmoid have all but vanished). One test
    for particle-shape, particle-pair and shape-shape contacts, so all three switch on at the same depth."""
    return depth <= -(SMOOTH_CONTACT_REACH * h) or (h <= 0.0 and depth <= 0.0)


@wp.func
def friction_force(vt: wp.vec3, fn: float, mu: float, eps: float, mass: float, dt: float):
    speed_sq = wp.dot(vt, vt)
    speed = wp.sqrt(speed_sq + 1.0e-20)
    coulomb = mu * fn * speed / wp.sqrt(speed_sq + eps * eps)
    magnitude = wp.min(coulomb, mass * speed / dt)
    return -vt * (magnitude / speed)


@wp.func
def coulomb_projection(f: wp.vec3, limit: float):
    """``f`` [N] scaled down onto Coulomb's disk of radius ``limit`` = mu f_n [N] when it lies outside."""
    magnitude = wp.sqrt(wp.dot(f, f) + 1.0e-30)
    return f * (limit / wp.max(magnitude, limit))


def _particle_shape_contact_kernel(sdf_at, tag: str):
    @wp.kernel(name=f"particle_shape_contact_kernel_{tag}", module="unique")
    def particle_shape_contact_kernel(
        # Model:
        radius: wp.array(dtype=float),
        inv_mass: wp.array(dtype=float),
        body_com: wp.array(dtype=wp.vec3),
        body_inv_mass: wp.array(dtype=float),
        body_inv_inertia: wp.array(dtype=wp.mat33),
        shapes: ShapeGeometry,
        shape_ke: wp.array(dtype=float),
        shape_kd: wp.array(dtype=float),
        shape_tau: wp.array(dtype=float),
        shape_zeta: wp.array(dtype=float),
        shape_mu: wp.array(dtype=float),
        law: PenaltyLaw,
        # Data in:
        x: wp.array(dtype=wp.vec3),
        v: wp.array(dtype=wp.vec3),
        body_q: wp.array(dtype=wp.transform),
        body_qd: wp.array(dtype=wp.spatial_vector),
        contacts: SoftContacts,
        # In:
        dt: float,
        # Data out:
        f: wp.array(dtype=wp.vec3),
        body_f: wp.array(dtype=wp.spatial_vector),
    ):
        c = wp.tid()
        if c >= contacts.count[0]:
            return
        p, s, b = soft_contact_sides(contacts, shapes, c)
        w = inv_mass[p]
        body_dynamic = False
        if b >= 0:
            body_dynamic = body_inv_mass[b] > 0.0
        if w == 0.0 and not body_dynamic:
            return  # neither side can move: a kinematic particle against a static or kinematic shape
        r = radius[p]
        smoothing = law.contact_smoothing
        X = shape_world_pose(shapes, body_q, s)
        sd = wp.static(sdf_at)(shapes, s, X, x[p], 2.0 * r + 1.0)
        depth = r - sd[3]
        if beyond_reach(depth, smoothing):
            return
        n = wp.vec3(sd[0], sd[1], sd[2])
        x_surface = x[p] - n * sd[3]
        # the particle's velocity relative to the shape's material point (static shapes: zero, exactly)
        vrel = v[p] - point_velocity(body_q, body_qd, body_com, b, x_surface)
        vn = wp.dot(n, vrel)
        # effective mass along the normal: the particle's and the body's at the contact (w + 0 for static shapes)
        m_n = 1.0 / (w + inverse_mass_along(body_q, body_com, body_inv_mass, body_inv_inertia, b, x_surface, n))
        ke, kd = penalty_gains(shape_tau[s], shape_zeta[s], shape_ke[s], shape_kd[s], m_n)
        fn = penalty_normal_force(ke, kd, depth, vn, smoothing)
        vt = vrel - n * vn
        # reduced mass along the sliding direction: the particle's and the body's at the contact (w + 0 for static)
        w_body = inverse_mass_along(body_q, body_com, body_inv_mass, body_inv_inertia, b, x_surface, vt)
        fc = n * fn + friction_force(vt, fn, shape_mu[s], law.friction_smoothing, 1.0 / (w + w_body), dt)
        wp.atomic_add(f, p, fc)
        if body_dynamic:
            # the reaction on the particle's line of action (a particle cannot spin): angular momentum is kept
            wp.atomic_sub(body_f, b, wrench_at(body_q, body_com, b, fc, x[p]))

    return particle_shape_contact_kernel


# particle_shape_contact_kernel_for(types): the kernel for the shape types in ``types`` (``sdf.shape_types(model)``)
particle_shape_contact_kernel_for = kernel_per_shape_types(_particle_shape_contact_kernel)


@wp.func
def particle_pair_force(
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    i: int,
    j: int,
    law: PenaltyLaw,
    dt: float,
    f: wp.array(dtype=wp.vec3),
):
    w = inv_mass[i] + inv_mass[j]
    if w == 0.0:
        return
    d = x[i] - x[j]
    dist = wp.length(d)
    depth = radius[i] + radius[j] - dist
    smoothing = law.contact_smoothing
    if beyond_reach(depth, smoothing) or dist < 1.0e-12:
        return
    n = d / dist
    vrel = v[i] - v[j]
    vn = wp.dot(n, vrel)
    ke, kd = penalty_gains(law.particle_tau, law.particle_zeta, law.particle_ke, law.particle_kd, 1.0 / w)
    fn = penalty_normal_force(ke, kd, depth, vn, smoothing)
    fc = n * fn + friction_force(vrel - n * vn, fn, law.particle_mu, law.friction_smoothing, 1.0 / w, dt)
    # equal and opposite: contact conserves momentum exactly
    wp.atomic_add(f, i, fc)
    wp.atomic_sub(f, j, fc)


@wp.kernel
def particle_pair_contact_kernel(
    # Model:
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    law: PenaltyLaw,
    # Data in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    pairs: PairList,
    # In:
    stride: int,
    dt: float,
    # Data out:
    f: wp.array(dtype=wp.vec3),
):
    # one thread per particle (``stride`` threads), each taking every n-th pair (``particle_pair_threads``)
    t = wp.tid()
    for c in range(t, stored_pair_count(pairs), stride):
        pair = pairs.pairs[c]
        particle_pair_force(x, v, radius, inv_mass, pair[0], pair[1], law, dt, f)


@stage("particle-shape contact", writes=lambda data: {"particle_f": data.state_out.particle_f,
                                                                  "body_f": data.state_out.body_f})
def eval_particle_shape_contact_forces(model, data) -> None:
    """Stage: penalty contact of particles against shapes; shapes on dynamic bodies take the reaction in ``body_f``."""
    threads = contact_threads(model, data).soft
    if threads == 0:
        return
    state, out = data.state_in, data.state_out
    wp.launch(particle_shape_contact_kernel_for(shape_types(model)), dim=threads, device=model.device,
              inputs=[model.particle_radius, model.particle_inv_mass, model.body_com, model.body_inv_mass,
                      model.body_inv_inertia, data.shapes, model.shape_material_ke, model.shape_material_kd,
                      model.shape_material_tau, model.shape_material_zeta, model.shape_material_mu,
                      data.penalty_law, state.particle_q,
                      state.particle_qd, state.body_q, state.body_qd, data.soft_contacts, data.dt],
              outputs=[out.particle_f, out.body_f])


@stage("particle-particle contact", writes=lambda data: {"particle_f": data.state_out.particle_f})
def eval_particle_pair_contact_forces(model, data) -> None:
    """Stage: penalty contact with friction between the particle pairs ``collide`` found."""
    threads = contact_threads(model, data).pairs
    if threads == 0:
        return
    state = data.state_in
    wp.launch(particle_pair_contact_kernel, dim=threads, device=model.device,
              inputs=[model.particle_radius, model.particle_inv_mass, data.penalty_law, state.particle_q,
                      state.particle_qd, data.particle_pairs, threads, data.dt],
              outputs=[data.state_out.particle_f])
