"""MJCF import: a MuJoCo XML model (bodies, geoms, joints, actuators) into a :class:`ModelBuilder`.

    r = builder.add_mjcf("ant.xml")
    r.bodies["torso"], r.joints["hip_1"], r.joint_q["hip_1"], r.extra["actuators"]

What is read (MuJoCo's defaults and semantics; shared steps in ``inertia.io.robot``):

- ``<include file>`` (relative to the including file), ``<compiler>``: ``angle``, ``eulerseq``, ``meshdir`` /
  ``assetdir``, ``inertiafromgeom`` (auto / true / false), ``inertiagrouprange``, ``autolimits``,
  ``settotalmass``, ``boundmass``, ``boundinertia``; ``coordinate="global"`` is refused. ``<default>``
  classes, nested, with ``class`` and ``childclass``.
- **Bodies** (``pos`` and ``quat`` / ``axisangle`` / ``xyaxes`` / ``zaxis`` / ``euler``; ``<frame>``) become
  bodies; a body without joints is welded to its parent and folds into it (into the world: static shapes).
  ``<inertial>`` (``pos``, orientation, ``mass``, ``diaginertia`` or ``fullinertia``) or the geoms' mass
  properties (``density``, default 1000 kg/m^3, or ``mass``; geoms in ``inertiagrouprange``).
- **Joints**: ``hinge`` (``range`` in the compiler's angle unit), ``slide``, ``ball``, ``free`` /
  ``<freejoint>`` (its ``joint_q`` is the body's pose in the world, MuJoCo's qpos); ``pos``, ``axis``,
  ``range`` with ``limited`` (true / false / auto with ``autolimits``), ``armature``, ``damping``,
  ``frictionloss`` (-> joint friction), ``actuatorfrcrange`` (-> effort limit), ``stiffness`` (a passive
  spring to 0: imported as the drive stiffness toward ``joint_target_pos`` = 0 when no position actuator
  drives the joint and ``springref`` = ``ref``). ``ref``: MuJoCo's qpos0; a body is where the file puts it
  when MuJoCo's coordinate equals ``ref``, so this import's coordinate is MuJoCo's minus ``ref``
  (``r.extra["joint_ref"]``; limits shifted alike). A body with several joints becomes a chain: each joint
  but the last gets an intermediate body named ``"<body>:<joint>"`` (see ``inertia.io.robot`` for their mass).
- **Geoms**: ``sphere``, ``capsule``, ``cylinder``, ``box`` (``fromto`` too), ``ellipsoid`` (collides as a
  mesh; exact mass properties), ``plane`` (static only), ``mesh`` (OBJ, STL, .dae with the collada extra;
  asset ``scale``). ``contype`` / ``conaffinity`` become collision groups and masks that collide exactly
  the pairs MuJoCo's rule ``(contype1 & conaffinity2) | (contype2 & conaffinity1)`` collides, and shapes
  of other sources (a ground plane added later) meet what a MuJoCo geom with contype = conaffinity = 1
  would; a parent body and its child never collide (MuJoCo's filterparent); ``<contact><exclude>``. Geoms
  of groups 0-2 are drawn (visuals for the USD recorder, ``rgba`` or the material's colour); a geom with
  ``contype = conaffinity = 0`` is visual only. ``friction``'s first entry -> ``mu``. Sites are named frames.
- **Actuators** on joints: ``motor`` -> the dof's effort limit ``|gear| max|ctrlrange|`` (when
  ``ctrllimited``) and ``|gear| max|forcerange|`` (when ``forcelimited``); ``position`` (``kp``, ``kv``) and
  ``velocity`` (``kv``) -> drive gains ``kp gear^2`` / ``kv gear^2`` (targets in joint units);
  ``r.extra["actuators"]`` lists them (joint, kind, gear, ctrlrange).

Not imported, warned about once per kind: tendons, equality constraints, other actuators and actuator
targets, sensors, keyframes, ``<option>`` (gravity is the builder's; timestep and integrator are the
solver's), contact pairs, ball-joint ranges, MuJoCo's solver parameters (``solref``, ``solimp``,
``margin``, ``condim``, ...), and any attribute not listed here. Rendering-only data (lights, cameras,
textures, ``<visual>``, ``<statistic>``) is skipped silently. Errors are :class:`MjcfError` naming file
and element.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..transforms import IDENTITY, compose, quat_to_matrix
from .meshes import MESH_READERS, MeshError
from .mjcf_spec import (MjcfError, attributes, compiler_options, default_classes, expand_includes, fromto_frame,
                        frame, numbers, orientation, read_xml)
from .robot import Geom, Joint, Link, RobotDescription, RobotImport, Warner, add_robot, link_mass_properties

_SILENT = {"light", "camera", "texture", "skybox", "visual", "statistic", "size", "custom", "extension"}
_JOINT_KINDS = {"hinge": "revolute", "slide": "prismatic", "ball": "ball", "free": "free"}
# attributes read here, and those skipped silently (names, rendering), per element
_USED = {
    "body": {"name", "pos", "quat", "axisangle", "xyaxes", "zaxis", "euler", "childclass"},
    "frame": {"name", "pos", "quat", "axisangle", "xyaxes", "zaxis", "euler", "childclass"},
    "joint": {"name", "class", "type", "pos", "axis", "range", "limited", "ref", "armature", "damping",
              "frictionloss", "stiffness", "springref", "actuatorfrcrange", "actuatorfrclimited", "group"},
    "geom": {"name", "class", "type", "size", "fromto", "pos", "quat", "axisangle", "xyaxes", "zaxis", "euler",
             "mesh", "density", "mass", "contype", "conaffinity", "group", "friction", "rgba", "material"},
    "site": {"name", "class", "type", "size", "fromto", "pos", "quat", "axisangle", "xyaxes", "zaxis", "euler",
             "rgba", "material", "group"},
    "inertial": {"pos", "quat", "axisangle", "xyaxes", "zaxis", "euler", "mass", "diaginertia", "fullinertia"},
    "actuator": {"name", "class", "joint", "gear", "ctrlrange", "ctrllimited", "forcerange", "forcelimited", "kp",
                 "kv", "group"},
}
_SOLVER = {"solref", "solimp", "margin", "gap", "condim", "priority", "solmix", "solreflimit", "solimplimit",
           "solreffriction", "solimpfriction", "user"}


def add_mjcf(builder, path, xform=None, enable_self_collisions: bool | None = None, load_visuals: bool = True,
             joint_target_ke=None, joint_target_kd=None, limit_ke=None, limit_kd=None,
             intermediate_mass_fraction: float = 0.1, **shape_props) -> RobotImport:
    """Add the MJCF model ``path`` to ``builder``; see the module docstring.

    Args:
        xform: pose of the model's world frame in the builder's world (identity if None).
        enable_self_collisions: None follows the file (contype / conaffinity, exclusions); False: no two
            bodies of the model collide; True: as None.
        load_visuals: keep the drawn geoms as visuals for the USD recorder.
        joint_target_ke, joint_target_kd: a dict joint name -> drive gain, over the file's (position /
            velocity actuators); a number applies to the joints the file gives no gain.
        limit_ke, limit_kd: joint-limit stiffness and damping (None: the builder's defaults).
        intermediate_mass_fraction: see ``inertia.io.robot`` (intermediate bodies of multi-joint bodies).
        **shape_props: shape properties for every collision shape (over the file's).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MjcfError(f"{path}: MJCF file not found")
    warner = Warner(path)
    try:
        desc, extra = parse_mjcf(path, load_visuals=load_visuals, warner=warner, gravity=builder.gravity)
        base = None
        if xform is not None:
            from ..builder.checks import transform

            t = transform(xform, "add_mjcf xform")
            base = (tuple(float(v) for v in t.p), tuple(float(v) for v in t.q))
        result = add_robot(builder, desc, xform=base, merge_fixed=True, density=1000.0,
                           self_collisions=enable_self_collisions is not False,
                           target_ke=0.0 if joint_target_ke is None else joint_target_ke,
                           target_kd=0.0 if joint_target_kd is None else joint_target_kd, limit_ke=limit_ke,
                           limit_kd=limit_kd, intermediate_mass_fraction=intermediate_mass_fraction,
                           shape_props=shape_props, warner=warner)
    except MjcfError:
        raise
    except (ValueError, TypeError, IndexError, KeyError) as e:
        msg = str(e).strip("'\"")
        raise MjcfError(msg if msg.startswith(path) else f"{path}: {msg}") from e
    finally:
        warner.flush()
    result.extra.update(extra)
    return result


class _Parser:
    def __init__(self, path, root, load_visuals, warner):
        self.path, self.root, self.load_visuals, self.warner = path, root, load_visuals, warner
        self.c = compiler_options(root, path)
        self.classes = default_classes(root)
        self.desc = RobotDescription(name=root.get("model", ""), path=path, links={}, joints=[])
        self.meshes, self.materials = {}, {}
        self.joint_ref, self.stiffness, self.counter = {}, {}, 0
        self.geoms = []  # every collision Geom, for the collision bits

    def fail(self, where, what):
        raise MjcfError(f"{self.path}: {where}: {what}")

    def attrs(self, el, childclass, tag=None):
        try:
            a = attributes(el, self.classes, childclass, tag)
        except KeyError as e:
            self.fail(f"<{el.tag} {el.get('name', '')}>", f"class {e} is not defined")
        used = _USED.get(tag or el.tag, set())
        for k in a:
            if k in _SOLVER:
                self.warner.add("MuJoCo solver parameters", f"<{el.tag} {k}>")
            elif k not in used and k != "class":
                self.warner.add(f"<{el.tag} {k}>", el.get("name") or el.tag)
        return a

    def num(self, a, key, default, where):
        try:
            return float(a.get(key, default))
        except ValueError:
            self.fail(where, f"{key}=\"{a[key]}\" is not a number")

    # ---------------------------------------------------------------- assets
    def assets(self):
        for asset in self.root.iter("asset"):
            for el in asset:
                if el.tag == "mesh":
                    self.mesh_asset(el)
                elif el.tag == "material":
                    a = attributes(el, self.classes, "main")
                    if "rgba" in a:
                        self.materials[a.get("name")] = numbers(a["rgba"], 4, f"<material {a.get('name')}> rgba")
                elif el.tag not in ("texture", "skin"):
                    self.warner.add(f"<{el.tag}> asset", el.get("name") or el.tag)

    def mesh_asset(self, el):
        a = attributes(el, self.classes, el.get("class", "main"), "mesh")
        where = f"<mesh {a.get('name') or a.get('file')}>"
        if "file" not in a:
            self.warner.add("<mesh> without a file (inline vertices)", where)
            return
        name = a.get("name") or os.path.splitext(os.path.basename(a["file"]))[0]
        found = os.path.join(os.path.dirname(os.path.abspath(self.path)), self.c.meshdir, a["file"])
        ext = os.path.splitext(found)[1].lower()
        if not os.path.isfile(found):
            self.fail(where, f"mesh file not found: {found}")
        if ext not in MESH_READERS:
            self.fail(where, f"unsupported format '{ext}' (supported: {sorted(MESH_READERS)})")
        try:
            v, f = MESH_READERS[ext](found)
        except MeshError as e:
            raise MjcfError(f"{self.path}: {where}: {e}") from e
        scale = np.array(numbers(a["scale"], 3, f"{where} scale")) if "scale" in a else np.ones(3)
        if "refpos" in a or "refquat" in a:
            self.warner.add("<mesh refpos/refquat>", where)
        self.meshes[name] = (v, f, tuple(float(x) for x in scale))

    # ---------------------------------------------------------------- bodies
    def parse(self):
        world = Link("world")
        self.desc.links["world"] = world
        self.desc.joints.append(Joint(name="world", kind="fixed", parent=None, child="world"))
        for wb in self.root.iter("worldbody"):
            self.children(wb, "world", world, "main", IDENTITY, None)

    def children(self, el, link_name, link, childclass, offset, parent_body):
        for child in el:
            tag = child.tag
            if tag == "body":
                self.body(child, link_name, childclass, offset, parent_body)
            elif tag == "frame":
                a = self.attrs(child, childclass, "frame")
                sub = compose(offset, frame(a, self.c, f"<frame {a.get('name', '')}>"))
                self.children(child, link_name, link, a.get("childclass", childclass), sub, parent_body)
            elif tag == "geom":
                g = self.geom(child, childclass, offset)
                if g is not None:
                    link.geoms.append(g)
            elif tag == "site":
                a = self.attrs(child, childclass, "site")
                if a.get("name"):
                    where = f"<site {a['name']}>"
                    if "fromto" in a:
                        p, q, _ = fromto_frame(a, where)
                        link.frames[a["name"]] = compose(offset, (p, q))
                    else:
                        link.frames[a["name"]] = compose(offset, frame(a, self.c, where))
            elif tag in ("inertial", "joint", "freejoint"):
                continue  # read by body()
            elif tag not in _SILENT and isinstance(tag, str):
                self.warner.add(f"<{tag}>", child.get("name") or tag)

    def body(self, el, parent, childclass, offset, parent_body):
        a = self.attrs(el, childclass, "body")
        self.counter += 1
        name = a.get("name") or f"body_{self.counter}"
        where = f"body '{name}'"
        if name in self.desc.links:
            self.fail(where, "defined twice")
        for key in ("mocap", "gravcomp"):
            if key in el.attrib:
                self.warner.add(f"<body {key}>", name)
        cls = a.get("childclass", childclass)
        pose = compose(offset, frame(a, self.c, where))
        joints = [j for j in el if j.tag in ("joint", "freejoint")]
        prev, first = parent, True
        for k, jel in enumerate(joints):
            ja = self.attrs(jel, cls, "joint") if jel.tag == "joint" else dict(jel.attrib, type="free")
            jname = ja.get("name") or f"{name}_joint_{k}"
            last = k == len(joints) - 1
            child = name if last else f"{name}:{jname}"
            if not last:
                self.desc.links[child] = Link(child)
            j = self.joint(ja, jname, prev, child, pose if first else IDENTITY, parent == "world")
            if j.kind == "free" and (len(joints) > 1 or parent != "world"):
                self.fail(where, "a free joint must be the only joint of a body of the worldbody")
            self.desc.joints.append(j)
            prev, first = child, False
        if not joints:  # welded to its parent: folds into it (into the world: static)
            self.desc.joints.append(Joint(name=f"{name}_weld", kind="fixed", parent=parent, child=name,
                                          origin=pose))
        link = Link(name)
        self.desc.links[name] = link
        if parent_body is not None:
            self.desc.exclude.append((name, parent_body))  # MuJoCo's filterparent
        inertial = el.find("inertial")
        if inertial is not None and self.c.inertiafromgeom != "true":
            link.inertial = self.inertial(inertial, where)
        self.children(el, name, link, cls, IDENTITY, name)
        if self.c.inertiafromgeom == "false" and link.inertial is None:
            link.inertial = (0.0, np.zeros(3), np.zeros((3, 3)))
        for g in link.geoms:
            g.mass_source = g.mass_source and link.inertial is None

    def inertial(self, el, where):
        a = self.attrs(el, "main", "inertial")
        p, q = frame(a, self.c, f"{where} <inertial>")
        mass = self.num(a, "mass", None, where) if "mass" in a else self.fail(where, "<inertial> has no mass")
        if "fullinertia" in a:
            xx, yy, zz, xy, xz, yz = numbers(a["fullinertia"], 6, f"{where} fullinertia")
            local = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        elif "diaginertia" in a:
            local = np.diag(numbers(a["diaginertia"], 3, f"{where} diaginertia"))
        else:
            self.fail(where, "<inertial> needs diaginertia or fullinertia")
        r = quat_to_matrix(q)
        return mass, np.asarray(p, dtype=np.float64), r @ local @ r.T

    def joint(self, a, name, parent, child, origin, top):
        where = f"joint '{name}'"
        kind = a.get("type", "hinge")
        if kind not in _JOINT_KINDS:
            self.fail(where, f"unknown type '{kind}' (known: {', '.join(_JOINT_KINDS)})")
        kind = _JOINT_KINDS[kind]
        pos = numbers(a["pos"], 3, f"{where} pos") if "pos" in a and kind != "free" else (0.0, 0.0, 0.0)
        local = (pos, (0.0, 0.0, 0.0, 1.0))
        j = Joint(name=name, kind=kind, parent=parent, child=child, origin=compose(origin, local), child_origin=local,
                  absolute=True)
        if kind == "free":
            j.origin, j.child_origin = origin, IDENTITY
            return j
        unit = math.pi / 180.0 if (self.c.degrees and kind == "revolute") else 1.0
        for attr, key in (("armature", "armature"), ("damping", "damping"), ("frictionloss", "friction")):
            v = self.num(a, attr, 0.0, where)
            if v < 0.0:
                self.fail(where, f"{attr} must be >= 0, got {v}")
            j.dynamics[key] = v
        if a.get("actuatorfrclimited", "auto") != "false" and "actuatorfrcrange" in a:
            lo, hi = numbers(a["actuatorfrcrange"], 2, f"{where} actuatorfrcrange")
            j.dynamics["effort_limit"] = max(abs(lo), abs(hi))
        if kind == "ball":
            if "range" in a and a.get("limited", "auto") != "false":
                self.warner.add("ball joint range (cone limit)", name)
            return j
        axis = np.array(numbers(a.get("axis", "0 0 1"), 3, f"{where} axis"))
        if np.linalg.norm(axis) < 1e-12:
            self.fail(where, "axis is zero")
        j.axis = tuple(axis / np.linalg.norm(axis))
        ref = self.num(a, "ref", 0.0, where) * unit
        if ref:
            self.joint_ref[name] = ref
        limited = a.get("limited", "auto")
        if limited == "true" or (limited == "auto" and self.c.autolimits and "range" in a):
            if "range" not in a:
                self.fail(where, "limited=\"true\" needs a range")
            lo, hi = (v * unit for v in numbers(a["range"], 2, f"{where} range"))
            if lo > hi:
                self.fail(where, f"range lower {lo} > upper {hi}")
            j.lower, j.upper = lo - ref, hi - ref
        stiffness = self.num(a, "stiffness", 0.0, where)
        if stiffness:
            self.stiffness[name] = (stiffness, self.num(a, "springref", 0.0, where) * unit - ref, j)
        return j

    # ---------------------------------------------------------------- geoms
    def geom(self, el, childclass, offset):
        a = self.attrs(el, childclass, "geom")
        name = a.get("name", "")
        where = f"geom '{name or el.get('type', 'sphere')}'"
        kind = a.get("type", "mesh" if "mesh" in a else "sphere")
        if kind in ("hfield", "sdf"):
            self.warner.add(f"{kind} geom", name or kind)
            return None
        if kind not in ("sphere", "capsule", "cylinder", "box", "ellipsoid", "plane", "mesh"):
            self.fail(where, f"unknown type '{kind}'")
        size = numbers(a["size"], None, f"{where} size") if "size" in a else ()
        vertices = triangles = None
        if "fromto" in a and kind in ("capsule", "cylinder", "box", "ellipsoid"):
            p, q, half = fromto_frame(a, where)
            xf = compose(offset, (p, q))
            need = 1 if kind in ("capsule", "cylinder") else 2
            if len(size) < need:
                self.fail(where, f"a {kind} with fromto needs {need} size entries")
            s = (size[0], half, 0.0) if need == 1 else (size[0], size[1], half)
        else:
            xf = compose(offset, frame(a, self.c, where))
            need = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3, "plane": 0, "mesh": 0}[kind]
            if len(size) < need:
                self.fail(where, f"a {kind} needs {need} size entries, got {len(size)}")
            s = {"sphere": lambda: (size[0], 0.0, 0.0), "capsule": lambda: (size[0], size[1], 0.0),
                 "cylinder": lambda: (size[0], size[1], 0.0), "box": lambda: tuple(size[:3]),
                 "ellipsoid": lambda: tuple(size[:3]), "plane": lambda: (0.0, 0.0, 0.0),
                 "mesh": lambda: (1.0, 1.0, 1.0)}[kind]()
            if kind == "mesh":
                if a.get("mesh") not in self.meshes:
                    self.fail(where, f"mesh=\"{a.get('mesh')}\" names no <mesh> asset")
                vertices, triangles, s = self.meshes[a["mesh"]]
        positive = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3}.get(kind, 0)
        if positive and min(s[:positive]) <= 0.0:
            self.fail(where, f"size must be > 0, got {size}")
        group = int(self.num(a, "group", 0, where))
        contype, conaffinity = int(self.num(a, "contype", 1, where)), int(self.num(a, "conaffinity", 1, where))
        color = numbers(a["rgba"], 4, f"{where} rgba") if "rgba" in a else self.materials.get(a.get("material"))
        g = Geom(kind, xf, s, vertices, triangles, name=name, collide=(contype | conaffinity) != 0,
                 visual=self.load_visuals and 0 <= group <= 2,
                 mass_source=self.c.inertiagrouprange[0] <= group <= self.c.inertiagrouprange[1] and kind != "plane",
                 density=self.num(a, "density", 1000.0, where), color=color)
        if "mass" in a:
            g.mass = self.num(a, "mass", 0.0, where)
        if "friction" in a:
            g.props["mu"] = numbers(a["friction"], None, f"{where} friction")[0]
        if g.collide:
            g.props["_bits"] = (contype, conaffinity)
            self.geoms.append(g)
        return g if (g.collide or g.visual or g.mass_source) else None

    def collision_bits(self):
        """Collision groups and masks that reproduce MuJoCo's contype / conaffinity rule (module docstring)."""
        combos = sorted({g.props["_bits"] for g in self.geoms})
        meets = lambda x, y: bool((x[0] & y[1]) | (y[0] & x[1]))  # noqa: E731
        pairs = [(i, j) for i in range(len(combos)) for j in range(i, len(combos)) if meets(combos[i], combos[j])]
        lonely = [i for i in range(len(combos)) if not any(i in p for p in pairs)]
        if len(pairs) + len(lonely) > 30:
            self.warner.add("contype / conaffinity combinations", f"{len(combos)} kinds",
                            "too many for 30 collision bits: every geom collides with every other")
            for g in self.geoms:
                g.props.pop("_bits")
            return
        group, mask = [0] * len(combos), [0] * len(combos)
        for bit, (i, j) in enumerate(pairs, start=1):
            group[i] |= 1 << bit
            group[j] |= 1 << bit
            mask[i] |= 1 << bit
            mask[j] |= 1 << bit
        for bit, i in enumerate(lonely, start=1 + len(pairs)):
            group[i] |= 1 << bit  # a bit of its own: other sources' shapes (mask all) still find it
        for i, c in enumerate(combos):
            if meets(c, (1, 1)):
                mask[i] |= 1  # shapes of other sources are in group 1 (the builder's default)
        for g in self.geoms:
            i = combos.index(g.props.pop("_bits"))
            g.props["collision_group"], g.props["collision_mask"] = group[i], mask[i]

    # ---------------------------------------------------------------- model-wide
    def mass_scaling(self):
        """``settotalmass``, ``boundmass``, ``boundinertia``: every body's mass properties made explicit, then
        bounded and scaled as MuJoCo's compiler does."""
        c = self.c
        if c.settotalmass <= 0.0 and c.boundmass <= 0.0 and c.boundinertia <= 0.0:
            return
        props = {}
        for name, link in self.desc.links.items():
            if name != "world":
                m, com, i = link_mass_properties(link, 1000.0, self.warner, f"body '{name}'")
                if m > 0.0:
                    m = max(m, c.boundmass)
                    eig, vec = np.linalg.eigh(i)
                    i = vec @ np.diag(np.maximum(eig, c.boundinertia)) @ vec.T
                props[name] = (m, com, i)
        total = sum(p[0] for p in props.values())
        k = c.settotalmass / total if c.settotalmass > 0.0 and total > 0.0 else 1.0
        for name, (m, com, i) in props.items():
            self.desc.links[name].inertial = (m * k, com, i * k)

    def actuators(self):
        out = {}
        for section in self.root.iter("actuator"):
            for el in section:
                a = self.attrs(el, el.get("class", "main"), "actuator")
                name = a.get("name") or f"actuator_{len(out)}"
                where = f"<{el.tag} {name}>"
                jname = a.get("joint")
                if jname is None:
                    self.warner.add("actuator on a tendon, site or body", where)
                    continue
                j = next((j for j in self.desc.joints if j.name == jname and j.kind in ("revolute", "prismatic")), None)
                if j is None:
                    self.fail(where, f"joint=\"{jname}\" names no hinge or slide joint")
                if el.tag not in ("motor", "position", "velocity"):
                    self.warner.add(f"<{el.tag}> actuator", where)
                    continue
                gear = numbers(a.get("gear", "1"), None, f"{where} gear")[0]
                ctrl = numbers(a["ctrlrange"], 2, f"{where} ctrlrange") if "ctrlrange" in a else None
                ctrl_on = a.get("ctrllimited", "auto") == "true" or (a.get("ctrllimited", "auto") == "auto"
                                                                    and self.c.autolimits and ctrl is not None)
                force = numbers(a["forcerange"], 2, f"{where} forcerange") if "forcerange" in a else None
                force_on = a.get("forcelimited", "auto") == "true" or (a.get("forcelimited", "auto") == "auto"
                                                                      and self.c.autolimits and force is not None)
                limits = [j.dynamics.get("effort_limit", math.inf)]
                if force_on and force is not None:
                    limits.append(abs(gear) * max(abs(force[0]), abs(force[1])))
                if el.tag == "motor" and ctrl_on and ctrl is not None:
                    limits.append(abs(gear) * max(abs(ctrl[0]), abs(ctrl[1])))
                j.dynamics["effort_limit"] = min(limits)
                if el.tag == "position":
                    j.target_ke = self.num(a, "kp", 1.0, where) * gear * gear
                    j.target_kd = self.num(a, "kv", 0.0, where) * gear * gear or j.target_kd
                elif el.tag == "velocity":
                    j.target_kd = self.num(a, "kv", 1.0, where) * gear * gear
                out[name] = dict(kind=el.tag, joint=jname, gear=gear, ctrlrange=ctrl if ctrl_on else None)
        # passive springs to springref: a drive toward joint_target_pos = 0, where that is what they are
        for name, (k, springref, j) in self.stiffness.items():
            if j.target_ke is None and springref == 0.0:
                j.target_ke = k
                self.warner.add("joint stiffness", name, "a passive spring toward springref: imported as the drive "
                                "stiffness toward Control.joint_target_pos (0 = springref)", verb="mapped")
            else:
                self.warner.add("joint stiffness", name, "a position actuator or a springref other than ref "
                                "already sets the joint's drive")
        return out

    def top_level(self, gravity):
        for el in self.root:
            if el.tag == "contact":
                for c in el:
                    if c.tag == "exclude":
                        a, b = c.get("body1"), c.get("body2")
                        for x in (a, b):
                            if x not in self.desc.links:
                                self.fail(f"<exclude {a} {b}>", f"no body '{x}'")
                        self.desc.exclude.append((a, b))
                    else:
                        self.warner.add(f"<contact><{c.tag}>", c.get("name") or c.tag)
            elif el.tag == "option":
                g = numbers(el.get("gravity", "0 0 -9.81"), 3, "<option gravity>")
                if not np.allclose(g, gravity, atol=1e-6):
                    self.warner.add("<option gravity>", el.get("gravity", "0 0 -9.81"),
                                    f"the builder's gravity {tuple(gravity)} applies")
                if any(k != "gravity" for k in el.attrib) or len(el):
                    self.warner.add("<option> settings (timestep, integrator, ...)", "option",
                                    "choose them with the solver")
            elif el.tag in ("tendon", "equality", "sensor", "keyframe", "deformable", "flexcomp", "composite",
                            "replicate", "plugin"):
                self.warner.add(f"<{el.tag}>", el.tag)


def parse_mjcf(path: str, load_visuals: bool = True, warner: Warner | None = None, gravity=(0.0, 0.0, -9.81)):
    """(:class:`inertia.io.robot.RobotDescription`, extra) of an MJCF file; ``extra`` holds the actuators and
    the joint references."""
    warner = warner or Warner(path)
    root = read_xml(path)
    if root.tag != "mujoco":
        raise MjcfError(f"{path}: root element: expected <mujoco>, got <{root.tag}>")
    expand_includes(root, path, (os.path.abspath(path),))
    p = _Parser(path, root, load_visuals, warner)
    p.assets()
    p.parse()
    p.top_level(gravity)
    p.mass_scaling()
    actuators = p.actuators()
    p.collision_bits()
    return p.desc, {"actuators": actuators, "joint_ref": dict(p.joint_ref)}


__all__ = ["MjcfError", "add_mjcf", "parse_mjcf"]
