"""Dependency-graph builder (ARCHITECTURE "The default attribution method" step 2; DeFA §3.3, SEEDS §3.3).

The graph reads only dependencies, kinds and values (issue 32 item 1), in one of three ways:

* a **live** run: the explicit ``Step.depends_on`` that instrumentation recorded (source ``explicit``, rule
  ``explicit``);
* an **imported log** whose importer derived its dependencies at import (``Run.metadata["dependencies"] ==
  "derived"``; :mod:`causaltrace.collector.protocol_rules`): the stored dependencies, each labelled with the
  conversation rule(s) that admit it (source ``recovered``, as before the importers derived them);
* a run with **no dependencies at all**: the format-neutral conversation rules
  (:data:`~causaltrace.collector.protocol_rules.CONVERSATION_RULES`, over kinds and values: code → the next tool
  output, an instruction → the addressed agent's next step, a reasoning step → its agent's instruction right after
  it, each step → the next) run here (source ``recovered``); ``rules=`` runs other rules (DeFA's LLM-induced ones)
  instead.

The rule interpreter and its data types (:class:`ProtocolRule`, :class:`StepMatch`, :class:`Edge`,
:func:`interpret_rules`) live in :mod:`causaltrace.collector.protocol_rules`, where importers apply them, and are
re-exported here. A format's naming conventions (Who&When's ``"Orchestrator (-> X)"``, its terminals) belong to its
importer, never to this module. ``LOG_RULES`` (deprecated) is the conversation rules' old name.

Edges point producer → consumer over step **indices**; each keeps its dependency ``kind`` and the ``rule`` that
made it. The artifact lists ``[producer, consumer, kind, rule]``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.view import has_explicit_dependencies, view_steps
from causaltrace.collector.protocol_rules import (
    CONVERSATION_RULES,
    Edge,
    ProtocolRule,
    StepMatch,
    dependencies_derived,
    interpret_rules,
    rules_admitting,
)
from causaltrace.schema import Run

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "CONVERSATION_RULES",
    "DependencyGraph",
    "DependencyGraphStage",
    "Edge",
    "ProtocolRule",
    "StepMatch",
    "build_dependency_graph",
    "interpret_rules",
]

#: Dependency kinds through which a result's content is the producer's responsibility (request → result).
PROTOCOL_KINDS = frozenset({"executes", "tool_result_of", "answer_of", "produced_by"})


def __getattr__(name: str) -> Any:
    if name == "LOG_RULES":  # issue 32: the Who&When speaker rules moved to the importer (collector.whowhen)
        warnings.warn("LOG_RULES is deprecated: the format-neutral rules are "
                      "causaltrace.collector.protocol_rules.CONVERSATION_RULES; a format's naming conventions are "
                      "mapped to kinds, values and dependencies by its importer", DeprecationWarning, stacklevel=2)
        return CONVERSATION_RULES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class DependencyGraph:
    """The dependency graph over step indices (producer → consumer), and where it came from."""

    edges: list[Edge]
    source: Literal["explicit", "recovered"]
    rules: list[ProtocolRule] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)

    @cached_property
    def graph(self) -> nx.DiGraph[int]:
        """The networkx DiGraph; edge attribute ``kinds`` lists every kind between the pair, ``rules`` the rules."""
        import networkx as nx

        g: nx.DiGraph[int] = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        for e in self.edges:
            if g.has_edge(e.producer, e.consumer):
                data = g.edges[e.producer, e.consumer]
                if e.kind not in data["kinds"]:
                    data["kinds"].append(e.kind)
                if e.rule not in data["rules"]:
                    data["rules"].append(e.rule)
            else:
                g.add_edge(e.producer, e.consumer, kinds=[e.kind], rules=[e.rule])
        return g

    @cached_property
    def _incoming(self) -> dict[int, list[Edge]]:
        out: dict[int, list[Edge]] = {}
        for e in self.edges:
            out.setdefault(e.consumer, []).append(e)
        return out

    @cached_property
    def _outgoing(self) -> dict[int, list[Edge]]:
        out: dict[int, list[Edge]] = {}
        for e in self.edges:
            out.setdefault(e.producer, []).append(e)
        return out

    def incoming(self, index: int) -> list[Edge]:
        """Edges into ``index`` (what it depended on)."""
        return self._incoming.get(index, [])

    def producers(self, index: int, kinds: Iterable[str] | None = None) -> list[int]:
        """Steps ``index`` depended on (optionally only through ``kinds``), latest first."""
        wanted = set(kinds) if kinds is not None else None
        out = {e.producer for e in self._incoming.get(index, []) if wanted is None or e.kind in wanted}
        return sorted(out, reverse=True)

    def consumers(self, index: int, kinds: Iterable[str] | None = None) -> list[int]:
        """Steps that depended on ``index`` (optionally only through ``kinds``), earliest first."""
        wanted = set(kinds) if kinds is not None else None
        return sorted({e.consumer for e in self._outgoing.get(index, []) if wanted is None or e.kind in wanted})

    def ancestors(self, index: int) -> set[int]:
        """Every step ``index`` transitively depended on."""
        import networkx as nx

        if index not in self.graph:
            return set()
        return set(nx.ancestors(self.graph, index))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "edges": [e.to_json() for e in self.edges]}
        if self.rules:
            out["rules"] = [r.to_json() for r in self.rules]
        return out


def build_dependency_graph(run: Run, rules: Sequence[ProtocolRule] | None = None) -> DependencyGraph:
    """The run's dependency graph (module docstring): recorded, derived at import, or recovered by ``rules``
    (default :data:`CONVERSATION_RULES`)."""
    if rules is None and dependencies_derived(run) and any(s.depends_on for s in run.steps):
        return _derived_graph(run)
    if rules is None and has_explicit_dependencies(run):
        index_of = {s.step_id: s.index for s in run.steps}
        edges = [
            Edge(index_of[d.step_id], s.index, d.kind, "explicit")
            for s in run.steps
            for d in s.depends_on
            if d.step_id in index_of
        ]
        return DependencyGraph(edges=edges, source="explicit", nodes=[s.index for s in run.steps])
    chosen = list(CONVERSATION_RULES if rules is None else rules)
    steps = view_steps(run)
    edges = interpret_rules(steps, chosen)
    edges.sort(key=lambda e: (e.consumer, e.producer, e.kind))
    return DependencyGraph(edges=edges, source="recovered", rules=chosen, nodes=[s.index for s in steps])


def _derived_graph(run: Run) -> DependencyGraph:
    """The stored dependencies of a run whose importer derived them, each labelled with the conversation rule(s)
    that admit it (one edge per rule, as when the rules run here; ``derived`` when none does)."""
    steps = view_steps(run)
    by_id = {s.step_id: s for s in steps}
    edges = []
    for step in steps:
        for dep in step.depends_on:
            producer = by_id.get(dep.step_id)
            if producer is None:
                continue
            names = rules_admitting(CONVERSATION_RULES, producer, step, dep.kind) or ["derived"]
            edges.extend(Edge(producer.index, step.index, dep.kind, name) for name in names)
    edges.sort(key=lambda e: (e.consumer, e.producer, e.kind))
    return DependencyGraph(edges=edges, source="recovered", rules=list(CONVERSATION_RULES),
                           nodes=[s.index for s in steps])


class DependencyGraphStage(Stage[DependencyGraph]):
    """Stage ``dependency_graph``: explicit dependencies, or protocol relations recovered by rules (deterministic)."""

    stage_id: ClassVar[str] = "dependency_graph"

    def __init__(self, rules: Sequence[ProtocolRule] | None = None) -> None:
        self.rules = rules

    async def run(self, ctx: DiagnosisContext) -> DependencyGraph:
        return build_dependency_graph(ctx.run, self.rules)

    def skipped(self, ctx: DiagnosisContext) -> DependencyGraph:
        steps = view_steps(ctx.run)
        return DependencyGraph(edges=[], source="recovered", nodes=[s.index for s in steps])
