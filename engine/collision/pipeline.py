"""The collision pipeline of one model: it sizes contact buffers, runs the detection stages, and owns their
scratch and the tape's contact history.

``model.contacts(...)`` and ``model.collide(...)`` forward here (``model.collision``). What it owns:

- the shape broad phase's buffers (AABBs, sort keys, the pair filter), made on the first detection;
- the particle-particle cell lists, one per ``grid_dim`` (every :class:`Contacts` of the model with that
  grid size shares it: a rollout's per-step contacts, several simulations of one model);
- the contact history of recorded tapes: under a recording ``wp.Tape`` one :class:`Contacts` may serve
  every step; each ``collide`` keeps a device copy of the lists it found and records a backward-only tape
  entry that puts the previous step's lists back, so every step's adjoint sees its own contacts.

Detection only selects pairs and material points: nothing here is differentiated (the solvers recompute
distances and normals from current poses and carry the gradients).
"""

from __future__ import annotations

import weakref

import numpy as np
import warp as wp

from ..autodiff.tape import recording_tape
from ..contacts import STATUS_COLLIDES, STATUS_NONFINITE, Contacts
from ..replay import Replay
from ..signed import signature
from ..types import GEO_MESH, GEO_PLANE, SHAPE_FLAG_COLLIDE_SHAPES

# the contact lists a step's solver reads (what the tape history saves and restores)
LIST_BUFFERS = ("soft_contact_count", "soft_contact_particle", "soft_contact_shape", "particle_pair_count",
                "particle_pair", "rigid_contact_count", "rigid_contact_shape0", "rigid_contact_shape1",
                "rigid_contact_point0", "rigid_contact_thickness0", "rigid_contact_normal1")


def _check_arrays(model, state, contacts) -> None:
    owner = getattr(contacts, "made_for", None)
    if owner is not None and owner() is not model:
        raise ValueError("collide(): these contacts were made by another model's contacts(); their capacities "
                         "were sized for that model: use this model's contacts()")
    if state.particle_q is None or state.particle_q.shape[0] != model.particle_count:
        raise ValueError("collide(): state does not belong to this model (particle count differs)")
    if state.body_q is None or state.body_q.shape[0] != model.body_count:
        have = None if state.body_q is None else state.body_q.shape[0]
        raise ValueError(f"collide(): state does not belong to this model (state.body_q has {have} bodies, "
                         f"the model {model.body_count})")
    devices = {str(a.device) for a in (state.particle_q, state.body_q)} | {str(contacts.device)}
    if devices != {str(model.device)}:
        raise ValueError(
            f"collide(): arrays on different devices (model {model.device}, state.particle_q "
            f"{state.particle_q.device}, state.body_q {state.body_q.device}, contacts {contacts.device})"
        )


# the state scan reads positions for NaN/inf and is launched off the tape: no adjoint kernels to compile
wp.set_module_options({"enable_backward": False})


@wp.kernel
def scan_state_kernel(
    # Data in:
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # In:
    particle_count: int,
    body_count: int,
    # Data out:
    status: wp.array(dtype=wp.int32),
):
    """status[STATUS_NONFINITE] = the current collide() index where an entry of the state is NaN/inf."""
    i = wp.tid()
    bad = False
    if i < particle_count:
        x, v = particle_q[i], particle_qd[i]
        bad = not (wp.isfinite(x) and wp.isfinite(v))
    if i < body_count:
        q, qd = body_q[i], body_qd[i]
        bad = bad or not (wp.isfinite(wp.transform_get_translation(q)) and wp.isfinite(wp.transform_get_rotation(q))
                          and wp.isfinite(qd))
    if bad:
        wp.atomic_min(status, STATUS_NONFINITE, status[STATUS_COLLIDES])


def scan_state(model, state, contacts) -> None:
    """Flag a non-finite state in ``contacts.status`` (a kernel, no host read: read with the contact counts)."""
    n = max(model.particle_count, model.body_count)
    if n:
        wp.launch(scan_state_kernel, dim=n, device=model.device, record_tape=False,
                  inputs=[state.particle_q, state.particle_qd, state.body_q, state.body_qd, model.particle_count,
                          model.body_count], outputs=[contacts.status])


