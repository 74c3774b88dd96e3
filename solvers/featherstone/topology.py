"""The solver's view of a model's joint trees: slots, articulations and the generalized coordinates they own.

Computed once on the host when the solver is built (the model's topology does not change).

A *slot* is one joint of a tree as the kernels walk it: a model joint, or a virtual free joint for a
dynamic body that is the child of no joint (a free body, or the base of a tree that hangs from a body
rather than from the world). An *articulation* is one tree: its slots in depth-first order (parent
before child, and every slot's subtree a contiguous run ``[s, slot_end[s])``), so "joint c is an
ancestor of joint r" is ``s_c <= s_r < slot_end[s_c]`` with no walk up the tree.

Generalized coordinates live in the solver's own order, articulation by articulation, slot by slot
(``coord`` / ``dof`` indices below): each articulation's degrees of freedom are one contiguous block,
so its joint-space mass matrix is a dense ``n x n`` block (``art_mat_start``). Where each comes from:
a model joint's entries of ``State.joint_q`` / ``joint_qd`` (``coord_state`` / ``dof_state``), or for a
virtual free joint its body's ``State.body_q`` (position, quaternion) and ``body_qd`` (``coord_body``,
``dof_body`` with the component in ``coord_comp`` / ``dof_comp``): the same layout as a free joint's.

Kinematic bodies (inverse mass 0) that are the child of no joint are not simulated in joint space: they
move with their own velocity. A kinematic body inside a tree is placed by its joint like any other (a
fixed-base robot's massless base link). Refused, with a ``ValueError`` naming the joint: a joint whose
parent is a kinematic body outside every tree (the tree would have no dynamics to follow), and a
degree of freedom that moves no mass and has no armature (its row of the mass matrix would be zero).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ...types import JOINT_COORDS, JOINT_FREE, JOINT_NAMES

VIRTUAL = -1  # slot_joint of a virtual free joint


@wp.struct
class Tree:
    """The joint trees as the solver's kernels read them: the index arrays of :class:`Topology` (not
    differentiated; one struct argument instead of up to nine int32 arrays, which a kernel signature could
    swap without Warp's type check noticing)."""

    art_slot_start: wp.array(dtype=wp.int32)  # per articulation, + 1 at the end: its slots [start, next)
    art_dof_start: wp.array(dtype=wp.int32)  # per articulation, + 1: its degrees of freedom [start, next)
    art_mat_start: wp.array(dtype=wp.int32)  # per articulation, + 1: its dense n x n block of the mass matrix
    slot_joint: wp.array(dtype=wp.int32)  # model joint of a slot (VIRTUAL: a free body's virtual free joint)
    slot_type: wp.array(dtype=wp.int32)  # JOINT_* of a slot
    slot_parent: wp.array(dtype=wp.int32)  # parent body (-1: world)
    slot_child: wp.array(dtype=wp.int32)  # child body
    slot_q: wp.array(dtype=wp.int32)  # first coordinate, + 1 at the end (solver order)
    slot_qd: wp.array(dtype=wp.int32)  # first degree of freedom, + 1 at the end (solver order)
    slot_end: wp.array(dtype=wp.int32)  # end of the slot's subtree: its descendants are [s + 1, slot_end[s])
    dof_slot: wp.array(dtype=wp.int32)  # slot of a degree of freedom
    dof_state: wp.array(dtype=wp.int32)  # its index in State.joint_qd and the per-dof model arrays (-1: virtual)
    dof_body: wp.array(dtype=wp.int32)  # a virtual free joint's rate: its body's body_qd (-1 otherwise) ...
    dof_comp: wp.array(dtype=wp.int32)  # ... component k of it
    coord_state: wp.array(dtype=wp.int32)  # a coordinate's index in State.joint_q (-1: virtual)
    coord_body: wp.array(dtype=wp.int32)  # a virtual free joint's coordinate: its body's body_q (-1 otherwise) ...
    coord_comp: wp.array(dtype=wp.int32)  # ... component k of (position, quaternion)
    body_slot: wp.array(dtype=wp.int32)  # slot whose child a body is (-1: none)
    body_art: wp.array(dtype=wp.int32)  # articulation of a body (-1: none)



