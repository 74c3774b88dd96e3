"""Every field of the Model, State and Control, declared once: dtype, entity it is indexed by, unit, meaning.

Code that creates, copies, slices or resets these data iterates the declarations instead of keeping lists
of names: ``finalize()`` builds each model array from the field's builder list (or its derivation),
``ModelBuilder.__init__`` makes the builder's lists, ``add_builder`` / ``replicate`` copy every builder
field by its ``copy`` rule, the per-world reset and the rollout's batched views find each array's entity
here, and :mod:`inertia.rollout.params` takes the differentiable parameters from here. A new field
declared here travels through all of them (``tests/test_schema.py`` checks it by construction).

Entities (what the first dimension counts): ``particle``, ``spring``, ``triangle``, ``edge``,
``tetrahedron``, ``shape``, ``body``, ``joint``, ``joint_coord`` (entries of ``State.joint_q``),
``joint_dof`` (entries of ``State.joint_qd``; joint limits, gains and controls), ``world``,
``articulation``; ``model`` marks a model-wide Python scalar.

Conventions: SI units, Z up by default; quaternions (x, y, z, w); ``body_qd`` is (linear velocity of the
centre of mass, angular velocity), both in world (:mod:`inertia.builder.bodies`).
"""

from __future__ import annotations

from dataclasses import dataclass

import warp as wp

ENTITIES = ("particle", "spring", "triangle", "edge", "tetrahedron", "shape", "body", "joint", "joint_coord",
            "joint_dof", "world", "articulation", "model")

# The model's count attribute of each entity (``world``: ``num_worlds``).
COUNT_OF = {"particle": "particle_count", "spring": "spring_count", "triangle": "tri_count", "edge": "edge_count",
            "tetrahedron": "tet_count", "shape": "shape_count", "body": "body_count", "joint": "joint_count",
            "joint_coord": "joint_coord_count", "joint_dof": "joint_dof_count", "world": "num_worlds",
            "articulation": "articulation_count"}
# The model's world-index array of each entity's entries (-1: a static shape, shared by every world).
WORLD_OF = {"particle": "particle_world", "spring": "spring_world", "triangle": "tri_world", "edge": "edge_world",
            "tetrahedron": "tet_world", "shape": "shape_world", "body": "body_world", "joint": "joint_world",
            "joint_coord": "joint_coord_world", "joint_dof": "joint_dof_world"}


@dataclass(frozen=True)
class Field:
    """One declared field.

    ``dtype``: Warp dtype of the array (or ``float`` / ``int`` / ``bool`` / ``list`` for a host value).
    ``inner``: trailing dimensions of a 2-D float array (e.g. ``(3,)`` for ``tri_materials``);
    ``flat``: stored flattened (``spring_indices``: 2 per spring). ``grad``: allocated with a gradient
    when the model is built with ``requires_grad=True``. ``param``: a parameter a rollout can
    differentiate with respect to. ``source``: ``"builder"`` (a builder list of the same name),
    ``"derived"`` (computed by ``finalize()`` from other builder data), ``"builder_only"`` (held by the
    builder, used by ``finalize()``, not a model attribute). ``copy``: how ``add_builder`` copies a
    builder list into another builder (see :mod:`inertia.builder.worlds`): ``plain``, ``world`` (the
    copy's world), ``particle_index`` / ``body_index`` / ``joint_index`` (shifted; -1 stays),
    ``body_index_list`` (a tuple of body indices per entry, each shifted), ``point`` / ``vector`` /
    ``pose`` / ``spatial`` (moved with the copy), ``world_pose`` (moved where the parent is the world:
    joint parent frames, static shape poses), ``tet_pose``, ``shape_world``. ``length``: entries per
    array: ``count`` (one per entity; ``inner`` times that when ``flat``), ``offsets`` (count + 1),
    ``csr`` (the entries of CSR lists).
    """

    name: str
    dtype: object
    entity: str
    unit: str
    doc: str
    inner: tuple = ()
    flat: bool = False
    grad: bool = False
    param: bool = False
    source: str = "builder"
    copy: str = "plain"
    length: str = "count"  # "count" entries, "offsets" (count + 1: CSR offsets, starts), "csr" (any)
    minimum: float | None = None  # valid range of a value (checked by finalize() for scalars, by Rollout params)
    maximum: float | None = None


F = Field
i32, f32 = wp.int32, wp.float32

