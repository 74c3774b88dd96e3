"""Trajectory export to USD (``usd-core``): particles, cloth/soft meshes, rigid bodies and shapes.

Particles become ``/world/particles`` (``UsdGeom.Points``), cloth and soft-body
surfaces ``/world/surface`` (``UsdGeom.Mesh``, topology written once), each rigid
body an ``Xform`` under ``/world/bodies`` named after its label with
time-sampled translate + orient and its shapes as children, and static shapes
(the ground included) ``/world/shapes``. Bodies with visual geometry (``Model.body_visual``: a robot
file's visual meshes) get it under ``<body>/visuals`` with its colour; the bodies' collision shapes are
then tagged ``purpose = "guide"``, a layer viewers hide unless guides are shown, so a recording looks
like the robot.

    with inertia.UsdRecorder("out.usda", model, fps=60) as rec:
        for frame in range(n):
            ...simulate...
            rec.record(state)                   # e.g. every N solver steps

    with inertia.UsdRecorder("rollout.usdc", model) as rec:
        rec.record_frames(body_q=out.body_q)    # a finished inertia.Rollout

The stage is built in memory and written on ``close()`` (or when the ``with``
block ends, also on an exception) to a temporary file that is then renamed
into place, so a crash never leaves a half-written file. Open the result with
``usdview out.usda``, Omniverse, or Blender's USD import.
"""

from __future__ import annotations

import os

import numpy as np
from pxr import Gf, Usd, UsdGeom, Vt

from ..types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_PLANE, GEO_SPHERE

# USD knows only Y-up and Z-up stages; an X-up model is written as Y-up (its data unchanged).
_UP_TOKENS = {0: UsdGeom.Tokens.y, 1: UsdGeom.Tokens.y, 2: UsdGeom.Tokens.z}


def _safe_name(label: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in label)
    return name if name and not name[0].isdigit() else f"_{name}"


def _unique_names(labels) -> list:
    """USD-safe prim names for ``labels``, suffixed where two would collide."""
    seen, out = {}, []
    for label in labels:
        name = _safe_name(label)
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        seen.setdefault(name, 0)
        out.append(name)
    return out


def _set_pose(xform_ops, p, q, time=None) -> None:
    """Set (translate, orient) ops from a position and a Warp (x, y, z, w) quaternion."""
    code = Usd.TimeCode.Default() if time is None else Usd.TimeCode(time)
    xform_ops[0].Set(Gf.Vec3d(*map(float, p)), code)
    xform_ops[1].Set(Gf.Quatf(float(q[3]), float(q[0]), float(q[1]), float(q[2])), code)


