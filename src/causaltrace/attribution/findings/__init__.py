"""Findings: the unit of blame (issue 32; ARCHITECTURE "Verdict rules").

A finding is a typed anomaly at one step with pointers to its evidence — the source value a step changed, the
error it introduced and nobody recovered, the loop it started, the item it left out. One detector module per
family turns what the deterministic stages measured into findings:

===================== ========================================= ================================================
family                module                                    from
===================== ========================================= ================================================
``unrecovered_error`` :mod:`.errors`                            stages.errors (statuses, exit codes, exceptions)
``loop_no_progress``  :mod:`.loops`                             stages.loops (action and instruction loops)
``value_changed``     :mod:`.value_changes`                     stages.provenance (restatement, copy, swap)
``value_changed``     :mod:`.entries`                           a number read from the wrong entry of a result
``value_changed``     :mod:`.extremes`                          an entry acted on that is not the extreme asked for
``superseded_value``  :mod:`.superseded`                        a number a later observation superseded
``unsupported_value`` :mod:`.value_changes`                     stages.provenance (a number nothing gave)
``unfit_routing``     :mod:`.routing`                           stages.provenance + stages.targets
``unfit_routing``     :mod:`.unfit_tools`                       a tool that fits nothing asked; the fitting one unused
``omission``          :mod:`.omissions`                         stages.provenance_passes (premature answer)
``omission``          :mod:`.retyped_lists`                     a result's list retyped without one of its items
``made_up_data``      :mod:`.filled_gaps`                       a table of results with one figure nobody gave
``unchecked_approval`` :mod:`.approvals`                        stages.provenance_passes (unverified approval)
``ignored_instruction`` :mod:`.instructions`                    stages.provenance_walk (excluded values used)
``ignored_instruction`` :mod:`.dropped_bounds`                  a requested span across years narrowed to one
``ignored_instruction`` :mod:`.ignored_feedback`                a teammate's correction of a value ignored
``task_drift``        :mod:`.drift`                             stages.drift (the opening vs the request)
``made_up_data``      :mod:`.fabrication`                       stages.fabrication (invention markers)
===================== ========================================= ================================================

Detectors read kinds, edges and values only — never speaker names and never the run's ``Outcome`` (the failure
anchor, which locates the answer, aside) — so the same team with its error fixed yields no finding at the top
(the twin property). A comparison blames only when it is related (:func:`._common.related_source`).

Stage ``findings`` collects them for ``graph``'s ranking and for ``Diagnosis.findings``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.findings.approvals import detect_unchecked_approvals
from causaltrace.attribution.findings.drift import detect_task_drift
from causaltrace.attribution.findings.dropped_bounds import detect_dropped_bounds
from causaltrace.attribution.findings.entries import detect_wrong_entries
from causaltrace.attribution.findings.errors import detect_unrecovered_errors, left_out, worked_around
from causaltrace.attribution.findings.extremes import detect_wrong_picks
from causaltrace.attribution.findings.fabrication import detect_made_up_data
from causaltrace.attribution.findings.filled_gaps import detect_filled_gaps
from causaltrace.attribution.findings.ignored_feedback import detect_ignored_feedback
from causaltrace.attribution.findings.instructions import detect_ignored_instructions
from causaltrace.attribution.findings.loops import detect_loops_without_progress
from causaltrace.attribution.findings.omissions import detect_omissions
from causaltrace.attribution.findings.retyped_lists import detect_retyped_omissions
from causaltrace.attribution.findings.routing import detect_unfit_routing
from causaltrace.attribution.findings.superseded import detect_superseded_values
from causaltrace.attribution.findings.unfit_tools import detect_unfit_tools
from causaltrace.attribution.findings.value_changes import detect_changed_values, detect_unsupported_values
from causaltrace.attribution.stages import (
    DependencyGraphStage,
    ErrorSignalsStage,
    FailureAnchorStage,
    LoopDetectStage,
    RelevanceStage,
)
from causaltrace.attribution.stages.drift import TaskDriftStage
from causaltrace.attribution.stages.fabrication import FabricationStage
from causaltrace.attribution.stages.provenance import ProvenanceStage
from causaltrace.schema import Finding

__all__ = ["Findings", "FindingsStage", "missed_changes"]

#: how strongly an approval that missed an earlier finding's change still blames its step (the introducer of the
#: change is responsible; the approval failed to catch it — graph's ``recovered`` weight applies)
MISSED = 0.3


def missed_changes(items: list[Finding]) -> list[Finding]:
    """The responsibility boundary "introduces vs fails to catch" (DCFA, EMFA): an unchecked approval whose unchecked
    value is the source value an EARLIER finding's step changed (the solver copied 26 for the task's 25; the reviewer
    approved a result that never used 25) missed that change — the earlier step introduced the error, so the
    approval's finding keeps strength :data:`MISSED` and says which change it missed."""
    changed = [f for f in items if f.family in ("value_changed", "ignored_instruction")]
    out = []
    for f in items:
        if f.family == "unchecked_approval":
            unchecked = {str(e.value) for e in f.evidence if e.role == "unchecked"}
            earlier = next((c for c in changed if c.index < f.index and any(
                e.role in ("source", "request") and str(e.value) in unchecked for e in c.evidence)), None)
            if earlier is not None:
                f = f.model_copy(update={"strength": min(f.strength, MISSED),
                                         "claim": f"{f.claim}; it missed the change step {earlier.index} made"})
        out.append(f)
    return out


