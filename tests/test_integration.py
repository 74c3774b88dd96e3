"""Symplectic Euler against its closed forms: free fall, kinematic particles, linear damping.

The integrator is  v' = v + dt (f/m + g - c v),  x' = x + dt v'  (kinematic
particles: x' = x + dt v). For constant acceleration a and no damping this gives
exactly  v_n = v_0 + a dt n,  x_n = x_0 + v_0 dt n + a dt^2 n (n + 1) / 2,
so the only admissible error is float32 rounding. The tolerances below are
rounding-error bounds (a few ulps per operation per step), far below the
O(dt) difference to the continuous solution (a dt^2 n / 2) or to explicit
Euler (a dt^2 n), which each test checks it can tell apart.
"""

from __future__ import annotations

import numpy as np
import pytest

import inertia
from conftest import DEVICE, simulate

EPS32 = float(np.finfo(np.float32).eps)


def rounding_bounds(n, dt, x_scale, v_scale, a_scale=20.0):
    """Worst-case float32 error of n symplectic Euler steps (2 roundings per update, errors add up).

    v: 2 eps n (|v|max + dt |a|) per component; x: 2 eps n (|x|max + dt |v|max) + dt n * (error of v).
    ``x_scale``, ``v_scale`` and ``a_scale`` bound the |x|, |v| and |a| components in the run.
    """
    tol_v = 2.0 * EPS32 * n * (v_scale + dt * a_scale) + EPS32 * v_scale
    tol_x = 2.0 * EPS32 * n * (x_scale + dt * v_scale) + dt * n * tol_v + EPS32 * x_scale
    return tol_x, tol_v


@pytest.mark.parametrize("up_axis", ["z", "y"])
def test_free_fall_matches_symplectic_euler_closed_form(up_axis):
    dt, n = 0.01, 200
    g = -9.81
    b = inertia.ModelBuilder(up_axis=up_axis, gravity=g)
    up = np.array(b.up_vector)
    x0 = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 3.0], [-0.5, 4.0, 2.0]])
    v0 = np.array([[0.0, 0.0, 0.0], [1.5, -0.5, 2.0], [-3.0, 0.25, 0.5]])
    masses = [1.0, 0.2, 7.5]  # free fall is mass independent
    for x, v, m in zip(x0, v0, masses):
        b.add_particle(pos=x, vel=v, mass=m)
    # a fourth particle with a constant external force F: a = g + F/m
    force = np.array([2.0, -1.0, 3.0])
    m4 = 0.5
    b.add_particle(pos=(2.0, 2.0, 2.0), mass=m4)
    model = b.finalize(device=DEVICE)

    sim = simulate(model, 0, dt)
    sim.control.particle_f.assign(np.array([[0, 0, 0]] * 3 + [force], dtype=np.float32))
    sim.step(n, dt)

    a = np.tile(g * up, (4, 1))
    a[3] += force / m4
    X0 = np.vstack([x0, [2.0, 2.0, 2.0]])
    V0 = np.vstack([v0, [0.0, 0.0, 0.0]])
    v_ref = V0 + a * dt * n
    x_ref = X0 + V0 * dt * n + a * dt**2 * n * (n + 1) / 2.0

    tol_x, tol_v = rounding_bounds(n, dt, np.abs(x_ref).max() + 5.0, np.abs(v_ref).max() + 5.0)
    err_x = np.abs(sim.q() - x_ref).max()
    err_v = np.abs(sim.qd() - v_ref).max()
    print(f"free fall ({up_axis} up): |x err| {err_x:.2e} (tol {tol_x:.2e}), |v err| {err_v:.2e} (tol {tol_v:.2e})")
    assert err_v <= tol_v
    assert err_x <= tol_x
    # The test can tell symplectic Euler from the continuous solution and from explicit Euler:
    # both differ from x_ref by at least |g| dt^2 n / 2 = 0.098 m here.
    assert np.abs(g) * dt**2 * n / 2.0 > 20.0 * tol_x


def test_kinematic_particles_ignore_forces_and_gravity():
    dt, n = 0.01, 150
    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.particle_damping = 3.0  # damping acts on dynamic particles only
    fixed = b.add_particle(pos=(0.3, -0.2, 1.0), vel=(0.0, 0.0, 0.0), mass=0.0)
    moving_v = np.array([1.0, -2.0, 0.5])
    moving = b.add_particle(pos=(5.0, 5.0, 5.0), vel=moving_v, mass=0.0)
    model = b.finalize(device=DEVICE)
    sim = simulate(model, 0, dt)
    # a large external force must not move a kinematic particle either
    sim.control.particle_f.assign(np.array([[100.0, 100.0, 100.0], [-50.0, 20.0, 10.0]], dtype=np.float32))
    sim.step(n, dt)
    q, qd = sim.q(), sim.qd()
    # a particle at rest is bit-for-bit unchanged
    assert np.array_equal(q[fixed], model.particle_q.numpy()[fixed].astype(np.float64))
    assert np.array_equal(qd[fixed], np.zeros(3))
    # a moving one drifts at exactly its own velocity: x_n = x_0 + n dt v (float32 rounding only)
    x_ref = np.array([5.0, 5.0, 5.0]) + n * dt * moving_v
    tol_x, _ = rounding_bounds(n, dt, np.abs(x_ref).max(), np.abs(moving_v).max())
    assert np.abs(q[moving] - x_ref).max() <= tol_x
    assert np.array_equal(qd[moving], moving_v.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("gravity", [0.0, -9.81])
def test_particle_damping_follows_its_discrete_formula(gravity):
    # v_{n+1} = v_n + dt (g - c v_n) = r v_n + dt g with r = 1 - c dt, hence
    #   v_n = v_inf + (v_0 - v_inf) r^n,   v_inf = g / c,
    #   x_n = x_0 + dt sum_{k=1..n} v_k = x_0 + dt (n v_inf + (v_0 - v_inf) r (1 - r^n) / (1 - r)).
    c, dt, n = 2.0, 0.01, 100
    b = inertia.ModelBuilder(up_axis="z", gravity=gravity)
    b.particle_damping = c
    v0 = np.array([3.0, -1.0, 2.0])
    x0 = np.array([0.0, 1.0, 2.0])
    b.add_particle(pos=x0, vel=v0, mass=0.7)
    model = b.finalize(device=DEVICE)
    sim = simulate(model, n, dt)

    r = 1.0 - c * dt
    g = np.array([0.0, 0.0, gravity])
    v_inf = g / c
    v_ref = v_inf + (v0 - v_inf) * r**n
    x_ref = x0 + dt * (n * v_inf + (v0 - v_inf) * r * (1.0 - r**n) / (1.0 - r))
    tol_x, tol_v = rounding_bounds(n, dt, np.abs(x_ref).max() + 3.0, 5.0)
    err_v = np.abs(sim.qd()[0] - v_ref).max()
    err_x = np.abs(sim.q()[0] - x_ref).max()
    print(f"damping (g={gravity}): |v err| {err_v:.2e} (tol {tol_v:.2e}), |x err| {err_x:.2e} (tol {tol_x:.2e})")
    assert err_v <= tol_v
    assert err_x <= tol_x
    # The exponential e^{-c t} of the continuous ODE differs by 0.27 % of v_0 - v_inf here (8e-3 m/s), far outside the tolerance.
    v_cont = v_inf + (v0 - v_inf) * np.exp(-c * dt * n)
    assert np.abs(v_cont - v_ref).max() > 20.0 * tol_v
