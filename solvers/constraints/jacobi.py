"""Jacobi iterations with mass splitting: how much of its correction each constraint applies, and applying them.

Every constraint of an iteration reads the same iterate and adds its correction to that iteration's
accumulator (``delta``, ``body_delta``); :func:`apply_corrections` and :func:`apply_body_corrections`
then write iterate k + 1 = iterate k + the summed corrections into a new row: every iterate stays
available to a recorded tape.

**Step-local iterates.** The iterates are what moved since the step began (``integrators/xpbd.py``):
particle displacements dx (x = x_start + dx), and each body's motion (centre of mass displacement,
rotation) with its pose rebuilt from the step's start. A constraint reads differences of positions as
the difference of the start positions plus that of the displacements, and slips and rates from the
displacements alone, so nothing depends on how far from the origin the scene is.

**Particles.** The constraint kernels scale their corrections by the per-element factors of
:func:`jacobi_scales` (relaxation and mass splitting); contacts are applied in full.

**Bodies.** Summing the corrections of n constraints that all fix the same error would overshoot n
times, so each body b is split into parts (Tonge et al. 2012): a constraint uses the inverse mass
s_b w_b of its part,

    dlambda = (-C - alpha~ lambda) / (s_a w_a + s_b w_b + alpha~),

and applies w dlambda to the whole body (``body_frames.add_positional``). s_b = n_b^p with n_b the
constraints on body b this step (:func:`count_body_constraints`: its joint rows, its shape-shape
contacts that penetrate at the predicted poses, the particle contacts on its shapes) and p the
solver's ``splitting``: 1 ("full", never overshoots) or 1/2 ("sqrt", the default, as for particles).
Why 1/2 helps: the corners of a resting box each see the box's rotational inverse mass too (for a
cube corner 3/m of its 4/m), which cancels only in their sum, so full splitting corrects a flat
contact by 1/4 per iteration; 1/sqrt(n) by 1/2 (measured: the settling of a 5-box stack and the
creep of a box stuck on a slope fall 2-5x). At convergence the multipliers (lambda / dt^2 is a
constraint's force) are the physical ones whatever s is. The counts are integers and carry no
gradient. :func:`apply_body_corrections` adds each body's summed (dx, dtheta) to its motion (dtheta as
a first-order quaternion update of the motion's rotation, renormalized).
"""

from types import MappingProxyType

import numpy as np
import warp as wp

from ...collision.contact_geometry import RigidContacts, rigid_contact_geometry
from ...collision.particle_shape import SoftContacts
from ...collision.sdf import ShapeGeometry
from ...integrators.xpbd import pose_from_motion
from ..step_data import stage
from .body_frames import world_frame


def jacobi_scales(model, relaxation: float, splitting: str = "sqrt") -> MappingProxyType:
    """Per-element factors omega / sqrt(max n_i) over the element's particles.

    n_i counts the constraints on particle i: one per spring and bending
    edge, two per triangle (stretch, area) and per tet (deviatoric, volumetric).
    Why the square root: Jacobi corrections of
    the n constraints on a particle add up, and 1 / n (full mass splitting)
    guarantees they never overshoot together but converges very slowly on
    soft bodies (n ~ 20-40), while 1 / sqrt(n) reflects that the constraints
    of a well-shaped mesh push in different directions. Measured on a
    cantilever and a resting cube (tests/test_xpbd.py): within 1-2 % of the
    converged answer in 20 iterations where 1 / n needs ~100. The scale
    multiplies the multiplier increments as well as the corrections, so the
    converged equilibrium is unchanged. Computed once from the topology (host
    side, at solver construction). Returns ``{"spring", "tri", "edge", "tet"}`` arrays.
    """
    n = np.zeros(max(model.particle_count, 1))

    def topology(count, array, width):
        return array.numpy().reshape(-1, width) if count else np.zeros((0, width), int)

    ij = topology(model.spring_count, model.spring_indices, 2)
    tris = topology(model.tri_count, model.tri_indices, 3)
    edges = topology(model.edge_count, model.edge_indices, 4)
    tets = topology(model.tet_count, model.tet_indices, 4)
    for idx, per in ((ij, 1.0), (tris, 2.0), (edges, 1.0), (tets, 2.0)):
        for col in idx.T:
            np.add.at(n, col, per)

    def per_element(idx):
        if len(idx) == 0:
            return wp.zeros(1, dtype=float, device=model.device)
        share = np.maximum(n[idx].max(axis=1), 1.0)
        s = relaxation / (np.sqrt(share) if splitting == "sqrt" else share)
        return wp.array(s.astype(np.float32), dtype=float, device=model.device)

    # read-only: steps replay graphs that froze these arrays (inertia.replay); replace the mapping to change them
    return MappingProxyType({"spring": per_element(ij), "tri": per_element(tris), "edge": per_element(edges),
                             "tet": per_element(tets)})


