"""Jacobi iterations with mass splitting: how much of its correction each constraint applies, and applying them.

Every constraint of an iteration reads the same iterate and adds its correction to that iteration's
accumulator (``delta``, ``body_delta``); :func:`apply_corrections` and ``body_jacobi.apply_body_corrections``
then write iterate k + 1 = iterate k + the summed corrections into a new row: every iterate stays
available to a recorded tape.

**Step-local iterates.** The iterates are what moved since the step began (``integrators/xpbd.py``):
particle displacements dx (x = x_start + dx), and each body's motion (centre of mass displacement,
rotation) with its pose rebuilt from the step's start. A constraint reads differences of positions as
the difference of the start positions plus that of the displacements, and slips and rates from the
displacements alone, so nothing depends on how far from the origin the scene is.

**Particles.** The constraint kernels scale their corrections by the per-element factors of
:func:`jacobi_scales` (relaxation and mass splitting); contacts are applied in full.

**Bodies.** Their mass splitting and corrections: ``body_jacobi.py`` (a module of its own, so a particle
scene compiles no body kernels).
"""

from types import MappingProxyType

import numpy as np
import warp as wp

from ...autodiff.backward_code import on_demand
from ..step_data import stage
from . import hand_adjoint

on_demand(__name__)  # backward code compiled once gradients are wanted


def jacobi_scales(model, relaxation: float, splitting: str = "sqrt") -> MappingProxyType:
    """Per-element factors omega / sqrt(max n_i) over the element's particles.

    n_i counts the constraints on particle i: one per spring and bending
    edge, two per triangle (stretch, area) and per tet (deviatoric, volumetric).
    Why the square root: Jacobi corrections of
    the n constraints on a particle add up, and 1 / n (full mass splitting)
    guarantees they never overshoot together but converges very slowly on
    soft bodies (n ~ 20-40), while 1 / sqrt(n) reflects that the constraints
    of a well-shaped mesh push in different directions. Measured on a
    cantilever and a resting cube (tests/test_xpbd.py): within 1-2 % of the
    converged answer in 20 iterations where 1 / n needs ~100. The scale
    multiplies the multiplier increments as well as the corrections, so the
    converged equilibrium is unchanged. Computed once from the topology (host
    side, at solver construction). Returns ``{"spring", "tri", "edge", "tet"}`` arrays.
    """
    n = np.zeros(max(model.particle_count, 1))

    def topology(count, array, width):
        return array.numpy().reshape(-1, width) if count else np.zeros((0, width), int)

    ij = topology(model.spring_count, model.spring_indices, 2)
    tris = topology(model.tri_count, model.tri_indices, 3)
    edges = topology(model.edge_count, model.edge_indices, 4)
    tets = topology(model.tet_count, model.tet_indices, 4)
    for idx, per in ((ij, 1.0), (tris, 2.0), (edges, 1.0), (tets, 2.0)):
        for col in idx.T:
            np.add.at(n, col, per)

    def per_element(idx):
        if len(idx) == 0:
            return wp.zeros(1, dtype=float, device=model.device)
        share = np.maximum(n[idx].max(axis=1), 1.0)
        s = relaxation / (np.sqrt(share) if splitting == "sqrt" else share)
        return wp.array(s.astype(np.float32), dtype=float, device=model.device)

    # read-only: steps replay graphs that froze these arrays (inertia.replay); replace the mapping to change them
    return MappingProxyType({"spring": per_element(ij), "tri": per_element(tris), "edge": per_element(edges),
                             "tet": per_element(tets)})


# ---------------------------------------------------------------------------------------------- element constraints
def element_constraint_stage(name: str, kernel, count: str, arrays: tuple, multipliers: str, scale: str,
                             adjoint=None):
    """The stage ``fn(model, data, k)`` of a per-element constraint kernel on particle iterate k.

    The kernel reads ``particle_inv_mass`` and the model arrays named in ``arrays`` (its ``# Model:``
    group), then the step's start positions, displacement iterate k (the particles' motion since the
    step began: x = x_start + dx) and the multipliers of iterate k (buffer ``multipliers``), the
    element's Jacobi scales (``jacobi_scales()[scale]``) and dt, and writes iteration k's corrections
    and the multipliers of iterate k + 1. ``count``: the model attribute counting the elements. ``adjoint``:
    a hand-written adjoint kernel for a recording tape's backward pass (:mod:`.hand_adjoint`), or None: Warp's.
    """

    @stage(name)
    def solve(model, data, k: int) -> None:
        n = getattr(model, count)
        if n == 0:
            return
        rows = data.buffers.rows
        lam = getattr(rows, multipliers)
        inputs = [model.particle_inv_mass, *(getattr(model, a) for a in arrays), data.state_in.particle_q, rows.dx[k],
                  lam[k], data.solver.scales[scale], data.dt]
        outputs = [rows.delta[k], lam[k + 1]]
        if adjoint is None:
            wp.launch(kernel, dim=n, inputs=inputs, outputs=outputs, device=model.device)
        else:
            hand_adjoint.launch(kernel, adjoint, n, inputs, outputs, model.device)

    solve.__doc__ = f"Stage: the constraints of every element counted by ``model.{count}`` on particle iterate k."
    return solve


# ---------------------------------------------------------------------------------------------- corrections
@stage("clear corrections")
def clear_corrections(model, data) -> None:
    """Stage: zero every iteration's correction accumulators (the constraints add into them)."""
    data.buffers.delta.zero_()
    data.buffers.body_delta.zero_()


def _add_corrections_kernel(dtype):
    """x_out = x + delta elementwise, for one dtype (particle iterates: vec3; body velocities: spatial_vector).

    One definition, one kernel per dtype with a name of its own (Warp 1.19's CPU graph capture replays
    kernels by name: overloads sharing one would replay as whichever was recorded first).
    """

    @wp.kernel(name=f"add_corrections_{dtype.__name__}")
    def add_corrections(
        # Data in:
        x: wp.array(dtype=dtype),
        delta: wp.array(dtype=dtype),
        # Data out:
        x_out: wp.array(dtype=dtype),
    ):
        tid = wp.tid()
        x_out[tid] = x[tid] + delta[tid]

    return add_corrections


ADD_CORRECTIONS = {dtype: _add_corrections_kernel(dtype) for dtype in (wp.vec3, wp.spatial_vector)}


def add_corrections(model, count: int, x, delta, x_out) -> None:
    """``x_out = x + delta`` over ``count`` entries."""
    wp.launch(ADD_CORRECTIONS[x.dtype], dim=count, inputs=[x, delta], outputs=[x_out], device=model.device)


@stage("iteration {0}", writes=lambda data, k: {"dx": data.buffers.rows.dx[k + 1]})
def apply_corrections(model, data, k: int) -> None:
    """Stage: particle displacement iterate k + 1 = iterate k + iteration k's summed corrections."""
    if model.particle_count == 0:
        return
    rows = data.buffers.rows
    add_corrections(model, model.particle_count, rows.dx[k], rows.delta[k], rows.dx[k + 1])
