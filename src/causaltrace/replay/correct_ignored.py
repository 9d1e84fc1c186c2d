"""The correction of an ignored exclusion (family ``ignored_instruction`` from the provenance walk; issue 32 item 5).

A step used a value its source labelled as what the request excludes ("Sum the orders, excluding cancelled orders",
and the bookkeeper's ``add`` carries the cancelled 80): the finding's evidence is the instruction (``request``, its
label) and the value used against it (``changed``). What the step should have done is the same step honouring the
instruction — the excluded values left out — derived from the evidence, not from the case:

* **the values**: every value the step's findings of that instruction name (two cancelled orders are two findings at
  one step; one correction leaves out both), each left out once per finding;
* **the shape**: an element of a list argument (``numbers: [120, 80, 45]`` → ``[120, 45]``), an element of a list
  literal or a term of a sum in code (``[120, 80, 45]``, ``120 + 80 + 45``).

A requested period narrowed to one end (``dropped_bounds``: "fiscal year 2023 (April 2023 to March 2024)" planned
as ``2023-Q1, 2023-Q2, 2023-Q3 and 2023-Q4``; the finding's ``request`` span and ``omitted_item`` year) is corrected
by the same step enumerating the periods of the whole span, in its notation (``2023-Q2, 2023-Q3, 2023-Q4 and
2024-Q1``: quarters ``YYYY-Qn`` / ``Qn YYYY``, months ``YYYY-MM``), in the model reply a planning step wraps.

* **one figure** (``multiply(a=123.0, b=3)`` on a price "incl. 23% VAT"): the figure the same source states beside it
  without the excluded part ("(net 100.00 EUR)": a number labelled net / excl. / without / before), in its place.

Not derived: a value the step states in prose (a total already added up is no list to leave an item out of), a value
the step holds in a shape other than those above, a figure whose source states no single labelled complement; the
step keeps its alternatives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["exclusion_correction", "is_exclusion", "left_out", "respanned", "span_correction", "span_periods"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def is_exclusion(f: Finding) -> bool:
    """Whether ``f`` is an excluded value used: an ``ignored_instruction`` whose ``request`` is a label (no number)
    and whose ``changed`` value is what the step used."""
    request = next((e.value for e in f.evidence if e.role == "request"), None)
    changed = next((e.value for e in f.evidence if e.role == "changed"), None)
    return (f.family == "ignored_instruction" and isinstance(request, str) and bool(request.strip())
            and not _NUMBER.fullmatch(request.strip()) and changed not in (None, ""))


def _same(a: Any, value: str) -> bool:
    if isinstance(a, bool) or not isinstance(a, (int, float, str)):
        return False
    try:
        return float(str(a).replace(",", "")) == float(value.replace(",", ""))
    except ValueError:
        return str(a).strip().lower() == value.strip().lower()


def _drop_from_list(items: list[Any], values: list[str]) -> list[Any] | None:
    """``items`` without one element equal to each of ``values``; None unless every value was there."""
    out = list(items)
    for value in values:
        at = next((i for i, item in enumerate(out) if _same(item, value)), None)
        if at is None:
            return None
        del out[at]
    return out


def _drop_from_arguments(arguments: dict[str, Any], values: list[str]) -> dict[str, Any] | None:
    """The arguments with the values left out of the one list argument that holds them all."""
    fits = [(k, v) for k, v in arguments.items() if isinstance(v, list) and _drop_from_list(v, values) is not None]
    if len(fits) != 1:
        return None
    key, items = fits[0]
    return {**arguments, key: _drop_from_list(items, values)}


def _drop_from_code(code: str, values: list[str]) -> str | None:
    """``code`` with each value left out once, as a list literal's element or a sum's term; None when one is not
    written so."""
    for value in values:
        number = re.escape(value)
        bare = rf"(?<![\w.]){number}(?![\w.])"
        for pattern, keep in ((rf"([\[(,]\s*){bare}\s*,\s*", r"\1"),  # [80, 45] / [120, 80, 45]
                              (rf"\s*,\s*{bare}(\s*[\])])", r"\1"),  # [120, 80]
                              (rf"\s*\+\s*{bare}", ""),  # 120 + 80
                              (rf"{bare}\s*\+\s*", "")):  # 80 + 45
            fixed, n = re.subn(pattern, keep, code, count=1)
            if n:
                code = fixed
                break
        else:
            return None
    return code


def left_out(kind: str, original: Any, values: list[str]) -> Any:
    """``original`` (a step's value of replacement ``kind``) with ``values`` left out (module docstring); None when
    its shape does not hold them."""
    if kind == "arguments" and isinstance(original, dict):
        return _drop_from_arguments(original, values)
    if kind == "code" and isinstance(original, str):
        return _drop_from_code(original, values)
    return None


def exclusion_correction(step: Step, run: Run, f: Finding, findings: Iterable[Finding] = ()) -> Intervention | None:
    """``step`` honouring the exclusion ``f`` shows it ignored (module docstring), or None."""
    request = next(str(e.value) for e in f.evidence if e.role == "request")
    values = [str(e.value) for g in (f, *(g for g in findings if g is not f))
              if g.step_id == step.step_id and is_exclusion(g)
              and next(str(e.value) for e in g.evidence if e.role == "request") == request
              for e in g.evidence if e.role == "changed"]
    kind = replacement_kind(step)
    original = original_value(step, kind)
    replacement = left_out(kind, original, values)
    if replacement is None or replacement == original:
        return _complement_correction(step, run, f, request, kind, original, values)
    return Intervention(step_id=step.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=f"leave out {', '.join(values)} ({request})")


#: a label that states a figure without what an exclusion leaves out ("net 100.00", "excl. VAT", "before tax")
_COMPLEMENT = re.compile(r"\b(?:net|excl|excluding|without|before|ex|pre)\b", re.IGNORECASE)
_FIGURE = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w.]|\s*%)")


def complement_value(run: Run, step: Step, value: str) -> str | None:
    """The figure the source of ``value`` states beside it WITHOUT what the request excludes: in the latest earlier
    observation (a tool result, a code run's output, a message) that states ``value`` as a number, the one other number (no percentage) labelled by a complement word in
    the three words before it ("… 123.00 EUR incl. 23% VAT (net 100.00 EUR)" → ``100.00``); None when there is not
    exactly one."""
    try:
        target = float(value.replace(",", ""))
    except ValueError:
        return None
    observed = ("tool_response", "code_execution", "message")  # what the team was told, not what it wrote to a tool
    for source in sorted((s for s in run.steps if s.index < step.index and s.content and s.kind in observed),
                         key=lambda s: -s.index):
        text = str(source.content)
        figures = [(m, float(m.group(0).replace(",", ""))) for m in _FIGURE.finditer(text)]
        if not any(n == target for _, n in figures):
            continue
        labelled = [m.group(0) for m, n in figures if n != target
                    and _COMPLEMENT.search(" ".join(text[:m.start()].split()[-3:]))]
        return labelled[0] if len(labelled) == 1 else None
    return None


def _complement_correction(step: Step, run: Run, f: Finding, request: str, kind: str, original: Any,
                           values: list[str]) -> Intervention | None:
    """One excluded scalar used (``multiply(a=123.0, b=3)`` with the price incl. VAT), corrected by the figure its
    source states without the excluded part (:func:`complement_value`): the same call on ``100.00``."""
    if len(values) != 1:
        return None
    net = complement_value(run, step, values[0])
    replacement = _put_back(original, values[0], net) if net is not None else None
    if replacement is None or replacement == original:
        return None
    return Intervention(step_id=step.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=f"{values[0]} → {net}, the figure its source states without what the "
                                               f"request excludes ({request})")


# ------------------------------------------------------------------------------------------- a narrowed period

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_END = r"(?:([A-Za-z]{3,9})\.?\s+(?:\d{1,2},?\s+)?)?((?:19|20)\d\d)"
_SPAN = re.compile(rf"{_END}\s*(?:to|through|thru|until|till|–|-)\s*{_END}", re.IGNORECASE)
#: the period notations a plan enumerates, each with how it is written: year-quarter, quarter-year, year-month
_NOTATIONS = ((re.compile(r"(?<![\w-])((?:19|20)\d\d)-Q([1-4])(?![\w-])"), "quarter", "{y}-Q{n}"),
              (re.compile(r"(?<![\w-])Q([1-4]) ((?:19|20)\d\d)(?![\w-])"), "quarter", "Q{n} {y}"),
              (re.compile(r"(?<![\w-])((?:19|20)\d\d)-(0[1-9]|1[0-2])(?![\w-])"), "month", "{y}-{n:02d}"))
_JOINER = re.compile(r"^(?:,\s*|\s+and\s+|,\s+and\s+|\s*/\s*)$")


def _month(word: str | None, default: int) -> int:
    return _MONTHS.index(word[:3].lower()) + 1 if word and word[:3].lower() in _MONTHS else default


def span_periods(span: str, unit: str) -> list[tuple[int, int]]:
    """``(year, quarter or month)`` of every period of ``unit`` the span ("April 2023 to March 2024") covers, in
    order; [] when ``span`` is no span."""
    m = _SPAN.search(span)
    if m is None:
        return []
    start = int(m.group(2)) * 12 + _month(m.group(1), 1) - 1
    end = int(m.group(4)) * 12 + _month(m.group(3), 12) - 1
    months = [(k // 12, k % 12 + 1) for k in range(start, end + 1)]
    if unit == "month":
        return months
    return list(dict.fromkeys((y, (mo - 1) // 3 + 1) for y, mo in months))


def respanned(text: str, span: str) -> str | None:
    """``text`` with its enumeration of periods (``2023-Q1, 2023-Q2, 2023-Q3 and 2023-Q4``: two or more of one
    notation, joined by commas or "and") written anew for the periods ``span`` covers, in the same notation and
    joiners; None when the text enumerates no periods or already enumerates those."""
    for pattern, unit, form in _NOTATIONS:
        found = list(pattern.finditer(text))
        runs: list[list[re.Match[str]]] = []
        for m in found:
            if runs and _JOINER.match(text[runs[-1][-1].end():m.start()]):
                runs[-1].append(m)
            else:
                runs.append([m])
        run = max(runs, key=len) if runs else []
        periods = span_periods(span, unit)
        if len(run) < 2 or not periods:
            continue
        written = [form.format(y=y, n=n) for y, n in periods]
        last = text[run[-2].end():run[-1].start()]
        first = text[run[0].end():run[1].start()] if len(run) > 2 or "and" not in last else ", "
        joined = first.join(written[:-1]) + last + written[-1] if len(written) > 1 else written[0]
        fixed = text[:run[0].start()] + joined + text[run[-1].end():]
        return fixed if fixed != text else None
    return None


def span_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """A plan or call narrowed to one end of the request's period (``dropped_bounds``: the finding's ``request``
    span and the ``omitted_item`` year), corrected by enumerating the periods of the whole span where it enumerated
    the narrowed ones (the model reply a planning step wraps, else the step's text)."""
    from causaltrace.replay.correct_approval import in_shape
    from causaltrace.replay.correct_drift import wrapping_reply

    span = next((str(e.value) for e in f.evidence if e.role == "request" and e.value), "")
    kind = replacement_kind(step)
    if kind not in ("text", "arguments"):
        return None
    reply = wrapping_reply(step, run) if kind == "text" else None
    target, original = (reply, str(reply.outputs.get("text"))) if reply is not None else (step, original_value(step,
                                                                                                               kind))
    text = original if isinstance(original, str) else " ".join(
        v for v in (original or {}).values() if isinstance(v, str))
    fixed = respanned(text, span)
    replacement = in_shape(kind, original, fixed) if fixed is not None else None
    if replacement is None or replacement == original:
        return None
    return Intervention(step_id=target.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=f"the periods of {span} where it enumerated one end's")


def _put_back(value: Any, used: str, net: str) -> Any:
    """``value`` (a step's arguments, code or text) with the number ``used`` written as ``net`` (a number argument
    keeps its type; in text, whole numbers only); None when it holds no such number."""
    if isinstance(value, dict):
        items = {k: _put_back(v, used, net) for k, v in value.items()}
        return {k: (v if items[k] is None else items[k]) for k, v in value.items()} if any(
            v is not None for v in items.values()) else None
    if isinstance(value, str):
        fixed = re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])",
                       lambda m: net if _same(m.group(0), used) else m.group(0), value)
        return fixed if fixed != value else None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and _same(value, used):
        number = float(net.replace(",", ""))
        return int(number) if isinstance(value, int) and number.is_integer() else number
    return None
