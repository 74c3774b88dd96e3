"""Soft bodies: the 5-tet decomposition of add_soft_grid, and a soft cube dropped on the ground.

Closed forms used:
  * every hexahedral cell is filled exactly, once, by its 5 tets (volumes sum to the block volume,
    every point of a cell lies in exactly one of its tets, neighbouring cells share face diagonals);
  * at rest on the ground, the 16 bottom particles carry the whole weight: sum ke_i d_i = M g with the
    default mass-scaled gains ke_i = m_i / tau^2, so their mass-weighted mean penetration is exactly
    M g tau^2 / sum m_i;
  * linear elasticity of a free block compressed by its own weight: dV/V = -(1 - 2 nu) rho g H / (2 E).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

import inertia
from conftest import DEVICE, Sim, masses, tet_volumes_from_positions

G = 9.81
TAU = inertia.ModelBuilder.default_shape_tau


# --------------------------------------------------------------------------- the 5-tet decomposition
def test_five_tet_decomposition_fills_each_cell_exactly():
    dims = (3, 2, 4)
    cell = (0.1, 0.2, 0.15)  # non-cubic cells
    b = inertia.ModelBuilder(up_axis="z", gravity=-G)
    b.add_soft_grid(*dims, pos=(0.3, -0.2, 0.5), cell_x=cell[0], cell_y=cell[1], cell_z=cell[2])
    model = b.finalize(device=DEVICE)
    q = model.particle_q.numpy().astype(np.float64)
    tets = model.tet_indices.numpy()
    vol = model.tet_volumes.numpy().astype(np.float64)
    n_cells = int(np.prod(dims))
    cell_volume = float(np.prod(cell))
    assert len(tets) == 5 * n_cells

    # 1. volumes: positive, equal to the geometric ones, summing to the block (float32 storage: 1e-6)
    geo = tet_volumes_from_positions(q, tets)
    assert (vol > 0).all() and (geo > 0).all()  # positively oriented (J > 0 at rest)
    assert np.allclose(vol, geo, rtol=1e-5)
    per_cell = vol.reshape(n_cells, 5).sum(1)
    print(f"5-tet decomposition: block volume {vol.sum():.8f} m^3 vs {n_cells * cell_volume:.8f} m^3, "
          f"max cell error {np.abs(per_cell / cell_volume - 1).max():.1e}")
    assert abs(vol.sum() / (n_cells * cell_volume) - 1.0) < 1e-6
    assert np.allclose(per_cell, cell_volume, rtol=1e-6)

    # 2. no overlap and no gap: random points of each cell lie in exactly one of the cell's 5 tets
    rng = np.random.default_rng(0)
    for c in range(n_cells):
        t = tets[5 * c: 5 * c + 5]
        x = q[t]  # (5, 4, 3)
        lo, hi = x.reshape(-1, 3).min(0), x.reshape(-1, 3).max(0)
        assert np.allclose(hi - lo, cell)  # the 5 tets use the corners of one cell
        p = rng.uniform(lo, hi, (200, 3))
        dm = np.stack([x[:, 1] - x[:, 0], x[:, 2] - x[:, 0], x[:, 3] - x[:, 0]], axis=2)  # (5, 3, 3)
        bary = np.einsum("tij,tpj->tpi", np.linalg.inv(dm), p[None] - x[:, None, 0])  # (5, 200, 3)
        inside = (bary >= -1e-9).all(2) & (bary.sum(2) <= 1 + 1e-9)
        assert (inside.sum(0) == 1).all()

    # 3. conforming: every triangular face is shared by two tets, or lies on the block's boundary
    faces = {}
    for t in tets:
        for f in itertools.combinations(sorted(t.tolist()), 3):
            faces[f] = faces.get(f, 0) + 1
    assert max(faces.values()) == 2
    lo, hi = q.min(0), q.max(0)
    for f, count in faces.items():
        if count == 1:
            fx = q[list(f)]
            on_boundary = any(np.allclose(fx[:, a], lo[a]) or np.allclose(fx[:, a], hi[a]) for a in range(3))
            assert on_boundary, f"interior face {f} belongs to one tet only (non-conforming diagonals)"
    boundary_faces = sum(1 for c in faces.values() if c == 1)
    nx, ny, nz = dims
    assert boundary_faces == 2 * 2 * (nx * ny + ny * nz + nx * nz)  # 2 triangles per boundary square

    # 4. masses: density times volume, split among the vertices
    assert abs(masses(model).sum() / (1000.0 * n_cells * cell_volume) - 1.0) < 1e-6


# --------------------------------------------------------------------------- a soft cube on the ground
DIMS = 3
CELL = 0.1
DROP = 0.01  # the bottom particles start 1 cm above their contact height
DT = 1.0 / 2400.0
SETTLE_STEPS = 5400  # 2.25 s
AVERAGE_STEPS = 600  # then 0.25 s averaged (several periods of the cube's bounce on the ground springs)


@functools.lru_cache(maxsize=None)
def dropped_cube():
    b = inertia.ModelBuilder(up_axis="z", gravity=-G)
    r = 0.4 * CELL  # the grid's default particle radius
    b.add_soft_grid(DIMS, DIMS, DIMS, pos=(0.0, 0.0, r + DROP))  # defaults: density 1000, k_mu = k_lambda = 1e5
    b.add_ground_plane()
    model = b.finalize(device=DEVICE)
    sim = Sim(model)
    sim.step(SETTLE_STEPS, DT)
    samples = []

    def sample(s, k):
        if k % 10 == 0:
            samples.append((s.q(), s.qd()))

    sim.step(AVERAGE_STEPS, DT, sample)
    return model, sim, samples


def test_soft_cube_comes_to_rest_on_the_ground():
    model, sim, samples = dropped_cube()
    m = masses(model)
    r = float(model.particle_radius.numpy()[0])
    M = m.sum()
    q, v = sim.q(), sim.qd()
    assert np.isfinite(q).all() and np.isfinite(v).all()
    ke = 0.5 * (m * (v**2).sum(1)).sum()
    drop_energy = M * G * DROP
    speed = np.linalg.norm(v, axis=1).max()
    bottom = np.nonzero(np.isclose(model.particle_q.numpy()[:, 2], r + DROP))[0]
    assert len(bottom) == (DIMS + 1) ** 2
    pen = np.array([r - qs[bottom, 2] for qs, _ in samples])  # (samples, 16)
    share = m[bottom] / m[bottom].sum()
    mean_pen = float((pen.mean(0) * share).sum())  # mass-weighted
    expected = M * G * TAU ** 2 / m[bottom].sum()  # 1.47 mm = 3.7 % of r
    worst = (r - q[:, 2]).max() / r
    print(f"soft cube: KE {ke:.2e} J ({ke / drop_energy:.1e} of the drop energy), max speed {speed:.1e} m/s, "
          f"mass-weighted bottom penetration {mean_pen * 1e3:.3f} mm vs M g tau^2 / sum m {expected * 1e3:.3f} mm "
          f"({abs(mean_pen / expected - 1):.2%}), deepest particle {worst:.3f} r")
    # At rest: kinetic energy below 5e-4 of the energy of the 1 cm drop, speeds below 2 cm/s (impact: 0.44 m/s).
    assert ke < 5.0e-4 * drop_energy
    assert speed < 0.02
    # Above the ground: no particle penetrates more than 10 % of its radius (the softest corner/edge/
    # interior particles share the load unevenly around the 4 % mean), every centre above z = 0.
    assert worst < 0.10 and (q[:, 2] > 0).all()
    # Force balance: all 16 bottom particles in contact, mass-weighted mean depth M g tau^2 / sum m within 2 %
    # (time average over 0.25 s; the residual bounce is a few % of it in a single frame).
    assert (pen.mean(0) > 0).all()
    assert abs(mean_pen / expected - 1.0) < 0.02
    # It stayed upright where it fell: the top face is still on top, 0.3 m above the bottom face.
    height = q[:, 2].max() - q[:, 2].min()
    assert abs(height / (DIMS * CELL) - 1.0) < 0.02


def test_soft_cube_volume_is_preserved():
    model, sim, samples = dropped_cube()
    tets = model.tet_indices.numpy()
    V0 = float(np.sum(model.tet_volumes.numpy().astype(np.float64)))
    assert abs(V0 / (DIMS * CELL) ** 3 - 1.0) < 1e-6
    dV = np.array([tet_volumes_from_positions(qs, tets).sum() / V0 - 1.0 for qs, _ in samples])
    min_tet = min(tet_volumes_from_positions(qs, tets).min() for qs, _ in samples)
    # Linear elasticity: mean vertical stress rho g H / 2 on a free block, dV/V = -(1 - 2 nu) sigma / E,
    # with nu = lam / (2 (lam + mu)) = 0.25 and E = mu (3 lam + 2 mu) / (lam + mu) = 2.5e5 Pa: -0.29 %.
    mu, lam, rho, H = 1.0e5, 1.0e5, 1000.0, DIMS * CELL
    nu = lam / (2.0 * (lam + mu))
    E = mu * (3.0 * lam + 2.0 * mu) / (lam + mu)
    expected = -(1.0 - 2.0 * nu) * rho * G * H / (2.0 * E)
    print(f"soft cube volume: dV/V = {dV.mean():.4%} (range {dV.min():.4%}..{dV.max():.4%}), "
          f"linear elasticity {expected:.4%}, smallest tet {min_tet / (V0 / len(tets)):.3f} of the mean rest volume")
    assert (np.abs(dV) < 0.01).all()  # volume within 1 % of rest at every sample
    assert min_tet > 0.0  # no tet inverted
    # Compressed, by the amount linear elasticity predicts to within 25 % (time average; coarse 3x3x3 linear
    # tets and point supports at the nodes): a wrong Lame mapping or lost volume stiffness fails this.
    assert 0.75 * expected > dV.mean() > 1.25 * expected
