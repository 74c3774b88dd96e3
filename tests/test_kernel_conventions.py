"""The kernel parameter convention, checked on the source of every kernel of the engine, solvers and integrators.

The rule (MuJoCo Warp's, for ``@wp.kernel`` functions in ``engine/``, ``solvers/``, ``integrators/``):
the parameters come in groups, each opened by a comment line of its own, in this order,

    # Model:      arrays and scalars of the Model (or structs of them: ShapeGeometry, JointTopology, ...)
    # Data in:    what the kernel reads of the step's data: State, Control, Contacts, solver buffers
    # In:         plain inputs: scalars such as dt, solver settings, per-launch arrays the solver owns
    # Data out:   everything the kernel writes (also what it reads and writes, such as accumulators)

Groups may be left out, never repeated or reordered, never empty; every kernel has a ``# Data out:``
group, every parameter sits under a group, and a full-line comment inside a parameter list is one of
the four headers. One check on the body: a parameter the kernel itself stores into (``a[i] = ...``,
``a.field[i] = ...``, ``wp.atomic_add(a, ...)``) must be under ``# Data out:`` (stores made inside
``wp.func`` helpers are not followed).
"""

from __future__ import annotations

import ast
import os
import re

import numpy as np
import pytest
import warp as wp

from conftest import DEVICE

import inertia

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED = ("engine", "solvers", "integrators")
GROUPS = ("# Model:", "# Data in:", "# In:", "# Data out:")
ATOMICS = {"atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cas", "atomic_exch"}


def _is_kernel_decorator(d) -> bool:
    target = d.func if isinstance(d, ast.Call) else d
    return isinstance(target, ast.Attribute) and target.attr == "kernel" and isinstance(target.value, ast.Name) \
        and target.value.id == "wp"


def _base_name(node):
    """The parameter a subscript / attribute chain starts from (``out.pairs[i]`` -> ``out``), or None."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _stored_params(fn: ast.FunctionDef) -> set:
    stored = set()
    for node in ast.walk(fn):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for leaf in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(leaf, ast.Subscript):
                    stored.add(_base_name(leaf))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ATOMICS \
                and node.args:
            stored.add(_base_name(node.args[0]))
    return stored - {None}


def kernel_problems(path: str) -> list:
    """Every breach of the convention in one source file, as 'file:line kernel: what'."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    rel = os.path.relpath(path, ROOT)
    problems = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or not any(_is_kernel_decorator(d) for d in fn.decorator_list):
            continue
        where = f"{rel}:{fn.lineno} {fn.name}"
        params = fn.args.args
        if not params:
            problems.append(f"{where}: no parameters")
            continue
        # the parameter list's lines: from the def to the last parameter
        headers = []  # (line number, header)
        for n in range(fn.lineno, params[-1].end_lineno + 1):
            text = lines[n - 1].strip()
            if text.startswith("#"):
                if text not in GROUPS:
                    problems.append(f"{where}: comment line {text!r} in the parameter list is not one of {GROUPS}")
                else:
                    headers.append((n, text))
        order = [GROUPS.index(h) for _, h in headers]
        if order != sorted(set(order)):
            problems.append(f"{where}: groups {[h for _, h in headers]} out of order or repeated (order: {GROUPS})")
        if not headers or headers[-1][1] != "# Data out:":
            problems.append(f"{where}: no '# Data out:' group (every kernel writes something)")
        group_of = {}
        for p in params:
            above = [h for n, h in headers if n < p.lineno]
            if not above:
                problems.append(f"{where}: parameter '{p.arg}' is under no group header")
                continue
            group_of[p.arg] = above[-1]
        for n, h in headers:
            if h not in group_of.values():
                problems.append(f"{where}: group {h!r} (line {n}) is empty")
        for name in sorted(_stored_params(fn) & set(group_of)):
            if group_of[name] != "# Data out:":
                problems.append(f"{where}: stores into '{name}', which is under {group_of[name]!r}, not '# Data out:'")
    return problems


def checked_files() -> list:
    out = []
    for top in CHECKED:
        for base, _, files in os.walk(os.path.join(ROOT, top)):
            out.extend(os.path.join(base, f) for f in sorted(files) if f.endswith(".py"))
    return out


