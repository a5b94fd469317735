"""The package's import contracts, read from the source (every import, at module level or inside a function).

Layers, lowest first; a module imports only from its own layer or below:

0. ``distdp.privacy`` (the generic core: mechanisms, accounting, ledger, private vocabulary selection) and
   ``distdp.progress``: nothing else of distdp;
1. ``distdp.io``: corpora, text preparation, atomic output;
2. the model stages: ``distdp.lda`` (but not its ``private`` layer), ``distdp.tensor``, ``distdp.completion``;
3. ``distdp.lda.private``: the private fit, a layer over the stages' releases;
4. ``distdp.distributed``: Ray as a transport, which imports no LDA code (actors host the class they are given);
5. the API: ``distdp.api``, ``distdp.estimator``, ``distdp.decompose``;
6. the CLI: ``distdp.cli``, ``distdp.commands``, and the package's face ``distdp``.

Also: no cycle among modules; the pure math imports neither Ray, pyarrow nor ``distdp.io``; Ray is imported
only by the transport and the API; no module imports a ``_``-name of another distdp module (``from m import
_x`` or ``m._x``).
"""
from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "distdp"

LAYERS = [
    ("distdp.privacy", 0), ("distdp.progress", 0), ("distdp.io", 1), ("distdp.lda.private", 3), ("distdp.lda", 2),
    ("distdp.tensor", 2), ("distdp.completion", 2), ("distdp.distributed", 4), ("distdp.api", 5),
    ("distdp.estimator", 5), ("distdp.decompose", 5), ("distdp.cli", 6), ("distdp.commands", 6),
]
PURE_MATH = ["distdp.lda.moments", "distdp.lda.whitening", "distdp.lda.refine", "distdp.lda.gibbs",
             "distdp.lda.gibbs_kernels", "distdp.lda.recovery", "distdp.lda.metrics", "distdp.lda.private.scalable", "distdp.lda.private.dense",
             "distdp.lda.private.single_topic", "distdp.tensor.forms", "distdp.tensor.power", "distdp.tensor.online",
             "distdp.tensor.dp", "distdp.privacy.mechanisms", "distdp.privacy.accounting", "distdp.privacy.ledger"]
RAY_ALLOWED = ("distdp.distributed", "distdp.api")


def module_files() -> dict[str, pathlib.Path]:
    """Dotted name → file of every module of the package."""
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = module_files()


def imports_of(name: str) -> list[tuple[str, list[str], int]]:
    """``(imported module, imported names, line)`` of every import statement in module ``name``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def resolve(target: str) -> str:
    """The package module that importing ``target`` loads last (``a.b.c`` → ``a.b`` when ``c`` is a name)."""
    while target not in MODULES:
        target = target.rpartition(".")[0]
    return target


def distdp_edges() -> dict[str, set[str]]:
    """Module → the distdp modules it loads (imported submodules, and the packages above each of them)."""
    edges = {}
    for name in MODULES:
        deps = set()
        for mod, names, _ in imports_of(name):
            if mod != "distdp" and not mod.startswith("distdp."):
                continue
            targets = [f"{mod}.{n}" if f"{mod}.{n}" in MODULES else mod for n in names] or [mod]
            for t in targets:
                t = resolve(t)
                while t:  # importing a.b.c runs a/__init__ and a/b/__init__ first
                    deps.add(t)
                    t = t.rpartition(".")[0]
        deps.discard(name)
        if name != "distdp":
            deps.discard("distdp")  # the face imports lazily (PEP 562): loading it loads nothing else
        edges[name] = {d for d in deps if not name.startswith(d + ".")}  # a module's own packages run first
    return edges


def layer(name: str) -> int:
    for prefix, n in LAYERS:
        if name == prefix or name.startswith(prefix + "."):
            return n
    if name == "distdp":
        return 6
    raise AssertionError(f"{name} is in no layer: add it to LAYERS")


def test_every_module_has_a_layer():
    for name in MODULES:
        layer(name)


def test_imports_point_down_the_layers():
    bad = [f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
           for a, deps in distdp_edges().items() for b in deps if layer(b) > layer(a)]
    assert not bad, "\n".join(bad)


def test_privacy_core_imports_nothing_else_of_distdp():
    for name in MODULES:
        if name.startswith("distdp.privacy"):
            others = {d for d in distdp_edges()[name] if not d.startswith("distdp.privacy") and d != "distdp"}
            assert not others, f"{name} imports {others}"


def test_transport_imports_no_lda_code():
    for name in MODULES:
        if name.startswith("distdp.distributed"):
            lda = {d for d in distdp_edges()[name] if d.startswith("distdp.lda")}
            assert not lda, f"{name} imports {lda}"


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert strongly_connected(distdp_edges()) == []


def test_cycle_detector_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", PURE_MATH)
def test_pure_math_imports_neither_ray_nor_io(name):
    assert name in MODULES, f"{name} no longer exists: update PURE_MATH"
    for mod, _, line in imports_of(name):
        top = mod.split(".")[0]
        assert top not in ("ray", "pyarrow") and not mod.startswith("distdp.io"), f"{name}:{line} imports {mod}"


def test_ray_only_in_the_transport_and_the_api():
    for name in MODULES:
        if any(name == p or name.startswith(p + ".") for p in RAY_ALLOWED):
            continue
        for mod, _, line in imports_of(name):
            assert mod.split(".")[0] != "ray", f"{name}:{line} imports {mod}"


def test_no_private_name_imported_from_another_module():
    bad = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases = set()
        for mod, names, line in imports_of(name):
            if mod == "distdp" or mod.startswith("distdp."):
                bad += [f"{name}:{line} imports {mod}.{n}" for n in names if n.startswith("_")]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                aliases |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("distdp")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("distdp"):
                base = node.module
                aliases |= {a.asname or a.name for a in node.names if f"{base}.{a.name}" in MODULES}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                bad.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


def test_importing_the_package_loads_no_ray():
    import subprocess

    code = "import sys, distdp; import distdp.lda.pipeline; assert 'ray' not in sys.modules, 'ray loaded'"
    subprocess.run([sys.executable, "-c", code], check=True)
