"""The XPBD membrane and bending constraints' hand-written adjoints (solvers/constraints/hand_adjoint.py)
against Warp's generated adjoint of the same forward kernel, on one Jacobi iterate of a deformed cloth: every
gradient (positions, displacements, multipliers, inverse masses, rest shapes, areas, materials, rest angles)
for random output gradients, in both forms of the multiplier step (beta < 1 and >= 1), with pinned particles
and a collapsed bending wing. Rollouts through them are checked against central differences in test_xpbd.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE
from inertia.solvers.constraints import bending, hand_adjoint, triangles
from inertia.solvers.constraints.element_kernels import element_constraint_kernel
from inertia.solvers.forces.element_kernels import model_array_type

# Warp's generated adjoints of the same forward functions: the reference (a module of this file's own)
KINDS = {
    "triangles": (triangles.triangle_step, ("tri_indices", "tri_poses", "tri_areas", "tri_materials"), wp.vec2,
                  triangles.solve_triangle_constraints_kernel, triangles.triangle_constraints_adjoint_kernel,
                  "tri_count"),
    "bending": (bending.bending_step, ("edge_indices", "edge_rest_angle", "edge_bending_properties",
                                       "edge_bending_properties"), float,
                bending.solve_bending_constraints_kernel, bending.bending_constraints_adjoint_kernel, "edge_count"),
}
GENERATED = {
    kind: element_constraint_kernel(f"generated_adjoint_{kind}", __name__, step, *(model_array_type(a) for a in arrays),
                                    mult, backward=True)
    for kind, (step, arrays, mult, *_rest) in KINDS.items()
}


def deformed_cloth(collapse: bool):
    """A 3 x 3 cloth with two pinned particles, its particles moved off the rest shape (every constraint
    active); ``collapse``: one particle moved onto its neighbour, so a bending wing has no angle."""
    b = inertia.ModelBuilder(gravity=0.0)
    b.add_cloth_grid(3, 3, cell_x=0.1, cell_y=0.1, mass=0.02, fix_left=False, tri_ke=800.0, tri_ka=1200.0,
                     tri_kd=2.0, edge_ke=0.4, edge_kd=0.05)
    b.particle_mass[0] = 0.0
    b.particle_mass[3] = 0.0
    model = b.finalize(device=DEVICE, requires_grad=True)
    rng = np.random.default_rng(7)
    q = model.particle_q.numpy() + rng.uniform(-0.02, 0.02, (model.particle_count, 3))
    if collapse:
        q[5] = q[6]  # particles 5 and 6 coincide: the wing through both has zero area
    inv_mass = model.particle_inv_mass.numpy()
    inv_mass[inv_mass > 0] *= rng.uniform(0.5, 2.0, int((inv_mass > 0).sum()))  # unequal masses
    model.particle_inv_mass.assign(inv_mass)
    return model, q, rng


def arguments(model, kind, q, rng, dt):
    _, arrays, mult, *_ = KINDS[kind]
    n = getattr(model, KINDS[kind][5])
    width = 2 if mult is wp.vec2 else 1
    lam = rng.uniform(-0.02, 0.02, (n, width)).squeeze()
    inputs = [model.particle_inv_mass, *(getattr(model, a) for a in arrays),
              wp.array(q, dtype=wp.vec3, device=DEVICE, requires_grad=True),
              wp.array(rng.uniform(-0.01, 0.01, q.shape), dtype=wp.vec3, device=DEVICE, requires_grad=True),
              wp.array(lam, dtype=mult, device=DEVICE, requires_grad=True),
              wp.array(rng.uniform(0.4, 1.0, n).astype(np.float32), dtype=float, device=DEVICE), dt]
    outputs = [wp.zeros(model.particle_count, dtype=wp.vec3, device=DEVICE, requires_grad=True),
               wp.zeros(n, dtype=mult, device=DEVICE, requires_grad=True)]
    seeds = [rng.normal(size=(model.particle_count, 3)), rng.normal(size=lam.shape)]
    return n, inputs, outputs, seeds


def gradients(model, kind, n, inputs, outputs, seeds, hand: bool) -> list:
    """Every array input's gradient after one launch and a backward pass seeded with ``seeds``."""
    arrays = [a for a in (*inputs, *outputs) if isinstance(a, wp.array)]
    for a in arrays:
        if a.grad is not None:
            a.grad.zero_()
    tape = wp.Tape()
    with tape:
        if hand:
            hand_adjoint.launch(KINDS[kind][3], KINDS[kind][4], n, inputs, outputs, DEVICE)
        else:
            wp.launch(GENERATED[kind], dim=n, inputs=inputs, outputs=outputs, device=DEVICE)
    assert len(tape.launches) == 1 and callable(tape.launches[0]) == hand
    for out, seed in zip(outputs, seeds):
        out.grad.assign(seed.astype(np.float32))
    tape.backward()
    return [None if a.grad is None else a.grad.numpy().astype(np.float64).copy()
            for a in inputs if isinstance(a, wp.array)]


