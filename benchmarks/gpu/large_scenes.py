"""Million-particle scenes built in seconds: run.py's cloth and granular block, with the builder's lists
filled by NumPy instead of one ``add_*`` call per element.

Why: ``ModelBuilder.add_cloth_grid`` computes each triangle's rest pose and each bending edge's rest angle
with small NumPy calls (about 0.5 ms per element on the development CPU), so a 1,000 x 1,000-cell cloth (1M
particles, 2M triangles, 3M bending edges) would take over half an hour to build, and ``add_particle_grid``
takes ~30 s for 1M particles. Here the same lists are computed for all elements at once, with the same
formulas and the same order (``tests/test_bench_gpu.py`` checks, on small grids, that every array of the
finalized model equals the one ``add_cloth_grid`` / ``add_particle_grid`` give).
"""

from __future__ import annotations

import numpy as np

from bench_scenes import SCENES, Scene


def _grid_frame(pos):
    return np.asarray(pos, dtype=np.float64), np.eye(3)  # the scenes use no rotation


def _put(b, name: str, rows: np.ndarray) -> None:
    """Append ``rows`` to the builder list ``name``. An empty list is replaced by the array itself: finalize()
    reads it with np.asarray, and a million-row list of tuples costs seconds to make and to read back."""
    have = getattr(b, name)
    if len(have) == 0:
        setattr(b, name, rows)
    else:
        setattr(b, name, np.concatenate([np.asarray(have, dtype=rows.dtype).reshape((-1,) + rows.shape[1:]), rows]))


def _append_particles(b, x: np.ndarray, v, mass: np.ndarray, radius: float) -> None:
    """What ``add_particle`` appends, for rows of ``x`` [m] at once (velocity ``v`` [m/s] shared)."""
    n = len(x)
    _put(b, "particle_q", np.asarray(x, dtype=np.float64))
    _put(b, "particle_qd", np.tile(np.asarray(v, dtype=np.float64), (n, 1)))
    _put(b, "particle_mass", np.asarray(mass, dtype=np.float64))
    _put(b, "particle_radius", np.full(n, float(radius)))
    _put(b, "particle_flags", np.ones(n, dtype=np.int64))  # PARTICLE_FLAG_ACTIVE
    _put(b, "particle_world", np.full(n, b._current_world, dtype=np.int64))
    b._use_world(b._current_world)


def cloth_triangles(dim_x: int, dim_y: int, start: int) -> np.ndarray:
    """The triangles of ``add_cloth_grid`` in its order: per cell (row-major), two, the diagonal alternating."""
    y, x = np.meshgrid(np.arange(dim_y), np.arange(dim_x), indexing="ij")
    x, y = x.ravel(), y.ravel()

    def index(xx, yy):
        return start + yy * (dim_x + 1) + xx

    v00, v10, v01, v11 = index(x, y), index(x + 1, y), index(x, y + 1), index(x + 1, y + 1)
    even = ((x + y) % 2 == 0)[:, None]
    first = np.where(even, np.stack([v00, v10, v11], 1), np.stack([v00, v10, v01], 1))
    second = np.where(even, np.stack([v00, v11, v01], 1), np.stack([v10, v11, v01], 1))
    return np.stack([first, second], 1).reshape(-1, 3)


def triangle_rest_poses(x: np.ndarray, tris: np.ndarray):
    """``rest_geometry.triangle_rest_pose`` for every triangle: inverse rest matrices (T, 2, 2) and areas."""
    p0, p1, p2 = x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]]
    e1, e2 = p1 - p0, p2 - p0
    n = np.cross(e1, e2)
    nn = np.linalg.norm(n, axis=1)
    area = 0.5 * nn
    t = e1 / np.linalg.norm(e1, axis=1)[:, None]
    bb = np.cross(n / nn[:, None], t)
    dm = np.empty((len(tris), 2, 2))
    dm[:, 0, 0], dm[:, 0, 1] = np.einsum("ij,ij->i", e1, t), np.einsum("ij,ij->i", e2, t)
    dm[:, 1, 0], dm[:, 1, 1] = np.einsum("ij,ij->i", e1, bb), np.einsum("ij,ij->i", e2, bb)
    if np.any(2.0 * area <= 1e-6 * np.max([np.linalg.norm(e1, axis=1), np.linalg.norm(e2, axis=1),
                                          np.linalg.norm(p2 - p1, axis=1)], axis=0) ** 2):
        raise ValueError("degenerate triangle in the grid")
    return np.linalg.inv(dm), area


