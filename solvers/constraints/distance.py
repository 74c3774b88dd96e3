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
from ..forces.element_funcs import NO_PARTICLE, ElementVectors, gather2, pair_vertices
from .compliance import damped_multiplier_step
from .element_kernels import element_constraints

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def distance_step(c: int, inv_mass: wp.array(dtype=float), indices: wp.array(dtype=wp.int32),
                  rest_length: wp.array(dtype=float), stiffness: wp.array(dtype=float),
                  damping: wp.array(dtype=float), x_start: wp.array(dtype=wp.vec3), dx: wp.array(dtype=wp.vec3),
                  lambda_in: wp.array(dtype=float), scale: wp.array(dtype=float), dt: float):
    """Spring c's particles, their corrections and its next multiplier (:mod:`.element_kernels`)."""
    i, j = pair_vertices(indices, c)
    lam = lambda_in[c]
    wi, wj = gather2(inv_mass, i, j)
    ke = stiffness[c]
    # x_i - x_j from the start positions' difference and the displacements' (step-local: jacobi.py)
    mi, mj = gather2(dx, i, j)
    d = (x_start[i] - x_start[j]) + (mi - mj)
    length = wp.length(d)
    dlam = float(0.0)
    corrections = ElementVectors()
    applies = wi + wj > 0.0 and ke > 0.0 and length > 1.0e-12
    if applies:
        n = d / length
        # compliance 1 / ke: an energy (ke / 2) C^2, "measure" 1
        dlam = damped_multiplier_step(length - rest_length[c], lam, wi + wj, wp.dot(n, mi - mj), ke, 1.0,
                                      damping[c], dt, scale[c])
        corrections = wp.matrix_from_rows(n * (wi * dlam), -(n * (wj * dlam)), wp.vec3(0.0), wp.vec3(0.0))
    return wp.vec4i(i, j, NO_PARTICLE, NO_PARTICLE), corrections, applies, lam + dlam


solve_distance_constraints_kernel, solve_distance_constraints = element_constraints(
    "springs", "solve_distance_constraints_kernel", __name__, distance_step, "spring_count",
    ("spring_indices", "spring_rest_length", "spring_stiffness", "spring_damping"), "spring_lambda", float, "spring")
