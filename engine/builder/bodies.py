"""Rigid bodies and joints of the ModelBuilder.

Conventions (the same in every solver, the state and the kinematics):

- ``body_q`` is the body frame's pose in world, a ``wp.transform`` (position
  [m], quaternion (x, y, z, w)); ``body_com`` is the centre of mass in the
  body frame [m].
- ``body_qd`` is a ``wp.spatial_vector`` (linear first, as in Newton 1.x):
  the velocity of the centre of mass [m/s], then the angular velocity
  [rad/s], both in world coordinates.
- A body's mass and inertia come from ``add_body(mass=..., inertia=...)`` or,
  when ``mass`` is None, from the density of the shapes attached to it.
  ``kinematic=True`` makes a body that forces never move (it keeps its
  velocity); a dynamic body with no mass is an error at ``finalize()``.

Joints connect a parent body (or the world, ``-1``) to a child body. Each
joint has a frame on the parent (``parent_xform``, in the parent body frame)
and one on the child (``child_xform``); at ``joint_q = 0`` the two coincide.
``axis`` (revolute, prismatic) is given in the joint frame. Joints form trees:
a body is the child of at most one joint. Joint coordinates in
``State.joint_q`` / ``joint_qd`` per type: prismatic, revolute 1/1 (metres or
radians along/about the axis); ball 4/3 (the child frame's orientation in the
parent frame as a quaternion (x, y, z, w); relative angular velocity in the
parent joint frame); fixed 0/0; free 7/6 (the child frame's pose in the
parent frame; the child's ``body_qd``). Free joints attach to the world only.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from .checks import FLOAT32_MAX, finite, index, transform, vec3
from ..types import JOINT_BALL, JOINT_COORDS, JOINT_FIXED, JOINT_FREE, JOINT_NAMES, JOINT_PRISMATIC, JOINT_REVOLUTE


# Joint dynamics per degree of freedom (``add_joint_*(armature=..., ...)``), in the dof's units: armature
# [kg m^2 or kg], passive damping [N m s/rad or N s/m], Coulomb friction [N m or N], effort and velocity
# limits (inf: none). The FeatherstoneSolver integrates them; the maximal-coordinate solvers warn.
JOINT_DYNAMICS_DEFAULTS = {"armature": 0.0, "damping": 0.0, "friction": 0.0, "effort_limit": math.inf,
                           "velocity_limit": math.inf}


def _dynamics(kwargs: dict, what: str) -> dict:
    unknown = set(kwargs) - set(JOINT_DYNAMICS_DEFAULTS)
    if unknown:
        raise TypeError(f"{what}: unknown arguments {sorted(unknown)} (joint dynamics: "
                        f"{sorted(JOINT_DYNAMICS_DEFAULTS)})")
    return kwargs


def _inertia(value) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if a.shape == (3,):
        a = np.diag(a)
    if a.shape != (3, 3):
        raise ValueError(f"body inertia must be a 3x3 matrix or its diagonal (3,), got shape {a.shape}")
    if not np.isfinite(a).all() or np.abs(a).max() > FLOAT32_MAX:
        raise ValueError("body inertia contains NaN or inf (or values beyond float32 range)")
    if not np.allclose(a, a.T, rtol=1e-6, atol=1e-12):
        raise ValueError("body inertia must be symmetric")
    return a


class BodyBuilderMixin:
    """Body and joint methods of :class:`inertia.ModelBuilder` (conventions in the module docstring)."""

    # SemiImplicitSolver: joints hold their constrained directions with springs scaled by the joint's effective
    # mass (inertia.solvers.forces.joints): a separation d accelerates back at -ke d - kd d', any masses
    joint_attach_ke = 1.0e5  # [1/s^2] (angular frequency 316 rad/s; stable while sqrt(ke) dt < ~1)
    joint_attach_kd = 1.0e2  # [1/s]
    default_limit_ke = 1.0e4  # joint limit stiffness [N m/rad revolute, N/m prismatic], SemiImplicitSolver
    default_limit_kd = 1.0e1  # joint limit damping [N m s/rad revolute, N s/m prismatic]

    def _joint_of_child(self) -> dict:
        """child body -> its joint, kept up to date as joints are appended (a dict: adding a joint to a long
        chain walks up the tree in O(depth) instead of searching the joint list at every level)."""
        cache = getattr(self, "_child_joint", None)
        if cache is None or len(cache) > len(self.joint_child):
            cache = self._child_joint = {}
        for j in range(len(cache), len(self.joint_child)):
            cache[self.joint_child[j]] = j
        return cache

    @property
    def body_count(self) -> int:
        return len(self.body_q)

    @property
    def joint_count(self) -> int:
        return len(self.joint_type)

    def add_body(self, xform=None, mass=None, inertia=None, com=None, linear_velocity=(0.0, 0.0, 0.0),
                 angular_velocity=(0.0, 0.0, 0.0), kinematic: bool = False, label=None) -> int:
        """Add a rigid body and return its index.

        Args:
            xform: the body frame's initial pose in world: ``(position, quaternion (x, y, z, w))``
                or a ``wp.transform``. Quaternions are normalized; a zero one is rejected.
            mass: [kg]; None takes it from the attached shapes' density. Must be > 0 for a
                dynamic body (checked at ``finalize()``), 0 or None for a kinematic one.
            inertia: 3x3 (or its diagonal) about the centre of mass in the body frame [kg m^2];
                None takes it from the shapes (scaled to ``mass`` when that is given).
            com: centre of mass in the body frame [m]; None takes it from the shapes (else the origin).
            linear_velocity: initial velocity of the centre of mass [m/s], world frame.
            angular_velocity: initial angular velocity [rad/s], world frame.
            kinematic: never moved by forces, contacts or joints; keeps its velocity.
        """
        xf = transform(xform, "body xform")
        if mass is not None:
            mass = finite(mass, "body mass", minimum=0.0)
            if mass == 0.0 and not kinematic:
                raise ValueError("body mass must be > 0 for a dynamic body (mass 0 is only for kinematic=True)")
        if inertia is not None:
            inertia = _inertia(inertia)
        if com is not None:
            com = vec3(com, "body com")
        self.body_q.append(xf)
        self.body_qd.append(vec3(linear_velocity, "body linear_velocity") + vec3(angular_velocity,
                                                                                   "body angular_velocity"))
        self.body_mass.append(mass)
        self.body_inertia.append(inertia)
        self.body_com.append(com)
        self.body_kinematic.append(bool(kinematic))
        self._add_to_current_world(self.body_world)
        self.body_label.append(label or f"body_{len(self.body_q) - 1}")
        self.body_visual.append(())
        self.body_collision_exclude.append(())
        self.body_mass_donor.append(-1)
        return len(self.body_q) - 1

    def add_collision_exclusion(self, body_a, body_b) -> None:
        """Never let the shapes of bodies ``body_a`` and ``body_b`` collide (a joint's parent and child never do
        unless ``collide_parent=True``; imported robots use this for their self-collision filters)."""
        a = index(body_a, self.body_count, "add_collision_exclusion: body_a")
        b = index(body_b, self.body_count, "add_collision_exclusion: body_b")
        if a == b:
            raise ValueError(f"add_collision_exclusion: a body never collides with itself (got {a} twice)")
        if self.body_world[a] != self.body_world[b]:
            return  # bodies of different worlds never meet anyway
        lo, hi = min(a, b), max(a, b)
        if hi not in self.body_collision_exclude[lo]:
            self.body_collision_exclude[lo] = self.body_collision_exclude[lo] + (hi,)

    def set_joint_mimic(self, joint, source, multiplier: float = 1.0, offset: float = 0.0) -> None:
        """Declare that 1-dof ``joint`` follows 1-dof joint ``source``: ``q = multiplier * q_source + offset``
        ([m] or [rad] as the joints are). Data for reduced-coordinate solvers (the FeatherstoneSolver); the
        maximal-coordinate solvers ignore it (the joint then moves on its own)."""
        j = index(joint, self.joint_count, "set_joint_mimic: joint")
        s = index(source, self.joint_count, "set_joint_mimic: source")
        for k, what in ((j, "joint"), (s, "source")):
            if self.joint_type[k] not in (JOINT_REVOLUTE, JOINT_PRISMATIC):
                raise ValueError(f"set_joint_mimic: {what} {k} ('{self.joint_label[k]}') is a "
                                 f"{JOINT_NAMES[self.joint_type[k]]} joint; mimic couples revolute and "
                                 "prismatic joints")
        if j == s:
            raise ValueError(f"set_joint_mimic: joint {j} cannot follow itself")
        self.joint_mimic_joint[j] = s
        self.joint_mimic_multiplier[j] = finite(multiplier, "set_joint_mimic: multiplier")
        self.joint_mimic_offset[j] = finite(offset, "set_joint_mimic: offset")

    # ------------------------------------------------------------------ joints
    def _add_joint(self, jtype, parent, child, parent_xform, child_xform, axis=None, limit=None, drive=None,
                   collide_parent=False, label=None, dynamics=None) -> int:
        name = JOINT_NAMES[int(jtype)]
        what = f"add_joint_{name}"
        parent = index(parent, self.body_count, f"{what}: parent body", allow_world=True)
        child = index(child, self.body_count, f"{what}: child body")
        if parent == child:
            raise ValueError(f"{what}: a joint's parent and child must differ (both are body {child})")
        if jtype == JOINT_FREE and parent != -1:
            raise ValueError(f"{what}: free joints attach a body to the world (parent=-1), got parent {parent}")
        joint_of = self._joint_of_child()
        if child in joint_of:
            raise ValueError(f"{what}: body {child} is already the child of joint {joint_of[child]}; joints must "
                             "form trees")
        # walking up from the parent must not reach the child (that would close a loop)
        b = parent
        while b != -1:
            if b == child:
                raise ValueError(f"{what}: body {parent} descends from body {child}; joints must form trees")
            j = joint_of.get(b)
            b = self.joint_parent[j] if j is not None else -1
        if parent != -1 and self.body_world[parent] != self.body_world[child]:
            raise ValueError(f"{what}: bodies {parent} and {child} belong to different worlds")
        if axis is not None:
            a = np.array(vec3(axis, f"{what}: axis"))
            n = np.linalg.norm(a)
            if n < 1e-9:
                raise ValueError(f"{what}: axis must be non-zero")
            axis = tuple(a / n)
        ndof = JOINT_COORDS[int(jtype)][1]
        lower, upper, lke, lkd = -math.inf, math.inf, self.default_limit_ke, self.default_limit_kd
        if limit is not None:
            lower, upper, lke, lkd = limit
            lower = -math.inf if lower is None else float(lower)
            upper = math.inf if upper is None else float(upper)
            if math.isnan(lower) or math.isnan(upper) or lower > upper:
                raise ValueError(f"{what}: limits must satisfy lower <= upper, got ({lower}, {upper})")
            if lower == math.inf or upper == -math.inf or any(math.isfinite(v) and abs(v) > FLOAT32_MAX
                                                              for v in (lower, upper)):
                raise ValueError(f"{what}: limits must be finite (float32) or -inf (no lower) / +inf (no upper), "
                                 f"got ({lower}, {upper})")
            lke = finite(self.default_limit_ke if lke is None else lke, f"{what}: limit_ke", minimum=0.0)
            lkd = finite(self.default_limit_kd if lkd is None else lkd, f"{what}: limit_kd", minimum=0.0)
        tke, tkd = drive if drive is not None else (0.0, 0.0)
        tke = finite(tke, f"{what}: target_ke", minimum=0.0)
        tkd = finite(tkd, f"{what}: target_kd", minimum=0.0)
        dyn = dict(JOINT_DYNAMICS_DEFAULTS, **(dynamics or {}))
        for key in ("armature", "damping", "friction"):
            dyn[key] = finite(dyn[key], f"{what}: {key}", minimum=0.0)
        for key in ("effort_limit", "velocity_limit"):
            v = float(dyn[key])
            if math.isnan(v) or v < 0.0 or (math.isfinite(v) and v > 3.0e38):
                raise ValueError(f"{what}: {key} must be >= 0 (inf: no limit), got {dyn[key]!r}")
            dyn[key] = v
        self.joint_type.append(int(jtype))
        self.joint_parent.append(parent)
        self.joint_child.append(child)
        self.joint_X_p.append(transform(parent_xform, f"{what}: parent_xform"))
        self.joint_X_c.append(transform(child_xform, f"{what}: child_xform"))
        self.joint_axis.append(axis if axis is not None else (0.0, 0.0, 0.0))
        self.joint_limit_lower += [lower] * ndof
        self.joint_limit_upper += [upper] * ndof
        self.joint_limit_ke += [lke] * ndof
        self.joint_limit_kd += [lkd] * ndof
        self.joint_target_ke += [tke] * ndof
        self.joint_target_kd += [tkd] * ndof
        for key in JOINT_DYNAMICS_DEFAULTS:
            getattr(self, f"joint_{key}").extend([dyn[key]] * ndof)
        self.joint_collide_parent.append(bool(collide_parent))
        self.joint_world.append(self.body_world[child])
        self.joint_label.append(label or f"joint_{len(self.joint_type) - 1}")
        self.joint_mimic_joint.append(-1)
        self.joint_mimic_multiplier.append(1.0)
        self.joint_mimic_offset.append(0.0)
        return len(self.joint_type) - 1

    def add_joint_revolute(self, parent, child, parent_xform=None, child_xform=None, axis=(0.0, 0.0, 1.0),
                           limit_lower=None, limit_upper=None, limit_ke=None, limit_kd=None, target_ke=0.0,
                           target_kd=0.0, collide_parent=False, label=None, **dynamics) -> int:
        """A hinge about ``axis`` (joint frame). Angle [rad] in ``joint_q``, limits [rad].

        Drive: ``target_ke`` [N m/rad] pulls the angle to ``Control.joint_target_pos``, ``target_kd``
        [N m s/rad] the rate to ``Control.joint_target_vel``; ``Control.joint_f`` adds a torque [N m].
        Joint dynamics (keywords, see :data:`JOINT_DYNAMICS_DEFAULTS`): ``armature`` [kg m^2], ``damping``
        [N m s/rad], ``friction`` [N m], ``effort_limit`` [N m], ``velocity_limit`` [rad/s].
        """
        return self._add_joint(JOINT_REVOLUTE, parent, child, parent_xform, child_xform, axis,
                               (limit_lower, limit_upper, limit_ke, limit_kd), (target_ke, target_kd),
                               collide_parent, label, _dynamics(dynamics, "add_joint_revolute"))

    def add_joint_prismatic(self, parent, child, parent_xform=None, child_xform=None, axis=(1.0, 0.0, 0.0),
                            limit_lower=None, limit_upper=None, limit_ke=None, limit_kd=None, target_ke=0.0,
                            target_kd=0.0, collide_parent=False, label=None, **dynamics) -> int:
        """A slider along ``axis`` (joint frame). Offset [m] in ``joint_q``; drive gains in N/m, N s/m; force [N].

        Joint dynamics as :meth:`add_joint_revolute` (armature [kg], damping [N s/m], friction [N], effort
        limit [N], velocity limit [m/s]).
        """
        return self._add_joint(JOINT_PRISMATIC, parent, child, parent_xform, child_xform, axis,
                               (limit_lower, limit_upper, limit_ke, limit_kd), (target_ke, target_kd),
                               collide_parent, label, _dynamics(dynamics, "add_joint_prismatic"))

    def add_joint_ball(self, parent, child, parent_xform=None, child_xform=None, collide_parent=False,
                       label=None, **dynamics) -> int:
        """A ball-and-socket: the joint frames share their origin and rotate freely (no limits, no drive).

        Joint dynamics per rotational dof as :meth:`add_joint_revolute`."""
        return self._add_joint(JOINT_BALL, parent, child, parent_xform, child_xform, None, None, None,
                               collide_parent, label, _dynamics(dynamics, "add_joint_ball"))

    def add_joint_fixed(self, parent, child, parent_xform=None, child_xform=None, collide_parent=False,
                        label=None) -> int:
        """Weld the child's joint frame to the parent's."""
        return self._add_joint(JOINT_FIXED, parent, child, parent_xform, child_xform, None, None, None,
                               collide_parent, label)

    def add_joint_free(self, child, parent_xform=None, child_xform=None, label=None) -> int:
        """Six degrees of freedom relative to the world: no force, but ``joint_q``/``joint_qd`` report the pose."""
        return self._add_joint(JOINT_FREE, -1, child, parent_xform, child_xform, None, None, None, True, label)

    # ------------------------------------------------------------------ finalize helpers
    def _body_mass_properties(self):
        """Per body (mass, com (3,), inertia (3, 3), inv_mass, inv_inertia), float64, checked.

        Bodies with the same inputs (replicated copies share their shapes' transforms, scales and
        meshes) are computed once: the key is what the result depends on, by value or by identity
        of the very objects (alive in the builder's lists for the whole call).
        """
        shapes = [[] for _ in range(self.body_count)]
        for s, b in enumerate(self.shape_body):
            if b >= 0 and self.shape_density[s] > 0.0:
                shapes[b].append(s)
        memo, out = {}, []
        for b in range(self.body_count):
            mass, inertia, com = self.body_mass[b], self.body_inertia[b], self.body_com[b]
            key = (mass, None if inertia is None else inertia.tobytes(), com, self.body_kinematic[b],
                   tuple((self.shape_type[s], self.shape_density[s], self.shape_scale[s],
                          id(self.shape_transform[s]), id(self.shape_mesh[s])) for s in shapes[b]))
            props = memo.get(key)
            if props is None:
                props = memo[key] = self._one_body_mass_properties(b, shapes[b])
            out.append(props)
        return out

    def _one_body_mass_properties(self, b: int, shapes: list):
        from . import mass_properties as mp
        from ..types import GEO_BOX, GEO_CAPSULE, GEO_CYLINDER, GEO_MESH, GEO_SPHERE

        parts = []
        explicit = self.body_mass[b] is not None and self.body_inertia[b] is not None and self.body_com[b] is not None
        # a kinematic body with a given mass and com needs nothing from its shapes (their meshes may be open)
        explicit = explicit or (self.body_kinematic[b] and self.body_mass[b] is not None
                                and self.body_com[b] is not None)
        for s in [] if explicit else shapes:  # mass, inertia and com given: the shapes' density plays no part
            rho, sc, t = self.shape_density[s], self.shape_scale[s], self.shape_type[s]
            if t == GEO_SPHERE:
                props = mp.sphere(rho, sc[0])
            elif t == GEO_BOX:
                props = mp.box(rho, *sc)
            elif t == GEO_CAPSULE:
                props = mp.capsule(rho, sc[0], sc[1])
            elif t == GEO_CYLINDER:
                props = mp.cylinder(rho, sc[0], sc[1])
            elif t == GEO_MESH:
                try:
                    props = mp.mesh(rho, *self.shape_mesh[s])
                except ValueError as e:
                    raise ValueError(f"shape {s} ('{self.shape_label[s]}') on body {b} ('{self.body_label[b]}'): {e}. "
                                     "Give a closed mesh with outward (counter-clockwise) triangles, the shape "
                                     "density=0, or the body's mass, inertia and com explicitly") from None
            else:
                continue
            xf = self.shape_transform[s]
            r = np.array(wp.quat_to_matrix(xf.q), dtype=np.float64).reshape(3, 3)
            parts.append(props + (r, np.array(xf.p, dtype=np.float64)))
        m_s, com_s, i_s = mp.combine(parts)
        mass, inertia, com = self.body_mass[b], self.body_inertia[b], self.body_com[b]
        label = f"body {b} ('{self.body_label[b]}')"
        if inertia is None and com is not None and m_s > 0.0:
            # the shapes' inertia is about their own centre of mass: move it to the given one
            d = np.asarray(com, dtype=np.float64) - com_s
            i_s = i_s + m_s * (d @ d * np.eye(3) - np.outer(d, d))
        if mass is None:
            mass = m_s
            inertia = i_s if inertia is None else inertia
        elif inertia is None:
            inertia = i_s * (mass / m_s) if m_s > 0.0 else None
        com = np.array(com if com is not None else com_s, dtype=np.float64)
        if self.body_kinematic[b]:
            return (mass, com, np.zeros((3, 3)) if inertia is None else inertia, 0.0, np.zeros((3, 3)))
        if not mass > 0.0:
            raise ValueError(
                f"{label} is dynamic but has no mass: give add_body(mass=..., inertia=...), attach a shape "
                "with density > 0, or make it kinematic=True"
            )
        if inertia is None:
            raise ValueError(f"{label} has a mass but no inertia: give add_body(inertia=...) or attach a shape")
        eig = np.linalg.eigvalsh(inertia)
        if not eig.min() > 1e-12 * max(eig.max(), 1e-30):
            raise ValueError(f"{label}: inertia must be positive definite, eigenvalues {eig}")
        return (mass, com, inertia, 1.0 / mass, np.linalg.inv(inertia))

    def _joint_tree_order(self):
        """Joint indices ordered parent before child, grouped per tree, and each tree's start offset."""
        children = {}
        for j, p in enumerate(self.joint_parent):
            children.setdefault(p, []).append(j)
        child_joint = {c: j for j, c in enumerate(self.joint_child)}
        roots = [j for j, p in enumerate(self.joint_parent) if p == -1 or p not in child_joint]
        order, starts = [], []
        for r in roots:
            starts.append(len(order))
            stack = [r]
            while stack:
                j = stack.pop()
                order.append(j)
                stack.extend(reversed(children.get(self.joint_child[j], [])))
        starts.append(len(order))
        return np.array(order, dtype=np.int32), np.array(starts, dtype=np.int32)

    def _joint_coord_starts(self):
        table = np.array([JOINT_COORDS[t] for t in range(len(JOINT_COORDS))], dtype=np.int64)
        counts = table[np.asarray(self.joint_type, dtype=np.int64)].reshape(-1, 2)
        q, qd = np.zeros(len(counts) + 1, np.int32), np.zeros(len(counts) + 1, np.int32)
        q[1:], qd[1:] = np.cumsum(counts[:, 0]), np.cumsum(counts[:, 1])
        return q, qd