# ------------------------------------------------------------------------------------------------ model
MODEL_FIELDS = (
    # particles
    F("particle_q", wp.vec3, "particle", "m", "initial positions", grad=True, copy="point"),
    F("particle_qd", wp.vec3, "particle", "m/s", "initial velocities", grad=True, copy="vector"),
    F("particle_mass", f32, "particle", "kg", "mass (0: kinematic)", grad=True, minimum=0.0),
    F("particle_inv_mass", f32, "particle", "1/kg", "inverse mass, what the kernels read (0: kinematic)",
      grad=True, param=True, source="derived", minimum=0.0),
    F("particle_radius", f32, "particle", "m", "contact radius", grad=True, param=True, minimum=0.0),
    F("particle_flags", i32, "particle", "", "bits: PARTICLE_FLAG_ACTIVE"),
    F("particle_world", i32, "particle", "", "world index (>= 0)", copy="world"),
    F("particle_element_count", i32, "particle", "", "springs, triangles, bending edges and tets on the "
      "particle (their damping is split by it: implicit per element, stable together)", source="derived"),
    F("particle_exclusion_offsets", i32, "particle", "", "CSR offsets (n + 1) of the particles each one never "
      "collides with (they share an element)", source="derived", length="offsets"),
    F("particle_exclusions", i32, "particle", "", "CSR entries of those lists", source="derived", length="csr"),
    # springs
    F("spring_indices", i32, "spring", "", "the two particles of each spring", inner=(2,), flat=True,
      copy="particle_index"),
    F("spring_rest_length", f32, "spring", "m", "rest length", grad=True, param=True, minimum=0.0),
    F("spring_stiffness", f32, "spring", "N/m", "stiffness ke", grad=True, param=True, minimum=0.0),
    F("spring_damping", f32, "spring", "N s/m", "damping kd along the spring", grad=True, param=True, minimum=0.0),
    F("spring_world", i32, "spring", "", "world of the spring's particles", source="derived"),
    # membrane triangles
    F("tri_indices", i32, "triangle", "", "the three particles", inner=(3,), copy="particle_index"),
    F("tri_poses", wp.mat22, "triangle", "1/m", "inverse rest edge matrix in the triangle's plane", grad=True),
    F("tri_areas", f32, "triangle", "m^2", "rest area", grad=True),
    F("tri_materials", f32, "triangle", "N/m, N/m, N s/m", "(mu, lambda, damping) per unit rest area",
      inner=(3,), grad=True, param=True, minimum=0.0),
    F("tri_world", i32, "triangle", "", "world of the triangle's particles", source="derived"),
    # bending edges
    F("edge_indices", i32, "edge", "", "(i, j, k, l): wings i, j across the edge k-l", inner=(4,),
      copy="particle_index"),
    F("edge_rest_angle", f32, "edge", "rad", "rest dihedral angle", grad=True, param=True),
    F("edge_bending_properties", f32, "edge", "N m/rad, N m s/rad", "(ke, kd)", inner=(2,), grad=True, param=True,
      minimum=0.0),
    F("edge_world", i32, "edge", "", "world of the edge's particles", source="derived"),
    # tetrahedra
    F("tet_indices", i32, "tetrahedron", "", "the four particles (positive orientation)", inner=(4,),
      copy="particle_index"),
    F("tet_poses", wp.mat33, "tetrahedron", "1/m", "inverse rest edge matrix (world axes)", grad=True,
      copy="tet_pose"),
    F("tet_volumes", f32, "tetrahedron", "m^3", "rest volume", grad=True),
    F("tet_materials", f32, "tetrahedron", "Pa, Pa, Pa s", "(k_mu, k_lambda, k_damp)", inner=(3,), grad=True,
      param=True, minimum=0.0),
    F("tet_world", i32, "tetrahedron", "", "world of the tet's particles", source="derived"),
    # shapes
    F("shape_type", i32, "shape", "", "GEO_* of inertia.types"),
    F("shape_body", i32, "shape", "", "body it is attached to (-1: static)", copy="body_index"),
    F("shape_transform", wp.transform, "shape", "m", "pose in its body's frame (in world when static)",
      copy="world_pose"),
    F("shape_scale", wp.vec3, "shape", "m", "half extents / radius, half height (by type)"),
    F("shape_material_ke", f32, "shape", "N/m", "contact stiffness (penalty)", grad=True, param=True, minimum=0.0),
    F("shape_material_kd", f32, "shape", "N s/m", "contact damping", grad=True, param=True, minimum=0.0),
    F("shape_material_tau", f32, "shape", "s", "contact time constant: penalty gains scaled by each contact's "
      "effective mass, ke = m_eff / tau^2 (0: the absolute ke / kd instead)", grad=True, param=True, minimum=0.0),
    F("shape_material_zeta", f32, "shape", "", "contact damping ratio (1: critical), kd = 2 zeta m_eff / tau "
      "(used when tau > 0)", grad=True, param=True, minimum=0.0),
    F("shape_material_mu", f32, "shape", "", "Coulomb friction coefficient", grad=True, param=True, minimum=0.0),
    F("shape_material_restitution", f32, "shape", "", "normal restitution in [0, 1] (XPBD)", grad=True,
      param=True, minimum=0.0, maximum=1.0),
    F("shape_collision_group", i32, "shape", "", "bits the shape belongs to"),
    F("shape_collision_mask", i32, "shape", "", "bits of the groups it collides with"),
    F("shape_flags", i32, "shape", "", "bits: SHAPE_FLAG_COLLIDE_SHAPES, SHAPE_FLAG_COLLIDE_PARTICLES"),
    F("shape_world", i32, "shape", "", "world (-1: static, shared by every world)", copy="shape_world"),
    F("shape_radius", f32, "shape", "m", "bounding sphere about the shape's origin (0 for planes)",
      source="derived"),
    F("shape_source_ptr", wp.uint64, "shape", "", "wp.Mesh id of mesh shapes (0 otherwise)", source="derived"),
    F("shape_label", list, "shape", "", "names (USD prims, messages)"),
    F("shape_meshes", list, "shape", "", "the wp.Mesh of each mesh shape, in shape order (a mesh that shapes "
      "share: one object, listed for each), kept alive with the model",
      source="derived", length="csr"),
    F("shape_density", float, "shape", "kg/m^3", "density for the mass of bodies without one",
      source="builder_only"),
    F("shape_mesh", list, "shape", "", "(vertices, triangles) of mesh shapes (None otherwise)",
      source="builder_only"),
    # bodies
    F("body_q", wp.transform, "body", "m", "initial poses of the body frames in world", grad=True, copy="pose"),
    F("body_qd", wp.spatial_vector, "body", "m/s, rad/s", "initial (v of the com, omega), world", grad=True,
      copy="spatial"),
    F("body_com", wp.vec3, "body", "m", "centre of mass in the body frame", source="derived"),
    F("body_mass", f32, "body", "kg", "mass (0: kinematic)", grad=True, source="derived", minimum=0.0),
    F("body_inv_mass", f32, "body", "1/kg", "inverse mass, what the kernels read (0: kinematic)", grad=True,
      param=True, source="derived", minimum=0.0),
    F("body_inertia", wp.mat33, "body", "kg m^2", "inertia about the com, body frame", grad=True, param=True,
      source="derived"),
    F("body_inv_inertia", wp.mat33, "body", "1/(kg m^2)", "its inverse (0: kinematic)", grad=True,
      source="derived"),
    F("body_world", i32, "body", "", "world index (>= 0)", copy="world"),
    F("body_exclusion_offsets", i32, "body", "", "CSR offsets (n + 1) of the bodies each one never collides "
      "with (a joint's parent and child)", source="derived", length="offsets"),
    F("body_exclusions", i32, "body", "", "CSR entries of those lists", source="derived", length="csr"),
    F("body_label", list, "body", "", "names"),
    F("body_visual", list, "body", "", "visual geometry drawn with the body (a tuple of inertia.builder.shapes."
      "Visual, in the body frame; USD recorder), never simulated"),
    F("body_mass_donor", i32, "body", "", "the body whose mass this massless link carries a share of (-1: none): "
      "an intermediate body of a multi-joint MJCF body or a massless URDF link, see inertia.io.robot; a "
      "reduced-coordinate solver may hand the share back", copy="body_index"),
    F("body_collision_exclude", list, "body", "", "other bodies (indices) this body never collides with, besides "
      "its joint neighbours (add_collision_exclusion)", source="builder_only", copy="body_index_list"),
    F("body_kinematic", bool, "body", "", "moved only by its velocity", source="builder_only"),
    # joints
    F("joint_type", i32, "joint", "", "JOINT_* of inertia.types"),
    F("joint_parent", i32, "joint", "", "parent body (-1: world)", copy="body_index"),
    F("joint_child", i32, "joint", "", "child body", copy="body_index"),
    F("joint_X_p", wp.transform, "joint", "m", "joint frame in the parent body frame (world if parent -1)",
      copy="world_pose"),
    F("joint_X_c", wp.transform, "joint", "m", "joint frame in the child body frame"),
    F("joint_axis", wp.vec3, "joint", "", "axis in the joint frame (revolute, prismatic)"),
    F("joint_world", i32, "joint", "", "world of the child body", copy="world"),
    F("joint_q_start", i32, "joint", "", "offset into State.joint_q (n + 1 entries)", source="derived",
      length="offsets"),
    F("joint_qd_start", i32, "joint", "", "offset into State.joint_qd (n + 1 entries)", source="derived",
      length="offsets"),
    F("joint_fk_order", i32, "joint", "", "joints parent before child, per tree", source="derived"),
    F("joint_label", list, "joint", "", "names"),
    F("joint_collide_parent", bool, "joint", "", "parent and child may collide", source="builder_only"),
    F("joint_mimic_joint", i32, "joint", "", "joint whose coordinate this 1-dof joint follows, q = multiplier "
      "q_source + offset (-1: none; URDF <mimic>, applied by the FeatherstoneSolver)", copy="joint_index"),
    F("joint_mimic_multiplier", f32, "joint", "", "mimic gain (m/rad or rad/m across joint kinds)"),
    F("joint_mimic_offset", f32, "joint", "m or rad", "mimic offset"),
    F("articulation_start", i32, "articulation", "", "each tree's first entry in joint_fk_order (n + 1)",
      source="derived", length="offsets"),
    F("joint_coord_world", i32, "joint_coord", "", "world of each entry of State.joint_q", source="derived"),
    F("joint_limit_lower", f32, "joint_dof", "m or rad", "lower limit (-inf: none)"),
    F("joint_limit_upper", f32, "joint_dof", "m or rad", "upper limit (inf: none)"),
    F("joint_limit_ke", f32, "joint_dof", "N/m or N m/rad", "limit stiffness", grad=True, param=True, minimum=0.0),
    F("joint_limit_kd", f32, "joint_dof", "N s/m or N m s/rad", "limit damping", grad=True, param=True, minimum=0.0),
    F("joint_target_ke", f32, "joint_dof", "N/m or N m/rad", "drive stiffness (to Control.joint_target_pos)",
      grad=True, param=True, minimum=0.0),
    F("joint_target_kd", f32, "joint_dof", "N s/m or N m s/rad", "drive damping (to Control.joint_target_vel)",
      grad=True, param=True, minimum=0.0),
    F("joint_armature", f32, "joint_dof", "kg m^2 or kg", "rotor inertia added to the dof's diagonal of the "
      "joint-space mass matrix (FeatherstoneSolver)", grad=True, param=True, minimum=0.0),
    F("joint_damping", f32, "joint_dof", "N m s/rad or N s/m", "passive viscous damping (to zero rate)", grad=True,
      param=True, minimum=0.0),
    F("joint_friction", f32, "joint_dof", "N m or N", "passive Coulomb friction (dry friction torque / force)",
      grad=True, param=True, minimum=0.0),
    F("joint_effort_limit", f32, "joint_dof", "N m or N", "largest actuator effort (drive + joint_f); inf: none"),
    F("joint_velocity_limit", f32, "joint_dof", "rad/s or m/s", "largest joint rate; inf: none"),
    F("joint_dof_world", i32, "joint_dof", "", "world of each entry of State.joint_qd", source="derived"),
    # worlds
    F("gravity", wp.vec3, "world", "m/s^2", "gravity of each world", grad=True, param=True, source="derived"),
)

