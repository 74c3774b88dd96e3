"""What the URDF and MJCF importers share: a robot described as a tree of links and joints, added to a builder.

A parser (``inertia.io.urdf``, ``inertia.io.mjcf``) fills a :class:`RobotDescription`: links (mass
properties, collision and visual geometry, named frames) and joints (kind, frames, axis, limits, joint
dynamics, drive gains, mimic couplings). :func:`add_robot` then adds it to a :class:`inertia.ModelBuilder`:

- **Merging**: a link joined to its parent by a fixed joint folds into the parent's body (``merge_fixed``):
  masses add, inertias add about the common centre of mass (parallel axis), shapes and visuals move into
  the parent's frame, and the link's frame stays addressable by name (:meth:`RobotImport.frame_pose`).
  A link fixed to the world becomes static geometry (MJCF bodies without joints).
- **Mass properties** of a link come from its inertial; without one, from its collision geometry at
  ``density`` (MuJoCo's ``inertiafromgeom="auto"``; 0 without geometry); an inertial whose tensor is not
  positive definite takes the tensor of its geometry scaled to its mass (one warning per file). Mesh
  geometry that is not closed counts by its convex hull.
- **Massless bodies on moving joints** (a dummy link between two joints, MJCF bodies with several
  joints) cannot be simulated in maximal coordinates: each borrows ``intermediate_mass_fraction`` (default
  0.1) of the mass and inertia of its first descendant that has mass, at that body's centre of mass, so
  that the subtree's mass, centre of mass and inertia at ``joint_q = 0`` are unchanged (one warning per
  file); ``Model.body_mass_donor`` records the lender, so a reduced-coordinate solver can hand the share
  back. The share is a compromise: the SemiImplicitSolver's joint springs are scaled by the lighter body
  (Gymnasium's humanoid diverges at 1 % even at dt = 0.1 ms, holds at 10 %), while the share rides only
  the joints above the intermediate body (a dynamics error of that order in the maximal-coordinate solvers).
- **A root welded to the world** (a URDF's fixed base) is a kinematic body: nothing moves it, as in PyBullet
  and MuJoCo; it keeps its mass properties for the record.
- **Self-collision**: with ``self_collisions=False`` no two bodies of the robot collide; adjacent bodies
  (joined by a joint) never do.

Everything is computed on the host in float64 and handed to the builder explicitly (mass, inertia and
centre of mass of every body), so ``finalize()`` never needs a mesh's own mass properties.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..builder import mass_properties as mp
from ..transforms import IDENTITY, compose, invert, quat_to_matrix
from ..types import JOINT_COORDS
from .meshes import convex_hull

PD_TOLERANCE = 1e-9  # an inertia whose smallest eigenvalue is below this times its largest is degenerate


@dataclass
class Geom:
    """One piece of a link's geometry, in the link frame; see :class:`inertia.builder.shapes.Visual` for ``size``."""

    kind: str  # sphere, box, capsule, cylinder, ellipsoid, mesh, plane
    xform: tuple = IDENTITY
    size: tuple = (0.0, 0.0, 0.0)
    vertices: np.ndarray | None = None  # mesh vertices as in the file; ``size`` holds the mesh's scale
    triangles: np.ndarray | None = None
    name: str = ""
    collide: bool = True  # a collision shape
    visual: bool = False  # drawn (USD)
    mass_source: bool = True  # counts for the link's mass when it has no inertial
    density: float | None = None  # [kg/m^3]; None: the importer's density
    mass: float | None = None  # [kg], overrides density (MJCF geom mass)
    color: tuple | None = None
    props: dict = field(default_factory=dict)  # shape properties (mu, restitution, collision_group, ...)


@dataclass
class Link:
    name: str
    inertial: tuple | None = None  # (mass [kg], com (3,) [m], inertia (3, 3) [kg m^2] about com), link frame
    geoms: list = field(default_factory=list)
    frames: dict = field(default_factory=dict)  # extra named frames (MJCF sites): name -> (p, q) in the link frame


