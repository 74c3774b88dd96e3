"""Batched rollouts of many worlds (``Rollout(..., batched=True)``): per world, the single-world results.

Each world of a W-world model is simulated once more on its own (a model
built from the same world alone, the shared ground included) with that
world's slice of every input, and its trajectory and gradients (initial
state, per-frame controls, per-world parameters) are compared with the
batched rollout's. Every world gets different initial velocities, controls,
masses, friction, drive gains or stiffness and gravity, and the worlds overlap
in space, so a mix-up between worlds, or a contact between them, would show.

Why bitwise on the CPU: the worlds never interact, each entity's kernels read
only its own world's data, and Warp's CPU backend runs a launch's threads in
index order, so every float operation and every accumulation (forces and
adjoints added with atomics, contact after contact) happens in the same order
as in the single-world model, which holds the same world at the same place.
The one sum that does mix worlds is the gradient of a parameter that all of
them share (the static ground's friction), which adds the worlds' parts in
another order: that one is compared to float32 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import inertia
from conftest import DEVICE

W = 3  # worlds
OFFSET = 0.05  # [m] between consecutive worlds: they overlap, so contacts across worlds would be found


def rng_tensor(rng, low, high, shape):
    return torch.tensor(rng.uniform(low, high, shape), dtype=torch.float32)


# ------------------------------------------------------------------ scenes: one world at a time
def add_rigid_world(b, w: int):
    """A box sliding on the ground beside a pendulum on a PD drive (a revolute joint to the world)."""
    x = OFFSET * w
    box = b.add_body(xform=((x - 0.04, 0.0, 0.1), (0, 0, 0, 1)), linear_velocity=(1.0, 0.2, 0.0))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=100.0, mu=0.3)
    bar = b.add_body(xform=((x + 0.25, 0.0, 1.0), (0, 0, 0, 1)))
    b.add_shape_box(bar, hx=0.25, hy=0.02, hz=0.02)
    b.add_joint_revolute(-1, bar, parent_xform=((x, 0.0, 1.0), (0, 0, 0, 1)),
                         child_xform=((-0.25, 0.0, 0.0), (0, 0, 0, 1)), axis=(0, 1, 0), target_ke=2.0,
                         target_kd=0.05)


def add_particle_world(b, w: int):
    """Three particles on two springs, the lowest falling onto the ground (particle collisions on)."""
    x, z = OFFSET * w, 0.07
    p0 = b.add_particle((x, 0.0, z), vel=(0.3, 0.0, -1.0), mass=1.0, radius=0.05)
    p1 = b.add_particle((x + 0.25, 0.0, z + 0.1), vel=(0.0, 0.1, 0.0), mass=0.5, radius=0.05)
    p2 = b.add_particle((x + 0.5, 0.05, z + 0.2), vel=(-0.2, 0.0, 0.1), mass=2.0, radius=0.05)
    b.add_spring(p0, p1, ke=200.0, kd=0.5)
    b.add_spring(p1, p2, ke=300.0, kd=0.2)


SCENES = {"rigid": add_rigid_world, "particles": add_particle_world}


def build(scene: str, worlds):
    """A model of the given worlds (by index), in that order, on one shared ground plane."""
    b = inertia.ModelBuilder()
    b.contact_smoothing = 1e-3
    b.add_ground_plane(ke=2.0e3, kd=5.0, mu=0.3)  # static: world -1, shared by all worlds
    for i, w in enumerate(worlds):
        b.current_world = i
        SCENES[scene](b, w)
    b.num_worlds = len(worlds)
    return b.finalize(device=DEVICE, requires_grad=True)


SOLVERS = {"semi_implicit": inertia.SemiImplicitSolver, "xpbd": lambda m: inertia.XPBDSolver(m, 4)}
PARAMS = {"rigid": ("shape_material_mu", "body_mass", "joint_target_ke"),
          "particles": ("spring_stiffness", "particle_mass", "gravity")}


def batched_inputs(scene: str, model, frames: int, seed: int) -> dict:
    """Different initial velocities, controls and parameters in every world, with a leading world dimension."""
    rng = np.random.default_rng(seed)
    if scene == "rigid":
        qd0 = torch.tensor(model.body_qd.numpy()).reshape(W, 2, 6)
        mass = torch.tensor(model.body_mass.numpy()).reshape(W, 2)
        return {"body_qd0": qd0 + rng_tensor(rng, -0.2, 0.2, (W, 2, 6)),
                "joint_target_pos": rng_tensor(rng, 0.5, 1.5, (frames, W, 1)),
                "body_f": rng_tensor(rng, -0.5, 0.5, (frames, W, 2, 6)),
                "shape_material_mu": rng_tensor(rng, 0.2, 0.5, (W, 2)),
                "body_mass": mass * rng_tensor(rng, 0.8, 1.25, (W, 2)),
                "joint_target_ke": rng_tensor(rng, 1.5, 2.5, (W, 1))}
    qd0 = torch.tensor(model.particle_qd.numpy()).reshape(W, 3, 3)
    mass = torch.tensor(model.particle_mass.numpy()).reshape(W, 3)
    return {"qd0": qd0 + rng_tensor(rng, -0.3, 0.3, (W, 3, 3)),
            "particle_f": rng_tensor(rng, -0.5, 0.5, (frames, W, 3, 3)),
            "spring_stiffness": rng_tensor(rng, 150.0, 350.0, (W, 2)),
            "particle_mass": mass * rng_tensor(rng, 0.8, 1.25, (W, 3)),
            "gravity": torch.tensor([0.0, 0.0, -9.81]) + rng_tensor(rng, -1.0, 1.0, (W, 3))}


PER_FRAME = ("joint_target_pos", "body_f", "particle_f")


def world_part(name: str, value: torch.Tensor, w: int) -> torch.Tensor:
    """World w's part of a batched input or gradient."""
    return value[:, w] if name in PER_FRAME else value[w: w + 1] if name == "gravity" else value[w]


