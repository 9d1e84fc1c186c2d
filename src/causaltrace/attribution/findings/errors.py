"""Family ``unrecovered_error``: an error a step introduced (or a tool exposed on its own) that was never recovered
and whose output reached the failure (:mod:`causaltrace.attribution.stages.errors` finds them from statuses, exit
codes and exceptions). A recovered error — the agent retried and went on, or the same call simply succeeded when
repeated — is no finding: the run shows it was handled. Neither is one whose output never reached the failing
answer."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from causaltrace.attribution.findings._common import evidence, finding
from causaltrace.attribution.stages.anchor import FailureAnchor
from causaltrace.attribution.stages.errors import ErrorSignal
from causaltrace.attribution.stages.fabrication import Fabrication
from causaltrace.attribution.stages.provenance_changes import is_small
from causaltrace.attribution.stages.provenance_record import TASK, Provenance
from causaltrace.attribution.stages.relevance import Relevance
from causaltrace.attribution.stages.values import values_in
from causaltrace.schema import ERROR_CATEGORIES, Finding, Run

__all__ = ["detect_unrecovered_errors", "left_out", "worked_around"]


def worked_around(run: Run, errors: Sequence[ErrorSignal], fabrication: Fabrication | None,
                  made_up: Iterable[Finding] = ()) -> set[int]:
    """The error signals (by exposing step) the fabricating agent worked around by making its data up: exposed to
    that agent before its fabrication (``fabrication``, or a ``made_up_data`` finding in ``made_up``: a table with a
    figure nobody gave). What reached the answer is the invented data, not the failure: such an error counts as
    recovered (the fabrication is the decision that followed it)."""
    inventions = [(f.index, run.step_at(f.index).agent) for f in made_up if f.family == "made_up_data"]
    if fabrication is not None and fabrication.agent:
        inventions.append((fabrication.index, fabrication.agent))
    return {sig.index for sig in errors for at, agent in inventions
            if agent and sig.index < at and run.step_at(sig.index).agent == agent}


def left_out(run: Run, prov: Provenance) -> list[str]:
    """The task's numbers (not small ones: "2 decimals") that no call, message or answer took from the task (a plan
    or facts survey restating them uses nothing): items of the request the answer never used."""
    if prov.anchor < 0:
        return []
    acts = {s.index for s in run.steps if s.kind in ("tool_call", "message", "final_answer")}  # a plan restates
    used = {key for i, origins in prov.origins.items() if i in acts for key, source in origins.items()
            if source == TASK}
    return [v.key for v in values_in(run.task or "") if v.kind == "number" and not is_small(v.key)
            and not (len(v.key) == 4 and v.key[:2] in ("19", "20"))  # a year dates the request, it is no item
            and f"number:{v.key}" not in used]


def detect_unrecovered_errors(run: Run, errors: Sequence[ErrorSignal], anchor: FailureAnchor, relevance: Relevance,
                              worked_around: Collection[int] = frozenset(), left_out: Collection[str] = ()
                              ) -> list[Finding]:
    """One finding per error never recovered whose output reached the failure, at the step that introduced it
    (else at the step exposing it: a tool's or service's own failure); ``worked_around``: exposing steps of errors
    an agent answered by making its data up (the made-up data, not the error, reached the answer). ``left_out``: the
    task's numbers no step used — an error nobody redid, after which the answer lacks one of the task's items ("400
    CHF" after a refused rate for it), reached the failure by what is missing."""
    out = []
    for sig in errors:
        reached = (sig.index == anchor.index or relevance.scores.get(sig.index, 0.0) > 0
                   or (bool(left_out) and sig.index < anchor.index and not sig.transient))
        if sig.recovered or sig.transient or not reached or sig.index in worked_around:
            continue
        owner = sig.introduced_by if sig.introduced_by is not None else sig.index
        what = (f"introduced the error step {sig.index} exposed" if owner != sig.index
                else "exposed an error nobody introduced")
        items = [evidence(run, sig.index, "error", sig.message[:200])]
        category = sig.category if sig.category in ERROR_CATEGORIES else None
        out.append(finding(run, "unrecovered_error", owner,
                           f"step {owner} {what} ({sig.source}: {sig.message[:120]}); it was never recovered and its "
                           f"output reached the failure at step {anchor.index}", items, category=category))
    return out
