"""Scenes of the GPU check that the benchmark scenes do not already provide: a URDF-free 7-DoF arm, a
spring-connected particle net, the 20-body robot (``benchmarks/worlds.py``) on a ground, their replicated
worlds, and the solvers each runs with.

The arm is built from numbers written here (no robot file, no mesh: the GPU machine has no pybullet_data):
seven revolute joints about z, y, z, y, z, y, z like a Kuka iiwa, links as solid cylinders of the iiwa's
masses, on PD drives. The robot is ``benchmarks/worlds.py``'s quadruped with a tail (a free base, 16 driven
and limited revolute joints, a fixed head, two ball-jointed tail links; 20 bodies).
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

ARM_LINKS = (  # (joint axis, offset of the joint from the previous link's frame along z [m], mass [kg], length [m])
    ((0.0, 0.0, 1.0), 0.15, 4.0, 0.19),
    ((0.0, 1.0, 0.0), 0.19, 4.0, 0.21),
    ((0.0, 0.0, 1.0), 0.21, 3.0, 0.19),
    ((0.0, 1.0, 0.0), 0.19, 2.7, 0.21),
    ((0.0, 0.0, 1.0), 0.21, 1.7, 0.19),
    ((0.0, 1.0, 0.0), 0.19, 1.8, 0.08),
    ((0.0, 0.0, 1.0), 0.08, 0.3, 0.05),
)
ARM_RADIUS = 0.06  # [m] of every link's cylinder
ARM_Q0 = (0.4, 0.8, -0.3, -1.0, 0.5, 0.7, 0.2)  # [rad] a bent start
ARM_TARGET = (0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0)  # [rad] where the drives pull it
ARM_KP, ARM_KD = 100.0, 5.0  # [N m/rad], [N m s/rad]
ROBOT_TARGET_BEND = 0.3  # [rad] drive target of the robot's knees (every second leg joint), so the drives work
ROBOT_SPACING = 2.0  # [m] between replicated robots
ARM_SPACING = 1.5  # [m] between replicated arms

# dt and solver keyword arguments of the rigid scenes of this check, per solver and scene. xpbd: the chain's
# 10 substeps of 8 iterations (tests/test_rigid_xpbd_joints.py); featherstone: benchmarks/featherstone.py's 1 ms
# and defaults; semi_implicit: the largest round step below what the solver's own stability estimate allows
# (inertia.stability: explicit PD drives on the light links bound it: the arm's last link at 2.9e-4 s, the
# robot's leg links at 1.4e-4 s; the StabilityWarning names the joint).
RIGID_SETTINGS = {
    ("semi_implicit", "arm"): {"dt": 2.5e-4, "kwargs": {}},
    ("semi_implicit", "robot"): {"dt": 1.25e-4, "kwargs": {}},
    ("xpbd", "*"): {"dt": 1.0 / 600.0, "kwargs": {"iterations": 8, "relaxation": 1.0}},
    ("featherstone", "*"): {"dt": 1.0e-3, "kwargs": {}},
}
ROBOT_DROP = 0.165  # [m] the robot is placed this much lower than worlds.py's, its feet 5 mm above the ground


def rigid_settings(solver: str, scene: str) -> dict:
    """{"dt": [s], "kwargs": {...}} of ``solver`` on the rigid scene ``scene`` ('arm' or 'robot')."""
    return RIGID_SETTINGS.get((solver, scene)) or RIGID_SETTINGS[(solver, "*")]


def cylinder_inertia(mass: float, radius: float, length: float) -> np.ndarray:
    """Inertia [kg m^2] of a solid cylinder about its centre, axis along z."""
    side = mass * (3.0 * radius * radius + length * length) / 12.0
    return np.diag([side, side, 0.5 * mass * radius * radius])


def arm_builder(base=(0.0, 0.0, 0.0)):
    """The 7-DoF arm on a fixed base at ``base`` [m], straight up at q = 0, drives on (targets in Control)."""
    import inertia

    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.joint_attach_ke, b.joint_attach_kd = 1.0e6, 1.0e2  # run.py's chain: stiff maximal-coordinate joints
    parent, z = -1, float(base[2])
    ident = (0.0, 0.0, 0.0, 1.0)
    for axis, offset, mass, length in ARM_LINKS:
        z += offset
        body = b.add_body(xform=((base[0], base[1], z), ident), mass=mass,
                          inertia=cylinder_inertia(mass, ARM_RADIUS, length), com=(0.0, 0.0, 0.5 * length))
        anchor = ((base[0], base[1], z), ident) if parent == -1 else ((0.0, 0.0, offset), ident)
        b.add_joint_revolute(parent, body, parent_xform=anchor, child_xform=((0.0, 0.0, 0.0), ident), axis=axis,
                             limit_lower=-2.9, limit_upper=2.9, target_ke=ARM_KP, target_kd=ARM_KD)
        parent = body
    return b


def robot_builder():
    """benchmarks/worlds.py's 20-body robot (one world, no ground), ROBOT_DROP lower: its feet touch down at once."""
    import inertia
    from worlds_build import robot_inertia

    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.add_builder(robot_inertia(), xform=((0.0, 0.0, -ROBOT_DROP), (0.0, 0.0, 0.0, 1.0)))
    return b