@wp.func
def articulation_block(tree: Tree, a: int):
    """(first degree of freedom, their count n, start of the n x n mass-matrix block) of articulation ``a``."""
    d0 = tree.art_dof_start[a]
    return d0, tree.art_dof_start[a + 1] - d0, tree.art_mat_start[a]

class Topology:
    """Slots, articulations and index maps of one model (host arrays ``*_np`` and their ``wp.array``s)."""

    def __init__(self, model):
        jt = model.joint_type.numpy().astype(np.int64)
        jp = model.joint_parent.numpy().astype(np.int64)
        jc = model.joint_child.numpy().astype(np.int64)
        q_start = model.joint_q_start.numpy().astype(np.int64)
        qd_start = model.joint_qd_start.numpy().astype(np.int64)
        inv_mass = model.body_inv_mass.numpy()
        nb = model.body_count
        labels = list(model.joint_label)
        child_joint = np.full(nb, -1, np.int64)
        child_joint[jc] = np.arange(len(jc))
        children = [[] for _ in range(nb)]
        world_roots = []
        for j in range(len(jt)):
            if jp[j] < 0:
                world_roots.append(j)
            else:
                children[jp[j]].append(j)
        for j in range(len(jt)):
            p = jp[j]
            if p >= 0 and child_joint[p] < 0 and inv_mass[p] == 0.0:
                raise ValueError(
                    f"FeatherstoneSolver: joint {j} ('{labels[j]}') hangs from body {p} ('{model.body_label[p]}'), "
                    "which is kinematic and the child of no joint; attach that body to the world with a joint "
                    "(add_joint_fixed for a fixed base)")

        # articulations: trees hanging from the world, then dynamic bodies that are no joint's child
        # (a virtual free joint each, with the trees hanging from them), in body order
        roots = [(j, int(jc[j])) for j in world_roots]
        roots += [(VIRTUAL, b) for b in range(nb) if child_joint[b] < 0 and inv_mass[b] > 0.0]
        roots.sort(key=lambda r: r[1])
        slot_joint, slot_child, slot_parent, slot_type, slot_art = [], [], [], [], []
        art_slot_start = [0]
        for a, (j0, b0) in enumerate(roots):
            stack = [(j0, b0)]
            while stack:
                j, b = stack.pop()
                slot_joint.append(j)
                slot_child.append(b)
                slot_parent.append(-1 if j == VIRTUAL else int(jp[j]))
                slot_type.append(int(JOINT_FREE) if j == VIRTUAL else int(jt[j]))
                slot_art.append(a)
                stack.extend((int(k), int(jc[k])) for k in reversed(children[b]))
            art_slot_start.append(len(slot_joint))
        ns = len(slot_joint)
        self.slot_count, self.articulation_count = ns, len(roots)

        # subtree ends (depth-first order: a slot's descendants follow it contiguously)
        slot_of_body = np.full(nb, -1, np.int64)
        slot_of_body[np.asarray(slot_child, np.int64)] = np.arange(ns)
        slot_end = np.arange(1, ns + 1)
        for s in reversed(range(ns)):
            p = slot_parent[s]
            if p >= 0:
                ps = slot_of_body[p]
                slot_end[ps] = max(slot_end[ps], slot_end[s])

        # generalized coordinates in slot order, and where each comes from
        ncoord = [JOINT_COORDS[t][0] for t in slot_type]
        ndof = [JOINT_COORDS[t][1] for t in slot_type]
        slot_q = np.concatenate([[0], np.cumsum(ncoord)]).astype(np.int64)
        slot_qd = np.concatenate([[0], np.cumsum(ndof)]).astype(np.int64)
        coord_state, coord_body, coord_comp = [], [], []
        dof_state, dof_body, dof_comp, dof_slot = [], [], [], []
        for s in range(ns):
            j = slot_joint[s]
            for k in range(ncoord[s]):
                coord_state.append(-1 if j == VIRTUAL else int(q_start[j] + k))
                coord_body.append(slot_child[s] if j == VIRTUAL else -1)
                coord_comp.append(k)
            for k in range(ndof[s]):
                dof_state.append(-1 if j == VIRTUAL else int(qd_start[j] + k))
                dof_body.append(slot_child[s] if j == VIRTUAL else -1)
                dof_comp.append(k)
                dof_slot.append(s)
        self.coord_count, self.dof_count = int(slot_q[-1]), int(slot_qd[-1])
        art_dof_start = slot_qd[np.asarray(art_slot_start, np.int64)]
        n_art = np.diff(art_dof_start)
        art_mat_start = np.concatenate([[0], np.cumsum(n_art * n_art)]).astype(np.int64)
        self.matrix_size = int(art_mat_start[-1])
        self.max_dofs = int(n_art.max()) if len(n_art) else 0

        # every degree of freedom must move some mass (or carry armature): else M is singular
        mass = model.body_mass.numpy()
        armature = model.joint_armature.numpy()
        subtree_mass = mass[np.asarray(slot_child, np.int64)].astype(np.float64) if ns else np.zeros(0)
        for s in reversed(range(ns)):
            p = slot_parent[s]
            if p >= 0:
                subtree_mass[slot_of_body[p]] += subtree_mass[s]
        for d in range(self.dof_count):
            s = dof_slot[d]
            if subtree_mass[s] <= 0.0 and (dof_state[d] < 0 or armature[dof_state[d]] <= 0.0):
                j = slot_joint[s]
                raise ValueError(f"FeatherstoneSolver: joint {j} ('{labels[j]}', {JOINT_NAMES[slot_type[s]]}) moves "
                                 "no mass: every body beyond it is massless; give one a mass or the joint armature")

        self.kinematic_bodies = np.flatnonzero((slot_of_body < 0) & (inv_mass == 0.0)).astype(np.int32)
        self.jointed_bodies = np.flatnonzero(child_joint >= 0)
        self.slot_of_body_np = slot_of_body
        self.slot_child_np = np.asarray(slot_child, np.int64)
        self.slot_joint_np = np.asarray(slot_joint, np.int64)
        self.art_dof_start_np = art_dof_start.astype(np.int64)
        self.art_mat_start_np = art_mat_start
        self.dof_state_np = np.asarray(dof_state, np.int64)
        self.coord_state_np = np.asarray(coord_state, np.int64)

        def arr(x):
            return wp.array(np.asarray(x, dtype=np.int32).reshape(-1) if len(x) else np.zeros(1, np.int32),
                            dtype=wp.int32, device=model.device)

        self.slot_joint, self.slot_type, self.slot_parent = arr(slot_joint), arr(slot_type), arr(slot_parent)
        self.slot_child, self.slot_end, self.slot_art = arr(slot_child), arr(slot_end), arr(slot_art)
        self.slot_q, self.slot_qd = arr(slot_q), arr(slot_qd)
        self.art_slot_start, self.art_dof_start = arr(art_slot_start), arr(art_dof_start)
        self.art_mat_start = arr(art_mat_start)
        self.coord_state, self.coord_body, self.coord_comp = arr(coord_state), arr(coord_body), arr(coord_comp)
        self.dof_state, self.dof_body, self.dof_comp = arr(dof_state), arr(dof_body), arr(dof_comp)
        self.dof_slot = arr(dof_slot)
        self.body_slot = arr(slot_of_body)
        self.body_art = arr([slot_art[s] if s >= 0 else -1 for s in slot_of_body])
        self.kinematic = arr(self.kinematic_bodies)
        self.tree = Tree()  # the same arrays, as the kernels take them
        for name in Tree.vars:
            setattr(self.tree, name, getattr(self, name))
