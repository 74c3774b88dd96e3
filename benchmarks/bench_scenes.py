"""Benchmark scenes: one parameter set per scene, built by inertia (here) and by Newton (``bench_newton``).

Each scene keeps its materials, sizes and timestep in a plain dict (``scene.params(size)``) so that
both engines are built from the same numbers. Sizes are grid dimensions:

* ``cloth``    (N, M) cells: a (N+1) x (M+1)-particle sheet at 4 m height, pinned on its left
  edge, hanging under gravity over a ground plane (membrane triangles + dihedral bending).
* ``granular`` (X, Y, Z) particles: a block of touching particles (spacing = diameter, small
  jitter) dropped 2 cm onto the ground with particle-particle contact on.
* ``soft``     (X, Y, Z) cells: a stable neo-Hookean tet block (5 tets per cell) dropped onto the
  ground at 1 m/s.
* ``boxes``    (X, Y, Z) rigid 10 cm cubes: X x Y towers of Z boxes, each 1 cm above the one below,
  randomly yawed and shifted (seed 0), dropped in a pile onto the ground (the pile of
  tests/test_rigid_semi_implicit.py's ``box_pile`` fixture).
* ``chain``    (N,) capsule links of 10 cm hanging from the world by revolute joints, released from
  horizontal (the 32-link chain of tests/test_rigid_semi_implicit.py and tests/test_rigid_xpbd_joints.py).
* ``arm``      (N,) KUKA LBR iiwa 7-DoF arms (pybullet_data's ``kuka_iiwa/model.urdf``), base welded 1.5 m
  up, released from a bent pose under gravity with the URDF's joint damping (0.5 N m s/rad) and
  limits, no contacts (``arm_scene.py``; sim_rate.py's MuJoCo comparison).

All scenes share the ground and particle-particle contact material (the rigid shapes use the ground's
ke/kd/mu). The time step belongs to the solver (``SOLVERS[name].settings(scene)``): the
SemiImplicitSolver runs the particle scenes at dt = 1/2400 s (40 substeps of a 60 Hz frame), the step
the grid defaults are stable at, and the rigid scenes at the 1 ms of their tests; the XPBDSolver runs
at the substeps, iterations and relaxation given in ``XPBD_SETTINGS``.
"""

from __future__ import annotations

import math

import numpy as np
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
    default_size: tuple = ()
    tiny_size: tuple = ()
    description = ""

    def params(self, size) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        """How many numbers a size has (the default size's)."""
        return len(self.default_size)

    def expected_counts(self, size) -> dict:  # pragma: no cover - interface
        """Element counts the inertia model must have (checked after building)."""
        raise NotImplementedError

    def build_inertia(self, size, device):
        """The scene's inertia model: ``add_to`` on the shared builder (ground, particle contact), finalized."""
        p = self.params(size)
        b = self._inertia_builder()
        self.add_to(b, p)
        return b.finalize(device=device)

    def add_to(self, b, p) -> None:  # pragma: no cover - interface
        """Add the scene's entities, as ``params`` describes them, to the builder ``b``."""
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

    def add_to(self, b, p) -> None:
        b.add_cloth_grid(
            p["dim_x"], p["dim_y"], pos=p["pos"], cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
            fix_left=p["fix_left"], tri_ke=p["tri_ke"], tri_ka=p["tri_ka"], tri_kd=p["tri_kd"],
            edge_ke=p["edge_ke"], edge_kd=p["edge_kd"], particle_radius=p["radius"],
        )


class GranularScene(Scene):
    name = "granular"
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

    def add_to(self, b, p) -> None:
        b.add_particle_grid(
            p["dim_x"], p["dim_y"], p["dim_z"], pos=p["pos"], vel=p["vel"], cell_x=p["cell"], cell_y=p["cell"],
            cell_z=p["cell"], mass=p["mass"], jitter=p["jitter"], radius_mean=p["radius"],
        )


class SoftScene(Scene):
    name = "soft"
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

    def add_to(self, b, p) -> None:
        b.add_soft_grid(
            p["dim_x"], p["dim_y"], p["dim_z"], pos=p["pos"], vel=p["vel"], cell_x=p["cell"], cell_y=p["cell"],
            cell_z=p["cell"], density=p["density"], k_mu=p["k_mu"], k_lambda=p["k_lambda"], k_damp=p["k_damp"],
            particle_radius=p["radius"],
        )


