"""Time-integration kernels (``inertia.integrators``)."""

from .euler import integrate_particles, integrate_particles_kernel

__all__ = ["integrate_particles", "integrate_particles_kernel"]
