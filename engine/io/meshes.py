"""Triangle-mesh files read in plain Python (no extra dependency): Wavefront OBJ and STL (binary or ASCII).

Every reader returns ``(vertices (n, 3) float64, triangles (m, 3) int32)`` with identical corners merged
and collapsed triangles dropped; a malformed file raises :class:`MeshError` naming the file and line.
"""

from __future__ import annotations

import struct

import numpy as np


class MeshError(ValueError):
    """A mesh file that cannot be read: the message names the file (and line) and what is wrong."""


def _merge_vertices(corners: np.ndarray):
    """(3m, 3) triangle corners -> shared vertices and (k, 3) triangles, dropping triangles that collapse."""
    vertices, inverse = np.unique(corners, axis=0, return_inverse=True)
    tris = inverse.reshape(-1, 3)
    keep = (tris[:, 0] != tris[:, 1]) & (tris[:, 1] != tris[:, 2]) & (tris[:, 0] != tris[:, 2])
    return vertices.astype(np.float64), tris[keep].astype(np.int32)


def read_obj(path: str):
    """Vertices (n, 3) and triangles (m, 3) of a Wavefront OBJ file (``v`` and ``f`` lines).

    Polygons are split into fans from their first vertex; ``f`` entries may be ``i``, ``i/t``,
    ``i//n`` or ``i/t/n``, 1-based or negative (counted back from the last vertex read). All groups
    and objects are merged; texture coordinates, normals and materials are ignored.
    """
    vertices, tris = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            tok = line.split("#", 1)[0].split()
            if not tok:
                continue
            where = f"{path}:{line_no}"
            if tok[0] == "v":
                try:
                    vertices.append(tuple(float(t) for t in tok[1:4]))
                except ValueError:
                    raise MeshError(f"{where}: malformed vertex {line.strip()!r}") from None
                if len(vertices[-1]) != 3:
                    raise MeshError(f"{where}: a vertex needs 3 coordinates, got {line.strip()!r}")
            elif tok[0] == "f":
                face = []
                for t in tok[1:]:
                    try:
                        i = int(t.split("/")[0])
                    except ValueError:
                        raise MeshError(f"{where}: malformed face entry {t!r}") from None
                    i = len(vertices) + i if i < 0 else i - 1
                    if not 0 <= i < len(vertices):
                        raise MeshError(f"{where}: face refers to vertex {t!r}, only {len(vertices)} read so far")
                    face.append(i)
                if len(face) < 3:  # a point or line element: no area (tinyobjloader skips them too)
                    continue
                tris += [(face[0], face[k], face[k + 1]) for k in range(1, len(face) - 1)]
    if not tris:
        raise MeshError(f"{path}: no faces (OBJ 'f' lines) found")
    v = np.array(vertices, dtype=np.float64)
    if not np.isfinite(v).all():
        raise MeshError(f"{path}: {int((~np.isfinite(v).all(axis=1)).sum())} vertices contain NaN or inf")
    return v, np.array(tris, dtype=np.int32)


def read_stl(path: str):
    """Vertices (n, 3) and triangles (m, 3) of a binary or ASCII STL file, identical corners merged.

    A file whose size is 84 + 50 n bytes for the n triangles its header announces is read as binary
    (ASCII files starting with ``solid`` can still be binary); anything else as ASCII ``vertex`` lines.
    """
    with open(path, "rb") as f:
        data = f.read()
    if len(data) >= 84 and 84 + 50 * struct.unpack("<I", data[80:84])[0] == len(data):
        rec = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attr", "<u2")])
        corners = np.frombuffer(data, dtype=rec, offset=84)["corners"].reshape(-1, 3).astype(np.float64)
    else:
        corners = []
        for line_no, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            tok = line.split()
            if tok and tok[0] == "vertex":
                try:
                    corners.append(tuple(float(t) for t in tok[1:]))
                except ValueError:
                    raise MeshError(f"{path}:{line_no}: malformed vertex {line.strip()!r}") from None
                if len(corners[-1]) != 3:
                    raise MeshError(f"{path}:{line_no}: a vertex needs 3 coordinates, got {line.strip()!r}")
        if len(corners) % 3:
            raise MeshError(f"{path}: {len(corners)} vertices is not a whole number of triangles")
        corners = np.array(corners, dtype=np.float64).reshape(-1, 3)
    if len(corners) == 0:
        raise MeshError(f"{path}: no triangles found (neither binary nor ASCII STL)")
    if not np.isfinite(corners).all():
        raise MeshError(f"{path}: vertices contain NaN or inf")
    return _merge_vertices(corners)


MESH_READERS = {".obj": read_obj, ".stl": read_stl}