def quat_about_z(angle: float) -> tuple:
    """Unit quaternion (x, y, z, w) of a rotation by ``angle`` [rad] about +z."""
    return (0.0, 0.0, math.sin(0.5 * angle), math.cos(0.5 * angle))


class BoxesScene(Scene):
    name = "boxes"
    default_size = (4, 4, 4)
    tiny_size = (2, 2, 1)
    description = "pile of rigid boxes dropped onto the ground"

    def params(self, size) -> dict:
        """Poses are drawn here (seed 0), so both engines start from the same numbers.

        The layout, jitter and draw order are tests/test_rigid_semi_implicit.py's ``box_pile``: at 4x4x4
        the poses are that fixture's exactly.
        """
        nx, ny, nz = size
        h, gap, drop = 0.05, 0.02, 0.01  # half extent, horizontal gap between towers, vertical gap [m]
        rng = np.random.default_rng(0)
        poses = []
        for i in range(nx):
            for j in range(ny):
                for k in range(nz):
                    x = (i - 0.5 * (nx - 1)) * (2 * h + gap) + rng.uniform(-0.005, 0.005)
                    y = (j - 0.5 * (ny - 1)) * (2 * h + gap) + rng.uniform(-0.005, 0.005)
                    z = h + drop + k * (2 * h + drop)
                    poses.append(((float(x), float(y), float(z)), quat_about_z(float(rng.uniform(-0.3, 0.3)))))
        return {"dim_x": nx, "dim_y": ny, "dim_z": nz, "half": h, "density": 1000.0, "poses": poses,
                "ke": GROUND["ke"], "kd": GROUND["kd"], "mu": GROUND["mu"]}

    def expected_counts(self, size) -> dict:
        n = math.prod(size)
        return {"particles": 0, "triangles": 0, "edges": 0, "tets": 0, "bodies": n, "joints": 0, "shapes": n + 1}

    @staticmethod
    def add_to(b, p) -> None:  # static: benchmarks/worlds.py adds this pile beside a chain in one world
        h = p["half"]
        for pose in p["poses"]:
            body = b.add_body(xform=pose)
            b.add_shape_box(body, hx=h, hy=h, hz=h, density=p["density"], ke=p["ke"], kd=p["kd"], mu=p["mu"])


