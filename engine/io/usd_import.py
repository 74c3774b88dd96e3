"""UsdPhysics scenes in and out: :func:`add_usd` imports one into a ModelBuilder, :func:`save_usd` writes one.

Import (``builder.add_usd(path_or_stage)`` or ``add_usd(builder, ...)``):

- **Units and axes.** Lengths are scaled by the stage's ``metersPerUnit`` and masses by its
  ``kilogramsPerUnit``; the scene is rotated so that the stage's up axis becomes the builder's.
  Where the stage authors no ``metersPerUnit`` / ``upAxis``, USD's fallbacks apply (0.01 m, Y up)
  with a warning; ``meters_per_unit=`` / ``up_axis=`` override both. ``xform`` places the whole scene.
- **Gravity** from the first ``UsdPhysics.Scene``: ``gravityDirection`` (unset: minus the up axis)
  times ``gravityMagnitude`` (unset: 9.81 m/s^2), rotated like the scene.
- **Bodies**: prims with ``RigidBodyAPI`` (``rigidBodyEnabled`` false: static), at their world pose
  (scale is not part of a body frame; it scales the body's shapes and local coordinates).
  ``kinematicEnabled`` -> kinematic; ``velocity`` (taken as the centre of mass's) and
  ``angularVelocity`` [deg/s], both in the parent prim's frame -> initial velocity. ``MassAPI``:
  ``mass``, ``diagonalInertia`` with ``principalAxes`` and ``centerOfMass`` where authored; the rest
  comes from the shapes' density (collider ``MassAPI`` density, else the bound material's, else
  the body's ``MassAPI`` density, else ``density``).
- **Shapes**: prims with ``CollisionAPI`` (``collisionEnabled`` false: skipped) on their nearest
  rigid-body ancestor (itself included) or static: ``Cube`` (``size``, scale), ``Sphere``,
  ``Capsule`` / ``Cylinder`` (``axis`` X/Y/Z), ``Mesh`` (polygons split into fans; a
  ``MeshCollisionAPI`` approximation other than none is ignored with a warning) and ``Plane``
  (static only, infinite). Non-uniform scale that would distort a sphere, capsule or cylinder is an
  error. A bound physics material (``UsdPhysics.MaterialAPI``) gives ``mu`` (``dynamicFriction``),
  ``restitution`` and density. Keyword ``shape_props`` apply where the stage authors nothing.
- **Joints**: ``RevoluteJoint`` (limits in degrees), ``PrismaticJoint``, ``SphericalJoint``,
  ``FixedJoint``, and a plain ``PhysicsJoint`` with no limits from the world to a body (a free
  joint). ``body0`` is the parent, ``body1`` the child (swapped, with limits negated, when only
  that makes a tree); ``localPos0/localRot0`` and ``localPos1/localRot1`` give the joint frames
  (a target inside a rigid body's subtree belongs to that body, any other target is the world);
  ``axis`` X/Y/Z; ``DriveAPI`` ``angular`` / ``linear`` ``stiffness`` / ``damping`` -> ``target_ke`` /
  ``target_kd`` (USD's angular gains are per degree); ``collisionEnabled`` -> ``collide_parent``.
- ``FilteredPairsAPI`` between rigid bodies -> bodies that never collide (``add_collision_exclusion``).
- Engine-specific values (contact ``ke``/``kd``, collision filters, limit stiffness, mimic couplings:
  ``inertia:mimic_joint`` / ``mimic_multiplier`` / ``mimic_offset``) round-trip as custom ``inertia:*``
  data. Everything else that is authored but not simulated (D6 and distance joints, drive targets and force limits, break forces, cone limits, static friction that
  differs from dynamic, articulation roots, filtered pairs of shapes, collision groups, other geometry)
  is reported by one :class:`UsdImportWarning` per prim and feature, also listed in ``result.warnings``.

Export (:func:`save_usd` / :func:`stage_from`, in :mod:`inertia.io.usd_export`): a ModelBuilder
or a Model as a UsdPhysics stage that this import reads back as the same scene.

Both directions are host-side scene setup in float64 (USD itself stores many values in float32);
nothing here runs under ``wp.Tape`` or is differentiable.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field

import numpy as np
from pxr import Usd, UsdGeom, UsdPhysics, UsdShade

from ..types import JOINT_BALL, JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE, axis_index
from ..transforms import IDENTITY, homogeneous as _homogeneous, quat_from_matrix, quat_to_matrix, rotation_between

EARTH_GRAVITY = 9.81  # [m/s^2], what an unset gravityMagnitude means
_AXES = {"X": 0, "Y": 1, "Z": 2}
_DEG = math.pi / 180.0


class UsdImportError(ValueError):
    """A UsdPhysics prim that cannot be imported; the message names the stage and the prim."""


class UsdImportWarning(UserWarning):
    """Something authored in the stage that the engine does not simulate (named with its prim)."""


@dataclass
class UsdImport:
    """What :func:`add_usd` added: prim paths -> builder indices, and the warnings it gave."""

    bodies: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)
    joints: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    meters_per_unit: float = 1.0
    kilograms_per_unit: float = 1.0
    up_axis: str = "Z"


# ---------------------------------------------------------------------------------------------- float64 geometry
def _gf_quat(q) -> tuple:
    """(x, y, z, w) of a Gf quaternion."""
    i = q.GetImaginary()
    return (float(i[0]), float(i[1]), float(i[2]), float(q.GetReal()))


class _Stage:
    """A stage with its unit scale, up rotation and placement folded into one root matrix (column convention)."""

    def __init__(self, stage, name, builder, xform, meters_per_unit, up_axis, log):
        self.stage, self.name, self.log = stage, name, log
        if meters_per_unit is None:
            meters_per_unit = UsdGeom.GetStageMetersPerUnit(stage)
            if not UsdGeom.StageHasAuthoredMetersPerUnit(stage):
                log(stage.GetPseudoRoot(), f"metersPerUnit is not authored: USD's fallback {meters_per_unit} m applies")
        if up_axis is None:
            up_axis = str(UsdGeom.GetStageUpAxis(stage))
            if not stage.HasAuthoredMetadata("upAxis"):
                log(stage.GetPseudoRoot(), f"upAxis is not authored: USD's fallback {up_axis} applies")
        self.mpu = float(meters_per_unit)
        if not self.mpu > 0.0:
            raise UsdImportError(f"{name}: metersPerUnit must be > 0, got {self.mpu}")
        self.kpu = float(UsdPhysics.GetStageKilogramsPerUnit(stage))
        self.up_axis = "XYZ"[axis_index(up_axis)]
        self.up_rot = rotation_between(np.eye(3)[axis_index(up_axis)], builder.up_vector)
        p, q = IDENTITY if xform is None else _pose_tuple(xform)
        self.root = _homogeneous(p, quat_to_matrix(q)) @ _homogeneous((0, 0, 0), self.up_rot) @ np.diag(
            [self.mpu] * 3 + [1.0])
        self.cache = UsdGeom.XformCache(Usd.TimeCode.Default())

    def world(self, prim) -> np.ndarray:
        """The prim's local-to-world matrix in metres in the builder's frame (column convention)."""
        if prim is None or prim.IsPseudoRoot():
            return self.root.copy()
        return self.root @ np.array(self.cache.GetLocalToWorldTransform(prim)).T

    def decompose(self, m: np.ndarray, prim):
        """(translation, rotation (3, 3), scale (3,)) of m = T R S; shear and mirroring are refused."""
        a = m[:3, :3]
        s = np.linalg.norm(a, axis=0)
        if s.min() < 1e-12 * max(s.max(), 1e-300):
            self.fail(prim, f"degenerate transform (scale {s.tolist()})")
        r = a / s
        if np.abs(r.T @ r - np.eye(3)).max() > 1e-6:
            self.fail(prim, "sheared transform (a non-uniform scale above a rotation) is not supported")
        if np.linalg.det(r) < 0.0:
            self.fail(prim, "mirrored transform (negative scale) is not supported")
        return m[:3, 3].copy(), r, s

    def fail(self, prim, what: str):
        raise UsdImportError(f"{self.name}: {prim.GetPath()}: {what}")


def _pose_tuple(xform):
    from ..builder.checks import transform

    t = transform(xform, "add_usd xform")
    return tuple(float(v) for v in t.p), tuple(float(v) for v in t.q)


def _authored(attr):
    """The attribute's value when authored, else None."""
    return attr.Get() if attr and attr.HasAuthoredValue() else None


