"""Forward kinematics in joint space: body poses, motion subspaces, spatial inertias and velocities.

One thread per articulation walks its slots parent before child (:mod:`.topology`). Per joint type, the
child's joint frame relative to the parent's (``X_pc``) and the columns of the motion subspace S (the
twist of the child per unit rate of each degree of freedom, world axes about ``p_ref``; see
:mod:`.spatial`):

- revolute about unit axis a through the joint origin o: ``X_pc`` = rotation q about a; S = (a, o x a);
- prismatic along a: ``X_pc`` = translation q a; S = (0, a);
- ball: ``X_pc`` = the quaternion q; rates are the angular velocity in the parent joint frame, so
  S_k = (R_p e_k, o x R_p e_k);
- free: ``X_pc`` = (position, quaternion) of the child joint frame; rates are the child's ``body_qd``
  (velocity of the centre of mass c, angular velocity, world), so S_k = (0, e_k) for the velocity and
  (e_k, c x e_k) for the angular velocity;
- fixed: the identity, no degree of freedom.

The velocity-product acceleration of a child (the acceleration with zero joint accelerations) is
``a_p + v x (S qd)``: S moves with the parent for every type but free, whose angular columns follow
the child's centre of mass and add ``(0, v_c x w)``.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...kinematics import JointTopology, joint_transform
from ...types import JOINT_BALL, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE
from .spatial import motion_cross_force, motion_cross_motion, point_velocity, quat_exp, spatial_inertia, wrench_at
from .topology import Tree

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def unit_vector(k: int):
    return wp.vec3(wp.where(k == 0, 1.0, 0.0), wp.where(k == 1, 1.0, 0.0), wp.where(k == 2, 1.0, 0.0))


@wp.func
def joint_frame_parent(joint_X_p: wp.array(dtype=wp.transform), j: int):
    """Joint frame in its parent body's frame (world for a root); the identity for a virtual free joint (-1)."""
    if j < 0:
        return wp.transform_identity()
    return joint_X_p[j]


@wp.func
def joint_frame_child(joint_X_c: wp.array(dtype=wp.transform), j: int):
    if j < 0:
        return wp.transform_identity()
    return joint_X_c[j]


@wp.func
def joint_axis_of(joint_axis: wp.array(dtype=wp.vec3), j: int):
    if j < 0:
        return wp.vec3(0.0)
    return joint_axis[j]


@wp.func
def motion_subspace(t: int, k: int, axis_w: wp.vec3, origin: wp.vec3, rot_p: wp.quat, com: wp.vec3):
    """Column k of S (see the module docstring); ``origin``, ``com`` relative to ``p_ref``."""
    if t == JOINT_REVOLUTE:
        return wp.spatial_vector(axis_w, wp.cross(origin, axis_w))
    if t == JOINT_PRISMATIC:
        return wp.spatial_vector(wp.vec3(0.0), axis_w)
    if t == JOINT_BALL:
        e = wp.quat_rotate(rot_p, unit_vector(k))
        return wp.spatial_vector(e, wp.cross(origin, e))
    if t == JOINT_FREE:
        if k < 3:
            return wp.spatial_vector(wp.vec3(0.0), unit_vector(k))
        e3 = unit_vector(k - 3)
        return wp.spatial_vector(e3, wp.cross(com, e3))
    return wp.spatial_vector()


@wp.func
def dof_count(t: int):
    if t == JOINT_REVOLUTE or t == JOINT_PRISMATIC:
        return 1
    if t == JOINT_BALL:
        return 3
    if t == JOINT_FREE:
        return 6
    return 0


