"""The correction of a loop without progress (family ``loop_no_progress``; issue 32 item 5).

An agent repeats the same action — ``wait_for_job(job, timeout=5)`` answered "still running after 5 s", Newton's
iteration capped at ``i < 3`` answered "not converged" — and nothing changes between the repeats: the action stops
at its own limit every time and the run ends on the repeat budget. What the action should have done is derived from
the finding, not from the case: **the budget the repeats spent, given to the first action at once** — its limit
times the number of actions in the loop (the finding's step and its ``repeat`` evidence), so one action runs as long
as the loop did in all.

The limit is the one number of the action that bounds it:

* **arguments**: the one numeric argument the action's result restates where it says the action stopped at its
  bound ("still running after 5 s" for ``timeout: 5``), else the one numeric argument named as a limit
  (``timeout``, ``max_…``, ``limit``, ``…iter…``, ``retries``, ``attempts``);
* **code**: the one loop cap the code writes — a numeric keyword argument named as a limit, or, when the result
  says the action stopped at its bound ("not converged", "timed out"), a counter compared in a ``while`` condition
  (``i < 3``) or a ``for … in range(3)``.

Not derived: an action with no such limit or several (nothing shows which bound the loop hit), prose; the step keeps
its alternatives.

**The repeat takes what the answer before it offered** (:func:`repeat_correction`): when the loop's first member
was a sound action and its answer names the next value of one of its arguments (``list_tickets(cursor='c2')``
answered "…; next_cursor: c3"), the error is the first *repeat* that asks for the same value again. Its correction,
at that repeat (the finding's first ``repeat`` evidence), is the same call with each such argument set to what the
answer offered (``next_<key>`` or ``<key>`` followed by ``:`` or ``=``; "none" / "null" offer nothing): the
superseding observation taken (the first repeat is the finding's own step when the detector already blames it: a
loop whose first try was answered by an error). When the answer instead refused an argument for its form ("date must be YYYY-MM-DD,
got '07/12/2026'"), the repeat takes that argument rewritten in the form the refusal names (:func:`refused_dates`):
a date is read day-first or month-first as the run itself wrote that date elsewhere (the task's "7 December 2026",
another call's ``2026-12-07``), or the one way that is a date at all. Not derived: an answer that offers no value
for any argument, or only the value the repeat already asks for; a refused date the run gives no reading of.
"""

from __future__ import annotations

import re
from typing import Any

from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["first_repeat", "loop_correction", "offered_values", "raised_limit", "refused_dates", "repeat_correction",
           "repeated"]

_LIMIT_NAME = re.compile(r"timeout|max|limit|iter|retries|attempts|deadline|wait", re.IGNORECASE)
_WHILE_CAP = re.compile(r"(^\s*while\b[^\n]*?\b[A-Za-z_]\w*\s*<=?\s*)(\d+)(?![\w.])", re.MULTILINE)
_RANGE_CAP = re.compile(r"(^\s*for\b[^\n]*?\brange\(\s*)(\d+)(\s*\))", re.MULTILINE)
_KEYWORD_CAP = re.compile(r"(\b([A-Za-z_]\w*)\s*=\s*)(\d+)(?![\w.])")
#: a result that says its action stopped at its bound, not that it failed or finished
_RAN_OUT = re.compile(r"\b(?:still (?:running|pending|waiting|in progress)|not (?:yet |)(?:converged|finished|done|"
                      r"complete[d]?|ready)|timed? ?out|exceeded|ran out|limit reached|max(?:imum)? \w+ reached)\b",
                      re.IGNORECASE)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scaled(value: float, times: int) -> int | float:
    out = value * times
    return int(out) if float(out).is_integer() else out


def _argument_limit(arguments: dict[str, Any], result: str) -> str | None:
    """The key of the one numeric argument the result restates as where it stopped ("still running after 5 s"),
    else of the one named as a limit."""
    numeric = [k for k, v in arguments.items() if _is_number(v)]
    restated = [k for k in numeric if re.search(rf"(?<![\w.]){re.escape(f'{arguments[k]:g}')}(?![\w.])", result)]
    if len(restated) == 1 and _RAN_OUT.search(result):
        return restated[0]
    named = [k for k in numeric if _LIMIT_NAME.search(k)]
    return named[0] if len(named) == 1 else None


