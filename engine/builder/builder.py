"""ModelBuilder: script a scene in Python, then ``finalize()`` it into a :class:`Model`.

Units are SI (metres, kilograms, seconds, newtons); Z is up unless ``up_axis``
says otherwise. Every ``add_*`` call validates its input at once, so a bad
index or a NaN is reported where it was written, not a thousand steps later.
"""

from __future__ import annotations

import numpy as np

from .bodies import BodyBuilderMixin
from .checks import finite as _finite
from .checks import vec3 as _vec3
from .grids import GridBuilderMixin
from .shapes import ShapeBuilderMixin
from .worlds import WorldBuilderMixin
from .rest_geometry import dihedral_angle, tet_rest_pose, triangle_rest_pose
from ..schema import builder_fields
from ..types import PARTICLE_FLAG_ACTIVE, axis_index
from .importers import SceneImportMixin


class ModelBuilder(GridBuilderMixin, ShapeBuilderMixin, BodyBuilderMixin, SceneImportMixin, WorldBuilderMixin):
    """Builds a :class:`inertia.Model` from particles, elements, rigid bodies, joints and shapes.

    Particles and elements are added here; grids in ``inertia.builder.grids``, shapes in
    ``inertia.builder.shapes``, bodies and joints in ``inertia.builder.bodies`` (their docstrings
    give the conventions: frames, units, joint coordinates); whole robots and
    scenes from URDF (``add_urdf``, ``inertia.io.urdf``) and USD physics
    (``add_usd``, ``inertia.io.usd_import``); many worlds from copies of a
    builder (``add_builder``, ``replicate``; ``inertia.builder.worlds``).

    Args:
        up_axis: "x", "y" or "z" (default "z").
        gravity: acceleration along the up axis [m/s^2] (a scalar, default -9.81)
            or a full 3-vector.
    """

    # Defaults a researcher can change on the builder before adding things.
    default_particle_radius = 0.05
    default_spring_ke = 1.0e3
    default_spring_kd = 1.0

    def __init__(self, up_axis="z", gravity=-9.81):
        self.up_axis = axis_index(up_axis)
        up = [0.0, 0.0, 0.0]
        up[self.up_axis] = 1.0
        self.up_vector = tuple(up)
        if np.ndim(gravity) == 0:
            g = _finite(gravity, "gravity")
            self.gravity = tuple(g * u for u in up)
        else:
            self.gravity = _vec3(gravity, "gravity")

        # particle-particle contact (the model-wide material: particle_tau / zeta, or particle_ke / kd, and
        # particle_mu; inertia.builder.shapes)
        self._init_contact()
        self.particle_damping = 0.0  # linear velocity damping [1/s]
        self.particle_collide = True  # particle-particle contact on/off
        self.friction_smoothing = 0.01  # velocity [m/s] below which Coulomb friction is smoothed
        self.contact_margin = None  # detection margin [m]; None: half the largest particle radius
        # contact_smoothing h [m]: 0 is the plain penalty max(ke * depth, 0); h > 0 replaces the
        # penetration depth by h * softplus(depth / h), so contact force (and its gradient) fades in
        # smoothly from SMOOTH_CONTACT_REACH * h outside contact (see inertia.solvers.forces.contact)
        self.contact_smoothing = 0.0
        self.rigid_contact_margin = 0.01  # shape-shape contacts are kept this far apart [m] (detection margin)

        self._init_worlds()
        # one list per declared per-entity field (inertia.schema), filled by the add_* methods
        for f in builder_fields():
            setattr(self, f.name, [])

    # ------------------------------------------------------------------ particles
    @property
    def particle_count(self) -> int:
        return len(self.particle_q)

    def add_particle(self, pos, vel=(0.0, 0.0, 0.0), mass=1.0, radius=None, flags=PARTICLE_FLAG_ACTIVE) -> int:
        """Add a particle and return its index.

        Args:
            pos: position [m]. vel: velocity [m/s].
            mass: mass [kg]; 0 makes the particle kinematic (moved only by its
                velocity, never by forces). Negative masses are rejected.
            radius: contact radius [m] (default ``default_particle_radius``).
        """
        pos = _vec3(pos, "particle position")
        vel = _vec3(vel, "particle velocity")
        mass = _finite(mass, "particle mass", minimum=0.0)
        radius = self.default_particle_radius if radius is None else radius
        radius = _finite(radius, "particle radius", minimum=0.0)
        self.particle_q.append(pos)
        self.particle_qd.append(vel)
        self.particle_mass.append(mass)
        self.particle_radius.append(radius)
        self.particle_flags.append(int(flags))
        self._add_to_current_world(self.particle_world)
        return len(self.particle_q) - 1

    def _check_particles(self, indices, what: str) -> tuple:
        n = len(self.particle_q)
        out = []
        for i in indices:
            if isinstance(i, bool) or int(i) != i:
                raise TypeError(f"{what}: particle index {i!r} is not an integer")
            i = int(i)
            if i < 0 or i >= n:
                raise IndexError(f"{what}: particle index {i} out of range (the builder has {n} particles)")
            out.append(i)
        if len(set(out)) != len(out):
            raise ValueError(f"{what}: repeated particle index in {out}")
        worlds = {self.particle_world[i] for i in out}
        if len(worlds) > 1:
            raise ValueError(f"{what}: particles {out} belong to different worlds {sorted(worlds)}; "
                             "an element must stay inside one world")
        return tuple(out)

    # ------------------------------------------------------------------ elements
    def add_spring(self, i: int, j: int, ke=None, kd=None, rest_length=None) -> int:
        """Add a damped spring between particles i and j.

        Args:
            ke: stiffness [N/m]. kd: damping along the spring [N s/m].
            rest_length: [m]; default the current distance.
        """
        i, j = self._check_particles((i, j), "add_spring")
        ke = _finite(self.default_spring_ke if ke is None else ke, "spring ke", minimum=0.0)
        kd = _finite(self.default_spring_kd if kd is None else kd, "spring kd", minimum=0.0)
        if rest_length is None:
            rest_length = float(np.linalg.norm(np.subtract(self.particle_q[i], self.particle_q[j])))
        rest_length = _finite(rest_length, "spring rest_length", minimum=0.0)
        self.spring_indices.append((i, j))
        self.spring_rest_length.append(rest_length)
        self.spring_stiffness.append(ke)
        self.spring_damping.append(kd)
        return len(self.spring_rest_length) - 1

    def add_triangle(self, i: int, j: int, k: int, tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0) -> int:
        """Add a membrane (cloth) triangle; its rest shape is the current one.

        Material (stable neo-Hookean membrane, per unit rest area):
            tri_ke: shear modulus mu [N/m] (Lamé mu times thickness).
            tri_ka: area modulus lambda [N/m].
            tri_kd: strain-rate damping [N s/m].
        Degenerate (zero-area) triangles are rejected.
        """
        i, j, k = self._check_particles((i, j, k), "add_triangle")
        x = np.array([self.particle_q[i], self.particle_q[j], self.particle_q[k]], dtype=np.float64)
        inv_dm, area = triangle_rest_pose(x)
        if inv_dm is None:
            raise ValueError(f"add_triangle({i}, {j}, {k}): degenerate triangle (rest area {area:.3g} m^2)")
        mat = [_finite(v, n, minimum=0.0) for v, n in ((tri_ke, "tri_ke"), (tri_ka, "tri_ka"), (tri_kd, "tri_kd"))]
        self.tri_indices.append((i, j, k))
        self.tri_poses.append(inv_dm)
        self.tri_areas.append(area)
        self.tri_materials.append(mat)
        return len(self.tri_areas) - 1

    def add_edge(self, i: int, j: int, k: int, l: int, edge_ke=1.0, edge_kd=0.0, rest_angle=None) -> int:
        """Add a dihedral bending element across the edge (k, l) shared by triangles (i, k, l) and (j, l, k).

        Args:
            edge_ke: bending stiffness [N m / rad]. edge_kd: bending damping [N m s / rad].
            rest_angle: [rad]; default the current dihedral angle.
        """
        i, j, k, l = self._check_particles((i, j, k, l), "add_edge")
        if rest_angle is None:
            x = np.array([self.particle_q[v] for v in (i, j, k, l)], dtype=np.float64)
            rest_angle = dihedral_angle(*x)
            if rest_angle is None:
                raise ValueError(f"add_edge({i}, {j}, {k}, {l}): a wing triangle is degenerate")
        rest_angle = _finite(rest_angle, "edge rest_angle")
        self.edge_indices.append((i, j, k, l))
        self.edge_rest_angle.append(rest_angle)
        self.edge_bending_properties.append(
            (_finite(edge_ke, "edge_ke", minimum=0.0), _finite(edge_kd, "edge_kd", minimum=0.0))
        )
        return len(self.edge_rest_angle) - 1

    def add_tetrahedron(self, i: int, j: int, k: int, l: int, k_mu=1.0e4, k_lambda=1.0e4, k_damp=0.0) -> int:
        """Add a stable neo-Hookean tetrahedron (Smith et al. 2018); its rest shape is the current one.

        Args:
            k_mu, k_lambda: Lamé parameters [Pa] (see ``inertia.lame_from_young``).
            k_damp: strain-rate damping [Pa s].
        Returns the tet index. Vertices may be given in either orientation;
        degenerate (zero-volume) tets are rejected.
        """
        idx = self._check_particles((i, j, k, l), "add_tetrahedron")
        x = np.array([self.particle_q[v] for v in idx], dtype=np.float64)
        inv_dm, volume = tet_rest_pose(x)
        if inv_dm is None:
            raise ValueError(f"add_tetrahedron{idx}: degenerate tetrahedron (rest volume {volume:.3g} m^3)")
        if volume < 0.0:  # keep a positive orientation so J > 0 at rest
            idx = (idx[0], idx[2], idx[1], idx[3])
            inv_dm, volume = tet_rest_pose(np.array([self.particle_q[v] for v in idx], dtype=np.float64))
        mat = [_finite(v, n, minimum=0.0) for v, n in ((k_mu, "k_mu"), (k_lambda, "k_lambda"), (k_damp, "k_damp"))]
        if mat[1] <= 0.0:
            raise ValueError("k_lambda must be > 0 for the stable neo-Hookean model")
        self.tet_indices.append(idx)
        self.tet_poses.append(inv_dm)
        self.tet_volumes.append(volume)
        self.tet_materials.append(mat)
        return len(self.tet_volumes) - 1

    # ------------------------------------------------------------------ finalize
    def finalize(self, device=None, requires_grad: bool = False):
        """Copy everything to ``wp.array``s on ``device`` and return a :class:`inertia.Model`.

        Args:
            device: Warp device (default: Warp's default device).
            requires_grad: allocate gradients for the model's parameters and for
                states made from it, so ``wp.Tape`` can differentiate through steps.
        """
        import gc

        from ..model import Model

        # millions of small Python objects are made and dropped here: the cyclic collector would walk them
        # again and again (a third of finalize for 1,024 replicated robots) and finds nothing to free
        enabled = gc.isenabled()
        gc.disable()
        try:
            return Model._from_builder(self, device=device, requires_grad=requires_grad)
        finally:
            if enabled:
                gc.enable()
