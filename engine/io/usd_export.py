"""Export a ModelBuilder or a Model as a UsdPhysics stage: the inverse of :func:`inertia.io.usd_import.add_usd`.

The stage is Z- or Y-up (as the scene), in metres and kilograms: ``/world/physicsScene`` (gravity),
bodies under ``/world/bodies`` (``RigidBodyAPI`` with kinematic flag and velocities, ``MassAPI``
with mass, centre of mass, principal inertia and axes), their shapes as children and static shapes
under ``/world/static`` (``CollisionAPI``; boxes as a ``Cube`` of size 2 scaled by the half extents,
capsules and cylinders along Z, meshes unscaled with their scale op; one ``UsdShade.Material`` with
``MaterialAPI`` per distinct friction / restitution under ``/world/materials``), and joints under
``/world/joints`` (an axis that is not +X/+Y/+Z is written as X with both joint frames turned;
revolute limits in degrees and drive gains per degree, as USD wants; a free joint as a plain
``PhysicsJoint`` with no limits). Bodies excluded from colliding with each other (beyond a joint's
parent and child) get ``FilteredPairsAPI``. Contact ``ke``/``kd``, collision filters, joint-limit
stiffness and mimic couplings go into custom ``inertia:*`` data so that the import restores them.
Visual geometry is the recorder's (:class:`inertia.UsdRecorder`), not written here. USD stores joint frames,
mass properties and mesh points in float32.
"""

from __future__ import annotations

import math
import os

import numpy as np
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade, Vt

from ..types import (GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_PLANE, GEO_SPHERE, JOINT_BALL, JOINT_COORDS,
                    JOINT_FIXED, JOINT_FREE, JOINT_PRISMATIC, JOINT_REVOLUTE)
from ..transforms import quat_from_matrix, quat_mul, rotation_between

_DEG = math.pi / 180.0


def _scene_from_builder(b) -> dict:
    props = b._body_mass_properties()
    ndof = [0]
    for t in b.joint_type:
        ndof.append(ndof[-1] + JOINT_COORDS[t][1])
    first = [ndof[j] if ndof[j + 1] > ndof[j] else None for j in range(b.joint_count)]

    def per_joint(values):
        return [values[d] if d is not None else 0.0 for d in first]

    return dict(
        up_axis=b.up_axis, gravity=np.array(b.gravity, dtype=np.float64),
        body_label=list(b.body_label), body_q=np.array([list(q.p) + list(q.q) for q in b.body_q]).reshape(-1, 7),
        body_qd=np.array(b.body_qd, dtype=np.float64).reshape(-1, 6),
        body_mass=[p[0] for p in props], body_com=[p[1] for p in props], body_inertia=[p[2] for p in props],
        body_kinematic=list(b.body_kinematic),
        shape_type=list(b.shape_type), shape_body=list(b.shape_body), shape_label=list(b.shape_label),
        shape_xform=np.array([list(q.p) + list(q.q) for q in b.shape_transform]).reshape(-1, 7),
        shape_scale=np.array(b.shape_scale, dtype=np.float64).reshape(-1, 3), shape_mesh=list(b.shape_mesh),
        shape_mu=list(b.shape_material_mu), shape_restitution=list(b.shape_material_restitution),
        shape_ke=list(b.shape_material_ke), shape_kd=list(b.shape_material_kd), shape_density=list(b.shape_density),
        shape_tau=list(b.shape_material_tau), shape_zeta=list(b.shape_material_zeta),
        shape_group=list(b.shape_collision_group), shape_mask=list(b.shape_collision_mask),
        shape_flags=list(b.shape_flags),
        joint_type=list(b.joint_type), joint_parent=list(b.joint_parent), joint_child=list(b.joint_child),
        joint_label=list(b.joint_label), joint_axis=np.array(b.joint_axis, dtype=np.float64).reshape(-1, 3),
        joint_X_p=np.array([list(q.p) + list(q.q) for q in b.joint_X_p]).reshape(-1, 7),
        joint_X_c=np.array([list(q.p) + list(q.q) for q in b.joint_X_c]).reshape(-1, 7),
        joint_lower=per_joint(b.joint_limit_lower), joint_upper=per_joint(b.joint_limit_upper),
        joint_limit_ke=per_joint(b.joint_limit_ke), joint_limit_kd=per_joint(b.joint_limit_kd),
        joint_target_ke=per_joint(b.joint_target_ke), joint_target_kd=per_joint(b.joint_target_kd),
        joint_collide_parent=list(b.joint_collide_parent),
        body_exclude=[(a, o) for a, entry in enumerate(b.body_collision_exclude) for o in entry],
        joint_mimic=[(j, s, m, o) for j, (s, m, o) in enumerate(zip(b.joint_mimic_joint, b.joint_mimic_multiplier,
                                                                    b.joint_mimic_offset)) if s >= 0],
    )


