"""Benchmark scenes: one parameter set per scene, built by inertia (here) and by Newton (``bench_newton``).

Each scene keeps its materials, sizes and timestep in a plain dict (``scene.params(size)``) so that
both engines are built from the same numbers. Sizes are grid dimensions:

* ``cloth``    (N, M) cells: a (N+1) x (M+1)-particle sheet at 4 m height, pinned on its left
  edge, hanging under gravity over a ground plane (membrane triangles + dihedral bending).
* ``granular`` (X, Y, Z) particles: a block of touching particles (spacing = diameter, small
  jitter) dropped 2 cm onto the ground with particle-particle contact on.
* ``soft``     (X, Y, Z) cells: a stable neo-Hookean tet block (5 tets per cell) dropped onto the
  ground at 1 m/s.

All scenes use dt = 1/2400 s (40 substeps of a 60 Hz frame), the step the grid defaults are
stable at, and the same ground and particle-particle contact material.
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
# solver, add a factory to SOLVERS (and to bench_newton.NEWTON_SOLVERS for its Newton twin).


def _semi_implicit(model):
    import inertia

    return inertia.SemiImplicitSolver(model)


SOLVERS = {
    "semi_implicit": _semi_implicit,
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
        self.solver = SOLVERS[solver](m)
        self.dt = DT
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

    def contact_counts(self) -> dict:
        c = self.contacts.counts()
        return {"particle_shape": c["soft_contacts"], "particle_pairs": c["particle_pairs"]}