# Model-wide scalars (builder attributes of the same name unless derived).
MODEL_SCALARS = (
    F("particle_ke", float, "model", "N/m", "particle-particle contact stiffness", minimum=0.0),
    F("particle_kd", float, "model", "N s/m", "particle-particle contact damping", minimum=0.0),
    F("particle_mu", float, "model", "", "particle-particle friction coefficient", minimum=0.0),
    F("particle_tau", float, "model", "s", "particle-particle contact time constant: ke = m_eff / tau^2 with "
      "m_eff the pair's reduced mass (0: the absolute particle_ke / particle_kd)", minimum=0.0),
    F("particle_zeta", float, "model", "", "particle-particle contact damping ratio, kd = 2 zeta m_eff / tau",
      minimum=0.0),
    F("particle_damping", float, "model", "1/s", "linear velocity damping of particles", minimum=0.0),
    F("particle_collide", bool, "model", "", "particle-particle contact on"),
    F("friction_smoothing", float, "model", "m/s", "slip speed below which Coulomb friction is smoothed", minimum=0.0),
    F("contact_smoothing", float, "model", "m", "h of the softplus contact depth (0: plain penalty)", minimum=0.0),
    F("contact_margin", float, "model", "m", "particle contact detection margin", source="derived"),
    F("rigid_contact_margin", float, "model", "m", "shape-shape contacts are detected this far apart", minimum=0.0),
    F("joint_attach_ke", float, "model", "1/s^2", "SemiImplicitSolver joint springs, mass-scaled", minimum=0.0),
    F("joint_attach_kd", float, "model", "1/s", "SemiImplicitSolver joint damping, mass-scaled", minimum=0.0),
    F("particle_max_radius", float, "model", "m", "largest particle radius at finalize()", source="derived"),
)

