"""Distance constraints (springs) for XPBD: C = |x_i - x_j| - l0, compliance alpha = 1 / ke.

One Jacobi pass: every constraint reads the current iterate, computes its
multiplier increment (Macklin, Müller & Chentanez 2016, with their damping term)

    dlambda = (-C - alpha~ lambda - gamma grad C . (x - x_n)) / ((1 + gamma) sum_i w_i |grad_i C|^2 + alpha~)
    alpha~ = alpha / dt^2,   gamma = alpha kd / dt

(evaluated multiplied through by ke dt^2, ``compliance.py``, so that no stiffness or step is too small),

scales it by s = omega / sqrt(max(n_i, n_j)) (n: constraints on a particle;
see ``jacobi_scales``, so that constraints sharing a particle do not
overshoot together), and adds w_i grad_i C s dlambda to its particles'
correction. The multiplier accumulates the same scaled increment, so at
convergence lambda / dt^2 is the spring's force and XPBD's equilibrium is the
physical one. The multipliers of iteration k are read from one array and
written to another, so a recorded step keeps all of them for the backward
pass. A spring with ke <= 0 is inactive.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ..forces.element_funcs import gather2, pair_vertices
from .compliance import damped_multiplier_step
from .jacobi import element_constraint_stage

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def solve_distance_constraints_kernel(
    # Model:
    inv_mass: wp.array(dtype=float),
    indices: wp.array(dtype=wp.int32),
    rest_length: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    # Data in:
    x_start: wp.array(dtype=wp.vec3),
    dx: wp.array(dtype=wp.vec3),
    lambda_in: wp.array(dtype=float),
    # In:
    scale: wp.array(dtype=float),
    dt: float,
    # Data out:
    delta: wp.array(dtype=wp.vec3),
    lambda_out: wp.array(dtype=float),
):
    c = wp.tid()
    i, j = pair_vertices(indices, c)
    lam = lambda_in[c]
    wi, wj = gather2(inv_mass, i, j)
    ke = stiffness[c]
    # x_i - x_j from the start positions' difference and the displacements' (step-local: jacobi.py)
    mi, mj = gather2(dx, i, j)
    d = (x_start[i] - x_start[j]) + (mi - mj)
    length = wp.length(d)
    dlam = float(0.0)
    # one store of lambda_out at the end: a second store to the same element would get its adjoint twice
    if wi + wj > 0.0 and ke > 0.0 and length > 1.0e-12:
        n = d / length
        # compliance 1 / ke: an energy (ke / 2) C^2, "measure" 1
        dlam = damped_multiplier_step(length - rest_length[c], lam, wi + wj, wp.dot(n, mi - mj), ke, 1.0,
                                      damping[c], dt, scale[c])
        wp.atomic_add(delta, i, n * (wi * dlam))
        wp.atomic_sub(delta, j, n * (wj * dlam))
    lambda_out[c] = lam + dlam


solve_distance_constraints = element_constraint_stage(
    "springs", solve_distance_constraints_kernel, "spring_count",
    ("spring_indices", "spring_rest_length", "spring_stiffness", "spring_damping"), "spring_lambda", "spring")
