"""The parameters a rollout can differentiate with respect to: names, the model arrays they write, entity kinds.

One table for :class:`inertia.Rollout`, its torch bridge and its batched (many-world) views.
"""

from __future__ import annotations

# Model arrays that a rollout can differentiate with respect to. The torch bridge also
# takes ``particle_mass`` (written as ``particle_inv_mass``) and ``body_mass`` (written as
# ``body_mass`` and ``body_inv_mass``); ``body_inertia`` is written with its inverse.
DIFFERENTIABLE_PARAMS = (
    "particle_inv_mass",
    "particle_radius",
    "spring_rest_length",
    "spring_stiffness",
    "spring_damping",
    "tri_materials",
    "edge_rest_angle",
    "edge_bending_properties",
    "tet_materials",
    "shape_material_ke",
    "shape_material_kd",
    "shape_material_mu",
    "shape_material_restitution",
    "gravity",
    "body_inv_mass",
    "body_inertia",
    "joint_target_ke",
    "joint_target_kd",
    "joint_limit_ke",
    "joint_limit_kd",
)
# user-facing name -> the model arrays it is written to (the bridge computes the derived values in torch,
# so autograd chains their gradients back to what the user passed)
PARAM_ALIASES = {
    "particle_mass": ("particle_inv_mass",),
    "body_mass": ("body_mass", "body_inv_mass"),
    "body_inertia": ("body_inertia", "body_inv_inertia"),
}


def warp_param_names(names) -> tuple:
    """The model arrays that the declared parameter ``names`` write."""
    out = []
    for n in names:
        out.extend(PARAM_ALIASES.get(n, (n,)))
    return tuple(out)


# parameter name -> the entity kind its first dimension counts (gravity has its own rule)
PARAM_KINDS = {
    "particle_mass": "particle", "particle_inv_mass": "particle", "particle_radius": "particle",
    "spring_rest_length": "spring", "spring_stiffness": "spring", "spring_damping": "spring",
    "tri_materials": "triangle", "edge_rest_angle": "edge", "edge_bending_properties": "edge",
    "tet_materials": "tetrahedron",
    "shape_material_ke": "shape", "shape_material_kd": "shape", "shape_material_mu": "shape",
    "shape_material_restitution": "shape",
    "body_mass": "body", "body_inv_mass": "body", "body_inertia": "body",
    "joint_target_ke": "joint_dof", "joint_target_kd": "joint_dof", "joint_limit_ke": "joint_dof",
    "joint_limit_kd": "joint_dof",
}
