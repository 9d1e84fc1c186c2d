"""Family ``ignored_instruction``: a step uses a value its source excluded by label ("not the cancelled ones",
"excluding refunds") — an instruction not followed (MAST FM-1.1). Found by the provenance walk, which keeps each
exclusion with the label it names."""

from __future__ import annotations

from causaltrace.attribution.findings._common import change_finding, related_source
from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.schema import Finding, Run

__all__ = ["detect_ignored_instructions"]


def detect_ignored_instructions(run: Run, prov: Provenance, graph: DependencyGraph | None) -> list[Finding]:
    """One finding per use of an excluded value whose exclusion the step could have read."""
    return [change_finding(run, "ignored_instruction", c, prov, "request") for c in prov.changes
            if c.how == "ignored" and related_source(run, graph, c.index, c.source)]