class ChainScene(Scene):
    name = "chain"
    default_size = (32,)
    tiny_size = (4,)
    description = "pendulum chain of capsules on revolute joints, released from horizontal"

    def params(self, size) -> dict:
        """Links along +x from the pivot, hinged about y, the capsule's axis along the link.

        The pivot is 0.8 m above the length of the chain (4 m at 32 links, as in
        tests/test_rigid_xpbd_joints.py), so the hanging chain never reaches the ground.
        ``joint_attach_ke`` [1/s^2] and ``joint_attach_kd`` [1/s] are the SemiImplicitSolver's (the
        XPBDSolver's joints are hard): ke = 1e6 is what
        test_falling_32_link_chain_stays_connected_without_gaining_energy validates at dt = 1 ms; kd = 500
        gives its springs the damping ratio kd / (2 sqrt(ke)) = 0.25 (the builder's defaults, 1e5 and 100,
        have 0.16). With the builder's kd of 100 (0.05) the springs ring under the whip's loads and the joints
        part by 5.7 mm at the whip (10 s, dt = 1 ms); measured peak gaps over kd = 100 / 200 / 300 / 400 / 500 /
        700 / 1000: 5.7 / 6.0 / 4.6 / 4.5 / 3.9 / 3.6 / 4.2 mm (a chaotic motion: the peak scatters by ~0.5 mm
        with any change, hence 500, not the smallest kd that passed once). kd dt = 0.5 stays well inside the
        explicit damper's limit (the chain's fastest mode damps at about 2 kd: 2 kd dt < 2).
        """
        (n,) = size
        link, radius = 0.1, 0.01
        return {"links": n, "link": link, "radius": radius, "half_height": 0.5 * link - radius, "density": 1000.0,
                "pivot": (0.0, 0.0, n * link + 0.8), "axis": (0.0, 1.0, 0.0), "joint_attach_ke": 1.0e6,
                "joint_attach_kd": 5.0e2, "ke": GROUND["ke"], "kd": GROUND["kd"], "mu": GROUND["mu"]}

    def expected_counts(self, size) -> dict:
        (n,) = size
        return {"particles": 0, "triangles": 0, "edges": 0, "tets": 0, "bodies": n, "joints": n, "shapes": n + 1}

    @staticmethod
    def link_frames(p) -> list:
        """Per link: (body pose, parent anchor frame, child anchor frame, capsule frame in the body)."""
        link, (px, py, pz) = p["link"], p["pivot"]
        ident = (0.0, 0.0, 0.0, 1.0)
        along_x = (0.0, math.sin(math.pi / 4), 0.0, math.cos(math.pi / 4))  # turns the capsule's z onto x
        out = []
        for i in range(p["links"]):
            pose = ((px + (i + 0.5) * link, py, pz), ident)
            parent = ((px, py, pz), ident) if i == 0 else ((0.5 * link, 0.0, 0.0), ident)
            out.append((pose, parent, ((-0.5 * link, 0.0, 0.0), ident), ((0.0, 0.0, 0.0), along_x)))
        return out

    def add_to(self, b, p) -> None:
        b.joint_attach_ke, b.joint_attach_kd = p["joint_attach_ke"], p["joint_attach_kd"]
        self.add_links(b, p)

    @staticmethod
    def add_links(b, p) -> None:
        """The capsule links and their revolute joints (benchmarks/worlds.py's mixed world adds these too)."""
        prev = -1
        for pose, parent, child, capsule in ChainScene.link_frames(p):
            body = b.add_body(xform=pose)
            b.add_shape_capsule(body, xform=capsule, radius=p["radius"], half_height=p["half_height"],
                                density=p["density"], ke=p["ke"], kd=p["kd"], mu=p["mu"])
            b.add_joint_revolute(prev, body, parent_xform=parent, child_xform=child, axis=p["axis"])
            prev = body


class ArmScene(Scene):
    """A KUKA LBR iiwa 7-DoF arm (pybullet_data's ``kuka_iiwa/model.urdf``: its masses, inertias, joint limits and
    joint damping), base welded ``base_height`` up, released at rest from ``q0`` under gravity: it swings and
    hits its limits; no contacts (no ground, no self-collision, in every engine). The size is (1,): one arm."""

    name = "arm"
    default_size = (1,)
    tiny_size = (1,)
    description = "7-DoF KUKA iiwa arm (URDF) released from a bent pose under gravity, joint damping, no contacts"

    @staticmethod
    def urdf_path() -> str:
        try:
            import pybullet_data
        except ImportError as e:
            raise RuntimeError("the arm scene needs pybullet_data (pip install pybullet: the 'bench' extra)") from e
        import os

        return os.path.join(pybullet_data.getDataPath(), "kuka_iiwa", "model.urdf")

    def params(self, size) -> dict:
        (n,) = size
        if n != 1:
            raise ValueError(f"arm size {size}: one arm only, (1,)")
        # [rad] joints 1..7, inside every limit (+-2.97, +-2.09, +-2.97, +-2.09, +-2.97, +-2.09, +-3.05)
        return {"urdf": self.urdf_path(), "base_height": 1.5, "q0": (0.3, 1.2, -0.4, -1.4, 0.5, 1.0, 0.2),
                "damping": 0.5, "joint_attach_ke": 1.0e6, "joint_attach_kd": 1.0e2}

    def expected_counts(self, size) -> dict:
        # link_0 (welded base, mass 0: kinematic) and links 1..7; one fixed and seven revolute joints; a mesh per link
        return {"particles": 0, "triangles": 0, "edges": 0, "tets": 0, "bodies": 8, "joints": 8, "shapes": 8}

    def build_inertia(self, size, device):
        import inertia
        from inertia.io.urdf import add_urdf

        p = self.params(size)
        b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
        # the SemiImplicitSolver's joint attachment [1/s^2, 1/s]: the chain's (validated at dt = 1 ms)
        b.joint_attach_ke, b.joint_attach_kd = p["joint_attach_ke"], p["joint_attach_kd"]
        # density 0: the links' masses and inertias are the URDF's <inertial> (link_0's mass 0 welds it);
        # joint_target_kd = the URDF's <dynamics damping> (inertia's importer reads no damping; a drive with
        # ke = 0 and target 0 is a viscous damper on the joint rate)
        add_urdf(b, p["urdf"], xform=((0.0, 0.0, p["base_height"]), (0.0, 0.0, 0.0, 1.0)), density=0.0,
                 joint_target_kd=p["damping"], collide_shapes=False, collide_particles=False)
        m = b.finalize(device=device)
        s = m.state()
        q = np.zeros(m.joint_coord_count, dtype=np.float32)
        q[-7:] = p["q0"]  # the fixed base joint has no coordinates
        inertia.eval_fk(m, q, np.zeros(m.joint_dof_count, dtype=np.float32), s)
        m.body_q.assign(s.body_q)  # every state starts in the bent pose
        return m


