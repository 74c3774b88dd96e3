"""MJCF reading helpers: ``<include>`` expansion, ``<compiler>`` options, ``<default>`` classes, frames.

Split from :mod:`inertia.io.mjcf` (which walks the bodies); see that module for what is imported.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from ..transforms import quat_from_matrix, quat_mul, rotation_between


class MjcfError(ValueError):
    """An MJCF file (or a file it includes or references) that cannot be imported; names file and element."""


@dataclass
class Compiler:
    """The ``<compiler>`` options the importer follows (MuJoCo's defaults)."""

    degrees: bool = True  # angle="degree" (MuJoCo's default)
    eulerseq: str = "xyz"
    meshdir: str = ""
    inertiafromgeom: str = "auto"  # "auto", "true" or "false"
    autolimits: bool = True
    inertiagrouprange: tuple = (0, 5)
    settotalmass: float = -1.0
    boundmass: float = 0.0
    boundinertia: float = 0.0
    balanceinertia: bool = False


def read_xml(path: str):
    try:
        return ET.parse(path).getroot()
    except ET.ParseError as e:
        raise MjcfError(f"{path}: not well-formed XML: {e}") from None
    except OSError as e:
        raise MjcfError(f"{path}: cannot be read: {e}") from None


def expand_includes(root, path: str, seen=()):
    """Replace every ``<include file=...>`` by the children of that file's ``<mujoco>`` root, in place (files
    relative to the including model's folder, as MuJoCo resolves them)."""
    base = os.path.dirname(os.path.abspath(path))
    for parent in list(root.iter()):
        for k, child in enumerate(list(parent)):
            if child.tag != "include":
                continue
            name = child.get("file")
            if name is None:
                raise MjcfError(f"{path}: <include> is missing the attribute 'file'")
            inc = os.path.join(base, name)
            if inc in seen:
                raise MjcfError(f"{path}: <include file=\"{name}\"> includes itself")
            if not os.path.isfile(inc):
                raise MjcfError(f"{path}: <include file=\"{name}\">: {inc} not found")
            sub = read_xml(inc)
            if sub.tag != "mujoco":
                raise MjcfError(f"{inc}: an included file's root must be <mujoco>, got <{sub.tag}>")
            expand_includes(sub, inc, tuple(seen) + (inc,))
            parent.remove(child)
            for j, e in enumerate(list(sub)):
                parent.insert(k + j, e)
    return root


def compiler_options(root, path: str) -> Compiler:
    c = Compiler()
    for el in root.iter("compiler"):
        a = el.attrib
        if a.get("coordinate", "local") != "local":
            raise MjcfError(f"{path}: <compiler coordinate=\"{a['coordinate']}\"> is not supported (only 'local', "
                            "as in MuJoCo since 2.3.3)")
        if "angle" in a:
            if a["angle"] not in ("degree", "radian"):
                raise MjcfError(f"{path}: <compiler angle=\"{a['angle']}\"> must be 'degree' or 'radian'")
            c.degrees = a["angle"] == "degree"
        if "eulerseq" in a:
            seq = a["eulerseq"]
            if len(seq) != 3 or any(ch not in "xyzXYZ" for ch in seq):
                raise MjcfError(f"{path}: <compiler eulerseq=\"{seq}\"> must be 3 of x, y, z, X, Y, Z")
            c.eulerseq = seq
        c.meshdir = a.get("meshdir", a.get("assetdir", c.meshdir))
        if "inertiafromgeom" in a:
            c.inertiafromgeom = a["inertiafromgeom"]
        if "autolimits" in a:
            c.autolimits = a["autolimits"] == "true"
        if "inertiagrouprange" in a:
            lo, hi = (int(float(v)) for v in a["inertiagrouprange"].split())
            c.inertiagrouprange = (lo, hi)
        for key in ("settotalmass", "boundmass", "boundinertia"):
            if key in a:
                setattr(c, key, float(a[key]))
        c.balanceinertia = a.get("balanceinertia", "false") == "true" or c.balanceinertia
    return c


# elements whose defaults one class holds; the actuator shortcuts share one set (as in MuJoCo)
_ACTUATORS = ("general", "motor", "position", "velocity", "intvelocity", "damper", "cylinder", "muscle",
              "adhesion")


def default_classes(root) -> dict:
    """class name -> {element tag -> {attribute: value}}, each class holding its ancestors' values."""
    classes = {}

    def walk(el, inherited, name):
        own = {tag: dict(attrs) for tag, attrs in inherited.items()}
        for child in el:
            if child.tag == "default":
                continue
            tag = "actuator" if child.tag in _ACTUATORS else child.tag
            own.setdefault(tag, {}).update(child.attrib)
        classes[name] = own
        for child in el:
            if child.tag == "default":
                walk(child, own, child.get("class", "main"))

    top = [d for d in root if d.tag == "default"]
    classes["main"] = {}
    for d in top:
        walk(d, classes.get("main", {}), d.get("class", "main"))
    return classes


def attributes(el, classes: dict, childclass: str, tag: str | None = None) -> dict:
    """``el``'s attributes over its class defaults (its own ``class``, else the nearest ``childclass``)."""
    cls = el.get("class", childclass)
    if cls not in classes:
        raise KeyError(cls)
    tag = tag or ("actuator" if el.tag in _ACTUATORS else el.tag)
    out = dict(classes[cls].get(tag, {}))
    out.update(el.attrib)
    return out


def numbers(text: str, n: int | None, what: str) -> tuple:
    try:
        v = tuple(float(t) for t in text.split())
    except ValueError:
        raise MjcfError(f"{what}=\"{text}\" is not a list of numbers") from None
    if n is not None and len(v) != n:
        raise MjcfError(f"{what}=\"{text}\" must have {n} numbers, got {len(v)}")
    if not all(math.isfinite(x) for x in v):
        raise MjcfError(f"{what}=\"{text}\" must be finite")
    return v


def _axis_angle(axis, angle):
    axis = np.asarray(axis, dtype=np.float64)
    n = np.linalg.norm(axis)
    if n < 1e-12:
        raise MjcfError(f"rotation axis {tuple(axis)} is zero")
    s = math.sin(angle / 2.0)
    return tuple(float(x) for x in axis / n * s) + (math.cos(angle / 2.0),)


def orientation(a: dict, c: Compiler, what: str) -> tuple:
    """(x, y, z, w) quaternion from MJCF's quat / axisangle / xyaxes / zaxis / euler attributes (identity if none)."""
    given = [k for k in ("quat", "axisangle", "xyaxes", "zaxis", "euler") if k in a]
    if len(given) > 1:
        raise MjcfError(f"{what}: give one orientation, not {given}")
    unit = math.pi / 180.0 if c.degrees else 1.0
    if not given:
        return (0.0, 0.0, 0.0, 1.0)
    k = given[0]
    if k == "quat":
        w, x, y, z = numbers(a[k], 4, f"{what} quat")
        n = math.sqrt(w * w + x * x + y * y + z * z)
        if n < 1e-12:
            raise MjcfError(f"{what}: quat=\"{a[k]}\" is zero")
        return (x / n, y / n, z / n, w / n)
    if k == "axisangle":
        v = numbers(a[k], 4, f"{what} axisangle")
        return _axis_angle(v[:3], v[3] * unit)
    if k == "xyaxes":
        v = np.array(numbers(a[k], 6, f"{what} xyaxes"))
        x = v[:3] / np.linalg.norm(v[:3])
        y = v[3:] - x * (x @ v[3:])
        if np.linalg.norm(y) < 1e-12:
            raise MjcfError(f"{what}: xyaxes=\"{a[k]}\" has parallel axes")
        y /= np.linalg.norm(y)
        return quat_from_matrix(np.stack([x, y, np.cross(x, y)], axis=1))
    if k == "zaxis":
        z = np.array(numbers(a[k], 3, f"{what} zaxis"))
        if np.linalg.norm(z) < 1e-12:
            raise MjcfError(f"{what}: zaxis is zero")
        return quat_from_matrix(rotation_between((0.0, 0.0, 1.0), z / np.linalg.norm(z)))
    angles = numbers(a[k], 3, f"{what} euler")
    q = np.array([0.0, 0.0, 0.0, 1.0])
    for ch, ang in zip(c.eulerseq, angles):
        r = _axis_angle(np.eye(3)["xyz".index(ch.lower())], ang * unit)
        q = quat_mul(q, r) if ch.islower() else quat_mul(r, q)  # lower case: axes that turn with the frame
    return tuple(float(v) for v in q / np.linalg.norm(q))


def frame(a: dict, c: Compiler, what: str) -> tuple:
    """(pos, quat) of an element's ``pos`` and orientation attributes."""
    pos = numbers(a["pos"], 3, f"{what} pos") if "pos" in a else (0.0, 0.0, 0.0)
    return pos, orientation(a, c, what)


def fromto_frame(a: dict, what: str):
    """(pos, quat, half length) of a ``fromto`` segment: the frame's z axis runs from the first point to the second."""
    v = np.array(numbers(a["fromto"], 6, f"{what} fromto"))
    d = v[3:] - v[:3]
    n = float(np.linalg.norm(d))
    if n < 1e-12:
        raise MjcfError(f"{what}: fromto=\"{a['fromto']}\" has zero length")
    q = quat_from_matrix(rotation_between((0.0, 0.0, 1.0), d / n))
    return tuple(0.5 * (v[:3] + v[3:])), q, 0.5 * n
