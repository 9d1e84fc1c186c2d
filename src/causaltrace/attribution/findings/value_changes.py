"""Families ``value_changed`` and ``unsupported_value``: a step states a value its source held otherwise — a number
restated or copied with a slip, a unit, operator, bound, entity or qualifier substituted (MAST FM-2.6, the action
does not match what it read) — or passes a number no source gave and no arithmetic derives.
:mod:`causaltrace.attribution.stages.provenance` finds the comparisons; this detector keeps only the related ones
(:func:`~._common.related_source`: the source is the task or an ancestor of the step, and both values are of one
type) and leaves routing targets to :mod:`.routing`."""

from __future__ import annotations

from causaltrace.attribution.findings._common import change_finding, related_source
from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.schema import Finding, Run

__all__ = ["detect_changed_values", "detect_unsupported_values"]

_CHANGES = ("restatement", "substitution", "copy")


def detect_changed_values(run: Run, prov: Provenance, graph: DependencyGraph | None) -> list[Finding]:
    """One finding per related value change (not a routing target)."""
    return [change_finding(run, "value_changed", c, prov) for c in prov.changes
            if c.how in _CHANGES and c.kind != "target" and related_source(run, graph, c.index, c.source)]


def detect_unsupported_values(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per number a step passes that no source gave and no arithmetic derives — unless the same agent
    called the same tool again later without that number (a call it corrected: ``tariff(year=2025)``, then, after
    a reviewer's note, ``tariff(year=2026)``): an error the run recovered from."""
    return [change_finding(run, "unsupported_value", c, prov) for c in prov.changes
            if c.how == "unsupported" and not _redone(run, c.index, c.after)]


def _redone(run: Run, index: int, number: str) -> bool:
    step = run.step_at(index)
    if step.kind != "tool_call" or not step.tool_name:
        return False
    return any(s.kind == "tool_call" and s.tool_name == step.tool_name and s.agent == step.agent
               and number not in (str(v) for v in (s.arguments or {}).values())
               for s in run.steps[index + 1:])
