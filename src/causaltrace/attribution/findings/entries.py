"""Family ``value_changed`` (an entity mismatch): a number read from the wrong ENTRY of an observation.

A tool answers with several labelled entries — ``Monday 18 C, Tuesday 21 C, Wednesday 16 C``, one row per city,
one column per percentile — and the step that uses the answer takes the number of an entry the request does not ask
for while another entry of the same observation carries the label the request names ("the temperature … on
Tuesday"). The value is faithfully copied, so no comparison of numbers sees it; its source is the wrong entry. The
finding's evidence is the entry the request names (``source``, its number) and the number the step used
(``changed``), so repair's correction puts the right entry's number back.

The rule, from kinds and values only: an observation (a tool result or code output) is split into entries (by
commas, semicolons and lines; a header before a colon is dropped — the first entry's, even when it holds numbers: a
route and a date that every entry shares); an entry's *labels* are its salient words; the step's number comes from that
observation (provenance's origin of the value); the entry holding it shares no label with the task's request (words
the request excludes — "excluding cancelled orders" — are not asked for), and exactly one other entry — holding a
number — does. A request that names no entry's label, or names several, is no
evidence.
"""

from __future__ import annotations

import re

from causaltrace.attribution.findings._common import evidence, finding
from causaltrace.attribution.stages.drift import task_request
from causaltrace.attribution.stages.provenance_changes import is_small
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.values import number_key
from causaltrace.attribution.stages.view import content_of
from causaltrace.schema import Finding, Run, Step

__all__ = ["detect_wrong_entries", "entries_of"]

#: entries are separated by commas, semicolons, lines and bars — not by a thousands separator ("5,150 visits")
_ENTRY = re.compile(r"(?:,(?!\d{3}(?!\d))|[;\n|])+")
_NUMBER = re.compile(r"(?<![\w.,-])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,-])-?\d+(?:\.\d+)?(?![\w,])")
#: what the request excludes, with its coordinated list ("excluding cancelled and refunded orders": both words)
_EXCLUDED = re.compile(r"\b(?:excluding|except|without|not|other than|but not|ignoring)\s+(?:the\s+|any\s+)?"
                       r"(\w+(?:(?:\s*,\s*|\s+(?:and|or)\s+)\w+)*)", re.IGNORECASE)
_RESULT_KINDS = ("tool_response", "code_execution")
#: steps whose number the detector never blames: results, and a model reply that produced its calls (the call is blamed)
_SKIPPED = (*_RESULT_KINDS, "llm_response", "task", "final_answer")


def _labels(text: str) -> frozenset[str]:
    return frozenset(t for t in salient_tokens(text) if not t[:1].isdigit() and not t.lstrip("-")[:1].isdigit())


def entries_of(text: str) -> list[tuple[frozenset[str], list[str]]]:
    """``(labels, numbers)`` per entry of an observation (module docstring)."""
    out = []
    parts = _ENTRY.split(text[:20_000])
    for n, part in enumerate(parts):
        first = _NUMBER.search(part)
        head = part.rfind(":", 0, first.start()) if first else -1
        if n == 0 and len(parts) > 1 and (colon := part.find(": ")) > head and _labels(part[colon + 2:]):
            # the observation's header ("fares BOS-ORD on 2026-05-09: UA 412 at 188.40 USD, AA …"): what every
            # entry is about, not the first entry's label — even with numbers in it (a date, a route)
            part, head = part[colon + 1:], -1
        numbers = [x.replace(",", "") for x in _NUMBER.findall(part)]  # "5,150" is 5150, as a step writes it
        # "Oslo forecast: Monday 18 C": the header is no label — unless the observation is that one entry
        # ("A-7 available: 17": the header names the value)
        labels = _labels(part[head + 1:] if head >= 0 else part)
        if not labels and len(parts) == 1:
            labels = _labels(part)
        if numbers and labels:
            out.append((labels, numbers))
    # a label every entry shares ("paid", "C") tells no entry apart
    common = frozenset.intersection(*(labels for labels, _ in out)) if len(out) > 1 else frozenset()
    return [(labels - common, numbers) for labels, numbers in out]


def _passed(step: Step, number: str) -> bool:
    """True when the tool call ``step`` passes ``number`` as one of its arguments."""
    return step.kind == "tool_call" and any(
        isinstance(a, (int, float)) and not isinstance(a, bool) and number_key(str(a)) == number
        for a in (step.arguments or {}).values())


def detect_wrong_entries(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per number a step took from an observation entry the request does not name, when exactly one
    other entry of it does (module docstring)."""
    task = run.task or next((s.content for s in run.steps if s.kind == "task"), "")  # a run without Run.task
    request = task_request(task or "")
    excluded = {w.lower() for m in _EXCLUDED.finditer(request)  # "excluding cancelled": not asked for
                for w in re.findall(r"\w+", m.group(1)) if w.lower() not in ("and", "or")}
    asked = {t for t in salient_tokens(request) if not t[:1].isdigit() and t not in excluded}
    if not asked:
        return []
    by_index = {s.index: s for s in run.steps}
    out: list[Finding] = []
    for i, origins in prov.origins.items():
        step = by_index.get(i)
        if step is None or step.kind in _SKIPPED:
            continue
        for key, j in origins.items():
            source = by_index.get(j)
            if not key.startswith("number:") or source is None or source.kind not in _RESULT_KINDS:
                continue
            used = key.split(":", 1)[1]
            if is_small(used) and not _passed(step, used):
                # a single digit is in every observation (a traceback's line '6', Who&When dev algo-74): no entry is
                # told by it — unless a call passes it as an argument (``c_to_f(celsius=3)`` after "Wednesday 3 C,
                # Thursday 5 C" for Thursday: issue 32, tuning case smol-misread-kyiv)
                continue
            entries = entries_of(content_of(source))
            holding = [labels for labels, numbers in entries if used in numbers]
            named = [(labels, numbers) for labels, numbers in entries if labels & asked and used not in numbers]
            if len(holding) != 1 or holding[0] & asked or len(named) != 1:
                continue
            right = named[0][1][0]
            if any(origins.get(f"number:{number_key(n)}") == j for n in named[0][1]):
                continue  # the step uses the asked entry's value too: it computes with both (12 a box, 1.85 a box)
            label = sorted(named[0][0] & asked)[0]
            items = [evidence(run, j, "source", right), evidence(run, i, "changed", used)]
            out.append(finding(run, "value_changed", i,
                               f"step {i} uses {used} from the entry of step {j} the request does not ask for "
                               f"(its {label!r} entry says {right}): a value read from the wrong entry", items))
    return out