@wp.func
def integrate_coordinates(joints: JointTopology, body_com: wp.array(dtype=wp.vec3), j: int, c: int, t: int,
                          q: wp.array(dtype=float), qs: int, qd_next: wp.array(dtype=float), u: wp.array(dtype=float),
                          use_new_velocity: int, ds: int, h_q: float, q_next: wp.array(dtype=float)):
    """q' = q (+) h_q w of one joint (child body ``c``), w = ``qd_next`` (``use_new_velocity``) or ``u`` at ``ds``.

    (+) per joint type: revolute and prismatic add; ball: q' = exp(h_q w) q (w in the parent joint frame),
    normalized; free: the centre of mass moves by h_q v, the body turns by exp(h_q w) about it (world),
    and q' is the new child joint frame.
    """
    w0 = wp.where(use_new_velocity != 0, qd_next[ds], u[ds])
    if t == JOINT_REVOLUTE or t == JOINT_PRISMATIC:
        q_next[qs] = q[qs] + h_q * w0
    elif t == JOINT_BALL:
        w = wp.vec3(w0, wp.where(use_new_velocity != 0, qd_next[ds + 1], u[ds + 1]),
                    wp.where(use_new_velocity != 0, qd_next[ds + 2], u[ds + 2]))
        r = wp.normalize(quat_exp(w * h_q) * wp.quat(q[qs], q[qs + 1], q[qs + 2], q[qs + 3]))
        for k2 in range(4):
            q_next[qs + k2] = r[k2]
    elif t == JOINT_FREE:
        X_p = joint_frame_parent(joints.X_p, j)
        X_c = joint_frame_child(joints.X_c, j)
        body = X_p * joint_transform(t, joint_axis_of(joints.axis, j), q, qs) * wp.transform_inverse(X_c)
        vel = wp.vec3(w0, wp.where(use_new_velocity != 0, qd_next[ds + 1], u[ds + 1]),
                      wp.where(use_new_velocity != 0, qd_next[ds + 2], u[ds + 2]))
        w3 = wp.vec3(wp.where(use_new_velocity != 0, qd_next[ds + 3], u[ds + 3]),
                     wp.where(use_new_velocity != 0, qd_next[ds + 4], u[ds + 4]),
                     wp.where(use_new_velocity != 0, qd_next[ds + 5], u[ds + 5]))
        com = wp.transform_point(body, body_com[c]) + h_q * vel
        rot = wp.normalize(quat_exp(w3 * h_q) * wp.transform_get_rotation(body))
        body_next = wp.transform(com - wp.quat_rotate(rot, body_com[c]), rot)
        X = wp.transform_inverse(X_p) * body_next * X_c
        p = wp.transform_get_translation(X)
        r2 = wp.transform_get_rotation(X)
        for k3 in range(3):
            q_next[qs + k3] = p[k3]
        for k4 in range(4):
            q_next[qs + 3 + k4] = r2[k4]


@wp.func
def slot_frames(joints: JointTopology, poses: wp.array(dtype=wp.transform), p: int, j: int, t: int,
                q: wp.array(dtype=float), qs: int):
    """World frames of a slot's joint at coordinates ``q[qs:]``: (X_wp, X_wc, pose) = the joint frame on the
    parent, the joint frame on the child, and the child body's pose; ``poses[p]``: the parent's pose (p >= 0)."""
    X_wp = joint_frame_parent(joints.X_p, j)
    if p >= 0:
        X_wp = poses[p] * X_wp
    X_wc = X_wp * joint_transform(t, joint_axis_of(joints.axis, j), q, qs)
    pose = X_wc * wp.transform_inverse(joint_frame_child(joints.X_c, j))
    return X_wp, X_wc, pose


@wp.func
def joint_twist(t: int, axis_w: wp.vec3, origin: wp.vec3, rot_p: wp.quat, com: wp.vec3,
                qd: wp.array(dtype=float), ds: int):
    """S qd: the child's twist relative to its parent (world axes about p_ref)."""
    v_joint = wp.spatial_vector()
    nd = dof_count(t)
    for k in range(6):
        if k < nd:
            v_joint = v_joint + motion_subspace(t, k, axis_w, origin, rot_p, com) * qd[ds + k]
    return v_joint


@wp.func
def art_reference(joints: JointTopology, tree: Tree, q: wp.array(dtype=float), a: int):
    """p_ref of articulation ``a``: its root joint's child frame origin in world [m] (roots hang from the world)."""
    s = tree.art_slot_start[a]
    j = tree.slot_joint[s]
    X = joint_frame_parent(joints.X_p, j) * joint_transform(tree.slot_type[s], joint_axis_of(joints.axis, j), q,
                                                             tree.slot_q[s])
    return wp.transform_get_translation(X)


