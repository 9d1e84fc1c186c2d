"""Family ``made_up_data``: the first step whose own text or code says it invents its data (simulated, hypothetical
or sample figures, a placeholder key, knowledge standing in for a lookup), found by
:mod:`causaltrace.attribution.stages.fabrication`; words the task itself uses, execution output and pasted pages do
not count. Not reported after a drifted opening: what a derailed run invents serves the other task."""

from __future__ import annotations

from causaltrace.attribution.findings._common import evidence, finding
from causaltrace.attribution.stages.fabrication import Fabrication
from causaltrace.schema import Finding, Run

__all__ = ["detect_made_up_data"]


def detect_made_up_data(run: Run, fabrication: Fabrication | None) -> list[Finding]:
    """The first fabricating step as a finding; its markers are the evidence."""
    if fabrication is None:
        return []
    items = [evidence(run, fabrication.index, "marker", m) for m in fabrication.markers[:4]]
    return [finding(run, "made_up_data", fabrication.index, f"step {fabrication.index} {fabrication.describe()}",
                    items)]
