"""Random valid scenes for property-based tests (hypothesis) and the larger fuzz run in benchmarks/.

A scene is drawn as plain numbers (sizes, masses, stiffnesses in physical ranges a researcher would use),
then built with the public builder API. Every drawn scene is valid input: the builder accepts it. What
the engine owes such a scene: it stays finite, or it says so before the first non-finite value leaves
``step()`` (a warning or an error), never silently.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import strategies as st

import inertia

# Physical ranges (SI), drawn the way materials come: a foam is light and soft, a rubber dense and stiff,
# a metal part heavy. Stiffness and mass are not drawn independently (a 20 kg/m^3 "foam" as stiff as
# rubber is not a material). Damping up to strongly overdamped.
FABRIC_AREAL_DENSITY = st.floats(0.05, 0.5)  # kg/m^2: silk .. canvas
FABRIC_STRETCH = st.floats(20.0, 5.0e3)  # N/m (tri_ke, tri_ka)
SOLIDS = {"foam": ((20.0, 100.0), (1.0e4, 2.0e5)), "gel": ((900.0, 1100.0), (1.0e3, 1.0e5)),
          "rubber": ((900.0, 1300.0), (1.0e6, 1.0e7))}  # density [kg/m^3], Young's modulus [Pa]
SOLID_DENSITY = {"wood": (400.0, 800.0), "plastic": (900.0, 1400.0), "aluminium": (2600.0, 2800.0),
                 "steel": (7700.0, 8000.0)}
CELL = st.floats(0.02, 0.15)
TRI_KD = st.floats(0.0, 20.0)
EDGE_KE = st.floats(0.0, 5.0)
EDGE_KD = st.floats(0.0, 0.1)
MASS = st.floats(0.005, 1.0)
SPRING_KE = st.floats(10.0, 1.0e4)
SPRING_KD = st.floats(0.0, 5.0)
POISSON = st.floats(0.3, 0.48)
K_DAMP = st.floats(0.0, 20.0)
HALF = st.floats(0.01, 0.2)
DRIVE_KE = st.floats(0.0, 200.0)
DRIVE_KD = st.floats(0.0, 10.0)


@st.composite
def scenes(draw, max_parts: int = 3):
    """A dict describing a scene: a ground plane and 1..max_parts of cloth, soft block, spring net, bodies."""
    parts = draw(st.lists(st.sampled_from(["cloth", "soft", "springs", "bodies", "chain"]), min_size=1,
                          max_size=max_parts))
    spec = {"parts": []}
    for k, kind in enumerate(parts):
        x0 = 1.5 * k
        if kind == "cloth":
            cell = draw(CELL)
            spec["parts"].append(dict(kind=kind, x=x0, dim=draw(st.tuples(st.integers(1, 6), st.integers(1, 6))),
                                      cell=cell, mass=draw(FABRIC_AREAL_DENSITY) * cell * cell,
                                      tri_ke=draw(FABRIC_STRETCH), tri_kd=draw(TRI_KD),
                                      edge_ke=draw(EDGE_KE), edge_kd=draw(EDGE_KD), fix=draw(st.booleans()),
                                      z=draw(st.floats(0.1, 1.0))))
        elif kind == "soft":
            (rho_lo, rho_hi), (e_lo, e_hi) = SOLIDS[draw(st.sampled_from(sorted(SOLIDS)))]
            k_mu, k_lambda = inertia.lame_from_young(draw(st.floats(e_lo, e_hi)), draw(POISSON))
            spec["parts"].append(dict(kind=kind, x=x0, dim=draw(st.tuples(st.integers(1, 3), st.integers(1, 3),
                                                                          st.integers(1, 3))),
                                      cell=draw(CELL), density=draw(st.floats(rho_lo, rho_hi)), k_mu=k_mu,
                                      k_lambda=k_lambda, k_damp=draw(K_DAMP), z=draw(st.floats(0.05, 0.5))))
        elif kind == "springs":
            n = draw(st.integers(2, 6))
            spec["parts"].append(dict(kind=kind, x=x0, n=n, mass=draw(MASS), ke=draw(SPRING_KE), kd=draw(SPRING_KD),
                                      parallel=draw(st.integers(1, 3)), z=draw(st.floats(0.1, 1.0))))
        elif kind == "bodies":
            lo, hi = SOLID_DENSITY[draw(st.sampled_from(sorted(SOLID_DENSITY)))]
            half = draw(HALF)
            spec["parts"].append(dict(kind=kind, x=x0, count=draw(st.integers(1, 4)),
                                      mass=draw(st.floats(lo, hi)) * (2 * half) ** 3, half=half,
                                      z=draw(st.floats(0.0, 0.5)),
                                      shape=draw(st.sampled_from(["box", "sphere", "capsule"]))))
        else:
            lo, hi = SOLID_DENSITY[draw(st.sampled_from(sorted(SOLID_DENSITY)))]
            half = draw(HALF)  # links of 2 half x 0.4 half x 0.4 half
            spec["parts"].append(dict(kind=kind, x=x0, links=draw(st.integers(1, 6)),
                                      mass=draw(st.floats(lo, hi)) * 2 * half * (0.4 * half) ** 2, half=half,
                                      drive_ke=draw(DRIVE_KE), drive_kd=draw(DRIVE_KD)))
    return spec


def build(spec, builder=None) -> inertia.ModelBuilder:
    b = builder or inertia.ModelBuilder()
    b.add_ground_plane()
    for p in spec["parts"]:
        x = p["x"]
        if p["kind"] == "cloth":
            b.add_cloth_grid(*p["dim"], pos=(x, 0.0, p["z"]), cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
                             tri_ke=p["tri_ke"], tri_ka=p["tri_ke"], tri_kd=p["tri_kd"], edge_ke=p["edge_ke"],
                             edge_kd=p["edge_kd"], fix_left=p["fix"])
        elif p["kind"] == "soft":
            b.add_soft_grid(*p["dim"], pos=(x, 0.0, p["z"]), cell_x=p["cell"], cell_y=p["cell"], cell_z=p["cell"],
                            density=p["density"], k_mu=p["k_mu"], k_lambda=p["k_lambda"], k_damp=p["k_damp"])
        elif p["kind"] == "springs":
            ids = [b.add_particle((x + 0.1 * i, 0.0, p["z"] + 0.05 * (i % 2)), mass=p["mass"], radius=0.02)
                   for i in range(p["n"])]
            for i in range(p["n"] - 1):
                for _ in range(p["parallel"]):  # parallel springs: stiffness adds up
                    b.add_spring(ids[i], ids[i + 1], ke=p["ke"], kd=p["kd"])
        elif p["kind"] == "bodies":
            h = p["half"]
            for i in range(p["count"]):
                body = b.add_body(xform=((x, 0.0, h + p["z"] + 2.5 * h * i), (0.0, 0.0, 0.0, 1.0)),
                                  mass=p["mass"], inertia=_inertia(p["shape"], p["mass"], h))
                if p["shape"] == "box":
                    b.add_shape_box(body, hx=h, hy=h, hz=h, density=0.0)
                elif p["shape"] == "sphere":
                    b.add_shape_sphere(body, radius=h, density=0.0)
                else:
                    b.add_shape_capsule(body, radius=0.5 * h, half_height=h, density=0.0)
        else:
            h, prev = p["half"], -1
            for i in range(p["links"]):
                link = b.add_body(xform=((x + 2 * h * i + h, 0.0, 1.5), (0.0, 0.0, 0.0, 1.0)), mass=p["mass"],
                                  inertia=_inertia("box", p["mass"], h))
                b.add_shape_box(link, hx=h, hy=0.2 * h, hz=0.2 * h, density=0.0)
                b.add_joint_revolute(prev, link, parent_xform=(((x, 0.0, 1.5) if prev < 0 else (h, 0.0, 0.0)),
                                                               (0, 0, 0, 1)),
                                     child_xform=((-h, 0.0, 0.0), (0, 0, 0, 1)), axis=(0.0, 1.0, 0.0),
                                     target_ke=p["drive_ke"], target_kd=p["drive_kd"])
                prev = link
    return b


def _inertia(shape, m, h):
    if shape == "sphere":
        i = 0.4 * m * h * h
        return (i, i, i)
    return tuple(m * (h * h + h * h) / 3.0 for _ in range(3))


def run(model, solver_name: str, steps: int, dt: float):
    """Step a scene; returns (first non-finite step or None, the warnings raised before it, as strings)."""
    solver = inertia.XPBDSolver(model) if solver_name == "xpbd" else inertia.SemiImplicitSolver(model)
    s0, s1, control, contacts = model.state(), model.state(), model.control(), model.contacts()
    caught = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(steps):
            model.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, dt)
            s0, s1 = s1, s0
            if k % 20 == 19 or k == steps - 1:
                finite = all(np.isfinite(a.numpy()).all() for a in (s0.particle_q, s0.particle_qd, s0.body_q,
                                                                   s0.body_qd))
                if not finite:
                    caught = [str(x.message) for x in w]
                    return k + 1, caught
        caught = [str(x.message) for x in w]
    return None, caught
