"""URDF import: a robot description (links, joints, collision geometry) into a :class:`ModelBuilder`.

    result = inertia.io.urdf.add_urdf(builder, "robot.urdf", floating=True, package_paths=["~/ws/src"])
    result.links["base_link"], result.joints["knee"]      # body and joint indices

What is read, and how it maps onto the builder (conventions in ``inertia.builder.bodies``):

- **Links** become bodies. The link frame at ``joint_q = 0`` is its parent joint's frame (so every
  joint's ``child_xform`` is the identity). ``<inertial>``: ``mass`` [kg], ``inertia`` ixx..izz
  (off-diagonals included; missing entries count as 0) given in the inertial frame, rotated into the
  link frame by the inertial ``origin``'s rpy; the centre of mass is the origin's xyz.
  A link without ``<inertial>`` takes its mass and inertia from its collision shapes at ``density``;
  the root link of a fixed base (``floating=False``) with neither an inertial nor a collision shape
  (or an inertial of mass 0) becomes kinematic. Any other link with no mass is refused here
  (zero mass) or by ``finalize()`` (nothing to take a mass from).
- **Collision** ``<geometry>``: ``box`` (full ``size``), ``sphere``, ``cylinder`` (along the local Z
  axis, ``length`` end to end), ``capsule`` (not in the URDF standard but common: ``length`` of the
  cylindrical part) and ``mesh`` (OBJ or STL, with ``scale``) at the collision ``origin``.
  Mesh files are found from ``package://pkg/rel/path`` in the ``package_paths`` (folders that contain
  package folders, or a package folder itself), ``file:///abs/path``, or a path relative to the URDF file.
- **Joints**: ``revolute`` (limits [rad]), ``continuous`` (a revolute without limits), ``prismatic``
  (limits [m]), ``fixed`` and ``floating`` (a free joint, only where the parent is the root link: its
  ``joint_q`` is the child's pose relative to where the URDF puts it). ``origin`` is the joint frame in
  the parent link frame, ``axis`` (default 1 0 0) is in the joint frame. ``planar`` is refused.
- **Base**: the root link is attached to the world at ``xform`` by a fixed joint (``floating=False``)
  or a free joint (``floating=True``).

Ignored: ``<visual>`` (the engine only simulates collision geometry), ``<material>``, ``limit``
``effort`` / ``velocity`` (read and checked to be numbers, but the engine has no actuator limits),
``<dynamics>`` damping and friction (the builder's joints have no passive damping; use
``joint_target_kd`` with a zero target velocity), ``<safety_controller>``, ``<calibration>``,
``<transmission>`` and ``<gazebo>``. ``<mimic>`` is not supported and warns once per joint.

Every error is a :class:`UrdfError` naming the file, the element (link or joint name) and what is wrong.
Mesh readers (:func:`read_obj`, :func:`read_stl`) are plain-Python and take no extra dependency.
"""

from __future__ import annotations

import math
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from ..transforms import IDENTITY, compose, quat_from_rpy, quat_to_matrix
from .meshes import MESH_READERS, MeshError, read_obj, read_stl  # noqa: F401  (read_obj, read_stl: public here too)


class UrdfError(ValueError):
    """A URDF file (or a mesh it references) that cannot be imported; the message names file and element."""


@dataclass
class UrdfImport:
    """What :func:`add_urdf` added: indices into the builder's bodies, joints and shapes."""

    name: str  # the robot's name
    links: dict = field(default_factory=dict)  # link name -> body index
    joints: dict = field(default_factory=dict)  # joint name -> joint index
    shapes: dict = field(default_factory=dict)  # link name -> [shape indices]
    root_joint: int = -1  # the fixed or free joint that attaches the root link to the world