def _code_limit(code: str, times: int, result: str) -> str | None:
    """``code`` with its one loop cap multiplied by ``times`` (module docstring); None without exactly one, or when
    the cap is no limit by its name and the result does not say the action stopped at it ("not converged")."""
    ran_out = bool(_RAN_OUT.search(result))
    caps = [(p, m) for p in (_WHILE_CAP, _RANGE_CAP) for m in p.finditer(code)] if ran_out else []
    caps += [(_KEYWORD_CAP, m) for m in _KEYWORD_CAP.finditer(code) if _LIMIT_NAME.search(m.group(2))]
    if len(caps) != 1:
        return None
    pattern, m = caps[0]
    number = m.group(3) if pattern is _KEYWORD_CAP else m.group(2)
    start, end = (m.start(3), m.end(3)) if pattern is _KEYWORD_CAP else (m.start(2), m.end(2))
    return code[:start] + str(int(number) * times) + code[end:]


def raised_limit(kind: str, original: Any, result: str, times: int) -> tuple[Any, str] | None:
    """``(original with its limit times ``times``, what changed)`` for a step of replacement ``kind``; None when the
    step holds no one limit."""
    if times < 2:
        return None
    if kind == "arguments" and isinstance(original, dict):
        key = _argument_limit(original, result)
        if key is None:
            return None
        raised = _scaled(original[key], times)
        return {**original, key: raised}, f"argument {key}: {original[key]} → {raised}"
    if kind == "code" and isinstance(original, str):
        fixed = _code_limit(original, times, result)
        if fixed is None:
            return None
        old, new = next((a, b) for a, b in zip(original.splitlines(), fixed.splitlines(), strict=True) if a != b)
        return fixed, f"loop cap {old.strip()} → {new.strip()}"
    return None


def _result_of(run: Run, step: Step) -> str:
    """The text that answered ``step``: its tool result, else the next step's output (a code action's)."""
    later = [s for s in run.steps if s.index > step.index]
    for s in later[:3]:
        if s.kind in ("tool_response", "code_execution") and (s.tool_name in (None, step.tool_name)):
            return str(s.content or "")
    return ""


def loop_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """The loop's first action given the budget its repeats spent (module docstring), or None."""
    times = 1 + sum(1 for e in f.evidence if e.role == "repeat")
    kind = replacement_kind(step)
    raised = raised_limit(kind, original_value(step, kind), _result_of(run, step), times)
    if raised is None:
        return None
    replacement, what = raised
    return Intervention(step_id=step.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=f"{what} (the budget of the loop's {times} repeats in one action)")


_NOTHING = frozenset({"none", "null", "nil", "end", "-", ""})


def offered_values(answer: str, arguments: dict[str, Any]) -> dict[str, str]:
    """``{key: value}``: each string or number argument whose next value ``answer`` names (``next_cursor: c3``,
    ``page=4``; a ``next_`` form first) and that differs from the argument's value."""
    out: dict[str, str] = {}
    for key, value in arguments.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            continue
        for pattern in (rf"(?<![\w])next[_ -]?{re.escape(key)}\s*[:=]\s*['\"]?([\w.:/-]+)",
                        rf"(?<![\w-]){re.escape(key)}\s*[:=]\s*['\"]?([\w.:/-]+)"):
            found = re.search(pattern, answer, re.IGNORECASE)
            if found is None:
                continue
            offered = found.group(1).rstrip(".,;:")
            if offered.lower() not in _NOTHING and offered != str(value):
                out[key] = offered
            break
    return out


def repeated(run: Run, step: Step) -> Step | None:
    """The action ``step`` repeats: the latest earlier call of the same tool by the same agent with the same
    arguments, or None."""
    if step.kind != "tool_call" or not step.tool_name:
        return None
    same = [s for s in run.steps if s.kind == "tool_call" and s.index < step.index and s.tool_name == step.tool_name
            and s.agent == step.agent and (s.arguments or {}) == (step.arguments or {})]
    return same[-1] if same else None


def first_repeat(run: Run, f: Finding) -> Step | None:
    """The first repeat of the loop ``f`` shows: the finding's own step when it repeats an earlier call (the
    detector blames the first repeat when the first try was answered by an error), else its earliest ``repeat``
    evidence after the finding's step."""
    own = run.step(f.step_id)
    if own is not None and repeated(run, own) is not None:
        return own
    repeats = [run.step(e.step_id) for e in f.evidence if e.role == "repeat" and e.step_id]
    later = sorted((s for s in repeats if s is not None and s.index > f.index), key=lambda s: s.index)
    return later[0] if later else None