def _custom(prim, name: str):
    attr = prim.GetAttribute(f"inertia:{name}")
    return attr.Get() if attr and attr.HasAuthoredValue() else None


# ---------------------------------------------------------------------------------------------- import
def add_usd(builder, source, xform=None, density=None, meters_per_unit=None, up_axis=None,
            set_gravity: bool = True, **shape_props) -> UsdImport:
    """Add the UsdPhysics scene in ``source`` (a file path or a ``Usd.Stage``) to ``builder``.

    Args:
        xform: where the stage's origin goes in the builder's world, ``(position [m], quaternion)``.
        density: [kg/m^3] of shapes whose density the stage does not give (None: the builder's default).
        meters_per_unit, up_axis: override the stage's (or USD's fallback) units and up axis.
        set_gravity: set ``builder.gravity`` from the stage's physics scene (when it has one).
        **shape_props: shape properties (``ke``, ``kd``, ``mu``, ...) where the stage authors none.
    Returns:
        :class:`UsdImport`: prim paths -> body / shape / joint indices, and the warnings given.
    """
    if isinstance(source, Usd.Stage):
        stage, name = source, source.GetRootLayer().identifier
    else:
        name = os.fspath(source)
        if not os.path.isfile(name):
            raise UsdImportError(f"{name}: USD file not found")
        stage = Usd.Stage.Open(name)
        if stage is None:
            raise UsdImportError(f"{name}: USD could not open the file")
    result = UsdImport()
    seen = set()

    def log(prim, what: str):
        msg = f"{name}: {prim.GetPath()}: {what}"
        if msg not in seen:
            seen.add(msg)
            result.warnings.append(msg)
            warnings.warn(msg, UsdImportWarning, stacklevel=3)

    s = _Stage(stage, name, builder, xform, meters_per_unit, up_axis, log)
    result.meters_per_unit, result.kilograms_per_unit, result.up_axis = s.mpu, s.kpu, s.up_axis
    prims = list(Usd.PrimRange(stage.GetPseudoRoot(), Usd.TraverseInstanceProxies()))[1:]

    scenes = [p for p in prims if p.IsA(UsdPhysics.Scene)]
    for p in scenes[1:]:
        log(p, f"a second physics scene is ignored (gravity comes from {scenes[0].GetPath()})")
    if scenes and set_gravity:
        builder.gravity = _gravity(s, UsdPhysics.Scene(scenes[0]))
    for p in prims:
        if p.HasAPI(UsdPhysics.ArticulationRootAPI):
            log(p, "ArticulationRootAPI ignored: bodies are simulated in maximal coordinates, joints make the trees")
        if p.IsA(UsdPhysics.CollisionGroup):
            log(p, "CollisionGroup ignored: use collision groups/masks on the shapes")

    body_density, poses = {}, {}
    for p in prims:
        if p.HasAPI(UsdPhysics.RigidBodyAPI) and UsdPhysics.RigidBodyAPI(p).GetRigidBodyEnabledAttr().Get():
            b, pose, rho = _add_body(builder, s, p)
            result.bodies[str(p.GetPath())], poses[b], body_density[b] = b, pose, rho
    for p in prims:
        if p.HasAPI(UsdPhysics.CollisionAPI) and UsdPhysics.CollisionAPI(p).GetCollisionEnabledAttr().Get():
            b = _owner(p, result.bodies)
            rho = body_density.get(b) or density
            shape = _add_shape(builder, s, p, b, poses.get(b), rho, shape_props)
            if shape is not None:
                result.shapes[str(p.GetPath())] = shape
    for p in prims:
        if p.IsA(UsdPhysics.Joint):
            j = _add_joint(builder, s, p, result.bodies, poses)
            if j is not None:
                result.joints[str(p.GetPath())] = j
    for p in prims:  # filtered pairs between rigid bodies: bodies that never collide
        if p.HasAPI(UsdPhysics.FilteredPairsAPI):
            a = result.bodies.get(str(p.GetPath()))
            for t in UsdPhysics.FilteredPairsAPI(p).GetFilteredPairsRel().GetTargets():
                o = result.bodies.get(str(t))
                if a is None or o is None:
                    log(p, f"filtered pair with {t} ignored: only pairs of rigid bodies are filtered")
                elif a != o:
                    builder.add_collision_exclusion(a, o)
        rel = p.GetRelationship("inertia:mimic_joint") if p.IsA(UsdPhysics.Joint) else None
        if rel and rel.GetTargets() and str(p.GetPath()) in result.joints:
            src = result.joints.get(str(rel.GetTargets()[0]))
            if src is None:
                log(p, f"inertia:mimic_joint {rel.GetTargets()[0]} is not an imported joint: ignored")
            else:
                _wrap(s, p, builder.set_joint_mimic, result.joints[str(p.GetPath())], src,
                      _custom(p, "mimic_multiplier") or 1.0, _custom(p, "mimic_offset") or 0.0)
    return result