@dataclass
class Joint:
    name: str
    kind: str  # revolute, prismatic, ball, fixed, free
    parent: str | None  # link name; None: the world
    child: str
    origin: tuple = IDENTITY  # joint frame in the parent link frame (the world frame when parent is None)
    child_origin: tuple = IDENTITY  # joint frame in the child link frame
    axis: tuple = (1.0, 0.0, 0.0)
    lower: float | None = None
    upper: float | None = None
    dynamics: dict = field(default_factory=dict)  # armature, damping, friction, effort_limit, velocity_limit
    target_ke: float | None = None  # None: the importer's gains
    target_kd: float | None = None
    mimic: tuple | None = None  # (source joint name, multiplier, offset)
    mergeable: bool = True  # a fixed joint the importer may fold away
    absolute: bool = False  # free joints: coordinates are the child's pose in the parent frame (MJCF), not
    # relative to where ``origin`` puts it (URDF)


@dataclass
class RobotDescription:
    name: str
    path: str
    links: dict  # name -> Link, parents before children
    joints: list  # Joint, parents before children
    exclude: list = field(default_factory=list)  # (link, link) pairs that never collide


class Warner:
    """Collects what a file holds but the importer does not use; :meth:`flush` warns once per kind."""

    def __init__(self, path: str):
        self.path, self.kinds = path, {}

    def add(self, kind: str, where: str, why: str = "", verb: str = "not imported") -> None:
        entry = self.kinds.setdefault(kind, [why, verb, []])
        if where not in entry[2]:
            entry[2].append(where)

    def flush(self, stacklevel: int = 4) -> None:
        for kind, (why, verb, places) in self.kinds.items():
            shown = ", ".join(places[:4]) + (f" and {len(places) - 4} more" if len(places) > 4 else "")
            warnings.warn(f"{self.path}: {kind} {verb} ({len(places)}x: {shown}){': ' + why if why else ''}",
                          UserWarning, stacklevel=stacklevel)
        self.kinds = {}


@dataclass
class RobotImport:
    """What an importer added to a builder; indices are the builder's at import time.

    ``bodies``: body name -> body index (the bodies that were created). ``links``: every link name (merged
    ones too) -> the body it is part of. ``joints``: joint name -> joint index (merged fixed joints are not
    joints any more). ``shapes``: body name -> its collision shape indices. ``frames``: every link and
    named frame (MJCF sites) -> (body index, (position, quaternion) in the body frame). ``joint_q`` /
    ``joint_qd``: joint name -> slice of ``State.joint_q`` / ``joint_qd``. ``root_joint``: the joint that
    attaches the root to the world (-1 if none). ``static_shapes``: shapes fixed to the world.
    """

    name: str
    path: str = ""
    bodies: dict = field(default_factory=dict)
    links: dict = field(default_factory=dict)
    joints: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)
    frames: dict = field(default_factory=dict)
    joint_q: dict = field(default_factory=dict)
    joint_qd: dict = field(default_factory=dict)
    root_joint: int = -1
    static_shapes: list = field(default_factory=list)
    intermediate_bodies: dict = field(default_factory=dict)  # body index -> body it borrowed its mass from
    inertia_replaced: list = field(default_factory=list)  # links whose written tensor was not positive definite
    extra: dict = field(default_factory=dict)  # importer specific (MJCF actuators, joint references)

    def frame_pose(self, state, name: str) -> np.ndarray:
        """World pose (7,) (position [m], quaternion (x, y, z, w)) of the frame or link ``name`` in ``state``
        (reads ``state.body_q`` back to the host: for set-up and analysis, not inside a captured step)."""
        if name not in self.frames:
            raise KeyError(f"{self.path}: no frame {name!r}; known: {sorted(self.frames)}")
        body, xf = self.frames[name]
        if body < 0:
            return np.array(list(xf[0]) + list(xf[1]), dtype=np.float64)
        q = state.body_q.numpy()[body].astype(np.float64)
        p, r = compose(((q[0], q[1], q[2]), (q[3], q[4], q[5], q[6])), xf)
        return np.array(list(p) + list(r), dtype=np.float64)

    def joint_indices(self, names=None) -> list:
        """Joint indices of ``names`` (default: every joint of the robot, in import order)."""
        return [self.joints[n] for n in (self.joints if names is None else names)]