class CollisionPipeline:
    """Contact detection for one :class:`inertia.Model` (see the module docstring)."""

    def __init__(self, model):
        self._model = weakref.ref(model)  # the model owns its pipeline, not the other way round
        self._broad_phase = None
        self._cell_lists = {}
        self._overflow_selection = None
        self._history = weakref.WeakKeyDictionary()  # contacts -> (tape ref, entry index, entry, snapshots)
        # a plain loop's collide calls replay from graphs captured per signature (.enabled = False: off)
        self.replay = Replay(model.device)

    @property
    def model(self):
        return self._model()

    # ------------------------------------------------------------------ scratch
    def broad_phase(self):
        """The shape broad phase's buffers (host reads and allocations on the first call only)."""
        if self._broad_phase is None:
            from .broad_phase import ShapeBroadPhase

            self._broad_phase = ShapeBroadPhase(self.model)
        return self._broad_phase

    def reset_broad_phase(self) -> None:
        """Count again which shape pairs and contacts can exist (``candidate_bounds.possible_pairs_and_contacts``) after
        collision groups, masks, flags or exclusions were changed in place, and drop this pipeline's replayed
        graphs (they froze whether the overflow selection runs). A graph of your own that holds a ``collide``
        must be captured again too."""
        if self._broad_phase is not None:
            self._broad_phase.count_possible(self.model)
        self.replay.clear()

    def cell_list(self, grid_dim: int):
        """The particle cell list with ``grid_dim^3`` buckets (allocates on first use: not inside a capture)."""
        grid = self._cell_lists.get(int(grid_dim))
        if grid is None:
            from .particle_particle import ParticleCellList

            model = self.model
            grid = self._cell_lists[int(grid_dim)] = ParticleCellList(model.particle_count, grid_dim, model.device)
        return grid

    def overflow_selection(self):
        """The scratch that keeps a full list's deepest candidates (``selection.py``; allocates on first use)."""
        if self._overflow_selection is None:
            from .selection import OverflowSelection

            self._overflow_selection = OverflowSelection(self.model.device)
        return self._overflow_selection

    def prepare(self, contacts: Contacts) -> None:
        """Allocate every buffer a ``collide`` into ``contacts`` needs, so that it can be captured."""
        model = self.model
        self.overflow_selection()
        if model.particle_collide and model.particle_count:
            self.cell_list(contacts.grid_dim)
        if model.body_count and model.shape_count > 1:
            self.broad_phase()

    # ------------------------------------------------------------------ buffers
    def contacts(self, soft_contact_max: int | None = None, particle_pair_max: int | None = None,
                 rigid_pair_max: int | None = None, rigid_contact_max: int | None = None,
                 grid_dim: int | None = None) -> Contacts:
        """Contact buffers with fixed capacities (see :meth:`inertia.Model.contacts` for the defaults)."""
        model = self.model
        if soft_contact_max is None:
            soft_contact_max = model.particle_count * min(model.shape_count, 4)
        if particle_pair_max is None:
            particle_pair_max = model.particle_count * 12 if model.particle_collide else 0
        if rigid_pair_max is None or rigid_contact_max is None:
            body = model.shape_body.numpy()
            kinds = model.shape_type.numpy()
            world = model.shape_world.numpy()
            collides = (model.shape_flags.numpy() & SHAPE_FLAG_COLLIDE_SHAPES) != 0
            plane_world = world[collides & (kinds == GEO_PLANE)]
            per_world = np.bincount(plane_world + 1, minlength=model.num_worlds + 1)  # row 0: shared planes
            # the planes each shape can meet: the shared ones and its own world's
            planes = per_world[0] + np.where(world >= 0, per_world[np.maximum(world, 0) + 1], 0)
            on_body = collides & (body >= 0)
        if rigid_pair_max is None:
            rigid_pair_max = int(np.sum(planes[on_body] + 8))
        if rigid_contact_max is None:
            mesh_shapes = np.flatnonzero(kinds == GEO_MESH)  # model.shape_meshes holds their meshes in this order
            vertices = sum(int(mesh.points.shape[0]) * int(planes[s] + 1)
                           for s, mesh in zip(mesh_shapes, model.shape_meshes) if on_body[s])
            rigid_contact_max = 8 * rigid_pair_max + vertices
        caps = (soft_contact_max, particle_pair_max, rigid_pair_max, rigid_contact_max)
        if min(caps) < 0:
            raise ValueError(f"contact capacities must be >= 0, got {caps}")
        if grid_dim is None:
            grid_dim = int(min(128, max(16, round((16 * model.particle_count) ** (1.0 / 3.0)))))
        contacts = Contacts(soft_contact_max, particle_pair_max, device=model.device, rigid_pair_max=rigid_pair_max,
                            rigid_contact_max=rigid_contact_max, grid_dim=grid_dim)
        contacts.made_for = weakref.ref(model)
        return contacts

    # ------------------------------------------------------------------ detection
    def collide(self, state, contacts: Contacts, check_overflow: bool | None = None,
                record_history: bool = True) -> Contacts:
        """Clear the counters; particle-shape contacts; particle pairs; shape pairs (broad phase) and their
        contact points (narrow phase); keep the peak counts. See :meth:`inertia.Model.collide`. A plain loop's
        calls replay from graphs captured per signature (:mod:`inertia.replay`)."""
        model = self.model
        _check_arrays(model, state, contacts)
        tape = recording_tape() if record_history else None
        if tape is not None:
            self._record_restore(tape, contacts)  # before detection overwrites the previous step's lists
        if self.replay.active():
            # the model owns this pipeline and its replay: its identity is in the key, but it is not held
            self.replay.run(signature(model, state, contacts), (state, contacts), lambda: self._detect(state, contacts))
        else:
            self._detect(state, contacts)
        if tape is not None:
            self._history[contacts][3].append(tuple(wp.clone(getattr(contacts, n)) for n in LIST_BUFFERS))
        if check_overflow is None:
            check_overflow = not model.device.is_capturing
        if check_overflow:
            contacts.check()  # one host read; the warnings name the caller of model.collide
        return contacts

    def _detect(self, state, contacts: Contacts) -> None:
        """Every detection kernel of one ``collide`` (no host reads: capturable)."""
        from .broad_phase import detect_shape_pairs
        from .narrow_phase import detect_shape_contacts
        from .particle_particle import detect_particle_pairs
        from .particle_shape import detect_particle_shape_contacts

        model = self.model
        contacts.clear()
        scan_state(model, state, contacts)
        detect_particle_shape_contacts(model, state, contacts)
        detect_particle_pairs(model, state, contacts)
        detect_shape_pairs(model, state, contacts)
        detect_shape_contacts(model, state, contacts)
        contacts.record_peak()

    # ------------------------------------------------------------------ the tape's contact history
    def history(self, tape, contacts) -> list:
        """Per-step snapshots of ``contacts`` recorded on ``tape``.

        A new list when the tape is another one, or was reset since (its last restore entry is no longer
        where it was recorded), so nothing accumulates across resets.
        """
        rec = self._history.get(contacts)
        if rec is not None:
            ref, index, entry, history = rec
            launches = getattr(tape, "launches", None)
            if ref() is tape and launches is not None and len(launches) > index and launches[index] is entry:
                return history
        return []

    def _record_restore(self, tape, contacts) -> None:
        """Record a backward-only tape entry that restores the lists of the step before this one.

        Entry k (recorded before detection k) runs in the backward pass after step k's adjoint and before
        step k-1's, so it puts snapshot k-1 back. Entry 0 runs last and puts the final step's lists back, so
        a second ``backward()`` works too.
        """
        history = self.history(tape, contacts)
        k = len(history)

        def restore():
            if history:
                for name, saved in zip(LIST_BUFFERS, history[k - 1] if k > 0 else history[-1]):
                    wp.copy(getattr(contacts, name), saved)

        tape.record_func(backward=restore, arrays=[])
        self._history[contacts] = (weakref.ref(tape), len(tape.launches) - 1, restore, history)
