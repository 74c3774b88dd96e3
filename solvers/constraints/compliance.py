"""XPBD's multiplier update of a compliant, damped constraint (Macklin, Müller & Chentanez 2016).

A constraint C of an energy (k measure / 2) C^2 (stiffness k times a rest length, area or volume)
has compliance alpha = 1 / (k measure); with XPBD's damping gamma = kd / (k dt) its multiplier
increment on one Jacobi iterate is

    dlambda = s (-C - alpha~ lambda - gamma grad C . (x - x_start)) / ((1 + gamma) sum_i w_i |grad_i C|^2 + alpha~)

with alpha~ = alpha / dt^2 and s the element's Jacobi scale (``jacobi.jacobi_scales``). The springs,
triangles, tetrahedra and bending edges share it.

**Limits without NaN.** alpha~ = 1 / (k measure dt^2) overflows float32 for a soft constraint or a tiny
step (k <= 1e-32 N/m at dt = 1e-3 s, or dt <= 1e-22 s at k = 1: inf, then inf * 0 = NaN). Multiplied
through by beta = k measure dt^2 = 1 / alpha~ the same increment reads

    dlambda = s (-beta C - lambda - kd measure dt grad C . (x - x_start))
              / ((beta + kd measure dt) sum_i w_i |grad_i C|^2 + 1)

which is finite for every beta >= 0 (beta -> 0: the constraint lets go, dlambda = -lambda). It is used
while beta < 1 and the form above (finite for beta >= 1) otherwise: the same number in exact
arithmetic, so the switch is no kink.
"""

import warp as wp


@wp.func
def damped_multiplier_step(c: float, lam: float, wsum: float, rate: float, k: float, measure: float, kd: float,
                           dt: float, s: float):
    """XPBD's multiplier increment for constraint value ``c`` of an energy (k measure / 2) C^2.

    ``wsum`` = sum_i w_i |grad_i C|^2, ``rate`` = grad C . (x - x_start), ``kd`` the damping (gamma = kd / (k dt)),
    ``s`` the Jacobi scale. Zero when k <= 0 (inactive). Finite for any k > 0 and dt > 0 (module docstring).
    """
    dlam = float(0.0)
    if k > 0.0 and wsum > 1.0e-20:
        beta = k * measure * dt * dt  # 1 / alpha~
        damping = kd * measure * dt  # gamma beta
        if beta >= 1.0:
            alpha_t = 1.0 / beta
            gamma = damping * alpha_t
            dlam = s * (-c - alpha_t * lam - gamma * rate) / ((1.0 + gamma) * wsum + alpha_t)
        else:
            dlam = s * (-beta * c - lam - damping * rate) / ((beta + damping) * wsum + 1.0)
    return dlam


@wp.func
def damped_multiplier_partials(c: float, lam: float, wsum: float, rate: float, k: float, measure: float, kd: float,
                               dt: float, s: float):
    """:func:`damped_multiplier_step`'s dlambda (the same bits) and its partial derivatives, for the hand-written
    adjoints of the constraints that use it (``triangles.py``, ``bending.py``).

    Returns ``(dlam, d_state, d_material)``: ``d_state`` = d dlam / d (c, lam, wsum, rate) and ``d_material`` =
    d dlam / d (k, measure, kd), both zero where dlam is (k <= 0 or wsum <= 1e-20). With D the denominator, from
    the module docstring's two forms:

        beta >= 1: d/dc = -s / D, d/dlam = -s alpha~ / D, d/drate = -s gamma / D, d/dwsum = -dlam (1 + gamma) / D,
                   d/dalpha~ = (-s lam - dlam) / D, d/dgamma = (-s rate - dlam wsum) / D
        beta < 1:  d/dc = -s beta / D, d/dlam = -s / D, d/drate = -s damping / D, d/dwsum = -dlam (beta + damping) / D,
                   d/dbeta = (-s c - dlam wsum) / D, d/ddamping = (-s rate - dlam wsum) / D

    and beta = k measure dt^2, damping = kd measure dt, alpha~ = 1 / beta, gamma = damping alpha~ carry those
    to k, measure and kd.
    """
    dlam = float(0.0)
    d_state = wp.vec4(0.0)
    d_material = wp.vec3(0.0)
    if k > 0.0 and wsum > 1.0e-20:
        beta = k * measure * dt * dt
        damping = kd * measure * dt
        d_beta = float(0.0)
        d_damping = float(0.0)
        if beta >= 1.0:
            alpha_t = 1.0 / beta
            gamma = damping * alpha_t
            den = (1.0 + gamma) * wsum + alpha_t
            dlam = s * (-c - alpha_t * lam - gamma * rate) / den  # the forward's division: its bits
            inv = 1.0 / den  # the partials by one reciprocal (divisions are most of their cost)
            d_state = wp.vec4(-s * inv, -s * alpha_t * inv, -dlam * (1.0 + gamma) * inv, -s * gamma * inv)
            d_alpha = (-s * lam - dlam) * inv
            d_gamma = (-s * rate - dlam * wsum) * inv
            d_beta = -(d_alpha + d_gamma * damping) * alpha_t * alpha_t
            d_damping = d_gamma * alpha_t
        else:
            den = (beta + damping) * wsum + 1.0
            dlam = s * (-beta * c - lam - damping * rate) / den
            inv = 1.0 / den
            d_state = wp.vec4(-s * beta * inv, -s * inv, -dlam * (beta + damping) * inv, -s * damping * inv)
            d_beta = (-s * c - dlam * wsum) * inv
            d_damping = (-s * rate - dlam * wsum) * inv
        d_material = wp.vec3(d_beta * measure * dt * dt, d_beta * k * dt * dt + d_damping * kd * dt,
                             d_damping * measure * dt)
    return dlam, d_state, d_material
