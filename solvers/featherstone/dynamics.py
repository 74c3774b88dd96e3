"""Joint-space dynamics: joint forces (implicit drives, damping, friction, limits), CRBA, RNEA, integration.

The step solves, per articulation,

    (M(q) + dt D) dqd = dt (tau(q, qd) - C(q, qd))          qd' = qd + dqd,   q' = q (+) dt qd'

C: the bias forces by recursive Newton-Euler (gravity, Coriolis and centrifugal terms, external
wrenches; :func:`forward_kinematics_kernel` then :func:`composite_kernel`); M: the mass matrix by
composite rigid bodies plus armature. Forces that would be stiff explicitly enter through D, their
derivative with respect to the new velocity (Tan et al. 2011, stable PD; MuJoCo's implicitfast does
this for damping):

- drive: ``tau = ke (q_target - q - dt qd') + kd (qd_target - qd')``: D += kd + dt ke, and the explicit
  part ``ke (q_target - q - dt qd) + kd (qd_target - qd) + joint_f`` is clamped to
  ``+-joint_effort_limit``; a clamped (saturated) drive acts as that constant effort (no D term);
- passive damping ``-c qd'``: D += c;
- Coulomb friction, smoothed: ``-mu qd' / sqrt(qd^2 + eps^2)``, the coefficient taken at the step's
  start (so it is an implicit damping that tends to the Coulomb torque mu once sliding): D += mu /
  sqrt(qd^2 + eps^2); a torque tau below mu only creeps, at eps r / sqrt(1 - r^2) with r = tau / mu;
- limits (revolute, prismatic), a one-sided spring-damper while the predicted coordinate
  ``q + dt qd`` is past the limit: ``tau = -ke (q + dt qd' - limit) - kd qd'``: D += kd + dt ke.

Each term is stable for any gain and any dt (an implicit spring-damper dissipates); they are exact to
first order in dt, like the rest of the step.

Velocity limits (:func:`rate_limit_kernel`): a new rate beyond ``joint_velocity_limit`` is prescribed at it
and the system solved again for the others, i.e. an impulse on that joint (RK4: on each stage's
acceleration, with that stage's matrix); :func:`advance_kernel` then clamps only what rounding (or a rate
that the prescribed ones push beyond its own limit) leaves.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...kinematics import JointTopology
from ...types import JOINT_PRISMATIC, JOINT_REVOLUTE
from .kinematics import dof_count, integrate_coordinates
from .linalg import factor_block, factor_or_reuse_block, solve_block
from .topology import Tree, articulation_block

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def dof_joint_forces(
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    joint_armature: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_friction: wp.array(dtype=float),
    joint_effort_limit: wp.array(dtype=float),
    tree: Tree,
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    target_pos: wp.array(dtype=float),
    target_vel: wp.array(dtype=float),
    joint_f: wp.array(dtype=float),
    friction_eps: float,
    dt: float,
    d: int,
    tau: wp.array(dtype=float),
    diag: wp.array(dtype=float),
):
    """Degree of freedom d's explicit joint force ``tau`` and ``diag`` = armature + dt D (see the module doc;
    :func:`joint_forces_kernel`)."""
    js = tree.dof_state[d]
    if js < 0:  # a virtual free joint: no joint forces
        tau[d] = 0.0
        diag[d] = 0.0
        return
    s = tree.dof_slot[d]
    t = tree.slot_type[s]
    v = qd[d]
    fric = joint_friction[js] / wp.sqrt(v * v + friction_eps * friction_eps)
    damping = joint_damping[js] + fric
    explicit = joint_f[js] - damping * v
    implicit = damping
    lim = joint_effort_limit[js]
    if t == JOINT_REVOLUTE or t == JOINT_PRISMATIC:
        x = q[tree.slot_q[s]]
        ke = joint_target_ke[js]
        kd = joint_target_kd[js]
        effort = ke * (target_pos[js] - x - dt * v) + kd * (target_vel[js] - v) + joint_f[js]
        if wp.abs(effort) > lim:  # saturated: a constant effort for this step
            explicit = explicit - joint_f[js] + wp.clamp(effort, -lim, lim)
        else:
            explicit = explicit - joint_f[js] + effort
            implicit = implicit + kd + dt * ke
        predicted = x + dt * v
        lke = joint_limit_ke[js]
        lkd = joint_limit_kd[js]
        upper = joint_limit_upper[js]
        lower = joint_limit_lower[js]
        if predicted > upper:
            explicit = explicit - lke * (predicted - upper) - lkd * v
            implicit = implicit + lkd + dt * lke
        elif predicted < lower:
            explicit = explicit - lke * (predicted - lower) - lkd * v
            implicit = implicit + lkd + dt * lke
    else:
        explicit = explicit - joint_f[js] + wp.clamp(joint_f[js], -lim, lim)
    tau[d] = explicit
    diag[d] = joint_armature[js] + dt * implicit


@wp.kernel
def joint_forces_kernel(
    # Model:
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    joint_armature: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_friction: wp.array(dtype=float),
    joint_effort_limit: wp.array(dtype=float),
    tree: Tree,
    # Data in:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    target_pos: wp.array(dtype=float),
    target_vel: wp.array(dtype=float),
    joint_f: wp.array(dtype=float),
    # In:
    friction_eps: float,
    dt: float,
    # Data out:
    tau: wp.array(dtype=float),
    diag: wp.array(dtype=float),
):
    """Per degree of freedom: the explicit joint force ``tau`` and ``diag`` = armature + dt D (see the module doc)."""
    dof_joint_forces(joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                     joint_limit_kd, joint_armature, joint_damping, joint_friction, joint_effort_limit, tree, q, qd,
                     target_pos, target_vel, joint_f, friction_eps, dt, wp.tid(), tau, diag)


@wp.func
def articulation_composite(
    tree: Tree,
    body_I: wp.array(dtype=wp.spatial_matrix),
    body_fb: wp.array(dtype=wp.spatial_vector),
    dof_S: wp.array(dtype=wp.spatial_vector),
    diag: wp.array(dtype=float),
    with_contacts: int,
    a: int,
    body_Ic: wp.array(dtype=wp.spatial_matrix),
    body_fsub: wp.array(dtype=wp.spatial_vector),
    bias: wp.array(dtype=float),
    H0: wp.array(dtype=float),
    H: wp.array(dtype=float),
):
    """Composite inertias and subtree forces (leaves to root), the bias forces C = S^T f and
    H0 = M + diag (CRBA: M_rc = S_c . Ic_r S_r where c's joint is r's or an ancestor's); H = H0 too
    when ``with_contacts`` (the contacts add to H, and their effective masses come from H0); of
    articulation ``a``, whose bodies' ``body_Ic`` and ``body_fsub`` must be zero on entry (:func:`composite_kernel`)."""
    s0 = tree.art_slot_start[a]
    s1 = tree.art_slot_start[a + 1]
    for s in range(s0, s1):
        c = tree.slot_child[s]
        wp.atomic_add(body_Ic, c, body_I[c])
        wp.atomic_add(body_fsub, c, body_fb[c])
    for i in range(s1 - s0):
        sr = s1 - 1 - i
        cr = tree.slot_child[sr]
        pr = tree.slot_parent[sr]
        if pr >= 0:
            wp.atomic_add(body_Ic, pr, body_Ic[cr])
            wp.atomic_add(body_fsub, pr, body_fsub[cr])
        ds = tree.slot_qd[sr]
        for k in range(dof_count(tree.slot_type[sr])):
            bias[ds + k] = wp.dot(dof_S[ds + k], body_fsub[cr])
    d0, n, m0 = articulation_block(tree, a)
    for r in range(n):
        row_slot = tree.dof_slot[d0 + r]
        F = body_Ic[tree.slot_child[row_slot]] * dof_S[d0 + r]
        for cc in range(r + 1):
            col_slot = tree.dof_slot[d0 + cc]
            entry = float(0.0)
            if row_slot < tree.slot_end[col_slot]:  # the column's joint is the row's or an ancestor's
                entry = wp.dot(dof_S[d0 + cc], F)
            h = entry + wp.where(cc == r, diag[d0 + r], 0.0)
            H0[m0 + r * n + cc] = h
            H0[m0 + cc * n + r] = h
            if with_contacts != 0:
                H[m0 + r * n + cc] = h
                H[m0 + cc * n + r] = h


@wp.func_replay(articulation_composite)
def _replay_articulation_composite(
    tree: Tree,
    body_I: wp.array(dtype=wp.spatial_matrix),
    body_fb: wp.array(dtype=wp.spatial_vector),
    dof_S: wp.array(dtype=wp.spatial_vector),
    diag: wp.array(dtype=float),
    with_contacts: int,
    a: int,
    body_Ic: wp.array(dtype=wp.spatial_matrix),
    body_fsub: wp.array(dtype=wp.spatial_vector),
    bias: wp.array(dtype=float),
    H0: wp.array(dtype=float),
    H: wp.array(dtype=float),
):
    """Its replay in an adjoint kernel's forward pass: nothing. It adds into ``body_Ic`` / ``body_fsub``, which its
    adjoint reads; replayed, they would hold twice the sums (its adjoint evaluates it again itself, with the
    atomic adds left out as Warp leaves them out of every replay)."""
    return


@wp.kernel
def composite_kernel(
    # Model:
    tree: Tree,
    # Data in:
    body_I: wp.array(dtype=wp.spatial_matrix),
    body_fb: wp.array(dtype=wp.spatial_vector),
    dof_S: wp.array(dtype=wp.spatial_vector),
    diag: wp.array(dtype=float),
    # In:
    with_contacts: int,
    # Data out:
    body_Ic: wp.array(dtype=wp.spatial_matrix),  # zero on entry
    body_fsub: wp.array(dtype=wp.spatial_vector),  # zero on entry
    bias: wp.array(dtype=float),
    H0: wp.array(dtype=float),
    H: wp.array(dtype=float),
):
    """:func:`articulation_composite` of every articulation: composite inertias and subtree forces, the bias
    forces C and H0 = M + diag (and H = H0 with ``with_contacts``)."""
    articulation_composite(tree, body_I, body_fb, dof_S, diag, with_contacts, wp.tid(), body_Ic, body_fsub, bias, H0,
                           H)


@wp.func
def slot_advance(
    joints: JointTopology,
    joint_velocity_limit: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    tree: Tree,
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    dv: wp.array(dtype=float),
    u: wp.array(dtype=float),
    rate_impulse: wp.array(dtype=float),
    h_v: float,
    h_q: float,
    use_new_velocity: int,
    clamp_velocity: int,
    with_rate_impulse: int,
    impulse_scale: float,
    s: int,
    q_next: wp.array(dtype=float),
    qd_next: wp.array(dtype=float),
):
    """qd' = qd + h_v dv (+ ``impulse_scale`` ``rate_impulse``: the velocity limits' response,
    :func:`rate_limit_kernel`, if ``with_rate_impulse``; then clamped to the velocity limit if asked),
    q' = q (+) h_q w with w = qd' (semi-implicit Euler: ``use_new_velocity``) or w = u (a Runge-Kutta stage).

    Of slot ``s`` (:func:`advance_kernel`). (+) per joint type: :func:`.kinematics.integrate_coordinates`.
    """
    t = tree.slot_type[s]
    qs = tree.slot_q[s]
    ds = tree.slot_qd[s]
    nd = dof_count(t)
    for k in range(6):
        if k < nd:
            v = qd[ds + k] + h_v * dv[ds + k]
            if with_rate_impulse != 0:
                v = v + impulse_scale * rate_impulse[ds + k]
            js = tree.dof_state[ds + k]
            if js >= 0 and clamp_velocity != 0:
                lim = joint_velocity_limit[js]
                v = wp.clamp(v, -lim, lim)
            qd_next[ds + k] = v
    integrate_coordinates(joints, body_com, tree.slot_joint[s], tree.slot_child[s], t, q, qs, qd_next, u,
                          use_new_velocity, ds, h_q, q_next)


@wp.kernel
def advance_kernel(
    # Model:
    joints: JointTopology,
    joint_velocity_limit: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    tree: Tree,
    # Data in:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    dv: wp.array(dtype=float),
    u: wp.array(dtype=float),
    rate_impulse: wp.array(dtype=float),
    # In:
    h_v: float,
    h_q: float,
    use_new_velocity: int,
    clamp_velocity: int,
    with_rate_impulse: int,
    impulse_scale: float,
    # Data out:
    q_next: wp.array(dtype=float),
    qd_next: wp.array(dtype=float),
):
    """:func:`slot_advance` of every slot: qd' = qd + h_v dv (+ the velocity limits' response), q' = q (+) h_q w."""
    slot_advance(joints, joint_velocity_limit, body_com, tree, q, qd, dv, u, rate_impulse, h_v, h_q, use_new_velocity,
                 clamp_velocity, with_rate_impulse, impulse_scale, wp.tid(), q_next, qd_next)


@wp.func
def rate_excess(joint_velocity_limit: wp.array(dtype=float), tree: Tree, qd: wp.array(dtype=float),
                dv: wp.array(dtype=float), h_v: float, d: int):
    """How far the new rate qd + h_v dv of dof ``d`` must move to its velocity limit (0 within it)."""
    js = tree.dof_state[d]
    if js < 0:
        return 0.0
    v = qd[d] + h_v * dv[d]
    lim = joint_velocity_limit[js]
    return wp.clamp(v, -lim, lim) - v


@wp.kernel
def rate_limit_kernel(
    # Model:
    joint_velocity_limit: wp.array(dtype=float),
    tree: Tree,
    # Data in:
    H: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    dv: wp.array(dtype=float),
    # In:
    h_v: float,
    # Data out:
    coupling: wp.array(dtype=float),  # zero on entry: sum over the limited dofs k of H[i, k] e_k
    H_free: wp.array(dtype=float),
    rhs: wp.array(dtype=float),
):
    """The velocity limits as joint impulses: the system whose solution x is the rate change they cause.

    The new rates qd + h_v dv solve H (h_v dv) = b; where some exceed their limits (the set S, by e_k each),
    those are prescribed at the limit and the others follow: x_S = e_S, H_oo x_o = -H_oS e_S, i.e.
    ``H_free`` x = ``rhs`` with H's rows and columns of S replaced by the identity's. x is what impulses on
    the limited joints' own degrees of freedom do (generalized forces of joints: equal and opposite on the
    two bodies of each), so a floating base's momentum is unchanged by them, as by the other joint forces;
    clamping the rates alone would leave the rest of the tree, the base included, with the reaction to
    the unclamped impulse. Without an excess, ``H_free`` is H and ``rhs`` zero.
    """
    a = wp.tid()
    d0, n, m0 = articulation_block(tree, a)
    for i in range(n):
        ei = rate_excess(joint_velocity_limit, tree, qd, dv, h_v, d0 + i)
        for k in range(n):
            e = m0 + i * n + k
            ek = rate_excess(joint_velocity_limit, tree, qd, dv, h_v, d0 + k)
            if ei != 0.0 or ek != 0.0:
                H_free[e] = wp.where(i == k, 1.0, 0.0)
                if ei == 0.0:
                    wp.atomic_add(coupling, d0 + i, H[e] * ek)
            else:
                H_free[e] = H[e]
        rhs[d0 + i] = wp.where(ei != 0.0, ei, -coupling[d0 + i])


@wp.func
def rate_limit_block(joint_velocity_limit: wp.array(dtype=float), tree: Tree, H: wp.array(dtype=float),
                     qd: wp.array(dtype=float), dv: wp.array(dtype=float), zero: wp.array(dtype=float), h_v: float,
                     d0: int, n: int, m0: int, H_free: wp.array(dtype=float), L: wp.array(dtype=float),
                     y: wp.array(dtype=float), x: wp.array(dtype=float)):
    """:func:`rate_limit_kernel`, then :mod:`.linalg`'s factor and solve of its system, for the articulation whose
    dofs start at ``d0`` (``n`` of them, matrix block at ``m0``) without an adjoint (sums in local variables: the
    same bits): an articulation with no rate beyond a limit writes x = 0 (what the solve of a zero right-hand
    side gives) and skips the rest."""
    beyond = int(0)
    for d in range(n):
        if rate_excess(joint_velocity_limit, tree, qd, dv, h_v, d0 + d) != 0.0:
            beyond = 1
    if beyond == 0:
        for d2 in range(n):
            x[d0 + d2] = 0.0
    else:
        for i in range(n):  # the system, and its right-hand side (into x until the solve)
            ei = rate_excess(joint_velocity_limit, tree, qd, dv, h_v, d0 + i)
            coupling = float(0.0)
            for k in range(n):
                e = m0 + i * n + k
                ek = rate_excess(joint_velocity_limit, tree, qd, dv, h_v, d0 + k)
                if ei != 0.0 or ek != 0.0:
                    H_free[e] = wp.where(i == k, 1.0, 0.0)
                    if ei == 0.0:
                        coupling += H[e] * ek
                else:
                    H_free[e] = H[e]
            x[d0 + i] = wp.where(ei != 0.0, ei, -coupling)
        factor_block(H_free, m0, n, L)
        solve_block(L, m0, n, d0, x, zero, zero, 1.0, y, x)  # b = 1 (rhs + 0 - 0), as linalg.solve on the tape


@wp.kernel(enable_backward=False)
def solve_forward_kernel(
    # Model:
    joint_velocity_limit: wp.array(dtype=float),
    tree: Tree,
    # Data in:
    A: wp.array(dtype=float),
    A0: wp.array(dtype=float),
    L0: wp.array(dtype=float),
    b_joint: wp.array(dtype=float),
    b_contact: wp.array(dtype=float),
    b_bias: wp.array(dtype=float),
    H_limits: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    limit_zero: wp.array(dtype=float),
    # In:
    reuse: int,
    dt: float,
    rate_limits: int,
    h_v: float,
    # Data out:
    L: wp.array(dtype=float),
    y: wp.array(dtype=float),
    dqd: wp.array(dtype=float),
    limit_H: wp.array(dtype=float),
    limit_L: wp.array(dtype=float),
    limit_y: wp.array(dtype=float),
    limit_dqd: wp.array(dtype=float),
):
    """A CPU step's solve off the tape, in one launch per articulation (the forward-only twins of
    ``linalg.factor``, ``linalg.solve`` and the velocity limits: the same bits): L L^T = A (L0's factor where
    ``reuse`` and no contact changed A0's block), dqd = (L L^T)^-1 dt (b_joint + b_contact - b_bias), then with
    ``rate_limits`` the limits' rate change for the rates qd + h_v dqd (:func:`rate_limit_block`, with
    ``H_limits``: the matrix that gave dqd, or M(q_n) in an RK4 stage)."""
    a = wp.tid()
    d0, n, m0 = articulation_block(tree, a)
    factor_or_reuse_block(A, A0, L0, reuse, m0, n, L)
    solve_block(L, m0, n, d0, b_joint, b_contact, b_bias, dt, y, dqd)
    if rate_limits != 0:
        rate_limit_block(joint_velocity_limit, tree, H_limits, qd, dqd, limit_zero, h_v, d0, n, m0, limit_H, limit_L,
                         limit_y, limit_dqd)


@wp.kernel
def rk4_combine_kernel(
    # Data in:
    v1: wp.array(dtype=float),
    v2: wp.array(dtype=float),
    v3: wp.array(dtype=float),
    v4: wp.array(dtype=float),
    a1: wp.array(dtype=float),
    a2: wp.array(dtype=float),
    a3: wp.array(dtype=float),
    a4: wp.array(dtype=float),
    x1: wp.array(dtype=float),
    x2: wp.array(dtype=float),
    x3: wp.array(dtype=float),
    x4: wp.array(dtype=float),
    # In:
    inv_dt: float,
    with_limits: int,
    # Data out:
    u: wp.array(dtype=float),
    dv: wp.array(dtype=float),
):
    """RK4's weighted rates: u = (v1 + 2 v2 + 2 v3 + v4) / 6 for the positions, dv the same of the accelerations
    (each a_k + x_k / dt with ``with_limits``: x_k the rate change of stage k's velocity-limit impulses)."""
    d = wp.tid()
    u[d] = (v1[d] + 2.0 * v2[d] + 2.0 * v3[d] + v4[d]) / 6.0
    if with_limits != 0:
        dv[d] = ((a1[d] + x1[d] * inv_dt) + 2.0 * (a2[d] + x2[d] * inv_dt) + 2.0 * (a3[d] + x3[d] * inv_dt)
                 + (a4[d] + x4[d] * inv_dt)) / 6.0
    else:
        dv[d] = (a1[d] + 2.0 * a2[d] + 2.0 * a3[d] + a4[d]) / 6.0
