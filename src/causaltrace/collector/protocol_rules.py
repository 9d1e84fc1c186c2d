"""Protocol rules: the dependencies of a conversation log that recorded none (DeFA §3.3, SEEDS §3.3; issue 32 item 1).

A live run's dependencies are captured by instrumentation. A log (Who&When, a chat export) holds only who said what,
in order; its dependencies follow from the conversation's protocol, which rules state over the steps' **kinds and
values** — never over speaker names (an importer first maps its format's naming conventions to kinds and values:
:mod:`causaltrace.collector.whowhen` turns ``"Orchestrator (-> WebSurfer)"`` into a ``message`` whose
``outputs["target"]`` is ``WebSurfer``, a terminal into a ``tool_response``). An interpreter runs
:class:`ProtocolRule` s with DeFA's four pairing modes:

* ``next`` — each source pairs with the first later step that matches the target (then it is done);
* ``all`` — each source pairs with every later matching step;
* ``fifo`` — pending sources queue up; each matching target takes the oldest one;
* ``lifo`` — pending sources stack up; each matching target takes the newest one (nested calls).

A rule may require the target's agent to be the one the source addresses (``addressed=True``), the target to be
by the source's own agent (``same_agent=True``) and may bound the distance (``max_gap`` steps). Rules are plain data
(:meth:`ProtocolRule.from_json`), so DeFA's LLM-induced rules (issue 6) run through the same interpreter; such a
rule may also match the log's speaker label (``speaker``, a regex the model wrote after reading the labels).

The conversation rules (:data:`CONVERSATION_RULES`), format-neutral:

1. ``code→execution``: a step carrying code → the next tool output (``executes``, next-match);
2. ``instruction→reply``: a step addressing an agent (:func:`addressee`) → that agent's next step (``saw``,
   next-match, addressed);
3. ``thought→instruction``: a ``reasoning`` step → the same agent's instruction right after it (``produced_by``,
   gap 1);
4. ``previous message``: every step → the next step (``saw``, gap 1) — in a group chat everyone sees everything,
   and consecutive ``saw`` edges keep the graph linear while reachability still covers the whole context.

An importer applies them at import (:func:`derive_dependencies`): the edges become the steps' ``depends_on`` and the
run is marked (:data:`DERIVED_KEY`) so attribution knows they were derived, not captured live; attribution applies
the same rules to a run that has no dependencies at all. :func:`rules_admitting` names the rules an edge of a
marked run came from (a dependency stores only its kind).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from causaltrace.collector.speakers import is_context
from causaltrace.schema import DEPENDENCY_KINDS, Dependency, Run, Step

__all__ = [
    "CONVERSATION_RULES",
    "DERIVED",
    "DERIVED_KEY",
    "Edge",
    "ProtocolRule",
    "StepMatch",
    "addressee",
    "agent_of",
    "conversation_steps",
    "derive_dependencies",
    "dependencies_derived",
    "interpret_rules",
    "rules_admitting",
    "speaker",
]

Pairing = Literal["next", "all", "fifo", "lifo"]
#: ``Run.metadata[DERIVED_KEY] == DERIVED``: an importer derived the steps' dependencies by protocol rules.
DERIVED_KEY = "dependencies"
DERIVED = "derived"


def speaker(step: Step) -> str:
    """The original speaker label of a step (``metadata["speaker"]``, what a log wrote), else its agent."""
    value = step.metadata.get("speaker")
    return value if isinstance(value, str) and value else (step.agent or "")


def agent_of(step: Step) -> str:
    """The agent of a step (an importer gives it the agent's own name), else its speaker label."""
    return step.agent or speaker(step)


def addressee(step: Step) -> str | None:
    """The agent a step addresses, a value of the step: a handoff's or an addressed message's ``outputs["target"]``,
    a speaker selection's ``outputs["selected"]``."""
    key = {"handoff": "target", "message": "target", "speaker_selection": "selected"}.get(step.kind)
    value = step.outputs.get(key) if key is not None else None
    return value if isinstance(value, str) and value else None


def _code_of(step: Step) -> str:
    code = step.inputs.get("code")
    return code if isinstance(code, str) else ""


@dataclass(frozen=True, kw_only=True)
class StepMatch:
    """A condition on one step; every given field must hold (regexes: ``fullmatch`` on names, ``search`` on text).
    ``instruction``: the step addresses an agent (:func:`addressee`)."""

    speaker: str | None = None
    agent: str | None = None
    kinds: frozenset[str] | None = None
    content: str | None = None
    has_code: bool | None = None
    instruction: bool | None = None

    def matches(self, step: Step) -> bool:
        if self.kinds is not None and step.kind not in self.kinds:
            return False
        if self.speaker is not None and not re.fullmatch(self.speaker, speaker(step)):
            return False
        if self.agent is not None and not re.fullmatch(self.agent, agent_of(step)):
            return False
        if self.has_code is not None and bool(_code_of(step)) != self.has_code:
            return False
        if self.instruction is not None and (addressee(step) is not None) != self.instruction:
            return False
        return not (self.content is not None and not re.search(self.content, step.content or ""))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("speaker", "agent", "content", "has_code", "instruction"):
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
            instruction=data.get("instruction"),
        )


