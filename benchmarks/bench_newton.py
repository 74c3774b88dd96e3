"""The same scenes built in Newton (optional: used only when ``import newton`` works).

Newton is never a dependency of inertia. Each scene is built from ``scene.params(size)``, the
numbers the inertia scene uses; where the two engines cannot be made to match, the difference is
written into ``notes`` (and from there into the benchmark JSON).
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from bench_scenes import (GROUND, PARTICLE_CONTACT, RIGID_SCENES, SOLVERS, ChainScene, body_com_positions,
                          model_counts)


def import_newton():
    """(module, None) when Newton imports, else (None, reason)."""
    try:
        import newton  # noqa: PLC0415
        import newton.solvers  # noqa: F401, PLC0415
    except Exception as e:  # ImportError, or a Newton that does not work with this Warp
        return None, f"{type(e).__name__}: {e}"
    return newton, None


def _semi_implicit(newton, model, scene=None, **kwargs):
    # Triangle-particle contact is O(triangles x particles) in Newton's semi-implicit solver and has
    # no counterpart in inertia, so it is switched off to compare the same work. ``kwargs``: the rigid
    # scenes' joint attachment gains and angular damping (NewtonRunner._build_*).
    return newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False, **kwargs)


def _xpbd(newton, model, scene="cloth", **kwargs):
    # the same iteration count as ours (SOLVERS["xpbd"].settings(scene)); Newton's relaxation factors stay at
    # their defaults (0.9 for soft bodies and contacts): they scale Newton's summed corrections, not a
    # mass-split average like ours, so there is no equivalent of our relaxation=1.5
    iterations = SOLVERS["xpbd"].settings(scene)["kwargs"]["iterations"]
    return newton.solvers.SolverXPBD(model, iterations=iterations, **kwargs)


NEWTON_SOLVERS = {
    "semi_implicit": _semi_implicit,
    "xpbd": _xpbd,
}

# Newton's SolverXPBD solves springs, bending edges, tetrahedra and contacts but no triangles, so its cloth
# gets springs along the grid (add_cloth_grid(add_springs=True): structural, shear and bending springs) of
# stiffness tri_ke [N/m], standing in for inertia's membrane triangles.
XPBD_CLOTH_SPRINGS = True
# The springs' damping [N s/m]. At tri_kd = 10 (what the earlier twin used) Newton's XPBD cloth explodes at this
# step: 47 m/s at step 9 (8x8 cloth), 53 m/s (16x16), edges stretched +95-240 %; at 5.0 or below it stays
# bounded (8x8 and 16x16, 20 iterations, dt = 1/600 s: 1.8 m/s after 100 steps, as without damping). 1.0 keeps
# a 5x margin; the long-window sanity pass (run.py, 10 s simulated) is the check at the benchmark's size.
XPBD_CLOTH_SPRING_KD = 1.0

COMMON_NOTES = [
    "Newton semi-implicit: enable_tri_contact=False (its triangle-particle contact is O(tris x particles); "
    "inertia has none)",
    "friction: inertia uses smoothed Coulomb (eps = friction_smoothing); Newton uses min(kf |v_t|, mu f_n) "
    "with its default kf",
    "particle-particle contact: inertia lists pairs in collide() (a cell list searched over half shells, each "
    "pair once, pairs sharing an element excluded); Newton queries its HashGrid inside the force kernel (each "
    "pair from both sides, no exclusions)",
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
        "spring_ke = tri_ke, structural + shear + bending springs) and its dihedral bending constraints; inertia "
        "solves the membrane triangles (stretch + area) and the same dihedral bending",
        "Newton XPBD cloth springs damped with spring_kd = 1 N s/m, not tri_kd = 10: at 10 its cloth explodes "
        "within 10 steps (47-53 m/s); the sanity pass checks it over the long window "
        "(bench_newton.XPBD_CLOTH_SPRING_KD)",
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
        "Newton's soft grid adds zero-stiffness surface triangles; they are removed from its builder before "
        "finalize (its triangle kernels would run over them for nothing), and add_surface_mesh_edges=False adds "
        "no bending edges: both engines integrate the tets alone",
    ],
}


RIGID_NOTES = [
    "bodies: Newton's add_body gives every free body a free joint (and an articulation), so Newton's "
    "boxes have one joint per box (its joint kernel runs over them); inertia's free bodies have no joint",
    "shape-shape collision: both sweep-and-prune broad phases (Newton CollisionPipeline(broad_phase='sap'); "
    "Newton's default is 'explicit', every filtered pair precomputed) with the same detection gap "
    "(builder.rigid_gap = inertia's rigid_contact_margin, 1 cm); the narrow phases differ: Newton's GJK/MPR "
    "writes contact points with a fixed normal and depth, inertia writes points that its solvers re-evaluate "
    "against the other shape's SDF at every force evaluation / iteration (rigid_contact_geometry)",
    "rigid contact capacity: inertia model.contacts() defaults; Newton's CollisionPipeline estimate",
]

RIGID_SEMI_IMPLICIT_NOTES = [
    "rigid contact force: both penalty ke/kd with the same ground and shape materials; inertia's friction is "
    "smoothed Coulomb capped so one step cannot reverse the sliding (mass split among a body's contacts), "
    "Newton's min(kf |v_t|, mu f_n) with its default kf = 1000 N s/m",
    "angular_damping = 0 in Newton (its default 0.05 has no counterpart in inertia)",
]

RIGID_XPBD_NOTES = [
    "Newton XPBD rigid contacts: relaxation 0.8 and a division by the body's contact count (its defaults); "
    "inertia: mass splitting with sqrt(constraints on the body), relaxation 1.0; neither engine runs a "
    "restitution pass (inertia velocity_iterations=0, Newton enable_restitution=False, no shape has restitution)",
]

SCENE_NOTES["boxes"] = ["box poses: the same numbers in both engines (drawn once in BoxesScene.params)"]
SCENE_NOTES["chain"] = [
    "chain links: the same capsules, masses, anchors and axes (Newton: add_link + add_joint_revolute + "
    "add_articulation)",
]
SEMI_IMPLICIT_SCENE_NOTES = {
    "chain": [
        "joint attachment: inertia's springs are scaled by each joint's effective mass (joint_attach_ke = 1e6 "
        "1/s^2 for translation and rotation alike); Newton's joint_attach_ke is one absolute gain for "
        "translation [N/m] and rotation [N m/rad] (it damps rotation with 0.01 kd). The matched gain, ke x "
        "(link mass / 2) = 1.5e4 N/m, blows Newton's chain up at dt = 1 ms, so Newton runs at 0.3 x it "
        "(4.4e3 N/m, kd likewise): over 2,000 steps its joints part by up to 12.5 mm, inertia's by 2.9 mm "
        "(bench_newton.NEWTON_CHAIN_GAIN_FACTOR)",
    ],
}
XPBD_RIGID_SCENE_NOTES = {
    "chain": [
        "Newton XPBD joints: relaxation 0.7 (linear) and 0.4 (angular), its defaults; inertia's hard joints "
        "with mass splitting and relaxation 1.0",
    ],
}


class NewtonRunner:
    """One Newton simulation of a scene: clear forces, collide, step, swap (Newton's example loop)."""

    engine = "newton"

    def __init__(self, scene, size, device, solver: str, dt: float | None = None):
        newton, err = import_newton()
        if newton is None:
            raise RuntimeError(err)
        self.newton = newton
        self.scene, self.size, self.device = scene, tuple(size), wp.get_device(device)
        self.solver_name = solver
        # the first two common notes are about the semi-implicit force models
        self.notes = list(COMMON_NOTES if solver == "semi_implicit" else COMMON_NOTES[2:])
        self.rigid = scene.name in RIGID_SCENES
        if self.rigid:  # the particle notes do not apply; the rigid ones do
            self.notes = list(RIGID_NOTES)
            self.notes += RIGID_SEMI_IMPLICIT_NOTES if solver == "semi_implicit" else RIGID_XPBD_NOTES
            self.notes += (SEMI_IMPLICIT_SCENE_NOTES if solver == "semi_implicit" else XPBD_RIGID_SCENE_NOTES).get(
                scene.name, [])
        self.notes += list(SCENE_NOTES.get(scene.name, []))
        if solver == "xpbd" and not self.rigid:
            self.notes += XPBD_NOTES + XPBD_SCENE_NOTES.get(scene.name, [])
        p = scene.params(size)
        b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
        b.rigid_gap = RIGID_CONTACT_GAP  # inertia's rigid_contact_margin (Newton's default: 0.1 m)
        cfg = newton.ModelBuilder.ShapeConfig(ke=GROUND["ke"], kd=GROUND["kd"], mu=GROUND["mu"])
        b.add_ground_plane(cfg=cfg)
        self.solver_kwargs = {}  # per-scene Newton solver arguments, set by the _build_* methods
        getattr(self, "_build_" + scene.name)(b, p)
        m = b.finalize(device=self.device)
        m.particle_ke, m.particle_kd, m.particle_mu = (PARTICLE_CONTACT[k] for k in ("ke", "kd", "mu"))
        m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_mu = (GROUND[k] for k in ("ke", "kd", "mu"))
        self.model = m
        self.settings = SOLVERS[solver].settings(scene.name)  # the same dt (and iterations) as ours
        if dt is not None:
            self.settings = {**self.settings, "dt": float(dt), "why": "step override"}
        self._static = None
        self.solver = NEWTON_SOLVERS[solver](newton, m, scene.name, **self.solver_kwargs)
        if self.rigid:
            # no particles: no particle-shape contacts; shape pairs by sweep and prune, like inertia's broad phase
            self.pipeline = newton.CollisionPipeline(m, broad_phase="sap", soft_contact_max=0)
        else:
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
            springs = {"add_springs": True, "spring_ke": p["tri_ke"], "spring_kd": XPBD_CLOTH_SPRING_KD}
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
        first = b.tri_count
        b.add_soft_grid(
            pos=wp.vec3(*p["pos"]), rot=wp.quat_identity(), vel=wp.vec3(*p["vel"]),
            dim_x=nx, dim_y=ny, dim_z=nz, cell_x=p["cell"], cell_y=p["cell"], cell_z=p["cell"],
            density=density, k_mu=p["k_mu"], k_lambda=p["k_lambda"], k_damp=p["k_damp"],
            particle_radius=p["radius"], add_surface_mesh_edges=False,
        )
        remove_triangles(b, first)

    def _shape_cfg(self, p):
        return self.newton.ModelBuilder.ShapeConfig(density=p["density"], ke=p["ke"], kd=p["kd"], mu=p["mu"])

    def _build_boxes(self, b, p):
        h, cfg = p["half"], self._shape_cfg(p)
        for pos, rot in p["poses"]:
            body = b.add_body(xform=wp.transform(wp.vec3(*pos), wp.quat(*rot)))  # with a free joint
            b.add_shape_box(body, hx=h, hy=h, hz=h, cfg=cfg)
        if self.solver_name == "semi_implicit":
            self.solver_kwargs = {"angular_damping": 0.0}

    def _build_chain(self, b, p):
        cfg = self._shape_cfg(p)
        joints = []
        prev = -1
        for pose, parent, child, capsule in ChainScene.link_frames(p):
            body = b.add_link(xform=wp.transform(wp.vec3(*pose[0]), wp.quat(*pose[1])))
            b.add_shape_capsule(body, xform=wp.transform(wp.vec3(*capsule[0]), wp.quat(*capsule[1])),
                                radius=p["radius"], half_height=p["half_height"], cfg=cfg)
            joints.append(b.add_joint_revolute(
                prev, body, parent_xform=wp.transform(wp.vec3(*parent[0]), wp.quat(*parent[1])),
                child_xform=wp.transform(wp.vec3(*child[0]), wp.quat(*child[1])), axis=wp.vec3(*p["axis"])))
            prev = body
        b.add_articulation(joints)
        if self.solver_name == "semi_implicit":
            self.solver_kwargs = newton_chain_attachment(p)

    # ------------------------------------------------------------------ stepping
    def counts(self) -> dict:
        return model_counts(self.model)

    def step(self):
        self.step_fresh(self.state_0, self.state_1)
        self.state_0, self.state_1 = self.state_1, self.state_0

    def step_fresh(self, state_in, state_out):
        state_in.clear_forces()
        self.pipeline.collide(state_in, self.contacts)
        self.solver.step(state_in, state_out, self.control, self.contacts, self.dt)

    def new_states(self):
        return self.model.state(), self.model.state()

    def _rows(self, particles, bodies, width):
        parts = [a.numpy().reshape(-1, width) for a in (particles, bodies) if a is not None]
        return np.concatenate(parts) if parts else np.zeros((0, width))

    def positions(self):
        """Particle positions, then the bodies' centres of mass (world) [m] (as InertiaRunner)."""
        q = self._rows(self.state_0.particle_q, None, 3)
        if self.model.body_count:
            q = np.concatenate([q, body_com_positions(self.state_0.body_q.numpy(), self.model.body_com.numpy())])
        return q

    def velocities(self):
        """Particle velocities, then the bodies' centre-of-mass velocities (Newton 1.x body_qd: linear first)."""
        v = self._rows(self.state_0.particle_qd, None, 3)
        if self.model.body_count:
            v = np.concatenate([v, self.state_0.body_qd.numpy().reshape(-1, 6)[:, :3]])
        return v

    def observation(self) -> dict:
        """bench_observe's observation (as InertiaRunner's; Newton's free joints of the boxes have no gap)."""
        from bench_observe import maximal_observation

        m = self.model
        if self._static is None:
            jt = self.newton.JointType
            joints = None
            if m.joint_count:
                kinds = m.joint_type.numpy()
                joints = (m.joint_parent.numpy(), m.joint_child.numpy(), m.joint_X_p.numpy(), m.joint_X_c.numpy(),
                          np.isin(kinds, (int(jt.REVOLUTE), int(jt.BALL), int(jt.FIXED))))
            zeros = np.zeros(0)
            self._static = (m.particle_mass.numpy() if m.particle_count else zeros,
                            m.body_mass.numpy() if m.body_count else zeros,
                            m.body_inertia.numpy() if m.body_count else np.zeros((0, 3, 3)),
                            m.body_com.numpy() if m.body_count else np.zeros((0, 3)), joints)
        pm, bm, bi, bc, joints = self._static
        s = self.state_0
        pq = s.particle_q.numpy() if m.particle_count else np.zeros((0, 3))
        pqd = s.particle_qd.numpy() if m.particle_count else np.zeros((0, 3))
        bq = s.body_q.numpy() if m.body_count else np.zeros((0, 7))
        bqd = s.body_qd.numpy() if m.body_count else np.zeros((0, 6))
        return maximal_observation(pq, pqd, pm, bq, bqd, bm, bi, bc, joints)

    def contact_counts(self) -> dict:
        n = int(self.contacts.soft_contact_count.numpy()[0])
        rigid = int(self.contacts.rigid_contact_count.numpy()[0])
        return {"particle_shape": n, "particle_pairs": None, "rigid_contacts": rigid}


def remove_triangles(builder, first: int) -> None:
    """Drop the triangles from index ``first`` on from a Newton builder (every per-triangle list)."""
    for name in ("tri_indices", "tri_poses", "tri_activations", "tri_materials", "tri_areas", "tri_color",
                 "tri_opacity"):
        lst = getattr(builder, name, None)
        if lst is not None:
            del lst[first:]
    if builder.tri_count != first:
        raise RuntimeError(f"Newton builder still has {builder.tri_count} triangles (expected {first})")


def find_newton(no_newton: bool = False):
    """(module or None, status line)."""
    if no_newton:
        return None, "skipped (--no-newton)"
    mod, err = import_newton()
    if mod is None:
        return None, f"not available ({err}); pip install -e '.[newton]'"
    return mod, f"newton {mod.__version__}"


# inertia's rigid_contact_margin (engine/builder.py): shape pairs within 1 cm are kept
RIGID_CONTACT_GAP = 0.01


# Newton's chain at dt = 1 ms is unstable at the gain that matches inertia's (below): over 2,000 steps of the
# 32-link chain (anchor gaps sampled every 20 steps) x1.0 reached 2e5 m/s, x0.7 parted its joints by 374 mm
# at 271 m/s, x0.5 by 24 mm, x0.3 by 12.5 mm, x0.2 by 15 mm (inertia at ke = 1e6: 2.9 mm; the chain's tip
# whips at ~17 m/s in every run). So Newton runs at 0.3 x the matched gain: bounded, and the tightest chain.
NEWTON_CHAIN_GAIN_FACTOR = 0.3
# Newton's damping stays at what matches inertia's earlier kd of 100 1/s: the matched 500 (inertia's kd since
# 2026-12-06, see ChainScene.params) makes Newton's explicit damper gain energy (+135 % within 1 s at dt = 1 ms)
NEWTON_CHAIN_KD = 1.0e2  # [1/s], made absolute as the stiffness is


def newton_chain_attachment(p) -> dict:
    """Newton SolverSemiImplicit joint gains for the chain: inertia's, made absolute, x NEWTON_CHAIN_GAIN_FACTOR.

    inertia scales its attachment springs by the joint's effective mass: F = -m_eff (ke d + kd v), ke in
    [1/s^2]. Newton applies one absolute gain [N/m, and N m/rad on rotation, which the chain's light links
    cannot take at this step]. Between two equal links m_eff along the chain is m / 2, so the matched gains
    are ke x m / 2 and kd x m / 2 (m from the capsule's volume at the scene's density).
    """
    r, hh = p["radius"], p["half_height"]
    mass = p["density"] * (math.pi * r * r * 2.0 * hh + 4.0 / 3.0 * math.pi * r ** 3)
    f = NEWTON_CHAIN_GAIN_FACTOR
    return {"joint_attach_ke": f * p["joint_attach_ke"] * 0.5 * mass,
            "joint_attach_kd": f * NEWTON_CHAIN_KD * 0.5 * mass, "angular_damping": 0.0}
