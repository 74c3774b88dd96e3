"""Time-integration kernels (``inertia.integrators``)."""

from .euler import integrate_bodies, integrate_bodies_kernel, integrate_particles, integrate_particles_kernel
from .xpbd import predict_positions, predict_positions_kernel, update_velocities, update_velocities_kernel

__all__ = [
    "integrate_bodies",
    "integrate_bodies_kernel",
    "integrate_particles",
    "integrate_particles_kernel",
    "predict_positions",
    "predict_positions_kernel",
    "update_velocities",
    "update_velocities_kernel",
]
