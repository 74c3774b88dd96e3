"""Time-integration kernels (``inertia.integrators``): symplectic Euler, and XPBD's prediction and velocity update."""

from .euler import integrate_particles, integrate_particles_kernel
from .euler_bodies import integrate_bodies, integrate_bodies_kernel
from .xpbd import predict_particle_motion_kernel, predict_positions, update_velocities, update_velocities_kernel
from .xpbd_bodies import (
    pose_from_motion,
    predict_bodies,
    predict_body_motion_kernel,
    update_body_velocities,
    update_body_velocities_kernel,
)

__all__ = [
    "integrate_bodies",
    "integrate_bodies_kernel",
    "integrate_particles",
    "integrate_particles_kernel",
    "pose_from_motion",
    "predict_bodies",
    "predict_body_motion_kernel",
    "predict_particle_motion_kernel",
    "predict_positions",
    "update_body_velocities",
    "update_body_velocities_kernel",
    "update_velocities",
    "update_velocities_kernel",
]
