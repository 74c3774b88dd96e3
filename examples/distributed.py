"""Many worlds across several processes: system identification with ``torch.distributed`` (gloo, CPU).

Every world holds a box kicked across the ground and, beside it, a bar on a
hinge, released level, that a PD drive (a torsional spring) pulls towards a
target angle against gravity. The worlds differ in the box's kick and mass
and the drive's target (domain randomization, drawn per world from its
global index). Two parameters are shared by all worlds and unknown: the
boxes' friction coefficient (a contact uses the mean of the box's and the
ground's, 0.5) and the drive stiffness. An "observed" trajectory of every world
is simulated with the true values; starting from wrong guesses, Adam fits
both so that the simulated body positions match the observed ones (mean
squared distance over all frames and worlds).

The ``--worlds`` worlds are split across ``--procs`` processes. Each process
builds only its share (one Model with ``num_worlds`` = its share; world k of
rank r is global world ``r * share + k``, placed where it is in the full
grid) and runs one batched rollout (``Rollout(..., batched=True)``: inputs
and outputs with a leading world dimension). The loss is the sum over all
worlds; each process backpropagates its part, ``dist.all_reduce`` sums the
parameter gradients, and every process takes the same Adam step, so the
parameters stay identical everywhere (checked at the end). The USD holds rank
0's worlds.

    python examples/distributed.py --procs 2 --worlds 8   # writes examples/out/distributed.usda and .png
    python examples/distributed.py --procs 1 --worlds 8   # the same fit in one process

The processes are started with ``torch.multiprocessing.spawn`` from this
script; no ``torchrun`` needed. They rendezvous through a file store
(``init_method="file://..."``, a fresh file in a new temporary directory, or
``--rendezvous PATH``: no port is picked, closed and hoped to be free again)
and gloo then connects them over TCP on the loopback device (127.0.0.1).
Every process waits for the others (``dist.barrier``) before it leaves the
group, so no process tears down a connection another still uses.
``--log-dir DIR`` sends each process's stderr (Python tracebacks,
``PYTHONFAULTHANDLER`` dumps, native aborts) to ``DIR/rank<r>.stderr`` and
``--result-dir DIR`` saves each process's result to ``DIR/rank<r>.pt``
(tests/test_distributed.py uses both).
"""

from __future__ import annotations

import datetime
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist

import inertia

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _common, also when imported from tests
from _common import add_identified_parameter, example_parser, finish, init_warp, save_loss_plot, write_usd  # noqa: E402

SPACING = 1.5  # [m] between neighbouring worlds on the grid (they never interact; this is for viewing)
GROUND_MU = 0.5  # the shared ground's friction coefficient (known)
BAR_HALF_LENGTH = 0.25  # [m]


def parse_args(argv=None):
    p = example_parser(__doc__, iters=30, frames=60, substeps=8, lr=0.1)
    p.add_argument("--procs", type=int, default=2, help="processes (each simulates worlds / procs worlds)")
    p.add_argument("--worlds", type=int, default=8, help="worlds in all, a multiple of --procs")
    add_identified_parameter(p, "mu", true=0.3, guess=0.8, what="friction coefficient of the boxes")
    add_identified_parameter(p, "ke", true=4.0, guess=1.5, what="drive stiffness [N m/rad]")
    p.add_argument("--rendezvous", default=None, metavar="PATH",
                   help="file for the process group's rendezvous (file:// store; must not exist yet; default: a "
                        "fresh file in a new temporary directory, removed at the end)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds a process waits for the others in any collective before it fails")
    p.add_argument("--log-dir", default=None, help="write each process's stderr to LOG_DIR/rank<r>.stderr")
    p.add_argument("--result-dir", default=None, help="save each process's result to RESULT_DIR/rank<r>.pt")
    args = p.parse_args(argv)
    if args.procs < 1 or args.worlds < 1 or args.worlds % args.procs:
        p.error(f"--worlds ({args.worlds}) must be a positive multiple of --procs ({args.procs})")
    return args


# ------------------------------------------------------------------ the worlds
def world_draw(g: int) -> dict:
    """World g's randomized quantities (a function of its global index only, so every split agrees)."""
    rng = np.random.default_rng(1000 + g)
    speed, heading = rng.uniform(1.0, 2.0), rng.uniform(-0.5, 0.5)  # [m/s], [rad]
    return {"kick": (speed * math.cos(heading), speed * math.sin(heading), 0.0),
            "box_density": rng.uniform(80.0, 160.0), "target": rng.uniform(-0.8, 0.8)}


