"""Value provenance (issue 19 item 3, issue 20 item 4): where each value a step used came from, whether what a step
decided reaches the failing answer, and which steps CHANGED a value they were given.

One stage, ``provenance``, used by attribution (``graph``'s ranking and the LLM stages' evidence) and by repair
(pruning and ordering the steps it tries). No model; linear in the run (a bounded search for derived numbers).

Public API (what repair calls; ``run_or_view`` is a :class:`~causaltrace.schema.Run`)::

    from causaltrace.attribution.stages.provenance import build_provenance, reaches_answer

    prov = build_provenance(run)             # optionally graph=, anchor= (the failure anchor's step index)
    reach = reaches_answer(run)              # {step_id: score 0..1}; 0 = nothing the step decided reaches the
                                             # failing answer (a step repair may skip)
    steps.sort(key=prov.order_key)           # step ids: reaching and value-changing steps first, then earlier
    prov.changes_of(step_id)                 # the values a step changed relative to its source (Change list)
    prov.origin(step_id, "unit:lb")          # the step id that first introduced a value the step used

How it works:

1. **Values.** Each step's typed values (:mod:`.values`: numbers, units, entities, operators, target names,
   qualifier words) are read from its text, tool arguments and code.
2. **Availability order.** A value exists when the step that holds it exists: a tool result or code output when it
   ENDED, a call or message when it started (a code step that called a managed agent shows the agent's answer in
   its output, recorded before the agent's own steps). Imported logs without timestamps keep index order.
3. **Introduction.** A value's introducer is the first step, in that order, that holds it; the task's values and
   user input are *given* (introducer ``-1`` or the user step; a managed agent's task is its delegating call's). An
   ``llm_response`` that produced child steps introduces nothing (its children carry its content). A number that
   is an arithmetic result of numbers seen before (``a ± b``, ``a × b``, ``a ÷ b``, the sum or mean of one step's
   numbers) is *derived*: the step computed it, from its operands' introducers.
4. **Reach.** Backward from the failure anchor, latest first, a reached step reaches the introducers of the values
   it used (and a derived number's operands), its protocol producers (a result's call, a code output's code, a
   final answer's message) and the instructions it answered (handoffs, selections, delegations,
   ``X (-> Y)``) — 0.97 of its reach per such hop — and, more weakly (0.5 per hop), what an agent step merely
   observed or saw before deciding (``observed``, ``saw``, ``continues``: an agent's output depends on what it
   looked at even when no value is copied — a conversion whose result was ignored, a plan it followed). ``reach``
   is 1 for the anchor; 0 for a step no path reaches (a safe prune for repair; a low score, below 0.25, means only
   observation paths lead there).
5. **Changes (restatements and substitutions).** A value a step introduced is compared with its sources: a number
   that is not derived, stated in the same words as a different number of an earlier step (``price … 22`` after
   ``price: 21``), is a *restatement that changed a value*; a unit, weekday, month or qualifier that differs from
   one of the same group the task or an earlier step gave (``lb`` where the task said ``kg``) is a *substitution*
   (a unit written after a number is compared as that number's quantity only: "a 5 min read" on a page is another
   measurement, not the task's hours substituted);
   a number a digit away from a given one (``12.05`` for ``12.50``) is a *copy* slip — two-digit numbers too when
   the source's number is bare (a tool's result ``21``, which has no words to share) — and a slip is the more
   plausible origin: it outranks a number that merely shares words (the task's ``3 boxes … the unit price`` is no
   source of ``The unit price is 22`` after the tool's ``21``); a call's number argument that
   no source gave and no arithmetic derives is *unsupported*; a handoff, selection or
   delegation whose target another candidate fits better by the sources' words is a *target substitution*
   (:mod:`.targets`), charged to the step that decided it (for a call made from code, the code); a number the step
   took from a source that labels it as what the task or an instruction excluded (``80 cancelled`` after
   "excluding cancelled orders") is an *ignored* instruction; an approval (``APPROVE``, "looks good") of the failing
   answer whose content lineage (the steps reached by values, requests and instructions alone) never used a value
   the task gave (its ``10%`` discount) is an *unverified* approval.
6. **Responsibility boundary** ("the author of an instruction, not its faithful executor"): a step that uses a
   changed value it did not introduce *carries* it (``carriers``): it executed faithfully what an earlier step
   (often another agent's instruction) got wrong, and the change is charged to the author.

The artifact lists the changes, the carriers, the reach scores and each candidate's introduced values.

Modules (this one is the stage and the public face; the others are its parts, one concept each):

==============================  ===================================================================================
:mod:`.provenance_record`       the record: :class:`Change`, :class:`Provenance` and its queries, ``TASK``
:mod:`.provenance_walk`         the walk in availability order (1–3, and 5's checks that need its state)
:mod:`.provenance_derive`       derived numbers: the arithmetic searches of 3
:mod:`.provenance_changes`      the value comparisons of 5: restatement, copy slip, substitution, mean slip
:mod:`.provenance_reach`        reach and the content lineage (4)
:mod:`.provenance_passes`       the whole-run passes: unverified approvals, unfounded choices, omitted items,
                                carriers (5, 6)
==============================  ===================================================================================
"""