def _scene_from_model(m) -> dict:
    def np_(a):
        return a.numpy().astype(np.float64)

    nj = m.joint_count
    qd_start = m.joint_qd_start.numpy()
    first = [int(qd_start[j]) if qd_start[j + 1] > qd_start[j] else None for j in range(nj)]

    def per_joint(a):
        v = np_(a)
        return [float(v[d]) if d is not None else 0.0 for d in first]

    types = m.shape_type.numpy().tolist()
    scale = np_(m.shape_scale).reshape(-1, 3)
    meshes, it = [], iter(m.shape_meshes)
    for t in types:
        wm = next(it) if t == GEO_MESH else None
        meshes.append(None if wm is None else (wm.points.numpy().astype(np.float64), wm.indices.numpy()))
    # a joint's parent and child collide unless the model excludes the pair (the builder's flag for the world:
    # True on free joints, False on the others)
    offsets, excl = m.body_exclusion_offsets.numpy(), m.body_exclusions.numpy()
    parents, children = m.joint_parent.numpy().tolist(), m.joint_child.numpy().tolist()
    jtypes = m.joint_type.numpy().tolist()
    collide = [t == JOINT_FREE if p < 0 else c not in excl[offsets[p]:offsets[p + 1]]
               for p, c, t in zip(parents, children, jtypes)]
    joined = {(p, c) for p, c in zip(parents, children) if p >= 0}
    n_shapes = m.shape_count
    return dict(
        up_axis=m.up_axis, gravity=np_(m.gravity)[0],
        body_label=list(m.body_label), body_q=np_(m.body_q).reshape(-1, 7), body_qd=np_(m.body_qd).reshape(-1, 6),
        body_mass=list(np_(m.body_mass)), body_com=list(np_(m.body_com).reshape(-1, 3)),
        body_inertia=list(np_(m.body_inertia).reshape(-1, 3, 3)),
        body_kinematic=list(m.body_inv_mass.numpy() == 0.0),
        shape_type=types, shape_body=m.shape_body.numpy().tolist(), shape_label=list(m.shape_label),
        shape_xform=np_(m.shape_transform).reshape(-1, 7), shape_scale=scale, shape_mesh=meshes,
        shape_mu=list(np_(m.shape_material_mu)), shape_restitution=list(np_(m.shape_material_restitution)),
        shape_ke=list(np_(m.shape_material_ke)), shape_kd=list(np_(m.shape_material_kd)),
        shape_tau=list(np_(m.shape_material_tau)), shape_zeta=list(np_(m.shape_material_zeta)),
        shape_density=[0.0] * n_shapes,  # the model keeps its bodies' mass properties, not the shapes' density
        shape_group=m.shape_collision_group.numpy().tolist(), shape_mask=m.shape_collision_mask.numpy().tolist(),
        shape_flags=m.shape_flags.numpy().tolist(),
        joint_type=m.joint_type.numpy().tolist(), joint_parent=parents, joint_child=children,
        joint_label=list(m.joint_label), joint_axis=np_(m.joint_axis).reshape(-1, 3),
        joint_X_p=np_(m.joint_X_p).reshape(-1, 7), joint_X_c=np_(m.joint_X_c).reshape(-1, 7),
        joint_lower=per_joint(m.joint_limit_lower), joint_upper=per_joint(m.joint_limit_upper),
        joint_limit_ke=per_joint(m.joint_limit_ke), joint_limit_kd=per_joint(m.joint_limit_kd),
        joint_target_ke=per_joint(m.joint_target_ke), joint_target_kd=per_joint(m.joint_target_kd),
        joint_collide_parent=collide,
        # excluded body pairs beyond a joint's parent and child (add_collision_exclusion)
        body_exclude=[(a, int(o)) for a in range(m.body_count) for o in excl[offsets[a]:offsets[a + 1]]
                      if a < o and (a, o) not in joined and (o, a) not in joined],
        joint_mimic=[(j, int(src), float(mult), float(off)) for j, (src, mult, off) in enumerate(zip(
            m.joint_mimic_joint.numpy(), m.joint_mimic_multiplier.numpy(), m.joint_mimic_offset.numpy())) if src >= 0],
    )