# ---------------------------------------------------------------------------------------------- mass splitting
@wp.kernel
def count_contact_constraints_kernel(
    # Model:
    shapes: ShapeGeometry,
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    contacts: RigidContacts,
    soft: SoftContacts,
    # Data out:
    split: wp.array(dtype=float),
):
    c = wp.tid()
    if c < contacts.capacity and c < contacts.count[0]:
        b0 = shapes.body[contacts.shape0[c]]
        b1 = shapes.body[contacts.shape1[c]]
        g = rigid_contact_geometry(body_q, shapes, contacts, c, 0.0)
        if g.depth <= 0.0:
            b0 = -1
            b1 = -1
        if b0 >= 0:
            wp.atomic_add(split, b0, 1.0)
        if b1 >= 0:
            wp.atomic_add(split, b1, 1.0)
    if c < soft.capacity and c < soft.count[0]:
        b = shapes.body[soft.shape[c]]
        if b >= 0:
            wp.atomic_add(split, b, 1.0)


@wp.kernel
def split_factors_kernel(
    # In:
    exponent: float,
    # Data out:
    split: wp.array(dtype=float),
):
    b = wp.tid()
    split[b] = wp.pow(wp.max(split[b], 1.0), exponent)


def split_factors(model, exponent: float, split) -> None:
    """``split`` (constraint counts per body) to mass-splitting factors n^exponent (n >= 1), in place."""
    wp.launch(split_factors_kernel, dim=model.body_count, inputs=[float(exponent)], outputs=[split],
              device=model.device)


@stage("mass splitting")
def count_body_constraints(model, data) -> None:
    """Stage: each body's mass-splitting factor this step, n^exponent (n >= 1), into ``split``.

    n: the body's joint rows, its shape-shape contacts that penetrate at the predicted poses
    (candidates that do not touch would only slow the others down), and the particle-contact
    candidates on its shapes.
    """
    if model.body_count == 0:
        return
    b, contacts = data.buffers, data.contacts
    wp.copy(b.split, data.solver.joint_rows)
    n = 0
    if contacts is not None:
        n = max(contacts.rigid_contact_max, contacts.soft_contact_max if model.shape_count else 0)
    if n > 0:
        wp.launch(count_contact_constraints_kernel, dim=n, device=model.device,
                  inputs=[data.shapes, b.rows.body_q[0], data.rigid_contacts, data.soft_contacts],
                  outputs=[b.split])
    split_factors(model, data.solver.split_exponent, b.split)


# ---------------------------------------------------------------------------------------------- element constraints
def element_constraint_stage(name: str, kernel, count: str, arrays: tuple, multipliers: str, scale: str):
    """The stage ``fn(model, data, k)`` of a per-element constraint kernel on particle iterate k.

    The kernel reads ``particle_inv_mass`` and the model arrays named in ``arrays`` (its ``# Model:``
    group), then the step's start positions, displacement iterate k (the particles' motion since the
    step began: x = x_start + dx) and the multipliers of iterate k (buffer ``multipliers``), the
    element's Jacobi scales (``jacobi_scales()[scale]``) and dt, and writes iteration k's corrections
    and the multipliers of iterate k + 1. ``count``: the model attribute counting the elements.
    """

    @stage(name)
    def solve(model, data, k: int) -> None:
        n = getattr(model, count)
        if n == 0:
            return
        rows = data.buffers.rows
        lam = getattr(rows, multipliers)
        wp.launch(kernel, dim=n, device=model.device,
                  inputs=[model.particle_inv_mass, *(getattr(model, a) for a in arrays), data.state_in.particle_q,
                          rows.dx[k], lam[k], data.solver.scales[scale], data.dt],
                  outputs=[rows.delta[k], lam[k + 1]])

    solve.__doc__ = f"Stage: the constraints of every element counted by ``model.{count}`` on particle iterate k."
    return solve


