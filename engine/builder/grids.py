"""Grid helpers of the ModelBuilder: cloth sheets, soft-body blocks and particle blocks.

Keyword names follow Newton/warp.sim (``dim_x``, ``cell_x``, ``fix_left``,
``tri_ke``, ``edge_ke``, ``k_mu``, ``k_lambda``, ``density``). Only the grid
dimensions are required; the defaults give a scene that is stable at 40
substeps per 60 Hz frame (dt = 1/2400 s), with a particle radius that fits the
cell so neighbours that are not connected by an element never touch at rest.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .checks import quaternion, vec3

# Fraction of the smallest cell size used as the default particle radius. Below
# 0.5 so that diagonal neighbours that share no element stay apart at rest.
RADIUS_PER_CELL = 0.4


def _default_radius(given, *cells):
    """``given``, or else a grid's default particle radius: RADIUS_PER_CELL of its smallest cell size [m]."""
    return RADIUS_PER_CELL * min(cells) if given is None else given


def _grid_frame(pos, rot):
    p = np.array(vec3(pos, "grid pos"), dtype=np.float64)
    if rot is not None:
        quaternion(rot, "grid rot")  # refuses zero, NaN and inf quaternions (normalized below, as before)
    q = wp.quat(*(float(v) for v in rot)) if rot is not None else wp.quat_identity()
    q = wp.normalize(q)
    r = np.array(wp.quat_to_matrix(q), dtype=np.float64).reshape(3, 3)
    return p, r


def _block(counts):
    """Yields (x, y, z) of a block of counts (nx, ny, nz) points or cells, x fastest, then y, then z.

    Every grid adds its particles, and visits its cells, in this order, so a particle's index follows from
    (x, y, z) alone.
    """
    nx, ny, nz = counts
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                yield x, y, z


def _lattice(counts, cells):
    """Yields (x, y, z, position in the grid's frame) of a block of counts points spaced cells [m] apart."""
    cx, cy, cz = cells
    for x, y, z in _block(counts):
        yield x, y, z, np.array([x * cx, y * cy, z * cz])


def _pinned(i: int, last: int, fix_low, fix_high) -> bool:
    """Whether lattice coordinate i (of 0..last) lies on a fixed face: the low one (i = 0) or the high one."""
    return (fix_low and i == 0) or (fix_high and i == last)


def _check_dims(**dims):
    for name, d in dims.items():
        if isinstance(d, bool) or int(d) != d or d < 1:
            raise ValueError(f"{name} must be a positive integer, got {d!r}")


