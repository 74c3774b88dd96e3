"""XPBD's multiplier update of a compliant, damped constraint (Macklin, Müller & Chentanez 2016).

A constraint C of an energy (k measure / 2) C^2 (stiffness k times a rest length, area or volume)
has compliance alpha = 1 / (k measure); with XPBD's damping gamma = kd / (k dt) its multiplier
increment on one Jacobi iterate is

    dlambda = s (-C - alpha~ lambda - gamma grad C . (x - x_start)) / ((1 + gamma) sum_i w_i |grad_i C|^2 + alpha~)

with alpha~ = alpha / dt^2 and s the element's Jacobi scale (``jacobi.jacobi_scales``). The triangle,
tetrahedron and bending constraints share it.
"""

import warp as wp


@wp.func
def damped_multiplier_step(c: float, lam: float, wsum: float, rate: float, k: float, measure: float, kd: float,
                           dt: float, s: float):
    """XPBD's multiplier increment for constraint value ``c`` of an energy (k measure / 2) C^2.

    alpha~ = 1 / (k measure dt^2), gamma = kd / (k dt); ``wsum`` = sum_i w_i |grad_i C|^2,
    ``rate`` = grad C . (x - x_start); ``s`` the Jacobi scale. Zero when k <= 0 (inactive).
    """
    dlam = float(0.0)
    if k > 0.0 and wsum > 1.0e-20:
        alpha_t = 1.0 / (k * measure * dt * dt)
        gamma = kd / (k * dt)
        dlam = s * (-c - alpha_t * lam - gamma * rate) / ((1.0 + gamma) * wsum + alpha_t)
    return dlam
