"""Contacts: fixed-capacity buffers that collision detection fills each step.

Capacities are set once (``model.contacts(...)``), so ``collide()`` never
allocates and can be captured in a graph. Counters hold the number of contacts
*requested*; when that exceeds a capacity the shallowest candidates are dropped (the detection
kernels keep the deepest, to within 2 % of their gap: ``inertia.collision.selection``), and the excess
stays visible in the counter, and :meth:`Contacts.check_overflow` (called by
``model.collide`` unless told not to) reports it. Nothing is dropped silently.
"""

from __future__ import annotations


import numpy as np
import warp as wp

from .diagnostics import NonFiniteWarning, warn
from .kernel_args import ArgBundle
from .signed import Signed

# the status kernels count integers and are launched off the tape: no adjoint kernels to compile
wp.set_module_options({"enable_backward": False})

# Contacts.status, one int32 array so that a single host read reports everything collide() found:
STATUS_COUNTS = 0  # [0:4] this step's requested (soft, pair, rigid pair, rigid contact) counts
STATUS_PEAKS = 4  # [4:8] their largest values since reset_peak()
STATUS_COLLIDES = 8  # [8] collide() calls since reset_peak()
STATUS_NONFINITE = 9  # [9] the first of those calls that found a non-finite state (NO_NONFINITE: none)
STATUS_SIZE = 10
NO_NONFINITE = 2147483647


@wp.struct
class ContactCounts:
    """The four requested-count counters of a :class:`Contacts` (``wp.array(int32, 1)`` each), in ``STATUS_COUNTS``
    order."""

    soft_contact_count: wp.array(dtype=wp.int32)
    particle_pair_count: wp.array(dtype=wp.int32)
    rigid_pair_count: wp.array(dtype=wp.int32)
    rigid_contact_count: wp.array(dtype=wp.int32)


contact_counts = ArgBundle(ContactCounts)  # of a Contacts


@wp.kernel
def record_peak_counts(
    # Data in:
    c: ContactCounts,
    # Data out:
    status: wp.array(dtype=wp.int32),
):
    counts = wp.vec4i(c.soft_contact_count[0], c.particle_pair_count[0], c.rigid_pair_count[0],
                      c.rigid_contact_count[0])
    for k in range(4):
        status[STATUS_COUNTS + k] = counts[k]
        wp.atomic_max(status, STATUS_PEAKS + k, counts[k])
    status[STATUS_COLLIDES] = status[STATUS_COLLIDES] + 1


@wp.kernel
def reset_status_kernel(
    # Data out:
    status: wp.array(dtype=wp.int32),
):
    status[STATUS_NONFINITE] = NO_NONFINITE


# (counter name, capacity name, what the user reads in messages, the model.contacts() argument to raise)
_BUFFERS = (
    ("soft_contacts", "soft_contact_max", "particle-shape contacts", "soft_contact_max"),
    ("particle_pairs", "particle_pair_max", "particle-particle pairs", "particle_pair_max"),
    ("rigid_pairs", "rigid_pair_max", "shape-shape candidate pairs (broad phase)", "rigid_pair_max"),
    ("rigid_contacts", "rigid_contact_max", "shape-shape contact points", "rigid_contact_max"),
)


class ContactOverflowError(RuntimeError):
    """Raised by ``check_overflow(raise_error=True)`` when a buffer was too small."""


