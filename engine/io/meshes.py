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
                if len(face) < 3:
                    raise MeshError(f"{where}: a face needs at least 3 vertices, got {len(face)}")
                tris += [(face[0], face[k], face[k + 1]) for k in range(1, len(face) - 1)]
    if not tris:
        raise MeshError(f"{path}: no faces (OBJ 'f' lines) found")
    return np.array(vertices, dtype=np.float64), np.array(tris, dtype=np.int32)


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