def _set_xform(prim, pose, scale=None) -> None:
    x = UsdGeom.Xformable(prim)
    x.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, pose[:3])))
    q = [float(v) for v in pose[3:7]]
    x.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(q[3], q[0], q[1], q[2]))
    if scale is not None:
        x.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*map(float, scale)))


def _quatf(q) -> Gf.Quatf:
    return Gf.Quatf(float(q[3]), float(q[0]), float(q[1]), float(q[2]))


def _set_custom(prim, name: str, value, kind) -> None:
    prim.CreateAttribute(f"inertia:{name}", kind, custom=True).Set(value)


def stage_from(source, state=None) -> Usd.Stage:
    """An in-memory UsdPhysics stage of a ModelBuilder or Model (body poses and velocities from ``state``
    when given, else the initial ones). Y- and Z-up scenes only: USD has no X-up stage."""
    from .recorder import _unique_names

    if source.num_worlds > 1:
        # a UsdPhysics scene has one gravity and no notion of worlds: written out, worlds would collide
        raise ValueError(f"save_usd writes one world; this scene has {source.num_worlds}: export the scene "
                         "builder you replicated (one world), and replicate it again after add_usd")
    sc = _scene_from_model(source) if hasattr(source, "shape_source_ptr") else _scene_from_builder(source)
    if sc["up_axis"] == 0:
        raise ValueError("save_usd: USD stages are Y- or Z-up; this scene is X-up")
    if state is not None:
        sc["body_q"] = state.body_q.numpy().astype(np.float64).reshape(-1, 7)
        sc["body_qd"] = state.body_qd.numpy().astype(np.float64).reshape(-1, 6)
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, "YZ"[sc["up_axis"] - 1])
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    stage.SetDefaultPrim(UsdGeom.Xform.Define(stage, "/world").GetPrim())
    scene = UsdPhysics.Scene.Define(stage, "/world/physicsScene")
    g = np.asarray(sc["gravity"], dtype=np.float64)
    n = np.linalg.norm(g)
    up = np.eye(3)[sc["up_axis"]]
    scene.CreateGravityDirectionAttr(Gf.Vec3f(*map(float, g / n if n > 0 else -up)))
    scene.CreateGravityMagnitudeAttr(float(n))

    body_paths = [f"/world/bodies/{name}" for name in _unique_names(sc["body_label"])]
    for b, path in enumerate(body_paths):
        prim = UsdGeom.Xform.Define(stage, path).GetPrim()
        _set_xform(prim, sc["body_q"][b])
        rb = UsdPhysics.RigidBodyAPI.Apply(prim)
        rb.CreateKinematicEnabledAttr(bool(sc["body_kinematic"][b]))
        rb.CreateVelocityAttr(Gf.Vec3f(*map(float, sc["body_qd"][b][:3])))
        rb.CreateAngularVelocityAttr(Gf.Vec3f(*map(float, sc["body_qd"][b][3:] / _DEG)))
        mass = UsdPhysics.MassAPI.Apply(prim)
        if sc["body_mass"][b] > 0.0:
            mass.CreateMassAttr(float(sc["body_mass"][b]))
            inertia = np.asarray(sc["body_inertia"][b], dtype=np.float64)
            if np.abs(inertia - np.diag(np.diag(inertia))).max() <= 1e-12 * np.abs(inertia).max():
                d, v = np.diag(inertia), np.eye(3)  # already principal: keep the body axes
            else:
                d, v = np.linalg.eigh(inertia)
                if np.linalg.det(v) < 0.0:
                    v[:, 0] = -v[:, 0]
            if d.max() > 0.0:
                mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*map(float, d)))
                mass.CreatePrincipalAxesAttr(_quatf(quat_from_matrix(v)))
        mass.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, sc["body_com"][b])))

    materials = {}
    for s, name in enumerate(_unique_names(sc["shape_label"])):
        b = sc["shape_body"][s]
        path = f"{body_paths[b]}/{name}" if b >= 0 else f"/world/static/{name}"
        _write_shape(stage, path, sc, s, materials)

    joint_paths = [f"/world/joints/{name}" for name in _unique_names(sc["joint_label"])]
    for j, path in enumerate(joint_paths):
        _write_joint(stage, path, sc, j, body_paths)
    # bodies that never collide: UsdPhysics' filtered pairs; mimic couplings: custom inertia:mimic_* data
    for a, o in sc["body_exclude"]:
        api = UsdPhysics.FilteredPairsAPI.Apply(stage.GetPrimAtPath(body_paths[a]))
        api.CreateFilteredPairsRel().AddTarget(Sdf.Path(body_paths[o]))
    for j, src, mult, off in sc["joint_mimic"]:
        prim = stage.GetPrimAtPath(joint_paths[j])
        prim.CreateRelationship("inertia:mimic_joint", custom=True).SetTargets([Sdf.Path(joint_paths[src])])
        _set_custom(prim, "mimic_multiplier", float(mult), Sdf.ValueTypeNames.Double)
        _set_custom(prim, "mimic_offset", float(off), Sdf.ValueTypeNames.Double)
    return stage


