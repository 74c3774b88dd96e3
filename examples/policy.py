"""Train a neural-network policy through the simulator in closed loop: pendulums that swing to a target and hold.

Each pendulum is a kinematic pivot (mass 0) and a 1 kg bob joined by a stiff
spring (0.5 m). Several pendulums, one per target angle, live side by side in
one model (they do not interact), so one rollout is a batch of episodes. At
every frame a small MLP (``torch.nn.Module``) reads each bob's state, returned
by ``Rollout(frames=1).step(...)``, and outputs the force on that bob for the
next frame (at most ``--fmax`` N per axis, through a tanh). The loss is the mean
squared distance of the bobs to their targets over the episode plus a small
force penalty; ``loss.backward()`` runs back through every frame of the
simulation into the network's weights, and Adam updates them.

    python examples/policy.py               # writes examples/out/policy.usda and .png
"""

from __future__ import annotations

import math
import os
import time

import torch

import inertia
from _common import Progress, example_parser, finish, init_warp, save_loss_plot, write_usd

LENGTH, PIVOT_Z, SPACING = 0.5, 1.0, 0.4


class Policy(torch.nn.Module):
    """MLP: (bob offset from pivot, bob velocity, target offset) -> force on the bob."""

    def __init__(self, hidden: int, fmax: float):
        super().__init__()
        self.fmax = fmax
        self.net = torch.nn.Sequential(torch.nn.Linear(9, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, 3))
        with torch.no_grad():  # start close to "do nothing"
            self.net[-1].weight.mul_(0.1)
            self.net[-1].bias.zero_()

    def forward(self, offset, velocity, target_offset):
        x = torch.cat([offset / LENGTH, velocity / 3.0, target_offset / LENGTH], dim=-1)
        return self.fmax * torch.tanh(self.net(x))


def build(angles_deg, device):
    b = inertia.ModelBuilder(up_axis="z", gravity=-9.81)
    b.particle_collide = False
    pivots, targets = [], []
    for k, a in enumerate(angles_deg):
        y = SPACING * (k - 0.5 * (len(angles_deg) - 1))
        pivot = b.add_particle((0.0, y, PIVOT_Z), mass=0.0, radius=0.02)
        bob = b.add_particle((0.0, y, PIVOT_Z - LENGTH), mass=1.0, radius=0.05)
        b.add_spring(pivot, bob, ke=1.0e4, kd=10.0)
        t = math.radians(a)
        targets.append((LENGTH * math.sin(t), y, PIVOT_Z - LENGTH * math.cos(t)))
        pivots.append(pivot)
    model = b.finalize(device=device, requires_grad=True)
    return model, pivots, targets


def main(argv=None):
    p = example_parser(__doc__, iters=50, frames=60, substeps=10, lr=0.03)
    p.add_argument("--angles", type=float, nargs="+", default=(-60.0, -30.0, 30.0, 60.0),
                   help="target angles from the downward vertical [deg], one pendulum each")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--fmax", type=float, default=10.0, help="force limit per axis [N]")
    p.add_argument("--force-weight", type=float, default=1.0e-4, help="weight of the mean squared force")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    init_warp()
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    model, pivots, targets = build(args.angles, args.device)
    solver = inertia.SemiImplicitSolver(model)
    step = inertia.Rollout(model, solver, frames=1, frame_dt=1.0 / 60.0, substeps=args.substeps)
    dev = model.torch_device
    piv = torch.tensor(pivots, device=dev)
    bob = piv + 1
    q0 = torch.tensor(model.particle_q.numpy(), device=dev)
    qd0 = torch.zeros_like(q0)
    target = torch.tensor(targets, dtype=torch.float32, device=dev)
    target_offset = target - q0[piv]

    policy = Policy(args.hidden, args.fmax).to(dev)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)

    def episode():
        q, qd = q0, qd0
        frames, cost, effort = [q0], 0.0, 0.0
        for _ in range(args.frames):
            f_bob = policy(q[bob] - q[piv], qd[bob], target_offset)
            f = torch.zeros_like(q0).index_copy(0, bob, f_bob)  # pivots are kinematic: no force
            q, qd = step.step(q, qd, f)
            frames.append(q)
            cost = cost + ((q[bob] - target) ** 2).sum(dim=-1).mean()
            effort = effort + (f_bob ** 2).sum(dim=-1).mean()
        return (cost + args.force_weight * effort) / args.frames, torch.stack(frames)

    history = []
    bar = Progress(args.iters, "policy", quiet=args.quiet)
    for it in range(args.iters):
        loss, traj = episode()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        history.append(loss.item())
        err = (traj[-1, bob] - target).norm(dim=-1).max().item()
        bar.update(it, history[-1], f"worst final distance {err:.3f} m")
    with torch.no_grad():
        loss, traj = episode()
    history.append(loss.item())

    final_dist = (traj[-1, bob] - target).norm(dim=-1)
    os.makedirs(args.out, exist_ok=True)
    usd = write_usd(os.path.join(args.out, "policy.usda"), model, traj)
    png = save_loss_plot(history, os.path.join(args.out, "policy_loss.png"),
                         "policy: mean squared distance to target [m^2]")
    weights = os.path.join(args.out, "policy.pt")
    torch.save(policy.state_dict(), weights)
    return finish("policy", history, {
        "angles_deg": list(args.angles),
        "final_distance_m": final_dist.cpu().tolist(),
        "parameters": sum(t.numel() for t in policy.parameters()),
        "weights": weights,
    }, usd, png, start)


if __name__ == "__main__":
    main()