def bending_edges(tris: np.ndarray) -> np.ndarray:
    """``add_bending_edges``' elements (i, j, k, l) in its order: directed edges (k, l) of every triangle in
    insertion order, each interior edge once (where k < l and the reverse edge exists); i opposite (k, l), j
    opposite (l, k)."""
    k = tris.reshape(-1)
    l = np.roll(tris, -1, axis=1).reshape(-1)
    opp = np.roll(tris, -2, axis=1).reshape(-1)
    base = int(max(k.max(), l.max())) + 1
    key = k.astype(np.int64) * base + l
    rev = l.astype(np.int64) * base + k
    order = np.argsort(key)
    pos = np.searchsorted(key[order], rev)
    pos = np.minimum(pos, len(key) - 1)
    found = key[order][pos] == rev
    keep = found & (k < l)  # insertion order = the directed edge's own index (each appears once)
    j = opp[order][pos]
    return np.stack([opp[keep], j[keep], k[keep], l[keep]], 1)


def dihedral_angles(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``rest_geometry.dihedral_angle`` of every bending element."""
    x1, x2, x3, x4 = (x[edges[:, c]] for c in range(4))
    n1 = np.cross(x3 - x1, x4 - x1)
    n2 = np.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    n1 /= np.linalg.norm(n1, axis=1)[:, None]
    n2 /= np.linalg.norm(n2, axis=1)[:, None]
    e /= np.linalg.norm(e, axis=1)[:, None]
    return np.arctan2(np.einsum("ij,ij->i", np.cross(n1, n2), e), np.einsum("ij,ij->i", n1, n2))


def add_cloth_grid_fast(b, dim_x, dim_y, pos, cell, mass, fix_left, tri_ke, tri_ka, tri_kd, edge_ke, edge_kd,
                        radius) -> None:
    """``b.add_cloth_grid(...)`` with the arguments run.py's cloth passes (no rotation or velocity), in bulk."""
    p0, r = _grid_frame(pos)
    start = len(b.particle_q)
    y, x = np.meshgrid(np.arange(dim_y + 1), np.arange(dim_x + 1), indexing="ij")
    local = np.stack([x.ravel() * cell, y.ravel() * cell, np.zeros(x.size)], 1)
    xs = p0 + local @ r.T
    masses = np.where(fix_left & (x.ravel() == 0), 0.0, float(mass))
    _append_particles(b, xs, (0.0, 0.0, 0.0), masses, radius)
    tris = cloth_triangles(dim_x, dim_y, start)
    allx = np.asarray(b.particle_q, dtype=np.float64)
    inv_dm, area = triangle_rest_poses(allx, tris)
    _put(b, "tri_indices", tris)
    _put(b, "tri_poses", inv_dm)
    _put(b, "tri_areas", area)
    _put(b, "tri_materials", np.tile([float(tri_ke), float(tri_ka), float(tri_kd)], (len(tris), 1)))
    edges = bending_edges(tris)
    _put(b, "edge_indices", edges)
    _put(b, "edge_rest_angle", dihedral_angles(allx, edges))
    _put(b, "edge_bending_properties", np.tile([float(edge_ke), float(edge_kd)], (len(edges), 1)))


def add_particle_grid_fast(b, dim_x, dim_y, dim_z, pos, vel, cell, mass, jitter, radius, seed: int = 42) -> None:
    """``b.add_particle_grid(...)`` as run.py's granular block calls it (no rotation, no radius spread): the
    same random jitter, drawn in one call (NumPy's generator fills it in the same order)."""
    p0, r = _grid_frame(pos)
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(np.arange(dim_z), np.arange(dim_y), np.arange(dim_x), indexing="ij")
    local = np.stack([x.ravel() * cell, y.ravel() * cell, z.ravel() * cell], 1)
    local = local + rng.uniform(-jitter, jitter, (local.shape[0], 3))
    _append_particles(b, p0 + local @ r.T, vel, np.full(len(local), float(mass)), radius)


def build_cloth(size, device):
    """run.py's cloth scene of ``size`` cells, built in bulk."""
    p = SCENES["cloth"].params(size)
    b = Scene._inertia_builder()
    add_cloth_grid_fast(b, p["dim_x"], p["dim_y"], p["pos"], p["cell"], p["mass"], p["fix_left"], p["tri_ke"],
                        p["tri_ka"], p["tri_kd"], p["edge_ke"], p["edge_kd"], p["radius"])
    return b.finalize(device=device)


def build_granular(size, device):
    """run.py's granular block of ``size`` particles, built in bulk."""
    p = SCENES["granular"].params(size)
    b = Scene._inertia_builder()
    add_particle_grid_fast(b, p["dim_x"], p["dim_y"], p["dim_z"], p["pos"], p["vel"], p["cell"], p["mass"],
                           p["jitter"], p["radius"])
    return b.finalize(device=device)


BUILDERS = {"cloth": build_cloth, "granular": build_granular}