@pytest.mark.parametrize("kind", ["triangles", "bending"])
@pytest.mark.parametrize("dt", [1.0e-3, 2.0])  # beta = k measure dt^2 below and above 1: both forms of the step
@pytest.mark.parametrize("collapse", [False, True])
def test_hand_adjoint_matches_warps_generated_adjoint(kind, dt, collapse):
    model, q, rng = deformed_cloth(collapse)
    n, inputs, outputs, seeds = arguments(model, kind, q, rng, dt)
    ref = gradients(model, kind, n, inputs, outputs, seeds, hand=False)
    got = gradients(model, kind, n, inputs, outputs, seeds, hand=True)
    names = ["inv_mass", *KINDS[kind][1], "x_start", "dx", "lambda_in", "scale"]
    compared = 0
    for name, g, r in zip(names, got, ref):
        if name.endswith("indices") or name == "scale":
            continue  # integers; the Jacobi scale is the solver's constant
        assert r is not None and g is not None, name
        scale = np.abs(r).max()
        assert scale > 0.0, f"{kind} d/d{name}: the reference is all zero (a weak test)"
        # both are float32 sums of the same products in different orders: measured, they agree within
        # 4.2e-7 of the largest entry (a few ulps) in every case here. 1e-5 leaves 25x that for other hosts'
        # rounding; one term left out of the stretch's adjoint was 2.4e-4 off, of the bending's 0.12.
        err = np.abs(g - r).max()
        assert err <= 1e-5 * scale, f"{kind} d/d{name}: max error {err:.3g} of {scale:.3g} (dt {dt})"
        compared += 1
    assert compared == len(names) - 2
    # the multipliers' gradients are consumed, like Warp's adjoint of a store
    assert not np.any(outputs[1].grad.numpy())


def test_a_checked_rollout_checks_the_hand_adjoints_and_names_their_kernel():
    """``Rollout(check_finite=True)`` runs each recorded adjoint alone and checks what it wrote: a hand-written
    adjoint is a recorded function, not a launch, and is checked (and named) all the same."""
    torch = pytest.importorskip("torch")
    b = inertia.ModelBuilder(gravity=-9.81)
    b.add_cloth_grid(3, 3, cell_x=0.1, cell_y=0.1, mass=0.02, fix_left=True, tri_ke=800.0, tri_ka=800.0,
                     tri_kd=1.0, edge_ke=0.4, edge_kd=0.0)
    model = b.finalize(device=DEVICE)
    q0 = torch.tensor(model.particle_q.numpy())
    qd0 = torch.tensor(model.particle_qd.numpy())
    seed = torch.tensor(np.random.default_rng(3).uniform(-1.0, 1.0, (model.particle_count, 3)), dtype=torch.float32)

    def grad(check_finite, scale=1.0):
        ro = inertia.Rollout(model, inertia.XPBDSolver(model, iterations=4), 2, 1.0 / 60.0, 4, output="final",
                             check_finite=check_finite)
        qd = qd0.clone().requires_grad_(True)
        (ro(q0, qd)[0] * seed * scale).sum().backward()
        return qd.grad

    g = grad(False)
    assert torch.isfinite(g).all() and g.abs().max() > 0
    assert torch.equal(grad(True), g)  # the checked pass runs the same adjoints, one at a time
    # a finite seed that overflows float32 in the adjoint of the last iteration's constraints (measured: the
    # bending's, writing the start positions' gradient): found, and named by its forward kernel
    with pytest.raises(inertia.NonFiniteError, match=r"kernel 'solve_(bending|triangle)_constraints_kernel' at frame 1"):
        grad(True, scale=3.0e38)