class Contacts(Signed):
    """Contact candidates found by :meth:`inertia.Model.collide`.

    Particle-shape contacts (particles against static shapes and the ground):
        soft_contact_max: capacity (int).
        soft_contact_count: ``wp.array(int32, 1)``, contacts requested this step.
        soft_contact_particle, soft_contact_shape: ``wp.array(int32)`` pair lists.

    Particle-particle contact pairs (each unordered pair once, i < j):
        particle_pair_max: capacity (int).
        particle_pair_count: ``wp.array(int32, 1)``.
        particle_pair: ``wp.array(dtype=wp.vec2i)``.

    Shape-shape candidate pairs (broad phase; each unordered pair once):
        rigid_pair_max, rigid_pair_count, rigid_pair (``wp.vec2i`` of shape indices).

    Shape-shape contact points (narrow phase):
        rigid_contact_max, rigid_contact_count (as above).
        rigid_contact_shape0, rigid_contact_shape1: ``wp.array(int32)``.
        rigid_contact_point0: ``wp.array(vec3)``, a point fixed on shape 0, in the
            frame of shape 0's body (in world when shape 0 is static).
        rigid_contact_thickness0: ``wp.array(float)`` [m], the radius swept about
            that point (a sphere's or capsule's radius; 0 for box and mesh vertices).
        rigid_contact_normal1: ``wp.array(vec3)``, zero for most contacts; for box-box
            contacts the unit normal in shape 1's frame (out of shape 1), fixed by the
            separating-axis test.
        A contact says: the sphere of radius thickness0 about point0 touches (or
        is within ``model.rigid_contact_margin`` of) shape 1. Solvers evaluate its
        depth at the point's current world position each time they need it (shape 1's
        signed distance, or with a fixed normal the distance to shape 1's supporting
        plane along it), so depth and normal follow both bodies' current poses.

    The force kernels recompute distances and normals from the current
    positions, so the contact forces (and their gradients) follow the geometry
    exactly; collision detection only decides which pairs to look at.
    """

    def __init__(self, soft_contact_max: int, particle_pair_max: int, device=None, grid_dim: int = 64,
                 rigid_pair_max: int = 0, rigid_contact_max: int = 0):
        self.device = wp.get_device(device)
        self.made_for = None  # weakref to the model whose contacts() sized these buffers (collide() checks it)
        self.soft_contact_max = int(soft_contact_max)
        self.particle_pair_max = int(particle_pair_max)
        self.rigid_pair_max = int(rigid_pair_max)
        self.rigid_contact_max = int(rigid_contact_max)
        with wp.ScopedDevice(self.device):
            self.soft_contact_count = wp.zeros(1, dtype=wp.int32)
            self.soft_contact_particle = wp.full(max(1, self.soft_contact_max), -1, dtype=wp.int32)
            self.soft_contact_shape = wp.full(max(1, self.soft_contact_max), -1, dtype=wp.int32)
            self.particle_pair_count = wp.zeros(1, dtype=wp.int32)
            self.particle_pair = wp.zeros(max(1, self.particle_pair_max), dtype=wp.vec2i)
            self.rigid_pair_count = wp.zeros(1, dtype=wp.int32)
            self.rigid_pair = wp.zeros(max(1, self.rigid_pair_max), dtype=wp.vec2i)
            nc = max(1, self.rigid_contact_max)
            self.rigid_contact_count = wp.zeros(1, dtype=wp.int32)
            self.rigid_contact_shape0 = wp.full(nc, -1, dtype=wp.int32)
            self.rigid_contact_shape1 = wp.full(nc, -1, dtype=wp.int32)
            self.rigid_contact_point0 = wp.zeros(nc, dtype=wp.vec3)
            self.rigid_contact_thickness0 = wp.zeros(nc, dtype=float)
            self.rigid_contact_normal1 = wp.zeros(nc, dtype=wp.vec3)
            # this step's counts, their peaks since reset_peak() (an overflow in any step of a long run stays
            # visible without a host read per step), collide() calls and the first non-finite state seen:
            # read back together in one host read (see STATUS_*)
            self.status = wp.zeros(STATUS_SIZE, dtype=wp.int32)
            self.peak_counts = self.status[STATUS_PEAKS:STATUS_PEAKS + 4]
        self.reset_peak()
        self._warned_nonfinite = False
        # buckets per axis of the particle-particle cell list (grid_dim^3; the list itself belongs to the
        # model's collision pipeline, made on first use, so that models without particle contact pay nothing)
        self.grid_dim = int(grid_dim)

    def clear(self) -> None:
        self.soft_contact_count.zero_()
        self.particle_pair_count.zero_()
        self.rigid_pair_count.zero_()
        self.rigid_contact_count.zero_()

    def record_peak(self) -> None:
        """Fold this step's counters into ``status`` (a kernel: no host sync; collide() calls it)."""
        wp.launch(record_peak_counts, dim=1, record_tape=False, inputs=[contact_counts(self)], outputs=[self.status],
                  device=self.device)

    def reset_peak(self) -> None:
        """Forget the peaks, the collide() count and any non-finite state seen (kernels: capturable)."""
        self.status.zero_()
        wp.launch(reset_status_kernel, dim=1, inputs=[self.status], device=self.device, record_tape=False)

    def read_status(self) -> np.ndarray:
        """The status array on the host (one read: a sync on CUDA)."""
        return self.status.numpy()

    def counts(self, since_reset: bool = False, status: np.ndarray | None = None) -> dict:
        """Requested contact counts and capacities (one read of device memory: a host sync).

        ``since_reset``: the largest counts of any ``collide()`` since :meth:`reset_peak` instead of the
        last one's. ``status``: a host copy of :attr:`status` already read (no further read).
        """
        s = self.read_status() if status is None else status
        start = STATUS_PEAKS if since_reset else STATUS_COUNTS
        out = {}
        for k, (count, cap, _, _) in enumerate(_BUFFERS):
            out[count] = int(s[start + k])
            out[cap] = getattr(self, cap)
        return out

    def first_nonfinite(self, status: np.ndarray | None = None) -> int | None:
        """The first collide() since :meth:`reset_peak` (0-based) that found a NaN/inf particle or body position
        or velocity in its state, or None."""
        s = self.read_status() if status is None else status
        return None if int(s[STATUS_NONFINITE]) == NO_NONFINITE else int(s[STATUS_NONFINITE])

    def overflow(self, since_reset: bool = False, status: np.ndarray | None = None) -> dict:
        """Contacts dropped per buffer in the last ``collide()`` (or the worst step since :meth:`reset_peak`)."""
        c = self.counts(since_reset, status)
        return {count: max(0, c[count] - c[cap]) for count, cap, _, _ in _BUFFERS}

    def check_overflow(self, raise_error: bool = False, since_reset: bool = False,
                       status: np.ndarray | None = None) -> bool:
        """Warn (or raise :class:`ContactOverflowError`) if a buffer overflowed. Returns True if any did.

        ``since_reset``: check every ``collide()`` since :meth:`reset_peak`, not only the last. The warning
        names the first caller outside inertia.
        """
        s = self.read_status() if status is None else status
        over = self.overflow(since_reset, s)
        if not any(over.values()):
            return False
        c = self.counts(since_reset, s)
        parts = [f"{what}: {c[count]} requested, capacity {c[cap]}" for count, cap, what, _ in _BUFFERS
                 if over[count]]
        args = " / ".join(arg for count, _, _, arg in _BUFFERS if over[count])
        msg = (
            "contact buffer overflow (" + "; ".join(parts) + "): the shallowest candidates were dropped (the deepest kept) "
            + ("in at least one step. " if since_reset else "this step. ") +
            f"Pass a larger {args} to model.contacts()."
        )
        if raise_error:
            raise ContactOverflowError(msg)
        warn(msg, RuntimeWarning)
        return True

    def check(self) -> None:
        """What ``model.collide`` reports after detection, from one host read of :attr:`status`: a buffer that
        overflowed this step, and (once) a state that had gone non-finite (:class:`inertia.NonFiniteWarning`)."""
        s = self.read_status()
        self.check_overflow(status=s)
        first = self.first_nonfinite(s)
        if first is not None and not self._warned_nonfinite:
            self._warned_nonfinite = True
            warn(
                f"the simulation went non-finite: the state handed to collide() call {first} (counted from "
                "the contacts' creation or reset_peak()) held NaN/inf positions or velocities, so the step that "
                "produced it blew up. Build the solver with check_finite=True (or use inertia.Simulator, which "
                "re-runs the frame with checks) to name the first stage; a smaller time step, softer materials "
                "or the XPBDSolver usually help.", NonFiniteWarning)

    def soft_contact_pairs(self) -> np.ndarray:
        """(n, 2) array of (particle, shape) for the contacts kept this step (host copy)."""
        n = min(int(self.soft_contact_count.numpy()[0]), self.soft_contact_max)
        return np.stack([self.soft_contact_particle.numpy()[:n], self.soft_contact_shape.numpy()[:n]], axis=1)

    def particle_pairs(self) -> np.ndarray:
        """(n, 2) array of particle index pairs kept this step (host copy)."""
        n = min(int(self.particle_pair_count.numpy()[0]), self.particle_pair_max)
        return self.particle_pair.numpy()[:n].reshape(-1, 2)

    def rigid_pairs(self) -> np.ndarray:
        """(n, 2) array of shape index pairs the broad phase kept this step (host copy)."""
        n = min(int(self.rigid_pair_count.numpy()[0]), self.rigid_pair_max)
        return self.rigid_pair.numpy()[:n].reshape(-1, 2)

    def rigid_contacts(self) -> dict:
        """The shape-shape contact points kept this step as NumPy arrays (host copy)."""
        n = min(int(self.rigid_contact_count.numpy()[0]), self.rigid_contact_max)
        return {
            "shape0": self.rigid_contact_shape0.numpy()[:n],
            "shape1": self.rigid_contact_shape1.numpy()[:n],
            "point0": self.rigid_contact_point0.numpy()[:n],
            "thickness0": self.rigid_contact_thickness0.numpy()[:n],
            "normal1": self.rigid_contact_normal1.numpy()[:n],
        }
