"""Family ``ignored_instruction`` (MAST FM-1.1, disobey the task's specification), for a stated period: the request
gives a span across years ("April 2023 to March 2024", "from 2019 through 2021") and the run's calls use one end's
year but never the other's — the span was narrowed to one year (issue 32, tuning case smol-derail-fiscal: a fiscal
year from April 2023 to March 2024 fetched as the calendar quarters of 2023).

The finding is at the first step that states the work to do — a plan, a message, a call — naming the kept year and
not the dropped one: where the span was narrowed. The request's span and the dropped year are its evidence.

Not evidence: a span whose ends share a year; a run whose calls use both years, or neither (the work was not done
by calls with dates: nothing shows which year it used); a reply that produced a plan (the plan is blamed), results,
the task and the answer.
"""

from __future__ import annotations

import re

from causaltrace.attribution.findings._common import TASK_INDEX, change_strength, evidence, finding
from causaltrace.attribution.stages.drift import task_request
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.view import content_of, is_user_input
from causaltrace.schema import Finding, Run

__all__ = ["detect_dropped_bounds", "year_spans"]

_YEAR = r"(?:19|20)\d\d"
_MONTHS = (r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
           r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
#: one end of a span: an optional month (and day), then a year
_END = rf"(?:(?:{_MONTHS})\.?\s+(?:\d{{1,2}},?\s+)?)?({_YEAR})"
#: "<end> to|through|until|till|- <end>"
_SPAN = re.compile(rf"\b{_END}\s*(?:to|through|thru|until|till|–|-)\s*{_END}\b", re.IGNORECASE)
_BLAMED_KINDS = ("planning", "message", "tool_call", "handoff")


def year_spans(text: str) -> list[tuple[str, str, str]]:
    """``(the span as written, first year, last year)`` for every span of the text whose ends' years differ."""
    return [(m.group(0), m.group(1), m.group(2)) for m in _SPAN.finditer(text) if m.group(1) != m.group(2)]


def _call_text(run: Run) -> list[tuple[int, str]]:
    return [(s.index, " ".join(str(v) for v in (s.arguments or {}).values())) for s in run.steps
            if s.kind == "tool_call"]


def detect_dropped_bounds(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per span of the request whose one end's year no call ever uses (module docstring)."""
    opening = next((s for s in run.steps if s.kind == "task"), None)
    request = task_request(run.task or (content_of(opening) if opening is not None else ""))
    calls = _call_text(run)
    out = []
    for span, first, last in year_spans(request)[:3]:
        used = {y: [i for i, text in calls if re.search(rf"\b{y}\b", text)] for y in (first, last)}
        if bool(used[first]) == bool(used[last]):
            continue
        kept, dropped = (first, last) if used[first] else (last, first)
        until = used[kept][0]
        narrowed = next((s for s in run.steps if s.index <= until and s.kind in _BLAMED_KINDS
                         and not is_user_input(s) and re.search(rf"\b{kept}\b", content_of(s))
                         and not re.search(rf"\b{dropped}\b", content_of(s))), None)
        if narrowed is None:
            continue
        claim = (f"step {narrowed.index} works on {kept} only, where the request asks for {span!r}: no call ever "
                 f"uses {dropped} (the period was narrowed)")
        items = [evidence(run, TASK_INDEX, "request", span), evidence(run, narrowed.index, "omitted_item", dropped)]
        out.append(finding(run, "ignored_instruction", narrowed.index, claim, items,
                           strength=change_strength(prov, narrowed.index)))
    return out
