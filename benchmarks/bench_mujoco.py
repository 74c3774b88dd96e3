"""MuJoCo twins of the rigid scenes (optional: used only when ``import mujoco`` works; the ``bench`` extra).

MuJoCo is what a robotics user compares with on a CPU. Each twin is built from ``scene.params(size)``,
the numbers the inertia scene uses, and stepped with ``mj_step`` at MuJoCo's defaults (Euler integrator,
Newton constraint solver, pyramidal friction cones, soft contacts of solref 0.02 s) except the time step
and the friction coefficient. ``notes`` says what differs from inertia's scene.

* ``chain``: the same capsules (radius, length, density 1000 kg/m^3), nested bodies hinged about y at the
  same anchors, a ground plane; MuJoCo excludes parent-child contacts as inertia filters jointed pairs.
* ``boxes``: the same 64 poses (``BoxesScene.params``), free bodies with 10 cm box geoms, density 1000.
* ``arm``: the same URDF file loaded by MuJoCo's own URDF compiler (its masses, inertias, limits and
  ``<dynamics damping>``), base raised as in inertia, collisions switched off, the same initial pose.
"""

from __future__ import annotations

import numpy as np


def import_mujoco():
    """(module, None) when MuJoCo imports, else (None, reason)."""
    try:
        import mujoco  # noqa: PLC0415
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"
    return mujoco, None


NOTES = {
    "*": ["MuJoCo: reduced coordinates (joints cannot part), Euler integrator with implicit joint damping, "
          "soft constraints (solref 0.02 s, solimp defaults) for contacts and limits; mj_step defaults but dt and "
          "friction"],
    "chain": ["MuJoCo chain: capsules fromto along x, nested bodies with hinges about y; contact friction 0.5 "
              "(sliding; MuJoCo's torsional/rolling defaults 0.005/0.0001); ground plane"],
    "boxes": ["MuJoCo boxes: free joints (reduced coordinates: 6 dofs each, as inertia's free bodies), "
              "friction 0.5, MuJoCo's soft contact instead of inertia's penalty (semi-implicit) or hard (XPBD) one"],
    "arm": ["MuJoCo arm: the URDF compiled by MuJoCo (fusestatic merges the welded base into the world), "
            "contype = conaffinity = 0 (no contacts, as inertia's collide_shapes=False), URDF joint damping "
            "0.5 N m s/rad (implicit in MuJoCo; inertia: a drive with ke = 0)"],
}


def _quat_wxyz(q_xyzw) -> str:
    x, y, z, w = q_xyzw
    return f"{w:.9g} {x:.9g} {y:.9g} {z:.9g}"


def chain_xml(p) -> str:
    """MJCF of the chain: link i is a body at its parent anchor, hinged about y, its capsule along +x."""
    link, r, hh = p["link"], p["radius"], p["half_height"]
    px, py, pz = p["pivot"]
    mu = p["mu"]
    body_open, body_close = [], []
    for i in range(p["links"]):
        pos = f"{px:.9g} {py:.9g} {pz:.9g}" if i == 0 else f"{link:.9g} 0 0"
        body_open.append(
            f'<body name="link{i}" pos="{pos}"><joint name="j{i}" type="hinge" axis="0 1 0"/>'
            f'<geom type="capsule" fromto="{0.5 * link - hh:.9g} 0 0 {0.5 * link + hh:.9g} 0 0" size="{r:.9g}" '
            f'density="{p["density"]:.9g}" friction="{mu:.9g} 0.005 0.0001"/>')
        body_close.append("</body>")
    return (f'<mujoco model="chain"><option timestep="0.001"/><worldbody>'
            f'<geom name="ground" type="plane" size="0 0 1" friction="{mu:.9g} 0.005 0.0001"/>'
            + "".join(body_open) + "".join(body_close) + "</worldbody></mujoco>")


def boxes_xml(p) -> str:
    h, mu = p["half"], p["mu"]
    bodies = "".join(
        f'<body pos="{x:.9g} {y:.9g} {z:.9g}" quat="{_quat_wxyz(q)}"><freejoint/>'
        f'<geom type="box" size="{h:.9g} {h:.9g} {h:.9g}" density="{p["density"]:.9g}" '
        f'friction="{mu:.9g} 0.005 0.0001"/></body>'
        for (x, y, z), q in p["poses"])
    return (f'<mujoco model="boxes"><option timestep="0.001"/><worldbody>'
            f'<geom name="ground" type="plane" size="0 0 1" friction="{mu:.9g} 0.005 0.0001"/>{bodies}'
            f"</worldbody></mujoco>")