# ---------------------------------------------------------------------------------------------- parsing helpers
class _Reader:
    """Attribute parsing that names the file and the element in every error."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, what: str):
        raise UrdfError(f"{self.path}: {where}: {what}")

    def attr(self, el, name: str, where: str, required: bool = True, default=None) -> str:
        v = el.get(name) if el is not None else None
        if v is None and required:
            tag = f"<{el.tag}>" if el is not None else "element"
            self.fail(where, f"{tag} is missing the attribute '{name}'")
        return default if v is None else v

    def floats(self, el, name: str, n: int, where: str, default=None) -> tuple:
        text = self.attr(el, name, where, required=default is None)
        if text is None:
            return tuple(default)
        try:
            v = tuple(float(t) for t in text.split())
        except ValueError:
            self.fail(where, f"<{el.tag} {name}=\"{text}\"> is not {n} number(s)")
        if len(v) != n or not all(math.isfinite(x) for x in v):
            self.fail(where, f"<{el.tag} {name}=\"{text}\"> must be {n} finite number(s)")
        return v

    def number(self, el, name: str, where: str, default=None) -> float:
        return self.floats(el, name, 1, where, None if default is None else (default,))[0]

    def origin(self, el, where: str) -> tuple:
        """(position, quaternion) of the ``<origin>`` child of ``el`` (the identity when absent)."""
        o = el.find("origin")
        if o is None:
            return IDENTITY
        xyz = self.floats(o, "xyz", 3, where, (0.0, 0.0, 0.0))
        rpy = self.floats(o, "rpy", 3, where, (0.0, 0.0, 0.0))
        return xyz, quat_from_rpy(*rpy)


def resolve_mesh_path(filename: str, urdf_dir: str, package_paths=()) -> tuple:
    """(found path or None, [paths tried]) for a URDF mesh ``filename``."""
    if filename.startswith("package://"):
        pkg, _, rel = filename[len("package://"):].partition("/")
        tried = []
        for folder in package_paths:
            folder = os.path.expanduser(os.fspath(folder))
            tried.append(os.path.join(folder, pkg, rel))
            if os.path.basename(os.path.normpath(folder)) == pkg:  # the package folder itself
                tried.append(os.path.join(folder, rel))
    elif filename.startswith("file://"):
        tried = [filename[len("file://"):]]
    else:
        tried = [filename if os.path.isabs(filename) else os.path.join(urdf_dir, filename)]
    return next((p for p in tried if os.path.isfile(p)), None), tried


# ---------------------------------------------------------------------------------------------- import
_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")


def add_urdf(builder, path, xform=None, floating: bool = False, package_paths=(), density: float = 1000.0,
             joint_target_ke: float = 0.0, joint_target_kd: float = 0.0, limit_ke=None, limit_kd=None,
             collide_parent: bool = False, **shape_props) -> UrdfImport:
    """Add the robot described by the URDF file ``path`` to ``builder``; see the module docstring.

    Args:
        xform: pose of the root link in world, ``(position [m], quaternion (x, y, z, w))``; identity if None.
        floating: attach the root link with a free joint (True) or weld it to the world (False).
        package_paths: folders searched for ``package://`` meshes.
        density: [kg/m^3] of collision shapes, for links without ``<inertial>``.
        joint_target_ke, joint_target_kd: drive gains of every revolute / continuous / prismatic joint
            ([N m/rad], [N m s/rad] or [N/m], [N s/m]); URDF has none, default 0 (passive joints).
        limit_ke, limit_kd: joint-limit stiffness and damping (None: the builder's defaults).
        collide_parent: let each link collide with its parent link.
        **shape_props: shape properties (``ke``, ``kd``, ``mu``, ``restitution``, collision filters)
            given to every collision shape; see ``inertia.builder.shapes.SHAPE_PROPERTIES``.
    Returns:
        :class:`UrdfImport` with link name -> body index and joint name -> joint index.
    """
    path = os.fspath(path)
    r = _Reader(path)
    if not os.path.isfile(path):
        raise UrdfError(f"{path}: URDF file not found")
    try:
        robot = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise UrdfError(f"{path}: not well-formed XML: {e}") from None
    if robot.tag != "robot":
        r.fail("root element", f"expected <robot>, got <{robot.tag}>")
    if "label" in shape_props:
        raise TypeError("add_urdf names shapes after their links; do not pass label=")

    links = {}
    for el in robot.findall("link"):
        name = r.attr(el, "name", "a <link>")
        if name in links:
            r.fail(f"link '{name}'", "defined twice")
        links[name] = el
    if not links:
        r.fail("robot", "has no <link>")

    joints, child_joint, children = {}, {}, {}
    for el in robot.findall("joint"):
        name = r.attr(el, "name", "a <joint>")
        where = f"joint '{name}'"
        if name in joints:
            r.fail(where, "defined twice")
        jtype = r.attr(el, "type", where)
        if jtype not in _JOINT_TYPES:
            r.fail(where, f"unknown type '{jtype}' (known: {', '.join(_JOINT_TYPES)})")
        if jtype == "planar":
            r.fail(where, "type 'planar' is not supported (the engine has no planar joint)")
        ends = []
        for tag in ("parent", "child"):
            e = el.find(tag)
            if e is None:
                r.fail(where, f"has no <{tag}> element")
            link = r.attr(e, "link", where)
            if link not in links:
                r.fail(where, f"<{tag} link=\"{link}\"> names an unknown link")
            ends.append(link)
        parent, child = ends
        if child in child_joint:
            r.fail(where, f"link '{child}' is already the child of joint '{child_joint[child]}'; links form a tree")
        joints[name] = el
        child_joint[child] = name
        children.setdefault(parent, []).append(name)

    roots = [n for n in links if n not in child_joint]
    if len(roots) != 1:
        what = "none (the joints form a loop)" if not roots else ", ".join(f"'{n}'" for n in roots)
        r.fail("robot", f"must have exactly one root link (a link that is no joint's child), found {what}")
    root = roots[0]

    # link poses at joint_q = 0, depth first in document order (each limb's bodies stay together)
    base = IDENTITY if xform is None else _pose(xform)
    pose, order, stack = {root: base}, [], [root]
    while stack:
        link = stack.pop()
        order.append(link)
        for jname in reversed(children.get(link, [])):
            el = joints[jname]
            child = el.find("child").get("link")
            pose[child] = compose(pose[link], r.origin(el, f"joint '{jname}'"))
            stack.append(child)
    if len(order) != len(links):  # a link on a loop is never reached from the root
        r.fail("robot", f"links {sorted(set(links) - set(order))} are not connected to the root '{root}'")

    result = UrdfImport(name=robot.get("name", ""))
    urdf_dir = os.path.dirname(os.path.abspath(path))
    for link in order:
        where = f"link '{link}'"
        el = links[link]
        collisions = el.findall("collision")
        mass, inertia, com, kinematic = _inertial(r, el, where)
        fixed_root = link == root and not floating
        if mass == 0.0 or (mass is None and not collisions):
            if not fixed_root:
                r.fail(where, "has no mass: give it an <inertial> with mass > 0 or a <collision> shape "
                              "(only the root of a fixed base may be massless; it then becomes kinematic)")
            kinematic = True
        body = _wrap(r, where, builder.add_body, xform=pose[link], mass=mass, inertia=inertia, com=com,
                     kinematic=kinematic, label=link)
        result.links[link] = body
        result.shapes[link] = [
            _add_collision(builder, r, body, c, f"{where} <collision> {k}", urdf_dir, package_paths,
                           density, shape_props, f"{link}_collision_{k}")
            for k, c in enumerate(collisions)
        ]

    add_base = builder.add_joint_free if floating else builder.add_joint_fixed
    base_label = f"{root}_{'free' if floating else 'fixed'}_base"
    result.root_joint = _wrap(r, f"link '{root}'", add_base, *(() if floating else (-1,)), result.links[root],
                              parent_xform=base, label=base_label)

    for link in order[1:]:
        jname = child_joint[link]
        el = joints[jname]
        result.joints[jname] = _add_joint(builder, r, el, jname, result.links, root, pose,
                                          (joint_target_ke, joint_target_kd, limit_ke, limit_kd, collide_parent))
    return result


def _pose(xform) -> tuple:
    from ..builder.checks import transform

    t = transform(xform, "add_urdf xform")
    return tuple(float(v) for v in t.p), tuple(float(v) for v in t.q)


def _wrap(r: _Reader, where: str, fn, *args, **kwargs):
    """Call a builder method; its errors are re-raised naming the URDF file and element."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, TypeError, IndexError) as e:
        raise UrdfError(f"{r.path}: {where}: {e}") from e


def _inertial(r: _Reader, link_el, where: str):
    """(mass, inertia (3, 3) in the link frame, com, kinematic) of a link; Nones without ``<inertial>``."""
    el = link_el.find("inertial")
    if el is None:
        return None, None, None, False
    m_el = el.find("mass")
    if m_el is None:
        r.fail(where, "<inertial> has no <mass>")
    mass = r.number(m_el, "value", where)
    if mass < 0.0:
        r.fail(where, f"<mass value> must be >= 0, got {mass}")
    i_el = el.find("inertia")
    if i_el is None:
        r.fail(where, "<inertial> has no <inertia>")
    ixx, ixy, ixz, iyy, iyz, izz = (r.number(i_el, n, where, 0.0) for n in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    local = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    com, q = r.origin(el, where)
    rot = quat_to_matrix(q)
    inertia = rot @ local @ rot.T
    if mass == 0.0:
        return 0.0, None, com, True
    eig = np.linalg.eigvalsh(inertia)
    if not eig.min() > 0.0:
        r.fail(where, f"<inertia> must be positive definite, eigenvalues {np.round(eig, 12).tolist()}")
    return mass, inertia, com, False


def _add_collision(builder, r: _Reader, body: int, el, where: str, urdf_dir: str, package_paths, density,
                   shape_props, label) -> int:
    geo = el.find("geometry")
    if geo is None or len(geo) != 1:
        r.fail(where, "needs a <geometry> with exactly one shape inside")
    g = geo[0]
    xf = r.origin(el, where)
    props = dict(shape_props, density=density, label=el.get("name") or label)
    if g.tag == "box":
        hx, hy, hz = (0.5 * v for v in r.floats(g, "size", 3, where))
        return _wrap(r, where, builder.add_shape_box, body, xf, hx, hy, hz, **props)
    if g.tag == "sphere":
        return _wrap(r, where, builder.add_shape_sphere, body, xf, r.number(g, "radius", where), **props)
    if g.tag in ("cylinder", "capsule"):
        radius, length = r.number(g, "radius", where), r.number(g, "length", where)
        add = builder.add_shape_cylinder if g.tag == "cylinder" else builder.add_shape_capsule
        return _wrap(r, where, add, body, xf, radius, 0.5 * length, **props)
    if g.tag == "mesh":
        filename = r.attr(g, "filename", where)
        scale = r.floats(g, "scale", 3, where, (1.0, 1.0, 1.0))
        found, tried = resolve_mesh_path(filename, urdf_dir, package_paths)
        if found is None:
            hint = "" if tried else " (no package_paths given)"
            r.fail(where, f"mesh '{filename}' not found{hint}; tried: {tried}")
        ext = os.path.splitext(found)[1].lower()
        if ext not in MESH_READERS:
            r.fail(where, f"mesh '{filename}': unsupported format '{ext}' (supported: {sorted(MESH_READERS)})")
        try:
            vertices, tris = MESH_READERS[ext](found)
        except MeshError as e:
            raise UrdfError(f"{r.path}: {where}: {e}") from e
        return _wrap(r, where, builder.add_shape_mesh, body, xf, vertices, tris, scale, **props)
    r.fail(where, f"unsupported geometry <{g.tag}> (supported: box, sphere, cylinder, capsule, mesh)")


def _add_joint(builder, r: _Reader, el, name: str, bodies: dict, root: str, pose: dict, gains) -> int:
    where = f"joint '{name}'"
    target_ke, target_kd, limit_ke, limit_kd, collide_parent = gains
    jtype = el.get("type")
    parent, child = el.find("parent").get("link"), el.find("child").get("link")
    origin = r.origin(el, where)
    p, c = bodies[parent], bodies[child]
    if el.find("mimic") is not None:
        warnings.warn(f"{r.path}: {where}: <mimic> is not supported; the joint moves on its own", stacklevel=3)
    if jtype == "fixed":
        return _wrap(r, where, builder.add_joint_fixed, p, c, origin, None, collide_parent=collide_parent,
                     label=name)
    if jtype == "floating":
        if parent != root:
            r.fail(where, f"floating joints are supported only with the root link as parent ('{root}'), "
                          f"not '{parent}'")
        return _wrap(r, where, builder.add_joint_free, c, pose[child], None, label=name)
    axis = r.floats(el.find("axis"), "xyz", 3, where, (1.0, 0.0, 0.0)) if el.find("axis") is not None else (
        1.0, 0.0, 0.0)
    if math.sqrt(sum(a * a for a in axis)) < 1e-9:
        r.fail(where, f"<axis xyz> must be non-zero, got {axis}")
    lower = upper = None
    limit = el.find("limit")
    if limit is not None:
        for attr in ("effort", "velocity"):  # checked to be numbers, otherwise unused
            if limit.get(attr) is not None:
                r.number(limit, attr, where)
    if jtype in ("revolute", "prismatic"):
        if limit is None:
            r.fail(where, f"a {jtype} joint needs a <limit> (use type 'continuous' for an unlimited hinge)")
        lower, upper = r.number(limit, "lower", where, 0.0), r.number(limit, "upper", where, 0.0)
        if lower > upper:
            r.fail(where, f"<limit> lower {lower} > upper {upper}")
    add = builder.add_joint_prismatic if jtype == "prismatic" else builder.add_joint_revolute
    return _wrap(r, where, add, p, c, origin, None, axis, limit_lower=lower, limit_upper=upper, limit_ke=limit_ke,
                 limit_kd=limit_kd, target_ke=target_ke, target_kd=target_kd, collide_parent=collide_parent,
                 label=name)


__all__ = ["UrdfError", "UrdfImport", "add_urdf", "read_obj", "read_stl"]