def _gravity(s: _Stage, scene) -> tuple:
    d = np.array(scene.GetGravityDirectionAttr().Get(), dtype=np.float64)
    g = float(scene.GetGravityMagnitudeAttr().Get())
    up_stage = np.eye(3)[axis_index(s.up_axis)]
    d = -up_stage if np.linalg.norm(d) < 1e-12 else d / np.linalg.norm(d)
    g = EARTH_GRAVITY if not math.isfinite(g) else g * s.mpu
    return tuple(float(v) for v in s.up_rot @ d * g)


def _owner(prim, bodies: dict) -> int:
    """Index of the nearest rigid body at or above ``prim``; -1 (static) when none."""
    while prim and not prim.IsPseudoRoot():
        b = bodies.get(str(prim.GetPath()))
        if b is not None:
            return b
        prim = prim.GetParent()
    return -1


def _wrap(s: _Stage, prim, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError, IndexError) as e:
        if isinstance(e, UsdImportError):
            raise
        raise UsdImportError(f"{s.name}: {prim.GetPath()}: {e}") from e


def _add_body(builder, s: _Stage, prim):
    t, r, scale = s.decompose(s.world(prim), prim)
    pose = (tuple(t), quat_from_matrix(r))
    rb = UsdPhysics.RigidBodyAPI(prim)
    mass = inertia = com = rho = None
    if prim.HasAPI(UsdPhysics.MassAPI):
        api = UsdPhysics.MassAPI(prim)
        m = _authored(api.GetMassAttr())
        mass = float(m) * s.kpu if m else None
        d = _authored(api.GetDensityAttr())
        rho = float(d) * s.kpu / s.mpu**3 if d else None
        diag = _authored(api.GetDiagonalInertiaAttr())
        if diag is not None and any(float(v) != 0.0 for v in diag):
            axes = _authored(api.GetPrincipalAxesAttr())
            q = _gf_quat(axes) if axes is not None and axes.GetLength() > 0.0 else (0.0, 0.0, 0.0, 1.0)
            ra = quat_to_matrix(np.array(q) / np.linalg.norm(q))
            inertia = ra @ np.diag([float(v) for v in diag]) @ ra.T * s.kpu * s.mpu**2
        c = _authored(api.GetCenterOfMassAttr())
        if c is not None and all(math.isfinite(v) for v in c):
            com = tuple(np.array(c, dtype=np.float64) * scale)
    # velocities are authored in the parent's frame; angular in degrees per second
    parent = s.world(prim.GetParent())
    v = np.array(rb.GetVelocityAttr().Get(), dtype=np.float64)
    w = np.array(rb.GetAngularVelocityAttr().Get(), dtype=np.float64) * _DEG
    rot_parent = s.decompose(parent, prim.GetParent())[1] if np.any(w) else np.eye(3)
    b = _wrap(s, prim, builder.add_body, xform=pose, mass=mass, inertia=inertia, com=com,
              linear_velocity=tuple(parent[:3, :3] @ v), angular_velocity=tuple(rot_parent @ w),
              kinematic=bool(rb.GetKinematicEnabledAttr().Get()), label=prim.GetName())
    return b, pose, rho