class MuJoCoRunner:
    """One MuJoCo simulation of a rigid scene; the runner interface of bench_scenes.InertiaRunner (no graph:
    the fast mode is ``mj_step(m, d, nstep)``, ``native_steps``)."""

    engine = "mujoco"
    device = None

    def __init__(self, scene, size, dt: float | None = None, solver: str = "mujoco"):
        mujoco, err = import_mujoco()
        if mujoco is None:
            raise RuntimeError(f"MuJoCo does not import: {err}")
        self.mj, self.scene, self.size, self.solver_name = mujoco, scene, tuple(size), solver
        p = scene.params(self.size)
        self.notes = list(NOTES["*"]) + list(NOTES.get(scene.name, []))
        if scene.name == "chain":
            m = mujoco.MjModel.from_xml_string(chain_xml(p))
        elif scene.name == "boxes":
            m = mujoco.MjModel.from_xml_string(boxes_xml(p))
        elif scene.name == "arm":
            m = mujoco.MjModel.from_xml_path(p["urdf"])
            m.geom_contype[:] = 0
            m.geom_conaffinity[:] = 0
            roots = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
            for b in roots:
                m.body_pos[b, 2] += p["base_height"]
            if not np.allclose(m.dof_damping, p["damping"]):
                raise RuntimeError(f"MuJoCo read joint damping {m.dof_damping}, expected {p['damping']}")
        else:
            raise ValueError(f"no MuJoCo twin of scene {scene.name!r}")
        self.dt = float(dt) if dt is not None else 1.0e-3
        m.opt.timestep = self.dt
        self.model, self.data = m, mujoco.MjData(m)
        if scene.name == "arm":
            self.data.qpos[:] = p["q0"]
        mujoco.mj_forward(m, self.data)
        self.settings = {"dt": self.dt, "kwargs": {"integrator": "Euler (default)", "solver": "Newton (default)"},
                         "why": "MuJoCo defaults but dt and friction"}
        self._moving = m.body_mass[1:] > 0.0

    def counts(self) -> dict:
        m = self.model
        return {"particles": 0, "springs": 0, "triangles": 0, "edges": 0, "tets": 0, "shapes": int(m.ngeom),
                "bodies": int(m.nbody - 1), "joints": int(m.njnt), "dofs": int(m.nv)}

    def step(self):
        self.mj.mj_step(self.model, self.data)

    def native_steps(self, n: int):
        self.mj.mj_step(self.model, self.data, nstep=int(n))

    def positions(self):
        return np.array(self.data.xipos[1:], dtype=np.float64)

    def _velocities6(self):
        mj, m, d = self.mj, self.model, self.data
        out = np.zeros((m.nbody - 1, 6))
        res = np.zeros(6)
        for b in range(1, m.nbody):  # (angular, linear) at the body's centre of mass, world orientation
            mj.mj_objectVelocity(m, d, mj.mjtObj.mjOBJ_BODY, b, res, 0)
            out[b - 1] = res
        return out

    def velocities(self):
        return self._velocities6()[:, 3:]

    def observation(self) -> dict:
        m, d = self.model, self.data
        v6 = self._velocities6()
        rot = np.array(d.ximat[1:], dtype=np.float64).reshape(-1, 3, 3)
        inertia = np.zeros((m.nbody - 1, 3, 3))
        idx = np.arange(3)
        inertia[:, idx, idx] = m.body_inertia[1:]
        return {"x": self.positions(), "v": v6[:, 3:], "m": np.array(m.body_mass[1:], dtype=np.float64),
                "w": v6[:, :3], "I": rot @ inertia @ rot.transpose(0, 2, 1), "gaps": None}

    def contact_counts(self) -> dict:
        return {"particle_shape": 0, "particle_pairs": 0, "rigid_contacts": int(self.data.ncon)}

    def instability(self):
        """None, or why the result is not to be kept: MuJoCo *resets* a simulation whose accelerations, positions
        or velocities go non-finite or huge (mjWARN_BADQACC / BADQPOS / BADQVEL) and goes on from the initial
        state, which would otherwise read as a sane motion; a full contact or constraint buffer drops contacts."""
        w = self.mj.mjtWarning
        bad = {"BADQACC": w.mjWARN_BADQACC, "BADQPOS": w.mjWARN_BADQPOS, "BADQVEL": w.mjWARN_BADQVEL,
               "CONTACTFULL": w.mjWARN_CONTACTFULL, "CNSTRFULL": w.mjWARN_CNSTRFULL}
        hits = {k: int(self.data.warning[int(v)].number) for k, v in bad.items()}
        hits = {k: n for k, n in hits.items() if n}
        if not hits:
            return None
        return "MuJoCo warned " + ", ".join(f"mjWARN_{k} x{n}" for k, n in hits.items()) + " (unstable: it resets)"
