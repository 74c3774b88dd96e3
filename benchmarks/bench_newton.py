"""The same scenes built in Newton (optional: used only when ``import newton`` works).

Newton is never a dependency of inertia. Each scene is built from ``scene.params(size)``, the
numbers the inertia scene uses; where the two engines cannot be made to match, the difference is
written into ``notes`` (and from there into the benchmark JSON).
"""

from __future__ import annotations

import warp as wp

from bench_scenes import GROUND, PARTICLE_CONTACT, SOLVERS


def import_newton():
    """(module, None) when Newton imports, else (None, reason)."""
    try:
        import newton  # noqa: PLC0415
        import newton.solvers  # noqa: F401, PLC0415
    except Exception as e:  # ImportError, or a Newton that does not work with this Warp
        return None, f"{type(e).__name__}: {e}"
    return newton, None


def _semi_implicit(newton, model, scene=None):
    # Triangle-particle contact is O(triangles x particles) in Newton's semi-implicit solver and has
    # no counterpart in inertia, so it is switched off to compare the same work.
    return newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False)


def _xpbd(newton, model, scene="cloth"):
    # the same iteration count as ours (SOLVERS["xpbd"].settings(scene)); Newton's relaxation factors stay at
    # their defaults (0.9 for soft bodies and contacts): they scale Newton's summed corrections, not a
    # mass-split average like ours, so there is no equivalent of our relaxation=1.5
    iterations = SOLVERS["xpbd"].settings(scene)["kwargs"]["iterations"]
    return newton.solvers.SolverXPBD(model, iterations=iterations)


NEWTON_SOLVERS = {
    "semi_implicit": _semi_implicit,
    "xpbd": _xpbd,
}

# Newton's SolverXPBD solves springs, bending edges, tetrahedra and contacts but no triangles, so its cloth
# gets springs along the grid (add_cloth_grid(add_springs=True): structural, shear and bending springs) of
# stiffness tri_ke [N/m] and damping tri_kd, standing in for inertia's membrane triangles.
XPBD_CLOTH_SPRINGS = True

COMMON_NOTES = [
    "Newton semi-implicit: enable_tri_contact=False (its triangle-particle contact is O(tris x particles); "
    "inertia has none)",
    "friction: inertia uses smoothed Coulomb (eps = friction_smoothing); Newton uses min(kf |v_t|, mu f_n) "
    "with its default kf",
    "particle-particle contact: inertia lists pairs in collide() (HashGrid, each pair once, pairs sharing an "
    "element excluded); Newton queries its HashGrid inside the force kernel (each pair from both sides, no "
    "exclusions)",
    "particle-ground material: Newton averages model.soft_contact_* with the shape's; both are set to "
    "inertia's ground ke/kd/mu",
]

XPBD_NOTES = [
    "Newton XPBD: Jacobi too (every particle constraint of an iteration writes into one delta buffer, applied "
    "once per iteration), but the corrections are summed x relaxation (0.9, its default, for tets and contacts; "
    "springs and bending unrelaxed); inertia divides each correction by sqrt(constraints on the particle) "
    "and multiplies by its relaxation (1.5 for cloth and soft), contacts never over-relaxed",
    "Newton XPBD: the same number of iterations as ours; it also clamps every particle's velocity to "
    "model.particle_max_velocity when applying the corrections",
    "Newton XPBD: the particle-particle hash grid is rebuilt inside every step and contacts are found inside "
    "the solve kernel (inertia: pairs listed once per step in collide())",
]

XPBD_SCENE_NOTES = {
    "cloth": [
        "Newton XPBD has no triangle constraints: its cloth holds together by springs (add_springs=True, "
        "spring_ke = tri_ke, spring_kd = tri_kd; structural + shear + bending springs) and its dihedral bending "
        "constraints; inertia solves the membrane triangles (stretch + area) and the same dihedral bending",
    ],
    "soft": [
        "tets: both solve a deviatoric and a volumetric constraint per tet (two multipliers), but different "
        "ones: Newton C_dev = tr(F^T F) - 3, C_vol = det F - 1; inertia the stable neo-Hookean pair of its "
        "semi-implicit FEM, C_D = sqrt(I_C - log(I_C + 1)), C_H = det F - (1 + 3 mu / 4 lambda), with mu' = 4/3 k_mu",
    ],
}

SCENE_NOTES = {
    "cloth": [
        "cloth membrane: both stable neo-Hookean-style triangle FEM with the same tri_ke/tri_ka/tri_kd, but the "
        "formulas differ; inertia alternates the cell diagonal, Newton does not",
        "pinned edge: inertia keeps pinned particles active with mass 0; Newton clears their ACTIVE flag",
    ],
    "granular": [
        "particle positions: the same lattice and jitter amplitude, different random draws",
    ],
    "soft": [
        "soft masses: inertia lumps a quarter of each tet's mass on its vertices; Newton gives every vertex "
        "cell_volume x density, so Newton's density is scaled to give the same total mass",
        "Newton's soft grid adds zero-stiffness surface triangles (launched by its triangle force kernel); "
        "add_surface_mesh_edges=False so no bending edges are added",
    ],
}