@dataclass(frozen=True, kw_only=True)
class ProtocolRule:
    """A protocol relation: which source step pairs with which later target step, how, and as what kind."""

    name: str
    source: StepMatch
    target: StepMatch
    pairing: Pairing = "next"
    kind: str = "saw"
    addressed: bool = False
    same_agent: bool = False
    max_gap: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in DEPENDENCY_KINDS:
            raise ValueError(f"rule {self.name!r}: unknown dependency kind {self.kind!r}")
        if self.pairing not in ("next", "all", "fifo", "lifo"):
            raise ValueError(f"rule {self.name!r}: unknown pairing {self.pairing!r}")

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "source": self.source.to_json(),
            "target": self.target.to_json(),
            "pairing": self.pairing,
            "kind": self.kind,
            "addressed": self.addressed,
            "max_gap": self.max_gap,
        }
        if self.same_agent:
            out["same_agent"] = True
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProtocolRule:
        return cls(
            name=str(data["name"]),
            source=StepMatch.from_json(data.get("source") or {}),
            target=StepMatch.from_json(data.get("target") or {}),
            pairing=data.get("pairing", "next"),
            kind=data.get("kind", "saw"),
            addressed=bool(data.get("addressed", False)),
            same_agent=bool(data.get("same_agent", False)),
            max_gap=data.get("max_gap"),
        )

    def fits(self, src: Step, target: Step) -> bool:
        """Whether ``src`` may pair with ``target`` beyond their own conditions (gap, addressee, same agent)."""
        if self.max_gap is not None and target.index - src.index > self.max_gap:
            return False
        if self.same_agent and agent_of(src) != agent_of(target):
            return False
        if self.addressed:
            who = addressee(src)
            return who is not None and who == agent_of(target)
        return True


CONVERSATION_RULES: tuple[ProtocolRule, ...] = (
    ProtocolRule(
        name="code→execution",
        source=StepMatch(has_code=True),
        target=StepMatch(kinds=frozenset({"tool_response"})),
        pairing="next",
        kind="executes",
    ),
    ProtocolRule(
        name="instruction→reply",
        source=StepMatch(instruction=True),
        target=StepMatch(),
        pairing="next",
        kind="saw",
        addressed=True,
    ),
    ProtocolRule(
        name="thought→instruction",
        source=StepMatch(kinds=frozenset({"reasoning"})),
        target=StepMatch(instruction=True),
        pairing="next",
        kind="produced_by",
        same_agent=True,
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


def _pair(rule: ProtocolRule, pending: deque[Step], target: Step) -> list[Step]:
    if rule.max_gap is not None:  # sources that can no longer pair are dropped
        while pending and target.index - pending[0].index > rule.max_gap:
            pending.popleft()
    fitting = [s for s in pending if rule.fits(s, target)]
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


def conversation_steps(steps: Iterable[Step]) -> list[Step]:
    """The steps a conversation's rules run over: all but ``agent_turn`` containers and system context, in index
    order (attribution's view of a run)."""
    return sorted((s for s in steps if s.kind != "agent_turn" and not is_context(s)), key=lambda s: s.index)


def derive_dependencies(steps: Sequence[Step], rules: Sequence[ProtocolRule] = CONVERSATION_RULES) -> list[Step]:
    """``steps`` with the dependencies ``rules`` derive (over :func:`conversation_steps`) as their ``depends_on``,
    each (producer, kind) once, earliest producer first; a step's own dependencies are kept ahead of them. The run
    built from them should carry ``metadata[DERIVED_KEY] = DERIVED``."""
    by_index = {s.index: s for s in steps}
    derived: dict[int, list[Dependency]] = {}
    for e in sorted(interpret_rules(conversation_steps(steps), rules), key=lambda e: (e.consumer, e.producer, e.kind)):
        dep = Dependency(step_id=by_index[e.producer].step_id, kind=e.kind)  # type: ignore[arg-type]
        have = derived.setdefault(e.consumer, [])
        if dep not in have and dep not in by_index[e.consumer].depends_on:
            have.append(dep)
    return [s.model_copy(update={"depends_on": (*s.depends_on, *derived[s.index])}) if s.index in derived else s
            for s in steps]


def dependencies_derived(run: Run) -> bool:
    """Whether an importer derived the run's dependencies by protocol rules (they were not captured live)."""
    return run.metadata.get(DERIVED_KEY) == DERIVED


def rules_admitting(rules: Iterable[ProtocolRule], producer: Step, consumer: Step, kind: str) -> list[str]:
    """The names of the ``rules`` that admit the edge ``producer → consumer`` of ``kind`` (its conditions on both
    steps, its gap, addressee and agent): the rule(s) a derived dependency came from."""
    return [r.name for r in rules if r.kind == kind and r.source.matches(producer) and r.target.matches(consumer)
            and r.fits(producer, consumer)]