_AXIS_TO_Z = {0: rotation_between((0, 0, 1), (1, 0, 0)), 1: rotation_between((0, 0, 1), (0, 1, 0)), 2: np.eye(3)}


def _axis_token(s, prim, attr) -> int:
    tok = str(attr.Get())
    if tok not in _AXES:
        s.fail(prim, f"axis must be X, Y or Z, got {tok!r}")
    return _AXES[tok]


def _add_shape(builder, s: _Stage, prim, body: int, body_pose, rho, shape_props):
    m = s.world(prim)
    if body >= 0:
        m = np.linalg.inv(_homogeneous(body_pose[0], quat_to_matrix(body_pose[1]))) @ m
    t, r, sc = s.decompose(m, prim)
    props = dict(shape_props, label=prim.GetName())
    if rho is not None:
        props["density"] = rho
    _shape_material(s, prim, props)

    def xf(rot):
        return tuple(t), quat_from_matrix(rot)

    def uniform(values, what):
        if max(values) - min(values) > 1e-6 * max(values):
            s.fail(prim, f"non-uniform scale {sc.tolist()} would distort the {what}")
        return float(values[0])

    if prim.IsA(UsdGeom.Cube):
        h = 0.5 * float(UsdGeom.Cube(prim).GetSizeAttr().Get()) * sc
        return _wrap(s, prim, builder.add_shape_box, body, xf(r), *h, **props)
    if prim.IsA(UsdGeom.Sphere):
        radius = float(UsdGeom.Sphere(prim).GetRadiusAttr().Get()) * uniform(sc, "sphere")
        return _wrap(s, prim, builder.add_shape_sphere, body, xf(r), radius, **props)
    for kind, add in ((UsdGeom.Capsule, builder.add_shape_capsule), (UsdGeom.Cylinder, builder.add_shape_cylinder),
                      (UsdGeom.Capsule_1, builder.add_shape_capsule), (UsdGeom.Cylinder_1, builder.add_shape_cylinder)):
        if prim.IsA(kind):
            g = kind(prim)
            if hasattr(g, "GetRadiusAttr"):
                radius = float(g.GetRadiusAttr().Get())
            else:
                top, bottom = float(g.GetRadiusTopAttr().Get()), float(g.GetRadiusBottomAttr().Get())
                if top != bottom:
                    s.log(prim, f"tapered {prim.GetTypeName()} (radii {top}, {bottom}) is not supported: skipped")
                    return None
                radius = top
            k = _axis_token(s, prim, g.GetAxisAttr())
            radius *= uniform(np.delete(sc, k), prim.GetTypeName())
            half = 0.5 * float(g.GetHeightAttr().Get()) * sc[k]
            return _wrap(s, prim, add, body, xf(r @ _AXIS_TO_Z[k]), radius, half, **props)
    if prim.IsA(UsdGeom.Mesh):
        return _add_mesh(builder, s, prim, body, xf(r), sc, props)
    if prim.IsA(UsdGeom.Plane):
        if body >= 0:
            s.log(prim, "a Plane collider on a rigid body is not supported (planes are static): skipped")
            return None
        k = _axis_token(s, prim, UsdGeom.Plane(prim).GetAxisAttr())
        props.pop("density", None)
        return _wrap(s, prim, builder.add_shape_plane, xf(r @ _AXIS_TO_Z[k]), **props)
    s.log(prim, f"CollisionAPI on a {prim.GetTypeName() or 'typeless prim'} is not supported: skipped")
    return None


