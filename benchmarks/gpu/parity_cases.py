"""The small scenes of the parity section: every solver and feature, each a ``StepCase`` (stepped by hand),
a ``SimulatorCase`` (``inertia.Simulator``) or a ``RolloutCase`` (``inertia.Rollout``, forward and gradients).

Sizes and step counts are chosen so that a CPU reference, two nudged CPU runs and two device runs of every
case take well under a minute on one core, while each scene does what it is there for: contacts engaged (the
pile lands within its steps, the robot starts with its feet 5 mm above the ground, the granular block is
dropped 2 cm), joints and drives working, and the trajectory not yet chaotic (the nudged runs' spread stays
far below the motion, so the tolerance can tell a defect from rounding). ``--tiny`` runs fewer steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import scenes as S
from bench_scenes import SCENES, SOLVERS

STATE_FIELDS = ("particle_q", "particle_qd", "body_q", "body_qd", "joint_q", "joint_qd")


@dataclass
class StepCase:
    """``steps`` steps of collide + solver step (``tiny_steps`` with --tiny), sampled every ``every`` (even)."""

    name: str
    covers: str
    build: Callable  # device -> model
    solver: Callable  # model -> solver
    dt: float
    steps: int
    tiny_steps: int
    every: int = 2
    prepare: Callable | None = None  # (model, state, control, solver) -> None: start pose, drive targets
    kind: str = "steps"


@dataclass
class SimulatorCase:
    """``inertia.Simulator`` frames (captured after the first two), sampled after every frame."""

    name: str
    covers: str
    build: Callable
    solver: Callable
    frame_dt: float
    substeps: int
    frames: int
    tiny_frames: int
    kind: str = "simulator"


@dataclass
class RolloutCase:
    """``inertia.Rollout`` forward and backward of a fixed weighted loss of its outputs.

    ``inputs(model, torch_device, rng, frames)`` -> dict of keyword arguments (tensors; those that require grad are
    differentiated); ``params(model, torch_device)`` -> {name: tensor} (all differentiated).
    """

    name: str
    covers: str
    build: Callable
    solver: Callable
    frames: int
    tiny_frames: int
    frame_dt: float
    substeps: int
    checkpoint_every: int
    inputs: Callable
    params: Callable | None = None
    batched: bool = False
    kind: str = "rollout"
    rollout_kwargs: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------ builders
def bench_scene(name: str, size):
    return lambda device: SCENES[name].build_inertia(size, device)


def bench_solver(scene: str, solver: str):
    return lambda model: SOLVERS[solver](model, scene)


def bench_dt(scene: str, solver: str) -> float:
    return SOLVERS[solver].settings(scene)["dt"]


def rigid(scene: str, solver: str):
    return lambda model: S.make_solver(solver, model, scene)


def arm_prepare(model, state, control, solver):
    S.arm_start(model, state, solver)
    S.arm_targets(model, control)


def robot_prepare(model, state, control, solver):
    S.robot_targets(model, control)


def step_cases() -> list:
    cases = [StepCase("spring_net_semi_implicit", "particles, springs, particle-ground and particle-particle contact",
                      lambda d: S.spring_net_model(d), lambda m: SOLVERS["semi_implicit"](m), 1.0 / 2400, 240,
                      20)]
    for solver in ("semi_implicit", "xpbd"):
        long = solver == "semi_implicit"  # 4x the steps at a quarter of XPBD's dt
        cases += [
            StepCase(f"cloth_{solver}", "cloth: membrane triangles, bending, pinned edge, self and ground contact",
                     bench_scene("cloth", (8, 8)), bench_solver("cloth", solver), bench_dt("cloth", solver),
                     240 if long else 60, 12),
            StepCase(f"soft_{solver}", "soft body: neo-Hookean tets dropped on the ground",
                     bench_scene("soft", (3, 3, 2)), bench_solver("soft", solver), bench_dt("soft", solver),
                     240 if long else 60, 12),
            StepCase(f"granular_{solver}", "granular: particle-particle contact (cell list), ground contact",
                     bench_scene("granular", (5, 5, 4)), bench_solver("granular", solver),
                     bench_dt("granular", solver), 160 if long else 40, 12),
            StepCase(f"pile_{solver}", "rigid pile: box-box and box-ground contact (SAT, clipping), broad phase",
                     bench_scene("boxes", (2, 2, 2)), bench_solver("boxes", solver), bench_dt("boxes", solver),
                     100, 12),
            StepCase(f"chain_{solver}", "chain: revolute joints in maximal coordinates, capsule-ground detection",
                     bench_scene("chain", (6,)), bench_solver("chain", solver), bench_dt("chain", solver), 100, 12),
        ]
    for solver in ("semi_implicit", "xpbd", "featherstone"):
        steps = {"semi_implicit": 400, "xpbd": 80, "featherstone": 100}[solver]
        cases += [
            StepCase(f"robot_{solver}", "20-body robot: free base, driven and limited revolute, fixed and ball "
                     "joints, foot contact" + (" (floating-base articulation)" if solver == "featherstone" else ""),
                     lambda d: S.robot_model(d), rigid("robot", solver), S.rigid_settings(solver, "robot")["dt"],
                     steps, 12, prepare=robot_prepare),
            StepCase(f"arm_{solver}", "7-DoF arm on PD drives with limits" +
                     (" (fixed-base articulation)" if solver == "featherstone" else " (maximal coordinates)"),
                     lambda d: S.arm_model(d), rigid("arm", solver), S.rigid_settings(solver, "arm")["dt"],
                     {"semi_implicit": 400, "xpbd": 60, "featherstone": 100}[solver], 12, prepare=arm_prepare),
        ]
    cases += [
        StepCase("worlds_robot_xpbd", "many worlds: 8 replicated robots on one ground (XPBD)",
                 lambda d: S.robot_model(d, worlds=8), rigid("robot", "xpbd"), S.rigid_settings("xpbd", "robot")["dt"],
                 60, 8, prepare=robot_prepare),
        StepCase("worlds_arm_featherstone", "many worlds: 8 replicated arms (FeatherstoneSolver)",
                 lambda d: S.arm_model(d, worlds=8), rigid("arm", "featherstone"),
                 S.rigid_settings("featherstone", "arm")["dt"], 100, 8, prepare=arm_prepare),
    ]
    return cases


def simulator_cases() -> list:
    return [SimulatorCase("simulator_cloth_semi_implicit", "inertia.Simulator: captured frames of 8 substeps",
                          bench_scene("cloth", (6, 6)), bench_solver("cloth", "semi_implicit"), 1.0 / 300, 8,
                          20, 4),
            SimulatorCase("simulator_pile_xpbd", "inertia.Simulator: captured frames of a rigid pile (XPBD)",
                          bench_scene("boxes", (2, 2, 1)), bench_solver("boxes", "xpbd"), 1.0 / 120, 10, 10, 4)]


# ------------------------------------------------------------------------------------ rollouts
def _cloth_inputs(model, dev, rng, frames):
    import torch

    n = model.particle_count
    q0 = torch.tensor(model.particle_q.numpy(), device=dev, requires_grad=True)
    qd0 = torch.tensor(rng.uniform(-0.2, 0.2, (n, 3)).astype(np.float32), device=dev, requires_grad=True)
    return {"q0": q0, "qd0": qd0}


def _cloth_controls(model, dev, rng, frames):
    import torch

    out = _cloth_inputs(model, dev, rng, frames)
    f = rng.uniform(-0.05, 0.05, (frames, model.particle_count, 3)).astype(np.float32)
    out["particle_f"] = torch.tensor(f, device=dev, requires_grad=True)
    return out


def _cloth_params(model, dev):
    import torch

    return {"tri_materials": torch.tensor(model.tri_materials.numpy(), device=dev, requires_grad=True)}


def _pile_inputs(model, dev, rng, frames):
    import torch

    qd = np.zeros((model.body_count, 6), np.float32)
    qd[:, :3] = rng.uniform(-0.3, 0.3, (model.body_count, 3))
    return {"body_q0": torch.tensor(model.body_q.numpy(), device=dev, requires_grad=True),
            "body_qd0": torch.tensor(qd, device=dev, requires_grad=True)}


def _pile_params(model, dev):
    import torch

    return {"body_mass": torch.tensor(model.body_mass.numpy(), device=dev, requires_grad=True)}


def _arm_inputs(model, dev, rng, frames):
    import torch

    worlds = model.joint_dof_count // 7
    q0 = np.tile(np.asarray(S.ARM_Q0, np.float32), (worlds, 1)) + rng.uniform(-0.1, 0.1, (worlds, 7))
    targets = np.asarray(S.ARM_TARGET, np.float32) + rng.uniform(-0.3, 0.3, (frames, worlds, 7))
    return {"joint_q0": torch.tensor(q0.astype(np.float32), device=dev, requires_grad=True),
            "joint_target_pos": torch.tensor(targets.astype(np.float32), device=dev, requires_grad=True)}


def _arm_params(model, dev):
    import torch

    w = model.joint_dof_count // 7
    return {"joint_armature": torch.full((w, 7), 0.02, device=dev, requires_grad=True),
            "body_mass": torch.tensor(model.body_mass.numpy().reshape(w, 7), device=dev, requires_grad=True)}


def rollout_cases() -> list:
    return [
        RolloutCase("rollout_cloth_semi_implicit", "inertia.Rollout: particles, controls and a material "
                    "parameter; 3 checkpointed segments, captured frames and segments",
                    bench_scene("cloth", (4, 4)), bench_solver("cloth", "semi_implicit"), 6, 4, 1.0 / 600, 4, 2,
                    _cloth_controls, _cloth_params),
        RolloutCase("rollout_pile_xpbd", "inertia.Rollout: rigid bodies in contact (XPBD), body mass gradient",
                    bench_scene("boxes", (2, 1, 1)), bench_solver("boxes", "xpbd"), 6, 4, 1.0 / 300, 4, 2,
                    _pile_inputs, _pile_params),
        RolloutCase("rollout_arm_featherstone_batched", "inertia.Rollout batched over 4 worlds: joint "
                    "coordinates, drive targets, armature and mass gradients (FeatherstoneSolver)",
                    lambda d: S.arm_model(d, worlds=4), rigid("arm", "featherstone"), 6, 4, 0.01, 4, 2,
                    _arm_inputs, _arm_params, batched=True),
    ]


def all_cases() -> list:
    return step_cases() + simulator_cases() + rollout_cases()
