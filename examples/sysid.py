"""System identification: recover a spring's stiffness and the ground's friction from an observed trajectory.

A bob (0.1 kg) is tied by a spring to a kinematic anchor (mass 0) and sent
sliding around it on the ground; Coulomb friction slows it down until it sticks.
An "observed" trajectory is simulated with the true stiffness and friction
coefficient (optionally with Gaussian noise on the positions). Starting from
wrong guesses, ``torch.optim.Adam`` fits both so that the simulated trajectory
matches the observed one (mean squared distance over all frames). Both
parameters are optimised in log space (positive, and scale-free steps); they go
into the rollout as ``params={"spring_stiffness": ..., "shape_material_mu": ...}``.

    python examples/sysid.py                # writes examples/out/sysid.usda and .png
"""

from __future__ import annotations

import math
import os
import time

import torch

import inertia
from _common import add_identified_parameter, example_parser, finish, init_warp, optimize, save_loss_plot, write_usd

RADIUS, BOB_MASS, GROUND_KE = 0.05, 0.1, 1.0e4


def build(device):
    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.particle_collide = False
    b.add_ground_plane(ke=GROUND_KE, kd=10.0, mu=0.5)  # mu is overwritten by every rollout's params
    b.add_particle((0.0, 0.0, RADIUS), mass=0.0, radius=RADIUS)  # anchor: kinematic, never moves
    # the bob starts resting on the ground (sunk by its weight / ke) and is kicked sideways
    b.add_particle((0.3, 0.0, RADIUS - BOB_MASS * 9.81 / GROUND_KE), vel=(0.0, 2.0, 0.0), mass=BOB_MASS,
                   radius=RADIUS)
    b.add_spring(0, 1, ke=10.0, kd=0.0, rest_length=0.2)  # stretched by 0.1 m at the start
    return b.finalize(device=device, requires_grad=True)


def main(argv=None):
    p = example_parser(__doc__, iters=30, frames=60, substeps=10, lr=0.1)
    add_identified_parameter(p, "ke", true=20.0, guess=10.0, what="spring stiffness [N/m]")
    add_identified_parameter(p, "mu", true=0.3, guess=0.6, what="ground friction coefficient")
    p.add_argument("--noise", type=float, default=0.0, help="std of Gaussian noise on observed positions [m]")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    init_warp()
    start = time.perf_counter()
    model = build(args.device)
    solver = inertia.SemiImplicitSolver(model)
    rollout = inertia.Rollout(model, solver, frames=args.frames, frame_dt=1.0 / 60.0, substeps=args.substeps,
                              params=("spring_stiffness", "shape_material_mu"))
    dev = model.torch_device

    def simulate(ke, mu):
        q, _ = rollout(params={"spring_stiffness": ke.reshape(1), "shape_material_mu": mu.reshape(1)})
        return q

    with torch.no_grad():
        observed = simulate(torch.tensor(args.true_ke, device=dev), torch.tensor(args.true_mu, device=dev))
        if args.noise > 0:
            gen = torch.Generator(device="cpu").manual_seed(args.seed)
            observed = observed + args.noise * torch.randn(observed.shape, generator=gen).to(dev)

    log_ke = torch.tensor(math.log(args.guess_ke), device=dev, requires_grad=True)
    log_mu = torch.tensor(math.log(args.guess_mu), device=dev, requires_grad=True)
    optimizer = torch.optim.Adam([log_ke, log_mu], lr=args.lr, betas=(0.5, 0.99))
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)

    def evaluate():
        q = simulate(log_ke.exp(), log_mu.exp())
        return ((q - observed) ** 2).sum(dim=-1).mean(), q

    history, (loss, q) = optimize(evaluate, optimizer, args.iters, "sysid",
                                  lambda _: f"ke {log_ke.exp().item():7.3f}  mu {log_mu.exp().item():.4f}", schedule,
                                  quiet=args.quiet)

    ke, mu = log_ke.exp().item(), log_mu.exp().item()
    print(f"stiffness: true {args.true_ke:.4g} N/m, guess {args.guess_ke:.4g}, recovered {ke:.4g} "
          f"(rel. error {abs(ke - args.true_ke) / args.true_ke:.2%})")
    print(f"friction:  true {args.true_mu:.4g}, guess {args.guess_mu:.4g}, recovered {mu:.4g} "
          f"(rel. error {abs(mu - args.true_mu) / args.true_mu:.2%})")
    os.makedirs(args.out, exist_ok=True)
    write_usd(os.path.join(args.out, "sysid_observed.usda"), model, observed)
    usd = write_usd(os.path.join(args.out, "sysid.usda"), model, q)
    png = save_loss_plot(history, os.path.join(args.out, "sysid_loss.png"),
                         "sysid: mean squared trajectory error [m^2]")
    return finish("sysid", history, {
        "true": {"spring_stiffness": args.true_ke, "mu": args.true_mu},
        "guess": {"spring_stiffness": args.guess_ke, "mu": args.guess_mu},
        "recovered": {"spring_stiffness": ke, "mu": mu},
        "rel_error": {"spring_stiffness": abs(ke - args.true_ke) / args.true_ke,
                      "mu": abs(mu - args.true_mu) / args.true_mu},
    }, usd, png, start)


if __name__ == "__main__":
    main()
