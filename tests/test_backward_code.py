"""Backward code compiled on demand (``inertia.autodiff.backward_code``).

inertia's differentiable kernel modules compile forward-only until gradients are wanted, then with their
adjoints. Each check runs in a fresh interpreter, because the switch is for the rest of a process (and
this test process has long since recorded tapes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import background
import pytest

# A cloth over a ground plane plus a box on a revolute joint and a free box resting on the ground: particle
# forces and contacts, joints and rigid contacts, in each solver. Prints, as JSON: whether gradients were
# on before the tape, the differentiable modules loaded by then and whether any of them had its backward
# code, a hash of the forward trajectory, and a gradient through one recorded step.
SCRIPT = r"""
import hashlib, json, sys
import numpy as np
import warp as wp
wp.config.log_level = wp.LOG_WARNING
import inertia
from inertia.autodiff import backward_code

early = sys.argv[2] == "early"
if early:
    inertia.enable_gradients()
b = inertia.ModelBuilder()
b.add_ground_plane()
b.add_cloth_grid(4, 4, pos=(0.0, 0.0, 0.3), cell_x=0.05, cell_y=0.05, mass=0.01)
base = b.add_body(xform=((0.5, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0)))
b.add_shape_box(base, hx=0.05, hy=0.05, hz=0.05, density=500.0)
arm = b.add_body(xform=((0.6, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0)))
b.add_shape_box(arm, hx=0.05, hy=0.02, hz=0.02, density=500.0)
b.add_joint_fixed(-1, base, parent_xform=((0.5, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0)))
b.add_joint_revolute(base, arm, parent_xform=((0.05, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
                     child_xform=((-0.05, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0))
free = b.add_body(xform=((-0.5, 0.0, 0.049), (0.0, 0.0, 0.0, 1.0)))
b.add_shape_box(free, hx=0.05, hy=0.05, hz=0.05, density=500.0)
model = b.finalize()
solver = {"semi": inertia.SemiImplicitSolver, "xpbd": inertia.XPBDSolver}[sys.argv[1]](model)
dt = 1.0 / 600.0 if sys.argv[1] == "xpbd" else 1.0 / 2400.0
control, contacts = model.control(), model.contacts()
a, c = model.state(), model.state()
h = hashlib.sha256()
for _ in range(30):
    model.collide(a, contacts)
    solver.step(a, c, control, contacts, dt)
    a, c = c, a
    for name in ("particle_q", "particle_qd", "body_q", "body_qd"):
        h.update(getattr(a, name).numpy().tobytes())
from warp._src.context import user_modules  # every Warp module of the process (no public list)
loaded = [m for m in user_modules.values() if m.execs and not m.name.startswith("warp")]
before = {"gradients": inertia.gradients_enabled(), "loaded": sorted(m.name for m in loaded),
          "with_backward": sorted(m.name for m in loaded if m.options["enable_backward"]),
          "registered": sorted(m.name for m in backward_code.registered_modules() if m.execs)}
s0, s1 = model.state(requires_grad=True), model.state(requires_grad=True)
wp.copy(s0.particle_q, a.particle_q); wp.copy(s0.particle_qd, a.particle_qd)
wp.copy(s0.body_q, a.body_q); wp.copy(s0.body_qd, a.body_qd)
tape = wp.Tape()
with tape:
    model.collide(s0, contacts)
    solver.step(s0, s1, control, contacts, dt)
s1.particle_q.grad.fill_(1.0)
s1.body_q.grad.fill_(1.0)
tape.backward()
grads = [s0.particle_q.grad.numpy(), s0.particle_qd.grad.numpy(), s0.body_q.grad.numpy(), s0.body_qd.grad.numpy()]
print("RESULT " + json.dumps({**before, "forward": h.hexdigest(), "after": inertia.gradients_enabled(),
      "finite": all(bool(np.isfinite(g).all()) for g in grads),
      "nonzero": all(bool(np.abs(g).sum() > 0) for g in grads),
      "grad": hashlib.sha256(b"".join(g.tobytes() for g in grads)).hexdigest()}))
"""


def _script_job(solver: str, when: str):
    env = dict(os.environ, PYTHONWARNINGS="ignore")  # the box's joint stiffness warns about substeps
    return background.job(f"backward_code_{solver}_{when}", lambda _: [sys.executable, "-c", SCRIPT, solver, when],
                          timeout=600, env=env,
                          tests=(f"test_forward_only_until_a_tape_records_a_step_then_the_same_bits[{solver}]",))


RUNS = {(solver, when): _script_job(solver, when) for solver in ("semi", "xpbd") for when in ("late", "early")}


def run(solver: str, when: str) -> dict:
    out = RUNS[solver, when].result()
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))[7:])


@pytest.mark.parametrize("solver", ["semi", "xpbd"])
def test_forward_only_until_a_tape_records_a_step_then_the_same_bits(solver):
    late, early = run(solver, "late"), run(solver, "early")
    # a forward simulation compiles no backward code ...
    assert not late["gradients"] and len(late["registered"]) >= 8, late
    assert late["with_backward"] == [], late  # none of the process's modules (detection ones are for good)
    assert early["gradients"] and sorted(early["with_backward"]) == early["registered"], early
    # ... and computes the same bits as the forward half of the modules compiled with it
    assert late["forward"] == early["forward"]
    # a recorded step switches gradients on; its adjoints run (non-zero, finite) and give the same gradient
    # as when gradients were on from the start (their correctness: test_gradcheck.py and the other grad tests)
    assert late["after"] and late["finite"] and late["nonzero"], late
    assert late["grad"] == early["grad"]


def test_every_kernel_module_is_forward_only_until_gradients_are_wanted():
    """A differentiable kernel module not registered with ``on_demand`` would compile its adjoints in every
    forward simulation: check every inertia module that defines kernels."""
    script = r"""
import importlib, json, pkgutil, sys
import warp as wp
import inertia, inertia.solvers, inertia.integrators
names = set()
for pkg in (inertia, inertia.solvers, inertia.integrators):
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if ".rollout" in info.name or ".io" in info.name:
            continue  # torch / pxr; they define no kernels of the step
        names.add(info.name)
bad, count = [], 0
for name in sorted(names):
    mod = importlib.import_module(name)
    if any(isinstance(v, wp.Kernel) and v.module.name == name for v in vars(mod).values()):
        count += 1
        if wp.get_module(name).options["enable_backward"]:
            bad.append(name)
print("RESULT " + json.dumps({"bad": bad, "count": count, "gradients": inertia.gradients_enabled()}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))[7:])
    assert r["count"] >= 30 and not r["gradients"], r  # the walk found the kernel modules
    assert r["bad"] == [], f"modules that compile adjoints in a forward simulation: {r['bad']}"


FEATHERSTONE_SYNC = r"""
import sys
import numpy as np
import warp as wp
wp.config.log_level = wp.LOG_WARNING
import inertia
b = inertia.ModelBuilder()
link = b.add_body(xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
b.add_shape_box(link, hx=0.2, hy=0.02, hz=0.02)
b.add_joint_revolute(-1, link, parent_xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)),
                     child_xform=((-0.2, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0))
model = b.finalize()
solver = inertia.FeatherstoneSolver(model)
s = model.state(requires_grad=sys.argv[1] == "state")
if sys.argv[1] != "state":  # gradients asked for array by array: only the tape says they are wanted
    for name in ("particle_q", "particle_qd", "joint_q", "joint_qd", "body_q", "body_qd"):
        getattr(s, name).requires_grad = True
print("BEFORE", inertia.gradients_enabled())
tape = wp.Tape()
with tape:
    solver.sync_bodies(s)
s.body_q.grad.fill_(wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat(0.0, 0.0, 0.0, 0.0)))
tape.backward()
print("GRAD", float(s.joint_q.grad.numpy()[0]), float(np.cos(float(s.joint_q.numpy()[0]))))
"""


SYNC_RUNS = {how: background.job(f"featherstone_sync_{how}", lambda _, how=how: [sys.executable, "-c",
                                                                                  FEATHERSTONE_SYNC, how], timeout=300,
                                 tests=(f"test_a_tape_of_forward_kinematics_alone_gets_its_adjoints[{how}]",))
             for how in ("state", "arrays")}


@pytest.mark.parametrize("how", ["state", "arrays"])
def test_a_tape_of_forward_kinematics_alone_gets_its_adjoints(how):
    """``sync_bodies`` (Featherstone's forward kinematics, differentiable) recorded on a tape with no solver
    step: the gradient of the link's height z = 1 + 0.2 sin(-q) ... must reach the joint angle."""
    out = SYNC_RUNS[how].result()
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(x.split(" ", 1) for x in out.stdout.splitlines() if x.startswith(("BEFORE", "GRAD")))
    # a state made with requires_grad switches gradients on by itself; arrays switched one by one do not
    assert lines["BEFORE"] == ("True" if how == "state" else "False")
    grad, cos_q = (float(v) for v in lines["GRAD"].split())
    # dz/dq of the link's frame origin, which sits at the joint: the body frame is the child frame's offset,
    # 0.2 m along the link's x axis, so z = 1 - 0.2 sin(q) about +y: dz/dq = -0.2 cos(q) (q = 0 here)
    assert abs(grad - (-0.2 * cos_q)) < 1e-5, (grad, cos_q)