# Kernels not converted yet, each with the reason (an entry that has come to pass the check fails the test: remove it)
PENDING: dict = {}  # "path kernel": why it may not follow the convention yet (the test fails once it does)


def test_every_kernel_groups_its_parameters_model_data_in_in_data_out():
    files = checked_files()
    assert len(files) > 40  # the walk found the packages
    kernels = sum(len(re.findall(r"@wp\.kernel", open(f, encoding="utf-8").read())) for f in files)
    assert kernels > 40
    problems = [p for f in files for p in kernel_problems(f)]
    pending = {k: [p for p in problems if re.sub(r":\d+ ", " ", p).startswith(k + ":")] for k in PENDING}
    passing = [k for k, v in pending.items() if not v]
    assert not passing, f"these kernels pass now, remove them from PENDING: {passing}"
    problems = [p for p in problems if not any(p in v for v in pending.values())]
    assert not problems, "kernel parameter convention (tests/test_kernel_conventions.py):\n" + "\n".join(problems)


BAD = '''
import warp as wp

@wp.kernel
def reordered(
    # Data in:
    x: wp.array(dtype=float),
    # Model:
    m: wp.array(dtype=float),
    # Data out:
    y: wp.array(dtype=float),
):
    y[0] = x[0] + m[0]

@wp.kernel
def ungrouped(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    y[0] = x[0]

@wp.kernel(name="writes_an_input")
def writes_an_input(
    # Data in:
    x: wp.array(dtype=float),
    # Data out:
    y: wp.array(dtype=float),
):
    wp.atomic_add(x, 0, 1.0)
    y[0] = 0.0
'''


def test_the_check_catches_reordered_ungrouped_and_misfiled_parameters(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(BAD)
    text = "\n".join(kernel_problems(str(path)))
    assert "reordered: groups ['# Data in:', '# Model:', '# Data out:'] out of order" in text
    assert "ungrouped: parameter 'x' is under no group header" in text
    assert "writes_an_input: stores into 'x', which is under '# Data in:'" in text


# --------------------------------------------------------------------------- one kernel per dtype, captured
def test_the_per_dtype_set_kernels_have_names_of_their_own_and_replay_bitwise_in_one_graph():
    """apply_controls launches one definition made for two dtypes (particle forces, body wrenches), and XPBD's
    add_corrections another (particle iterates, body velocities). Warp 1.19's CPU graph replays kernels by name,
    so each instance must have its own: a captured step that launches all four replays exactly what the plain
    loop computes."""
    from inertia.solvers.constraints.jacobi import ADD_CORRECTIONS
    from inertia.solvers.forces.external import SET_KERNELS

    names = {k.key for k in (*SET_KERNELS.values(), *ADD_CORRECTIONS.values())}
    assert len(names) == 4, names

    def build():
        b = inertia.ModelBuilder(gravity=-9.81)
        body = b.add_body(xform=((0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0)))
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
        b.add_particle((0.5, 0.0, 1.0), vel=(0.0, 0.0, 0.0), mass=0.2, radius=0.02)
        b.add_particle((0.6, 0.0, 1.0), vel=(0.0, 0.0, 0.0), mass=0.3, radius=0.02)
        return b.finalize(device=DEVICE)

    finals = []
    for captured in (False, True):
        for solver_type in (inertia.SemiImplicitSolver, inertia.XPBDSolver):
            model = build()
            solver = solver_type(model)
            control = model.control()
            control.particle_f.assign(np.array([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], np.float32))
            control.body_f.assign(np.array([[0.3, 0.2, 0.1, 0.05, -0.04, 0.03]], np.float32))
            s = [model.state(), model.state()]

            def pair():
                solver.step(s[0], s[1], control, None, 1e-3)
                solver.step(s[1], s[0], control, None, 1e-3)

            pair()  # allocates the step buffers of both states
            if captured:
                with wp.ScopedCapture(device=DEVICE) as capture:
                    pair()
                for _ in range(3):
                    wp.capture_launch(capture.graph)
            else:
                for _ in range(3):
                    pair()
            finals.append(np.concatenate([s[0].particle_qd.numpy().ravel(), s[0].body_qd.numpy().ravel()]))
    plain, graph = finals[:2], finals[2:]
    for a, b in zip(plain, graph):
        assert np.array_equal(a, b)
    assert np.all(plain[0] != 0.0)  # the forces acted
