"""The smooth-contact option (``builder.contact_smoothing = h``): its rest state, its gradients, its point.

With h > 0 the penetration depth d becomes h * softplus(d / h), so a particle of
mass m resting on ground of stiffness ke sits at depth h * ln(exp(m g / (ke h)) - 1)
(closed form, checked here) instead of m g / ke. The point of the option: the
gradient of a bounce with respect to the drop height stops jumping with the step
at which contact begins, so its spread across nearby initial conditions falls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import inertia
from conftest import DEVICE, simulate
from gradcheck import Input, TorchProblem, check_gradient

G = 9.81


def ball_on_ground(h: float, ke: float, kd: float = 10.0, z: float = 0.5, vx: float = 0.0):
    b = inertia.ModelBuilder(gravity=-G)
    b.contact_smoothing = h
    b.add_particle((0.0, 0.0, z), vel=(vx, 0.0, 0.0), mass=1.0, radius=0.05)
    b.add_ground_plane(ke=ke, kd=kd, mu=0.3)
    return b.finalize(device=DEVICE)


@pytest.mark.parametrize("h", [0.0, 0.005, 0.02])
def test_rest_depth_matches_the_softplus_closed_form(h):
    ke, r = 1.0e3, 0.05
    model = ball_on_ground(h, ke, kd=20.0, z=r + 0.01)
    assert model.contact_margin >= 12.0 * h
    sim = simulate(model, 3000, 1.0e-3)  # damping ratio 0.32: settled to << 1e-5 m after 3 s
    depth = r - sim.q()[0, 2]
    c = G / (ke * h) if h > 0 else None
    expected = G / ke if h == 0 else h * math.log(math.expm1(c))
    assert abs(sim.qd()[0, 2]) < 1e-4
    assert depth == pytest.approx(expected, abs=2e-5), (h, depth, expected)
    if h == 0.02:
        assert depth < 0.0  # with this much smoothing it rests above the surface, as the formula says


def _height_gradients(h: float, heights) -> np.ndarray:
    """d(x_T + z_T)/d z_0 for a ball dropped from each height, bouncing and sliding on stiff ground."""
    model = ball_on_ground(h, ke=1.0e4)
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 30, 1.0 / 60.0, 10, output="final")
    out = []
    for z in heights:
        q0 = torch.tensor([[0.0, 0.0, z]], requires_grad=True)
        q, _ = ro(q0, torch.tensor([[1.0, 0.0, 0.0]]))
        (q[0, 0] + q[0, 2]).backward()
        out.append(q0.grad[0, 2].item())
    return np.array(out)


def test_smoothing_lowers_gradient_variance_across_nearby_drops():
    heights = np.linspace(0.5, 0.52, 9)  # 2 cm apart in all: the same motion, contact at other substeps
    hard = _height_gradients(0.0, heights)
    smooth = _height_gradients(0.003, heights)
    print(f"[smooth contact] std of dL/dz0: hard {hard.std():.3f}, h = 3 mm {smooth.std():.3f}")
    assert np.isfinite(hard).all() and np.isfinite(smooth).all()
    assert smooth.std() < 0.1 * hard.std()


def test_smooth_contact_gradients_match_central_differences():
    """A ball dropped onto smoothed ground (h = 3 mm), bouncing and sliding: initial state and materials."""
    model = ball_on_ground(0.003, ke=1.0e4, z=0.2, vx=1.0)
    ro = inertia.Rollout(model, inertia.SemiImplicitSolver(model), 20, 1.0 / 60.0, 10, output="final",
                         params=("shape_material_ke", "shape_material_mu"))

    def run(x):
        q, qd = ro(x["q0"], x["qd0"], params={"shape_material_ke": x["ke"], "shape_material_mu": x["mu"]})
        return q.double()[0, 0] + q.double()[0, 2] + 0.1 * qd.double()[0, 2] + 0.1 * qd.double()[0, 0]

    inputs = {"q0": torch.tensor([[0.0, 0.0, 0.2]]), "qd0": torch.tensor([[1.0, 0.0, 0.0]]),
              "ke": torch.tensor([1.0e4]), "mu": torch.tensor([0.3])}
    # steps where the quotient has converged and is above float32 noise: 1 mm (mm/s), 1 % of each material
    check_gradient("smooth contact", TorchProblem(run, inputs),
                   [Input("q0", 1e-3), Input("qd0", 1e-3), Input("ke", 1e-2, relative=True),
                    Input("mu", 1e-2, relative=True)], seed=17)


def test_negative_smoothing_is_refused():
    b = inertia.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0))
    b.contact_smoothing = -1e-3
    with pytest.raises(ValueError, match="contact_smoothing"):
        b.finalize(device=DEVICE)
