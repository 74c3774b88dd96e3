"""Dense per-articulation Cholesky factor and solve, one thread per articulation, differentiable by ``wp.Tape``.

Each articulation's matrix is a dense ``n x n`` row-major block at ``art_mat_start[a]`` of a flat array,
its vectors a block of ``n`` at ``art_dof_start[a]``. The kernels are written so that Warp's own adjoints
are exact (``wp.Tape`` differentiates them, no hand-written backward): every array element is written
once, and every sum is accumulated with ``wp.atomic_add`` into a scratch array of the step (Warp's
reverse pass replays a dynamic loop's body per iteration, so a local variable carried from one
iteration to the next would not be differentiated; an atomic add into an element that is read only
after its last add is). The scratch arrays must be zero when a kernel starts; they belong to the
step's output state, like the factors. (The same holds for the solver's tree walks: a child reads what
its parent's iteration wrote. ``wp.config.verify_autograd_array_access`` reports such arrays as
"written to after it has been read from within the same kernel"; that static check cannot see that
the entries differ, and the gradient tests check the adjoints against finite differences. Sums are
written inline in the kernels, not in ``wp.func``s: Warp replays a function call in the reverse pass,
and an atomic add inside it would add twice.)

Left-looking (Cholesky-Crout) order: column j of L needs only the columns before it. A pivot that is
not positive (a matrix that is not positive definite) gives NaN, which the solver's finite checks name.

The atomic adds cost: on a CPU, a 32-dof chain's factor took 23 us in them. So on a CPU, while no
``wp.Tape`` records, the step factors and solves with forward-only twins that sum in a local variable
(:func:`factor`'s, and ``dynamics.solve_forward_kernel``: the last factor, the solve and the velocity
limits in one launch): the same float additions in the same order (0 + t_0 + t_1 + ...), so the same bits
(tests/test_featherstone_linalg.py checks), 2x faster; a recorded step takes the differentiable kernels.
CPU only: Warp's CPU compiler contracts a multiply-add only within one source expression, and Warp's
generated code keeps the product and the sum apart, while CUDA (``fuse_fp``, on by default) may fuse a
local sum's multiply-add where it cannot fuse one handed to an atomic add: there the twins could round
differently, and a Rollout's taped re-simulation would leave the trajectory it differentiates.
"""

import warp as wp

from ...autodiff.backward_code import on_demand
from ...autodiff.tape import recording_tape
from .topology import Tree, articulation_block

on_demand(__name__)  # backward code compiled once gradients are wanted


@wp.kernel
def cholesky_kernel(
    # Model:
    tree: Tree,
    # Data in:
    A: wp.array(dtype=float),
    # Data out:
    partial: wp.array(dtype=float),  # zero on entry: sum_k L[i, k] L[j, k] per entry
    L: wp.array(dtype=float),  # its upper triangle stays as it was (zero)
):
    a = wp.tid()
    d0, n, m0 = articulation_block(tree, a)
    for j in range(n):
        jj = m0 + j * n + j
        for k in range(j):
            wp.atomic_add(partial, jj, L[m0 + j * n + k] * L[m0 + j * n + k])
        L[jj] = wp.sqrt(A[jj] - partial[jj])
        for i in range(j + 1, n):
            ij = m0 + i * n + j
            for k2 in range(j):
                wp.atomic_add(partial, ij, L[m0 + i * n + k2] * L[m0 + j * n + k2])
            L[ij] = (A[ij] - partial[ij]) / L[jj]


@wp.kernel
def cholesky_solve_kernel(
    # Model:
    tree: Tree,
    # Data in:
    L: wp.array(dtype=float),
    b_joint: wp.array(dtype=float),
    b_contact: wp.array(dtype=float),
    b_bias: wp.array(dtype=float),
    # In:
    dt: float,
    # Data out:
    partial_y: wp.array(dtype=float),  # zero on entry
    y: wp.array(dtype=float),
    partial_x: wp.array(dtype=float),  # zero on entry
    x: wp.array(dtype=float),
):
    """x = (L L^T)^-1 b with b = dt (b_joint + b_contact - b_bias): the velocity change of the step."""
    a = wp.tid()
    d0, n, m0 = articulation_block(tree, a)
    for i in range(n):
        for k in range(i):
            wp.atomic_add(partial_y, d0 + i, L[m0 + i * n + k] * y[d0 + k])
        b = dt * (b_joint[d0 + i] + b_contact[d0 + i] - b_bias[d0 + i])
        y[d0 + i] = (b - partial_y[d0 + i]) / L[m0 + i * n + i]
    for ii in range(n):
        i2 = n - 1 - ii
        for k2 in range(i2 + 1, n):
            wp.atomic_add(partial_x, d0 + i2, L[m0 + k2 * n + i2] * x[d0 + k2])
        x[d0 + i2] = (y[d0 + i2] - partial_x[d0 + i2]) / L[m0 + i2 * n + i2]


