"""Throw a cloth so that it comes to rest with its centre of mass on a target, by optimising its initial velocities.

A small cloth sheet (neo-Hookean membrane triangles plus dihedral bending) is
thrown from 0.4 m up; it flies, slaps onto the ground, bounces and is stopped
by Coulomb friction. The loss is the squared horizontal distance between its
centre of mass at the end of the rollout and a target on the ground.
``torch.optim.Adam`` optimises the initial velocity of every particle (an
``(N, 3)`` tensor, starting from one common throw) through flight, impact and
friction.

    python examples/cloth_throw.py          # writes examples/out/cloth_throw.usda and .png
"""

from __future__ import annotations

import os
import time

import torch

import inertia
from _common import example_parser, finish, init_warp, optimize, save_loss_plot, write_usd


def build(cells: int, size: float, height: float, mu: float, device):
    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.particle_collide = False  # the sheet never folds onto itself here; saves the broad phase
    b.add_ground_plane(ke=1.0e4, kd=50.0, mu=mu)  # well damped: the sheet lands instead of bouncing about
    cell = size / cells
    b.add_cloth_grid(cells, cells, pos=(-0.5 * size, -0.5 * size, height), cell_x=cell, cell_y=cell,
                     mass=0.1, tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0, edge_ke=0.01, particle_radius=0.02)
    return b.finalize(device=device, requires_grad=True)


def main(argv=None):
    p = example_parser(__doc__, iters=25, frames=60, substeps=10, lr=0.1)
    p.add_argument("--cells", type=int, default=4, help="cloth cells per side ((cells + 1)^2 particles)")
    p.add_argument("--size", type=float, default=0.4, help="cloth side length [m]")
    p.add_argument("--target", type=float, nargs=2, default=(1.5, 0.8), help="target for the COM (x, y) [m]")
    p.add_argument("--velocity", type=float, nargs=3, default=(2.0, 0.5, 1.0), help="initial guess [m/s]")
    p.add_argument("--mu", type=float, default=0.4, help="ground friction")
    args = p.parse_args(argv)

    init_warp()
    start = time.perf_counter()
    model = build(args.cells, args.size, 0.4, args.mu, args.device)
    solver = inertia.SemiImplicitSolver(model)
    rollout = inertia.Rollout(model, solver, frames=args.frames, frame_dt=1.0 / 60.0, substeps=args.substeps)
    dev = model.torch_device
    n = model.particle_count
    q0 = torch.tensor(model.particle_q.numpy(), device=dev)
    target = torch.tensor(args.target, dtype=torch.float32, device=dev)
    velocities = torch.tensor(args.velocity, dtype=torch.float32, device=dev).repeat(n, 1).requires_grad_(True)

    optimizer = torch.optim.Adam([velocities], lr=args.lr, betas=(0.5, 0.9))
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)

    def evaluate():
        q, qd = rollout(q0, velocities)
        com = q[-1].mean(dim=0)  # equal particle masses: the centre of mass is the mean position
        return ((com[:2] - target) ** 2).sum(), com, q, qd

    history, (loss, com, q, qd) = optimize(evaluate, optimizer, args.iters, "cloth_throw",
                                           lambda com, *_: f"com ({com[0]:.3f}, {com[1]:.3f}, {com[2]:.3f})",
                                           schedule, quiet=args.quiet)

    v = velocities.detach()
    speed_end = float(qd[-1].norm(dim=1).max())
    os.makedirs(args.out, exist_ok=True)
    usd = write_usd(os.path.join(args.out, "cloth_throw.usda"), model, q)
    png = save_loss_plot(history, os.path.join(args.out, "cloth_throw_loss.png"),
                         "cloth_throw: squared COM error [m^2]")
    return finish("cloth_throw", history, {
        "particles": n,
        "mean_velocity": v.mean(dim=0).cpu().tolist(),
        "velocity_spread": float((v - v.mean(dim=0)).norm(dim=1).max()),  # how far particles left the common throw
        "com": com.cpu().tolist(),
        "target": list(args.target),
        "com_error_m": float((com[:2] - target).norm()),
        "max_speed_at_end": speed_end,
    }, usd, png, start)


if __name__ == "__main__":
    main()