def call(ro, scene: str, x: dict):
    params = {n: x[n] for n in PARAMS[scene]}
    if scene == "rigid":
        out = ro(body_qd0=x["body_qd0"], body_f=x["body_f"], joint_target_pos=x["joint_target_pos"], params=params)
        return out.body_q, out.body_qd
    return ro(None, x["qd0"], x["particle_f"], params)


def run(ro, scene: str, inputs: dict, wq: torch.Tensor, wqd: torch.Tensor):
    """Trajectories and the gradient of sum(wq * q) + sum(wqd * qd) w.r.t. every input."""
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inputs.items()}
    q, qd = call(ro, scene, leaves)
    ((q.double() * wq.double()).sum() + (qd.double() * wqd.double()).sum()).backward()
    return q.detach(), qd.detach(), {k: v.grad for k, v in leaves.items()}


@pytest.mark.parametrize("solver", ["semi_implicit", "xpbd"])
@pytest.mark.parametrize("scene", ["rigid", "particles"])
def test_batched_rollout_equals_single_world_rollouts_bitwise(scene, solver):
    frames, substeps = 5, 5
    frame_dt = substeps / 480.0  # 1/480 s steps: stable for the stiff contact and joint springs
    model = build(scene, range(W))
    ro = inertia.Rollout(model, SOLVERS[solver](model), frames, frame_dt, substeps, params=PARAMS[scene],
                         checkpoint_every=2, batched=True)
    counts = ro.world_views.counts
    assert counts["body" if scene == "rigid" else "particle"] == (2 if scene == "rigid" else 3)
    summary = model.world_counts()  # the model's own account of its layout agrees
    assert (summary["particles"], summary["bodies"], summary["joint_dofs"]) == (
        counts["particle"], counts["body"], counts["joint_dof"])
    inputs = batched_inputs(scene, model, frames, seed=1)
    per_world = (2, 7) if scene == "rigid" else (3, 3)
    rng = np.random.default_rng(2)
    wq = rng_tensor(rng, -1.0, 1.0, (frames + 1, W) + per_world)
    wqd = rng_tensor(rng, -1.0, 1.0, (frames + 1, W, per_world[0], 6 if scene == "rigid" else 3))
    q, qd, grads = run(ro, scene, inputs, wq, wqd)
    assert q.shape == (frames + 1, W) + per_world and qd.shape == wqd.shape
    soft, _, _, rigid = ro.last_contact_peak
    assert (rigid if scene == "rigid" else soft) >= W, ro.last_contact_peak  # every world touches the ground
    moved = (q[-1] - q[0]).abs().amax(dim=(1, 2))
    assert bool((moved > 1e-3).all()), moved
    for w in range(1, W):  # the worlds really differ, so a swap of two would be seen
        assert (q[-1, w] - q[-1, 0]).abs().max() > 1e-3

    ground_mu = float(model.shape_material_mu.numpy()[0])
    for w in range(W):
        single = build(scene, [w])
        ro1 = inertia.Rollout(single, SOLVERS[solver](single), frames, frame_dt, substeps, params=PARAMS[scene],
                              checkpoint_every=2)
        x1 = {k: world_part(k, v, w) for k, v in inputs.items()}
        if scene == "rigid":  # the single model's shapes: the ground (its model value), then the world's own
            x1["shape_material_mu"] = torch.cat([torch.tensor([ground_mu]), x1["shape_material_mu"]])
        q1, qd1, g1 = run(ro1, scene, x1, wq[:, w], wqd[:, w])
        assert torch.equal(q1, q[:, w]) and torch.equal(qd1, qd[:, w]), f"world {w}: trajectories differ"
        if scene == "rigid":
            g1["shape_material_mu"] = g1["shape_material_mu"][1:]
        for name, g in grads.items():
            assert bool(torch.isfinite(g1[name]).all()) and g1[name].abs().max() > 0, (name, w)
            assert torch.equal(g1[name], world_part(name, g, w)), f"world {w}: d loss / d {name} differs"


