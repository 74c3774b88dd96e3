"""The largest stable time step of explicit (symplectic Euler) force integration, per element, from the model.

Each force element is treated as a damped oscillator of its own: x'' = -w^2 x - c x' with w^2 its
stiffness times the inverse mass it drives and c its damping rate. Symplectic Euler keeps such an
oscillator bounded iff (Jury's criterion on its step matrix)

    w^2 dt^2 + 2 c dt <= 4,   i.e.   dt <= dt_max = (sqrt(c^2 + 4 w^2) - c) / w^2   (2 / c when w = 0)

(``tests/test_stability.py`` checks it against a spring pair's blow-up). For an element of several
particles the estimate takes the stiffest direction of the element's energy at rest: its stiffness
k times the squared gradient of its strain with respect to one vertex (from the inverse rest matrix), over
that vertex's mass. Elements that share particles add up, so a scene's real limit is lower by up to the
number of elements on the busiest particle; the guard uses the sum per particle for that reason.

:func:`stable_time_steps` returns, per element kind, the largest stable dt and the element that sets it;
the SemiImplicitSolver warns once when a step exceeds the smallest (``SemiImplicitSolver.stable_dt``).
Host-side NumPy on the model's arrays (one pass, at solver construction: never inside a step).
"""

from __future__ import annotations

import numpy as np

MODE = "gershgorin"