def _add_mesh(builder, s: _Stage, prim, body, xform, scale, props):
    mesh = UsdGeom.Mesh(prim)
    points = mesh.GetPointsAttr().Get()
    counts = mesh.GetFaceVertexCountsAttr().Get()
    indices = mesh.GetFaceVertexIndicesAttr().Get()
    if points is None or counts is None or indices is None or len(counts) == 0:
        s.fail(prim, "a collision Mesh needs points, faceVertexCounts and faceVertexIndices")
    counts, indices = np.asarray(counts, dtype=np.int64), np.asarray(indices, dtype=np.int64)
    if counts.min() < 3 or counts.sum() != len(indices):
        s.fail(prim, f"faceVertexCounts (sum {counts.sum()}, min {counts.min()}) do not match "
                     f"{len(indices)} faceVertexIndices")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    tris = [(indices[a], indices[a + k], indices[a + k + 1]) for a, n in zip(starts, counts) for k in range(1, n - 1)]
    tris = np.array(tris, dtype=np.int64)
    if str(mesh.GetOrientationAttr().Get()) == UsdGeom.Tokens.leftHanded:
        tris = tris[:, [0, 2, 1]]
    if prim.HasAPI(UsdPhysics.MeshCollisionAPI):
        approx = str(UsdPhysics.MeshCollisionAPI(prim).GetApproximationAttr().Get())
        if approx != "none":
            s.log(prim, f"mesh approximation '{approx}' ignored: the triangle mesh collides as it is")
    return _wrap(s, prim, builder.add_shape_mesh, body, xform, np.asarray(points, dtype=np.float64), tris,
                 tuple(scale), **props)


