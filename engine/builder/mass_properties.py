"""Mass, centre of mass and inertia of solid shapes, in float64 on the host.

Each function returns ``(mass [kg], com [m] (3,), inertia [kg m^2] (3, 3) about
the com)`` in the shape's own frame for a uniform ``density`` [kg/m^3].
:func:`combine` moves several of them into one body frame (parallel-axis
theorem). Used by ``ModelBuilder.finalize`` to give bodies the mass of the
shapes attached to them.
"""

from __future__ import annotations

import math

import numpy as np


def sphere(density: float, radius: float):
    m = density * 4.0 / 3.0 * math.pi * radius**3
    return m, np.zeros(3), np.eye(3) * (0.4 * m * radius**2)


def box(density: float, hx: float, hy: float, hz: float):
    m = density * 8.0 * hx * hy * hz
    d = np.array([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy])
    return m, np.zeros(3), np.diag(m / 3.0 * d)


def cylinder(density: float, radius: float, half_height: float):
    """Solid cylinder with its axis along local Z."""
    m = density * math.pi * radius**2 * 2.0 * half_height
    ixx = m * (3.0 * radius**2 + (2.0 * half_height) ** 2) / 12.0
    return m, np.zeros(3), np.diag([ixx, ixx, 0.5 * m * radius**2])


def capsule(density: float, radius: float, half_height: float):
    """A cylinder of half length ``half_height`` along local Z capped by two hemispheres of ``radius``."""
    mc = density * math.pi * radius**2 * 2.0 * half_height
    ms = density * 4.0 / 3.0 * math.pi * radius**3  # both caps together
    izz = 0.5 * mc * radius**2 + 0.4 * ms * radius**2
    # each cap: 83/320 m r^2 about its own centroid, which sits 3r/8 beyond the cylinder's end
    cap = 0.5 * ms
    icap = 83.0 / 320.0 * cap * radius**2 + cap * (half_height + 3.0 * radius / 8.0) ** 2
    ixx = mc * (3.0 * radius**2 + (2.0 * half_height) ** 2) / 12.0 + 2.0 * icap
    return mc + ms, np.zeros(3), np.diag([ixx, ixx, izz])


def mesh(density: float, vertices, indices):
    """A closed triangle mesh (counter-clockwise seen from outside), by signed tetrahedra from the origin."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(indices, dtype=np.int64).reshape(-1, 3)
    # closed and consistently wound: every directed edge appears once, and its reverse once (vertices at the
    # same position count as one: meshes split at seams for normals or texture coordinates are still closed)
    _, same = np.unique(np.round(v, 9), axis=0, return_inverse=True)
    g = same.reshape(-1)[f]
    directed = np.concatenate([g[:, [0, 1]], g[:, [1, 2]], g[:, [2, 0]]])
    edges, counts = np.unique(directed, axis=0, return_counts=True)
    reverse = {tuple(e) for e in edges}
    unpaired = sum(1 for e in edges if (e[1], e[0]) not in reverse) + int(np.count_nonzero(counts > 1))
    if unpaired:
        raise ValueError(f"mesh is not closed or not consistently wound ({unpaired} edges without their opposite)")
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    vol = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0
    volume = vol.sum()
    if not volume > 1e-12:
        raise ValueError(f"mesh encloses volume {volume:.3g} m^3 (not closed, or its triangles face inwards)")
    com = ((a + b + c) * vol[:, None]).sum(axis=0) / (4.0 * volume)
    s = a + b + c
    # second moment of each tet (0, a, b, c) about the origin: V/20 (aa' + bb' + cc' + ss')
    outer = lambda x: np.einsum("ni,nj->nij", x, x)  # noqa: E731
    cov = ((outer(a) + outer(b) + outer(c) + outer(s)) * (vol / 20.0)[:, None, None]).sum(axis=0)
    m = density * volume
    cov_com = density * cov - m * np.outer(com, com)
    return m, com, np.trace(cov_com) * np.eye(3) - cov_com


def combine(parts):
    """Total ``(mass, com, inertia about com)`` of ``parts``: (mass, com, inertia, R, t) in a common frame.

    ``R`` (3, 3) and ``t`` (3,) place each part's frame in the common frame.
    """
    mass = sum(p[0] for p in parts)
    if mass <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    coms = [p[3] @ p[1] + p[4] for p in parts]
    com = sum(p[0] * c for p, c in zip(parts, coms)) / mass
    inertia = np.zeros((3, 3))
    for (m, _, i_local, r, _), c in zip(parts, coms):
        d = c - com
        inertia += r @ i_local @ r.T + m * (d @ d * np.eye(3) - np.outer(d, d))
    return mass, com, inertia
