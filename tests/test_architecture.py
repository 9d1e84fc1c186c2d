"""The rules of ARCHITECTURE.md "Package layout" as checks (issue 18 item 10), one test per rule.

Every ``import`` / ``from … import`` statement of ``src/causaltrace`` is read with :mod:`ast` — module level,
inside functions (lazy imports) and under ``if TYPE_CHECKING:`` — and resolved to the module it loads
(``from pkg import sub`` loads the submodule ``pkg.sub``; ``from pkg import name`` loads ``pkg``). Parent packages
that Python initialises on the way are NOT edges: every import would otherwise depend on ``causaltrace/__init__``.
Imports made from strings (``importlib.import_module``: the adapter registry, ``--factory``) cannot be read
statically and are not checked.

``TYPE_CHECKING`` imports: they obey the import table, the stages rule and the private-name rule (a type that a
module names is a dependency of its design), but they are left out of the circle check, because they never
execute: they cannot make an import-time circle, and they are the standard way to type a back reference without
making one.

A package's ``__init__`` that re-exports its own submodules is no circle while they never import it back; that
holds by construction here, since only the imports written in a module are its edges.

The size rule (< 800 lines per file, < 80 lines per function, STYLE) has an explicit allow-list of what later
issues rewrite anyway: the OTLP codec, the HTML report, the store and the CLI.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "causaltrace"

TRUNK = frozenset({"schema", "recording", "protocols", "semconv", "exceptions", "config"})
#: ARCHITECTURE "Who may import whom": layer → the layers it may import (its own always included)
MAY_IMPORT: dict[str, frozenset[str]] = {
    **{name: TRUNK for name in TRUNK},
    "instrumentation": TRUNK | {"instrumentation", "collector"},
    "collector": TRUNK | {"collector"},
    "attribution": TRUNK | {"attribution", "collector"},
    "replay": TRUNK | {"replay", "collector", "attribution"},
    "verifiers": TRUNK | {"verifiers"},
    "report": TRUNK | {"report", "collector"},
    # "anything above": every row above theirs, and each other (they share a row)
    "testing": TRUNK | {"instrumentation", "collector", "attribution", "replay", "verifiers", "report", "testing",
                        "demo"},
    "demo": TRUNK | {"instrumentation", "collector", "attribution", "replay", "verifiers", "report", "testing",
                     "demo"},
}
#: layers that may also import the root package, the public API (``causaltrace.run``): they are written as a
#: user's program is; the root imports neither of them, so this makes no circle
MAY_IMPORT_THE_API = frozenset({"testing", "demo"})
#: the last row: "cli, watch, __init__ — anything" (``_cli_replay`` is the CLI's replay half)
ANYTHING = frozenset({"cli", "_cli_replay", "watch", "__init__"})

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80
#: what a later issue rewrites anyway (issue 18 item 10); an entry ending in "/" is a whole package
SIZE_ALLOW_LIST: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------------ the walk


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. causaltrace.replay.executor
    rel: str  # the path under the package's folder, e.g. replay/executor.py
    is_package: bool
    tree: ast.Module
    lines: int


@dataclass(frozen=True)
class ImportEdge:
    importer: str
    target: str  # the module the statement loads
    name: str | None  # the name taken from ``target`` when it is not a submodule (``from target import name``)
    lineno: int
    lazy: bool  # inside a function
    type_only: bool  # under ``if TYPE_CHECKING:``


def load_modules(src: Path, root: str = ROOT) -> dict[str, Module]:
    """Every module of the package ``root`` under ``src``, by dotted name."""
    out: dict[str, Module] = {}
    for path in sorted((src / root).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        text = path.read_text(encoding="utf-8")
        out[".".join(parts)] = Module(".".join(parts), path.relative_to(src / root).as_posix(), is_package,
                                      _parse(text, str(path)), len(text.splitlines()))
    return out


def _parse(text: str, name: str) -> ast.Module:
    """``ast.parse``, tried again once on CPython 3.11.7's "AST constructor recursion depth mismatch" (gh-106905,
    fixed in 3.11.8): the interpreter shares that count between threads, so a parse on this thread fails while an
    earlier test's thread (a framework building a ``@tool``) parses too — a machine fact, not a fault of the code."""
    try:
        return ast.parse(text, name)
    except SystemError:
        return ast.parse(text, name)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST):
    """``(Import | ImportFrom node, lazy, type_only)`` for every import statement, at any depth."""
    stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    while stack:
        node, lazy, type_only = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy, type_only
            continue
        inner_lazy = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, inner_lazy, True) for child in node.body)
            stack.extend((child, inner_lazy, type_only) for child in node.orelse)
            continue
        stack.extend((child, inner_lazy, type_only) for child in ast.iter_child_nodes(node))


