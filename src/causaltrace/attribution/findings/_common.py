"""What every detector shares: building a :class:`~causaltrace.schema.Finding` from step indices, and the
relatedness rule a comparison must pass before it may blame anything (issue 32 item 2).

A comparison is *related* when its source is the task or an ancestor of the step in the dependency graph (the step
could have read it) and both values are of one type (a number with a number of the same unit dimension, an agent
with an agent, an entity with an entity). A routing choice is compared with what asks for it — the task's request,
a plan, an instruction — never with an earlier routing choice or a tool's result that merely precedes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import JsonValue

from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.provenance_record import Change, Provenance
from causaltrace.schema import FINDING_FAMILIES, Finding, FindingEvidence, FindingRole, Run

__all__ = ["TASK_INDEX", "change_finding", "change_strength", "evidence", "finding", "related_source"]

#: the evidence index of the task itself (no step holds it)
TASK_INDEX = -1
#: the step kinds that decide a route; a route is never the source of another route
ROUTING_KINDS = frozenset({"handoff", "speaker_selection"})
#: the step kinds whose content is the environment's answer, never a statement of what to route to
RESULT_KINDS = frozenset({"tool_response", "code_execution"})


def evidence(run: Run, index: int, role: FindingRole, value: JsonValue = None) -> FindingEvidence:
    """A pointer to step ``index`` (``TASK_INDEX``: the task) with the value it holds there."""
    step_id = run.step_at(index).step_id if index >= 0 else None
    return FindingEvidence(step_id=step_id, index=index, value=value, role=role)


def finding(run: Run, family: str, index: int, claim: str, items: Iterable[FindingEvidence] = (), *,
            strength: float = 1.0, category: str | None = None) -> Finding:
    """A finding of ``family`` at step ``index``; its category is the family's MAST mode unless one is given."""
    return Finding(family=family, step_id=run.step_at(index).step_id, index=index,  # type: ignore[arg-type]
                   category=category if category is not None else FINDING_FAMILIES.get(family),
                   claim=claim, evidence=tuple(items), strength=round(strength, 4))


def related_source(run: Run, graph: DependencyGraph | None, index: int, source: int, *, routing: bool = False) -> bool:
    """True when ``source`` (a step index, or ``TASK_INDEX``) may be compared with step ``index``: the task, or an
    ancestor of the step in the dependency graph (a run whose graph has no edges at all — a plain log — falls back
    to "earlier"); for a ``routing`` value, the source must also be no routing choice, and no result unless the
    choice was decided on it (:func:`_decided_on`)."""
    if source == TASK_INDEX:
        return True
    if source == index:  # a step compared with itself (an operator against its own terms)
        return True
    if source > index:
        return False
    if routing:
        kind = run.step_at(source).kind
        if kind in ROUTING_KINDS or (kind in RESULT_KINDS and not _decided_on(graph, index, source)):
            return False
    if graph is None or not graph.edges:
        return True
    return source in graph.ancestors(index)


def _decided_on(graph: DependencyGraph | None, index: int, source: int) -> bool:
    """True when the result ``source`` is what the routing step ``index`` was decided on: an input of the step or of
    the reply that made it (a classifier's ``billing`` the triage reply read before handing off — issue 32, tuning
    case ag-swarm-handoff), not a result that merely happened to come earlier."""
    if graph is None:
        return False
    deciders = set(graph.producers(index))
    return source in deciders or any(source in graph.producers(j) for j in deciders)


def change_strength(prov: Provenance, index: int) -> float:
    """How strongly a change at step ``index`` blames it: 1 when what the step decided reaches the failing answer
    (provenance reach ≥ 0.25), 0.3 when it never does (the change was real but not decisive)."""
    return 1.0 if prov.reaches(index) >= 0.25 else 0.3


def change_finding(run: Run, family: str, change: Change, prov: Provenance, source_role: FindingRole = "source",
                   changed_role: FindingRole = "changed") -> Finding:
    """A finding from one provenance :class:`Change`: the step, what its source held and what it states."""
    reach = prov.reaches(change.index)
    claim = f"step {change.index} {change.describe()}" + (
        f", reaching the failure (reach {reach:.2f})" if reach > 0 else ", though it never reaches the failure")
    items = [evidence(run, change.source, source_role, change.before),
             evidence(run, change.index, changed_role, change.after)]
    return finding(run, family, change.index, claim, items, strength=change_strength(prov, change.index))