# ------------------------------------------------------------------------------------------------ state, control
# A state field's ``source`` says where a new state (and a per-world reset) takes its value from:
# ``"model"`` the model's initial array of the same name, ``"zero"``, ``"kinematics"`` the joint
# coordinates of the bodies' poses (``eval_ik``).
STATE_FIELDS = (
    F("particle_q", wp.vec3, "particle", "m", "positions", grad=True, source="model"),
    F("particle_qd", wp.vec3, "particle", "m/s", "velocities", grad=True, source="model"),
    F("particle_f", wp.vec3, "particle", "N", "total force of the step that produced this state", grad=True,
      source="zero"),
    F("body_q", wp.transform, "body", "m", "body frame poses in world", grad=True, source="model"),
    F("body_qd", wp.spatial_vector, "body", "m/s, rad/s", "(v of the com, omega), world", grad=True,
      source="model"),
    F("body_f", wp.spatial_vector, "body", "N, N m", "total wrench of the step (gravity excluded)", grad=True,
      source="zero"),
    F("joint_q", f32, "joint_coord", "m or rad", "joint coordinates (layout in inertia.builder.bodies)",
      grad=True, source="kinematics"),
    F("joint_qd", f32, "joint_dof", "m/s or rad/s", "joint rates", grad=True, source="kinematics"),
)
# what a rollout saves and restores: a step reads only these of its input state
STATE_CHECKPOINT = ("particle_q", "particle_qd", "body_q", "body_qd")
STATE_VELOCITIES = ("particle_qd", "body_qd")

