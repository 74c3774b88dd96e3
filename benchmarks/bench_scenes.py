"""Benchmark scenes: one parameter set per scene, built by inertia (here) and by Newton (``bench_newton``).

Each scene keeps its materials, sizes and timestep in a plain dict (``scene.params(size)``) so that
both engines are built from the same numbers. Sizes are grid dimensions:

* ``cloth``    (N, M) cells: a (N+1) x (M+1)-particle sheet at 4 m height, pinned on its left
  edge, hanging under gravity over a ground plane (membrane triangles + dihedral bending).
* ``granular`` (X, Y, Z) particles: a block of touching particles (spacing = diameter, small
  jitter) dropped 2 cm onto the ground with particle-particle contact on.
* ``soft``     (X, Y, Z) cells: a stable neo-Hookean tet block (5 tets per cell) dropped onto the
  ground at 1 m/s.

All scenes share the ground and particle-particle contact material. The time step belongs to the
solver (``SOLVERS[name].settings(scene)``): the SemiImplicitSolver runs every scene at dt = 1/2400 s
(40 substeps of a 60 Hz frame), the step the grid defaults are stable at; the XPBDSolver at
dt = 1/600 s (10 substeps) with the iterations and relaxation given in ``XPBD_SETTINGS``.
"""

from __future__ import annotations

import math

import warp as wp

FRAME_DT = 1.0 / 60.0
SUBSTEPS = 40
DT = FRAME_DT / SUBSTEPS

# contact material shared by every scene (inertia's builder defaults, written out for Newton)
GROUND = {"ke": 1.0e4, "kd": 10.0, "mu": 0.5}
PARTICLE_CONTACT = {"ke": 1.0e4, "kd": 10.0, "mu": 0.5}


def parse_size(text: str, ndim: int) -> tuple:
    """'64x64' -> (64, 64); a single number is repeated ndim times ('32' -> (32, 32, 32))."""
    parts = [p for p in str(text).lower().replace("*", "x").split("x") if p]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"size {text!r}: expected integers like 64x64") from None
    if len(dims) == 1:
        dims = dims * ndim
    if len(dims) != ndim or any(d < 1 for d in dims):
        raise ValueError(f"size {text!r}: expected {ndim} positive integers")
    return dims


class Scene:
    """A benchmark scene: its default/tiny sizes, shared parameters and the inertia builder."""

    name = ""
    ndim = 3
    default_size: tuple = ()
    tiny_size: tuple = ()
    description = ""

    def params(self, size) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def expected_counts(self, size) -> dict:  # pragma: no cover - interface
        """Element counts the inertia model must have (checked after building)."""
        raise NotImplementedError

    def build_inertia(self, size, device):  # pragma: no cover - interface
        raise NotImplementedError

    @staticmethod
    def _inertia_builder():
        import inertia

        b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
        b.particle_ke = PARTICLE_CONTACT["ke"]
        b.particle_kd = PARTICLE_CONTACT["kd"]
        b.particle_mu = PARTICLE_CONTACT["mu"]
        b.particle_collide = True
        b.add_ground_plane(ke=GROUND["ke"], kd=GROUND["kd"], mu=GROUND["mu"])
        return b


class ClothScene(Scene):
    name = "cloth"
    ndim = 2
    default_size = (64, 64)
    tiny_size = (8, 8)
    description = "hanging cloth, pinned on one edge"

    def params(self, size) -> dict:
        nx, ny = size
        return {
            "dim_x": nx, "dim_y": ny, "cell": 0.1, "mass": 0.1, "pos": (0.0, 0.0, 4.0),
            "tri_ke": 1.0e3, "tri_ka": 1.0e3, "tri_kd": 10.0, "edge_ke": 1.0, "edge_kd": 0.01,
            "radius": 0.04, "fix_left": True,
        }

    def expected_counts(self, size) -> dict:
        nx, ny = size
        interior_edges = nx * (ny + 1) + ny * (nx + 1) + nx * ny - 2 * (nx + ny)
        return {"particles": (nx + 1) * (ny + 1), "triangles": 2 * nx * ny, "edges": interior_edges, "tets": 0}

    def build_inertia(self, size, device):
        p = self.params(size)
        b = self._inertia_builder()
        b.add_cloth_grid(
            p["dim_x"], p["dim_y"], pos=p["pos"], cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
            fix_left=p["fix_left"], tri_ke=p["tri_ke"], tri_ka=p["tri_ka"], tri_kd=p["tri_kd"],
            edge_ke=p["edge_ke"], edge_kd=p["edge_kd"], particle_radius=p["radius"],
        )
        return b.finalize(device=device)