class GridBuilderMixin:
    """Grid constructors; mixed into :class:`inertia.ModelBuilder`."""

    def add_cloth_grid(
        self,
        dim_x: int,
        dim_y: int,
        pos=(0.0, 0.0, 0.0),
        rot=None,
        vel=(0.0, 0.0, 0.0),
        cell_x: float = 0.1,
        cell_y: float = 0.1,
        mass: float = 0.1,
        fix_left=False,
        fix_right=False,
        fix_top=False,
        fix_bottom=False,
        tri_ke: float = 1.0e3,
        tri_ka: float = 1.0e3,
        tri_kd: float = 10.0,
        edge_ke: float = 1.0,
        edge_kd: float = 0.01,
        add_springs: bool = False,
        spring_ke: float | None = None,
        spring_kd: float | None = None,
        particle_radius: float | None = None,
    ) -> range:
        """Add a (dim_x x dim_y)-cell cloth sheet in the local XY plane of ``(pos, rot)``.

        Args:
            mass: mass of each particle [kg]; fixed (``fix_*``) edges get mass 0 (kinematic).
            tri_ke, tri_ka, tri_kd: membrane material (see ``add_triangle``).
            edge_ke, edge_kd: bending across every interior edge (see ``add_edge``).
            add_springs: also connect every triangle edge with a spring.
        Returns the range of the new particle indices (row-major, x fastest).
        """
        _check_dims(dim_x=dim_x, dim_y=dim_y)
        radius = _default_radius(particle_radius, cell_x, cell_y)
        p0, r = _grid_frame(pos, rot)
        start = self.particle_count

        def index(x, y):
            return start + y * (dim_x + 1) + x

        for x, y, _, local in _lattice((dim_x + 1, dim_y + 1, 1), (cell_x, cell_y, 0.0)):
            fixed = _pinned(x, dim_x, fix_left, fix_right) or _pinned(y, dim_y, fix_bottom, fix_top)
            self.add_particle(p0 + r @ local, vel, 0.0 if fixed else mass, radius)

        tris = []
        for x, y, _ in _block((dim_x, dim_y, 1)):
            v00, v10, v01, v11 = index(x, y), index(x + 1, y), index(x, y + 1), index(x + 1, y + 1)
            # alternate the diagonal so the sheet has no preferred shear direction
            if (x + y) % 2 == 0:
                tris += [(v00, v10, v11), (v00, v11, v01)]
            else:
                tris += [(v00, v10, v01), (v10, v11, v01)]
        for t in tris:
            self.add_triangle(*t, tri_ke=tri_ke, tri_ka=tri_ka, tri_kd=tri_kd)
        self.add_bending_edges(tris, edge_ke=edge_ke, edge_kd=edge_kd)
        if add_springs:
            for a, b in sorted({tuple(sorted((t[i], t[(i + 1) % 3]))) for t in tris for i in range(3)}):
                self.add_spring(a, b, ke=spring_ke, kd=spring_kd)
        return range(start, self.particle_count)

    def add_bending_edges(self, tris, edge_ke: float = 1.0, edge_kd: float = 0.0) -> int:
        """Add a dihedral bending element on every edge shared by two consistently wound triangles.

        Returns the number of edges added.
        """
        directed = {}
        for t in tris:
            for a in range(3):
                k, l, opposite = t[a], t[(a + 1) % 3], t[(a + 2) % 3]
                directed[(k, l)] = opposite
        count = 0
        for (k, l), i in directed.items():
            j = directed.get((l, k))
            if j is not None and k < l:  # each interior edge once
                self.add_edge(i, j, k, l, edge_ke=edge_ke, edge_kd=edge_kd)
                count += 1
        return count

    def add_soft_grid(
        self,
        dim_x: int,
        dim_y: int,
        dim_z: int,
        pos=(0.0, 0.0, 0.0),
        rot=None,
        vel=(0.0, 0.0, 0.0),
        cell_x: float = 0.1,
        cell_y: float = 0.1,
        cell_z: float = 0.1,
        density: float = 1000.0,
        k_mu: float = 1.0e5,
        k_lambda: float = 1.0e5,
        k_damp: float = 10.0,
        fix_left=False,
        fix_right=False,
        fix_top=False,
        fix_bottom=False,
        particle_radius: float | None = None,
    ) -> range:
        """Add a block of (dim_x x dim_y x dim_z) hexahedral cells, each split into 5 tetrahedra.

        Particle masses come from ``density`` [kg/m^3] (a quarter of each tet's
        mass per vertex). ``fix_left/right`` pin the x = min/max faces,
        ``fix_bottom/top`` the z = min/max faces (mass 0, kinematic).
        Returns the range of the new particle indices (x fastest, then y, then z).
        """
        _check_dims(dim_x=dim_x, dim_y=dim_y, dim_z=dim_z)
        if not density > 0.0:
            raise ValueError(f"density must be > 0, got {density}")
        radius = _default_radius(particle_radius, cell_x, cell_y, cell_z)
        p0, r = _grid_frame(pos, rot)
        start = self.particle_count
        nx, ny = dim_x + 1, dim_y + 1

        def index(x, y, z):
            return start + (z * ny + y) * nx + x

        fixed = []
        for x, y, z, local in _lattice((nx, ny, dim_z + 1), (cell_x, cell_y, cell_z)):
            self.add_particle(p0 + r @ local, vel, 0.0, radius)
            fixed.append(_pinned(x, dim_x, fix_left, fix_right) or _pinned(z, dim_z, fix_bottom, fix_top))
        vertex_mass = np.zeros(len(fixed))
        for x, y, z in _block((dim_x, dim_y, dim_z)):
            c = [index(x + (i & 1), y + ((i >> 1) & 1), z + ((i >> 2) & 1)) for i in range(8)]
            for tet in _hex_to_tets(c, (x + y + z) % 2 == 1):
                t = self.add_tetrahedron(*tet, k_mu=k_mu, k_lambda=k_lambda, k_damp=k_damp)
                for v in self.tet_indices[t]:
                    vertex_mass[v - start] += 0.25 * density * self.tet_volumes[t]
        for n, m in enumerate(vertex_mass):
            self.particle_mass[start + n] = 0.0 if fixed[n] else float(m)
        return range(start, self.particle_count)

    def add_particle_grid(
        self,
        dim_x: int,
        dim_y: int,
        dim_z: int,
        pos=(0.0, 0.0, 0.0),
        rot=None,
        vel=(0.0, 0.0, 0.0),
        cell_x: float = 0.1,
        cell_y: float = 0.1,
        cell_z: float = 0.1,
        mass: float = 0.1,
        jitter: float = 0.0,
        radius_mean: float | None = None,
        radius_std: float = 0.0,
        seed: int = 42,
    ) -> range:
        """Add a block of dim_x * dim_y * dim_z free particles (granular material).

        Args:
            jitter: uniform random offset [m] added to each position.
            radius_mean, radius_std: particle radius distribution [m]
                (default mean: ``0.4 * min(cell)``), clipped to be positive.
        Returns the range of the new particle indices.
        """
        _check_dims(dim_x=dim_x, dim_y=dim_y, dim_z=dim_z)
        rng = np.random.default_rng(seed)
        mean = _default_radius(radius_mean, cell_x, cell_y, cell_z)
        p0, r = _grid_frame(pos, rot)
        start = self.particle_count
        for _, _, _, local in _lattice((dim_x, dim_y, dim_z), (cell_x, cell_y, cell_z)):
            local = local + rng.uniform(-jitter, jitter, 3)
            radius = max(1e-4, mean + radius_std * rng.standard_normal()) if radius_std else mean
            self.add_particle(p0 + r @ local, vel, mass, radius)
        return range(start, self.particle_count)


def _hex_to_tets(c, flip: bool):
    """Five tetrahedra of a hexahedron with corners ``c`` (bit i of the corner index = +x, +y, +z).

    Alternating ``flip`` between neighbouring cells makes their shared face diagonals agree.
    """
    if not flip:
        return [
            (c[0], c[1], c[2], c[4]),
            (c[1], c[3], c[2], c[7]),
            (c[1], c[4], c[5], c[7]),
            (c[2], c[4], c[7], c[6]),
            (c[1], c[2], c[4], c[7]),
        ]
    return [
        (c[1], c[0], c[3], c[5]),
        (c[0], c[2], c[3], c[6]),
        (c[0], c[4], c[5], c[6]),
        (c[3], c[5], c[6], c[7]),
        (c[0], c[3], c[5], c[6]),
    ]