def oscillator_dt(w2, c) -> np.ndarray:
    """Largest stable symplectic-Euler step of x'' = -w2 x - c x' (elementwise; inf where w2 = c = 0)."""
    w2, c = np.asarray(w2, dtype=np.float64), np.asarray(c, dtype=np.float64)
    out = np.full(np.broadcast(w2, c).shape, np.inf)
    stiff = w2 > 0
    damp = ~stiff & (c > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(stiff, (np.sqrt(c * c + 4.0 * w2) - c) / np.where(stiff, w2, 1.0), out)
        out = np.where(damp, 2.0 / np.where(damp, c, 1.0), out)
    return out


def stable_time_steps(model) -> dict:
    """``{kind: (dt_max [s], index of the element that sets it)}`` for each kind the model has.

    Kinds: ``springs``, ``triangles``, ``bending``, ``tetrahedra``, ``particle contact`` (penalty against
    shapes, at the stiffest shape), ``joint drives``. Per particle, the stiffness of every element on it
    is summed (the particle feels them together), and the element with the largest share on the worst
    particle is named.
    """
    out = {}
    n = model.particle_count
    if n == 0:
        return out
    w = model.particle_inv_mass.numpy().astype(np.float64)
    k_sum, c_sum = np.zeros(n), np.zeros(n)  # per particle: summed stiffness [N/m] and damping [N s/m]
    per_element = {}
    owners = {}  # kind -> (per-particle stiffness of this kind, the element of largest stiffness on each particle)

    def add(kind, idx, k, c, g):
        """Elements ``idx`` (m, v) of stiffness ``k`` and damping ``c`` (m,) with strain gradients ``g`` (m, v).

        A row of the mass-weighted stiffness matrix W K at particle p sums, over its elements, k |g_p| times
        the element's sum of |g_v| (Gershgorin: the largest eigenvalue is below the largest row sum), so
        the estimate errs on the stable side when elements share particles.
        """
        row = np.abs(g) * np.abs(g).sum(axis=1, keepdims=True)  # (m, v): |g_p| sum_v |g_v|
        if MODE == "element":
            share = np.bincount(idx.reshape(-1), minlength=n)[idx].max(axis=1)  # elements on the busiest vertex
            w2_e = k * share * (g * g * w[idx]).sum(axis=1)
            c_e = c * share * (g * g * w[idx]).sum(axis=1)
            dt_e = oscillator_dt(w2_e, c_e)
            j = int(np.argmin(dt_e))
            per_element[kind] = (float(dt_e[j]), j)
        k_p = np.zeros(n)
        np.add.at(k_p, idx.reshape(-1), (k[:, None] * row).reshape(-1))
        c_p = np.zeros(n)
        np.add.at(c_p, idx.reshape(-1), (c[:, None] * row).reshape(-1))
        k_sum[:] += k_p
        c_sum[:] += c_p
        best = np.full(n, -1)
        top = np.zeros(n)
        for v in range(idx.shape[1]):
            kv = k * row[:, v]
            better = kv > top[idx[:, v]]
            top[idx[better, v]] = kv[better]
            best[idx[better, v]] = np.flatnonzero(better)
        owners[kind] = (k_p, c_p, best)

    if model.spring_count:
        idx = model.spring_indices.numpy().reshape(-1, 2)
        ke, kd = model.spring_stiffness.numpy().astype(np.float64), model.spring_damping.numpy().astype(np.float64)
        add("springs", idx, ke, kd, np.ones((len(ke), 2)))
    for kind, count, poses, size, mats, kcols, dcol, k in (
            ("triangles", model.tri_count, "tri_poses", "tri_areas", "tri_materials", (0, 1), 2, 3),
            ("tetrahedra", model.tet_count, "tet_poses", "tet_volumes", "tet_materials", (0, 1), 2, 4)):
        if not count:
            continue
        idx = getattr(model, f"{kind[:3]}_indices").numpy().reshape(-1, k)
        dm = getattr(model, poses).numpy().astype(np.float64)  # inverse rest matrices (count, d, d)
        vol = getattr(model, size).numpy().astype(np.float64)
        mat = getattr(model, mats).numpy().astype(np.float64)
        # strain gradient of each vertex: the rows of Dm^-1 (vertices 1..), minus their sum (vertex 0)
        g = np.concatenate([-dm.sum(axis=1, keepdims=True), dm], axis=1)  # (count, k, d)
        g = np.linalg.norm(g, axis=2)
        modulus = mat[:, kcols[0]] + mat[:, kcols[1]]  # mu + lambda: the stiffest (area/volume) mode
        add(kind, idx, modulus * vol, mat[:, dcol] * vol, g)
    if model.edge_count:
        idx = model.edge_indices.numpy().reshape(-1, 4)
        x = model.particle_q.numpy().astype(np.float64)
        props = model.edge_bending_properties.numpy().astype(np.float64)
        e = x[idx[:, 3]] - x[idx[:, 2]]
        le = np.linalg.norm(e, axis=1)
        grads = []
        for v in (0, 1):  # the wing vertices: |d theta / d x| = |e| / (2 * area of its triangle)
            twice_area = np.linalg.norm(np.cross(x[idx[:, v]] - x[idx[:, 2]], e), axis=1)
            grads.append(le / np.maximum(twice_area, 1e-12))
        g = np.stack(grads + [np.zeros_like(le), np.zeros_like(le)], 1)
        g[:, 2] = g[:, 3] = 0.5 * (g[:, 0] + g[:, 1])  # the hinge vertices balance the wings
        add("bending", idx, props[:, 0], props[:, 1], g)
    if model.shape_count and model.particle_count:
        # penalty contact with the stiffest shape a particle may meet (a particle rests on one at a time)
        ke = float(model.shape_material_ke.numpy().max())
        kd = float(model.shape_material_kd.numpy().max())
        dt = oscillator_dt(ke * w, kd * w)
        if np.isfinite(dt).any():
            p = int(np.argmin(dt))
            out["particle contact"] = (float(dt[p]), p)
    if MODE == "element":
        out.update(per_element)
        return out
    if owners:
        dt = oscillator_dt(k_sum * w, c_sum * w)
        for kind, (k_p, c_p, best) in owners.items():
            # the particles where this kind carries the most stiffness: its share of the summed limit
            share = np.where(k_sum > 0, k_p / np.where(k_sum > 0, k_sum, 1.0), 0.0)
            mine = share >= 0.5
            if not mine.any():
                mine = k_p > 0
            if not mine.any():
                continue
            cand = np.where(mine, dt, np.inf)
            p = int(np.argmin(cand))
            if np.isfinite(cand[p]):
                out[kind] = (float(cand[p]), int(best[p]))
    return out
