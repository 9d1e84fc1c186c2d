"""Corrections: the repair proposals derived from a finding (issue 32 item 5; ARCHITECTURE "Verdict rules").

A *correction* undoes what a finding shows went wrong at its step — it restores the value the step's source held
(a number restated or copied with a slip, a substituted unit, operator or word, a value the task excluded; for a
number nothing gave, the task's only number no step uses, when there is one), or
routes to the agent the request names instead of the one chosen. Any other edit (±1, ±10 %, another word or
target) is an *alternative*: a run that succeeds after it proves only that the step could have been otherwise, not
that it was wrong. Repair tries the corrections of every candidate first (earliest step first), the alternatives
only when none flips; only a flip by a correction is a replay-verified error with a repair pair.

The findings come from the guiding diagnosis (``Diagnosis.findings``) or, when it has none, from the detectors
run on the recorded run (:class:`causaltrace.attribution.findings.FindingsStage`, deterministic, no model).

An omitted item (the answer stated before every item the task named was handled) is corrected in place of the early
answer: the producing model reply's tool calls are replaced wholesale by a call of the tool that handled the earlier
items, for the missing item (both adapters rewrite a reply's tool calls). An approval of a result nobody checked
is corrected by a rejection that names the unchecked claim (:mod:`causaltrace.replay.correct_approval`); a value used
against the request's exclusion by the step with the excluded values left out
(:mod:`causaltrace.replay.correct_ignored`); made-up data by a call of the team's tool that fits it
(:mod:`causaltrace.replay.correct_made_up`); a plan or delegation about another task by its restatement for the
task's request (:mod:`causaltrace.replay.correct_drift`); a loop without progress by its first action given the
budget its repeats spent, or its first repeat by the value the answer before it offered
(:mod:`causaltrace.replay.correct_loop`); an error never recovered at a call the tool refused for a value by the
task's unused value of its shape (:mod:`causaltrace.replay.correct_error`). Not derived (their steps fall back to
alternatives): any other unrecovered error.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["CORRECTABLE", "classify", "corrections_for", "explains", "findings_of"]

logger = logging.getLogger("causaltrace")

#: the families whose correction is a value the run already holds (module docstring)
CORRECTABLE = frozenset({"value_changed", "ignored_instruction", "unfit_routing", "omission", "superseded_value",
                         "unchecked_approval", "made_up_data", "task_drift", "unsupported_value",
                         "loop_no_progress", "unrecovered_error"})
#: what a correction of each family does, for the explanation of its flip ("restoring what its source had" else)
RESTORES = {"unchecked_approval": "rejecting the result it approved unchecked",
            "unfit_routing": "sending the work where the request points",
            "made_up_data": "obtaining the data it made up from the team's tool",
            "task_drift": "restating its opening for the task's request",
            "loop_no_progress": "giving its action the budget the loop's repeats spent",
            "ignored_instruction": "honouring the instruction it ignored",
            "omission": "putting back what it left out",
            "unrecovered_error": "asking for what the task names where the tool refused the value"}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*(?![\w])")


def findings_of(run: Run, findings: Sequence[Finding] | None = None) -> list[Finding]:
    """``findings`` when given (a guiding diagnosis's), else the detectors' findings on ``run`` (none when they
    fail: repair then searches alternatives only, as before)."""
    if findings:
        return list(findings)
    try:
        from causaltrace.attribution.context import DiagnosisContext
        from causaltrace.attribution.findings import FindingsStage

        ctx = DiagnosisContext(run, method="graph", judge=None)
        return list(_run_coroutine(ctx.run_stage(FindingsStage())).items)
    except Exception as exc:  # a detector failure costs the corrections, never the repair
        logger.info("causaltrace: findings failed (%s: %s); repair tries alternatives only", type(exc).__name__, exc)
        return []


def _run_coroutine(coro: Any) -> Any:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _values(f: Finding) -> tuple[str, str] | None:
    """``(before, after)``: what the source held and what the step states, from the finding's evidence."""
    newer = next((e.value for e in f.evidence if e.role == "superseded_by"), None)  # the newer observation wins
    before = newer if newer is not None else next((e.value for e in f.evidence if e.role in ("source", "request")),
                                                  None)
    after = next((e.value for e in f.evidence if e.role in ("changed", "chosen_agent")), None)
    if before in (None, "") or after in (None, "") or before == after:
        return None
    return str(before), str(after)


def _same_number(a: str, b: str) -> bool:
    try:
        return float(a.replace(",", "")) == float(b.replace(",", ""))
    except ValueError:
        return False


_SPAN = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
#: an ISO date: its parts are no numbers a correction puts back ('12' of 2026-12-07 is December, not a count)
_DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
#: an operator with its literal operand, as the values name it: a comparison (``>= 100``) or arithmetic (``/ 2``,
#: ``* 1.15``, ``- 15``)
_COMPARISON = re.compile(r"^(<=|>=|==|!=|<|>|\*\*|\*|//|/|%|\+|-) (-?[\d.]+)$")


def _operator_substitute(text: str, before: str, after: str) -> str | None:
    """An operator value put back in code: a span ``lo..hi`` (written ``range(lo, hi + 1)``), a comparison
    (``>= 100`` for ``> 100``), an arithmetic operator with its operand (``/ 3`` for ``/ 2`` in ``(a+b+c)/2``,
    ``- 0.15`` for ``+ 0.15``) or a division rounded the other way (:func:`_rounding_substitute`); None when
    ``after`` is none of them or the code does not write it."""
    span_a, span_b = _SPAN.match(after), _SPAN.match(before)
    if span_a and span_b:
        lo, hi = int(span_a.group(1)), int(span_a.group(2))
        written = re.compile(rf"range\(\s*{lo}\s*,\s*{hi + 1}\s*\)" if lo else rf"range\(\s*(?:0\s*,\s*)?{hi + 1}\s*\)")
        fixed = f"range({int(span_b.group(1))}, {int(span_b.group(2)) + 1})"
        out, n = written.subn(fixed, text)
        return out if n else None
    rounded = _rounding_substitute(text, before, after)
    if rounded is not None:
        return rounded
    cmp_a, cmp_b = _COMPARISON.match(after), _COMPARISON.match(before)
    if cmp_a and cmp_b:  # as the code writes it, spaced or not; '/ 2' is not the end of '// 2', '* 2' not of '** 2'
        written = re.compile(rf"(?<![/*<>=!]){re.escape(cmp_a.group(1))}(?![/*=])\s*{re.escape(cmp_a.group(2))}"
                             r"(?![\d.])")
        out, n = written.subn(f"{cmp_b.group(1)} {cmp_b.group(2)}", text)
        return out if n else None
    return None


_FLOOR_DIV = re.compile(r"^\s*([\w.]+)\s*//\s*([\w.]+)\s*$")
_CEIL_CALL = re.compile(r"^\s*(?:math\.)?ceil\(\s*([\w.]+)\s*/\s*([\w.]+)\s*\)\s*$")


def _rounding_substitute(text: str, before: str, after: str) -> str | None:
    """A division rounded the other way put back: ``a // b`` where the source said ``ceil`` (round up) becomes
    ``-(-a // b)`` (the ceiling, no import needed); ``ceil(a / b)`` where it said ``floor`` becomes ``a // b``. None
    for any other pair of values, or when the code does not write ``after``."""
    floor, ceil = _FLOOR_DIV.match(after), _CEIL_CALL.match(after)
    if floor and before.strip().lower() in ("ceil", "ceiling", "math.ceil", "round up"):
        fixed = f"-(-{floor.group(1)} // {floor.group(2)})"
        written = re.compile(rf"(?<![\w.]){re.escape(floor.group(1))}\s*//\s*{re.escape(floor.group(2))}(?![\w.])")
    elif ceil and before.strip().lower() in ("floor", "math.floor", "round down"):
        fixed = f"{ceil.group(1)} // {ceil.group(2)}"
        written = re.compile(rf"(?<![\w.])(?:math\.)?ceil\(\s*{re.escape(ceil.group(1))}\s*/\s*"
                             rf"{re.escape(ceil.group(2))}\s*\)")
    else:
        return None
    out, n = written.subn(lambda _: fixed, text)
    return out if n else None


_SMALL = ("smallest", "lowest", "least", "earliest", "oldest", "min", "minimum", "first")
_LARGE = ("largest", "highest", "most", "latest", "newest", "max", "maximum", "last")


def _end_of(value: str) -> str | None:
    """``small`` / ``large`` for a value that names an end of an order ('the smallest', 'the largest'), else
    None."""
    words = value.lower().replace("the ", "").split()
    if len(words) != 1:
        return None
    return "small" if words[0] in _SMALL else "large" if words[0] in _LARGE else None


def _other_end(code: str, wanted: str) -> str | None:
    """``code`` taking the ``wanted`` end of its one order where it took the other: the one ``sorted(...)[:n]`` or
    ``sorted(...)[0]`` (``reverse=True`` added, or removed when present), the one ``min(`` / ``max(``, the one
    ``nsmallest(`` / ``nlargest(``; None when the code writes none of them or several."""
    from causaltrace.replay.correct_routing import call_texts

    taken = [c for c in call_texts(code, "sorted") if re.match(re.escape(c) + r"\s*\[\s*(?::\s*\w+|0)\s*\]",
                                                                 code[code.index(c):])]
    swaps = {"small": (("max(", "min("), ("nlargest(", "nsmallest(")),
             "large": (("min(", "max("), ("nsmallest(", "nlargest("))}[wanted]
    found = [(old, new) for old, new in swaps if len(re.findall(rf"(?<![\w.]){re.escape(old)}", code)) == 1]
    if len(taken) + len(found) != 1:
        return None
    if found:
        old, new = found[0]
        return re.sub(rf"(?<![\w.]){re.escape(old)}", new, code, count=1)
    call = taken[0]
    descending = re.search(r",\s*reverse\s*=\s*True", call)
    if wanted == "large" and not descending:
        fixed = call[:-1].rstrip() + ", reverse=True)"
    elif wanted == "small" and descending:
        fixed = call.replace(descending.group(0), "")
    else:
        return None
    return code.replace(call, fixed, 1)


def _substitute_text(text: str, before: str, after: str) -> str | None:
    """``text`` with ``after`` put back to ``before`` (numbers by value, operators as code writes them, words as
    whole words); None if absent."""
    operator = _operator_substitute(text, before, after)
    if operator is not None:
        return operator
    if _end_of(after) is not None and _end_of(before) is not None:
        return _other_end(text, _end_of(before) or "")  # an end is put back as code takes it or not at all
    if _SPAN.match(after) or _COMPARISON.match(after) or _FLOOR_DIV.match(after) or _CEIL_CALL.match(after):
        return None  # an operator is put back as an operator or not at all (never 'boxes = ceil')
    if _NUMBER.fullmatch(after.strip()):
        dates = [m.span() for m in _DATE.finditer(text)]  # a number inside a date is the date's, not a quantity

        def put_back(m: re.Match[str]) -> str:
            inside = any(a <= m.start() and m.end() <= b for a, b in dates)
            return before if _same_number(m.group(0), after) and not inside else m.group(0)

        out = _NUMBER.sub(put_back, text)
        return out if out != text else None
    pattern = re.compile(r"(?<![\w])" + re.escape(after) + r"(?![\w])", re.IGNORECASE)
    out, n = pattern.subn(before, text)
    return out if n else None


def _substitute(value: Any, before: str, after: str) -> Any:
    """``value`` (text, code or a JSON object of arguments) with ``after`` restored to ``before``; None when it
    does not hold ``after``."""
    if isinstance(value, str):
        return _substitute_text(value, before, after)
    if isinstance(value, dict):
        changed, out = False, {}
        for key, item in value.items():
            new = _substitute(item, before, after)
            if new is None:
                out[key] = item
            else:
                changed, out[key] = True, new
        return out if changed else None
    if isinstance(value, list):
        items = [_substitute(v, before, after) for v in value]
        if all(v is None for v in items):
            return None
        return [v if v is not None else old for v, old in zip(items, value, strict=True)]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if _same_number(str(value), after):
        try:
            number = float(before.replace(",", ""))
        except ValueError:
            return None
        return int(number) if number.is_integer() and isinstance(value, int) else number
    return None


def _correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    values = _values(f)
    if values is None:
        return None
    before, after = values
    kind = replacement_kind(step)
    if kind == "target":
        if f.family != "unfit_routing" or before not in _routable(run, step):
            return None
        replacement: Any = before
    else:
        original = original_value(step, kind)
        before, after = _written_units(run, f, original, before, after)
        replacement = _substitute(original, before, after)
        if replacement is None or replacement == original:
            return None
    return Intervention(step_id=step.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=_describe(kind, original_value(step, kind), replacement, before,
                                                         after))


def _routable(run: Run, step: Step) -> set[str]:
    """The agents a route may go to: those that ran, the step's own candidates, and the run's roster (an agent
    that never ran is routable when the team has it — issue 32's routing by what agents can do)."""
    listed = step.metadata.get("candidates")
    roster = (run.metadata or {}).get("roster")
    return {*run.agents, *(str(c) for c in listed or () if isinstance(listed, list)),
            *(roster if isinstance(roster, dict) else ())}


_WORD = re.compile(r"[A-Za-z°]+")


def _written_units(run: Run, f: Finding, original: Any, before: str, after: str) -> tuple[str, str]:
    """``(before, after)`` as the texts write them when the finding names units canonically (``gal`` for ``qt``)
    but the step writes a word (``Convert 4 quarts``): ``after`` becomes the step's word for that unit and
    ``before`` a word the run wrote for the source's unit, in the same form (:func:`_same_form`) — otherwise the
    correction of a substituted unit matched nothing and its step fell back to alternatives (smol-plan-gallons:
    131 replays, no flip). Other values are returned as they are."""
    from causaltrace.attribution.stages.values import unit_group

    unit_a, unit_b = unit_group(after), unit_group(before)
    if unit_a is None or unit_b is None or unit_a[1] != unit_b[1]:
        return before, after
    text = json.dumps(original, default=str) if not isinstance(original, str) else original
    written = next((w for w in _WORD.findall(text) if (unit_group(w) or ("",))[0] == unit_a[0]), None)
    if written is None or written.lower() == after.lower():
        return before, after
    source = {e.step_id for e in f.evidence if e.role in ("source", "request", "superseded_by")}
    texts = [s.content or "" for s in run.steps if s.step_id in source] + [run.task or ""] + [
        s.content or "" for s in run.steps if s.step_id not in source]
    said = [w for t in texts for w in _WORD.findall(t) if (unit_group(w) or ("",))[0] == unit_b[0]]
    return _same_form(said, written, unit_b[0]), written


def _same_form(said: Sequence[str], written: str, canonical: str) -> str:
    """The first of ``said`` (the run's words for unit ``canonical``, the source's first) in the form of
    ``written``: plural when it is (``quarts`` → ``gallons``, ``feet`` → ``miles``), singular when it is, the symbol
    for a symbol; the symbol when the run never wrote that form."""

    def plural(word: str) -> bool:
        return word.lower().endswith("s") or word.lower() == "feet"

    if len(written) <= 3 and written.lower() != "ft":
        return canonical
    return next((w for w in said if w.lower() != canonical and len(w) > 3 and plural(w) == plural(written)),
                canonical)


def _describe(kind: str, original: Any, replacement: Any, before: str, after: str) -> str:
    """The edit in the words the mutations use (``argument b: 26 → 25``, ``number 22 → 21``), so a correction and the
    same edit found as a mutation read alike; what it rests on is the intervention's ``finding``."""
    if kind == "target":
        return f"target {after} → {before}"
    if kind == "arguments" and isinstance(original, dict) and isinstance(replacement, dict):
        changed = [f"argument {k}: {original.get(k)} → {v}" for k, v in replacement.items() if original.get(k) != v]
        if changed:
            return "; ".join(changed)
    if kind == "code" and isinstance(original, str) and isinstance(replacement, str):
        for line, (old, new) in enumerate(zip(original.splitlines(), replacement.splitlines(), strict=False), 1):
            if old != new:
                pairs = [(a, b) for a, b in zip(_NUMBER.findall(old), _NUMBER.findall(new), strict=False) if a != b]
                if pairs and _what(after) != "operator":
                    return f"literal {pairs[0][0]} → {pairs[0][1]} (line {line})"
                return f"{_what(after)} {after} → {before} (line {line})"
    return f"{_what(after)} {after} → {before}"


def _what(value: str) -> str:
    if (_SPAN.match(value) or _COMPARISON.match(value) or _FLOOR_DIV.match(value) or _CEIL_CALL.match(value)
            or _end_of(value)):
        return "operator"
    return "number" if _NUMBER.fullmatch(value.strip()) else "word"


def _omission_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """The call for the missing item in place of the early answer (module docstring): the latest earlier call of
    the same agent whose item argument (:func:`_item_argument`) names another item, repeated with the omitted item
    (written as the task writes it: ``Hull`` for the finding's ``hull``)."""
    from causaltrace.replay.turns import producing_llm

    item = next((str(e.value) for e in f.evidence if e.role == "omitted_item" and e.value), None)
    llm = producing_llm(run, step)
    if item is None or llm is None:
        return None
    written = re.search(rf"(?<![\w-]){re.escape(item)}(?![\w-])", run.task or "", re.IGNORECASE)
    item = written.group(0) if written else item
    calls = [s for s in run.steps if s.kind == "tool_call" and s.index < step.index and s.agent == step.agent
             and s.tool_name not in (None, "final_answer")]
    for earlier in sorted(calls, key=lambda s: -s.index):
        key = _item_argument(earlier, [c for c in calls if c.tool_name == earlier.tool_name], run.task or "", item)
        if key is not None and str((earlier.arguments or {})[key]).lower() != item.lower():
            arguments = {**(earlier.arguments or {}), key: item}
            return Intervention(step_id=llm.step_id, source="mutation", basis="correction", finding=f,
                                replacement={"text": None, "tool_calls": [{"name": earlier.tool_name,
                                                                           "arguments": arguments}]},
                                description=f"call {earlier.tool_name}({key}={item!r}) for the omitted item "
                                            "instead of answering")
    return None


def _item_argument(call: Step, same_tool: Sequence[Step], task: str, item: str) -> str | None:
    """The string argument of ``call`` that names an item: its one string argument; else the one whose value
    changed between the agent's calls of that tool (``warehouse``: Leeds, then York; ``part`` stayed); else the one
    whose value the task writes in the sentence that names the omitted item (another item of its enumeration)."""
    arguments = call.arguments or {}
    strings = [k for k, v in arguments.items() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    varying = [k for k in strings if len({str((c.arguments or {}).get(k)) for c in same_tool}) > 1]
    if len(varying) == 1:
        return varying[0]
    sentence = next((part for part in re.split(r"(?<=[.!?])\s+", task)
                     if re.search(rf"(?<![\w-]){re.escape(item)}(?![\w-])", part, re.IGNORECASE)), "")
    named = [k for k in strings if str(arguments[k]).lower() != item.lower() and re.search(
        rf"(?<![\w-]){re.escape(str(arguments[k]))}(?![\w-])", sentence, re.IGNORECASE)]
    return named[0] if len(named) == 1 else None


def corrections_for(step: Step, run: Run, findings: Iterable[Finding]) -> list[Intervention]:
    """The corrections of ``step``: those of each correctable finding at it (module docstring), deduplicated. A
    finding whose correction cannot be derived (evidence pointing past the run, a value of an odd shape) costs that
    correction, never the repair: the step keeps its alternatives."""
    out: dict[str, Intervention] = {}
    findings = list(findings)
    for f in findings:
        if f.family not in CORRECTABLE or (f.step_id != step.step_id and not _at_repeat(step, run, f)):
            continue
        try:
            derived = _derived(step, run, f, findings)
        except Exception as exc:
            logger.info("causaltrace: no correction of step %d from its %s finding (%s: %s)", step.index, f.family,
                        type(exc).__name__, exc)
            continue
        for c in derived:
            out.setdefault(json.dumps(c.replacement, sort_keys=True, default=str), c)
    return list(out.values())


def _at_repeat(step: Step, run: Run, f: Finding) -> bool:
    """Whether ``step`` is the first repeat of the loop ``f`` shows (its correction is made there: the repeat, not
    the sound action it repeats, is what went wrong when the answer offered the next value)."""
    if f.family != "loop_no_progress":
        return False
    from causaltrace.replay.correct_loop import first_repeat

    repeat = first_repeat(run, f)
    return repeat is not None and repeat.step_id == step.step_id


def _derived(step: Step, run: Run, f: Finding, findings: Sequence[Finding] = ()) -> list[Intervention]:
    """The corrections ``f`` derives at ``step`` (module docstring), by family (``findings``: all of them, for a
    correction that honours every finding of one instruction at the step)."""
    from causaltrace.replay.correct_ignored import exclusion_correction, is_exclusion, span_correction

    if f.family == "made_up_data":
        from causaltrace.replay.correct_made_up import made_up_corrections

        return made_up_corrections(step, run, f)
    if f.family == "task_drift":
        from causaltrace.replay.correct_drift import drift_corrections

        return drift_corrections(step, run, f)
    if f.family == "unrecovered_error":
        from causaltrace.replay.correct_error import refused_value_correction

        refusal = refused_value_correction(step, run, f)
        return [refusal] if refusal is not None else []
    if f.family == "loop_no_progress":
        from causaltrace.replay.correct_loop import loop_correction, repeat_correction

        found = (loop_correction(step, run, f) if step.step_id == f.step_id else None) or repeat_correction(step,
                                                                                                           run, f)
    elif f.family == "unfit_routing":
        found = _routing_correction(step, run, f)
    elif is_exclusion(f):
        found = exclusion_correction(step, run, f, findings)
    elif f.family == "ignored_instruction" and any(e.role == "omitted_item" for e in f.evidence):
        found = span_correction(step, run, f)
    elif f.family == "unchecked_approval":
        from causaltrace.replay.correct_approval import approval_correction

        found = approval_correction(step, run, f)
    # an early answer gets the call for its missing item; a retyped list (its source list is evidence) gets its
    # missing item put back by substitution, as a changed value does
    elif f.family == "omission" and not any(e.role == "source" for e in f.evidence):
        found = _omission_correction(step, run, f)
    elif _bare_operators(f):
        return _operator_corrections(step, f)
    else:
        found = _correction(step, run, f)
    return [found] if found is not None else []


_BARE = frozenset({"+", "-", "*", "/", "%"})


def _bare_operators(f: Finding) -> bool:
    """Whether ``f`` changed one arithmetic operator for another with no operand named (``+`` where the task had
    ``-``)."""
    values = _values(f)
    return values is not None and values[0] in _BARE and values[1] in _BARE


def _operator_corrections(step: Step, f: Finding) -> list[Intervention]:
    """A bare operator put back (``subtotal + subtotal * 15 / 100`` → ``-``), one correction per place the step's
    code writes it as a binary operator outside a string, earliest first (at most three): the finding names the
    operator, not which of several it was, so each is its own correction, never all at once."""
    before, after = _values(f) or ("", "")
    kind = replacement_kind(step)
    original = original_value(step, kind)
    text = original if isinstance(original, str) else None
    if text is None:
        return []
    strings = [m.span() for m in re.finditer(r"'[^'\n]*'|\"[^\"\n]*\"", text)]
    binary = re.compile(rf"(?<=[\w)\]])(\s*){re.escape(after)}(?![{re.escape(''.join(_BARE))}=])(\s*)(?=[\w(.])")
    places = [m for m in binary.finditer(text) if not any(a <= m.start() < b for a, b in strings)][:3]
    out = []
    for m in places:
        fixed = text[:m.start()] + m.group(1) + before + m.group(2) + text[m.end():]
        line = text.count("\n", 0, m.start()) + 1
        out.append(Intervention(step_id=step.step_id, replacement=fixed, source="mutation", basis="correction",
                                finding=f, description=f"operator {after} → {before} (line {line})"))
    return out


def _routing_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """A routing choice that does not fit, corrected by its shape: a call of the wrong tool (the finding names the
    fitting one as its ``source``), an unfounded choice (no ``request``: :func:`~.correct_routing.unfounded_route`),
    a route written in code (:func:`~.correct_routing.route_in_code`), else the target the request names."""
    from causaltrace.replay.correct_routing import route_in_code, unfounded_route

    roles = {e.role for e in f.evidence}
    if "source" in roles and step.kind == "tool_call":
        return _tool_correction(step, run, f)
    if "request" not in roles:
        return unfounded_route(step, run, f)
    values = _values(f)
    if step.kind == "tool_call" and values is not None and step.tool_name == values[1]:
        return _tool_correction(step, run, f, values[0])  # a delegation called as a tool: call the named agent
    if replacement_kind(step) != "code":
        return _correction(step, run, f)
    code = original_value(step, "code")
    fixed = route_in_code(str(code), values[1], values[0]) if values is not None and code else None
    if fixed is None or fixed == code:
        return None
    return Intervention(step_id=step.step_id, replacement=fixed, source="mutation", basis="correction", finding=f,
                        description=f"call {values[0]} instead of {values[1]}")


def _tool_correction(step: Step, run: Run, f: Finding, tool: str | None = None) -> Intervention | None:
    """A call of a tool that fits nothing the request asks, corrected: the same call of the agent's tool the finding
    names as fitting (its ``source``; ``tool``: a managed agent the request names, called as a tool), in the reply
    that produced it (its other calls kept), or in the code."""
    tool = tool or next((str(e.value) for e in f.evidence if e.role == "source" and e.value), None)
    if not tool or not step.tool_name or tool == step.tool_name:
        return None
    described = f"call {tool} instead of {step.tool_name} (the same arguments)"
    if replacement_kind(step) == "code":
        original = str(original_value(step, "code"))
        replaced = re.sub(rf"\b{re.escape(step.tool_name)}\(", f"{tool}(", original)
        return None if replaced == original else Intervention(
            step_id=step.step_id, replacement=replaced, source="mutation", basis="correction", finding=f,
            description=described)
    from causaltrace.replay.turns import producing_llm

    llm = producing_llm(run, step)
    if llm is None:
        return None
    calls = [c for c in llm.outputs.get("tool_calls") or () if isinstance(c, dict)]
    renamed = [{"name": tool if c.get("name") == step.tool_name else c.get("name"), "arguments": c.get("arguments")}
               for c in calls] or [{"name": tool, "arguments": dict(step.arguments or {})}]
    return Intervention(step_id=llm.step_id, replacement={"text": None, "tool_calls": renamed}, source="mutation",
                        basis="correction", finding=f, description=described)


def explains(f: Finding) -> str:
    """What a correction derived from ``f`` did, for the explanation of its flip."""
    return RESTORES.get(f.family, "restoring what its source had") + f" ({f.family.replace('_', ' ')})"


def classify(proposals: Sequence[Intervention], corrections: Sequence[Intervention]) -> list[Intervention]:
    """``proposals`` without the ones that equal a correction (tried in the corrections' pass), each labelled an
    alternative (an LLM's or a mutation's edit that no finding derives)."""
    taken = {json.dumps(c.replacement, sort_keys=True, default=str) for c in corrections}
    return [p.model_copy(update={"basis": "alternative"}) for p in proposals
            if json.dumps(p.replacement, sort_keys=True, default=str) not in taken]
