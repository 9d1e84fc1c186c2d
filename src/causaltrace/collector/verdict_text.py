"""The words of a run's verdict, shared by every surface (issue 33 item 7, "two answers to 'which step?'").

The CLI (``diagnose``, ``run``, ``repair``, ``show``, ``runs``), the HTML report, the fleet page and the annotation
in the user's trace backend all show ONE diagnosis per run — ``Store.verdict`` (:mod:`.verdict`) — and say what it
rests on. They take their wording from here, so the terminal, the page and the span never disagree:

* :attr:`VerdictView.headline` — ``decisive error: #6 tool_call by solver``, ``tool / data fault: #7 tool_response
  of add``, or ``uncertain: no step shows evidence of an error``;
* :attr:`VerdictView.source` — the verdict's level, its method, how it was checked and its basis
  (``replay-verified correction · method graph · verified by replay · basis correction``);
* :attr:`VerdictView.span_name` — the annotation span's name, ``decisive: #6 tool_call by solver`` (an uncertain
  verdict is never called decisive: ``uncertain: #9 message by reviewer``);
* :func:`evidence_lines` — the findings' claims with their source / changed values.

*Uncertain* here is the store's rule (level 5 or 6 of :func:`.verdict.verdict_level`: no finding at the top, no
decisive step, a failed diagnosis) or a flip by an alternative only; the collector may not import the attribution
stage's ``is_uncertain``, whose extra case (a heuristic confidence under its line) callers that may import it pass
in.
"""

from __future__ import annotations

from dataclasses import dataclass

from causaltrace.collector.verdict import VERDICT_LEVELS, is_uncertain, verdict_level
from causaltrace.schema import Diagnosis, Finding, Run, Step

__all__ = ["VerdictView", "evidence_lines", "finding_line", "short_value", "verdict_findings", "verdict_view"]

#: a level's name where :data:`.verdict.VERDICT_LEVELS`' one word does not read as a verdict's source
_LEVEL_NAMES = {3: "finding-backed ranking"}
#: the longest value quoted in an evidence line
_VALUE_CHARS = 60


def short_value(text: object, limit: int = _VALUE_CHARS) -> str:
    """A value on one line, at most ``limit`` characters (an ellipsis marks the cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(index: int) -> str:
    return "the task" if index < 0 else f"#{index}"


def finding_line(f: Finding) -> str:
    """One finding as a line: its claim, then each pointer's role, step and value (``source #3 = 26``)."""
    pointers = []
    for ev in f.evidence:
        value = "" if ev.value in (None, "", [], {}) else f" = {short_value(repr(ev.value))}"
        pointers.append(f"{ev.role} {_where(ev.index)}{value}")
    return f"{f.claim}" + (f" ({'; '.join(pointers)})" if pointers else "")


def verdict_findings(d: Diagnosis, *, limit: int = 3) -> list[Finding]:
    """The evidence of the verdict: the findings at its decisive step, else the run's strongest, at most ``limit``."""
    found = list(d.top_findings) or sorted(d.findings, key=lambda f: -f.strength)
    return found[:limit]


def evidence_lines(d: Diagnosis, *, limit: int = 3) -> list[str]:
    """:func:`verdict_findings` one line each."""
    return [finding_line(f) for f in verdict_findings(d, limit=limit)]


@dataclass(frozen=True)
class VerdictView:
    """What every surface says about a run's verdict (module docstring)."""

    diagnosis: Diagnosis
    level: int
    level_name: str
    uncertain: bool
    step: Step | None
    headline: str
    source: str
    span_name: str

    @property
    def confidence(self) -> str:
        c = self.diagnosis.confidence
        return f"{c:.2f}" if c is not None else "—"

    def top(self, n: int = 3) -> list[str]:
        """The first ``n`` candidates as ``#9 reviewer`` (what an uncertain verdict shows instead of one step)."""
        return [f"#{c.index} {c.agent or '-'}" for c in self.diagnosis.candidates[:n]]


def _step_words(step: Step | None, d: Diagnosis) -> str:
    if step is None:
        return f"#{d.decisive_step_index} by {d.agent or '-'}" if d.decisive_step_index is not None else "no step"
    if d.fault_source == "environment":
        return f"#{step.index} {step.kind} of {step.tool_name or '-'}"
    return f"#{step.index} {step.kind} by {step.agent or d.agent or '-'}"


def verdict_view(run: Run, d: Diagnosis, *, uncertain: bool | None = None) -> VerdictView:
    """The words for verdict ``d`` of ``run``; ``uncertain`` overrides :func:`~.verdict.is_uncertain` (the one rule
    every surface applies)."""
    level = verdict_level(d)[0]
    unsure = is_uncertain(d) if uncertain is None else uncertain
    level_name = _LEVEL_NAMES.get(level) or VERDICT_LEVELS.get(level, "?")
    if d.basis is None and d.verified_by == "replay" and level == 4:  # the lead's rule for old rows, said as such
        level_name = "replay-verified, stored before findings"
    step = None
    if d.decisive_step_id is not None:
        step = next((s for s in run.steps if s.step_id == d.decisive_step_id), None)
    if step is None and d.decisive_step_index is not None:
        step = next((s for s in run.steps if s.index == d.decisive_step_index), None)
    where = _step_words(step, d)
    if d.failed:
        headline = f"the diagnosis failed: {d.failure_reason or 'no reason given'}"
        span = "uncertain: the diagnosis failed"
    elif unsure:
        why = ("no step shows evidence of an error" if d.basis in ("none", None) or not d.top_findings
               else "the evidence does not single out one step")
        if d.basis == "alternative":
            why = f"the run succeeds if step {where.split()[0]} does something else; nothing shows it was wrong"
        headline = f"uncertain: {why}"
        span = f"uncertain: {where}" if d.decisive_step_index is not None else "uncertain"
    elif level == 2 or d.fault_source == "environment":
        headline = f"tool / data fault: {where}"
        span = f"decisive: {where}"
    else:
        headline = f"decisive error: {where}"
        span = f"decisive: {where}"
    parts = [level_name, f"method {d.method}"]
    if d.model:
        parts.append(f"model {d.model}")
    parts.append(f"verified by {d.verified_by}")
    parts.append(f"basis {d.basis or 'not recorded'}")
    return VerdictView(diagnosis=d, level=level, level_name=level_name, uncertain=unsure,
                       step=step, headline=headline, source=" · ".join(parts), span_name=span)
