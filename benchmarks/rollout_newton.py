"""Section 3 of benchmarks/rollout.py: Newton's SolverSemiImplicit on one plain ``wp.Tape`` (Newton has no
checkpointing), measured in a child process like our memory rows (``rollout.py --child``)."""

from __future__ import annotations

import gc
import subprocess
import sys
import time

import numpy as np
import warp as wp

from rollout_scene import DT, cloth_params, grad_checksum, loss_weights, peak_bytes, reset_peak, rss_bytes, run_child


def child_newton(spec: dict) -> dict:
    """Newton's SolverSemiImplicit on one wp.Tape over T steps (its differentiable-simulation examples' way)."""
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    import newton  # noqa: PLC0415
    import newton.solvers  # noqa: F401, PLC0415

    from bench_scenes import GROUND, PARTICLE_CONTACT

    device = wp.get_device(spec.get("device", "cpu"))
    p = cloth_params(spec["size"], spec["height"])
    b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
    b.add_ground_plane(cfg=newton.ModelBuilder.ShapeConfig(ke=GROUND["ke"], kd=GROUND["kd"], mu=GROUND["mu"]))
    b.add_cloth_grid(
        pos=wp.vec3(*p["pos"]), rot=wp.quat_identity(), vel=wp.vec3(*p["vel"]), dim_x=p["dim_x"], dim_y=p["dim_y"],
        cell_x=p["cell"], cell_y=p["cell"], mass=p["mass"], tri_ke=p["tri_ke"], tri_ka=p["tri_ka"],
        tri_kd=p["tri_kd"], edge_ke=p["edge_ke"], edge_kd=p["edge_kd"], particle_radius=p["radius"],
    )
    m = b.finalize(device=device, requires_grad=True)
    m.particle_ke, m.particle_kd, m.particle_mu = (PARTICLE_CONTACT[k] for k in ("ke", "kd", "mu"))
    m.soft_contact_ke, m.soft_contact_kd, m.soft_contact_mu = (GROUND[k] for k in ("ke", "kd", "mu"))
    solver = newton.solvers.SolverSemiImplicit(m, enable_tri_contact=False)
    # one-shot contacts with a wide gap: every particle is a ground-contact candidate and the force
    # kernel decides from the current positions (Newton's example_diffsim_ball does the same)
    pipeline = newton.CollisionPipeline(m, broad_phase="explicit", soft_contact_max=m.particle_count,
                                        soft_contact_gap=10.0, requires_grad=True)
    w = wp.array(loss_weights(m.particle_count), dtype=wp.vec3, device=device)

    @wp.kernel
    def loss_kernel(q: wp.array(dtype=wp.vec3), w: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, wp.dot(q[i], w[i]))

    def run(steps):
        states = [m.state(requires_grad=True) for _ in range(steps + 1)]
        control = m.control()
        contacts = pipeline.contacts()
        pipeline.collide(states[0], contacts)
        loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        tape = wp.Tape()
        t0 = time.perf_counter()
        with tape:
            for i in range(steps):
                states[i].clear_forces()
                solver.step(states[i], states[i + 1], control, contacts, DT)
            wp.launch(loss_kernel, m.particle_count, inputs=[states[-1].particle_q, w, loss], device=device)
        wp.synchronize_device(device)
        t1 = time.perf_counter()
        tape.backward(loss)
        wp.synchronize_device(device)
        t2 = time.perf_counter()
        q = states[-1].particle_q.numpy()
        res = {"forward_s": t1 - t0, "backward_s": t2 - t1, "loss": float(loss.numpy()[0]),
               "finite": bool(np.isfinite(q).all()), "min_height": float(q[:, 2].min()),
               "grad": grad_checksum(states[0].particle_q.grad.numpy(), states[0].particle_qd.grad.numpy())}
        tape.reset()
        return res

    def run_plain(steps):
        """The same steps without a tape between two states: Newton's plain simulation cost."""
        a, b = m.state(requires_grad=False), m.state(requires_grad=False)
        control = m.control()
        contacts = pipeline.contacts()
        pipeline.collide(a, contacts)
        t0 = time.perf_counter()
        for _ in range(steps):
            a.clear_forces()
            solver.step(a, b, control, contacts, DT)
            a, b = b, a
        wp.synchronize_device(device)
        return time.perf_counter() - t0

    run(2)  # load every kernel
    run_plain(2)
    gc.collect()
    reset_ok = reset_peak()
    base = rss_bytes()
    res = run(spec["steps"])
    peak_all = peak_bytes()
    gc.collect()
    res["plain_forward_s"] = run_plain(spec["steps"])  # after the peak was read
    counts = {"particles": m.particle_count, "triangles": m.tri_count, "edges": m.edge_count,
              "springs": m.spring_count, "tets": m.tet_count, "shapes": m.shape_count}
    return {"newton": newton.__version__, "rss_before": base, "peak_rss": peak_all, "measured": peak_all - base,
            "peak_reset": reset_ok, "counts": counts, "steps": spec["steps"], **res}



def find_newton_python(args):
    """An interpreter where ``import newton`` works: this one, else --newton-python; (python, status)."""
    if args.no_newton:
        return None, "skipped (--no-newton)"
    candidates = [sys.executable] + ([args.newton_python] if args.newton_python else [])
    errors = []
    for py in candidates:
        try:
            proc = subprocess.run([py, "-c", "import newton, newton.solvers, warp; print(newton.__version__)"],
                                  capture_output=True, text=True, timeout=120)
        except Exception as e:
            errors.append(f"{py}: {type(e).__name__}: {e}")
            continue
        if proc.returncode == 0:
            return py, f"newton {proc.stdout.strip().splitlines()[-1]} ({py})"
        errors.append(f"{py}: {(proc.stderr.strip().splitlines() or ['import failed'])[-1]}")
    return None, "skipped (newton not available: " + "; ".join(errors) + ")"




def measure_newton(args, cfg, python, memory_rows) -> list:
    rows = []
    for steps in cfg["memory_steps"]:
        spec = {"kind": "newton", "size": cfg["size"], "height": cfg["height"], "steps": steps, "device": args.device}
        res = run_child(spec, python, args.child_timeout)
        row = {"steps": steps, **res}
        if res["status"] == "ok":
            row["ratio"] = res["backward_s"] / res["forward_s"]
            row["forward_per_step_ms"] = 1e3 * res["forward_s"] / steps
            row["backward_per_step_ms"] = 1e3 * res["backward_s"] / steps
            row["plain_forward_per_step_ms"] = 1e3 * res["plain_forward_s"] / steps
            row["grad_cost_over_plain"] = (res["forward_s"] + res["backward_s"]) / res["plain_forward_s"]
            for mode in ("checkpointed", "none"):
                ours = [m for m in memory_rows if m["steps"] == steps and m["mode"] == mode and m["status"] == "ok"]
                if ours:
                    o = ours[0]
                    row[f"ours_{mode}"] = {
                        # ours: the forward pass is the plain simulation (no tape) plus checkpoint copies
                        "grad_cost_over_plain": (o["forward_s"] + o["backward_s"]) / o["forward_s"],
                        "ratio_over_newton": (o["backward_s"] / o["forward_s"]) / row["ratio"],
                        "total_time_over_newton": (o["forward_s"] + o["backward_s"])
                        / (res["forward_s"] + res["backward_s"]),
                        "memory_over_newton": o["measured"] / res["measured"] if res["measured"] > 0 else None,
                    }
        rows.append(row)
        print(f"  newton T={steps}: {row['status']}", file=sys.stderr, flush=True)
    return rows