@dataclass
class Findings:
    """The findings of one run, in step order, and by step."""

    items: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.items.sort(key=lambda f: (f.index, f.family))
        self.by_index: dict[int, list[Finding]] = defaultdict(list)
        for f in self.items:
            self.by_index[f.index].append(f)

    def at(self, index: int) -> list[Finding]:
        """The findings at step ``index`` (strongest first)."""
        return sorted(self.by_index.get(index, []), key=lambda f: -f.strength)

    def to_json(self) -> list[dict[str, Any]]:
        return [f.model_dump(mode="json") for f in self.items[:50]]


class FindingsStage(Stage[Findings]):
    """Stage ``findings``: every detector over the deterministic stages' results (module docstring)."""

    stage_id: ClassVar[str] = "findings"

    async def run(self, ctx: DiagnosisContext) -> Findings:
        run = ctx.run
        graph = await ctx.run_stage(DependencyGraphStage())
        anchor = await ctx.run_stage(FailureAnchorStage())
        errors = await ctx.run_stage(ErrorSignalsStage())
        loops = await ctx.run_stage(LoopDetectStage())
        relevance = await ctx.run_stage(RelevanceStage())
        prov = await ctx.run_stage(ProvenanceStage())
        drift = (await ctx.run_stage(TaskDriftStage())).drift
        # a run sent after another task from its opening: what its steps invent serves that other task
        fabrication = None if drift is not None else (await ctx.run_stage(FabricationStage())).fabrication
        # a table filled in with a figure nobody gave (not after a drifted opening, as for marked fabrication)
        gaps = detect_filled_gaps(run, prov) if prov.anchor >= 0 and drift is None else []
        items = [*detect_unrecovered_errors(run, errors, anchor, relevance,
                                            worked_around(run, errors, fabrication, gaps), left_out(run, prov)),
                 *detect_loops_without_progress(run, loops), *detect_task_drift(run, drift),
                 *detect_made_up_data(run, fabrication), *gaps]
        if prov.anchor >= 0:
            items += [*detect_changed_values(run, prov, graph), *detect_wrong_entries(run, prov),
                      *detect_wrong_picks(run, prov),
                      *detect_superseded_values(run, prov, graph),
                      *detect_unsupported_values(run, prov),
                      *detect_unfit_routing(run, prov, graph), *detect_omissions(run, prov),
                      *detect_retyped_omissions(run, prov, graph),
                      *detect_unchecked_approvals(run, prov), *detect_ignored_instructions(run, prov, graph),
                      *detect_dropped_bounds(run, prov), *detect_ignored_feedback(run, prov),
                      *detect_unfit_tools(run, prov)]
        return Findings(missed_changes(items))

    def skipped(self, ctx: DiagnosisContext) -> Findings:
        return Findings()
