"""Symplectic (semi-implicit) Euler for rigid bodies: the centre of mass as a particle (``euler.py``), the
rotation in momentum form,

    L' = I_w(q) w + dt tau            (world angular momentum about the com)
    q' = normalize(q + dt/2 [I_w(q)^-1 L', 0] q)
    w' = I_w(q')^-1 L'                (I_w(q) = R(q) I R(q)^T)

Stepping the angular momentum rather than the angular velocity carries the
gyroscopic term w x I w implicitly (it is what keeps L constant while I_w
turns), so a torque-free body keeps its angular momentum to rounding and
shows the intermediate-axis flip instead of gaining energy as an explicit
w += dt I^-1 (tau - w x I w) does. The rotation update runs in float64
inside the kernel (state stays float32): in float32 the round trip
L -> w -> L rounds the same way every step and drifts L linearly (1e-3 over
4,000 steps of a spinning box; 5e-6 in float64, tests/test_rigid_bodies.py).
Kinematic bodies (inverse mass 0) keep their velocity. Gravity per world, as ``euler.py``.
"""

import warp as wp

from ..autodiff.backward_code import on_demand
from .euler import world_gravity

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.func
def rotate_by(q: wp.quat, w: wp.vec3, dt: float):
    """Orientation after turning at angular velocity ``w`` (world) for ``dt``: first order, renormalized."""
    return wp.normalize(q + wp.quat(w[0], w[1], w[2], 0.0) * q * (0.5 * dt))


@wp.func
def rotate_by_d(q: wp.quatd, w: wp.vec3d, dt: wp.float64):
    return wp.normalize(q + wp.quatd(w[0], w[1], w[2], wp.float64(0.0)) * q * (wp.float64(0.5) * dt))


@wp.func
def to_d(v: wp.vec3):
    return wp.vec3d(wp.float64(v[0]), wp.float64(v[1]), wp.float64(v[2]))


@wp.func
def to_f(v: wp.vec3d):
    return wp.vec3(float(v[0]), float(v[1]), float(v[2]))


@wp.func
def quat_d(q: wp.quat):
    return wp.quatd(wp.float64(q[0]), wp.float64(q[1]), wp.float64(q[2]), wp.float64(q[3]))


@wp.func
def quat_f(q: wp.quatd):
    return wp.quat(float(q[0]), float(q[1]), float(q[2]), float(q[3]))


@wp.func
def world_inertia_times_d(q: wp.quatd, inertia: wp.mat33d, w: wp.vec3d):
    """R I R^T w for a body-frame inertia (or inverse inertia) and orientation q, in float64."""
    return wp.quat_rotate(q, inertia * wp.quat_rotate_inv(q, w))


@wp.func
def com_velocity_after(v: wp.vec3, f: wp.vec3, inv_mass: float, gravity: wp.vec3, dt: float):
    """v + dt (f / m + g): a dynamic body's centre-of-mass velocity after ``dt`` under force ``f`` [N] and gravity.
    Shared by this step, XPBD's prediction (``xpbd_bodies.py``) and the SemiImplicitSolver's end-of-step
    velocities of contact friction (``solvers/forces/body_contact.py``), so all three mean the same by a force."""
    return v + dt * (f * inv_mass + gravity)


@wp.func
def momentum_step(q: wp.quat, inertia: wp.mat33, w: wp.vec3, torque: wp.vec3, dt: float):
    """A dynamic body's step in momentum form, in float64: its orientation ``q`` (renormalized), its inverse
    inertia (body frame) and its world angular momentum about the com after ``dt``, L' = I_w(q) w + dt tau.
    (float32 rounding of L -> w -> L each step is biased and drifts L linearly.) Shared by the symplectic-Euler
    step here and XPBD's prediction (``xpbd_bodies.py``), so both mean the same by torques."""
    q64 = wp.normalize(quat_d(q))
    i64 = wp.mat33d(inertia)
    L = world_inertia_times_d(q64, i64, to_d(w)) + wp.float64(dt) * to_d(torque)
    return q64, wp.inverse(i64), L


@wp.kernel
def integrate_bodies_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    # Data in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    # In:
    dt: float,
    # Data out:
    q_out: wp.array(dtype=wp.transform),
    qd_out: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    pose = body_q[b]
    com = body_com[b]
    x = wp.transform_point(pose, com)
    v = wp.spatial_top(body_qd[b])
    w = wp.spatial_bottom(body_qd[b])
    m_inv = inv_mass[b]
    q = wp.transform_get_rotation(pose)
    if m_inv > 0.0:
        f = body_f[b]
        v = com_velocity_after(v, wp.spatial_top(f), m_inv, world_gravity(gravity, body_world[b]), dt)
        qd64, i64_inv, L = momentum_step(q, inertia[b], w, wp.spatial_bottom(f), dt)
        qd64 = rotate_by_d(qd64, world_inertia_times_d(qd64, i64_inv, L), wp.float64(dt))
        w = to_f(world_inertia_times_d(qd64, i64_inv, L))
        q = quat_f(qd64)
    else:
        q = rotate_by(q, w, dt)
    x = x + dt * v
    q_out[b] = wp.transform(x - wp.quat_rotate(q, com), q)
    qd_out[b] = wp.spatial_vector(v, w)


def integrate_bodies(model, state_in, body_f, dt: float, q_out, qd_out) -> None:
    """Body poses and velocities of ``state_in`` after ``dt`` [s] under ``body_f`` [N, N m] and gravity."""
    if model.body_count == 0:
        return
    wp.launch(integrate_bodies_kernel, dim=model.body_count, device=model.device,
              inputs=[model.body_com, model.body_inv_mass, model.body_inertia, model.body_world, model.gravity,
                      state_in.body_q, state_in.body_qd, body_f, dt],
              outputs=[q_out, qd_out])