SCENES = {s.name: s for s in (ClothScene(), GranularScene(), SoftScene(), BoxesScene(), ChainScene(), ArmScene())}
RIGID_SCENES = ("boxes", "chain", "arm")
BENCH_SCENES = ("cloth", "granular", "soft", "boxes", "chain")  # run.py's default: the scenes with a Newton twin


# ---------------------------------------------------------------------------------------------
# Solvers. A runner owns one simulation (model, two states, control, contacts, solver) and knows
# how to take one step (collision detection + solver step + state swap). To benchmark another
# solver, add a SolverSpec to SOLVERS (and a factory to bench_newton.NEWTON_SOLVERS for its Newton
# twin). Each spec states, per scene, the time step and the solver settings it is run with; the
# XPBD settings are the ones tests/test_xpbd.py validates (see ``SolverSpec.settings``).


class SolverSpec:
    """A benchmarked solver: how to build it and, per scene, the step and settings it runs at.

    ``settings(scene)`` -> dict with ``dt`` [s], ``substeps`` (solver steps per 60 Hz frame, = FRAME_DT / dt;
    not an integer where a scene states its ``dt`` instead) and the solver's keyword arguments (``kwargs``),
    plus ``why``: where the setting is validated.
    ``spec(model, scene)`` builds the solver for that scene (``scene`` defaults to "cloth", the scene of
    benchmarks/rollout.py). Calling the spec keeps the old ``SOLVERS[name](model)`` interface.
    """

    def __init__(self, name: str, make, per_scene: dict, description: str, scenes=None):
        self.name, self._make, self._per_scene, self.description = name, make, per_scene, description
        self.scenes = tuple(scenes) if scenes is not None else None  # None: every scene

    def applies_to(self, scene: str) -> bool:
        return self.scenes is None or scene in self.scenes

    def settings(self, scene: str = "cloth") -> dict:
        if not self.applies_to(scene):
            raise ValueError(f"solver {self.name!r} has no setting for scene {scene!r} (it runs {self.scenes})")
        s = dict(self._per_scene.get(scene, self._per_scene["*"]))
        s["kwargs"] = dict(s.get("kwargs", {}))
        if "dt" in s:  # a step its validating test states directly (the rigid scenes' 1 ms)
            s["substeps"] = FRAME_DT / s["dt"]
        else:
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
# * boxes: 20 substeps of 8 iterations (relaxation 1.0), the pile and stack tests of tests/test_rigid_xpbd.py.
# * chain: 10 substeps of 8 iterations (relaxation 1.0), tests/test_rigid_xpbd_joints.py's 32-link chain.
# * the rigid scenes without the restitution pass (velocity_iterations=0): none of their shapes has restitution,
#   and Newton's twins run without theirs (SolverXPBD's enable_restitution=False, its default). With e = 0 the
#   pass is not a no-op (it zeroes the normal velocity of every contact that pushed), and it took a fifth of
#   the settled pile's step; the 10 s sanity pass judges the scenes without it.
NO_RESTITUTION_PASS = {"velocity_iterations": 0}
XPBD_SETTINGS = {
    "cloth": {"substeps": 10, "kwargs": {"iterations": 20, "relaxation": 1.5},
              "why": "tests/test_xpbd.py::test_hanging_cloth_reaches_the_semi_implicit_equilibrium"},
    "soft": {"substeps": 10, "kwargs": {"iterations": 20, "relaxation": 1.5},
             "why": "tests/test_xpbd.py::test_soft_cube_dropped_rests_on_the_ground_and_keeps_its_volume"},
    "granular": {"substeps": 10, "kwargs": {"iterations": 10, "relaxation": 1.0},
                 "why": "contacts only; benchmarks/README.md (XPBD settings)"},
    "boxes": {"substeps": 20, "kwargs": {"iterations": 8, "relaxation": 1.0, **NO_RESTITUTION_PASS},
              "why": "tests/test_rigid_xpbd.py::test_sixty_four_boxes_dropped_in_a_pile_come_to_rest_above_the_ground"
                     "; no restitution pass, as Newton's twin"},
    "chain": {"substeps": 10, "kwargs": {"iterations": 8, "relaxation": 1.0, **NO_RESTITUTION_PASS},
              "why": "tests/test_rigid_xpbd_joints.py::test_chain_of_32_links_stays_connected; no restitution pass"},
    "arm": {"substeps": 10, "kwargs": {"iterations": 8, "relaxation": 1.0, **NO_RESTITUTION_PASS},
            "why": "the chain's setting; sim_rate.py searches the largest sane step"},
}
XPBD_SETTINGS["*"] = XPBD_SETTINGS["cloth"]

