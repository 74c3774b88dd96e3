"""Force stages of per-element kernels: springs, membrane triangles, bending edges, tetrahedra.

Each is one kernel launched over the model's elements of one kind, reading the element's model arrays
and the particles of ``state_in`` and adding into ``state_out.particle_f``: the stage is declared by
its kernel, the count and those arrays (:func:`element_force_stage`).

Damping never overshoots, so it is stable at any step: an element whose damping would remove its own
strain rate at ``r = kd * sum_v |g_v|^2 w_v * n`` [1/s] (g_v the gradient of its strain measure with
respect to vertex v, w_v the inverse masses, n the most elements on one of its particles: their shares
split like XPBD's mass splitting) applies ``kd / sqrt(1 + (dt r)^2)``: explicit damping where
``dt r`` is small (a relative change of ``(dt r)^2 / 2``, 1e-6 at the README's steps), and at most the
rate that stops the element's own motion in one step where it is large (explicit damping diverges once
``dt r > 2``). For a lone damped spring at rest length the relative speed decays by
``1 - x / sqrt(1 + x^2)``, x = dt kd (w_i + w_j), per step (tests/test_stability.py).
"""

import warp as wp

from ..step_data import stage


@wp.func
def implicit_damping(kd: float, rate_per_kd: float, dt: float):
    """The damping coefficient an element applies: kd / sqrt(1 + (dt kd rate_per_kd)^2) (see the module doc)."""
    x = dt * kd * rate_per_kd
    return kd / wp.sqrt(1.0 + x * x)


@wp.func
def element_share(count: wp.array(dtype=wp.int32), i: int, j: int, k: int, l: int):
    """The most elements on one of the particles i, j, k, l (negative indices: not a vertex)."""
    n = count[i]
    if j >= 0:
        n = wp.max(n, count[j])
    if k >= 0:
        n = wp.max(n, count[k])
    if l >= 0:
        n = wp.max(n, count[l])
    return float(wp.max(n, 1))


def element_force_stage(name: str, kernel, count: str, arrays: tuple):
    """The stage ``fn(model, data)`` launching ``kernel(*model arrays, particle_inv_mass, particle_element_count,
    particle_q, particle_qd, dt) -> particle_f``.

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
                  inputs=[*(getattr(model, a) for a in arrays), model.particle_inv_mass,
                          model.particle_element_count, state.particle_q, state.particle_qd, data.dt],
                  outputs=[data.state_out.particle_f])

    eval_forces.__doc__ = f"Stage: the forces of every element counted by ``model.{count}``, into ``particle_f``."
    return eval_forces