# ---------------------------------------------------------------------------------------------- corrections
@stage("clear corrections")
def clear_corrections(model, data) -> None:
    """Stage: zero every iteration's correction accumulators (the constraints add into them)."""
    data.buffers.delta.zero_()
    data.buffers.body_delta.zero_()


def _add_corrections_kernel(dtype):
    """x_out = x + delta elementwise, for one dtype (particle iterates: vec3; body velocities: spatial_vector).

    One definition, one kernel per dtype with a name of its own (Warp 1.19's CPU graph capture replays
    kernels by name: overloads sharing one would replay as whichever was recorded first).
    """

    @wp.kernel(name=f"add_corrections_{dtype.__name__}")
    def add_corrections(
        # Data in:
        x: wp.array(dtype=dtype),
        delta: wp.array(dtype=dtype),
        # Data out:
        x_out: wp.array(dtype=dtype),
    ):
        tid = wp.tid()
        x_out[tid] = x[tid] + delta[tid]

    return add_corrections


ADD_CORRECTIONS = {dtype: _add_corrections_kernel(dtype) for dtype in (wp.vec3, wp.spatial_vector)}


def add_corrections(model, count: int, x, delta, x_out) -> None:
    """``x_out = x + delta`` over ``count`` entries."""
    wp.launch(ADD_CORRECTIONS[x.dtype], dim=count, inputs=[x, delta], outputs=[x_out], device=model.device)


@stage("iteration {0}", writes=lambda data, k: {"dx": data.buffers.rows.dx[k + 1]})
def apply_corrections(model, data, k: int) -> None:
    """Stage: particle displacement iterate k + 1 = iterate k + iteration k's summed corrections."""
    if model.particle_count == 0:
        return
    rows = data.buffers.rows
    add_corrections(model, model.particle_count, rows.dx[k], rows.delta[k], rows.dx[k + 1])


@wp.kernel
def apply_body_corrections_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    # Data in:
    body_q_start: wp.array(dtype=wp.transform),
    motion: wp.array(dtype=wp.transform),
    split: wp.array(dtype=float),
    delta: wp.array(dtype=wp.spatial_vector),
    # Data out:
    motion_out: wp.array(dtype=wp.transform),
    pose_out: wp.array(dtype=wp.transform),
    com_out: wp.array(dtype=wp.vec3),
    inv_inertia_out: wp.array(dtype=wp.mat33),
):
    b = wp.tid()
    M = motion[b]
    d = delta[b]
    dtheta = wp.spatial_bottom(d)
    dq = wp.transform_get_rotation(M)
    dq_new = dq + wp.quat(dtheta[0], dtheta[1], dtheta[2], 0.0) * dq * 0.5
    # Always the full update, so a correction that happens to be exactly zero still carries its derivative;
    # only the renormalization is skipped when nothing turned: then dq_new is dq bit for bit and an untouched
    # body keeps its pose bit for bit.
    if wp.length_sq(dtheta) > 0.0:
        dq_new = wp.normalize(dq_new)
    M_new = wp.transform(wp.transform_get_translation(M) + wp.spatial_top(d), dq_new)
    motion_out[b] = M_new
    com = body_com[b]
    X_new = pose_from_motion(body_q_start[b], com, M_new)
    pose_out[b] = X_new
    com_w, inv_inertia_w = world_frame(X_new, com, body_inv_inertia[b], split[b])
    com_out[b] = com_w
    inv_inertia_out[b] = inv_inertia_w


@stage("iteration {0}", writes=lambda data, k: {"body_q": data.buffers.rows.body_q[k + 1]})
def apply_body_corrections(model, data, k: int) -> None:
    """Stage: body iterate k + 1 = iterate k moved by iteration k's summed corrections, and its body frames.

    The corrections add to the bodies' motion since the step began (``body_motion``, step-local: see
    ``integrators/xpbd.py``); the poses are rebuilt from it and the step's start.
    """
    if model.body_count == 0:
        return
    b = data.buffers
    rows = b.rows
    wp.launch(apply_body_corrections_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_inertia, data.state_in.body_q, rows.body_motion[k], b.split,
                      rows.body_delta[k]],
              outputs=[rows.body_motion[k + 1], rows.body_q[k + 1], rows.frame_com[k + 1],
                       rows.frame_inv_inertia[k + 1]])