class GranularScene(Scene):
    name = "granular"
    ndim = 3
    default_size = (32, 32, 32)
    tiny_size = (6, 6, 6)
    description = "granular block dropped on the ground, particle-particle contact on"

    def params(self, size) -> dict:
        nx, ny, nz = size
        r = 0.05
        return {
            "dim_x": nx, "dim_y": ny, "dim_z": nz, "cell": 2.0 * r, "radius": r, "mass": 0.1,
            # uniform jitter of +-jitter per axis (Newton's ``jitter`` argument is the full width: 2x this)
            "jitter": 0.1 * r, "pos": (0.0, 0.0, r + 0.02), "vel": (0.0, 0.0, -0.5),
        }

    def expected_counts(self, size) -> dict:
        return {"particles": math.prod(size), "triangles": 0, "edges": 0, "tets": 0}

    def build_inertia(self, size, device):
        p = self.params(size)
        b = self._inertia_builder()
        b.add_particle_grid(
            p["dim_x"], p["dim_y"], p["dim_z"], pos=p["pos"], vel=p["vel"], cell_x=p["cell"], cell_y=p["cell"],
            cell_z=p["cell"], mass=p["mass"], jitter=p["jitter"], radius_mean=p["radius"],
        )
        return b.finalize(device=device)


class SoftScene(Scene):
    name = "soft"
    ndim = 3
    default_size = (16, 16, 4)
    tiny_size = (4, 4, 2)
    description = "soft tet block dropped on the ground"

    def params(self, size) -> dict:
        nx, ny, nz = size
        return {
            "dim_x": nx, "dim_y": ny, "dim_z": nz, "cell": 0.1, "density": 1000.0,
            "k_mu": 1.0e5, "k_lambda": 1.0e5, "k_damp": 10.0, "radius": 0.04,
            "pos": (0.0, 0.0, 0.06), "vel": (0.0, 0.0, -1.0),
        }

    def expected_counts(self, size) -> dict:
        nx, ny, nz = size
        return {"particles": (nx + 1) * (ny + 1) * (nz + 1), "triangles": 0, "edges": 0, "tets": 5 * nx * ny * nz}

    def build_inertia(self, size, device):
        p = self.params(size)
        b = self._inertia_builder()
        b.add_soft_grid(
            p["dim_x"], p["dim_y"], p["dim_z"], pos=p["pos"], vel=p["vel"], cell_x=p["cell"], cell_y=p["cell"],
            cell_z=p["cell"], density=p["density"], k_mu=p["k_mu"], k_lambda=p["k_lambda"], k_damp=p["k_damp"],
            particle_radius=p["radius"],
        )
        return b.finalize(device=device)


SCENES = {s.name: s for s in (ClothScene(), GranularScene(), SoftScene())}


# ---------------------------------------------------------------------------------------------
# Solvers. A runner owns one simulation (model, two states, control, contacts, solver) and knows
# how to take one step (collision detection + solver step + state swap). To benchmark another
# solver, add a SolverSpec to SOLVERS (and a factory to bench_newton.NEWTON_SOLVERS for its Newton
# twin). Each spec states, per scene, the time step and the solver settings it is run with; the
# XPBD settings are the ones tests/test_xpbd.py validates (see ``SolverSpec.settings``).


class SolverSpec:
    """A benchmarked solver: how to build it and, per scene, the step and settings it runs at.

    ``settings(scene)`` -> dict with ``dt`` [s], ``substeps`` (solver steps per 60 Hz frame, = FRAME_DT / dt)
    and the solver's keyword arguments (``kwargs``), plus ``why``: where the setting is validated.
    ``spec(model, scene)`` builds the solver for that scene (``scene`` defaults to "cloth", the scene of
    benchmarks/rollout.py). Calling the spec keeps the old ``SOLVERS[name](model)`` interface.
    """

    def __init__(self, name: str, make, per_scene: dict, description: str):
        self.name, self._make, self._per_scene, self.description = name, make, per_scene, description

    def settings(self, scene: str = "cloth") -> dict:
        s = dict(self._per_scene.get(scene, self._per_scene["*"]))
        s["kwargs"] = dict(s.get("kwargs", {}))
        s["dt"] = FRAME_DT / s["substeps"]
        return s

    def __call__(self, model, scene: str = "cloth"):
        return self._make(model, **self.settings(scene)["kwargs"])


