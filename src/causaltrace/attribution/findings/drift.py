"""Family ``task_drift``: the run's opening plan or delegation is about another task (MAST FM-2.3), found by
:mod:`causaltrace.attribution.stages.drift` from the opening's share of what the task's request asks for. A
framework's standard opening — a facts survey, a planning step that restates the task — shares the request's words
and is never a drift."""

from __future__ import annotations

from causaltrace.attribution.findings._common import TASK_INDEX, evidence, finding
from causaltrace.attribution.stages.drift import TaskDrift
from causaltrace.schema import Finding, Run

__all__ = ["detect_task_drift"]


def detect_task_drift(run: Run, drift: TaskDrift | None) -> list[Finding]:
    """The drifted opening as a finding, with the request words it left out as evidence."""
    if drift is None:
        return []
    items = [evidence(run, TASK_INDEX, "request", list(drift.examples)), evidence(run, drift.index, "opening")]
    return [finding(run, "task_drift", drift.index, f"step {drift.index} {drift.describe()}", items)]
