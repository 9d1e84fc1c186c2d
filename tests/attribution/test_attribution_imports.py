"""Attribution without circles (issue 18 item 5): the import graph of ``causaltrace.attribution``, read with ``ast``
(lazy imports inside functions included), has no circle; ``attribution.stages`` never imports
``attribution.methods``; no method imports another method; no module imports another module's private names;
attribution never imports ``testing`` (the fake judge reaches it through the judge-backend registry)."""

from __future__ import annotations

import ast
from pathlib import Path

import causaltrace

SRC = Path(causaltrace.__file__).resolve().parent
ATTRIBUTION = "causaltrace.attribution"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every causaltrace import in ``path``."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((a.name, None) for a in node.names if a.name.startswith("causaltrace"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("causaltrace"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.append((full, None) if full in modules else (node.module, a.name))
    return out


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    files = {_module_name(p): p for p in (SRC / "attribution").rglob("*.py")}
    every = {_module_name(p) for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    privates: list[tuple[str, str, str]] = []
    for mod, path in files.items():
        for target, name in _imports(path, every):
            graph[mod].add(target)
            if name is not None and name.startswith("_") and not name.startswith("__"):
                privates.append((mod, target, name))
    return graph, privates


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_attribution_modules_import_no_circle():
    graph, _ = _graph()
    assert len(graph) > 20  # the walk saw the package
    assert _cycles(graph) == []


def test_the_checker_sees_a_circle_and_a_lazy_import(tmp_path):
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    lazy = tmp_path / "m.py"
    lazy.write_text("def f():\n    from causaltrace.attribution.methods.dcfa import _steps\n", encoding="utf-8")
    assert _imports(lazy, set()) == [("causaltrace.attribution.methods.dcfa", "_steps")]


def test_stages_never_import_methods_and_methods_never_import_each_other():
    graph, _ = _graph()
    stages = {m: deps for m, deps in graph.items() if m.startswith(f"{ATTRIBUTION}.stages")}
    assert stages
    assert {m: sorted(d for d in deps if d.startswith(f"{ATTRIBUTION}.methods")) for m, deps in stages.items()
            if any(d.startswith(f"{ATTRIBUTION}.methods") for d in deps)} == {}
    methods = {m: deps for m, deps in graph.items() if m.startswith(f"{ATTRIBUTION}.methods.")}
    assert len(methods) >= 6
    crossing = {m: sorted(d for d in deps if d.startswith(f"{ATTRIBUTION}.methods") and d != m)
                for m, deps in methods.items()}
    assert {m: d for m, d in crossing.items() if d} == {}


def test_no_attribution_module_imports_a_private_name_or_testing():
    graph, privates = _graph()
    assert privates == []
    assert {m: sorted(d for d in deps if d.startswith("causaltrace.testing")) for m, deps in graph.items()
            if any(d.startswith("causaltrace.testing") for d in deps)} == {}