CONTROL_FIELDS = (
    F("particle_f", wp.vec3, "particle", "N", "external force", grad=True, source="zero"),
    F("body_f", wp.spatial_vector, "body", "N, N m", "external wrench (force at the com, torque), world",
      grad=True, source="zero"),
    F("joint_target_pos", f32, "joint_dof", "m or rad", "drive position targets", grad=True, source="zero"),
    F("joint_target_vel", f32, "joint_dof", "m/s or rad/s", "drive velocity targets", grad=True, source="zero"),
    F("joint_f", f32, "joint_dof", "N or N m", "joint efforts", grad=True, source="zero"),
)

# Derived model arrays whose builder list of the same name holds the user's raw input (None: from the shapes).
BUILDER_INPUTS = ("body_mass", "body_inertia", "body_com")

del F


def by_name(fields) -> dict:
    return {f.name: f for f in fields}


MODEL = by_name(MODEL_FIELDS + MODEL_SCALARS)
STATE = by_name(STATE_FIELDS)
CONTROL = by_name(CONTROL_FIELDS)


def is_array(f: Field) -> bool:
    """A device array (not a host list or scalar)."""
    return f.dtype not in (list, float, int, bool)


def model_arrays(entity: str | None = None) -> tuple:
    """The model's ``wp.array`` fields (of one entity, if given)."""
    return tuple(f for f in MODEL_FIELDS if f.source != "builder_only" and is_array(f)
                 and (entity is None or f.entity == entity))


def builder_fields(entity: str | None = None) -> tuple:
    """The per-entity lists a builder holds (and ``add_builder`` copies), of one entity if given."""
    return tuple(f for f in MODEL_FIELDS if held_by_builder(f) and (entity is None or f.entity == entity))


def held_by_builder(f: Field) -> bool:
    return f.source != "derived" or f.name in BUILDER_INPUTS


def describe(name: str) -> str:
    """One line about a model, state or control field: ``describe("body_inv_inertia")``."""
    for table, where in ((MODEL, "Model"), (STATE, "State"), (CONTROL, "Control")):
        f = table.get(name)
        if f is not None:
            kind = getattr(f.dtype, "__name__", str(f.dtype))
            unit = f" [{f.unit}]" if f.unit else ""
            return f"{where}.{name}: {kind} per {f.entity}{unit}: {f.doc}"
    raise KeyError(f"no field {name!r} in the Model, State or Control")