@wp.func
def factor_block(A: wp.array(dtype=float), m0: int, n: int, L: wp.array(dtype=float)):
    """L L^T = A of the n x n block at ``m0``, the sums in local variables: the forward-only twins' factor
    (:func:`cholesky_forward_kernel`, ``dynamics.solve_forward_kernel``); no adjoint (see above)."""
    for j in range(n):
        jj = m0 + j * n + j
        diagonal = float(0.0)
        for k in range(j):
            diagonal += L[m0 + j * n + k] * L[m0 + j * n + k]
        L[jj] = wp.sqrt(A[jj] - diagonal)
        for i in range(j + 1, n):
            ij = m0 + i * n + j
            below = float(0.0)
            for k2 in range(j):
                below += L[m0 + i * n + k2] * L[m0 + j * n + k2]
            L[ij] = (A[ij] - below) / L[jj]


@wp.func
def solve_block(L: wp.array(dtype=float), m0: int, n: int, d0: int, b_joint: wp.array(dtype=float),
                b_contact: wp.array(dtype=float), b_bias: wp.array(dtype=float), dt: float,
                y: wp.array(dtype=float), x: wp.array(dtype=float)):
    """x = (L L^T)^-1 dt (b_joint + b_contact - b_bias) of the block at (``m0``, ``d0``), the sums in local
    variables (``dynamics.solve_forward_kernel``). ``b_joint`` may be ``x`` itself: it is read before x is
    written."""
    for i in range(n):
        forward = float(0.0)
        for k in range(i):
            forward += L[m0 + i * n + k] * y[d0 + k]
        b = dt * (b_joint[d0 + i] + b_contact[d0 + i] - b_bias[d0 + i])
        y[d0 + i] = (b - forward) / L[m0 + i * n + i]
    for ii in range(n):
        i2 = n - 1 - ii
        backward = float(0.0)
        for k2 in range(i2 + 1, n):
            backward += L[m0 + k2 * n + i2] * x[d0 + k2]
        x[d0 + i2] = (y[d0 + i2] - backward) / L[m0 + i2 * n + i2]


@wp.func
def factor_or_reuse_block(A: wp.array(dtype=float), A0: wp.array(dtype=float), L0: wp.array(dtype=float),
                          reuse: int, m0: int, n: int, L: wp.array(dtype=float)):
    """:func:`factor_block` of A's block at ``m0``, or with ``reuse`` != 0, L0's where A's block equals A0's entry
    for entry (no contact touched it: the same bits as factoring it again, in n^2 reads instead of n^3 / 6
    multiply-adds)."""
    same = int(reuse != 0)
    if same != 0:
        for e in range(n * n):
            if A[m0 + e] != A0[m0 + e]:
                same = 0
    if same != 0:
        for e2 in range(n * n):
            L[m0 + e2] = L0[m0 + e2]
    else:
        factor_block(A, m0, n, L)


@wp.kernel(enable_backward=False)
def cholesky_forward_kernel(
    # Model:
    tree: Tree,
    # Data in:
    A: wp.array(dtype=float),
    # Data out:
    L: wp.array(dtype=float),
):
    """:func:`cholesky_kernel` without its adjoint: the sums in local variables (the same bits)."""
    a = wp.tid()
    d0, n, m0 = articulation_block(tree, a)
    factor_block(A, m0, n, L)


def forward_only(device) -> bool:
    """Whether a step on ``device`` runs the forward-only twins now (a CPU, no ``wp.Tape`` recording): then the
    taped kernels' scratch sums (``partial*``) are neither written nor read, and need no zeroing."""
    return recording_tape() is None and device.is_cpu


def factor(topology, A, partial, L) -> None:
    """Stage: L with L L^T = A for every articulation (``partial`` must be zero; used only on a tape or a GPU)."""
    if forward_only(A.device):
        wp.launch(cholesky_forward_kernel, dim=topology.articulation_count, inputs=[topology.tree, A], outputs=[L],
                  device=A.device)
        return
    wp.launch(cholesky_kernel, dim=topology.articulation_count,
              inputs=[topology.tree, A], outputs=[partial, L],
              device=A.device)


def solve(topology, L, b_joint, b_contact, b_bias, dt: float, partial_y, y, partial_x, x) -> None:
    """Stage: x = (L L^T)^-1 dt (b_joint + b_contact - b_bias) for every articulation (``partial_*`` must be
    zero), with the differentiable kernel (a CPU step off the tape solves in ``dynamics.solve_forward_kernel``,
    its factor and velocity limits in the same launch)."""
    wp.launch(cholesky_solve_kernel, dim=topology.articulation_count,
              inputs=[topology.tree, L, b_joint, b_contact, b_bias, dt], outputs=[partial_y, y, partial_x, x],
              device=L.device)
