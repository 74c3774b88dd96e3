"""Particle-shape kernels compiled for the shape types a scene has (inertia.collision.sdf).

A scene's particle-shape detection, contact forces and XPBD contact constraints are built for the set of
shape types it holds, so a cloth over a ground plane compiles no mesh query. The arithmetic of each type is
the general function's: a particle landing on a shape of one type moves bit for bit the same whether that
type is alone in its scene or the scene holds every other type too (far away). Where the particles come to
rest against each type is checked against closed forms in tests/test_contact.py and
tests/test_contact_model.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import inertia
from conftest import DEVICE
from inertia.collision.sdf import shape_types
from inertia.types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_PLANE, GEO_SPHERE

I = (0.0, 0.0, 0.0, 1.0)
CUBE_V = np.array([[x, y, z] for x in (-0.2, 0.2) for y in (-0.2, 0.2) for z in (-0.2, 0.2)])
CUBE_F = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4], [2, 6, 3], [3, 6, 7],
                   [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]])
ADD = {
    GEO_SPHERE: lambda b, x: b.add_shape_sphere(xform=((x, 0.0, 0.0), I), radius=0.2),
    GEO_BOX: lambda b, x: b.add_shape_box(xform=((x, 0.0, 0.0), I), hx=0.2, hy=0.2, hz=0.2),
    GEO_CAPSULE: lambda b, x: b.add_shape_capsule(xform=((x, 0.0, 0.0), I), radius=0.2, half_height=0.1),
    GEO_CYLINDER: lambda b, x: b.add_shape_cylinder(xform=((x, 0.0, 0.0), I), radius=0.2, half_height=0.2),
    GEO_MESH: lambda b, x: b.add_shape_mesh(xform=((x, 0.0, 0.0), I), vertices=CUBE_V, indices=CUBE_F),
    GEO_PLANE: lambda b, x: b.add_shape_plane(xform=((x, 0.0, -1.0), I)),
}


def scene(kind, others: bool):
    """Three particles dropped onto a static shape of type ``kind`` at the origin; with ``others``, one shape of
    every other type 5 m away (the particles never reach them)."""
    b = inertia.ModelBuilder()
    ADD[kind](b, 0.0)
    if others:
        for k, add in enumerate(t for t in ADD if t != kind):
            ADD[add](b, 5.0 + 1.0 * k)
    for i in range(3):
        b.add_particle((0.03 * i - 0.03, 0.01 * i, 0.23 if kind != GEO_PLANE else -0.97), mass=0.01, radius=0.02)
    b.particle_collide = False
    return b.finalize(device=DEVICE)


def run(model, solver, steps=120, dt=1.0 / 1200.0):
    s0, s1, contacts = model.state(), model.state(), model.contacts()
    for _ in range(steps):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, dt)
        s0, s1 = s1, s0
    return s0.particle_q.numpy(), s0.particle_qd.numpy(), contacts.counts(since_reset=True)["soft_contacts"]


@pytest.mark.parametrize("solver", ["semi_implicit", "xpbd"])
@pytest.mark.parametrize("kind", list(ADD), ids=lambda k: inertia.types.GEO_NAMES[k])
def test_a_shape_type_alone_or_among_all_gives_the_same_bits(kind, solver):
    make = (lambda m: inertia.SemiImplicitSolver(m)) if solver == "semi_implicit" else (
        lambda m: inertia.XPBDSolver(m, iterations=4))
    alone, among = scene(kind, False), scene(kind, True)
    assert shape_types(alone) == {kind} and shape_types(among) == set(ADD)
    q1, v1, n1 = run(alone, make(alone))
    q2, v2, n2 = run(among, make(among))
    assert n1 > 0  # the particles did touch the shape
    assert np.array_equal(q1, q2) and np.array_equal(v1, v2)


def test_a_new_shape_type_array_is_read_again():
    """The type set is read once per ``model.shape_type`` array: a new array (here every shape turned into a
    sphere) is a new set."""
    model = scene(GEO_BOX, False)
    assert shape_types(model) == {GEO_BOX}
    model.shape_type = wp.array(np.full(model.shape_count, GEO_SPHERE, dtype=np.int32), dtype=wp.int32,
                                device=model.device)
    assert shape_types(model) == {GEO_SPHERE}
