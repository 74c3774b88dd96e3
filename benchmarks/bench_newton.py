"""The same scenes built in Newton (optional: used only when ``import newton`` works).

Newton is never a dependency of inertia. Each scene is built from ``scene.params(size)``, the
numbers the inertia scene uses; where the two engines cannot be made to match, the difference is
written into ``notes`` (and from there into the benchmark JSON).
"""

from __future__ import annotations

import warp as wp

from bench_scenes import DT, GROUND, PARTICLE_CONTACT


def import_newton():
    """(module, None) when Newton imports, else (None, reason)."""
    try:
        import newton  # noqa: PLC0415
        import newton.solvers  # noqa: F401, PLC0415
    except Exception as e:  # ImportError, or a Newton that does not work with this Warp
        return None, f"{type(e).__name__}: {e}"
    return newton, None


def _semi_implicit(newton, model):
    # Triangle-particle contact is O(triangles x particles) in Newton's semi-implicit solver and has
    # no counterpart in inertia, so it is switched off to compare the same work.
    return newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False)


NEWTON_SOLVERS = {
    "semi_implicit": _semi_implicit,
}

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
        self.notes = list(COMMON_NOTES) + list(SCENE_NOTES.get(scene.name, []))
        p = scene.params(size)
        b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
        cfg = newton.ModelBuilder.ShapeConfig(ke=GROUND["ke"], kd=GROUND["kd"], mu=GROUND["mu"])
        b.add_ground_plane(cfg=cfg)
        getattr(self, "_build_" + scene.name)(b, p)
        m = b.finalize(device=self.device)
        m.particle_ke, m.particle_kd, m.particle_mu = (PARTICLE_CONTACT[k] for k in ("ke", "kd", "mu"))
        m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_mu = (GROUND[k] for k in ("ke", "kd", "mu"))
        self.model = m
        self.solver = NEWTON_SOLVERS[solver](newton, m)
        # match inertia: one particle-shape contact slot per particle (one shape), the same detection margin
        margin = 0.5 * float(m.particle_max_radius)
        self.pipeline = newton.CollisionPipeline(m, soft_contact_max=m.particle_count, soft_contact_gap=margin)
        self.contacts = self.pipeline.contacts()
        self.state_0, self.state_1 = m.state(), m.state()
        self.control = m.control()
        self.dt = DT

    # ------------------------------------------------------------------ scenes
    def _build_cloth(self, b, p):
        b.add_cloth_grid(
            pos=wp.vec3(*p["pos"]), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
            dim_x=p["dim_x"], dim_y=p["dim_y"], cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"],
            fix_left=p["fix_left"], tri_ke=p["tri_ke"], tri_ka=p["tri_ka"], tri_kd=p["tri_kd"],
            edge_ke=p["edge_ke"], edge_kd=p["edge_kd"], particle_radius=p["radius"],
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

    def contact_counts(self) -> dict:
        n = int(self.contacts.soft_contact_count.numpy()[0])
        return {"particle_shape": n, "particle_pairs": None}
