"""Force stages of per-element kernels: springs, membrane triangles, bending edges, tetrahedra.

Each is one kernel launched over the model's elements of one kind, reading the element's model arrays
and the particles of ``state_in`` and adding into ``state_out.particle_f``: the stage is declared by
its kernel, the count and those arrays (:func:`element_force_stage`).
"""

import warp as wp

from ..step_data import stage


def element_force_stage(name: str, kernel, count: str, arrays: tuple):
    """The stage ``fn(model, data)`` launching ``kernel(*model arrays, particle_q, particle_qd) -> particle_f``.

    ``count``: the model attribute counting the elements; ``arrays``: the model arrays the kernel reads
    first (its ``# Model:`` group), by name.
    """

    @stage(name, writes=lambda data: {"particle_f": data.state_out.particle_f})
    def eval_forces(model, data) -> None:
        n = getattr(model, count)
        if n == 0:
            return
        state = data.state_in
        wp.launch(kernel, dim=n, device=model.device,
                  inputs=[*(getattr(model, a) for a in arrays), state.particle_q, state.particle_qd],
                  outputs=[data.state_out.particle_f])

    eval_forces.__doc__ = f"Stage: the forces of every element counted by ``model.{count}``, into ``particle_f``."
    return eval_forces
