"""A fingerprint of what the engine computes: SHA-256 of trajectories and gradients of every benchmark scene.

For refactors that must leave results bitwise unchanged: run it before and after on the same machine and
compare (``python benchmarks/fingerprint.py --out before.json``, then ``--compare before.json``). It
covers each scene of ``bench_scenes`` in both solvers (collision, every force and constraint stage,
bodies and joints), many worlds built by ``replicate`` and a rotated ``add_builder`` (their reset too),
and tape gradients of a cloth, a soft block and a rigid scene through ``inertia.Rollout``, and of every
element kind's Model arrays on a plain ``wp.Tape``. Hashes
depend on the CPU's rounding, so compare on one machine only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np
import warp as wp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_scenes import SCENES, SOLVERS, InertiaRunner  # noqa: E402

SIZES = {"cloth": (6, 6), "granular": (4, 4, 3), "soft": (3, 2, 2), "boxes": (2, 2, 2), "chain": (6,)}


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def state_digest(state) -> str:
    arrays = [getattr(state, n).numpy() for n in ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q",
                                                  "joint_qd")]
    assert all(np.isfinite(a).all() for a in arrays), "a fingerprint scene went non-finite: a weak fingerprint"
    return digest(*arrays)


def scenes(steps: int) -> dict:
    out = {}
    for name, scene in SCENES.items():
        if name not in SIZES:
            continue  # the arm (URDF, sim_rate.py's) is not fingerprinted
        for solver in (s for s in SOLVERS if SOLVERS[s].applies_to(name)):
            r = InertiaRunner(scene, SIZES[name], "cpu", solver)
            for _ in range(steps):
                r.step()
            out[f"{name}/{solver}"] = state_digest(r.state_0)
    return out


def worlds(steps: int) -> dict:
    import inertia

    robot = inertia.ModelBuilder()
    body = robot.add_body(xform=((0.0, 0.0, 0.6), (0.0, 0.0, 0.0, 1.0)), angular_velocity=(0.2, 0.1, 0.0))
    robot.add_shape_box(body, hx=0.1, hy=0.08, hz=0.05)
    link = robot.add_body(xform=((0.3, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
    robot.add_shape_capsule(link, radius=0.03, half_height=0.12)
    robot.add_joint_revolute(-1, link, parent_xform=((0.0, 0.0, 1.0), (0, 0, 0, 1)),
                             child_xform=((-0.3, 0.0, 0.0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=5.0,
                             target_kd=0.2, limit_lower=-1.0, limit_upper=1.0)
    robot.add_cloth_grid(2, 2, pos=(-0.5, 0.0, 0.8), mass=0.02)
    robot.add_soft_grid(1, 1, 1, pos=(0.5, 0.5, 0.3), cell_x=0.1, cell_y=0.1, cell_z=0.1, density=500.0)
    robot.add_shape_sphere(xform=((0.0, 0.6, 0.2), (0, 0, 0, 1)), radius=0.1)  # static, in the robot's world
    out = {}
    for solver in (s for s in SOLVERS if SOLVERS[s].scenes is None):  # the worlds hold particles too
        b = inertia.ModelBuilder()
        b.add_ground_plane()
        b.replicate(robot, 3, spacing=2.0)
        half = math.sqrt(0.5)
        b.add_builder(robot, xform=((0.0, 5.0, 0.0), (0.0, 0.0, half, half)))  # rotated copy
        model = b.finalize()
        s0, s1 = model.state(), model.state()
        control, contacts = model.control(), model.contacts()
        control.joint_target_pos.assign(np.linspace(0.2, 0.8, model.joint_dof_count).astype(np.float32))
        make = SOLVERS[solver]
        slv = make(model, "boxes")
        dt = make.settings("boxes")["dt"]
        for _ in range(steps):
            model.collide(s0, contacts)
            slv.step(s0, s1, control, contacts, dt)
            s0, s1 = s1, s0
        out[f"worlds/{solver}"] = state_digest(s0)
        model.reset_worlds(s0, np.array([1, 0, 1, 0]))
        out[f"worlds/{solver}/reset"] = state_digest(s0)
        arrays = {k: a for k, a in vars(model).items() if isinstance(a, wp.array) and not k.startswith("_")}
        if solver == "semi_implicit":  # every model array on its own: a field added later is reported as new
            out.update({f"model/{k}": digest(arrays[k].numpy()) for k in sorted(arrays)})
    return out


def gradients() -> dict:
    import torch

    import inertia

    out = {}
    b = inertia.ModelBuilder()
    b.add_ground_plane(mu=0.4)
    b.add_cloth_grid(4, 4, pos=(0.0, 0.0, 0.3))
    b.add_soft_grid(1, 1, 2, pos=(0.8, 0.0, 0.1), density=300.0, k_mu=2e4, k_lambda=4e4)
    box = b.add_body(xform=((-0.5, 0.0, 0.2), (0, 0, 0, 1)), linear_velocity=(1.0, 0.0, 0.0))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
    model = b.finalize(requires_grad=True)
    params = ("tri_materials", "tet_materials", "shape_material_mu", "body_mass", "particle_mass")
    for name, solver in (("semi_implicit", inertia.SemiImplicitSolver(model)),
                         ("xpbd", inertia.XPBDSolver(model, iterations=4))):
        # (the step each scene's defaults are stable at: 40 substeps semi-implicit, 10 XPBD)
        ro = inertia.Rollout(model, solver, 4, 1.0 / 60.0, 40 if name == "semi_implicit" else 10, params=params,
                             checkpoint_every=3)
        values = {p: wp.to_torch(getattr(model, p)).detach().clone().requires_grad_(True) for p in params}
        qd0 = torch.zeros((model.particle_count, 3), requires_grad=True)
        res = ro(qd0=qd0, params=values)
        loss = res.particle_q.double().sum() + res.body_q.double()[..., :3].sum() + 0.1 * res.particle_qd.double().sum()
        loss.backward()
        assert torch.isfinite(loss) and all(torch.isfinite(values[p].grad).all() for p in params)
        out[f"rollout/{name}"] = digest(res.particle_q.detach().numpy(), res.body_q.detach().numpy(),
                                        qd0.grad.numpy(), *(values[p].grad.numpy() for p in params))
    return out


ELEMENT_PARAMS = ("spring_rest_length", "spring_stiffness", "spring_damping", "tri_poses", "tri_areas", "tri_materials",
                  "edge_rest_angle", "edge_bending_properties", "tet_poses", "tet_volumes", "tet_materials",
                  "particle_inv_mass")


def element_gradients(steps: int = 20) -> dict:
    """Every element kind (springs, membranes, bending edges, tets) in both solvers on one wp.Tape: the final
    state and the gradient of a fixed weighting of the final positions to each of their Model arrays and to
    the initial state (the scenes above have no springs, and the rollout covers only materials)."""
    import inertia

    out = {}
    for name in ("semi_implicit", "xpbd"):
        b = inertia.ModelBuilder()
        b.add_cloth_grid(4, 3, pos=(0.0, 0.0, 1.0), cell_x=0.1, cell_y=0.1, mass=0.05, fix_left=True, tri_kd=5.0,
                         edge_ke=0.5, edge_kd=0.05, add_springs=True, spring_ke=300.0, spring_kd=0.3)
        b.add_soft_grid(2, 2, 1, pos=(1.0, 0.0, 0.5), k_mu=2.0e4, k_lambda=3.0e4, k_damp=5.0, fix_left=True)
        model = b.finalize(requires_grad=True)
        solver, dt = ((inertia.SemiImplicitSolver(model), 1.0 / 2400.0) if name == "semi_implicit"
                      else (inertia.XPBDSolver(model, iterations=6), 1.0 / 600.0))
        states = [model.state(requires_grad=True) for _ in range(steps + 1)]
        q0 = states[0].particle_q.numpy()
        q0[:, 2] += 0.01 * np.sin(np.arange(len(q0)))  # out of its rest shape: every element is loaded
        states[0].particle_q.assign(q0)
        tape = wp.Tape()
        with tape:
            for k in range(steps):
                solver.step(states[k], states[k + 1], None, None, dt)
        weights = wp.array(np.cos(np.arange(3 * len(q0))).reshape(-1, 3).astype(np.float32), dtype=wp.vec3)
        tape.backward(grads={states[-1].particle_q: weights})
        out[f"elements/{name}"] = digest(states[-1].particle_q.numpy(), states[-1].particle_qd.numpy(),
                                         *(getattr(model, p).grad.numpy() for p in ELEMENT_PARAMS),
                                         states[0].particle_q.grad.numpy(), states[0].particle_qd.grad.numpy())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="steps per scene")
    ap.add_argument("--out", help="write the fingerprint as JSON here")
    ap.add_argument("--compare", help="a JSON written by --out: report every hash that differs")
    ap.add_argument("--tiny", action="store_true", help="3 steps (the smoke test)")
    args = ap.parse_args(argv)
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    steps = 3 if args.tiny else args.steps
    result = {**scenes(steps), **worlds(steps), **gradients(), **element_gradients(3 if args.tiny else 20)}
    for k, v in result.items():
        print(f"{k:28s} {v}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    if args.compare:
        with open(args.compare) as f:
            ref = json.load(f)
        diff = sorted(k for k in set(ref) & set(result) if ref[k] != result[k])
        missing, new = sorted(set(ref) - set(result)), sorted(set(result) - set(ref))
        if new:
            print(f"new (not compared): {new}")
        print("identical" if not (diff or missing) else f"DIFFERENT: {diff}, missing: {missing}")
        return 1 if diff or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
