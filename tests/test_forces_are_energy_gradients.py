"""Forces against energy gradients: every force stage of the SemiImplicitSolver is -dE/dx of its energy.

The reference energies are float64 NumPy re-implementations written here (springs,
stable neo-Hookean tets, membranes, dihedral bending, penalty contact against each
shape's signed distance), differentiated by float64 central differences; at small
strain the elastic forces also match linear elasticity in closed form.
"""

from __future__ import annotations

import numpy as np
import pytest

import inertia
from inertia.builder.rest_geometry import dihedral_angle
from test_gradients import spring_builder

DEVICE = "cpu"


# --------------------------------------------------------------------------- forces = -dE/dx
def one_step_forces(model) -> np.ndarray:
    """``particle_f`` of one step from the model's initial state (zero control, no gravity in the scenes)."""
    s0, s1 = model.state(), model.state()
    contacts = None
    if model.shape_count:
        contacts = model.contacts()
        model.collide(s0, contacts)
    inertia.SemiImplicitSolver(model).step(s0, s1, model.control(), contacts, 1.0e-4)
    return s1.particle_f.numpy().astype(np.float64)


def energy_gradient(energy, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences (float64) of ``energy(x)`` w.r.t. every coordinate of x (n, 3)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = (energy(xp) - energy(xm)) / (2 * h)
    return g


def check_force(name, f, f_ref, tol):
    """``f_ref`` is -dE/dx (or another exact reference force)."""
    scale = np.abs(f_ref).max()
    assert scale > 0.0, f"{name}: zero reference force, a vacuous check"
    err = np.abs(f - f_ref).max() / scale
    print(f"[force] {name}: max |f - f_ref| / max|f_ref| = {err:.2e} (tol {tol:.0e})")
    assert err < tol, f"{name}: force differs from the reference (rel err {err:.3e})\n f {f}\n f_ref {f_ref}"


def element_energy(indices, rest_poses, rest_measures, psi):
    """E(x) = sum over elements t of ``rest_measures[t] * psi(F, t)`` (rest volume or area times energy
    density), F = the element's edges from its first vertex, as columns, times its rest pose ``rest_poses[t]``."""

    def energy(x):
        e = 0.0
        for t, (i, *others) in enumerate(indices):
            F = np.stack([x[o] - x[i] for o in others], axis=1) @ rest_poses[t]
            e += rest_measures[t] * psi(F, t)
        return e

    return energy


def deformed(builder, amplitude, seed):
    rng = np.random.default_rng(seed)
    for p in range(builder.particle_count):
        builder.particle_q[p] = tuple(np.asarray(builder.particle_q[p]) + rng.uniform(-amplitude, amplitude, 3))


def snh_tet_psi(F, mu, lam):
    """Stable neo-Hookean energy density with the Lamé mapping of solvers/forces/tetrahedra.py (float64)."""
    m, l = 4.0 / 3.0 * mu, lam + 5.0 / 6.0 * mu
    ic = np.sum(F * F)
    alpha = 1.0 + 0.75 * m / l
    return 0.5 * m * (ic - 3.0) + 0.5 * l * (np.linalg.det(F) - alpha) ** 2 - 0.5 * m * np.log(ic + 1.0)


@pytest.mark.parametrize("amplitude", [0.01, 0.03, "inverted"], ids=["mild", "large", "inverted"])
def test_tet_forces_are_energy_gradient(amplitude):
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_soft_grid(1, 1, 1, density=1000.0, k_mu=1.0e4, k_lambda=3.0e4, k_damp=5.0)
    if amplitude == "inverted":  # push the top corner through the block: several tets turn inside out
        b.particle_q[7] = (0.02, 0.03, -0.04)
        deformed(b, 0.005, seed=12)
    else:
        deformed(b, amplitude, seed=10)
    model = b.finalize(device=DEVICE)
    x = model.particle_q.numpy().astype(np.float64)
    idx, poses, vols = model.tet_indices.numpy(), np.asarray(b.tet_poses), np.asarray(b.tet_volumes)
    mats = np.asarray(b.tet_materials)

    energy = element_energy(idx, poses, vols, lambda F, t: snh_tet_psi(F, mats[t, 0], mats[t, 1]))
    if amplitude == "inverted":
        assert min(np.linalg.det(np.stack([x[j] - x[i], x[k] - x[i], x[l] - x[i]], axis=1)) for i, j, k, l in idx) < 0
    check_force(f"tetrahedra ({amplitude=})", one_step_forces(model), -energy_gradient(energy, x), tol=2e-5)


def test_triangle_forces_are_energy_gradient():
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_cloth_grid(2, 2, tri_ke=500.0, tri_ka=800.0, tri_kd=3.0, edge_ke=0.0, edge_kd=0.0)
    deformed(b, 0.02, seed=11)
    model = b.finalize(device=DEVICE)
    x = model.particle_q.numpy().astype(np.float64)
    idx, poses, areas = model.tri_indices.numpy(), np.asarray(b.tri_poses), np.asarray(b.tri_areas)
    mats = np.asarray(b.tri_materials)

    def membrane_psi(F, t):  # F is 3x2
        mu, lam = mats[t, 0], mats[t, 1] + mats[t, 0]
        J = np.linalg.norm(np.cross(F[:, 0], F[:, 1]))
        return 0.5 * mu * (np.sum(F * F) - 2.0) + 0.5 * lam * (J - (1.0 + mu / lam)) ** 2

    energy = element_energy(idx, poses, areas, membrane_psi)
    check_force("triangles", one_step_forces(model), -energy_gradient(energy, x), tol=2e-5)


def test_bending_forces_are_energy_gradient():
    b = inertia.ModelBuilder(gravity=0.0)
    x = [(0.1, -0.1, 0.02), (0.12, 0.09, 0.05), (0.0, 0.0, 0.0), (0.2, 0.01, -0.01)]
    for p in x:
        b.add_particle(p, mass=0.01, radius=0.01)
    ke, rest = 0.3, 0.2
    b.add_edge(0, 1, 2, 3, edge_ke=ke, edge_kd=0.1, rest_angle=rest)
    model = b.finalize(device=DEVICE)
    xs = model.particle_q.numpy().astype(np.float64)

    def energy(x):
        return 0.5 * ke * (dihedral_angle(*x) - rest) ** 2

    check_force("bending", one_step_forces(model), -energy_gradient(energy, xs), tol=2e-5)


def test_spring_forces_are_energy_gradient():
    b = spring_builder()
    b.gravity = (0.0, 0.0, 0.0)
    b.particle_qd = [(0.0, 0.0, 0.0)] * b.particle_count
    model = b.finalize(device=DEVICE)
    xs = model.particle_q.numpy().astype(np.float64)

    def energy(x):
        return sum(0.5 * ke * (np.linalg.norm(x[j] - x[i]) - l0) ** 2
                   for (i, j), ke, l0 in zip(b.spring_indices, b.spring_stiffness, b.spring_rest_length))

    check_force("springs", one_step_forces(model), -energy_gradient(energy, xs), tol=2e-5)


def _sdf_box(p, h):
    q = np.abs(p) - h
    return np.linalg.norm(np.maximum(q, 0.0)) if (q > 0).any() else q.max()


@pytest.mark.parametrize("shape", ["ground", "sphere", "box_face", "box_edge", "capsule"])
def test_contact_forces_are_penalty_gradient(shape):
    """At rest (no damping or friction force), contact forces are -d/dx of ke/2 depth^2."""
    b = inertia.ModelBuilder(gravity=0.0)
    ke, r = 2.0e3, 0.05
    xf = ((0.1, -0.2, 0.3), (0.0, 0.0, 0.0, 1.0))
    c = np.array(xf[0])
    if shape == "ground":
        b.add_ground_plane(ke=ke, kd=5.0, mu=0.5)
        p, sdf = (0.01, 0.02, 0.03), lambda x: x[2]
    elif shape == "sphere":
        b.add_shape_sphere(xform=xf, radius=0.2, ke=ke, kd=5.0, mu=0.5)
        p, sdf = c + (0.1, 0.1, 0.12), lambda x: np.linalg.norm(x - c) - 0.2
    elif shape in ("box_face", "box_edge"):
        h = np.array([0.2, 0.1, 0.15])
        b.add_shape_box(xform=xf, hx=h[0], hy=h[1], hz=h[2], ke=ke, kd=5.0, mu=0.5)
        p = c + ((0.05, 0.07, 0.13) if shape == "box_face" else (0.22, 0.11, 0.0))
        sdf = lambda x: _sdf_box(x - c, h)  # noqa: E731
    else:
        b.add_shape_capsule(xform=xf, radius=0.1, half_height=0.2, ke=ke, kd=5.0, mu=0.5)
        p = c + (0.08, 0.06, 0.1)
        sdf = lambda x: np.linalg.norm((x - c) - np.array([0.0, 0.0, np.clip((x - c)[2], -0.2, 0.2)])) - 0.1  # noqa: E731
    b.add_particle(p, mass=0.1, radius=r)
    model = b.finalize(device=DEVICE)
    xs = model.particle_q.numpy().astype(np.float64)
    depth0 = r - sdf(xs[0])
    assert 0.0 < depth0 < 2 * r, f"test setup: the particle should penetrate, depth {depth0}"

    def energy(x):
        return 0.5 * ke * max(r - sdf(x[0]), 0.0) ** 2

    check_force(f"contact {shape}", one_step_forces(model), -energy_gradient(energy, xs, h=1e-7), tol=2e-5)


def test_small_strain_forces_match_linear_elasticity():
    """k_mu / k_lambda (tets) and tri_ke / tri_ka (membranes) are Lame parameters: at small strain
    the forces are those of linear elasticity, sigma = 2 mu eps + lam tr(eps) I."""
    mu, lam = 2.0e4, 5.0e4
    eps3 = 1e-3 * np.array([[1.0, 0.4, -0.3], [0.4, -0.5, 0.2], [-0.3, 0.2, 0.7]])
    X = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.02, 0.12, 0.0], [0.03, 0.01, 0.09]])

    b = inertia.ModelBuilder(gravity=0.0)
    for p in X:
        b.add_particle(p, mass=1.0, radius=0.01)
    b.add_tetrahedron(0, 1, 2, 3, k_mu=mu, k_lambda=lam)
    for p in range(4):
        b.particle_q[p] = tuple(X[p] + eps3 @ X[p])
    dm_inv, vol = np.asarray(b.tet_poses[0]), b.tet_volumes[0]
    sigma = 2 * mu * eps3 + lam * np.trace(eps3) * np.eye(3)
    H = -vol * sigma @ dm_inv.T  # forces on vertices 1..3 (columns)
    f_lin = np.vstack([-H.sum(axis=1), H.T])
    order = list(b.tet_indices[0])
    f_ref = np.zeros((4, 3))
    f_ref[order] = f_lin
    check_force("tet small strain vs linear elasticity", one_step_forces(b.finalize(device=DEVICE)), f_ref, tol=5e-3)

    eps2 = 1e-3 * np.array([[0.8, 0.3], [0.3, -0.6]])
    Y = np.array([[0.0, 0.0], [0.1, 0.0], [0.03, 0.08]])
    b = inertia.ModelBuilder(gravity=0.0)
    for p in Y:
        b.add_particle((p[0], p[1], 0.0), mass=1.0, radius=0.01)
    b.add_triangle(0, 1, 2, tri_ke=mu, tri_ka=lam, tri_kd=0.0)
    for p in range(3):
        q = Y[p] + eps2 @ Y[p]
        b.particle_q[p] = (q[0], q[1], 0.0)
    dm = np.stack([Y[1] - Y[0], Y[2] - Y[0]], axis=1)
    area = 0.5 * abs(np.linalg.det(dm))
    sigma = 2 * mu * eps2 + lam * np.trace(eps2) * np.eye(2)
    H = -area * sigma @ np.linalg.inv(dm).T
    f_ref = np.zeros((3, 3))
    f_ref[1:, :2] = H.T
    f_ref[0, :2] = -H.sum(axis=1)
    check_force("triangle small strain vs linear elasticity", one_step_forces(b.finalize(device=DEVICE)), f_ref,
                tol=5e-3)