def _longest_module(dotted: str, modules: dict[str, Module]) -> str | None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in modules:
            return ".".join(parts[:cut])
    return None


def _resolve_from(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_edges(modules: dict[str, Module], root: str = ROOT) -> list[ImportEdge]:
    """Every import of a ``root`` module made by a ``root`` module, resolved to the module it loads."""
    edges: list[ImportEdge] = []
    for module in modules.values():
        for node, lazy, type_only in _statements(module.tree):
            found: list[tuple[str | None, str | None]] = []
            if isinstance(node, ast.Import):
                found = [(_longest_module(alias.name, modules), None) for alias in node.names]
            else:
                base = _resolve_from(module, node)
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        found.append((f"{base}.{alias.name}", None))
                    else:
                        found.append((_longest_module(base, modules), None if alias.name == "*" else alias.name))
            edges += [ImportEdge(module.name, target, name, node.lineno, lazy, type_only)
                      for target, name in found if target is not None and target.split(".")[0] == root]
    return edges


@cache
def project() -> tuple[dict[str, Module], list[ImportEdge]]:
    modules = load_modules(SRC)
    return modules, import_edges(modules)


def short(name: str, root: str = ROOT) -> str:
    return name[len(root) + 1:] if name.startswith(root + ".") else name


def where(edge: ImportEdge) -> str:
    how = ", ".join(flag for flag, on in (("lazy", edge.lazy), ("TYPE_CHECKING", edge.type_only)) if on)
    return f"{short(edge.importer)}:{edge.lineno}{f' ({how})' if how else ''}"


# ----------------------------------------------------------------------------------------------- the rules


def layer(name: str, root: str = ROOT) -> str:
    """The row of the import table a module belongs to (the first name under the root package)."""
    return "__init__" if name == root else name.split(".")[1]


def layer_violations(modules: dict[str, Module], edges: list[ImportEdge]) -> list[str]:
    out = sorted({f"{short(name)}: layer {layer(name)!r} is not in ARCHITECTURE's import table"
                  for name in modules if layer(name) not in MAY_IMPORT and layer(name) not in ANYTHING})
    for edge in edges:
        source, target = layer(edge.importer), layer(edge.target)
        if source in ANYTHING or source not in MAY_IMPORT or target in MAY_IMPORT[source]:
            continue
        if target == "__init__" and source in MAY_IMPORT_THE_API:
            continue
        out.append(f"{where(edge)} imports {short(edge.target)}: {source} may not import {target}")
    return sorted(set(out))


def stages_violations(edges: list[ImportEdge]) -> list[str]:
    stages, methods = f"{ROOT}.attribution.stages", f"{ROOT}.attribution.methods"
    return sorted({f"{where(e)} imports {short(e.target)}" for e in edges
                   if (e.importer == stages or e.importer.startswith(stages + "."))
                   and (e.target == methods or e.target.startswith(methods + "."))})


def private_owner(edge: ImportEdge, packages: set[str]) -> str | None:
    """The package that the first private ``_name`` of the import belongs to, or None when it names nothing private.

    A private module ``pkg._mod`` and a private name ``pkg._name`` belong to ``pkg``; a private name of a plain
    module, ``pkg.mod._name``, to the module's package ``pkg``. Dunder names (``__version__``) are public."""
    parts = edge.target.split(".") + ([edge.name] if edge.name else [])
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            container = ".".join(parts[:i])
            return container if container in packages else ".".join(parts[: i - 1])
    return None


def private_violations(modules: dict[str, Module], edges: list[ImportEdge]) -> list[str]:
    packages = {name for name, m in modules.items() if m.is_package}
    out = []
    for edge in edges:
        owner = private_owner(edge, packages)
        if owner is None or edge.importer == owner or edge.importer.startswith(owner + "."):
            continue
        what = f"{short(edge.target)}.{edge.name}" if edge.name else short(edge.target)
        out.append(f"{where(edge)} imports {what}, private to {short(owner)}")
    return sorted(set(out))


def _shortest_cycle(graph: nx.DiGraph, start: str) -> list[str]:
    """The shortest path start → … → start (breadth first)."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph.successors(node)):
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if succ not in previous:
                previous[succ] = node
                queue.append(succ)
    return []


def import_circles(edges: list[ImportEdge]) -> list[list[list[str]]]:
    """The import circles among modules: for each strongly connected component of the import graph (largest
    first), the shortest circle ``[a, b, …, a]`` through each of its modules, duplicates dropped — so every module
    of a component is named in a chain that can be read edge by edge."""
    graph = nx.DiGraph()
    for edge in edges:
        if not edge.type_only:
            graph.add_edge(edge.importer, edge.target)
    components: list[list[list[str]]] = []
    for component in sorted(nx.strongly_connected_components(graph), key=lambda c: (-len(c), sorted(c))):
        only = next(iter(component))
        if len(component) == 1 and not graph.has_edge(only, only):
            continue
        sub, seen, chains = graph.subgraph(component), set(), []
        for start in sorted(component):
            chain = _shortest_cycle(sub, start)
            key = frozenset(pairwise(chain))
            if chain and key not in seen:
                seen.add(key)
                chains.append(chain)
        components.append(chains)
    return components


def render_circles(components: list[list[list[str]]], edges: list[ImportEdge]) -> list[str]:
    """One line per component, then one per chain: ``a (l.12) → b (l.40, lazy) → a`` (the importing lines)."""
    line = {(e.importer, e.target): e for e in sorted(edges, key=lambda e: (not e.lazy, -e.lineno))}
    out = []
    for chains in components:
        members = sorted({m for chain in chains for m in chain})
        out.append(f"circle among {len(members)} modules: {', '.join(short(m) for m in members)}")
        out += ["    " + " → ".join(f"{short(a)} (l.{line[a, b].lineno}{', lazy' if line[a, b].lazy else ''})"
                                    for a, b in pairwise(chain)) + f" → {short(chain[-1])}" for chain in chains]
    return out


def _allowed_large(rel: str) -> bool:
    return any(rel == entry or (entry.endswith("/") and rel.startswith(entry)) for entry in SIZE_ALLOW_LIST)


def long_files(modules: dict[str, Module]) -> list[str]:
    return sorted(f"{m.rel}: {m.lines} lines" for m in modules.values()
                  if m.lines > MAX_FILE_LINES and not _allowed_large(m.rel))


def long_functions(modules: dict[str, Module]) -> list[str]:
    out = []
    for m in modules.values():
        if _allowed_large(m.rel):
            continue
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    out.append(f"{m.rel}:{node.lineno} {node.name}: {size} lines")
    return sorted(out)


def fail_with(title: str, problems: list[str], count: int | None = None) -> None:
    """Fail naming every problem, one per line (``count`` overrides the number in the first line)."""
    if problems:
        pytest.fail(f"{len(problems) if count is None else count} {title}:\n  " + "\n  ".join(problems),
                    pytrace=False)


# ------------------------------------------------------------------------------------------------- the tests


def test_the_walk_sees_the_whole_package():
    modules, edges = project()
    assert len(modules) > 60 and f"{ROOT}.schema" in modules and f"{ROOT}.replay.sandbox" in modules
    assert len(edges) > 300
    assert any(e.lazy for e in edges) and any(not e.lazy for e in edges)


def test_every_import_follows_the_import_table():
    fail_with("imports break ARCHITECTURE's 'who may import whom'", layer_violations(*project()))


def test_attribution_stages_never_import_methods():
    fail_with("imports of attribution.methods from attribution.stages", stages_violations(project()[1]))


def test_no_module_imports_private_names_from_outside_their_package():
    fail_with("imports of another package's private names", private_violations(*project()))


def test_there_is_no_import_circle():
    edges = project()[1]
    components = import_circles(edges)
    fail_with("groups of modules in import circles", render_circles(components, edges), len(components))


def test_the_size_allow_list_names_existing_paths():
    missing = [entry for entry in SIZE_ALLOW_LIST if not (SRC / ROOT / entry.rstrip("/")).exists()]
    fail_with("allow-list entries that no longer exist (drop them)", missing)


def test_no_source_file_is_over_800_lines():
    fail_with(f"files over {MAX_FILE_LINES} lines", long_files(project()[0]))


def test_no_function_is_over_80_lines():
    fail_with(f"functions over {MAX_FUNCTION_LINES} lines", long_functions(project()[0]))


# ------------------------------------------------------------------------- the checks catch what they claim


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checks_find_planted_violations(tmp_path, monkeypatch):
    """A small package with one violation of each kind: the checks name each one, and nothing else."""
    monkeypatch.setattr(sys.modules[__name__], "SIZE_ALLOW_LIST", ("collector/otlp.py",))  # the list is empty now
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))
    _write(tmp_path, {
        "__init__.py": "from causaltrace import replay\n",
        "schema.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from causaltrace.replay import executor\n",
        "instrumentation/__init__.py": "def f():\n    from causaltrace.replay import executor\n",
        "instrumentation/_hidden.py": "X = 1\n",
        "instrumentation/hooks.py": "from causaltrace.instrumentation._hidden import X\nfrom . import _hidden\n",
        "collector/__init__.py": "from causaltrace.collector.otlp import Codec\n",
        "collector/otlp.py": f"from causaltrace.schema import *\nclass Codec: ...\ndef big():\n{long_body}",  # allowed
        "replay/__init__.py": "from .executor import run\n",
        "replay/executor.py": "from causaltrace.instrumentation._hidden import X\nfrom causaltrace import replay\n"
                              "def run(): ...\n",
        "attribution/__init__.py": "",
        "attribution/stages/__init__.py": "",
        "attribution/stages/a.py": "from causaltrace.attribution.methods.m import _p, ok\n",
        "attribution/methods/__init__.py": "",
        "attribution/methods/m.py": f"_p = ok = 1\ndef big():\n{long_body}",
    })
    modules = load_modules(tmp_path)
    edges = import_edges(modules)
    assert layer_violations(modules, edges) == [
        "instrumentation:2 (lazy) imports replay.executor: instrumentation may not import replay",
        "replay.executor:1 imports instrumentation._hidden: replay may not import instrumentation",
        "schema:3 (TYPE_CHECKING) imports replay.executor: schema may not import replay",
    ]
    assert stages_violations(edges) == ["attribution.stages.a:1 imports attribution.methods.m"]
    assert private_violations(modules, edges) == [
        "attribution.stages.a:1 imports attribution.methods.m._p, private to attribution.methods",
        "replay.executor:1 imports instrumentation._hidden.X, private to instrumentation",
    ]
    assert import_circles(edges) == [[["causaltrace.replay", "causaltrace.replay.executor", "causaltrace.replay"]]]
    assert render_circles(import_circles(edges), edges) == [
        "circle among 2 modules: replay, replay.executor",
        "    replay (l.1) → replay.executor (l.2) → replay",
    ]
    assert long_functions(modules) == ["attribution/methods/m.py:2 big: 81 lines"]
    assert long_files(modules) == []