# ---------------------------------------------------------------------------------------------- geometry
def geom_mass_properties(g: Geom, density: float, warner: Warner | None = None, where: str = ""):
    """(mass, com (3,), inertia (3, 3) about com) of ``g`` in its own frame, solid at ``density`` [kg/m^3]."""
    rho = density if g.density is None else g.density
    s = g.size
    if g.kind == "sphere":
        props = mp.sphere(rho, s[0])
    elif g.kind == "box":
        props = mp.box(rho, *s)
    elif g.kind == "capsule":
        props = mp.capsule(rho, s[0], s[1])
    elif g.kind == "cylinder":
        props = mp.cylinder(rho, s[0], s[1])
    elif g.kind == "ellipsoid":
        m = rho * 4.0 / 3.0 * math.pi * s[0] * s[1] * s[2]
        a2, b2, c2 = s[0] ** 2, s[1] ** 2, s[2] ** 2
        props = (m, np.zeros(3), np.diag([m * (b2 + c2) / 5.0, m * (a2 + c2) / 5.0, m * (a2 + b2) / 5.0]))
    elif g.kind == "mesh":
        try:
            props = mp.mesh(rho, g.vertices * np.asarray(s), g.triangles)
        except ValueError:
            if warner is not None:
                warner.add("open mesh", where, "its mass properties are its convex hull's", verb="estimated")
            v = g.vertices * np.asarray(s)
            props = mp.mesh(rho, v, convex_hull(v))
    else:  # planes carry no mass
        return 0.0, np.zeros(3), np.zeros((3, 3))
    if g.mass is not None:  # a given mass: the shape's distribution, scaled
        m0 = props[0]
        k = g.mass / m0 if m0 > 0.0 else 0.0
        props = (g.mass, props[1], props[2] * k)
    return props


def _moved(props, xf):
    """(mass, com, inertia, R, t) for mp.combine: ``props`` in a frame placed at ``xf`` in the common frame."""
    return props + (quat_to_matrix(xf[1]), np.asarray(xf[0], dtype=np.float64))


def link_mass_properties(link: Link, density: float, warner: Warner, where: str, replaced: set | None = None):
    """(mass, com, inertia about com) of ``link`` in its frame: its inertial, else its geometry's. The names of
    links whose written tensor was replaced are added to ``replaced``."""
    if link.inertial is not None:
        mass, com, inertia = link.inertial
        if mass > 0.0 and not _positive_definite(inertia):
            inertia = _estimated_inertia(link, mass, com, density, warner, where)
            if replaced is not None:
                replaced.add(link.name)
        return mass, np.asarray(com, dtype=np.float64), inertia
    parts = [_moved(geom_mass_properties(g, density, warner, f"{where} {g.name or g.kind}"), g.xform)
             for g in link.geoms if g.mass_source]
    return mp.combine(parts) if parts else (0.0, np.zeros(3), np.zeros((3, 3)))


def _positive_definite(inertia) -> bool:
    eig = np.linalg.eigvalsh(inertia)
    return bool(eig.max() > 0.0 and eig.min() > PD_TOLERANCE * eig.max())


def _estimated_inertia(link: Link, mass: float, com, density: float, warner: Warner, where: str):
    """The inertia of ``link``'s collision geometry, scaled to ``mass`` and moved to ``com`` (parallel axis);
    without geometry, the written tensor with its eigenvalues raised to 1e-3 of the largest."""
    parts = [_moved(geom_mass_properties(g, density, warner, f"{where} {g.name or g.kind}"), g.xform)
             for g in link.geoms if g.collide and g.kind != "plane"]
    m_g, com_g, i_g = mp.combine(parts) if parts else (0.0, None, None)
    if m_g > 0.0:
        warner.add("inertia that is not positive definite", where, "estimated from the collision geometry (its "
                   "inertia scaled to the link's mass, about the written centre of mass)", verb="replaced")
        k = mass / m_g
        d = np.asarray(com, dtype=np.float64) - com_g
        return k * i_g + mass * (d @ d * np.eye(3) - np.outer(d, d))
    written = np.asarray(link.inertial[2], dtype=np.float64)
    eig, vec = np.linalg.eigh(written)
    top = eig.max()
    if not top > 0.0:
        raise ValueError(f"{where}: mass {mass} kg with a zero inertia and no collision geometry to estimate one "
                         "from; give the link an <inertia>")
    warner.add("inertia that is not positive definite", where, "no collision geometry to estimate it from: "
               "its eigenvalues raised to 1e-3 of the largest", verb="regularised")
    return vec @ np.diag(np.maximum(eig, 1e-3 * top)) @ vec.T


