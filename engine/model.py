"""Model: the static description of a scene, every quantity in a ``wp.array``.

Made by :meth:`inertia.ModelBuilder.finalize`. The model never changes during a
simulation except where a user edits a parameter array on purpose (for
example a stiffness being optimised); what changes each step lives in
:class:`inertia.State`.
"""

from __future__ import annotations

import warp as wp

from .autodiff.backward_code import enable_gradients
from .collision.sdf import shape_types
from .contacts import Contacts
from .finalize import build_model
from .schema import CONTROL_FIELDS, COUNT_OF, STATE_FIELDS
from .signed import Signed
from .state import Control, State


class Model(Signed):
    """Static scene data. Attribute names follow Newton/warp.sim.

    Particles: ``particle_q`` [m], ``particle_qd`` [m/s] (initial values),
    ``particle_mass`` [kg], ``particle_inv_mass`` [1/kg] (0 for kinematic),
    ``particle_radius`` [m], ``particle_flags``, ``particle_world``.

    Elements: ``spring_indices`` (flat, 2 per spring), ``spring_rest_length`` [m],
    ``spring_stiffness`` [N/m], ``spring_damping`` [N s/m]; ``tri_indices`` (n, 3),
    ``tri_poses`` (inverse rest 2x2), ``tri_areas`` [m^2], ``tri_materials`` (n, 3)
    = (mu, lambda, damping); ``edge_indices`` (n, 4), ``edge_rest_angle`` [rad],
    ``edge_bending_properties`` (n, 2) = (ke, kd); ``tet_indices`` (n, 4),
    ``tet_poses`` (inverse rest 3x3), ``tet_volumes`` [m^3], ``tet_materials`` (n, 3)
    = (k_mu, k_lambda, k_damp).

    Shapes: ``shape_type`` (see ``inertia.types``), ``shape_body`` (-1: static),
    ``shape_transform`` (in the body frame; world for static shapes), ``shape_scale``,
    ``shape_source_ptr`` (``wp.Mesh`` ids), ``shape_material_ke`` [N/m],
    ``shape_material_kd`` [N s/m] (absolute penalty gains, used where ``shape_material_tau`` is 0),
    ``shape_material_tau`` [s] / ``shape_material_zeta`` (mass-scaled gains, see
    ``inertia.solvers.forces.contact``), ``shape_material_mu``, ``shape_material_restitution``,
    ``shape_collision_group`` / ``shape_collision_mask`` (bits), ``shape_flags``,
    ``shape_radius`` (bounding sphere about the shape origin [m]; 0 for planes), ``shape_world``.

    Bodies (conventions in ``inertia.builder.bodies``): ``body_q`` (initial poses,
    ``wp.transform``), ``body_qd`` (initial (v_com, omega), world), ``body_com`` [m],
    ``body_mass`` [kg], ``body_inv_mass`` (0: kinematic), ``body_inertia`` /
    ``body_inv_inertia`` (about the com, body frame), ``body_world``,
    ``body_exclusion_offsets`` / ``body_exclusions`` (CSR: bodies that never collide).
    Kernels read ``body_inv_mass`` (never ``body_mass``), the integrators ``body_inertia``
    and joints and contacts ``body_inv_inertia``: edit (or differentiate) a mass or an
    inertia through both arrays of the pair; ``inertia.Rollout``'s ``body_mass`` and
    ``body_inertia`` params do.

    Joints: ``joint_type``, ``joint_parent`` (-1: world), ``joint_child``, ``joint_X_p`` /
    ``joint_X_c`` (joint frame in parent / child body frame), ``joint_axis`` (joint frame),
    ``joint_q_start`` / ``joint_qd_start`` (offsets into State.joint_q / joint_qd, one past
    the end last), per degree of freedom ``joint_limit_lower`` / ``_upper`` / ``_ke`` / ``_kd``
    and drive gains ``joint_target_ke`` / ``joint_target_kd``; ``joint_fk_order`` (joints
    parent-before-child, per tree) with ``articulation_start``; ``joint_attach_ke`` /
    ``joint_attach_kd`` (SemiImplicitSolver joint springs).

    Worlds (``inertia.worlds`` says more): ``num_worlds``; per entity ``particle_world``, ``body_world``,
    ``shape_world`` (-1: a static shape shared by every world), ``joint_world``, ``spring_world``,
    ``tri_world``, ``edge_world``, ``tet_world``, and per entry of ``joint_q`` / ``joint_qd``
    ``joint_coord_world`` / ``joint_dof_world``. Worlds never interact. ``replicate`` lays entities
    out world by world; :meth:`world_counts` gives the per-world sizes of such a layout, so a
    world's slice of any per-entity array (masses, inertias, ``shape_material_mu``, stiffnesses: the
    per-world parameters of domain randomization) is ``[w * count:(w + 1) * count]``.
    :meth:`reset_worlds` puts chosen worlds of a state back to the initial state.

    Per world: ``gravity`` (``wp.array`` of ``num_worlds`` vec3 [m/s^2], differentiable; the builder's
    value in every world; set world w's with e.g. ``g = model.gravity.numpy(); g[w] = ...;
    model.gravity.assign(g)``).

    Scalars:
    ``particle_tau`` [s], ``particle_zeta`` (particle-particle contact, mass-scaled; 0: the absolute
    ``particle_ke``, ``particle_kd``), ``particle_mu``,
    ``particle_damping`` [1/s], ``friction_smoothing`` [m/s], ``contact_margin`` [m],
    ``contact_smoothing`` [m] (0: plain penalty contact; see ``inertia.solvers.forces.contact``),
    ``rigid_contact_margin`` [m] (shape-shape contacts are detected this far apart).
    """

    @classmethod
    def _from_builder(cls, b, device=None, requires_grad=False) -> "Model":
        m = cls.__new__(cls)
        build_model(m, b, device, requires_grad)
        shape_types(m)  # read once here, so no step's first call reads the device (capturable from the start)
        return m

    # ------------------------------------------------------------------ worlds
    def world_counts(self) -> dict | None:
        """Entities per world when the layout is uniform, else None.

        Returns ``{"particles", "bodies", "joints", "joint_coords", "joint_dofs"}`` (counts per world)
        when every world holds the same number of each and they are sorted by world (world-contiguous:
        world ``w``'s bodies are ``w * bodies .. (w + 1) * bodies - 1``, and so on), as
        ``ModelBuilder.replicate`` lays them out; a one-world model always qualifies. None otherwise
        (worlds of different sizes, or entities interleaved across worlds).
        """
        return None if self._world_counts is None else dict(self._world_counts)

    def reset_worlds(self, state: State, mask) -> None:
        """Reset the worlds of ``state`` where ``mask`` is set to the model's initial state; see
        :func:`inertia.worlds.reset_worlds` (a device-array mask makes it capturable)."""
        from .worlds import reset_worlds

        reset_worlds(self, state, mask)

    # ------------------------------------------------------------------ factories
    @property
    def torch_device(self):
        """The ``torch.device`` matching this model's Warp device (where rollout tensors must live)."""
        import torch

        return torch.device(wp.device_to_torch(self.device))

    def count(self, entity: str) -> int:
        """How many entries an entity of :mod:`inertia.schema` has in this model (``"joint_dof"``, ...)."""
        return int(getattr(self, COUNT_OF[entity]))

    def state(self, requires_grad: bool | None = None) -> State:
        """A new State holding the model's initial particle and body positions and velocities.

        Every field of :data:`inertia.schema.STATE_FIELDS` is allocated; ``joint_q`` / ``joint_qd`` are
        computed from the initial body poses.
        """
        g = self.requires_grad if requires_grad is None else bool(requires_grad)
        if g:
            enable_gradients()  # a state that carries gradients will be recorded: kernels with their adjoints
        s = State()
        for f in STATE_FIELDS:
            if f.source == "model":
                setattr(s, f.name, wp.clone(getattr(self, f.name), requires_grad=g))
            else:
                setattr(s, f.name, wp.zeros(self.count(f.entity), dtype=f.dtype, device=self.device,
                                            requires_grad=g))
        if self.joint_count:
            from .kinematics import eval_ik

            eval_ik(self, s)
        return s

    def control(self, requires_grad: bool | None = None) -> Control:
        """A new Control with zero external forces, wrenches, drive targets and efforts."""
        g = self.requires_grad if requires_grad is None else bool(requires_grad)
        c = Control()
        for f in CONTROL_FIELDS:
            setattr(c, f.name, wp.zeros(self.count(f.entity), dtype=f.dtype, device=self.device, requires_grad=g))
        return c

    @property
    def collision(self):
        """This model's :class:`inertia.collision.CollisionPipeline` (sizes contacts, runs detection, owns its
        scratch and the tape's contact history); ``contacts()`` and ``collide()`` forward to it."""
        pipeline = getattr(self, "_collision", None)
        if pipeline is None:
            from .collision.pipeline import CollisionPipeline

            pipeline = self._collision = CollisionPipeline(self)
        return pipeline

    def contacts(self, soft_contact_max: int | None = None, particle_pair_max: int | None = None,
                 rigid_pair_max: int | None = None, rigid_contact_max: int | None = None,
                 grid_dim: int | None = None) -> Contacts:
        """Contact buffers with fixed capacities.

        Defaults: ``particle_count * min(shape_count, 4)`` particle-shape contacts,
        ``particle_count * 12`` particle pairs (enough for dense packing plus margin),
        for each shape on a body 8 shape-shape candidate pairs plus one per plane it can
        meet (the shared planes and its own world's), and 8 contact points per pair
        (a box on a plane uses 4, two boxes face to face 8, the most a pair of boxes can
        request is 40) plus, for each mesh on a body, its vertex count per plane and once
        more (mesh-plane and mesh-box contacts test every vertex). Linear in the number
        of worlds, also when every world has its own ground plane. ``grid_dim``: buckets per
        axis of the particle-particle cell list (``grid_dim^3`` buckets, 8 bytes each; cells
        wrap around it, so far-apart cells share a bucket, which costs time, never pairs);
        default about 16 buckets per particle, 16..128.
        """
        return self.collision.contacts(soft_contact_max, particle_pair_max, rigid_pair_max, rigid_contact_max,
                                       grid_dim)

    def collide(self, state: State, contacts: Contacts, check_overflow: bool | None = None,
                record_history: bool = True) -> Contacts:
        """Run collision detection on ``state`` and fill ``contacts``.

        Args:
            check_overflow: warn when a buffer overflowed (a host read of two
                counters). Default: on, except while a graph is being captured.

        Under a recording ``wp.Tape`` one ``Contacts`` may be reused for every
        step: each call keeps a device copy of the contact lists it found and
        records a tape entry that puts the previous step's lists back during
        ``tape.backward()``, so the backward pass of every step sees the
        contacts that its forward pass used (not the last step's). The cost is
        one copy of the contact buffers per recorded step. Pass
        ``record_history=False`` when every recorded step has a ``Contacts`` of
        its own (as :class:`inertia.Rollout` does): then nothing is copied.
        """
        return self.collision.collide(state, contacts, check_overflow, record_history)
