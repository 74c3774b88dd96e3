"""The build-time row of benchmarks/worlds.py: ``replicate`` + ``finalize`` of many copies of a 20-body robot,
the same bodies, shapes and joints in inertia and Newton (``robot_spec``)."""

from __future__ import annotations

import math
import statistics

import warp as wp

from bench_newton import import_newton
from bench_scenes import GROUND
from machine import now as _now
from timing import sync as _sync


# ------------------------------------------------------------------------------------ the 20-body robot
# A quadruped with a tail: torso box on a free joint; 4 legs of 4 capsule links on driven, limited revolute
# joints about y with a sphere foot on the last; a sphere head on a fixed joint; 2 capsule tail links on ball
# joints. Bodies are listed parent first. Each entry: (pose, shapes, joint) with shapes as
# (kind, local pose, size) and joint as (kind, parent, parent anchor, child anchor, options).
I = (0.0, 0.0, 0.0, 1.0)
ALONG_X = (0.0, math.sin(math.pi / 4), 0.0, math.cos(math.pi / 4))  # turns a capsule's z axis onto x


def robot_spec() -> list:
    links = [(((0.0, 0.0, 0.6), I), [("box", ((0.0, 0.0, 0.0), I), (0.3, 0.15, 0.05))], ("free", -1, None, None, {}))]
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        parent, anchor = 0, (0.25 * sx, 0.2 * sy, 0.0)
        for k in range(4):
            shapes = [("capsule", ((0.0, 0.0, 0.0), I), (0.03, 0.04))]
            if k == 3:
                shapes.append(("sphere", ((0.0, 0.0, -0.05), I), (0.03,)))
            drive = {"axis": (0.0, 1.0, 0.0), "target_ke": 10.0, "target_kd": 1.0, "limit_lower": -1.0,
                     "limit_upper": 1.0}
            links.append((((0.25 * sx, 0.2 * sy, 0.6 - 0.05 - 0.1 * k), I), shapes,
                          ("revolute", parent, anchor, (0.0, 0.0, 0.05), drive)))
            parent, anchor = len(links) - 1, (0.0, 0.0, -0.05)
    links.append((((0.35, 0.0, 0.65), I), [("sphere", ((0.0, 0.0, 0.0), I), (0.06,))],
                  ("fixed", 0, (0.35, 0.0, 0.05), (0.0, 0.0, 0.0), {})))
    parent, anchor = 0, (-0.3, 0.0, 0.0)
    for k in range(2):
        links.append((((-0.35 - 0.1 * k, 0.0, 0.6), I), [("capsule", ((0.0, 0.0, 0.0), ALONG_X), (0.02, 0.03))],
                      ("ball", parent, anchor, (0.05, 0.0, 0.0), {})))
        parent, anchor = len(links) - 1, (-0.05, 0.0, 0.0)
    return links


ROBOT_MATERIAL = {"density": 1000.0, **GROUND}


def robot_inertia():
    import inertia

    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    m = ROBOT_MATERIAL
    for pose, shapes, (kind, parent, pa, ca, opts) in robot_spec():
        body = b.add_body(xform=pose)
        for shape, xf, size in shapes:
            kw = {"xform": xf, "density": m["density"], "ke": m["ke"], "kd": m["kd"], "mu": m["mu"]}
            if shape == "box":
                b.add_shape_box(body, hx=size[0], hy=size[1], hz=size[2], **kw)
            elif shape == "capsule":
                b.add_shape_capsule(body, radius=size[0], half_height=size[1], **kw)
            else:
                b.add_shape_sphere(body, radius=size[0], **kw)
        if kind == "free":
            b.add_joint_free(body)
        elif kind == "revolute":
            b.add_joint_revolute(parent, body, parent_xform=(pa, I), child_xform=(ca, I), **opts)
        elif kind == "fixed":
            b.add_joint_fixed(parent, body, parent_xform=(pa, I), child_xform=(ca, I))
        else:
            b.add_joint_ball(parent, body, parent_xform=(pa, I), child_xform=(ca, I))
    return b


def robot_newton(newton):
    b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
    cfg = newton.ModelBuilder.ShapeConfig(**ROBOT_MATERIAL)
    joints = []

    def tf(p, q=I):
        return wp.transform(wp.vec3(*p), wp.quat(*q))

    for pose, shapes, (kind, parent, pa, ca, opts) in robot_spec():
        body = b.add_link(xform=tf(*pose))
        for shape, xf, size in shapes:
            if shape == "box":
                b.add_shape_box(body, xform=tf(*xf), hx=size[0], hy=size[1], hz=size[2], cfg=cfg)
            elif shape == "capsule":
                b.add_shape_capsule(body, xform=tf(*xf), radius=size[0], half_height=size[1], cfg=cfg)
            else:
                b.add_shape_sphere(body, xform=tf(*xf), radius=size[0], cfg=cfg)
        if kind == "free":
            joints.append(b.add_joint_free(body))
        elif kind == "revolute":
            o = dict(opts)
            joints.append(b.add_joint_revolute(parent, body, parent_xform=tf(pa), child_xform=tf(ca),
                                               axis=wp.vec3(*o.pop("axis")), **o))
        elif kind == "fixed":
            joints.append(b.add_joint_fixed(parent, body, parent_xform=tf(pa), child_xform=tf(ca)))
        else:
            joints.append(b.add_joint_ball(parent, body, parent_xform=tf(pa), child_xform=tf(ca)))
    b.add_articulation(joints)
    return b


def _build_inertia(robot, copies, spacing, device):
    import inertia

    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.add_ground_plane()
    b.replicate(robot, copies, spacing=spacing)
    return b


def _build_newton(robot, copies, spacing, device):
    newton, _ = import_newton()
    b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
    b.add_ground_plane()
    b.replicate(robot, copies, spacing=(spacing, spacing, 0.0))
    return b


def time_robot_build(engine: str, copies: int, repeats: int, device, spacing: float = 2.0) -> dict:
    """``repeats`` builds of: a builder with a ground plane, ``replicate`` of the robot, ``finalize``; the
    figures of the build with the median total (the lower middle one for an even count) and every sample."""
    if engine == "newton":
        newton, err = import_newton()
        if newton is None:
            raise RuntimeError(err)
        robot, build = robot_newton(newton), _build_newton
    else:
        robot, build = robot_inertia(), _build_inertia
    samples = []
    for _ in range(repeats):
        t0 = _now()
        b = build(robot, copies, spacing, device)
        t1 = _now()
        m = b.finalize(device=device)
        _sync(device)
        samples.append((t1 - t0, _now() - t1))
        counts = {"bodies": m.body_count, "shapes": m.shape_count, "joints": m.joint_count,
                  "worlds": model_worlds(m),
                  "robot_bodies": robot.body_count}
        del m, b
    total = [a + b for a, b in samples]
    k = total.index(statistics.median_low(total))
    return {"engine": engine, "copies": copies, "counts": counts, "total_s": total[k], "replicate_s": samples[k][0],
            "finalize_s": samples[k][1], "samples_s": [[round(a, 4), round(b, 4)] for a, b in samples]}


def model_worlds(model) -> int:
    return int(getattr(model, "num_worlds", getattr(model, "world_count", -1)))  # inertia's name, Newton's