# ---------------------------------------------------------------------------------------------- the builder side
def add_robot(builder, robot: RobotDescription, *, xform=None, merge_fixed: bool = True, density: float = 1000.0,
              self_collisions: bool = False, target_ke=0.0, target_kd=0.0, limit_ke=None, limit_kd=None,
              intermediate_mass_fraction: float = 0.1, shape_props=None, warner: Warner) -> RobotImport:
    """Add ``robot`` to ``builder``; see the module docstring. ``xform`` places the world-attached joints
    and the world's geometry; gains are a number or a dict joint name -> number (others 0)."""
    shape_props = dict(shape_props or {})
    base = IDENTITY if xform is None else xform
    ke_of, kd_of = _gains(target_ke, robot, "joint_target_ke"), _gains(target_kd, robot, "joint_target_kd")
    if not 0.0 < intermediate_mass_fraction < 1.0:
        raise ValueError(f"intermediate_mass_fraction must be in (0, 1), got {intermediate_mass_fraction}")

    # ---- which body each link belongs to, and where in it
    parent_joint = {j.child: j for j in robot.joints}
    owner, in_owner = {}, {}  # link -> representative link (None: the world); link frame in the owner's frame
    pose = {}  # link -> world pose at joint_q = 0
    for name in robot.links:
        j = parent_joint.get(name)
        if j is None:
            raise ValueError(f"{robot.path}: link '{name}' is attached to nothing")
        parent_pose = base if j.parent is None else pose[j.parent]
        joint_world = compose(parent_pose, j.origin)
        pose[name] = compose(joint_world, invert(j.child_origin))
        if j.kind == "fixed" and merge_fixed and j.mergeable:
            if j.parent is None or owner[j.parent] is None:  # fixed to the world: static geometry
                owner[name], in_owner[name] = None, pose[name]
            else:
                owner[name] = owner[j.parent]
                in_owner[name] = compose(in_owner[j.parent], compose(j.origin, invert(j.child_origin)))
        else:
            owner[name], in_owner[name] = name, IDENTITY

    # ---- mass properties per body (float64, body frame)
    members, replaced = {}, set()
    for name in robot.links:
        members.setdefault(owner[name], []).append(name)
    props = {}
    for rep, names in members.items():
        if rep is None:
            continue
        parts = []
        for n in names:
            m, c, i = link_mass_properties(robot.links[n], density, warner, f"link '{n}'", replaced)
            if m > 0.0 or np.any(i):  # a massless link's rotational inertia counts too (PyBullet, MuJoCo)
                parts.append((m, c, i) + (quat_to_matrix(in_owner[n][1]), np.asarray(in_owner[n][0], np.float64)))
        props[rep] = mp.combine(parts) if parts else (0.0, np.zeros(3), np.zeros((3, 3)))

    # ---- massless bodies on moving joints borrow from their first descendant with mass
    borrowed = {}
    children = {}
    for j in robot.joints:
        if j.parent is not None and owner.get(j.child) == j.child:
            children.setdefault(owner[j.parent], []).append(j.child)
    for rep in (n for n in robot.links if owner[n] == n):  # parents first: a chain borrows from one body
        j = parent_joint[rep]
        if props[rep][0] > 0.0 or (j.parent is None and j.kind == "fixed"):  # a massless welded root: kinematic
            continue
        donor = _first_with_mass(rep, children, props)
        if donor is None:
            hint = "" if merge_fixed else " (or import with merge_fixed=True to fold it into its parent)"
            raise ValueError(f"{robot.path}: link '{rep}' has no mass and no link below it has any: give it an "
                             f"<inertial> with mass > 0 or collision geometry{hint}")
        m, c, i = props[donor]
        k = intermediate_mass_fraction
        # the donor's com in this body's frame at joint_q = 0
        c_here = _transform_point(compose(invert(pose[rep]), pose[donor]), c)
        r = quat_to_matrix(compose(invert(pose[rep]), pose[donor])[1])
        props[rep] = (k * m, c_here, k * (r @ i @ r.T))
        props[donor] = ((1.0 - k) * m, c, (1.0 - k) * i)
        borrowed[rep] = donor
        warner.add("massless link on a moving joint", f"'{rep}'", verb="given mass", why=
                   f"it borrows {k:g} of the mass and inertia of its first descendant with mass (at that body's "
                   "centre of mass); the subtree's mass properties at joint_q = 0 are unchanged")

    # ---- bodies, shapes, visuals
    result = RobotImport(name=robot.name, path=robot.path)
    result.inertia_replaced = sorted(replaced)
    for rep in (n for n in robot.links if owner[n] == n):
        m, c, i = props[rep]
        j = parent_joint[rep]
        # a root welded to the world never moves (PyBullet's fixed base, MuJoCo's world body): kinematic, with
        # its mass kept for the record; only such a root gets here without mass
        kinematic = j.parent is None and j.kind == "fixed"
        if not kinematic and m <= 0.0:
            raise ValueError(f"{robot.path}: link '{rep}' has no mass and no link below it has any: give it an "
                             "<inertial> with mass > 0 or collision geometry")
        body = builder.add_body(xform=pose[rep], mass=max(m, 0.0), inertia=i if m > 0.0 else None, com=tuple(c),
                                kinematic=kinematic, label=rep)
        result.bodies[rep] = body
        result.shapes[rep] = []
    for rep, donor in borrowed.items():
        result.intermediate_bodies[result.bodies[rep]] = result.bodies[donor]
        builder.body_mass_donor[result.bodies[rep]] = result.bodies[donor]
    for name in robot.links:
        rep = owner[name]
        body = -1 if rep is None else result.bodies[rep]
        result.links[name] = body
        result.frames[name] = (body, in_owner[name])
        link = robot.links[name]
        for fname, fxf in link.frames.items():
            result.frames[fname] = (body, compose(in_owner[name], fxf))
        for g in link.geoms:
            xf = compose(in_owner[name], g.xform)
            if g.collide:
                where = f"link '{name}'"
                if g.kind == "plane" and body >= 0:  # infinite planes are static: only on a root welded in place
                    j = parent_joint[rep]
                    if not (j.parent is None and j.kind == "fixed" and props[rep][0] <= 0.0):
                        raise ValueError(f"{where}: a plane can only be static, on a massless link welded to the "
                                         "world (a fixed base), not on a moving body")
                    s = _add_shape(builder, -1, g, compose(pose[rep], xf), density, shape_props, warner, where)
                    result.static_shapes.append(s)
                    continue
                s = _add_shape(builder, body, g, xf, density, shape_props, warner, where)
                (result.static_shapes if body < 0 else result.shapes[rep]).append(s)
            if g.visual and body >= 0 and g.kind != "plane":
                mesh = g.kind == "mesh"
                builder.add_visual(body, g.kind, xf, g.size, g.vertices * np.asarray(g.size) if mesh else None,
                                   g.triangles, g.color, g.name or f"{name}_visual")

    # ---- joints
    for j in robot.joints:
        if owner[j.child] != j.child:
            continue  # merged away
        child = result.bodies[j.child]
        origin = IDENTITY if j.kind == "free" and j.absolute else j.origin
        if j.parent is None:
            parent, x_p = -1, compose(base, origin)
        else:
            parent = -1 if owner[j.parent] is None else result.bodies[owner[j.parent]]
            x_p = compose(in_owner[j.parent], origin) if parent >= 0 else compose(pose[j.parent], origin)
        result.joints[j.name] = _add_joint(builder, j, parent, child, x_p, ke_of(j), kd_of(j), limit_ke, limit_kd)
        if j.parent is None:
            result.root_joint = result.joints[j.name]
    for j in robot.joints:
        if j.mimic is not None and j.name in result.joints:
            src, mult, off = j.mimic
            if src not in result.joints:
                raise ValueError(f"{robot.path}: joint '{j.name}': <mimic joint=\"{src}\"> names no joint")
            builder.set_joint_mimic(result.joints[j.name], result.joints[src], mult, off)

    # ---- coordinates, self-collision
    starts = np.concatenate([[0], np.cumsum([JOINT_COORDS[t][0] for t in builder.joint_type])])
    dstarts = np.concatenate([[0], np.cumsum([JOINT_COORDS[t][1] for t in builder.joint_type])])
    for name, j in result.joints.items():
        result.joint_q[name] = slice(int(starts[j]), int(starts[j + 1]))
        result.joint_qd[name] = slice(int(dstarts[j]), int(dstarts[j + 1]))
    for a, b in robot.exclude:
        ba, bb = result.links[a], result.links[b]
        if ba >= 0 and bb >= 0 and ba != bb:
            builder.add_collision_exclusion(ba, bb)
    if not self_collisions:
        bodies = sorted(result.bodies.values())
        for a in range(len(bodies)):
            for b in range(a + 1, len(bodies)):
                builder.add_collision_exclusion(bodies[a], bodies[b])
    return result


