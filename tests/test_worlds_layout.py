"""Many worlds and the broad phase: a world is swept alike however the worlds are laid out, a plane per world
keeps contact buffers linear in the worlds, and a many-world model refuses a single-world USD export.

Found by the second outside review; the reference is the scene simulated alone at the same place (bitwise).
"""

from __future__ import annotations

import numpy as np
import pytest

import inertia
from conftest import DEVICE


# --------------------------------------------------------------------------- layout independence, planes per world
def _stacked_boxes():
    """A row of boxes each carrying a slightly offset box: several contacts per body, sensitive to their order."""
    b = inertia.ModelBuilder()
    b.add_ground_plane()  # one per world (shared_static=False): the per-world plane path
    for i in range(4):
        x = 0.18 * i
        a = b.add_body(xform=((x, 0.0, 0.1), (0, 0, 0, 1)), linear_velocity=(0.3, 0.0, 0.0))
        b.add_shape_box(a, hx=0.1, hy=0.1, hz=0.1)
        c = b.add_body(xform=((x + 0.03, 0.01, 0.3), (0, 0, 0, 1)))
        b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    return b


def _run_boxes(model, steps=150):
    solver = inertia.SemiImplicitSolver(model)
    a, b, contacts = model.state(), model.state(), model.contacts()
    for _ in range(steps):
        model.collide(a, contacts)
        solver.step(a, b, None, contacts, 1e-3)
        a, b = b, a
    return a.body_q.numpy(), contacts


def test_a_world_is_swept_alike_however_the_worlds_are_laid_out():
    """Worlds laid out along y (across the scene's own row along x) must not change the broad phase's sweep axis,
    whose order decides the order in which contact forces are summed: each world stays bitwise the scene alone at
    the same place (found by the second outside review: an axis from the spread of all shapes broke this)."""
    outer = inertia.ModelBuilder()
    outer.replicate(_stacked_boxes(), 4, spacing=(0.0, 5.0, 0.0))
    many, _ = _run_boxes(outer.finalize(device=DEVICE))
    nb = 8
    for w in range(4):
        alone = inertia.ModelBuilder()
        alone.add_builder(_stacked_boxes(), xform=((0.0, 5.0 * w, 0.0), (0, 0, 0, 1)))
        one, _ = _run_boxes(alone.finalize(device=DEVICE))
        assert np.array_equal(many[w * nb:(w + 1) * nb], one), w


def test_a_plane_per_world_keeps_contact_buffers_linear_in_the_number_of_worlds():
    """Each world's own ground: a shape meets the shared planes and its own world's only, so capacities and
    plane tests grow with the worlds, not their square; every box still rests on its own ground."""
    sizes = {}
    for worlds in (4, 64):
        outer = inertia.ModelBuilder()
        outer.replicate(_stacked_boxes(), worlds, spacing=0.0)  # all grounds at the same place
        model = outer.finalize(device=DEVICE)
        q, contacts = _run_boxes(model, steps=100)
        caps = contacts.counts()
        sizes[worlds] = caps["rigid_pair_max"]
        assert caps["rigid_pairs"] <= caps["rigid_pair_max"] and caps["rigid_contacts"] <= caps["rigid_contact_max"]
        # the lower boxes stand on their own ground (centre 10 cm up, sunk by about two boxes' weight over
        # four corners, 16 kg g / (4 ke) = 3.9 mm), in every world alike
        z = q[:, 2].reshape(worlds, 8)
        assert np.allclose(z, z[0], atol=1e-6) and 0.09 < z[0, 0] < 0.1
    assert sizes[64] == 16 * sizes[4]  # linear: (1 own plane + 8) per shape on a body


def test_save_usd_refuses_a_model_of_many_worlds(tmp_path):
    outer = inertia.ModelBuilder()
    outer.replicate(_stacked_boxes(), 2, spacing=1.0)
    with pytest.raises(ValueError, match="save_usd writes one world; this scene has 2"):
        inertia.save_usd(outer.finalize(device=DEVICE), str(tmp_path / "two.usda"))
