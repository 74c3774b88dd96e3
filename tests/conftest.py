"""Shared helpers for the physics validation tests.

Everything runs on the CPU (``DEVICE``); reference values are computed in
float64 NumPy from closed forms, never copied from a previous run.
"""

from __future__ import annotations

import numpy as np
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # no banner, no module-load lines
wp.init()

import inertia  # noqa: E402  (after wp.init so Warp stays quiet)

DEVICE = "cpu"


class Sim:
    """A model with its two states, control, contacts and a SemiImplicitSolver.

    ``step(n, dt)`` runs ``collide`` + ``step`` n times; ``callback(sim, k)``
    (optional) is called after every step k = 1..n with ``sim.state`` the new state.
    """

    def __init__(self, model, contacts=None):
        self.model = model
        self.state = model.state()
        self.next = model.state()
        self.control = model.control()
        self.contacts = model.contacts() if contacts is None else contacts
        self.solver = inertia.SemiImplicitSolver(model)
        self.steps = 0

    def step(self, n: int, dt: float, callback=None):
        for k in range(n):
            self.model.collide(self.state, self.contacts)
            self.solver.step(self.state, self.next, self.control, self.contacts, dt)
            self.state, self.next = self.next, self.state
            self.steps += 1
            if callback is not None:
                callback(self, k + 1)
        return self

    def q(self) -> np.ndarray:
        """Positions as a float64 (n, 3) array."""
        return self.state.particle_q.numpy().astype(np.float64)

    def qd(self) -> np.ndarray:
        """Velocities as a float64 (n, 3) array."""
        return self.state.particle_qd.numpy().astype(np.float64)


def simulate(model, steps: int, dt: float, contacts=None, callback=None) -> Sim:
    """Run ``steps`` steps of ``dt`` seconds from the model's initial state and return the :class:`Sim`."""
    return Sim(model, contacts).step(steps, dt, callback)


def quat_matrix(q) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w), float64: the tests' own reference, not the engine's."""
    x, y, z, w = (float(v) for v in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def box_mesh(hx, hy, hz):
    """A closed triangle mesh of the box of half extents (hx, hy, hz) about the origin: (vertices, faces)."""
    v = np.array([[sx * hx, sy * hy, sz * hz] for sz in (-1, 1) for sy in (-1, 1) for sx in (-1, 1)])
    # outward (counter-clockwise) faces; vertex index = 4*(z>0) + 2*(y>0) + (x>0)
    quads = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    f = [(a, b, c) for a, b, c, d in quads] + [(a, c, d) for a, b, c, d in quads]
    return v, np.array(f)


def masses(model) -> np.ndarray:
    return model.particle_mass.numpy().astype(np.float64)


def tet_volumes_from_positions(q: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volumes (float64) of tets (n, 4) at positions q (m, 3)."""
    x0, x1, x2, x3 = (q[tets[:, i]] for i in range(4))
    return np.einsum("ij,ij->i", x1 - x0, np.cross(x2 - x0, x3 - x0)) / 6.0


# ---------------------------------------------------------------- subprocess runs beside the session
import background  # noqa: E402


def pytest_collection_modifyitems(session, config, items):
    """Modules that declared background jobs (``background.py``) run last, so that their jobs run beside
    every other test on the core the session leaves idle; the order within a module is kept."""
    with_jobs = {j.module for j in background.JOBS.values()}
    items.sort(key=lambda item: _module_name(item) in with_jobs)  # stable: only those modules move


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return  # nothing will wait for them
    background.start([(_module_name(item), item.name, getattr(item, "fixturenames", ())) for item in session.items])


def _module_name(item) -> str | None:
    module = getattr(item, "module", None)
    return module.__name__ if module is not None else None


def pytest_sessionfinish(session, exitstatus):
    background.stop_all()