def repeat_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """The loop's first repeat taking what the answer to the action it repeats offered (module docstring), or
    None."""
    repeat = first_repeat(run, f)
    first = repeated(run, step)
    if repeat is None or repeat.step_id != step.step_id or first is None or replacement_kind(step) != "arguments":
        return None
    original = original_value(step, "arguments")
    if not isinstance(original, dict):
        return None
    answer = _result_of(run, first)
    offered = offered_values(answer, original) or refused_dates(answer, original, _written_dates(run))
    if not offered:
        return None
    typed = {k: type(original[k])(v) if isinstance(original[k], (int, float)) and _numeric(v) else v
             for k, v in offered.items()}
    what = "; ".join(f"argument {k}: {original[k]} → {v}" for k, v in typed.items())
    return Intervention(step_id=step.step_id, replacement={**original, **typed}, source="mutation",
                        basis="correction", finding=f,
                        description=f"{what} (what the answer to step {first.index} offered; the loop repeated it)")


def _numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december")
#: the date forms a refusal names, each with how a (year, month, day) is written in it
_FORMS = {"YYYY-MM-DD": "{y:04d}-{m:02d}-{d:02d}", "DD/MM/YYYY": "{d:02d}/{m:02d}/{y:04d}",
          "MM/DD/YYYY": "{m:02d}/{d:02d}/{y:04d}", "DD.MM.YYYY": "{d:02d}.{m:02d}.{y:04d}"}
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_SPLIT = re.compile(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})$")
_IN_WORDS = re.compile(r"(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(" + "|".join(_MONTH_NAMES) + r")\s+(\d{4})\b|\b("
                       + "|".join(_MONTH_NAMES) + r")\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")


def _valid(y: int, m: int, d: int) -> bool:
    import datetime

    try:
        datetime.date(y, m, d)
    except ValueError:
        return False
    return True


def _written_dates(run: Run) -> set[tuple[int, int, int]]:
    """The dates the run writes unambiguously: ISO dates in any step or argument, dates in words in the task or a
    step ("7 December 2026", "December 7, 2026")."""
    import json

    texts = [run.task or ""] + [f"{s.content or ''} {json.dumps(s.arguments or {}, default=str)}" for s in run.steps]
    out: set[tuple[int, int, int]] = set()
    for text in texts:
        out.update((int(y), int(m), int(d)) for y, m, d in _ISO.findall(text) if _valid(int(y), int(m), int(d)))
        for m in _IN_WORDS.finditer(text):
            if m.group(1):
                day, month, year = int(m.group(1)), _MONTH_NAMES.index(m.group(2).lower()) + 1, int(m.group(3))
            else:
                day, month, year = int(m.group(5)), _MONTH_NAMES.index(m.group(4).lower()) + 1, int(m.group(6))
            if _valid(year, month, day):
                out.add((year, month, day))
    return out


def refused_dates(answer: str, arguments: dict[str, Any], written: set[tuple[int, int, int]]) -> dict[str, str]:
    """``{key: the date rewritten}``: each date argument the refusal ``answer`` rejects for its form (it names one of
    :data:`_FORMS` and the argument is not in it), in that form — read day-first or month-first as one of the
    ``written`` dates, else the one reading that is a date (module docstring)."""
    form = next((f for f in _FORMS if f in answer), None)
    if form is None:
        return {}
    out: dict[str, str] = {}
    for key, value in arguments.items():
        if not isinstance(value, str):
            continue
        iso, split = _ISO.fullmatch(value.strip()), _SPLIT.match(value.strip())
        if iso:
            readings = [(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))]
        elif split:
            a, b, y = int(split.group(1)), int(split.group(2)), int(split.group(3))
            readings = list(dict.fromkeys(r for r in ((y, b, a), (y, a, b)) if _valid(*r)))
        else:
            continue
        known = [r for r in readings if r in written]
        chosen = known if len(known) == 1 else readings if len(readings) == 1 else []
        if not chosen:
            continue
        y, m, d = chosen[0]
        rewritten = _FORMS[form].format(y=y, m=m, d=d)
        if rewritten != value:
            out[key] = rewritten
    return out
