"""The largest stable time step of the SemiImplicitSolver's explicit forces, estimated from the model.

Symplectic Euler keeps an undamped oscillator of angular frequency w bounded while ``w dt <= 2``. Damping
is implicit per element in this solver (:mod:`inertia.solvers.forces.elements`), so it never limits the
step (it only widens the stable range), and the limit is the stiffest mode of the forces:

- **Elastic elements** (springs, membranes, bending, tets) together: the largest eigenvalue of
  ``M^-1/2 K M^-1/2`` at the rest positions, by power iteration on central differences of the solver's
  own force kernels (:func:`elastic_time_step`). It sees every element and how they share particles;
  the step at which test scenes actually blow up lies within 15 % of it (``tests/test_stability.py``;
  nonlinearity, contact and gravity take a little off).
- **Penalty contact** of a particle: the stiffest shape's ke over the particle's mass (absolute gains), or
  1 / tau^2 of the shortest time constant (mass-scaled gains, any mass).
- **Joints**: the mass-scaled attachment springs need ``sqrt(ke) dt <= 1`` (measured on a falling chain:
  its modes reach about 2 ke); drives and limits: their stiffness times the pair's inverse inertia about
  the joint axis (each body's about its centre of mass: the attachment only adds inertia about the pivot,
  so this bounds the mode from above).

Host-side work, once at solver construction (never inside a step, so steps stay capturable); a model
whose parameters are edited afterwards keeps the estimate of its construction.
"""

from __future__ import annotations

import numpy as np


def _two_over_w(w2) -> np.ndarray:
    w2 = np.asarray(w2, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(w2 > 0, 2.0 / np.sqrt(np.where(w2 > 0, w2, 1.0)), np.inf)


def _worst(dt) -> tuple:
    j = int(np.argmin(dt))
    return float(dt[j]), j


def stable_time_steps(model) -> dict:
    """``{kind: (dt_max [s], index)}`` of the bounds that are not elastic: ``particle contact`` (index: the
    particle), ``joint attachment``, ``joint drives`` (index: the joint); only finite ones."""
    out = {}
    if model.particle_count and model.shape_count:
        w = model.particle_inv_mass.numpy().astype(np.float64)
        tau = model.shape_material_tau.numpy().astype(np.float64)
        w2 = np.zeros_like(w)
        absolute = tau <= 0.0
        if absolute.any():  # ke [N/m] as given: its frequency depends on the particle's mass
            w2 = np.maximum(w2, float(model.shape_material_ke.numpy()[absolute].max()) * w)
        if (~absolute).any():  # mass-scaled: ke = m_eff / tau^2 whatever the mass
            w2 = np.where(w > 0, np.maximum(w2, 1.0 / float(tau[~absolute].min()) ** 2), w2)
        out["particle contact"] = _worst(_two_over_w(w2))
    if model.joint_count:
        attach = float(model.joint_attach_ke)
        if attach > 0:
            out["joint attachment"] = (1.0 / np.sqrt(attach), 0)
        # a limit's spring acts only where the dof has a finite limit (an unlimited dof's limit_ke never acts)
        limited = np.isfinite(model.joint_limit_lower.numpy()) | np.isfinite(model.joint_limit_upper.numpy())
        ke = np.maximum(model.joint_target_ke.numpy(), np.where(limited, model.joint_limit_ke.numpy(), 0.0))
        ke = ke.astype(np.float64)
        if ke.size and ke.max() > 0:
            out["joint drives"] = _worst(_drive_time_steps(model, ke))
    return {k: v for k, v in out.items() if np.isfinite(v[0])}


def _drive_time_steps(model, ke) -> np.ndarray:
    inv_i = model.body_inv_inertia.numpy().astype(np.float64)
    inv_m = model.body_inv_mass.numpy().astype(np.float64)
    parent, child = model.joint_parent.numpy(), model.joint_child.numpy()
    types, dof_start = model.joint_type.numpy(), model.joint_qd_start.numpy()
    axes = model.joint_axis.numpy().astype(np.float64)
    # the joint frame's rotation in the parent and child body frames (transforms: p (3), q (x, y, z, w))
    frames = {"p": model.joint_X_p.numpy().astype(np.float64), "c": model.joint_X_c.numpy().astype(np.float64)}
    out = np.full(model.joint_count, np.inf)
    for j in range(model.joint_count):
        if types[j] not in (0, 1) or dof_start[j + 1] == dof_start[j]:  # only prismatic and revolute are driven
            continue
        if types[j] == 1:  # revolute: the torque acts about the axis: each body's inverse inertia about it
            w_axis = 0.0
            for side, b in (("p", parent[j]), ("c", child[j])):
                if b >= 0:
                    a = _rotate(frames[side][j, 3:], axes[j])
                    w_axis += max(float(a @ inv_i[b] @ a), 0.0)
        else:
            w_axis = float(sum(inv_m[b] for b in (parent[j], child[j]) if b >= 0))
        out[j] = _two_over_w(ke[dof_start[j]] * w_axis)
    return out


def _rotate(q, v) -> np.ndarray:
    """``v`` rotated by the unit quaternion ``q`` (x, y, z, w)."""
    u, w = q[:3], q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def elastic_time_step(model, forces, iterations: int = 40, seed: int = 0):
    """The stable step [s] of the particles' elastic forces together, and the particle that moves most in the
    stiffest mode: power iteration on M^-1/2 K M^-1/2 at the rest positions.

    ``forces(x) -> (n, 3)``: the internal forces [N] at positions ``x`` (n, 3) with zero velocities. The
    stiffness times a direction is their central difference (1e-6 m: the forces are smooth there). This
    sees every element at once, so elements that share particles are accounted for exactly (the per-element
    bounds of :func:`stable_time_steps` can only bound them). Returns ``(inf, -1)`` without elastic forces.
    """
    n = model.particle_count
    w = model.particle_inv_mass.numpy().astype(np.float64)
    sw = np.sqrt(w)[:, None]
    if n == 0 or not sw.any():
        return np.inf, -1
    x0 = model.particle_q.numpy().astype(np.float64)
    z = np.random.default_rng(seed).standard_normal((n, 3)) * (sw > 0)
    lam, h = 0.0, 1.0e-6
    for _ in range(iterations):
        z /= max(np.linalg.norm(z), 1e-300)
        u = sw * z * (h / max(np.abs(sw * z).max(), 1e-300))  # a displacement of at most h
        ku = (forces(x0 - u) - forces(x0 + u)) / 2.0  # K u (forces are -K u to first order)
        y = sw * ku * (np.abs(sw * z).max() / h)  # M^-1/2 K M^-1/2 z
        lam = float(np.sum(y * z))
        if not np.isfinite(lam) or np.linalg.norm(y) == 0.0:
            break
        z = y
    if not (np.isfinite(lam) and lam > 0.0):
        return np.inf, -1
    return 2.0 / np.sqrt(lam), int(np.argmax(np.linalg.norm(z, axis=1)))


def smallest(steps: dict):
    """The kind, its element and dt of the smallest stable step in ``stable_time_steps``' result (or None)."""
    if not steps:
        return None
    kind = min(steps, key=lambda k: steps[k][0])
    return kind, steps[kind][1], steps[kind][0]
