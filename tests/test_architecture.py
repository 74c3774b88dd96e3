"""The package's shape, checked: no import circles, ``import inertia`` stays light, modules stay readable.

These read the source (AST) or import in a fresh interpreter; nothing is simulated.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = {"engine": "inertia", "solvers": "inertia.solvers", "integrators": "inertia.integrators"}
MAX_LINES = 650  # the guideline is ~600 lines a module; past 650 a module holds more than one concern


def _modules() -> dict:
    """Module name -> (path, is a package's __init__)."""
    out = {}
    for folder, base in PACKAGES.items():
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, f), os.path.join(ROOT, folder))[:-3].split(os.sep)
                    name = ".".join([base] + [p for p in rel if p != "__init__"])
                    out[name] = (os.path.join(dirpath, f), rel[-1] == "__init__")
    return out


def import_graph() -> dict:
    """Module -> the package modules it imports anywhere in its source (also inside functions: a lazy
    import still ties the two modules together)."""
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, (path, is_init) in mods.items():
        pkg = m if is_init else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in mods]
                targets += subs if len(subs) == len(node.names) else [mod] + subs
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
            edges[m].update(t for t in targets if t in mods and t != m)
    return edges


def cycles(edges: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    found = cycles(import_graph())
    assert not found, f"import circles: {found}"


def test_the_checker_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_import_inertia_loads_neither_torch_nor_usd():
    code = "import sys, inertia; print(sorted(m for m in ('torch', 'pxr') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_modules_stay_readable():
    long = {m: n for m, (path, _) in _modules().items()
            if (n := sum(1 for _ in open(path, encoding="utf-8"))) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split by concern): {long}"