def _semi_implicit(model):
    import inertia

    return inertia.SemiImplicitSolver(model)


def _xpbd(model, **kwargs):
    import inertia

    return inertia.XPBDSolver(model, **kwargs)


# Every scene at 10 substeps per 60 Hz frame (dt = 1/600 s, 4x the semi-implicit step):
# * cloth, soft: 20 Jacobi iterations, relaxation 1.5, the setting tests/test_xpbd.py validates for a
#   hanging cloth (same equilibrium as the semi-implicit solver within 1 cm) and a dropped 50 kPa cube
#   (volume within 3 %); at 10 iterations both come out visibly softer.
# * granular: contacts only (never over-relaxed), 10 iterations, relaxation 1.0.
XPBD_SETTINGS = {
    "cloth": {"substeps": 10, "kwargs": {"iterations": 20, "relaxation": 1.5},
              "why": "tests/test_xpbd.py::test_hanging_cloth_reaches_the_semi_implicit_equilibrium"},
    "soft": {"substeps": 10, "kwargs": {"iterations": 20, "relaxation": 1.5},
             "why": "tests/test_xpbd.py::test_soft_cube_dropped_rests_on_the_ground_and_keeps_its_volume"},
    "granular": {"substeps": 10, "kwargs": {"iterations": 10, "relaxation": 1.0},
                 "why": "contacts only; benchmarks/README.md (XPBD settings)"},
}
XPBD_SETTINGS["*"] = XPBD_SETTINGS["cloth"]

SOLVERS = {
    "semi_implicit": SolverSpec(
        "semi_implicit", lambda model: _semi_implicit(model),
        {"*": {"substeps": SUBSTEPS, "why": "the step the scenes' stiffnesses are stable at"}},
        "inertia.SemiImplicitSolver (explicit forces, symplectic Euler)"),
    "xpbd": SolverSpec(
        "xpbd", _xpbd, XPBD_SETTINGS,
        "inertia.XPBDSolver (Jacobi XPBD, splitting='sqrt')"),
}


class InertiaRunner:
    """One inertia simulation of a scene, stepped the way the README's minimal loop does."""

    engine = "inertia"

    def __init__(self, scene: Scene, size, device, solver: str):
        self.scene, self.size, self.device = scene, tuple(size), wp.get_device(device)
        self.model = scene.build_inertia(size, self.device)
        m = self.model
        self.state_0, self.state_1 = m.state(), m.state()
        self.control = m.control()
        self.contacts = m.contacts()
        spec = SOLVERS[solver]
        self.settings = spec.settings(scene.name)
        self.solver = spec(m, scene.name)
        self.dt = self.settings["dt"]
        self.notes = []

    def counts(self) -> dict:
        m = self.model
        return {"particles": m.particle_count, "springs": m.spring_count, "triangles": m.tri_count,
                "edges": m.edge_count, "tets": m.tet_count, "shapes": m.shape_count}

    def step(self):
        self.model.collide(self.state_0, self.contacts)
        self.solver.step(self.state_0, self.state_1, self.control, self.contacts, self.dt)
        self.state_0, self.state_1 = self.state_1, self.state_0

    def step_fresh(self, state_in, state_out):
        """One step between two given states (used to record a step on a wp.Tape)."""
        self.model.collide(state_in, self.contacts)
        self.solver.step(state_in, state_out, self.control, self.contacts, self.dt)

    def new_states(self):
        return self.model.state(), self.model.state()

    def positions(self):
        return self.state_0.particle_q.numpy()

    def velocities(self):
        return self.state_0.particle_qd.numpy()

    def contact_counts(self) -> dict:
        c = self.contacts.counts()
        return {"particle_shape": c["soft_contacts"], "particle_pairs": c["particle_pairs"]}