def grid_position(g: int, total: int) -> tuple:
    cols = math.ceil(math.sqrt(total))
    return (SPACING * (g % cols), SPACING * (g // cols), 0.0)


def build(first: int, count: int, total: int, device):
    """A model of global worlds ``first .. first + count - 1`` (as its worlds 0 .. count - 1) on one ground."""
    b = inertia.ModelBuilder()
    b.contact_smoothing = 1e-3  # a smooth contact onset: gradients through the box's corners lifting
    b.add_ground_plane(mu=GROUND_MU)  # static, world -1: shared by every world
    for k in range(count):
        g = first + k
        d, (x, y, _) = world_draw(g), grid_position(g, total)
        b.current_world = k
        box = b.add_body(xform=((x, y, 0.1), (0, 0, 0, 1)), linear_velocity=d["kick"], label=f"box_{g}")
        b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, density=d["box_density"], mu=0.5)  # mu: set by the rollout
        bar = b.add_body(xform=((x + 0.5 + BAR_HALF_LENGTH, y, 1.0), (0, 0, 0, 1)), label=f"bar_{g}")
        b.add_shape_box(bar, hx=BAR_HALF_LENGTH, hy=0.02, hz=0.02)
        b.add_joint_revolute(-1, bar, parent_xform=((x + 0.5, y, 1.0), (0, 0, 0, 1)),
                             child_xform=((-BAR_HALF_LENGTH, 0.0, 0.0), (0, 0, 0, 1)), axis=(0, 1, 0),
                             target_ke=1.0, target_kd=0.05)  # target_ke: set by the rollout
    b.num_worlds = count
    return b.finalize(device=device, requires_grad=True)


class Share:
    """One process's worlds: the model, a batched rollout, the drive targets and the observed trajectory."""

    def __init__(self, rank: int, procs: int, args):
        self.count = args.worlds // procs
        self.first = rank * self.count
        self.model = build(self.first, self.count, args.worlds, args.device)
        self.rollout = inertia.Rollout(self.model, inertia.SemiImplicitSolver(self.model), args.frames,
                                       1.0 / 60.0, args.substeps, params=("shape_material_mu", "joint_target_ke"),
                                       batched=True)
        dev = self.model.torch_device
        targets = torch.tensor([world_draw(self.first + k)["target"] for k in range(self.count)],
                               dtype=torch.float32, device=dev)
        self.joint_target_pos = targets.reshape(1, self.count, 1).expand(args.frames, self.count, 1)
        with torch.no_grad():
            self.observed = self.simulate(torch.tensor(args.true_mu, device=dev),
                                          torch.tensor(args.true_ke, device=dev))

    def simulate(self, mu: torch.Tensor, ke: torch.Tensor) -> torch.Tensor:
        """Body poses ``(T + 1, worlds, 2, 7)`` with the shared friction ``mu`` and drive stiffness ``ke``."""
        params = {"shape_material_mu": mu.reshape(1, 1).expand(self.count, 2),  # per world: (box, bar)
                  "joint_target_ke": ke.reshape(1, 1).expand(self.count, 1)}
        return self.rollout(joint_target_pos=self.joint_target_pos, params=params).body_q

    def loss(self, mu, ke, total_worlds: int):
        """This process's part of the loss (its worlds' mean squared position errors over all worlds' count)
        and its body poses."""
        body_q = self.simulate(mu, ke)
        per_world = ((body_q[..., :3] - self.observed[..., :3]) ** 2).sum(dim=-1).mean(dim=(0, 2))
        return per_world.sum() / total_worlds, body_q


def all_reduce_gradients(params) -> None:
    """Sum every parameter's gradient over all processes (each holds its worlds' part of the loss)."""
    for p in params:
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)