def _write_shape(stage, path: str, sc: dict, s: int, materials: dict) -> None:
    t, scale, pose = sc["shape_type"][s], sc["shape_scale"][s], sc["shape_xform"][s]
    if t == GEO_BOX:
        geom = UsdGeom.Cube.Define(stage, path)
        geom.CreateSizeAttr(2.0)
        _set_xform(geom.GetPrim(), pose, scale)
    elif t == GEO_SPHERE:
        geom = UsdGeom.Sphere.Define(stage, path)
        geom.CreateRadiusAttr(float(scale[0]))
        _set_xform(geom.GetPrim(), pose)
    elif t in (GEO_CAPSULE, GEO_CYLINDER):
        geom = (UsdGeom.Capsule if t == GEO_CAPSULE else UsdGeom.Cylinder).Define(stage, path)
        geom.CreateRadiusAttr(float(scale[0]))
        geom.CreateHeightAttr(2.0 * float(scale[1]))
        geom.CreateAxisAttr(UsdGeom.Tokens.z)
        _set_xform(geom.GetPrim(), pose)
    elif t == GEO_PLANE:
        geom = UsdGeom.Plane.Define(stage, path)
        geom.CreateAxisAttr(UsdGeom.Tokens.z)
        _set_xform(geom.GetPrim(), pose)
    elif t == GEO_MESH:
        points, idx = sc["shape_mesh"][s]
        if np.abs(scale).min() > 1e-12:  # write the unscaled mesh and its scale, so both round-trip
            points = points / scale
        else:
            scale = None
        geom = UsdGeom.Mesh.Define(stage, path)
        geom.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(np.asarray(points, dtype=np.float32)))
        geom.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(idx) // 3, 3, dtype=np.int32)))
        geom.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(np.asarray(idx, dtype=np.int32).reshape(-1)))
        _set_xform(geom.GetPrim(), pose, scale)
        UsdPhysics.MeshCollisionAPI.Apply(geom.GetPrim()).CreateApproximationAttr("none")
    else:
        raise ValueError(f"save_usd: shape {s} has unknown type {t}")
    prim = geom.GetPrim()
    UsdPhysics.CollisionAPI.Apply(prim)
    if sc["shape_density"][s] > 0.0:
        UsdPhysics.MassAPI.Apply(prim).CreateDensityAttr(float(sc["shape_density"][s]))
    key = (float(sc["shape_mu"][s]), float(sc["shape_restitution"][s]))
    if key not in materials:
        mat = UsdShade.Material.Define(stage, f"/world/materials/material_{len(materials)}")
        api = UsdPhysics.MaterialAPI.Apply(mat.GetPrim())
        api.CreateDynamicFrictionAttr(key[0])
        api.CreateStaticFrictionAttr(key[0])
        api.CreateRestitutionAttr(key[1])
        materials[key] = mat
    UsdShade.MaterialBindingAPI.Apply(prim).Bind(materials[key], UsdShade.Tokens.weakerThanDescendants, "physics")
    # the penalty gains of the shape's mode (inertia.builder.shapes): mass-scaled (tau > 0) or absolute
    gains = ("tau", "zeta") if sc["shape_tau"][s] > 0.0 else ("ke", "kd")
    for key in gains:
        _set_custom(prim, key, float(sc[f"shape_{key}"][s]), Sdf.ValueTypeNames.Double)
    _set_custom(prim, "collision_group", int(sc["shape_group"][s]), Sdf.ValueTypeNames.Int)
    _set_custom(prim, "collision_mask", int(sc["shape_mask"][s]), Sdf.ValueTypeNames.Int)
    flags = int(sc["shape_flags"][s])
    _set_custom(prim, "collide_shapes", bool(flags & 1), Sdf.ValueTypeNames.Bool)
    _set_custom(prim, "collide_particles", bool(flags & 2), Sdf.ValueTypeNames.Bool)