@wp.func
def articulation_kinematics(
    joints: JointTopology,
    body_com: wp.array(dtype=wp.vec3),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    tree: Tree,
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    control_body_f: wp.array(dtype=wp.spatial_vector),
    a: int,
    art_ref: wp.array(dtype=wp.vec3),
    body_X: wp.array(dtype=wp.transform),
    body_I: wp.array(dtype=wp.spatial_matrix),
    body_v: wp.array(dtype=wp.spatial_vector),
    body_a: wp.array(dtype=wp.spatial_vector),
    body_fb: wp.array(dtype=wp.spatial_vector),
    dof_S: wp.array(dtype=wp.spatial_vector),
):
    """Poses, S, inertias, twists, velocity-product accelerations and the RNEA body forces at (q, qd), of
    articulation ``a`` (:func:`forward_kinematics_kernel`).

    ``body_fb`` = I a + v x* I v - f_ext: each body's force balance with zero joint accelerations, where
    f_ext is gravity and ``Control.body_f`` (force at the com, torque; world).
    """
    p_ref = art_reference(joints, tree, q, a)
    art_ref[a] = p_ref
    for s in range(tree.art_slot_start[a], tree.art_slot_start[a + 1]):
        j = tree.slot_joint[s]
        t = tree.slot_type[s]
        p = tree.slot_parent[s]
        c = tree.slot_child[s]
        ds = tree.slot_qd[s]
        X_wp, X_wc, pose = slot_frames(joints, body_X, p, j, t, q, tree.slot_q[s])
        v_parent = wp.spatial_vector()
        a_parent = wp.spatial_vector()
        if p >= 0:
            v_parent = body_v[p]
            a_parent = body_a[p]
        body_X[c] = pose
        rot = wp.transform_get_rotation(pose)
        com = wp.transform_point(pose, body_com[c]) - p_ref
        inertia_w = wp.quat_to_matrix(rot) * body_inertia[c] * wp.transpose(wp.quat_to_matrix(rot))
        I6 = spatial_inertia(body_mass[c], inertia_w, com)
        body_I[c] = I6
        origin = wp.transform_get_translation(X_wc) - p_ref
        axis_w = wp.transform_vector(X_wp, joint_axis_of(joints.axis, j))
        rot_p = wp.transform_get_rotation(X_wp)
        nd = dof_count(t)
        v_joint = wp.spatial_vector()
        for k in range(6):
            if k < nd:
                S = motion_subspace(t, k, axis_w, origin, rot_p, com)
                dof_S[ds + k] = S
                v_joint = v_joint + S * qd[ds + k]
        v = v_parent + v_joint
        body_v[c] = v
        acc = a_parent + motion_cross_motion(v, v_joint)
        if t == JOINT_FREE:
            acc = acc + wp.spatial_vector(wp.vec3(0.0), wp.cross(wp.vec3(qd[ds], qd[ds + 1], qd[ds + 2]),
                                                                wp.vec3(qd[ds + 3], qd[ds + 4], qd[ds + 5])))
        body_a[c] = acc
        g = gravity[wp.max(body_world[c], 0)]
        fc = control_body_f[c]
        f_ext = wrench_at(body_mass[c] * g + wp.spatial_top(fc), com) + wp.spatial_vector(wp.spatial_bottom(fc),
                                                                                           wp.vec3(0.0))
        body_fb[c] = I6 * acc + motion_cross_force(v, I6 * v) - f_ext


@wp.kernel
def forward_kinematics_kernel(
    # Model:
    joints: JointTopology,
    body_com: wp.array(dtype=wp.vec3),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    tree: Tree,
    # Data in:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    control_body_f: wp.array(dtype=wp.spatial_vector),
    # Data out:
    art_ref: wp.array(dtype=wp.vec3),
    body_X: wp.array(dtype=wp.transform),
    body_I: wp.array(dtype=wp.spatial_matrix),
    body_v: wp.array(dtype=wp.spatial_vector),
    body_a: wp.array(dtype=wp.spatial_vector),
    body_fb: wp.array(dtype=wp.spatial_vector),
    dof_S: wp.array(dtype=wp.spatial_vector),
):
    """:func:`articulation_kinematics` of every articulation: poses, S, inertias, twists, velocity-product
    accelerations and the RNEA body forces at (q, qd)."""
    articulation_kinematics(joints, body_com, body_mass, body_inertia, body_world, gravity, tree, q, qd,
                            control_body_f, wp.tid(), art_ref, body_X, body_I, body_v, body_a, body_fb, dof_S)