def _shape_material(s: _Stage, prim, props: dict) -> None:
    """Fill ``props`` from the collider's MassAPI, its bound physics material and ``inertia:*`` attributes."""
    if prim.HasAPI(UsdPhysics.MassAPI):
        api = UsdPhysics.MassAPI(prim)
        d = _authored(api.GetDensityAttr())
        if d:
            props["density"] = float(d) * s.kpu / s.mpu**3
        if _authored(api.GetMassAttr()):
            s.log(prim, "a collider's own mass is ignored: give it to the rigid body, or a density")
    material = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")[0]
    if material and material.GetPrim().HasAPI(UsdPhysics.MaterialAPI):
        api = UsdPhysics.MaterialAPI(material.GetPrim())
        dynamic, static = _authored(api.GetDynamicFrictionAttr()), _authored(api.GetStaticFrictionAttr())
        if dynamic is not None:
            props["mu"] = float(dynamic)
        if static is not None and dynamic is not None and abs(float(static) - float(dynamic)) > 1e-9:
            s.log(material.GetPrim(),
                  f"staticFriction {float(static):.6g} ignored: one Coulomb coefficient (dynamicFriction)")
        if static is not None and dynamic is None:
            props["mu"] = float(static)
        e = _authored(api.GetRestitutionAttr())
        if e is not None:
            props["restitution"] = float(e)
        d = _authored(api.GetDensityAttr())
        if d and "density" not in props:
            props["density"] = float(d) * s.kpu / s.mpu**3
    for key in ("ke", "kd", "tau", "zeta", "collision_group", "collision_mask", "collide_shapes", "collide_particles"):
        v = _custom(prim, key)
        if v is not None:
            props[key] = v
            # the gains the stage authors choose the mode (inertia.builder.shapes): drop the other mode's defaults
            other = {"ke": ("tau", "zeta"), "kd": ("tau", "zeta"), "tau": ("ke", "kd"), "zeta": ("ke", "kd")}
            for k in other.get(key, ()):
                if _custom(prim, k) is None:
                    props.pop(k, None)