def test_shared_ground_gradient_sums_the_worlds_and_flat_params_still_work():
    """Friction given flat (every shape, the shared ground included) instead of per world: the worlds' own
    shapes get the same gradients bitwise, and the ground's gradient is the sum of the single-world ones (to
    float32 rounding: the worlds' parts are added in another order)."""
    frames, substeps, frame_dt = 4, 5, 5 / 480.0
    model = build("rigid", range(W))
    make = lambda m, **kw: inertia.Rollout(m, inertia.SemiImplicitSolver(m), frames, frame_dt, substeps,
                                           params=("shape_material_mu",), **kw)
    inputs = batched_inputs("rigid", model, frames, seed=5)
    mu_worlds = inputs["shape_material_mu"]
    ground_mu = torch.tensor(model.shape_material_mu.numpy()[:1])  # what the per-world form leaves it at
    wq = rng_tensor(np.random.default_rng(6), -1.0, 1.0, (frames + 1, W, 2, 7))
    ro = make(model, batched=True)
    grads = []
    for mu in (mu_worlds, torch.cat([ground_mu, mu_worlds.reshape(-1)])):  # per world, then flat
        leaf = mu.clone().requires_grad_(True)
        out = ro(body_qd0=inputs["body_qd0"], params={"shape_material_mu": leaf})
        (out.body_q.double() * wq.double()).sum().backward()
        grads.append(leaf.grad)
    assert torch.equal(grads[1][1:].reshape(W, 2), grads[0])
    ground = 0.0
    for w in range(W):
        single = build("rigid", [w])
        leaf = torch.cat([ground_mu, mu_worlds[w]]).requires_grad_(True)
        out = make(single)(body_qd0=inputs["body_qd0"][w], params={"shape_material_mu": leaf})
        (out.body_q.double() * wq[:, w].double()).sum().backward()
        assert torch.equal(leaf.grad[1:], grads[0][w])
        ground += float(leaf.grad[0])
    print(f"ground friction gradient: batched {float(grads[1][0]):.9g}, sum of single worlds {ground:.9g}")
    assert ground != 0.0 and float(grads[1][0]) == pytest.approx(ground, rel=1e-5)


def test_final_output_and_closed_loop_steps_keep_the_world_dimension():
    model = build("particles", range(W))
    frames = 3
    inputs = batched_inputs("particles", model, frames, seed=7)
    full = inertia.Rollout(model, inertia.SemiImplicitSolver(model), frames, 1 / 96, 5, batched=True)
    q_traj, qd_traj = full(None, inputs["qd0"], inputs["particle_f"])
    final = inertia.Rollout(model, inertia.SemiImplicitSolver(model), frames, 1 / 96, 5, output="final",
                            batched=True)
    q_end, qd_end = final(None, inputs["qd0"], inputs["particle_f"])
    assert q_end.shape == (W, 3, 3) and torch.equal(q_end, q_traj[-1]) and torch.equal(qd_end, qd_traj[-1])
    one = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 1, 1 / 96, 5, batched=True)
    q, qd = torch.tensor(model.particle_q.numpy()).reshape(W, 3, 3), inputs["qd0"]
    for t in range(frames):
        q, qd = one.step(q, qd, inputs["particle_f"][t])
    assert q.shape == (W, 3, 3) and torch.equal(q, q_traj[-1]) and torch.equal(qd, qd_traj[-1])