@wp.func
def articulation_body_outputs(
    joints: JointTopology,
    body_com: wp.array(dtype=wp.vec3),
    tree: Tree,
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    from_state: int,
    a: int,
    twist: wp.array(dtype=wp.spatial_vector),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """``State.body_q`` / ``body_qd`` (v of the com, w; world) of articulation ``a``'s bodies from (q, qd)
    (:func:`body_output_kernel`).

    ``from_state``: a virtual free joint's coordinates are its body's ``body_q`` / ``body_qd`` already
    (read here, not written; ``q`` / ``qd`` hold only the model joints' coordinates): the set-up of a
    state's jointed bodies from its own joint coordinates.
    """
    s0 = tree.art_slot_start[a]
    p_ref = wp.vec3(0.0)
    if from_state != 0 and tree.slot_joint[s0] < 0:
        p_ref = wp.transform_get_translation(body_q[tree.slot_child[s0]])
    else:
        p_ref = art_reference(joints, tree, q, a)
    for s in range(s0, tree.art_slot_start[a + 1]):
        j = tree.slot_joint[s]
        c = tree.slot_child[s]
        if j < 0 and from_state != 0:
            own = body_q[c]
            own_qd = body_qd[c]
            own_com = wp.transform_point(own, body_com[c]) - p_ref
            # twist about p_ref: (w, v_com + com x w)
            twist[c] = wp.spatial_vector(wp.spatial_bottom(own_qd),
                                         wp.spatial_top(own_qd) + wp.cross(own_com, wp.spatial_bottom(own_qd)))
        else:
            t = tree.slot_type[s]
            p = tree.slot_parent[s]
            X_wp, X_wc, pose = slot_frames(joints, body_q, p, j, t, q, tree.slot_q[s])
            v_parent = wp.spatial_vector()
            if p >= 0:
                v_parent = twist[p]
            com = wp.transform_point(pose, body_com[c]) - p_ref
            origin = wp.transform_get_translation(X_wc) - p_ref
            axis_w = wp.transform_vector(X_wp, joint_axis_of(joints.axis, j))
            v = v_parent + joint_twist(t, axis_w, origin, wp.transform_get_rotation(X_wp), com, qd, tree.slot_qd[s])
            twist[c] = v
            body_q[c] = pose
            body_qd[c] = wp.spatial_vector(point_velocity(v, com), wp.spatial_top(v))


@wp.kernel
def body_output_kernel(
    # Model:
    joints: JointTopology,
    body_com: wp.array(dtype=wp.vec3),
    tree: Tree,
    # Data in:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    # In:
    from_state: int,
    # Data out:
    twist: wp.array(dtype=wp.spatial_vector),  # per body, about p_ref (scratch of this kernel)
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """:func:`articulation_body_outputs` of every articulation: ``State.body_q`` / ``body_qd`` of every body in a
    tree from (q, qd)."""
    articulation_body_outputs(joints, body_com, tree, q, qd, from_state, wp.tid(), twist, body_q, body_qd)


@wp.kernel
def gather_joints_kernel(
    # Model:
    index_state: wp.array(dtype=wp.int32),
    # Data in:
    state_values: wp.array(dtype=float),
    # Data out:
    values: wp.array(dtype=float),
):
    """Joint coordinates (or rates) in the solver's order from ``State.joint_q`` (``joint_qd``); 0 for virtual ones."""
    i = wp.tid()
    src = index_state[i]
    if src >= 0:
        values[i] = state_values[src]
    else:
        values[i] = 0.0


@wp.func
def state_coordinate(joint_q: wp.array(dtype=float), body_q: wp.array(dtype=wp.transform), src: int, b: int,
                     k: int):
    if src >= 0:
        return joint_q[src]
    X = body_q[b]
    if k < 3:
        return wp.transform_get_translation(X)[k]
    return wp.transform_get_rotation(X)[k - 3]


@wp.func
def gather_coordinate(tree: Tree, joint_q: wp.array(dtype=float), body_q: wp.array(dtype=wp.transform), i: int,
                      q: wp.array(dtype=float)):
    """q[i], coordinate i in the solver's order, from a State (:func:`gather_state_kernel`)."""
    q[i] = state_coordinate(joint_q, body_q, tree.coord_state[i], tree.coord_body[i], tree.coord_comp[i])


@wp.func
def gather_rate(tree: Tree, joint_qd: wp.array(dtype=float), body_qd: wp.array(dtype=wp.spatial_vector), i: int,
                qd: wp.array(dtype=float)):
    """qd[i], rate i in the solver's order, from a State (:func:`gather_state_kernel`)."""
    src = tree.dof_state[i]
    if src >= 0:
        qd[i] = joint_qd[src]
    else:
        qd[i] = body_qd[tree.dof_body[i]][tree.dof_comp[i]]


@wp.kernel
def gather_state_kernel(
    # Model:
    tree: Tree,
    # Data in:
    joint_q: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    joint_qd: wp.array(dtype=float),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # In:
    coord_count: int,
    dof_count: int,
    # Data out:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
):
    """(q, qd) in the solver's order from a State: model joints' ``joint_q`` / ``joint_qd``, a virtual free
    joint's from its body's ``body_q`` / ``body_qd``. One thread per coordinate and per rate."""
    i = wp.tid()
    if i < coord_count:
        gather_coordinate(tree, joint_q, body_q, i, q)
    if i < dof_count:
        gather_rate(tree, joint_qd, body_qd, i, qd)


@wp.func
def scatter_coordinate(tree: Tree, q: wp.array(dtype=float), i: int, joint_q: wp.array(dtype=float)):
    """``State.joint_q`` of coordinate i (solver order) if a model joint's (:func:`scatter_state_kernel`)."""
    dst = tree.coord_state[i]
    if dst >= 0:
        joint_q[dst] = q[i]


@wp.func
def scatter_rate(tree: Tree, qd: wp.array(dtype=float), i: int, joint_qd: wp.array(dtype=float)):
    """``State.joint_qd`` of rate i (solver order) if a model joint's (:func:`scatter_state_kernel`)."""
    dst = tree.dof_state[i]
    if dst >= 0:
        joint_qd[dst] = qd[i]


@wp.kernel
def scatter_state_kernel(
    # Model:
    tree: Tree,
    # Data in:
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    # In:
    coord_count: int,
    dof_count: int,
    # Data out:
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
):
    """``State.joint_q`` / ``joint_qd`` entries of model joints from the solver's order (virtual ones skipped:
    their bodies' poses come from the body outputs)."""
    i = wp.tid()
    if i < coord_count:
        scatter_coordinate(tree, q, i, joint_q)
    if i < dof_count:
        scatter_rate(tree, qd, i, joint_qd)


@wp.kernel
def kinematic_bodies_kernel(
    # Model:
    kinematic: wp.array(dtype=wp.int32),
    # Data in:
    body_q_in: wp.array(dtype=wp.transform),
    body_qd_in: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    # In:
    dt: float,
    write_state: int,
    # Data out:
    body_X: wp.array(dtype=wp.transform),
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
):
    """Kinematic bodies outside the trees move with their own velocity (the com's, and w about it).

    ``body_X``: their pose at the step's start, where a stage's contacts read it; ``write_state``: also
    write the output state's pose and velocity (once per step)."""
    b = kinematic[wp.tid()]
    X = body_q_in[b]
    body_X[b] = X
    if write_state == 0:
        return
    v = body_qd_in[b]
    rot = wp.transform_get_rotation(X)
    rot_new = wp.normalize(quat_exp(wp.spatial_bottom(v) * dt) * rot)
    com_new = wp.transform_point(X, body_com[b]) + wp.spatial_top(v) * dt
    body_q_out[b] = wp.transform(com_new - wp.quat_rotate(rot_new, body_com[b]), rot_new)
    body_qd_out[b] = v
