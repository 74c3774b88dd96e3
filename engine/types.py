"""Plain constants shared by the builder, the collision pipeline and the solvers.

Kept in one place (as MuJoCo Warp does) so that a kernel and the Python code
that fills its arrays can never disagree on what a number means.
"""

import warp as wp

# Particle flags (bit field stored in ``Model.particle_flags``).
PARTICLE_FLAG_ACTIVE = wp.constant(1)
"""An active particle is integrated and takes part in contacts. Inactive ones are frozen."""

# Geometry types (``Model.shape_type``).
GEO_SPHERE = wp.constant(0)
GEO_BOX = wp.constant(1)
GEO_CAPSULE = wp.constant(2)
GEO_MESH = wp.constant(3)
GEO_PLANE = wp.constant(4)
GEO_CYLINDER = wp.constant(5)

GEO_NAMES = {0: "sphere", 1: "box", 2: "capsule", 3: "mesh", 4: "plane", 5: "cylinder"}

# Shape flags (bit field stored in ``Model.shape_flags``).
SHAPE_FLAG_COLLIDE_SHAPES = wp.constant(1)
"""The shape collides with other shapes (rigid contact)."""
SHAPE_FLAG_COLLIDE_PARTICLES = wp.constant(2)
"""The shape collides with particles (particle-shape contact, two-way when on a body)."""

# Joint types (``Model.joint_type``); numbered as Newton/warp.sim number them.
JOINT_PRISMATIC = wp.constant(0)
JOINT_REVOLUTE = wp.constant(1)
JOINT_BALL = wp.constant(2)
JOINT_FIXED = wp.constant(3)
JOINT_FREE = wp.constant(4)

JOINT_NAMES = {0: "prismatic", 1: "revolute", 2: "ball", 3: "fixed", 4: "free"}
# (position coordinates, velocity coordinates) of each joint type in State.joint_q / joint_qd
JOINT_COORDS = {0: (1, 1), 1: (1, 1), 2: (4, 3), 3: (0, 0), 4: (7, 6)}

AXES = {"x": 0, "y": 1, "z": 2}


def axis_index(up_axis) -> int:
    """Return 0, 1 or 2 for an axis given as "x"/"y"/"z" (any case) or as an int."""
    if isinstance(up_axis, str) and up_axis.lower() in AXES:
        return AXES[up_axis.lower()]
    if isinstance(up_axis, int) and not isinstance(up_axis, bool) and 0 <= up_axis <= 2:
        return up_axis
    raise ValueError(f"up_axis must be 'x', 'y', 'z' or 0..2, got {up_axis!r}")

# A contact smoothed with length h (Model.contact_smoothing) starts pushing this many h before the
# surfaces touch: softplus(-12) = 6e-6, i.e. a force of 6e-6 ke h there.
SMOOTH_CONTACT_REACH = 12.0