def read_dae(path: str):
    """Vertices (n, 3) and triangles (m, 3) of a Collada (.dae) file, every geometry of its scene merged in
    the file's units converted to metres. Needs the optional ``collada`` extra (``trimesh`` and ``pycollada``):
    ``pip install "inertia[collada]"``."""
    try:
        import trimesh
    except ImportError:
        raise MeshError(f"{path}: reading Collada (.dae) meshes needs the optional 'collada' extra: "
                        "pip install \"inertia[collada]\" (trimesh and pycollada)") from None
    try:
        scene = trimesh.load(path, force="scene")
        mesh = scene.to_mesh() if hasattr(scene, "to_mesh") else scene.dump(concatenate=True)
    except ImportError:
        raise MeshError(f"{path}: reading Collada (.dae) meshes needs pycollada: pip install \"inertia[collada]\"") \
            from None
    except Exception as e:  # trimesh raises many kinds; name the file
        raise MeshError(f"{path}: not a readable Collada file: {e}") from None
    v = np.asarray(mesh.vertices, dtype=np.float64)
    f = np.asarray(mesh.faces, dtype=np.int64).reshape(-1, 3)
    if len(f) == 0:
        raise MeshError(f"{path}: no triangles found")
    return _merge_vertices(v[f].reshape(-1, 3))


MESH_READERS[".dae"] = read_dae


def convex_hull(points) -> np.ndarray:
    """Triangles (m, 3) of the convex hull of ``points`` (n, 3), counter-clockwise seen from outside, as indices
    into ``points`` (quickhull). Raises ValueError for points that span no volume (all on one plane)."""
    p = np.asarray(points, dtype=np.float64)
    n = len(p)
    scale = float(np.abs(p).max()) if n else 0.0
    eps = 1e-10 * max(scale, 1e-30) * 10.0
    if n < 4:
        raise ValueError(f"a convex hull needs at least 4 points, got {n}")
    # an initial tetrahedron of extreme points
    i0 = int(np.argmin(p[:, 0]))
    i1 = int(np.argmax(np.linalg.norm(p - p[i0], axis=1)))
    line = p[i1] - p[i0]
    i2 = int(np.argmax(np.linalg.norm(np.cross(p - p[i0], line), axis=1)))
    normal = np.cross(line, p[i2] - p[i0])
    height = (p - p[i0]) @ normal
    i3 = int(np.argmax(np.abs(height)))
    if np.linalg.norm(normal) < eps * scale or abs(height[i3]) < eps * np.linalg.norm(normal):
        raise ValueError("the points span no volume (they lie on a line or a plane)")
    inside = p[[i0, i1, i2, i3]].mean(axis=0)

    def plane(tris):
        a, b, c = p[tris[:, 0]], p[tris[:, 1]], p[tris[:, 2]]
        nrm = np.cross(b - a, c - a)
        nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
        return nrm, np.einsum("ij,ij->i", nrm, a)

    faces = np.array([[i0, i1, i2], [i0, i1, i3], [i0, i2, i3], [i1, i2, i3]], dtype=np.int64)
    nrm, off = plane(faces)
    flip = nrm @ inside - off > 0.0  # orient every face away from the inside point
    faces[flip] = faces[flip][:, [0, 2, 1]]
    nrm, off = plane(faces)
    # each point outside the hull belongs to the face it is farthest above
    dist = p @ nrm.T - off
    owner = np.where(dist.max(axis=1) > eps, dist.argmax(axis=1), -1)
    alive = np.ones(len(faces), dtype=bool)
    while True:
        pending = np.flatnonzero(owner >= 0)
        if len(pending) == 0:
            break
        f = owner[pending[0]]
        mine = pending[owner[pending] == f]
        apex = int(mine[np.argmax(p[mine] @ nrm[f] - off[f])])
        visible = alive & (nrm @ p[apex] - off > eps)
        vis_faces = faces[visible]
        edges = np.concatenate([vis_faces[:, [0, 1]], vis_faces[:, [1, 2]], vis_faces[:, [2, 0]]])
        directed = {tuple(e) for e in edges.tolist()}
        horizon = [e for e in edges.tolist() if (e[1], e[0]) not in directed]
        new = np.array([[a, b, apex] for a, b in horizon], dtype=np.int64)
        n_nrm, n_off = plane(new)
        alive[visible] = False
        first_new = len(faces)
        faces = np.concatenate([faces, new])
        nrm, off = np.concatenate([nrm, n_nrm]), np.concatenate([off, n_off])
        alive = np.concatenate([alive, np.ones(len(new), dtype=bool)])
        # points that belonged to removed faces: to the new face they are farthest above, if any
        orphan = np.flatnonzero(np.isin(owner, np.flatnonzero(visible)))
        orphan = orphan[orphan != apex]
        owner[apex] = -1
        if len(orphan):
            d = p[orphan] @ n_nrm.T - n_off
            owner[orphan] = np.where(d.max(axis=1) > eps, first_new + d.argmax(axis=1), -1)
    return faces[alive].astype(np.int32)
