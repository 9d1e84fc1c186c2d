"""Family ``omission``: the answer is stated before every item the task named was handled — an item of the request
left out (MAST FM-3.1, premature termination). :mod:`causaltrace.attribution.stages.provenance_passes` finds the
answer that comes before any step used one of the task's items."""

from __future__ import annotations

from causaltrace.attribution.findings._common import change_finding
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.schema import Finding, Run

__all__ = ["detect_omissions"]


def detect_omissions(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per premature answer; the omitted item is its evidence."""
    return [change_finding(run, "omission", c, prov, "omitted_item") for c in prov.changes if c.how == "omitted"]