class UsdRecorder:
    """Records states of a model as USD time samples.

    Args:
        path: output file (``.usda`` text, ``.usd``/``.usdc`` binary).
        model: the :class:`inertia.Model` whose states will be recorded.
        fps: time codes per second; frame k is written at time code k
            unless ``record(state, time=...)`` gives a time in seconds.
        ground_size: half extent [m] of the quad drawn for a ground plane.
    """

    def __init__(self, path: str, model, fps: float = 60.0, ground_size: float = 5.0):
        if not fps > 0:
            raise ValueError(f"fps must be > 0, got {fps}")
        self.path = os.fspath(path)
        self.model = model
        self.fps = float(fps)
        self.frame_count = 0
        self._first_time = None
        self._last_time = None
        self.stage = Usd.Stage.CreateInMemory()
        UsdGeom.SetStageUpAxis(self.stage, _UP_TOKENS[model.up_axis])
        UsdGeom.SetStageMetersPerUnit(self.stage, 1.0)
        self.stage.SetTimeCodesPerSecond(self.fps)
        root = UsdGeom.Xform.Define(self.stage, "/world")
        self.stage.SetDefaultPrim(root.GetPrim())

        self._points = None
        self._mesh = None
        if model.particle_count:
            self._points = UsdGeom.Points.Define(self.stage, "/world/particles")
            self._points.CreateWidthsAttr()
        self._widths = None  # the widths last written: sampled again only when the radii change
        faces = self._surface_triangles()
        if len(faces):
            self._mesh = UsdGeom.Mesh.Define(self.stage, "/world/surface")
            self._mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(faces), 3, dtype=np.int32)))
            self._mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(faces.reshape(-1).astype(np.int32)))
            self._mesh.CreateDoubleSidedAttr(True)
        self._write_shapes(ground_size)

    def _surface_triangles(self) -> np.ndarray:
        """Cloth triangles plus the boundary faces of the tet meshes (faces used by one tet only)."""
        m = self.model
        faces = [m.tri_indices.numpy().reshape(-1, 3)] if m.tri_count else []
        if m.tet_count:
            tets = m.tet_indices.numpy()
            # faces wound so that their normal points away from the opposite vertex
            local = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
            all_faces = tets[:, local].reshape(-1, 3)
            keys = np.sort(all_faces, axis=1)
            _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
            faces.append(all_faces[counts[inverse.reshape(-1)] == 1])
        return np.concatenate(faces) if faces else np.zeros((0, 3), dtype=np.int32)

    def _write_shapes(self, ground_size: float) -> None:
        """Static shapes under /world/shapes; each body an Xform under /world/bodies with its shapes inside."""
        m = self.model
        self._body_ops = []
        body_names = _unique_names(m.body_label)
        q0 = m.body_q.numpy()
        for b in range(m.body_count):
            xf = UsdGeom.Xform.Define(self.stage, f"/world/bodies/{body_names[b]}")
            ops = (xf.AddTranslateOp(), xf.AddOrientOp())
            _set_pose(ops, q0[b][:3], q0[b][3:])
            self._body_ops.append(ops)
        visuals = getattr(m, "body_visual", None) or [()] * m.body_count
        for b, vis in enumerate(visuals):
            names = _unique_names(v.label for v in vis)
            for v, name in zip(vis, names):
                self._write_visual(f"/world/bodies/{body_names[b]}/visuals/{name}", v)
        if not m.shape_count:
            return
        types, scales, xforms = m.shape_type.numpy(), m.shape_scale.numpy(), m.shape_transform.numpy()
        bodies = m.shape_body.numpy()
        shape_names = _unique_names(m.shape_label)
        meshes = iter(m.shape_meshes)
        for s in range(m.shape_count):
            b = int(bodies[s])
            parent = "/world/shapes" if b < 0 else f"/world/bodies/{body_names[b]}"
            name = shape_names[s] if shape_names[s] != "visuals" else "visuals_shape"
            path = f"{parent}/{name}"
            xf = UsdGeom.Xform.Define(self.stage, path)
            _set_pose((xf.AddTranslateOp(), xf.AddOrientOp()), xforms[s][:3], xforms[s][3:])
            if b >= 0 and len(visuals[b]):  # the body is drawn by its visuals; its collision geometry is a guide
                xf.CreatePurposeAttr(UsdGeom.Tokens.guide)
            t, sc = int(types[s]), scales[s]
            mesh = next(meshes) if t == GEO_MESH else None
            self._write_geometry(path + "/geom", t, sc, mesh, ground_size)

    def _write_visual(self, path: str, v) -> None:
        """One :class:`inertia.builder.shapes.Visual` (body frame) as an Xform with its geometry and colour."""
        xf = UsdGeom.Xform.Define(self.stage, path)
        _set_pose((xf.AddTranslateOp(), xf.AddOrientOp()), v.xform[0], v.xform[1])
        geom_path = path + "/geom"
        if v.kind == "mesh":
            geom = UsdGeom.Mesh.Define(self.stage, geom_path)
            geom.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(np.asarray(v.vertices, dtype=np.float32)))
            tris = np.asarray(v.triangles, dtype=np.int32)
            geom.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(tris), 3, dtype=np.int32)))
            geom.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(tris.reshape(-1)))
        elif v.kind == "ellipsoid":
            geom = UsdGeom.Sphere.Define(self.stage, geom_path)
            geom.CreateRadiusAttr(1.0)
            geom.AddScaleOp().Set(Gf.Vec3f(*map(float, v.size)))
        else:
            t = {"sphere": GEO_SPHERE, "box": GEO_BOX, "capsule": GEO_CAPSULE, "cylinder": GEO_CYLINDER}[v.kind]
            self._write_geometry(geom_path, t, v.size, None, 0.0)
            geom = UsdGeom.Gprim(self.stage.GetPrimAtPath(geom_path))
        if v.color is not None:
            geom.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, v.color[:3]))]))
            if v.color[3] < 1.0:
                geom.CreateDisplayOpacityAttr(Vt.FloatArray([float(v.color[3])]))

    def _write_geometry(self, path: str, t: int, sc, mesh, ground_size: float) -> None:
        if t == GEO_SPHERE:
            UsdGeom.Sphere.Define(self.stage, path).CreateRadiusAttr(float(sc[0]))
        elif t == GEO_BOX:
            cube = UsdGeom.Cube.Define(self.stage, path)
            cube.CreateSizeAttr(2.0)
            cube.AddScaleOp().Set(Gf.Vec3f(*map(float, sc)))
        elif t in (GEO_CAPSULE, GEO_CYLINDER):
            geom = (UsdGeom.Capsule if t == GEO_CAPSULE else UsdGeom.Cylinder).Define(self.stage, path)
            geom.CreateRadiusAttr(float(sc[0]))
            geom.CreateHeightAttr(2.0 * float(sc[1]))
            geom.CreateAxisAttr(UsdGeom.Tokens.z)
        elif t in (GEO_MESH, GEO_PLANE):
            if t == GEO_MESH:
                pts, idx = mesh.points.numpy(), mesh.indices.numpy()
            else:
                g = float(ground_size)
                pts = np.array([[-g, -g, 0], [g, -g, 0], [g, g, 0], [-g, g, 0]], dtype=np.float32)
                idx = np.array([0, 1, 2, 0, 2, 3], dtype=np.int32)
            geom = UsdGeom.Mesh.Define(self.stage, path)
            geom.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(pts.astype(np.float32)))
            geom.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(idx) // 3, 3, dtype=np.int32)))
            geom.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(idx.astype(np.int32)))

    def record(self, state, time: float | None = None) -> float:
        """Write ``state``'s particle positions and body poses as one time sample; returns the time code used."""
        code = float(self.frame_count) if time is None else float(time) * self.fps
        if self._last_time is not None and code <= self._last_time:
            raise ValueError(f"time code {code} is not after the previous one ({self._last_time})")
        if self._points is not None:
            widths = 2.0 * self.model.particle_radius.numpy().astype(np.float32)  # radii can be optimised params
            if self._widths is None or not np.array_equal(widths, self._widths):
                self._points.GetWidthsAttr().Set(Vt.FloatArray.FromNumpy(widths), Usd.TimeCode(code))
                self._widths = widths
            q = Vt.Vec3fArray.FromNumpy(state.particle_q.numpy().astype(np.float32))
            self._points.GetPointsAttr().Set(q, Usd.TimeCode(code))
            if self._mesh is not None:
                self._mesh.GetPointsAttr().Set(q, Usd.TimeCode(code))
        if self._body_ops:
            poses = state.body_q.numpy()
            for ops, pose in zip(self._body_ops, poses):
                _set_pose(ops, pose[:3], pose[3:], code)
        self._first_time = code if self._first_time is None else self._first_time
        self._last_time = code
        self.frame_count += 1
        return code

    def record_frames(self, particle_q=None, body_q=None) -> int:
        """Record a finished trajectory: one time sample per frame, as ``record`` would.

        Args:
            particle_q: ``(T, N, 3)`` particle positions [m] (torch tensor or anything NumPy reads),
                e.g. the ``q`` of an ``inertia.Rollout``.
            body_q: ``(T, B, 7)`` body poses (position, quaternion (x, y, z, w)).
        Returns the number of frames written.
        """
        frames = [None if f is None else np.asarray(f.detach().cpu() if hasattr(f, "detach") else f, dtype=np.float32)
                  for f in (particle_q, body_q)]
        counts = {len(f) for f in frames if f is not None}
        if len(counts) != 1:
            raise ValueError("record_frames: give particle_q and/or body_q with the same number of frames")
        m = self.model
        expect = {0: (m.particle_count, 3), 1: (m.body_count, 7)}
        for i, f in enumerate(frames):
            if f is not None and f.shape[1:] != expect[i]:
                name = ("particle_q", "body_q")[i]
                raise ValueError(f"record_frames: {name} has frames of shape {f.shape[1:]}, the model needs {expect[i]}")
        state = self._scratch_state()
        for k in range(counts.pop()):
            if frames[0] is not None:
                state.particle_q.assign(frames[0][k])
            if frames[1] is not None:
                state.body_q.assign(frames[1][k])
            self.record(state)
        return self.frame_count

    def _scratch_state(self):
        if getattr(self, "_scratch", None) is None:
            self._scratch = self.model.state(requires_grad=False)
        return self._scratch

    def close(self) -> str:
        """Write the file (atomically: temporary file, then rename). Returns its path."""
        if self.stage is None:
            return self.path
        if self._first_time is not None:
            self.stage.SetStartTimeCode(self._first_time)
            self.stage.SetEndTimeCode(self._last_time)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        root, ext = os.path.splitext(self.path)
        tmp = f"{root}.tmp{os.getpid()}{ext}"
        self.stage.GetRootLayer().Export(tmp)
        os.replace(tmp, self.path)
        self.stage = None
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


__all__ = ["UsdRecorder"]
