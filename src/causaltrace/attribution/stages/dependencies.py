"""Dependency-graph builder (ARCHITECTURE "The default attribution method" step 2; DeFA §3.3, SEEDS §3.3).

For a live run the graph is the explicit ``Step.depends_on`` that instrumentation recorded (no LLM needed). For an
imported log (no explicit dependencies at all) the protocol relations are recovered **deterministically** by
running :class:`ProtocolRule` s through an interpreter with DeFA's four pairing modes:

* ``next`` — each source pairs with the first later step that matches the target (then it is done);
* ``all`` — each source pairs with every later matching step;
* ``fifo`` — pending sources queue up; each matching target takes the oldest one;
* ``lifo`` — pending sources stack up; each matching target takes the newest one (nested calls).

A rule may require the target's agent to be the one the source addresses (``addressed=True``, for
``"Orchestrator (-> X)"`` instructions) and may bound the distance (``max_gap`` steps). Rules are plain data
(:meth:`ProtocolRule.from_json`), so DeFA's LLM-induced rules (issue 6) run through the same interpreter.

The built-in rules for Who&When-style logs (:data:`LOG_RULES`):

1. ``code→execution``: a message carrying a code block → the next terminal output (``executes``, next-match);
2. ``instruction→reply``: ``X (-> Y)`` → Y's next step (``saw``, next-match, addressed);
3. ``thought→instruction``: ``Orchestrator (thought)`` → the instruction right after it (``produced_by``, gap 1);
4. ``previous message``: every step → the next step (``saw``, gap 1) — in a group chat everyone sees everything,
   and consecutive ``saw`` edges keep the graph linear while reachability still covers the whole context.

Edges point producer → consumer over step **indices**; each keeps its dependency ``kind`` and the ``rule`` that
made it (``explicit`` for recorded ones). The artifact lists ``[producer, consumer, kind, rule]``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.view import (
    addressee,
    base_agent,
    has_explicit_dependencies,
    speaker,
    view_steps,
)
from causaltrace.schema import DEPENDENCY_KINDS, Run, Step

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "LOG_RULES",
    "DependencyGraph",
    "DependencyGraphStage",
    "Edge",
    "ProtocolRule",
    "StepMatch",
    "build_dependency_graph",
    "interpret_rules",
]

Pairing = Literal["next", "all", "fifo", "lifo"]
#: Dependency kinds through which a result's content is the producer's responsibility (request → result).
PROTOCOL_KINDS = frozenset({"executes", "tool_result_of", "answer_of", "produced_by"})


@dataclass(frozen=True, kw_only=True)
class StepMatch:
    """A condition on one step; every given field must hold (regexes: ``fullmatch`` on names, ``search`` on text)."""

    speaker: str | None = None
    agent: str | None = None
    kinds: frozenset[str] | None = None
    content: str | None = None
    has_code: bool | None = None

    def matches(self, step: Step) -> bool:
        if self.kinds is not None and step.kind not in self.kinds:
            return False
        if self.speaker is not None and not re.fullmatch(self.speaker, speaker(step)):
            return False
        if self.agent is not None and not re.fullmatch(self.agent, base_agent(step.agent or speaker(step))):
            return False
        if self.has_code is not None and bool(_code_of(step)) != self.has_code:
            return False
        return not (self.content is not None and not re.search(self.content, step.content or ""))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("speaker", "agent", "content", "has_code"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.kinds is not None:
            out["kinds"] = sorted(self.kinds)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepMatch:
        kinds = data.get("kinds")
        return cls(
            speaker=data.get("speaker"),
            agent=data.get("agent"),
            kinds=frozenset(kinds) if kinds is not None else None,
            content=data.get("content"),
            has_code=data.get("has_code"),
        )


def _code_of(step: Step) -> str:
    code = step.inputs.get("code")
    return code if isinstance(code, str) else ""


@dataclass(frozen=True, kw_only=True)
class ProtocolRule:
    """A protocol relation: which source step pairs with which later target step, how, and as what kind."""

    name: str
    source: StepMatch
    target: StepMatch
    pairing: Pairing = "next"
    kind: str = "saw"
    addressed: bool = False
    max_gap: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in DEPENDENCY_KINDS:
            raise ValueError(f"rule {self.name!r}: unknown dependency kind {self.kind!r}")
        if self.pairing not in ("next", "all", "fifo", "lifo"):
            raise ValueError(f"rule {self.name!r}: unknown pairing {self.pairing!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source.to_json(),
            "target": self.target.to_json(),
            "pairing": self.pairing,
            "kind": self.kind,
            "addressed": self.addressed,
            "max_gap": self.max_gap,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProtocolRule:
        return cls(
            name=str(data["name"]),
            source=StepMatch.from_json(data.get("source") or {}),
            target=StepMatch.from_json(data.get("target") or {}),
            pairing=data.get("pairing", "next"),
            kind=data.get("kind", "saw"),
            addressed=bool(data.get("addressed", False)),
            max_gap=data.get("max_gap"),
        )


LOG_RULES: tuple[ProtocolRule, ...] = (
    ProtocolRule(
        name="code→execution",
        source=StepMatch(has_code=True),
        target=StepMatch(kinds=frozenset({"tool_response"})),  # a tool speaker (collector.speakers)
        pairing="next",
        kind="executes",
    ),
    ProtocolRule(
        name="instruction→reply",
        source=StepMatch(speaker=r".+ \(-> .+\)"),
        target=StepMatch(),
        pairing="next",
        kind="saw",
        addressed=True,
    ),
    ProtocolRule(
        name="thought→instruction",
        source=StepMatch(speaker=r"Orchestrator \(thought\)"),
        target=StepMatch(speaker=r"Orchestrator \(-> .+\)"),
        pairing="next",
        kind="produced_by",
        max_gap=1,
    ),
    ProtocolRule(name="previous message", source=StepMatch(), target=StepMatch(), pairing="next", kind="saw",
                 max_gap=1),
)


@dataclass(frozen=True)
class Edge:
    """``consumer`` depended on ``producer`` (step indices) as ``kind``; ``rule`` says where the edge came from."""

    producer: int
    consumer: int
    kind: str
    rule: str

    def to_json(self) -> list[Any]:
        return [self.producer, self.consumer, self.kind, self.rule]


def interpret_rules(steps: Sequence[Step], rules: Iterable[ProtocolRule]) -> list[Edge]:
    """Run each rule over ``steps`` (index order) with its pairing mode; returns forward edges (module docstring)."""
    edges: list[Edge] = []
    for rule in rules:
        pending: deque[Step] = deque()
        for step in steps:
            if rule.target.matches(step):
                for src in _pair(rule, pending, step):
                    edges.append(Edge(src.index, step.index, rule.kind, rule.name))
            if rule.source.matches(step):
                pending.append(step)
    return edges


def _fits(rule: ProtocolRule, src: Step, target: Step) -> bool:
    if rule.max_gap is not None and target.index - src.index > rule.max_gap:
        return False
    if rule.addressed:
        who = addressee(src)
        return who is not None and base_agent(who) == base_agent(target.agent or speaker(target))
    return True


def _pair(rule: ProtocolRule, pending: deque[Step], target: Step) -> list[Step]:
    if rule.max_gap is not None:  # sources that can no longer pair are dropped
        while pending and target.index - pending[0].index > rule.max_gap:
            pending.popleft()
    fitting = [s for s in pending if _fits(rule, s, target)]
    if not fitting:
        return []
    if rule.pairing == "all":
        return fitting
    if rule.pairing == "next":
        for s in fitting:
            pending.remove(s)
        return fitting
    chosen = fitting[0] if rule.pairing == "fifo" else fitting[-1]
    pending.remove(chosen)
    return [chosen]


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
    """The run's dependency graph: explicit dependencies when recorded, else ``rules`` (default :data:`LOG_RULES`)."""
    index_of = {s.step_id: s.index for s in run.steps}
    if rules is None and has_explicit_dependencies(run):
        edges = [
            Edge(index_of[d.step_id], s.index, d.kind, "explicit")
            for s in run.steps
            for d in s.depends_on
            if d.step_id in index_of
        ]
        return DependencyGraph(edges=edges, source="explicit", nodes=[s.index for s in run.steps])
    chosen = list(LOG_RULES if rules is None else rules)
    steps = view_steps(run)
    edges = interpret_rules(steps, chosen)
    edges.sort(key=lambda e: (e.consumer, e.producer, e.kind))
    return DependencyGraph(edges=edges, source="recovered", rules=chosen, nodes=[s.index for s in steps])


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