def train(rank: int, procs: int, args) -> dict:
    """The optimisation loop one process runs (inside an initialized process group)."""
    init_warp()
    start = time.perf_counter()
    share = Share(rank, procs, args)
    dev = share.model.torch_device
    log_mu = torch.tensor(math.log(args.guess_mu), device=dev, requires_grad=True)
    log_ke = torch.tensor(math.log(args.guess_ke), device=dev, requires_grad=True)
    shared = [log_mu, log_ke]
    optimizer = torch.optim.Adam(shared, lr=args.lr, betas=(0.5, 0.99))
    history, first_grad = [], None
    say = (lambda *a: None) if (args.quiet or rank != 0) else (lambda *a: print(*a, flush=True))
    say(f"{args.worlds} worlds on {procs} process(es), {share.count} each; fitting the shared friction and drive "
        f"stiffness (true {args.true_mu}, {args.true_ke} N m/rad)")
    for it in range(args.iters + 1):
        optimizer.zero_grad()
        loss, q = share.loss(log_mu.exp(), log_ke.exp(), args.worlds)
        if it < args.iters:
            loss.backward()
            all_reduce_gradients(shared)
            if first_grad is None:
                first_grad = torch.stack([p.grad.detach().clone() for p in shared])
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)  # the loss over all worlds (for printing)
        history.append(float(total))
        say(f"iter {it:3d}  loss {history[-1]:.4e} m^2  mu {log_mu.exp().item():.4f}  "
            f"ke {log_ke.exp().item():.4f} N m/rad")
        if it < args.iters:
            optimizer.step()
    values = torch.stack([log_mu.exp(), log_ke.exp()]).detach()
    # every process took the same steps from the same summed gradients: the parameters must agree exactly
    gathered = [torch.zeros_like(values) for _ in range(procs)]
    dist.all_gather(gathered, values)
    agree = all(torch.equal(v, values) for v in gathered)
    result = {"rank": rank, "history": history, "first_grad": first_grad, "values": values, "agree": agree,
              "mu": float(values[0]), "ke": float(values[1])}
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        # the last evaluation ran with the fitted values; the recorder takes the model's flat body order
        usd = write_usd(os.path.join(args.out, "distributed.usda"), share.model,
                        body_q_frames=q.detach().reshape(q.shape[0], -1, 7))
        png = save_loss_plot(history, os.path.join(args.out, "distributed_loss.png"),
                             f"distributed: {args.worlds} worlds on {procs} processes, mean squared error [m^2]")
        result["summary"] = finish("distributed", history, {
            "procs": procs, "worlds": args.worlds, "worlds_per_process": share.count,
            "true": {"mu": args.true_mu, "ke": args.true_ke}, "guess": {"mu": args.guess_mu, "ke": args.guess_ke},
            "fit": {"mu": result["mu"], "ke": result["ke"]}, "parameters_agree_across_processes": agree,
        }, usd, png, start)
    return result


# ------------------------------------------------------------------ processes
def redirect_stderr(path: str) -> None:
    """Point this process's file descriptor 2 at ``path``: Python's tracebacks, faulthandler's dumps
    (``PYTHONFAULTHANDLER=1``) and whatever native code (gloo, a C++ std::terminate) prints land there."""
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


def run_rank(rank: int, procs: int, rendezvous: str, args) -> dict:
    """Join the process group (gloo; a file store at ``rendezvous``), train, wait for every process, leave;
    optionally save the result."""
    if args.log_dir is not None:
        os.makedirs(args.log_dir, exist_ok=True)
        redirect_stderr(os.path.join(args.log_dir, f"rank{rank}.stderr"))
    # gloo's connections: the loopback device, no network needed (Linux names it lo, macOS lo0)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo0" if sys.platform == "darwin" else "lo")
    if procs > 1:  # spawned: the processes share the machine's cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // procs))
    dist.init_process_group("gloo", init_method=f"file://{os.path.abspath(rendezvous)}", rank=rank,
                            world_size=procs, timeout=datetime.timedelta(seconds=args.timeout))
    try:
        result = train(rank, procs, args)
        # nobody leaves while another process may still talk to it (rank 0 writes the USD after the last
        # collective; a peer closing its connections under a pending operation aborts gloo)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if args.result_dir is not None:
        os.makedirs(args.result_dir, exist_ok=True)
        torch.save({k: v for k, v in result.items() if k != "summary"},
                   os.path.join(args.result_dir, f"rank{rank}.pt"))
    return result


def launch(args):
    """Run ``args.procs`` processes (spawned; one process runs here). Returns rank 0's result when in-process."""
    scratch = None
    rendezvous = args.rendezvous
    if rendezvous is None:  # a file no other run can be using
        scratch = tempfile.mkdtemp(prefix="inertia-distributed-")
        rendezvous = os.path.join(scratch, "rendezvous")
    elif os.path.exists(rendezvous):
        raise SystemExit(f"--rendezvous {rendezvous} exists (left by another run?): give a fresh path")
    try:
        if args.procs == 1:
            return run_rank(0, 1, rendezvous, args)
        import torch.multiprocessing as mp

        mp.spawn(run_rank, args=(args.procs, rendezvous, args), nprocs=args.procs, join=True)
        return None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv=None):
    args = parse_args(argv)
    return launch(args)


if __name__ == "__main__":
    main()