def _joint_frame(s: _Stage, joint, side: int, bodies: dict, poses: dict):
    """(body index or -1, (position, quaternion) of the joint frame in that body's frame) for body0/body1."""
    rel = joint.GetBody0Rel() if side == 0 else joint.GetBody1Rel()
    targets = rel.GetTargets()
    prim = joint.GetPrim()
    if len(targets) > 1:
        s.fail(prim, f"body{side} has {len(targets)} targets, expected at most one")
    target = s.stage.GetPrimAtPath(targets[0]) if targets else None
    if targets and not target:
        s.fail(prim, f"body{side} targets {targets[0]}, which does not exist")
    pos = joint.GetLocalPos0Attr().Get() if side == 0 else joint.GetLocalPos1Attr().Get()
    rot = joint.GetLocalRot0Attr().Get() if side == 0 else joint.GetLocalRot1Attr().Get()
    m = s.world(target)
    p_world = m @ np.array([*pos, 1.0])
    _, r_target, _ = s.decompose(m, target or prim)
    r_world = r_target @ quat_to_matrix(_gf_quat(rot))
    b = _owner(target, bodies) if target else -1
    if b < 0:
        return -1, (tuple(p_world[:3]), quat_from_matrix(r_world))
    pb, qb = poses[b]
    rb = quat_to_matrix(qb)
    return b, (tuple(rb.T @ (p_world[:3] - np.asarray(pb))), quat_from_matrix(rb.T @ r_world))


