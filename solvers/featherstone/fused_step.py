"""A CPU step off the tape in one launch: the semi-implicit Euler step of articulations without contacts.

On a CPU, a small robot's step is mostly launches: the 7-DoF arm's Euler step was 12 graph nodes (the
external wrench's copy, three memsets, then gather, kinematics, joint forces, composite, solve, advance,
scatter, body outputs), each one a call into Warp's graph replay (~0.2 us each here) and a pass over
arrays that the next node reads back. These kernels run the same stages for one articulation per thread,
one after the other, from the same functions as the stage kernels (:mod:`.kinematics`, :mod:`.dynamics`,
:mod:`.linalg`), writing the same StepData arrays: the same bits, which
``tests/test_featherstone_linalg.py`` checks against the stage kernels on and off the tape. Articulations
never read each other's arrays within a step, so one articulation's whole step before the next one's
changes no result.

The solver takes it where it applies (``FeatherstoneSolver._fused_step_applies``): a CPU, no ``wp.Tape``
recording (no adjoint: ``enable_backward=False``), the Euler integrator, no rigid contacts in the step's
buffers and ``check_finite`` off (which checks each stage's output). Everything else runs the stage
kernels. With contacts, a version of this file (not kept) that split the same stages into one launch
before the contact kernels and one after measured no gain: 1.03x steps/s on the 32-link chain and 1.00x
on the 64-box pile (``benchmarks/ab_package.py``, 11 rounds, the same bits); those steps are the
contacts' and the larger matrices' arithmetic, not launches.
"""

import warp as wp

from ...kinematics import JointTopology
from .dynamics import articulation_composite, dof_joint_forces, rate_limit_block, slot_advance
from .kinematics import (articulation_body_outputs, articulation_kinematics, gather_coordinate, gather_rate,
                         scatter_coordinate, scatter_rate)
from .linalg import factor_block, solve_block
from .topology import Tree, articulation_block

wp.set_module_options({"enable_backward": False})  # forward-only for good: a step on a tape runs the stage kernels


@wp.kernel(enable_backward=False)
def euler_step_forward_kernel(
    # Model:
    joints: JointTopology,
    body_com: wp.array(dtype=wp.vec3),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    joint_armature: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_friction: wp.array(dtype=float),
    joint_effort_limit: wp.array(dtype=float),
    joint_velocity_limit: wp.array(dtype=float),
    tree: Tree,
    # Data in:
    joint_q_in: wp.array(dtype=float),
    body_q_in: wp.array(dtype=wp.transform),
    joint_qd_in: wp.array(dtype=float),
    body_qd_in: wp.array(dtype=wp.spatial_vector),
    control_body_f: wp.array(dtype=wp.spatial_vector),
    target_pos: wp.array(dtype=float),
    target_vel: wp.array(dtype=float),
    joint_f: wp.array(dtype=float),
    limit_zero: wp.array(dtype=float),
    # In:
    friction_eps: float,
    dt: float,
    rate_limits: int,
    scatter_q: int,
    scatter_qd: int,
    # Data out:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    art_ref: wp.array(dtype=wp.vec3),
    body_X: wp.array(dtype=wp.transform),
    body_I: wp.array(dtype=wp.spatial_matrix),
    body_v: wp.array(dtype=wp.spatial_vector),
    body_a: wp.array(dtype=wp.spatial_vector),
    body_fb: wp.array(dtype=wp.spatial_vector),
    dof_S: wp.array(dtype=wp.spatial_vector),
    tau_joint: wp.array(dtype=float),
    diag: wp.array(dtype=float),
    body_Ic: wp.array(dtype=wp.spatial_matrix),
    body_fsub: wp.array(dtype=wp.spatial_vector),
    bias: wp.array(dtype=float),
    tau_contact: wp.array(dtype=float),
    H0: wp.array(dtype=float),
    L0: wp.array(dtype=float),
    y: wp.array(dtype=float),
    dqd: wp.array(dtype=float),
    limit_H: wp.array(dtype=float),
    limit_L: wp.array(dtype=float),
    limit_y: wp.array(dtype=float),
    limit_dqd: wp.array(dtype=float),
    q_next: wp.array(dtype=float),
    qd_next: wp.array(dtype=float),
    twist: wp.array(dtype=wp.spatial_vector),
    joint_q_out: wp.array(dtype=float),
    joint_qd_out: wp.array(dtype=float),
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
):
    """One Euler step of articulation ``a``, stage by stage as ``FeatherstoneSolver.step`` launches them (see the
    module doc); ``limit_*`` are written and read only with ``rate_limits``, the State's joint entries only with
    ``scatter_q`` / ``scatter_qd`` (a model with joint coordinates / rates)."""
    a = wp.tid()
    s0 = tree.art_slot_start[a]
    s1 = tree.art_slot_start[a + 1]
    d0, n, m0 = articulation_block(tree, a)
    # gather (q, qd) from the input state
    for i in range(tree.slot_q[s0], tree.slot_q[s1]):
        gather_coordinate(tree, joint_q_in, body_q_in, i, q)
    for d in range(d0, d0 + n):
        gather_rate(tree, joint_qd_in, body_qd_in, d, qd)
    # forward kinematics, joint forces
    articulation_kinematics(joints, body_com, body_mass, body_inertia, body_world, gravity, tree, q, qd,
                            control_body_f, a, art_ref, body_X, body_I, body_v, body_a, body_fb, dof_S)
    for d2 in range(d0, d0 + n):
        dof_joint_forces(joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                         joint_limit_kd, joint_armature, joint_damping, joint_friction, joint_effort_limit, tree, q, qd,
                         target_pos, target_vel, joint_f, friction_eps, dt, d2, tau_joint, diag)
        tau_contact[d2] = 0.0  # no contacts (what StepData.clear zeroes)
    # composite rigid bodies (the sums start from zero, as after StepData.clear), H0 = M + armature + dt D
    for s in range(s0, s1):
        c = tree.slot_child[s]
        body_Ic[c] = wp.spatial_matrix()
        body_fsub[c] = wp.spatial_vector()
    articulation_composite(tree, body_I, body_fb, dof_S, diag, 0, a, body_Ic, body_fsub, bias, H0, H0)
    # Cholesky of H0, dqd = H0^-1 dt (tau - C), the velocity limits' impulses
    factor_block(H0, m0, n, L0)
    solve_block(L0, m0, n, d0, tau_joint, tau_contact, bias, dt, y, dqd)
    if rate_limits != 0:
        rate_limit_block(joint_velocity_limit, tree, H0, qd, dqd, limit_zero, 1.0, d0, n, m0, limit_H, limit_L, limit_y,
                         limit_dqd)
    # qd' = qd + dqd (+ the impulses' rate change), q' = q (+) dt qd'
    for s2 in range(s0, s1):
        slot_advance(joints, joint_velocity_limit, body_com, tree, q, qd, dqd, dqd, limit_dqd, 1.0, dt, 1, 1,
                     rate_limits, 1.0, s2, q_next, qd_next)
    # the output state: joint coordinates, then the bodies by forward kinematics
    if scatter_q != 0:
        for i2 in range(tree.slot_q[s0], tree.slot_q[s1]):
            scatter_coordinate(tree, q_next, i2, joint_q_out)
    if scatter_qd != 0:
        for d3 in range(d0, d0 + n):
            scatter_rate(tree, qd_next, d3, joint_qd_out)
    articulation_body_outputs(joints, body_com, tree, q_next, qd_next, 0, a, twist, body_q_out, body_qd_out)
