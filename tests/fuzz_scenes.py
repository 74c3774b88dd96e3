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

# physical ranges (SI): light cloth to heavy sheets, soft foam to rubber, 1 g to 10 kg links
MASS = st.floats(0.005, 1.0)
CELL = st.floats(0.02, 0.15)
TRI_KE = st.floats(10.0, 5.0e3)
TRI_KD = st.floats(0.0, 20.0)
EDGE_KE = st.floats(0.0, 5.0)
EDGE_KD = st.floats(0.0, 0.1)
SPRING_KE = st.floats(10.0, 1.0e4)
SPRING_KD = st.floats(0.0, 5.0)
DENSITY = st.floats(20.0, 2000.0)
K_MU = st.floats(1.0e3, 1.0e6)
K_LAMBDA = st.floats(1.0e3, 1.0e6)
K_DAMP = st.floats(0.0, 20.0)
BODY_MASS = st.floats(0.001, 10.0)
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
            spec["parts"].append(dict(kind=kind, x=x0, dim=draw(st.tuples(st.integers(1, 6), st.integers(1, 6))),
                                      cell=draw(CELL), mass=draw(MASS), tri_ke=draw(TRI_KE), tri_kd=draw(TRI_KD),
                                      edge_ke=draw(EDGE_KE), edge_kd=draw(EDGE_KD), fix=draw(st.booleans()),
                                      z=draw(st.floats(0.1, 1.0))))
        elif kind == "soft":
            spec["parts"].append(dict(kind=kind, x=x0, dim=draw(st.tuples(st.integers(1, 3), st.integers(1, 3),
                                                                          st.integers(1, 3))),
                                      cell=draw(CELL), density=draw(DENSITY), k_mu=draw(K_MU),
                                      k_lambda=draw(K_LAMBDA), k_damp=draw(K_DAMP), z=draw(st.floats(0.05, 0.5))))
        elif kind == "springs":
            n = draw(st.integers(2, 6))
            spec["parts"].append(dict(kind=kind, x=x0, n=n, mass=draw(MASS), ke=draw(SPRING_KE), kd=draw(SPRING_KD),
                                      parallel=draw(st.integers(1, 3)), z=draw(st.floats(0.1, 1.0))))
        elif kind == "bodies":
            spec["parts"].append(dict(kind=kind, x=x0, count=draw(st.integers(1, 4)), mass=draw(BODY_MASS),
                                      half=draw(HALF), z=draw(st.floats(0.0, 0.5)),
                                      shape=draw(st.sampled_from(["box", "sphere", "capsule"]))))
        else:
            spec["parts"].append(dict(kind=kind, x=x0, links=draw(st.integers(1, 6)), mass=draw(BODY_MASS),
                                      half=draw(HALF), drive_ke=draw(DRIVE_KE), drive_kd=draw(DRIVE_KD)))
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