def _add_joint(builder, s: _Stage, prim, bodies: dict, poses: dict):
    joint = UsdPhysics.Joint(prim)
    if not joint.GetJointEnabledAttr().Get():
        return None
    kind = prim.GetTypeName()
    known = {"PhysicsRevoluteJoint": JOINT_REVOLUTE, "PhysicsPrismaticJoint": JOINT_PRISMATIC,
             "PhysicsSphericalJoint": JOINT_BALL, "PhysicsFixedJoint": JOINT_FIXED, "PhysicsJoint": JOINT_FREE}
    limits = [a for a in prim.GetAppliedSchemas() if a.startswith("PhysicsLimitAPI")]
    if kind not in known or (kind == "PhysicsJoint" and limits):
        what = "a D6 joint (PhysicsJoint with LimitAPI)" if kind == "PhysicsJoint" else f"joint type {kind}"
        s.log(prim, f"{what} is not supported: skipped")
        return None
    jtype = known[kind]
    if limits and kind != "PhysicsJoint":
        s.log(prim, f"{', '.join(limits)} ignored: {kind} limits come from its lowerLimit / upperLimit")
    ke, kd = _drive(s, prim, {JOINT_REVOLUTE: "angular", JOINT_PRISMATIC: "linear"}.get(jtype))
    for attr, what in ((joint.GetBreakForceAttr(), "breakForce"), (joint.GetBreakTorqueAttr(), "breakTorque")):
        if math.isfinite(float(attr.Get())):
            s.log(prim, f"{what} ignored: joints never break")
    (p, xp), (c, xc) = (_joint_frame(s, joint, k, bodies, poses) for k in (0, 1))
    if p == -1 and c == -1:
        s.fail(prim, "neither body0 nor body1 is a rigid body")
    lower = upper = None
    if jtype in (JOINT_REVOLUTE, JOINT_PRISMATIC):
        g = UsdPhysics.RevoluteJoint(prim) if jtype == JOINT_REVOLUTE else UsdPhysics.PrismaticJoint(prim)
        unit = _DEG if jtype == JOINT_REVOLUTE else s.mpu
        lo, hi = float(g.GetLowerLimitAttr().Get()), float(g.GetUpperLimitAttr().Get())
        lower, upper = (lo * unit if math.isfinite(lo) else None), (hi * unit if math.isfinite(hi) else None)
    # the builder wants trees with the child below its parent: swap body0 and body1 where only that works
    if c == -1 or (c in builder.joint_child and p != -1 and p not in builder.joint_child):
        p, xp, c, xc = c, xc, p, xp
        lower, upper = (None if upper is None else -upper), (None if lower is None else -lower)
    common = dict(collide_parent=bool(joint.GetCollisionEnabledAttr().Get()), label=prim.GetName())
    if jtype == JOINT_FREE:
        if p != -1:
            s.log(prim, "a PhysicsJoint with no limits between two bodies (a free joint) is not supported: skipped")
            return None
        return _wrap(s, prim, builder.add_joint_free, c, xp, xc, label=prim.GetName())
    if jtype == JOINT_FIXED:
        return _wrap(s, prim, builder.add_joint_fixed, p, c, xp, xc, **common)
    if jtype == JOINT_BALL:
        g = UsdPhysics.SphericalJoint(prim)
        cones = (float(a.Get()) for a in (g.GetConeAngle0LimitAttr(), g.GetConeAngle1LimitAttr()))
        if any(0.0 <= c < math.inf for c in cones):  # negative (the fallback) means unlimited
            s.log(prim, "cone limits ignored: ball joints have no limits")
        return _wrap(s, prim, builder.add_joint_ball, p, c, xp, xc, **common)
    axis = tuple(np.eye(3)[_axis_token(s, prim, g.GetAxisAttr())])
    add = builder.add_joint_revolute if jtype == JOINT_REVOLUTE else builder.add_joint_prismatic
    return _wrap(s, prim, add, p, c, xp, xc, axis, limit_lower=lower, limit_upper=upper,
                 limit_ke=_custom(prim, "limit_ke"), limit_kd=_custom(prim, "limit_kd"), target_ke=ke, target_kd=kd,
                 **common)


def _drive(s: _Stage, prim, dof):
    """(target_ke, target_kd) in SI from the joint's DriveAPI on ``dof`` (None: the joint has no drive)."""
    ke = kd = 0.0
    for name in [a.split(":", 1)[1] for a in prim.GetAppliedSchemas() if a.startswith("PhysicsDriveAPI:")]:
        api = UsdPhysics.DriveAPI(prim, name)
        if name != dof:
            s.log(prim, f"DriveAPI:{name} ignored: " + (f"the joint moves along '{dof}' only" if dof else
                                                         "this joint type has no drive"))
            continue
        # angular gains are per degree; lengths and masses in stage units
        unit = s.kpu * (s.mpu**2 / _DEG if dof == "angular" else 1.0)
        ke = float(api.GetStiffnessAttr().Get()) * unit
        kd = float(api.GetDampingAttr().Get()) * unit
        if str(api.GetTypeAttr().Get()) != "force":
            s.log(prim, f"drive type '{api.GetTypeAttr().Get()}' ignored: drives apply forces")
        for attr, what in ((api.GetTargetPositionAttr(), "targetPosition"),
                           (api.GetTargetVelocityAttr(), "targetVelocity")):
            if float(attr.Get()) != 0.0:
                s.log(prim, f"drive {what} ignored: set Control.joint_target_pos / joint_target_vel")
        if math.isfinite(float(api.GetMaxForceAttr().Get())):
            s.log(prim, "drive maxForce ignored: drives are not clamped")
    return ke, kd


__all__ = ["add_usd", "UsdImport", "UsdImportError", "UsdImportWarning"]