def _first_with_mass(rep, children, props):
    stack = list(children.get(rep, []))
    while stack:
        c = stack.pop(0)
        if props[c][0] > 0.0:
            return c
        stack.extend(children.get(c, []))
    return None


def _transform_point(xf, x):
    return quat_to_matrix(xf[1]) @ np.asarray(x, dtype=np.float64) + np.asarray(xf[0], dtype=np.float64)


def _gains(value, robot: RobotDescription, what: str):
    """A function joint -> drive gain: the joint's own, else ``value`` (a number, or a dict by joint name)."""
    attr = "target_ke" if what.endswith("ke") else "target_kd"
    if isinstance(value, dict):
        names = {j.name for j in robot.joints}
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(f"{what}: no joints named {unknown} in {robot.path}; its joints: {sorted(names)}")
        return lambda j: value.get(j.name, getattr(j, attr) or 0.0)
    return lambda j: float(value) if getattr(j, attr) is None else getattr(j, attr)


def _add_shape(builder, body, g: Geom, xf, density, shape_props, warner: Warner, where: str) -> int:
    try:
        return _add_shape_unchecked(builder, body, g, xf, shape_props, warner, where)
    except (ValueError, TypeError, IndexError) as e:
        raise ValueError(f"{where} {g.kind} '{g.name}': {e}") from e