SOLVERS = {
    "semi_implicit": SolverSpec(
        "semi_implicit", lambda model: _semi_implicit(model),
        {"*": {"substeps": SUBSTEPS, "why": "the step the scenes' stiffnesses are stable at"},
         "boxes": {"dt": 1.0e-3, "why": "tests/test_rigid_semi_implicit.py::test_pile_of_64_boxes_stays_above_the_ground"},
         "chain": {"dt": 1.0e-3, "why": "tests/test_rigid_semi_implicit.py::test_falling_32_link_chain_stays_connected_"
                                        "without_gaining_energy (with the scene's joint_attach_ke = 1e6)"},
         "arm": {"dt": 1.0e-3, "why": "the chain's step; sim_rate.py searches the largest sane step"}},
        "inertia.SemiImplicitSolver (explicit forces, symplectic Euler)"),
    "xpbd": SolverSpec(
        "xpbd", _xpbd, XPBD_SETTINGS,
        "inertia.XPBDSolver (Jacobi XPBD, splitting='sqrt')"),
}


def _featherstone(model, **kwargs):
    import inertia

    return inertia.FeatherstoneSolver(model, **kwargs)


def register_featherstone() -> bool:
    """Add ``featherstone`` to SOLVERS when ``inertia.FeatherstoneSolver`` exists (reduced coordinates, being
    written in parallel): rigid scenes only, at the 1 ms of the semi-implicit rigid scenes (its own tests will
    say better; sim_rate.py searches its largest sane step anyway). Returns whether it is registered."""
    try:
        import inertia
    except ImportError:  # a Newton-only interpreter (rollout.py / worlds.py --newton-python children)
        return False
    if not hasattr(inertia, "FeatherstoneSolver"):
        SOLVERS.pop("featherstone", None)
        return False
    SOLVERS["featherstone"] = SolverSpec(
        "featherstone", _featherstone,
        {"*": {"dt": 1.0e-3, "why": "the semi-implicit rigid scenes' step (not yet validated by its own tests)"}},
        "inertia.FeatherstoneSolver (reduced coordinates)", scenes=("boxes", "chain", "arm"))
    return True


register_featherstone()


def model_counts(m) -> dict:
    """Entity counts of an inertia or a Newton model (both name them alike): the rows' ``counts``."""
    return {"particles": m.particle_count, "springs": m.spring_count, "triangles": m.tri_count,
            "edges": m.edge_count, "tets": m.tet_count, "shapes": m.shape_count, "bodies": m.body_count,
            "joints": m.joint_count}