def replicated(one, worlds: int, spacing: float, ground: bool):
    """``worlds`` copies of builder ``one`` (plus one shared ground plane) in a new builder."""
    import inertia

    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.joint_attach_ke, b.joint_attach_kd = one.joint_attach_ke, one.joint_attach_kd
    if ground:
        b.add_ground_plane()
    b.replicate(one, worlds, spacing=spacing)
    return b


def arm_model(device, worlds: int = 1, requires_grad: bool = False):
    return replicated(arm_builder(), worlds, ARM_SPACING, ground=False).finalize(device=device,
                                                                                requires_grad=requires_grad)


def robot_model(device, worlds: int = 1, requires_grad: bool = False):
    return replicated(robot_builder(), worlds, ROBOT_SPACING, ground=True).finalize(device=device,
                                                                                    requires_grad=requires_grad)


def spring_net_model(device, n: int = 4):
    """An n x n particle net 0.5 m above the ground, neighbours and diagonals joined by springs, one corner
    pinned: springs, particle-ground and particle-particle contact under the SemiImplicitSolver."""
    import inertia

    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.add_ground_plane()
    idx = {}
    for i in range(n):
        for j in range(n):
            mass = 0.0 if (i, j) == (0, 0) else 0.05
            idx[i, j] = b.add_particle((0.1 * i, 0.1 * j, 0.5 + 0.02 * i), (0.0, 0.3, 0.0), mass, radius=0.03)
    for i in range(n):
        for j in range(n):
            for di, dj in ((1, 0), (0, 1), (1, 1)):
                if i + di < n and j + dj < n:
                    b.add_spring(idx[i, j], idx[i + di, j + dj], ke=200.0, kd=0.5)
    return b.finalize(device=device)


def make_solver(kind: str, model, scene: str = "*", **overrides):
    """A solver of ``kind`` ('semi_implicit', 'xpbd', 'featherstone') with this check's settings for ``scene``."""
    import inertia

    kwargs = dict(rigid_settings(kind, scene)["kwargs"], **overrides)
    cls = {"semi_implicit": inertia.SemiImplicitSolver, "xpbd": inertia.XPBDSolver,
           "featherstone": inertia.FeatherstoneSolver}[kind]
    return cls(model, **kwargs)


def arm_start(model, state, solver=None) -> None:
    """Every arm of ``model`` at ARM_Q0 (its bodies placed there too)."""
    import inertia

    worlds = model.joint_dof_count // 7
    q = np.tile(np.asarray(ARM_Q0, np.float32), worlds)
    state.joint_q.assign(q)
    if solver is not None and hasattr(solver, "sync_bodies"):
        solver.sync_bodies(state)
    else:
        inertia.eval_fk(model, q, np.zeros(model.joint_dof_count, np.float32), state)


def arm_targets(model, control) -> None:
    control.joint_target_pos.assign(np.tile(np.asarray(ARM_TARGET, np.float32), model.joint_dof_count // 7))


def robot_targets(model, control) -> None:
    """Knees bent by ROBOT_TARGET_BEND (every second revolute leg joint), other targets zero."""
    target = np.zeros(model.joint_dof_count, np.float32)
    types, qd_start = model.joint_type.numpy(), model.joint_qd_start.numpy()
    revolute = [j for j, t in enumerate(types) if t == 1]
    for k, j in enumerate(revolute):
        if k % 2 == 1:
            target[qd_start[j]] = ROBOT_TARGET_BEND
    control.joint_target_pos.assign(target)


def entity_count(model) -> int:
    """Particles + bodies: the entities of entity-steps/s."""
    return int(model.particle_count + model.body_count)


def quat_about(axis, angle: float) -> tuple:
    s = math.sin(0.5 * angle)
    return (axis[0] * s, axis[1] * s, axis[2] * s, math.cos(0.5 * angle))