def test_per_world_gravity():
    """Three worlds of one free particle, two with the same gravity and one with another: each falls by its
    own gravity (the symplectic Euler closed form), equal gravity gives identical worlds, and each world's
    gravity gets the gradient of its own particle only."""
    b = inertia.ModelBuilder()
    b.particle_collide = False
    for w in range(3):
        b.current_world = w
        b.add_particle((0.0, 0.0, 1.0), mass=1.0)
    b.num_worlds = 3
    model = b.finalize(device=DEVICE, requires_grad=True)
    frames, dt = 6, 1 / 60
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), frames, dt, params=("gravity",), batched=True)
    g = torch.tensor([[0.0, 0.0, -9.81], [0.0, -1.62, 0.0], [0.0, 0.0, -9.81]], requires_grad=True)
    q, _ = ro(params={"gravity": g})
    # symplectic Euler: x_n = x_0 + g dt^2 n (n + 1) / 2
    expected = torch.tensor([0.0, 0.0, 1.0]) + g.detach() * dt * dt * frames * (frames + 1) / 2
    assert torch.allclose(q[-1, :, 0], expected, atol=1e-5)
    assert torch.equal(q[:, 0], q[:, 2]) and not torch.equal(q[:, 0], q[:, 1])
    q[-1, 1, 0, 1].backward()
    assert float(g.grad[1, 1]) == pytest.approx(dt * dt * frames * (frames + 1) / 2, rel=1e-5)
    assert float(g.grad[0].abs().sum()) == 0.0 and float(g.grad[2].abs().sum()) == 0.0


def test_batched_mode_refuses_non_uniform_worlds_and_wrong_shapes():
    def worlds_of(bodies):
        b = inertia.ModelBuilder()
        for w in bodies:
            b.current_world = w
            b.add_shape_sphere(b.add_body(), radius=0.1)
        b.num_worlds = max(bodies) + 1
        return b.finalize(device=DEVICE)

    for bodies, message in (([0, 0, 1], "bodys differ in number per world: \\[2, 1\\]"),
                            ([0, 1, 0, 1], "not contiguous per world")):
        m = worlds_of(bodies)
        with pytest.raises(ValueError, match=message):
            inertia.Rollout(m, inertia.SemiImplicitSolver(m), 2, 1 / 60, batched=True)
    # what the builder refuses to make, edited into a model's arrays: the rollout checks for itself
    b = inertia.ModelBuilder()
    for w in range(2):
        b.current_world = w
        b.add_spring(b.add_particle((0, 0, 1)), b.add_particle((1, 0, 1)))
    b.num_worlds = 2
    m = b.finalize(device=DEVICE)
    m.spring_indices.assign(np.array([1, 2, 2, 3], np.int32))  # the first spring joins worlds 0 and 1
    with pytest.raises(ValueError, match="springs include one whose particles belong to different worlds"):
        inertia.Rollout(m, inertia.SemiImplicitSolver(m), 2, 1 / 60, batched=True)
    m.spring_indices.assign(np.array([0, 1, 2, 3], np.int32))
    m.particle_world.assign(np.array([0, 0, 1, 2], np.int32))
    with pytest.raises(ValueError, match="particles include one in world 2, outside 0..num_worlds-1 = 0..1"):
        inertia.Rollout(m, inertia.SemiImplicitSolver(m), 2, 1 / 60, batched=True)

    model = build("rigid", range(W))
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 2, 1 / 60, params=("body_mass", "gravity"),
                         batched=True)
    with pytest.raises(ValueError, match=r"body_q0 has shape \(4, 2, 7\), expected \(3, 2, 7\) \(batched"):
        ro(body_q0=torch.zeros(W + 1, 2, 7))
    with pytest.raises(ValueError, match=r"body_qd0 has shape \(6, 6\), expected \(3, 2, 6\)"):
        ro(body_qd0=torch.zeros(2 * W, 6))  # the flat form is not a batched input
    with pytest.raises(ValueError, match=r"joint_target_pos has shape \(2, 1\), expected \(2, 3, 1\)"):
        ro(joint_target_pos=torch.zeros(2, 1))
    with pytest.raises(ValueError, match=r"params\['body_mass'\] has shape \(2, 2\), expected \(6,\) \(flat\) "
                                         r"or \(3, 2\) \(per world\)"):
        ro(params={"body_mass": torch.ones(2, 2)})
    with pytest.raises(ValueError, match="must be > 0 for dynamic bodies"):  # the flat checks still apply
        ro(params={"body_mass": torch.zeros(W, 2)})
    with pytest.raises(ValueError, match=r"params\['gravity'\] has shape \(1, 3\), expected \(3, 3\)"):
        ro(params={"gravity": torch.zeros(1, 3)})