class InertiaRunner:
    """One inertia simulation of a scene, stepped the way the README's minimal loop does."""

    engine = "inertia"

    def __init__(self, scene: Scene, size, device, solver: str, dt: float | None = None):
        self.scene, self.size, self.device = scene, tuple(size), wp.get_device(device)
        self.solver_name = solver
        self.model = scene.build_inertia(size, self.device)
        m = self.model
        self.state_0, self.state_1 = m.state(), m.state()
        self.control = m.control()
        self.contacts = m.contacts()
        spec = SOLVERS[solver]
        self.settings = spec.settings(scene.name)
        self.solver = spec(m, scene.name)
        if dt is not None:  # another step than the solver states (sim_rate.py's step search)
            self.settings = {**self.settings, "dt": float(dt), "substeps": FRAME_DT / float(dt),
                             "why": "step override"}
        self.dt = self.settings["dt"]
        self.notes = []
        split = getattr(self.solver, "substeps", None)  # the SemiImplicitSolver beyond its estimated stable step
        if split is not None and split(self.dt) > 1:
            self.notes.append(f"each step of {self.dt:.3g} s runs as {split(self.dt)} substeps: it is beyond the "
                              f"solver's estimated stable step ({self.solver.stable_dt:.3g} s)")
        self._static = None

    def counts(self) -> dict:
        return model_counts(self.model)

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
        """Particle positions, then the bodies' centres of mass (world) [m], one row each."""
        return np.concatenate([self.state_0.particle_q.numpy().reshape(-1, 3),
                               body_com_positions(self.state_0.body_q.numpy(), self.model.body_com.numpy())])

    def velocities(self):
        """Particle velocities, then the bodies' centre-of-mass velocities [m/s], one row each."""
        return np.concatenate([self.state_0.particle_qd.numpy().reshape(-1, 3),
                               self.state_0.body_qd.numpy().reshape(-1, 6)[:, :3]])

    def observation(self) -> dict:
        """bench_observe's observation: particles and bodies (maximal coordinates), joint anchor gaps."""
        from bench_observe import maximal_observation

        m = self.model
        if self._static is None:
            from inertia.types import JOINT_BALL, JOINT_FIXED, JOINT_REVOLUTE

            kinds = m.joint_type.numpy() if m.joint_count else np.zeros(0, dtype=np.int32)
            joints = None
            if m.joint_count:
                joints = (m.joint_parent.numpy(), m.joint_child.numpy(), m.joint_X_p.numpy(), m.joint_X_c.numpy(),
                          np.isin(kinds, (int(JOINT_REVOLUTE), int(JOINT_BALL), int(JOINT_FIXED))))
            self._static = (m.particle_mass.numpy(), m.body_mass.numpy(), m.body_inertia.numpy(), m.body_com.numpy(),
                            joints)
            if m.body_count:
                # kinematic bodies (mass 0, e.g. the arm's welded base) have no inertia either
                self._static[2][self._static[1] == 0.0] = 0.0
        pm, bm, bi, bc, joints = self._static
        s = self.state_0
        return maximal_observation(s.particle_q.numpy(), s.particle_qd.numpy(), pm, s.body_q.numpy(),
                                   s.body_qd.numpy(), bm, bi, bc, joints)

    def contact_counts(self) -> dict:
        c = self.contacts.counts()
        return {"particle_shape": c["soft_contacts"], "particle_pairs": c["particle_pairs"],
                "rigid_contacts": c["rigid_contacts"]}


def body_com_positions(body_q, body_com) -> np.ndarray:
    """World centres of mass (n, 3) from body poses (n, 7: position, quaternion x y z w) and body-frame COMs."""
    q = np.asarray(body_q, dtype=np.float64).reshape(-1, 7)
    c = np.asarray(body_com, dtype=np.float64).reshape(-1, 3)
    xyz, w = q[:, 3:6], q[:, 6:7]
    t = 2.0 * np.cross(xyz, c)  # v' = v + w t + xyz x t with t = 2 xyz x v (unit quaternion rotation)
    return q[:, :3] + c + w * t + np.cross(xyz, t)
