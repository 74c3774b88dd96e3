"""Compiling ahead (``inertia.compile_ahead``): a solver loads the modules of its first collide + step when it
is built, two threads at once, and leaves no other trace.

Each check runs in a fresh interpreter (with the kernel cache as it is): which modules a process has loaded,
and what its first step warns, are per process.
"""

from __future__ import annotations

import json
import os
import sys

import background
import pytest

# A cloth over a ground plane, a box on a revolute joint to the world above it, a free sphere and a capsule:
# particle forces and contacts of three shape types, joints and rigid contacts. Prints, as JSON: the
# modules loaded while the solver was built and those the first collide + step still had to load, the
# solver's step count after construction, the warnings of the first step, and a hash of 20 steps.
SCRIPT = r"""
import hashlib, json, sys, warnings
import warp as wp
wp.config.log_level = wp.LOG_WARNING
from warp._src.context import user_modules  # which modules this process has loaded (Warp keeps no public list)
import inertia

def loaded():  # each loaded module with the identities of its loaded executables (a reload changes them)
    return {(name, tuple(sorted(id(e) for e in m.execs.values()))) for name, m in user_modules.items() if m.execs}

kind, dt = sys.argv[1], float(sys.argv[2])
b = inertia.ModelBuilder()
b.add_ground_plane()
b.add_cloth_grid(4, 4, pos=(0.0, 0.0, 0.3), cell_x=0.05, cell_y=0.05, mass=0.01)
link = b.add_body(xform=((0.6, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0)))
b.add_shape_box(link, hx=0.05, hy=0.02, hz=0.02, density=500.0)
b.add_joint_revolute(-1, link, parent_xform=((0.5, 0.0, 0.5), (0.0, 0.0, 0.0, 1.0)),
                     child_xform=((-0.1, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0)), axis=(0.0, 1.0, 0.0))
if kind != "featherstone":  # (its bodies are articulations)
    ball = b.add_body(xform=((-0.5, 0.0, 0.2), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_sphere(ball, radius=0.05, density=500.0)
    pill = b.add_body(xform=((-0.5, 0.3, 0.2), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_capsule(pill, radius=0.03, half_height=0.05, density=500.0)
model = b.finalize()
control, contacts = model.control(), model.contacts()
a, c = model.state(), model.state()
before = loaded()
solver = {"semi": inertia.SemiImplicitSolver, "xpbd": inertia.XPBDSolver,
          "featherstone": inertia.FeatherstoneSolver}[kind](model)
built = loaded()
steps_after_build = solver.step_count
h = hashlib.sha256()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for k in range(20):
        model.collide(a, contacts)
        solver.step(a, c, control, contacts, dt)
        a, c = c, a
        if k == 0:
            first = loaded()
        for name in ("particle_q", "particle_qd", "body_q", "body_qd"):
            h.update(getattr(a, name).numpy().tobytes())
names = lambda pairs: sorted(name for name, _ in pairs)
print("RESULT " + json.dumps({"at_build": names(built - before), "at_first_step": names(first - built),
      "step_count": steps_after_build, "final_step_count": solver.step_count,
      "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:60]}" for w in caught}),
      "trajectory": h.hexdigest()}))
"""


FIRST_STEP_DT = 5.0e-3  # [s] beyond the semi-implicit stable step of the cloth's and the joint's stiffness


def _script_job(kind: str, ahead: bool):
    env = dict(os.environ, INERTIA_COMPILE_AHEAD="1" if ahead else "0")
    return background.job(f"compile_ahead_{kind}_{ahead}", lambda _: [sys.executable, "-c", SCRIPT, kind,
                                                                      repr(FIRST_STEP_DT)], timeout=600, env=env,
                          tests=(f"test_a_solver_loads_what_its_first_step_launches_and_nothing_changes[{kind}]",))


RUNS = {(kind, ahead): _script_job(kind, ahead) for kind in ("semi", "xpbd", "featherstone") for ahead in (True, False)}


def run(kind: str, dt: float, ahead: bool) -> dict:
    assert dt == FIRST_STEP_DT  # the background job's
    out = RUNS[kind, ahead].result()
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))[7:])


@pytest.mark.parametrize("kind", ["semi", "xpbd", "featherstone"])
def test_a_solver_loads_what_its_first_step_launches_and_nothing_changes(kind):
    # 5 ms: beyond the semi-implicit stable step of the cloth's and the joint's stiffness, so the first
    # step must still warn (StabilityWarning) after the dry run, and run as substeps
    dt = FIRST_STEP_DT
    ahead, plain = run(kind, dt, True), run(kind, dt, False)
    # the dry run found every module: the first collide + step loads none and reloads none (without it: it
    # loads all of them)
    assert ahead["at_first_step"] == [], ahead
    assert len(ahead["at_build"]) >= 8 and set(ahead["at_build"]) >= set(plain["at_first_step"]), (ahead, plain)
    # ... and left no trace: no step counted, the same warnings at the first step, the same bits
    assert ahead["step_count"] == 0 and ahead["final_step_count"] == plain["final_step_count"] == 20
    assert ahead["warnings"] == plain["warnings"]
    if kind == "semi":
        assert any(w.startswith("StabilityWarning") for w in ahead["warnings"]), ahead["warnings"]
    assert ahead["trajectory"] == plain["trajectory"]


def test_the_dry_run_launches_nothing_and_restores_wp_launch():
    import warp as wp

    from inertia.compile_ahead import launches_noted

    a = wp.zeros(3, dtype=float, device="cpu")
    real = wp.launch
    with launches_noted({}) as modules:
        wp.launch(_fill_kernel, dim=3, inputs=[a, 2.0], device="cpu")
    assert wp.launch is real
    assert list(modules) == [_fill_kernel.module.name] and a.numpy().tolist() == [0.0, 0.0, 0.0]
    wp.launch(_fill_kernel, dim=3, inputs=[a, 2.0], device="cpu")
    assert a.numpy().tolist() == [2.0, 2.0, 2.0]


def _make_fill_kernel():
    import warp as wp

    @wp.kernel
    def fill(a: wp.array(dtype=float), value: float):
        a[wp.tid()] = value

    return fill


_fill_kernel = _make_fill_kernel()


def test_a_kernel_struct_follows_an_array_that_gets_a_gradient_later():
    """A solver's dry run fills the collision structs before a Rollout switches ``requires_grad`` on the
    parameters it learns (``body_inv_mass`` is in the broad phase's filter): the struct must then carry the
    new gradient array, or graph capture refuses it (and a backward pass would write nowhere)."""
    import warp as wp

    import inertia
    from inertia.collision.broad_phase import shape_filter

    b = inertia.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=((0.0, 0.0, 0.2), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    model = b.finalize()
    first = shape_filter(model)
    assert shape_filter(model) is first  # nothing replaced: the same struct
    model.body_inv_mass.requires_grad = True
    again = shape_filter(model)
    assert again is not first and again.body_inv_mass.grad.ptr == model.body_inv_mass.grad.ptr
    model.body_inv_mass = wp.clone(model.body_inv_mass)
    assert shape_filter(model).body_inv_mass.ptr == model.body_inv_mass.ptr