from __future__ import annotations

from typing import ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.anchor import FailureAnchorStage, find_failure_anchor
from causaltrace.attribution.stages.dependencies import DependencyGraph, DependencyGraphStage, build_dependency_graph
from causaltrace.attribution.stages.provenance_passes import (
    fetched_not_applied,
    is_approval,
    mark_carriers,
    omitted_items,
    unfounded_choices,
    unused_task_numbers,
    unverified_approvals,
)
from causaltrace.attribution.stages.provenance_passes import task_items as task_items
from causaltrace.attribution.stages.provenance_reach import INSTRUCTION_KINDS as INSTRUCTION_KINDS
from causaltrace.attribution.stages.provenance_reach import backward_reach
from causaltrace.attribution.stages.provenance_record import TASK as TASK
from causaltrace.attribution.stages.provenance_record import Change, Provenance
from causaltrace.attribution.stages.provenance_walk import ProvenanceWalk
from causaltrace.attribution.stages.view import content_of, is_execution_output, is_user_input
from causaltrace.schema import Run

__all__ = ["Change", "Provenance", "ProvenanceStage", "build_provenance", "reaches_answer"]


def build_provenance(run: Run, graph: DependencyGraph | None = None, anchor: int | None = None) -> Provenance:
    """The run's value provenance (module docstring); ``graph`` and ``anchor`` default to the stages' own."""
    graph = graph if graph is not None else build_dependency_graph(run)
    if anchor is None:
        anchor = find_failure_anchor(run).index
    walk = ProvenanceWalk(run, graph, anchor)
    walk.given()
    walk.walk()
    prov = walk.prov
    order = [s.index for s in walk.steps if s.index <= anchor or prov.position[s.index] <= prov.position.get(
        anchor, len(walk.steps))]
    verdicts = frozenset(s.index for s in walk.steps if not is_user_input(s) and is_approval(content_of(s)))
    backward_reach(prov, graph, order, {s.index for s in walk.steps if is_execution_output(s)}, verdicts)
    unverified_approvals(walk, prov)
    unfounded_choices(walk, prov)
    omitted_items(walk, prov)
    fetched_not_applied(walk, prov)
    unused_task_numbers(walk, prov)
    mark_carriers(prov)
    return prov


def reaches_answer(run: Run, *, graph: DependencyGraph | None = None, anchor: int | None = None) -> dict[str, float]:
    """``{step_id: reach}`` for every step of the run's view: how strongly what the step decided reaches the failing
    answer, 0 when nothing does (a step repair may skip). See :func:`build_provenance`."""
    prov = build_provenance(run, graph, anchor)
    return {sid: prov.reach.get(i, 0.0) for i, sid in prov.step_ids.items()}


class ProvenanceStage(Stage[Provenance]):
    """Stage ``provenance`` (deterministic; needs ``dependency_graph`` and ``failure_anchor``)."""

    stage_id: ClassVar[str] = "provenance"

    async def run(self, ctx: DiagnosisContext) -> Provenance:
        graph = await ctx.run_stage(DependencyGraphStage())
        anchor = await ctx.run_stage(FailureAnchorStage())
        return build_provenance(ctx.run, graph, anchor.index)

    def skipped(self, ctx: DiagnosisContext) -> Provenance:
        return Provenance(anchor=-1, step_ids={}, position={})