def _add_shape_unchecked(builder, body, g: Geom, xf, shape_props, warner: Warner, where: str) -> int:
    props = dict(g.props)
    props.update(shape_props)  # what the caller passes wins over the file
    props.setdefault("density", 0.0)  # mass properties were computed here
    props.setdefault("label", g.name or None)
    s = g.size
    if g.kind == "plane":
        props.pop("density")
        return builder.add_shape_plane(xf, **props)
    if g.kind == "sphere":
        return builder.add_shape_sphere(body, xf, s[0], **props)
    if g.kind == "box":
        return builder.add_shape_box(body, xf, s[0], s[1], s[2], **props)
    if g.kind == "capsule":
        return builder.add_shape_capsule(body, xf, s[0], s[1], **props)
    if g.kind == "cylinder":
        return builder.add_shape_cylinder(body, xf, s[0], s[1], **props)
    if g.kind == "ellipsoid":
        warner.add("ellipsoid collision geometry", where, "it collides as a triangle mesh (an icosphere scaled "
                   "to its radii); its mass properties are the exact ellipsoid's", verb="approximated")
        v, f = _icosphere(2)
        return builder.add_shape_mesh(body, xf, v * np.asarray(s), f, **props)
    if g.kind == "mesh":
        return builder.add_shape_mesh(body, xf, g.vertices, g.triangles, g.size, **props)
    raise ValueError(f"{where}: unsupported geometry '{g.kind}'")


def _add_joint(builder, j: Joint, parent, child, x_p, ke, kd, limit_ke, limit_kd) -> int:
    if j.kind == "fixed":
        return builder.add_joint_fixed(parent, child, x_p, j.child_origin, label=j.name)
    if j.kind == "free":
        return builder.add_joint_free(child, x_p, j.child_origin, label=j.name)
    if j.kind == "ball":
        return builder.add_joint_ball(parent, child, x_p, j.child_origin, label=j.name, **j.dynamics)
    add = builder.add_joint_revolute if j.kind == "revolute" else builder.add_joint_prismatic
    return add(parent, child, x_p, j.child_origin, j.axis, limit_lower=j.lower, limit_upper=j.upper,
               limit_ke=limit_ke, limit_kd=limit_kd, target_ke=ke, target_kd=kd, label=j.name, **j.dynamics)


def _icosphere(subdivisions: int):
    """A unit icosphere: vertices (n, 3), outward triangles (m, 3)."""
    t = (1.0 + 5.0 ** 0.5) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2), (10, 7, 6),
         (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10),
         (8, 6, 7), (9, 8, 1)]
    verts = [np.array(p, dtype=np.float64) / np.linalg.norm(p) for p in v]
    for _ in range(subdivisions):
        cache, nf = {}, []

        def mid(a, b):
            key = (min(a, b), max(a, b))
            if key not in cache:
                m = verts[a] + verts[b]
                verts.append(m / np.linalg.norm(m))
                cache[key] = len(verts) - 1
            return cache[key]

        for a, b, c in f:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            nf += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        f = nf
    return np.array(verts), np.array(f, dtype=np.int32)
