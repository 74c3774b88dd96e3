"""Bank shot: find the throw that bounces a ball off the ground and a wall and lands it on a target.

A ball (one particle with a radius) is thrown from (0, 0, 0.8) towards a wall (a
static box). It bounces off the ground, then off the wall, and flies back. The
rollout ends during that last flight; the landing point is the ballistic
extrapolation of the final state to the ground (exact in free flight, and
differentiable). The loss is its squared distance to the target, and
``torch.optim.Adam`` tunes the initial velocity through both bounces.

Contacts are penalty springs (no damping, so bounces are elastic and the
contact force is continuous). The ball is 1 kg with ke = 2500 N/m, so a bounce
lasts ~60 ms: resolved by ~60 solver steps, which keeps the gradient of the
discrete bounce close to that of the physical one.

    python examples/ball_bounce.py          # writes examples/out/ball_bounce.usda and .png
"""

from __future__ import annotations

import os
import time

import torch

import inertia
from _common import example_parser, finish, init_warp, optimize, save_loss_plot, write_usd

START = (0.0, 0.0, 0.8)
GRAVITY = 9.81


def build(radius: float, ke: float, mu: float, wall_x: float, target, device):
    b = inertia.ModelBuilder(up_axis="z", gravity=-GRAVITY)
    b.particle_collide = False  # one ball: no particle-particle contact needed
    b.add_ground_plane(ke=ke, kd=0.0, mu=mu)
    b.add_shape_box(xform=((wall_x + 0.1, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)), hx=0.1, hy=1.5, hz=1.0,
                    ke=ke, kd=0.0, mu=mu, label="wall")
    b.add_particle(START, mass=1.0, radius=radius)
    # a kinematic marker (mass 0) at the target, so the USD shows where the ball should land
    b.add_particle((target[0], target[1], 0.03), mass=0.0, radius=0.03)
    return b.finalize(device=device, requires_grad=True)


def landing_point(q, qd, radius: float):
    """Where a ball at q with velocity qd (in free flight) first touches the ground: (x, y)."""
    height, vz = (q[2] - radius).clamp(min=0.0), qd[2]
    t = (vz + torch.sqrt(vz * vz + 2.0 * GRAVITY * height)) / GRAVITY
    return q[:2] + qd[:2] * t


def main(argv=None):
    p = example_parser(__doc__, iters=30, frames=54, substeps=16, lr=0.1)
    p.add_argument("--target", type=float, nargs=2, default=(0.9, 0.6), help="landing target (x, y) [m]")
    p.add_argument("--velocity", type=float, nargs=3, default=(3.5, 0.0, 1.0), help="initial guess [m/s]")
    p.add_argument("--wall-x", type=float, default=2.5, help="x of the wall's face [m]")
    p.add_argument("--radius", type=float, default=0.15)
    p.add_argument("--ke", type=float, default=2500.0, help="contact stiffness [N/m]")
    p.add_argument("--mu", type=float, default=0.1, help="friction of ground and wall")
    p.add_argument("--tail", type=int, default=40, help="extra frames simulated for the USD (the landing)")
    args = p.parse_args(argv)

    init_warp()
    start = time.perf_counter()
    model = build(args.radius, args.ke, args.mu, args.wall_x, args.target, args.device)
    solver = inertia.SemiImplicitSolver(model)
    rollout = inertia.Rollout(model, solver, frames=args.frames, frame_dt=1.0 / 60.0, substeps=args.substeps)
    dev = model.torch_device
    q0 = torch.tensor(model.particle_q.numpy(), device=dev)
    target = torch.tensor(args.target, dtype=torch.float32, device=dev)
    velocity = torch.tensor(args.velocity, dtype=torch.float32, device=dev, requires_grad=True)
    marker_still = torch.zeros(1, 3, device=dev)  # the target marker never moves

    optimizer = torch.optim.Adam([velocity], lr=args.lr, betas=(0.5, 0.9))
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.95)

    def evaluate():
        q, qd = rollout(q0, torch.cat([velocity[None], marker_still]))
        land = landing_point(q[-1, 0], qd[-1, 0], args.radius)
        return ((land - target) ** 2).sum(), land, q

    history, (loss, land, q) = optimize(evaluate, optimizer, args.iters, "ball_bounce",
                                        lambda land, _: f"landing ({land[0]:.3f}, {land[1]:.3f})", schedule,
                                        quiet=args.quiet)

    # what the optimised throw did: it must touch the ground and the wall, and end in the air
    ball = q[:, 0].cpu()
    r = args.radius
    contacts = {"ground": bool(ball[:, 2].min() < r), "wall": bool(ball[:, 0].max() > args.wall_x - r),
                "airborne_at_end": bool(ball[-1, 2] > r and ball[-1, 0] < args.wall_x - r)}
    os.makedirs(args.out, exist_ok=True)
    with torch.no_grad():  # the USD also shows the landing, simulated past the optimised horizon
        show = inertia.Rollout(model, solver, frames=args.frames + max(0, args.tail), frame_dt=1.0 / 60.0,
                               substeps=args.substeps)
        q_show, _ = show(q0, torch.cat([velocity[None], marker_still]))
    usd = write_usd(os.path.join(args.out, "ball_bounce.usda"), model, q_show)
    png = save_loss_plot(history, os.path.join(args.out, "ball_bounce_loss.png"),
                         "ball_bounce: squared landing error [m^2]")
    return finish("ball_bounce", history, {
        "velocity": velocity.detach().cpu().tolist(),
        "landing": land.cpu().tolist(),
        "target": list(args.target),
        "landing_error_m": float((land - target).norm()),
        "contacts": contacts,
    }, usd, png, start)


if __name__ == "__main__":
    main()