def _write_joint(stage, path: str, sc: dict, j: int, body_paths: list) -> None:
    t = sc["joint_type"][j]
    define = {JOINT_REVOLUTE: UsdPhysics.RevoluteJoint, JOINT_PRISMATIC: UsdPhysics.PrismaticJoint,
              JOINT_BALL: UsdPhysics.SphericalJoint, JOINT_FIXED: UsdPhysics.FixedJoint, JOINT_FREE: UsdPhysics.Joint}
    joint = define[t].Define(stage, path)
    xp, xc = sc["joint_X_p"][j], sc["joint_X_c"][j]
    q_p, q_c = tuple(xp[3:]), tuple(xc[3:])
    if t in (JOINT_REVOLUTE, JOINT_PRISMATIC):
        # USD axes are X, Y or Z of the joint frame: turn both frames so that X lies along the axis
        a = sc["joint_axis"][j] / np.linalg.norm(sc["joint_axis"][j])
        k = next((i for i in range(3) if abs(a[i] - 1.0) < 1e-12), None)
        if k is None:
            turn = quat_from_matrix(rotation_between((1.0, 0.0, 0.0), a))
            q_p, q_c, k = quat_mul(q_p, turn), quat_mul(q_c, turn), 0
        joint.CreateAxisAttr("XYZ"[k])
        unit = 1.0 / _DEG if t == JOINT_REVOLUTE else 1.0
        for value, create in ((sc["joint_lower"][j], joint.CreateLowerLimitAttr),
                              (sc["joint_upper"][j], joint.CreateUpperLimitAttr)):
            if math.isfinite(value):
                create(float(value * unit))
        ke, kd = sc["joint_target_ke"][j], sc["joint_target_kd"][j]
        if ke > 0.0 or kd > 0.0:
            drive = UsdPhysics.DriveAPI.Apply(joint.GetPrim(), "angular" if t == JOINT_REVOLUTE else "linear")
            gain = _DEG if t == JOINT_REVOLUTE else 1.0  # USD's angular gains are per degree
            drive.CreateTypeAttr("force")
            drive.CreateStiffnessAttr(float(ke * gain))
            drive.CreateDampingAttr(float(kd * gain))
        _set_custom(joint.GetPrim(), "limit_ke", float(sc["joint_limit_ke"][j]), Sdf.ValueTypeNames.Double)
        _set_custom(joint.GetPrim(), "limit_kd", float(sc["joint_limit_kd"][j]), Sdf.ValueTypeNames.Double)
    p, c = sc["joint_parent"][j], sc["joint_child"][j]
    if p >= 0:
        joint.CreateBody0Rel().SetTargets([Sdf.Path(body_paths[p])])
    joint.CreateBody1Rel().SetTargets([Sdf.Path(body_paths[c])])
    joint.CreateLocalPos0Attr(Gf.Vec3f(*map(float, xp[:3])))
    joint.CreateLocalRot0Attr(_quatf(q_p))
    joint.CreateLocalPos1Attr(Gf.Vec3f(*map(float, xc[:3])))
    joint.CreateLocalRot1Attr(_quatf(q_c))
    joint.CreateCollisionEnabledAttr(bool(sc["joint_collide_parent"][j]))


def save_usd(source, path, state=None) -> str:
    """Write a ModelBuilder or Model as a UsdPhysics stage to ``path`` (``.usda`` text, ``.usd``/``.usdc``
    binary); see :func:`stage_from`. Returns the path."""
    path = os.fspath(path)
    stage = stage_from(source, state)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    stage.GetRootLayer().Export(path)
    return path


__all__ = ["save_usd", "stage_from"]
