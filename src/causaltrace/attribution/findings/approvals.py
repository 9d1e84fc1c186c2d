"""Family ``unchecked_approval``: a reviewer approves a result that never used a value the task gave (MAST FM-3.2,
no or incorrect verification): the approval is a check that did not check.
:mod:`causaltrace.attribution.stages.provenance_passes` compares what the approved result used with the task."""

from __future__ import annotations

from causaltrace.attribution.findings._common import change_finding
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.schema import Finding, Run

__all__ = ["detect_unchecked_approvals"]


def detect_unchecked_approvals(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per approval of a result that left out a value of the task."""
    return [change_finding(run, "unchecked_approval", c, prov, "unchecked", "approved") for c in prov.changes
            if c.how == "unverified"]