class NewtonRunner:
    """One Newton simulation of a scene: clear forces, collide, step, swap (Newton's example loop)."""

    engine = "newton"

    def __init__(self, scene, size, device, solver: str):
        newton, err = import_newton()
        if newton is None:
            raise RuntimeError(err)
        self.newton = newton
        self.scene, self.size, self.device = scene, tuple(size), wp.get_device(device)
        self.solver_name = solver
        # the first two common notes are about the semi-implicit force models
        self.notes = list(COMMON_NOTES if solver == "semi_implicit" else COMMON_NOTES[2:])
        self.notes += list(SCENE_NOTES.get(scene.name, []))
        if solver == "xpbd":
            self.notes += XPBD_NOTES + XPBD_SCENE_NOTES.get(scene.name, [])
        p = scene.params(size)
        b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
        cfg = newton.ModelBuilder.ShapeConfig(ke=GROUND["ke"], kd=GROUND["kd"], mu=GROUND["mu"])
        b.add_ground_plane(cfg=cfg)
        getattr(self, "_build_" + scene.name)(b, p)
        m = b.finalize(device=self.device)
        m.particle_ke, m.particle_kd, m.particle_mu = (PARTICLE_CONTACT[k] for k in ("ke", "kd", "mu"))
        m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_mu = (GROUND[k] for k in ("ke", "kd", "mu"))
        self.model = m
        self.settings = SOLVERS[solver].settings(scene.name)  # the same dt (and iterations) as ours
        self.solver = NEWTON_SOLVERS[solver](newton, m, scene.name)
        # match inertia: one particle-shape contact slot per particle (one shape), the same detection margin
        margin = 0.5 * float(m.particle_max_radius)
        self.pipeline = newton.CollisionPipeline(m, soft_contact_max=m.particle_count, soft_contact_gap=margin)
        self.contacts = self.pipeline.contacts()
        self.state_0, self.state_1 = m.state(), m.state()
        self.control = m.control()
        self.dt = self.settings["dt"]

    # ------------------------------------------------------------------ scenes
    def _build_cloth(self, b, p):
        springs = {}
        if self.solver_name == "xpbd" and XPBD_CLOTH_SPRINGS:
            springs = {"add_springs": True, "spring_ke": p["tri_ke"], "spring_kd": p["tri_kd"]}
        b.add_cloth_grid(
            pos=wp.vec3(*p["pos"]), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
            dim_x=p["dim_x"], dim_y=p["dim_y"], cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
            fix_left=p["fix_left"], tri_ke=p["tri_ke"], tri_ka=p["tri_ka"], tri_kd=p["tri_kd"],
            edge_ke=p["edge_ke"], edge_kd=p["edge_kd"], particle_radius=p["radius"], **springs,
        )

    def _build_granular(self, b, p):
        b.add_particle_grid(
            pos=wp.vec3(*p["pos"]), rot=wp.quat_identity(), vel=wp.vec3(*p["vel"]),
            dim_x=p["dim_x"], dim_y=p["dim_y"], dim_z=p["dim_z"], cell_x=p["cell"], cell_y=p["cell"],
            cell_z=p["cell"], mass=p["mass"], jitter=2.0 * p["jitter"], radius_mean=p["radius"],
        )

    def _build_soft(self, b, p):
        nx, ny, nz = p["dim_x"], p["dim_y"], p["dim_z"]
        # same total mass as inertia's lumped masses: Newton puts cell_volume * density on every vertex
        density = p["density"] * (nx * ny * nz) / ((nx + 1) * (ny + 1) * (nz + 1))
        b.add_soft_grid(
            pos=wp.vec3(*p["pos"]), rot=wp.quat_identity(), vel=wp.vec3(*p["vel"]),
            dim_x=nx, dim_y=ny, dim_z=nz, cell_x=p["cell"], cell_y=p["cell"], cell_z=p["cell"],
            density=density, k_mu=p["k_mu"], k_lambda=p["k_lambda"], k_damp=p["k_damp"],
            particle_radius=p["radius"], add_surface_mesh_edges=False,
        )

    # ------------------------------------------------------------------ stepping
    def counts(self) -> dict:
        m = self.model
        return {"particles": m.particle_count, "springs": m.spring_count, "triangles": m.tri_count,
                "edges": m.edge_count, "tets": m.tet_count, "shapes": m.shape_count}

    def step(self):
        self.step_fresh(self.state_0, self.state_1)
        self.state_0, self.state_1 = self.state_1, self.state_0

    def step_fresh(self, state_in, state_out):
        state_in.clear_forces()
        self.pipeline.collide(state_in, self.contacts)
        self.solver.step(state_in, state_out, self.control, self.contacts, self.dt)

    def new_states(self):
        return self.model.state(), self.model.state()

    def positions(self):
        return self.state_0.particle_q.numpy()

    def velocities(self):
        return self.state_0.particle_qd.numpy()

    def contact_counts(self) -> dict:
        n = int(self.contacts.soft_contact_count.numpy()[0])
        return {"particle_shape": n, "particle_pairs": None}
