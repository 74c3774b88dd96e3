"""XPBD's per-body constraint algebra (``inertia.solvers.constraints.body_frames``) against float64 numpy.

The friction of a shape-shape contact solves the pair's point inverse mass matrix K = sum over the two
bodies of 1/m 1 - [r]x I_w^-1 [r]x restricted to the contact's tangent plane: x in the plane with
P K x = P b (P = 1 - n n^T). ``solve_tangent_rows`` solves it as a 2 x 2 system in a tangent basis; the
reference here solves the bordered 4 x 4 system [[K, n], [n^T, 0]] [x; l] = [b; 0] (the same plane
condition written another way: K x - b is along n, x . n = 0), independent of any basis.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from conftest import DEVICE
from inertia.solvers.constraints.body_frames import BodyFrame, solve_tangent_rows, tangent_basis


@wp.kernel
def _tangent_solve_kernel(inv_mass: wp.array(dtype=float), inv_inertia: wp.array(dtype=wp.mat33),
                          r: wp.array(dtype=wp.vec3), n: wp.array(dtype=wp.vec3), b: wp.array(dtype=wp.vec3),
                          x: wp.array(dtype=wp.vec3), basis: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    f0 = BodyFrame()
    f0.inv_mass = inv_mass[2 * i]
    f0.inv_inertia = inv_inertia[2 * i]
    f1 = BodyFrame()
    f1.inv_mass = inv_mass[2 * i + 1]
    f1.inv_inertia = inv_inertia[2 * i + 1]
    x[i] = solve_tangent_rows(f0, r[2 * i], f1, r[2 * i + 1], n[i], b[i])
    t1, t2 = tangent_basis(n[i])
    basis[2 * i] = t1
    basis[2 * i + 1] = t2


def _skew(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def test_tangent_solve_is_the_in_plane_solution_of_the_pair_inverse_mass_matrix():
    rng = np.random.default_rng(3)
    count = 64
    inv_mass = rng.uniform(0.2, 5.0, 2 * count)
    inv_mass[1::7] = 0.0  # some pairs against the world or a kinematic body: that side gives nothing
    inertia = []
    for k in range(2 * count):
        a = rng.normal(size=(3, 3))
        inertia.append(0.0 if inv_mass[k] == 0.0 else a @ a.T + 0.1 * np.eye(3))  # symmetric positive definite
    inv_inertia = np.array([np.zeros((3, 3)) if isinstance(i, float) else i for i in inertia])
    r = rng.normal(scale=0.2, size=(2 * count, 3))
    n = rng.normal(size=(count, 3))
    n[:4] = [(0, 0, 1), (0, 0, -1), (1, 0, 0), (0, -1, 1e-7)]  # the basis' sign switch and the poles
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    b = rng.normal(scale=1e-3, size=(count, 3))
    arrays = [wp.array(v.astype(np.float32), dtype=t, device=DEVICE) for v, t in (
        (inv_mass, float), (inv_inertia, wp.mat33), (r, wp.vec3), (n, wp.vec3), (b, wp.vec3))]
    x = wp.zeros(count, dtype=wp.vec3, device=DEVICE)
    basis = wp.zeros(2 * count, dtype=wp.vec3, device=DEVICE)
    wp.launch(_tangent_solve_kernel, dim=count, inputs=arrays, outputs=[x, basis], device=DEVICE)
    x, basis = x.numpy().astype(np.float64), basis.numpy().astype(np.float64).reshape(count, 2, 3)
    for i in range(count):
        K = np.zeros((3, 3))
        for k in (2 * i, 2 * i + 1):
            rx = _skew(r[k])
            K += inv_mass[k] * np.eye(3) - rx @ inv_inertia[k] @ rx
        bordered = np.block([[K, n[i][:, None]], [n[i][None, :], np.zeros((1, 1))]])
        ref = np.linalg.solve(bordered, np.concatenate([b[i], [0.0]]))[:3]
        # float32 inputs and arithmetic against float64 on the unrounded draws: a few ulps (6e-8) times the
        # conditioning of the 2 x 2 system; measured up to 2.3e-7 of |x|, so 5e-6 is ~20x that (a wrong term
        # of K, a basis vector off the plane or a swapped off-diagonal gives errors of order |x|)
        assert np.linalg.norm(x[i] - ref) <= 5e-6 * np.linalg.norm(ref) + 1e-12, (i, x[i], ref)
        frame = np.vstack([basis[i], n[i]])
        assert np.allclose(frame @ frame.T, np.eye(3), atol=1e-6), i  # (t1, t2, n) orthonormal
