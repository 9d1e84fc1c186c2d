"""Family ``unfit_routing``: a routing or delegation choice that does not fit the request — another participant is
named by what asks for the work (the task's request, a plan, an instruction) while the chosen one is not; or the
request shares no word with what the chosen agent can do (its description and tools, stored with a live run) and
some with what another candidate can; or the
chosen speaker's reply states the failing value from nothing it was given (an unfounded choice that decided the
answer). Sources are never earlier routing choices or tool results (:func:`~._common.related_source` with
``routing``)."""

from __future__ import annotations

from causaltrace.attribution.findings._common import change_finding, related_source
from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.schema import Finding, Run

__all__ = ["detect_unfit_routing"]


def detect_unfit_routing(run: Run, prov: Provenance, graph: DependencyGraph | None) -> list[Finding]:
    """One finding per routing choice a related source contradicts, or whose chosen speaker guessed."""
    out = []
    for c in prov.changes:
        if c.how == "unfounded":
            out.append(change_finding(run, "unfit_routing", c, prov, "changed", "chosen_agent"))
        elif c.kind == "target" and c.how in ("substitution", "unfit") and related_source(run, graph, c.index,
                                                                                         c.source, routing=True):
            out.append(change_finding(run, "unfit_routing", c, prov, "request", "chosen_agent"))
    return out
