"""Reach with a robot arm: optimise a two-link arm's joint targets so that its hand stops on a target.

A two-link arm (capsule links, 0.5 m and 0.4 m) hangs from a revolute shoulder
in the x-z plane and has a revolute elbow; both joints have PD drives
(``target_ke``, ``target_kd``) that pull towards ``Control.joint_target_pos``,
against gravity. Each joint's target trajectory is piecewise linear through a
few knots (the decision variables): ``torch.optim.Adam`` moves the knots so
that the hand (the far end of the second link) is on the target point over
the last quarter of the motion. The gradient of that loss with respect to
every frame's targets comes from ``inertia.Rollout`` through the joints and
drives of the SemiImplicitSolver, and torch carries it on to the knots.

    python examples/arm_reach.py            # writes examples/out/arm_reach.usda and .png
"""

from __future__ import annotations

import math
import os
import time

import torch

import inertia
from _common import example_parser, finish, init_warp, optimize, save_loss_plot, write_usd

LINKS = (0.5, 0.4)  # link lengths [m]
RADIUS = 0.04  # link radius [m]
SHOULDER = (0.0, 0.0, 1.2)  # shoulder position [m]
DRIVE_KE, DRIVE_KD = 60.0, 6.0  # drive gains [N m/rad], [N m s/rad]


def build(device):
    """Two capsule links along their body x axes, joined by hinges about y (gravity along -z)."""
    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    along_x = (0.0, math.sin(math.pi / 4), 0.0, math.cos(math.pi / 4))  # capsules lie along local z
    parent, x = -1, SHOULDER[0]
    for i, length in enumerate(LINKS):
        body = b.add_body(xform=((x, SHOULDER[1], SHOULDER[2]), (0, 0, 0, 1)), label=f"link{i}")
        b.add_shape_capsule(body, xform=((0.5 * length, 0.0, 0.0), along_x), radius=RADIUS,
                            half_height=0.5 * length - RADIUS, density=500.0, label=f"link{i}_capsule")
        anchor = (SHOULDER if parent < 0 else (LINKS[i - 1], 0.0, 0.0), (0, 0, 0, 1))
        b.add_joint_revolute(parent, body, parent_xform=anchor, axis=(0.0, 1.0, 0.0), target_ke=DRIVE_KE,
                             target_kd=DRIVE_KD, label=("shoulder", "elbow")[i])
        parent, x = body, x + length
    return b.finalize(device=device, requires_grad=True)


def hand(body_q: torch.Tensor) -> torch.Tensor:
    """World position of the far end of the second link, ``(..., 3)``, from body poses ``(..., B, 7)``."""
    p, q = body_q[..., 1, :3], body_q[..., 1, 3:]
    v = torch.tensor([LINKS[1], 0.0, 0.0], dtype=body_q.dtype, device=body_q.device).expand_as(p)
    # rotate v by the unit quaternion (x, y, z, w): v + 2 w (u x v) + 2 u x (u x v)
    u, w = q[..., :3], q[..., 3:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return p + v + w * t + torch.cross(u, t, dim=-1)


def main(argv=None):
    p = example_parser(__doc__, iters=40, frames=60, substeps=10, lr=0.1)
    p.add_argument("--target", type=float, nargs=3, default=(0.55, 0.0, 1.45), help="target point [m]")
    p.add_argument("--knots", type=int, default=4, help="knots of each joint's piecewise-linear target")
    args = p.parse_args(argv)

    init_warp()
    start = time.perf_counter()
    model = build(args.device)
    solver = inertia.SemiImplicitSolver(model)
    rollout = inertia.Rollout(model, solver, frames=args.frames, frame_dt=1.0 / 60.0, substeps=args.substeps)
    dev = model.torch_device
    target = torch.tensor(args.target, device=dev)
    hold = max(1, args.frames // 4)  # the last quarter of the frames
    knots = torch.zeros((args.knots, model.joint_dof_count), device=dev, requires_grad=True)
    # frame f's target interpolates the knots linearly (the first knot at frame 0, the last at the end)
    s = torch.linspace(0.0, args.knots - 1.0, args.frames, device=dev)
    lo = s.floor().long().clamp(max=args.knots - 2)
    frac = (s - lo).unsqueeze(1)
    optimizer = torch.optim.Adam([knots], lr=args.lr)

    def evaluate():
        targets = knots[lo] * (1.0 - frac) + knots[lo + 1] * frac
        out = rollout(joint_target_pos=targets)
        miss = ((hand(out.body_q[-hold:]) - target) ** 2).sum(dim=-1).mean()
        return miss, miss, out

    history, (loss, miss, out) = optimize(evaluate, optimizer, args.iters, "arm_reach",
                                          lambda miss, _: f"miss {miss.item() ** 0.5 * 1000:6.1f} mm",
                                          quiet=args.quiet)

    final_hand = hand(out.body_q[-1]).tolist()
    print(f"hand at {[round(v, 3) for v in final_hand]} m, target {list(args.target)} m, "
          f"rms miss over the last {hold} frames {miss.item() ** 0.5 * 1000:.1f} mm")
    os.makedirs(args.out, exist_ok=True)
    usd = write_usd(os.path.join(args.out, "arm_reach.usda"), model, body_q_frames=out.body_q)
    png = save_loss_plot(history, os.path.join(args.out, "arm_reach_loss.png"),
                         "arm_reach: mean squared miss over the last quarter [m^2]")
    return finish("arm_reach", history, {
        "rms_miss_m": miss.item() ** 0.5,
        "hand_final_m": final_hand,
        "knots_rad": knots.detach().cpu().tolist(),
    }, usd, png, start)


if __name__ == "__main__":
    main()