def test_plane_contact_hand_adjoint_matches_warps_generated_adjoint():
    """The static-plane contact's hand-written adjoint (``particle_contacts.solve_plane_contacts_adjoint_kernel``)
    against Warp's generated adjoint of the same forward kernel: a tilted plane (its normal not an axis), particles
    in every case the forward kernel has: sticking and sliding friction, an overlap that the max depenetration
    push limits (the other side of the min), a pinned particle and one above the plane (no contact)."""
    from inertia.autodiff.backward_code import enable_gradients
    from inertia.collision.particle_shape import soft_contacts
    from inertia.collision.sdf import shape_geometry
    from inertia.solvers.constraints import particle_contacts as pc

    enable_gradients()  # the forward kernel's module with its generated adjoint: the reference
    b = inertia.ModelBuilder(gravity=0.0)
    tilt = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 2.0, 0.0)), 0.3)
    b.add_shape_plane(xform=wp.transform(wp.vec3(0.1, -0.2, 0.05), tilt), mu=0.4)
    rng = np.random.default_rng(11)
    n_particles = 24
    for i in range(n_particles):
        b.add_particle(tuple(rng.uniform(-0.5, 0.5, 3)), (0.0, 0.0, 0.0), 0.0 if i == 3 else rng.uniform(0.05, 0.2),
                       radius=0.05)
    model = b.finalize(device=DEVICE, requires_grad=True)
    normal = np.array(wp.quat_rotate(tilt, wp.vec3(0.0, 0.0, 1.0)))
    origin = np.array([0.1, -0.2, 0.05])
    # the particles put on the plane: depth 0.01-0.04 m (one high above: no contact), tangential motions small
    # (sticking: within mu * push) or large (sliding), normal motions into the plane (a made contact) or out of
    # it by more than max_push allows (an old overlap: push limited by the max depenetration, min's other side)
    x0 = rng.uniform(-0.5, 0.5, (n_particles, 3))
    x0 -= np.outer((x0 - origin) @ normal, normal)
    depth = rng.uniform(0.01, 0.04, n_particles)
    depth[5] = -0.5
    tangent = np.cross(normal, [1.0, 0.0, 0.0])
    tangent /= np.linalg.norm(tangent)
    slide = np.where(np.arange(n_particles) % 2 == 0, 1.0e-3, 5.0e-2)
    along = np.where(np.arange(n_particles) % 3 == 0, 0.03, -0.01)
    dxs = np.outer(slide, tangent) - np.outer(along, normal)
    x_end = x0 + np.outer(0.05 - depth, normal)
    x_start = x_end - dxs
    q = wp.array(x_start, dtype=wp.vec3, device=DEVICE, requires_grad=True)
    dx = wp.array(dxs, dtype=wp.vec3, device=DEVICE, requires_grad=True)
    contacts = model.contacts()
    state = model.state()
    state.particle_q.assign(x_end.astype(np.float32))
    model.collide(state, contacts)
    count = int(contacts.soft_contact_count.numpy()[0])
    assert count == n_particles - 1  # every particle but the one high above
    max_push = 0.02
    empty = wp.zeros(0, dtype=wp.transform, device=DEVICE)  # no bodies: the static branch only
    inputs = [model.particle_radius, model.particle_inv_mass, model.body_com, model.body_inv_mass,
              model.body_inv_inertia, shape_geometry(model), model.shape_material_mu, q, soft_contacts(contacts), dx,
              empty, empty, wp.zeros(0, dtype=float, device=DEVICE), max_push]
    outputs = [wp.zeros(n_particles, dtype=wp.vec3, device=DEVICE, requires_grad=True),
               wp.zeros(0, dtype=wp.spatial_vector, device=DEVICE, requires_grad=True)]
    kernel = pc.solve_shape_contacts_kernel_for(pc.PLANES)
    seed = rng.normal(size=(n_particles, 3)).astype(np.float32)
    wanted = {"radius": model.particle_radius, "mu": model.shape_material_mu, "x_start": q, "dx": dx}

    def grads(hand: bool):
        for a in wanted.values():
            a.grad.zero_()
        outputs[0].zero_()
        tape = wp.Tape()
        with tape:
            if hand:
                hand_adjoint.launch(kernel, pc.solve_plane_contacts_adjoint_kernel, contacts.soft_contact_max,
                                    inputs, outputs, DEVICE)
            else:
                wp.launch(kernel, dim=contacts.soft_contact_max, inputs=inputs, outputs=outputs, device=DEVICE)
        outputs[0].grad.assign(seed)
        tape.backward()
        return outputs[0].numpy().copy(), {k: a.grad.numpy().astype(np.float64).copy() for k, a in wanted.items()}

    delta_ref, ref = grads(False)
    delta_got, got = grads(True)
    np.testing.assert_array_equal(delta_got, delta_ref)  # the same forward kernel
    # the cases are there: sliding and sticking, both sides of the min (pushes of the depth and of max_push)
    n_dot = dxs @ normal
    limited = depth > max_push - n_dot
    assert limited[np.arange(n_particles) != 5].any() and (~limited[np.arange(n_particles) != 5]).any()
    for name, r in ref.items():
        scale = np.abs(r).max()
        assert scale > 0.0, f"d/d{name}: the reference is all zero (a weak test)"
        # the same products summed in another order (and the plane's normal applied directly rather than
        # through the inverse transform's adjoint): a few float32 ulps of the largest entry; 1e-5 as above
        err = np.abs(got[name] - r).max()
        assert err <= 1e-5 * scale, f"d/d{name}: max error {err:.3g} of {scale:.3g}"
