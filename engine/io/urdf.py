"""URDF import: a robot description into a :class:`ModelBuilder`, loading what PyBullet and MuJoCo load.

    r = builder.add_urdf("panda.urdf", floating=False, joint_target_ke={"panda_joint1": 100.0})
    r.bodies["panda_link1"], r.joints["panda_joint4"], r.joint_q["panda_joint4"]  # indices, a slice
    r.frame_pose(state, "panda_grasptarget")                                       # a merged link's pose

What is read, and how it maps onto the builder (conventions in ``inertia.builder.bodies``, shared steps
in ``inertia.io.robot``):

- **Links** become bodies; a link joined by a ``fixed`` joint folds into its parent (``merge_fixed=True``,
  as PyBullet's ``URDF_MERGE_FIXED_LINKS`` and MuJoCo's ``fusestatic``): masses add, inertias add about
  the common centre of mass, geometry moves into the parent, and the link's frame stays addressable by
  name (``r.frames``, ``r.frame_pose(state, name)``). A link frame at ``joint_q = 0`` is its parent
  joint's frame. ``<inertial>``: ``mass`` [kg], ``inertia`` (off-diagonals included, missing entries 0)
  in the inertial frame, rotated into the link frame by the origin's rpy; the centre of mass is the
  origin's xyz. Without ``<inertial>`` a link takes its mass from its collision geometry at ``density``
  (0 without geometry; MuJoCo's rule; PyBullet gives such links 1 kg). A tensor that is not positive
  definite (laikago's zeros) is estimated from the collision geometry, scaled to the link's mass (one
  warning). The root of a fixed base (``floating=False``) is kinematic (nothing moves it, as in PyBullet
  and MuJoCo); without mass it needs no mass properties from its meshes. ``<contact>``:
  ``lateral_friction`` -> the shapes' ``mu``, ``restitution`` -> ``restitution``, ``inertia_scaling``
  scales the tensor (PyBullet's extensions).
- **Geometry**: ``<collision>`` and ``<visual>``: ``box`` (full ``size``), ``sphere``, ``cylinder``
  (local Z, ``length`` end to end), ``capsule`` (``length`` of the cylindrical part), ``plane`` (static
  only: a fixed base) and ``mesh`` (OBJ, STL; Collada .dae with the ``collada`` extra; ``scale``).
  Visuals (with their ``<material>`` colour) are drawn by :class:`inertia.UsdRecorder`, never simulated.
  ``package://NAME/rel`` is looked up in the URDF file's ancestor folders (a folder named NAME, one that
  holds a folder NAME, or one whose ``package.xml`` names NAME; the ROS convention), then in
  ``package_paths``; ``file:///abs`` and relative paths (to the URDF file) as written.
- **Joints**: ``revolute`` (limits [rad]), ``continuous``, ``prismatic`` (limits [m]), ``fixed``,
  ``floating`` (a free joint, only below the root) and ``spherical`` (PyBullet's extension: a ball).
  ``origin`` is the joint frame in the parent link frame, ``axis`` (default 1 0 0) in the joint frame.
  ``<limit lower upper>`` with lower > upper means no limit (Bullet's convention, with a warning);
  ``effort`` / ``velocity`` become the dof's effort and velocity limits (0 or absent: none);
  ``<dynamics damping friction>`` its passive damping and Coulomb friction; ``<mimic joint multiplier
  offset>`` a declared coupling (``Model.joint_mimic_*``, applied by the FeatherstoneSolver). ``planar``
  is refused.
- **Base**: the root link is attached to the world at ``xform`` by a fixed joint (``floating=False``)
  or a free joint (``floating=True``, whose ``joint_q`` is the root's pose relative to ``xform``).
- **Collisions**: no two links of the robot collide unless ``enable_self_collisions=True``; links joined
  by a joint never do.
- **Tolerated as PyBullet tolerates them**, each with a warning: bytes after ``</robot>`` (a stray NUL),
  white space before the XML declaration, numbers with trailing junk (``"0.07,"``, ``"1.57."``), vectors
  with extra entries (the first ones are used), repeated elements (the first is used), and xacro's
  ``$(optenv NAME default)`` left unexpanded (the environment's value or the default).

Not imported, warned about once per kind: ``<transmission>``, ``<gazebo>``, ``<safety_controller>``,
``<calibration>``, ``<joint_properties>``, other ``<contact>`` entries. Every error is a
:class:`UrdfError` naming the file, the element (link or joint name) and what is wrong.
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET

import numpy as np

from ..transforms import IDENTITY, quat_from_rpy, quat_to_matrix
from .meshes import MESH_READERS, MeshError, read_obj, read_stl  # noqa: F401  (read_obj, read_stl: public here too)
from .robot import Geom, Joint, Link, RobotDescription, RobotImport, Warner, add_robot


class UrdfError(ValueError):
    """A URDF file (or a mesh it references) that cannot be imported; the message names file and element."""


UrdfImport = RobotImport  # what add_urdf returns (the name earlier versions used)

_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_XACRO = re.compile(r"\$\((optenv|env)\s+(\S+)\s*([^)]*)\)")


# ---------------------------------------------------------------------------------------------- parsing helpers
class _Reader:
    """Attribute parsing that names the file and the element in every error, tolerant where PyBullet is."""

    def __init__(self, path: str, warner: Warner):
        self.path, self.warner = path, warner

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
        written = text
        if "$(" in text:
            text = _XACRO.sub(lambda m: os.environ.get(m.group(2), m.group(3) if m.group(1) == "optenv" else ""),
                              text)
            self.warner.add("unexpanded xacro substitution", f"{where} <{el.tag} {name}=\"{written}\">",
                            "read with the environment's value or the default given", verb="resolved")
        values, junk = [], False
        for tok in text.split():
            try:
                values.append(float(tok))
            except ValueError:
                m = _NUMBER.match(tok)
                if m is None:
                    self.fail(where, f"<{el.tag} {name}=\"{written}\"> is not {n} number(s)")
                values.append(float(m.group(0)))
                junk = True
        if len(values) < n or not all(math.isfinite(x) for x in values):
            self.fail(where, f"<{el.tag} {name}=\"{written}\"> must be {n} finite number(s)")
        if junk or len(values) > n:
            self.warner.add("malformed number", f"{where} <{el.tag} {name}=\"{written}\">", verb="tolerated",
                            why="read as PyBullet reads it (each number's numeric start, the first entries)")
        return tuple(values[:n])

    def number(self, el, name: str, where: str, default=None) -> float:
        return self.floats(el, name, 1, where, None if default is None else (default,))[0]

    def nonnegative(self, el, attrs, where: str) -> dict:
        """{key: value} of the ``(attribute, key)`` pairs in ``attrs`` that ``el`` gives, each refused if < 0."""
        values = {}
        for attr, key in attrs:
            if el.get(attr) is not None:
                v = self.number(el, attr, where)
                if v < 0.0:
                    self.fail(where, f"<{el.tag} {attr}> must be >= 0, got {v}")
                values[key] = v
        return values

    def one(self, el, tag: str, where: str):
        """The first ``<tag>`` child of ``el`` (a repeated one warns, as PyBullet uses the first)."""
        found = el.findall(tag)
        if len(found) > 1:
            self.warner.add(f"repeated <{tag}>", where, "the first one is used", verb="tolerated")
        return found[0] if found else None

    def origin(self, el, where: str) -> tuple:
        """(position, quaternion) of the ``<origin>`` child of ``el`` (the identity when absent)."""
        o = self.one(el, "origin", where)
        if o is None:
            return IDENTITY
        xyz = self.floats(o, "xyz", 3, where, (0.0, 0.0, 0.0))
        rpy = self.floats(o, "rpy", 3, where, (0.0, 0.0, 0.0))
        return xyz, quat_from_rpy(*rpy)


def _read_xml(path: str, warner: Warner):
    with open(path, "rb") as f:
        data = f.read()
    start = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if len(start) != len(data) and start.startswith(b"<?xml") and not data.startswith(b"<?xml"):
        warner.add("white space before the XML declaration", "file start", "skipped", verb="tolerated")
    data = start
    end = data.rfind(b"</robot>")
    if end >= 0 and data[end + len(b"</robot>"):].strip(b" \t\r\n"):
        warner.add("bytes after </robot>", f"{len(data) - end - 8} bytes", "ignored", verb="tolerated")
        data = data[:end + len(b"</robot>")]
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        raise UrdfError(f"{path}: not well-formed XML: {e}") from None


def resolve_mesh_path(filename: str, urdf_dir: str, package_paths=()) -> tuple:
    """(found path or None, [paths tried]) for a URDF mesh ``filename`` (see the module docstring)."""
    if filename.startswith("package://"):
        pkg, _, rel = filename[len("package://"):].partition("/")
        tried = []
        folder = os.path.abspath(urdf_dir)
        while True:  # the URDF file's ancestors: ROS packages hold their robots' files
            if os.path.basename(folder) == pkg:
                tried.append(os.path.join(folder, rel))
            tried.append(os.path.join(folder, pkg, rel))
            if _package_name(folder) == pkg:
                tried.append(os.path.join(folder, rel))
            up = os.path.dirname(folder)
            if up == folder:
                break
            folder = up
        for folder in package_paths:
            folder = os.path.expanduser(os.fspath(folder))
            tried.append(os.path.join(folder, pkg, rel))
            if os.path.basename(os.path.normpath(folder)) == pkg:  # the package folder itself
                tried.append(os.path.join(folder, rel))
    elif filename.startswith("file://"):
        tried = [filename[len("file://"):]]
    elif os.path.isabs(filename):
        tried = [filename]
    else:  # relative to the file, then to its ancestors (PyBullet searches them too)
        tried, folder = [], os.path.abspath(urdf_dir)
        while True:
            tried.append(os.path.join(folder, filename))
            up = os.path.dirname(folder)
            if up == folder:
                break
            folder = up
    return next((p for p in tried if os.path.isfile(p)), None), tried


def _package_name(folder: str):
    xml = os.path.join(folder, "package.xml")
    if not os.path.isfile(xml):
        return None
    try:
        name = ET.parse(xml).getroot().find("name")
    except ET.ParseError:
        return None
    return None if name is None else (name.text or "").strip()


# ---------------------------------------------------------------------------------------------- import
_JOINT_KINDS = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "fixed": "fixed",
                "floating": "free", "spherical": "ball", "planar": None}
_IGNORED = {"transmission": "actuator transmissions are not modelled", "gazebo": "Gazebo settings",
            "safety_controller": "", "calibration": "", "joint_properties": "not a URDF element"}


def add_urdf(builder, path, xform=None, floating: bool = False, package_paths=(), density: float = 1000.0,
             joint_target_ke=0.0, joint_target_kd=0.0, limit_ke=None, limit_kd=None, merge_fixed: bool = True,
             enable_self_collisions: bool = False, load_visuals: bool = True,
             intermediate_mass_fraction: float = 0.1, **shape_props) -> RobotImport:
    """Add the robot described by the URDF file ``path`` to ``builder``; see the module docstring.

    Args:
        xform: pose of the root link in world, ``(position [m], quaternion (x, y, z, w))``; identity if None.
        floating: attach the root link with a free joint (True) or weld it to the world (False).
        package_paths: folders searched for ``package://`` meshes after the file's own ancestors.
        density: [kg/m^3] of collision geometry, for links without ``<inertial>``.
        joint_target_ke, joint_target_kd: drive gains ([N m/rad], [N m s/rad] or [N/m], [N s/m]): a
            number for every revolute / prismatic joint, or a dict joint name -> gain (others 0).
        limit_ke, limit_kd: joint-limit stiffness and damping (None: the builder's defaults).
        merge_fixed: fold links joined by fixed joints into their parents (their frames stay named).
        enable_self_collisions: let the robot's links collide with each other (never adjacent ones).
        load_visuals: read ``<visual>`` geometry for the USD recorder.
        intermediate_mass_fraction: see ``inertia.io.robot`` (massless links on moving joints).
        **shape_props: shape properties (``ke``, ``kd``, ``mu``, ``restitution``, collision filters)
            given to every collision shape; see ``inertia.builder.shapes.SHAPE_PROPERTIES``.
    Returns:
        :class:`inertia.io.robot.RobotImport`: names -> body, joint, shape indices, frames, coordinate slices.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UrdfError(f"{path}: URDF file not found")
    if "label" in shape_props:
        raise TypeError("add_urdf names shapes after their links; do not pass label=")
    warner = Warner(path)
    robot = parse_urdf(path, floating=floating, package_paths=package_paths, load_visuals=load_visuals,
                       warner=warner)
    base = None
    if xform is not None:
        from ..builder.checks import transform

        t = transform(xform, "add_urdf xform")
        base = (tuple(float(v) for v in t.p), tuple(float(v) for v in t.q))
    try:
        result = add_robot(builder, robot, xform=base, merge_fixed=merge_fixed, density=density,
                           self_collisions=enable_self_collisions, target_ke=joint_target_ke,
                           target_kd=joint_target_kd, limit_ke=limit_ke, limit_kd=limit_kd,
                           intermediate_mass_fraction=intermediate_mass_fraction, shape_props=shape_props,
                           warner=warner)
    except (ValueError, TypeError, IndexError) as e:
        msg = str(e)
        raise UrdfError(msg if msg.startswith(path) else f"{path}: {msg}") from e
    finally:
        warner.flush()
    return result


def parse_urdf(path: str, floating: bool = False, package_paths=(), load_visuals: bool = True,
               warner: Warner | None = None) -> RobotDescription:
    """The :class:`inertia.io.robot.RobotDescription` of a URDF file (links parents first)."""
    warner = warner or Warner(path)
    r = _Reader(path, warner)
    robot = _read_xml(path, warner)
    if robot.tag != "robot":
        r.fail("root element", f"expected <robot>, got <{robot.tag}>")
    for tag, why in _IGNORED.items():
        for el in robot.iter(tag):
            warner.add(f"<{tag}>", el.get("name") or el.get("reference") or tag, why)
    known = {"robot": {"link", "joint", "material", *_IGNORED},
             "link": {"inertial", "visual", "collision", "contact"},
             "joint": {"parent", "child", "origin", "axis", "limit", "dynamics", "mimic", *_IGNORED}}
    for parent in (robot, *robot.findall("link"), *robot.findall("joint")):
        for el in parent:
            if isinstance(el.tag, str) and el.tag not in known[parent.tag]:
                warner.add(f"<{parent.tag}><{el.tag}>", parent.get("name") or parent.tag)
    colors = {m.get("name"): _color(r, m, "robot <material>") for m in robot.findall("material")}

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
        if jtype not in _JOINT_KINDS:
            r.fail(where, f"unknown type '{jtype}' (known: {', '.join(_JOINT_KINDS)})")
        if jtype == "planar":
            r.fail(where, "type 'planar' is not supported (the engine has no planar joint)")
        ends = []
        for tag in ("parent", "child"):
            e = r.one(el, tag, where)
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
    order, stack = [], [root]  # depth first in document order: each limb's bodies stay together
    while stack:
        link = stack.pop()
        order.append(link)
        stack.extend(el.find("child").get("link") for el in (joints[j] for j in reversed(children.get(link, []))))
    if len(order) != len(links):
        r.fail("robot", f"links {sorted(set(links) - set(order))} are not connected to the root '{root}'")

    urdf_dir = os.path.dirname(os.path.abspath(path))
    meshes = {}
    desc = RobotDescription(name=robot.get("name", ""), path=path, links={}, joints=[])
    for name in order:
        desc.links[name] = _link(r, links[name], name, urdf_dir, package_paths, meshes, colors, load_visuals)
    desc.joints.append(Joint(name=f"{root}_{'free' if floating else 'fixed'}_base", kind="free" if floating
                             else "fixed", parent=None, child=root, mergeable=False))
    for name in order[1:]:
        desc.joints.append(_joint(r, joints[child_joint[name]], child_joint[name], root))
    return desc


def _color(r: _Reader, material, where: str):
    c = material.find("color") if material is not None else None
    return None if c is None else tuple(min(max(v, 0.0), 1.0) for v in r.floats(c, "rgba", 4, where))


def _link(r: _Reader, el, name: str, urdf_dir, package_paths, meshes, colors, load_visuals) -> Link:
    where = f"link '{name}'"
    link = Link(name=name, inertial=_inertial(r, el, where))
    props = {}
    contact = el.find("contact")
    if contact is not None:
        for c in contact:
            if c.tag == "lateral_friction":
                props["mu"] = r.number(c, "value", where)
            elif c.tag == "restitution":
                props["restitution"] = r.number(c, "value", where)
            elif c.tag == "inertia_scaling" and link.inertial is not None:  # PyBullet scales the tensor by it
                m, com, i = link.inertial
                link.inertial = (m, com, i * r.number(c, "value", where))
            else:
                r.warner.add("<contact> entries other than lateral_friction and restitution", f"{where} <{c.tag}>")
    for k, c in enumerate(el.findall("collision")):
        g = _geometry(r, c, f"{where} <collision> {k}", urdf_dir, package_paths, meshes)
        if g is not None:
            g.name, g.props = c.get("name") or f"{name}_collision_{k}", dict(props)
            link.geoms.append(g)
    if load_visuals:
        for k, v in enumerate(el.findall("visual")):
            try:
                g = _geometry(r, v, f"{where} <visual> {k}", urdf_dir, package_paths, meshes, visual=True)
            except UrdfError as e:  # drawing only: PyBullet skips such visuals too
                r.warner.add("invalid visual geometry", str(e).split(": ", 1)[1], "skipped", verb="ignored")
                continue
            if g is None:
                continue
            g.name, g.collide, g.visual, g.mass_source = v.get("name") or f"{name}_visual_{k}", False, True, False
            m = v.find("material")
            if m is not None:
                g.color = _color(r, m, where) if m.find("color") is not None else colors.get(m.get("name"))
            link.geoms.append(g)
    return link


def _inertial(r: _Reader, link_el, where: str):
    """(mass, inertia (3, 3) in the link frame, com) of a link, or None without ``<inertial>``."""
    el = r.one(link_el, "inertial", where)
    if el is None:
        return None
    m_el = r.one(el, "mass", where)
    if m_el is None:
        r.fail(where, "<inertial> has no <mass>")
    mass = r.number(m_el, "value", where)
    if mass < 0.0:
        r.fail(where, f"<mass value> must be >= 0, got {mass}")
    i_el = r.one(el, "inertia", where)
    if i_el is None:
        r.fail(where, "<inertial> has no <inertia>")
    ixx, ixy, ixz, iyy, iyz, izz = (r.number(i_el, n, where, 0.0) for n in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    local = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    com, q = r.origin(el, where)
    rot = quat_to_matrix(q)
    eig = np.linalg.eigvalsh(local)
    if mass > 0.0 and eig.min() < -1e-9 * max(abs(eig).max(), 1e-30):
        r.fail(where, f"<inertia> must be positive (semi)definite, eigenvalues {np.round(eig, 12).tolist()}")
    return mass, np.asarray(com, dtype=np.float64), rot @ local @ rot.T


_SHAPE_TAGS = ("box", "sphere", "cylinder", "capsule", "plane", "mesh")


def _geometry(r: _Reader, el, where: str, urdf_dir, package_paths, meshes, visual: bool = False):
    geo = r.one(el, "geometry", where)
    shapes = [] if geo is None else [c for c in geo if c.tag in _SHAPE_TAGS]
    if geo is None or len(geo) == 0 or len(shapes) > 1:
        r.fail(where, "needs a <geometry> with exactly one shape inside")
    if len(shapes) != len(geo):  # PyBullet reads the shape it knows and skips the rest
        others = [c.tag for c in geo if c.tag not in _SHAPE_TAGS]
        if not shapes:
            r.fail(where, f"unsupported geometry <{others[0]}> (supported: {', '.join(_SHAPE_TAGS)})")
        r.warner.add("stray element in <geometry>", f"{where} <{others[0]}>", "skipped", verb="ignored")
    g = shapes[0]
    xf = r.origin(el, where)
    if g.tag == "box":
        size = r.floats(g, "size", 3, where)
        if min(size) <= 0.0:
            r.fail(where, f"box size must be > 0, got {size}")
        return Geom("box", xf, tuple(0.5 * v for v in size))
    if g.tag in ("sphere", "cylinder", "capsule"):
        radius = r.number(g, "radius", where)
        if radius <= 0.0:
            r.fail(where, f"{g.tag} radius must be > 0, got {radius}")
        if g.tag == "sphere":
            return Geom("sphere", xf, (radius, 0.0, 0.0))
        length = r.number(g, "length", where)
        if length < 0.0 or (length == 0.0 and g.tag == "cylinder"):
            r.fail(where, f"{g.tag} length must be > 0, got {length}")
        return Geom(g.tag, xf, (radius, 0.5 * length, 0.0))
    if g.tag == "plane":
        normal = np.array(r.floats(g, "normal", 3, where, (0.0, 0.0, 1.0)))
        if np.linalg.norm(normal) < 1e-9:
            r.fail(where, "<plane normal> must be non-zero")
        from ..transforms import compose, quat_from_matrix, rotation_between

        turn = quat_from_matrix(rotation_between((0.0, 0.0, 1.0), normal / np.linalg.norm(normal)))
        return Geom("plane", compose(xf, ((0.0, 0.0, 0.0), turn)), (0.0, 0.0, 0.0), mass_source=False)
    if g.tag == "mesh":
        filename = r.attr(g, "filename", where)
        scale = np.array(r.floats(g, "scale", 3, where, (1.0, 1.0, 1.0)))
        if scale.min() <= 0.0:
            r.fail(where, f"mesh scale must be > 0 on every axis, got {tuple(scale)}")
        found, tried = resolve_mesh_path(filename, urdf_dir, package_paths)
        if found is None:
            if visual:  # PyBullet draws nothing for it; the simulation does not need it
                r.warner.add("visual mesh not found", f"{where} '{filename}'", "skipped")
                return None
            r.fail(where, f"mesh '{filename}' not found; tried: {tried}")
        ext = os.path.splitext(found)[1].lower()
        if ext not in MESH_READERS:
            r.fail(where, f"mesh '{filename}': unsupported format '{ext}' (supported: {sorted(MESH_READERS)})")
        if found not in meshes:
            try:
                meshes[found] = MESH_READERS[ext](found)
            except MeshError as e:
                raise UrdfError(f"{r.path}: {where}: {e}") from e
        v, f = meshes[found]
        return Geom("mesh", xf, tuple(scale), v, f)



def _joint(r: _Reader, el, name: str, root: str) -> Joint:
    where = f"joint '{name}'"
    jtype = el.get("type")
    parent, child = el.find("parent").get("link"), el.find("child").get("link")
    j = Joint(name=name, kind=_JOINT_KINDS[jtype], parent=parent, child=child, origin=r.origin(el, where))
    if j.kind == "free" and parent != root:
        r.fail(where, f"floating joints are supported only with the root link as parent ('{root}'), not '{parent}'")
    if j.kind in ("fixed", "free", "ball"):
        return j
    axis_el = r.one(el, "axis", where)
    j.axis = r.floats(axis_el, "xyz", 3, where, (1.0, 0.0, 0.0)) if axis_el is not None else (1.0, 0.0, 0.0)
    if math.sqrt(sum(a * a for a in j.axis)) < 1e-9:
        r.fail(where, f"<axis xyz> must be non-zero, got {j.axis}")
    limit = r.one(el, "limit", where)
    if limit is not None:
        given = r.nonnegative(limit, (("effort", "effort_limit"), ("velocity", "velocity_limit")), where)
        j.dynamics.update((key, v) for key, v in given.items() if v > 0.0)  # 0 is how many files say "not given"
    if jtype == "continuous" and limit is not None and (limit.get("lower") or limit.get("upper")) is not None:
        r.warner.add("continuous joint with <limit lower upper>", where, "limited as PyBullet limits it",
                     verb="tolerated")
        jtype = "revolute"
    if jtype in ("revolute", "prismatic"):
        if limit is None:
            r.fail(where, f"a {jtype} joint needs a <limit> (use type 'continuous' for an unlimited hinge)")
        if limit.get("lower") is None and limit.get("upper") is None:  # PyBullet reads this as no limit
            r.warner.add("<limit> without lower and upper", where, "read as no limit (PyBullet's reading; the "
                         "URDF standard would lock the joint at 0)", verb="tolerated")
        else:
            lower, upper = r.number(limit, "lower", where, 0.0), r.number(limit, "upper", where, 0.0)
            if lower > upper:
                r.warner.add("<limit> with lower > upper", f"{where} ({lower}, {upper})",
                             "read as no limit (Bullet's convention)", verb="tolerated")
            else:
                j.lower, j.upper = lower, upper
    dyn = r.one(el, "dynamics", where)
    if dyn is not None:
        j.dynamics.update(r.nonnegative(dyn, (("damping", "damping"), ("friction", "friction")), where))
    mimic = r.one(el, "mimic", where)
    if mimic is not None:
        j.mimic = (r.attr(mimic, "joint", where), r.number(mimic, "multiplier", where, 1.0),
                   r.number(mimic, "offset", where, 0.0))
    return j


__all__ = ["UrdfError", "UrdfImport", "add_urdf", "parse_urdf", "read_obj", "read_stl"]
