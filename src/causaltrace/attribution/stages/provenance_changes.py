"""Value comparisons (:mod:`.provenance`'s docstring, 5): whether a value a step introduced CHANGED one of its
sources — a number restated in the same words as a different number (``price … 22`` after ``price: 21``), a number
a digit away from a given one (a copy slip, ``12.05`` for ``12.50``), a unit, date word, qualifier, comparison or
range of the same group as a source's but different (a substitution), a sum divided by other than its count where
a mean is meant (a mean slip).

Split from :mod:`.provenance`: each comparison is a pure function of the step's value and the candidate sources the
walk (:mod:`.provenance_walk`) hands it, latest first, so the rules can be read and tested apart from the walk.
"""

from __future__ import annotations

import re

from causaltrace.attribution.stages.provenance_record import Change
from causaltrace.attribution.stages.values import Value
from causaltrace.attribution.stages.view import content_of
from causaltrace.schema import Step

__all__ = ["is_copy_slip", "is_small", "mean_slip", "restated", "rounds_to", "substituted"]


def is_small(key: str) -> bool:
    """A single-digit integer: too common in text to be a restated value."""
    return key.lstrip("-").isdigit() and len(key.lstrip("-")) == 1


def is_copy_slip(before: str, after: str, *, shortest: int = 3) -> bool:
    """``after`` is ``before`` with two digits swapped or one digit changed (not merely a different magnitude), in
    numbers of at least ``shortest`` digits (two-digit numbers a digit apart are too common to link by form alone,
    unless nothing else links them: :func:`restated`). The decimal point stays where it was: ``1.30`` is no slip of
    ``100`` (a rate beside an amount: another magnitude, not a changed digit)."""
    a, b = (x.replace(",", "").lstrip("-") for x in (before, after))
    if a.find(".") != b.find("."):
        return False
    a, b = a.replace(".", ""), b.replace(".", "")
    if len(a) != len(b) or len(a) < shortest or a == b:
        return False
    diff = [k for k in range(len(a)) if a[k] != b[k]]
    if len(diff) == 1:  # one digit changed — but two years a digit apart are two dates (2024 for 2023), no slip
        return not (_is_year(a) and _is_year(b) and "." not in before)
    return len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def _is_year(digits: str) -> bool:
    """A four-digit year (1900–2099): two years one digit apart are two dates, not a copy slip (2024 for 2023); two
    swapped digits stay a slip (1923 for 1932)."""
    return len(digits) == 4 and digits[:2] in ("19", "20")


def rounds_to(source: str, stated: str) -> bool:
    """``stated`` is ``source`` rounded to the decimals ``stated`` shows (``-4.9361`` for ``-4.936104757``; not
    ``4.9`` for ``4.9`` itself): a faithful restatement, not a changed value."""
    if "." not in stated or source == stated:
        return False
    try:
        digits = len(stated.split(".", 1)[1])
        return len(source.split(".", 1)[-1]) > digits and round(float(source), digits) == float(stated)
    except ValueError:
        return False


def restated(k: int, v: Value, pool: list[tuple[int, Value]]) -> Change | None:
    """The number of the step's sources that ``v`` most plausibly restates, changed (:mod:`.provenance`'s docstring,
    5); ``pool`` is latest source first.

    The most plausible origin is the one the number's FORM links to ``v``: a number ``v`` is a copy slip of (a digit
    changed, two swapped), the latest source first — two-digit numbers too when the source's number is bare (nothing
    names it: a tool's result ``21``), whose form is then all that links it. Only then one stated in the same
    WORDS (two shared salient words, half the smaller context): words near a number are weak evidence — a task's
    ``3 boxes … the unit price`` shares "unit price" with ``The unit price is 22`` though its 3 is not the price —
    and a bare result has none to share. A slip that also shares the words is a restatement, else a copy."""
    worded: Change | None = None
    if any(u.kind == "number" and rounds_to(u.key, v.key) for _, u in pool):
        return None  # a source's number stated with fewer decimals: the same value, rounded
    for j, u in pool:
        if u.kind != "number":
            continue
        shared = len(u.context & v.context)
        same_words = shared >= 2 and shared * 2 >= min(len(u.context), len(v.context)) and not is_small(v.key)
        if is_copy_slip(u.raw, v.raw, shortest=3 if u.context else 2):
            return Change(k, j, "number", u.key, v.key, "restatement" if same_words else "copy")
        if same_words and worded is None and _same_magnitude(u.key, v.key):
            worded = Change(k, j, "number", u.key, v.key, "restatement")
    return worded


def _same_magnitude(before: str, after: str) -> bool:
    """Two numbers within a factor of ten of each other: a value restated wrongly is still a value of that quantity
    (330 stated as 300); 737015 where the source said 2 is another quantity, however alike the words around them."""
    try:
        a, b = abs(float(before)), abs(float(after))
    except ValueError:
        return False
    return a > 0 and b > 0 and max(a, b) <= 10 * min(a, b)


def mean_slip(step: Step, v: Value, task_text: str) -> Change | None:
    """``(a + b + c) / 2`` where a mean is meant (the step or the task says average / mean / avg); ``v`` is the
    step's ``mean of <terms> / <divisor>`` operator."""
    terms, divisor = v.key.removeprefix("mean of ").split(" / ")
    said = f"{content_of(step)} {(step.arguments or {}).get('code', '')} {task_text}".lower()
    if terms != divisor and any(w in said for w in ("average", "mean", "avg")):
        return Change(step.index, step.index, "operator", f"/ {terms}", f"/ {divisor}", "substitution")
    return None


#: a percentage the task takes off (a discount) or puts on (a surcharge): the words beside it say which
_TAKES_OFF = re.compile(r"\b(?:discount\w*|off|reduc\w*|rebate|less|cut|markdown|deduct\w*)\b", re.IGNORECASE)
_PUTS_ON = re.compile(r"\b(?:surcharge|tax|vat|markup|mark-up|tip|fee|increase\w*|rais\w*|interest|premium)\b",
                      re.IGNORECASE)
_PERCENT_IN_TASK = re.compile(r"(\d+(?:\.\d+)?)\s?(?:%|percent\b|per cent\b)([^.;\n]{0,40})", re.IGNORECASE)


def percent_sign_slip(step: Step, task_text: str) -> Change | None:
    """Code that applies the task's percentage in the other direction: ``subtotal + subtotal * 15 / 100`` or
    ``* (1 + 15 / 100)`` or ``* 1.15`` for "the 15% loyalty discount" (the sign of the operator changed), or the
    minus for a surcharge. The words right after the task's percentage decide which way it goes; both or neither:
    nothing is compared."""
    code = str((step.arguments or {}).get("code") or "") or (content_of(step) if "```" in content_of(step) else "")
    if not code:
        return None
    for m in _PERCENT_IN_TASK.finditer(task_text[:5000]):
        off, on = bool(_TAKES_OFF.search(m.group(2))), bool(_PUTS_ON.search(m.group(2)))
        if off == on:
            continue
        p = re.escape(m.group(1))
        factor = 1 + float(m.group(1)) / 100 * (1 if off else -1)  # the factor of the wrong direction
        wrong = "+" if off else "-"
        patterns = (rf"(\w+)\s*{re.escape(wrong)}\s*\1\s*\*\s*{p}\s*/\s*100\b",
                    rf"\(\s*1(?:\.0)?\s*{re.escape(wrong)}\s*{p}\s*/\s*100\s*\)",
                    rf"\*\s*{re.escape(format(factor, '.10g'))}(?![\d.])")
        if any(re.search(pattern, code) for pattern in patterns):
            return Change(step.index, -1, "operator", "-" if off else "+", wrong, "substitution",
                          detail=f"the task's {m.group(1)}% {'taken off' if off else 'added'}")
    return None


#: what asks for a count rounded up (containers for all the items, whole units bought)
_ROUND_UP = re.compile(r"\b(?:round(?:ed|ing)?\s+up|partly\s+filled|partially\s+filled|part(?:ly|ial)\s+\w+\s+"
                       r"(?:still\s+)?counts?|ceiling|every\s+\w+\s+must\s+be\s+(?:packed|seated|carried|covered))\b",
                       re.IGNORECASE)
_FLOOR = re.compile(r"(?<![/\w])(\w+(?:\.\w+)?)\s*//\s*(\w+(?:\.\w+)?)|\bmath\.floor\(|\bint\(\s*\w+\s*/\s*\w+\s*\)")


def floor_slip(step: Step, sources: list[tuple[int, str]]) -> Change | None:
    """Code that rounds a count down (``250 // 12``, ``int(a / b)``, ``math.floor``) where what it follows says to
    round up ("a partly filled box is still a box", "round up"): the operator changed (an under-count), charged to
    the step, its source the text that asked for the ceiling. A floor under ``-(-a // b)`` is the ceiling itself."""
    code = str((step.arguments or {}).get("code") or "") or (content_of(step) if "```" in content_of(step) else "")
    if "//" not in code and "floor" not in code and "int(" not in code:
        return None
    m = _FLOOR.search(code)
    if m is None or code[max(0, m.start() - 4):m.start()].replace(" ", "").endswith("(-"):
        return None
    for j, text in sources:
        if _ROUND_UP.search(text):
            return Change(step.index, j, "operator", "ceil", m.group(0).strip(), "substitution",
                          detail="rounded down where the request rounds up")
    return None


#: the side of an extreme the task asks for: the most recent / highest / top are the maximum's side
_MAX_SIDE = re.compile(r"\b(?:most\s+recent|latest|newest|highest|largest|biggest|top|most\s+expensive|best)\b",
                       re.IGNORECASE)
_MIN_SIDE = re.compile(r"\b(?:oldest|earliest|lowest|smallest|cheapest|least\s+expensive|bottom|worst)\b",
                       re.IGNORECASE)
_TAKEN = re.compile(r"\s*\[\s*(?::\s*(\d+)|0|(-\d+)\s*:|-1)\s*\]")


def sort_slip(step: Step, task_text: str) -> Change | None:
    """Code that sorts and takes the wrong end for the task's extreme: ``sorted(rows, key=...)[:3]`` (the three
    SMALLEST) for "the three most recent", or ``sorted(..., reverse=True)[0]`` for "the cheapest". Only when the task
    names one side; the sort's own direction and the slice decide the side taken."""
    code = str((step.arguments or {}).get("code") or "") or (content_of(step) if "```" in content_of(step) else "")
    if "sorted(" not in code:
        return None
    wants_max, wants_min = bool(_MAX_SIDE.search(task_text)), bool(_MIN_SIDE.search(task_text))
    if wants_max == wants_min:
        return None
    for start in (m.end() for m in re.finditer(r"\bsorted\(", code)):
        depth, end = 1, start
        while end < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        taken = _TAKEN.match(code, end)
        if depth or taken is None:
            continue
        descending = re.search(r"reverse\s*=\s*True", code[start:end]) is not None
        first = taken.group(2) is None and not taken.group(0).strip().startswith("[-1")
        takes_max = first == descending
        if takes_max != wants_max:
            return Change(step.index, -1, "operator", "the largest" if wants_max else "the smallest",
                          "the smallest" if wants_max else "the largest", "substitution",
                          detail=f"sorted{'' if not descending else ' descending'} then {taken.group(0).strip()}")
    return None


_COMPARED = re.compile(r"""(?:==|!=)\s*(['"])([\w./-]{1,40})\1|(['"])([\w./-]{1,40})\3\s*(?:==|!=)""")
_QUOTED = re.compile(r"""(['"])([\w./-]{1,40})\1""")


def case_slip(step: Step, results: list[tuple[int, str]]) -> Change | None:
    """Code that compares a field with a literal the data it read never holds as written, but holds in another case
    (``line['currency'] == 'USD'`` where the lines say ``'usd'``): the comparison can never match, so the branch the
    data needed never runs — the value changed from its source (its case)."""
    code = str((step.arguments or {}).get("code") or "") or (content_of(step) if "```" in content_of(step) else "")
    for m in _COMPARED.finditer(code):
        literal = m.group(2) or m.group(4)
        held: dict[str, int] = {}
        for j, text in results:
            for q in _QUOTED.finditer(text[:20_000]):
                held.setdefault(q.group(2), j)
        if literal in held:
            continue
        other = next((value for value in held if value.casefold() == literal.casefold()), None)
        if other is not None:
            return Change(step.index, held[other], "word", other, literal, "substitution",
                          detail="compared in another case than the data holds it")
    return None


def substituted(k: int, v: Value, pool: list[tuple[int, Value]]) -> Change | None:
    """A value of the step's sources of the same group as ``v`` (a quantity or comparison: the same number; a
    span: the same start or end) but different."""
    for j, u in pool:
        if u.kind != v.kind or u.group != v.group or u.key == v.key:
            continue
        if v.kind == "quantity":
            (n_u, unit_u), (n_v, unit_v) = u.key.split(" ", 1), v.key.split(" ", 1)
            if n_u == n_v:
                return Change(k, j, "unit", unit_u, unit_v, "substitution")
        elif v.group == "comparison":
            if u.key.split(" ", 1)[1] == v.key.split(" ", 1)[1]:
                return Change(k, j, "operator", u.key, v.key, "substitution")
        elif v.group == "span":
            (a_u, b_u), (a_v, b_v) = u.key.split(".."), v.key.split("..")
            if a_u == a_v or b_u == b_v:
                return Change(k, j, "operator", u.key, v.key, "substitution")
        elif v.group != "extreme" or not _same_extreme(u.key, v.key):
            return Change(k, j, v.kind, u.key, v.key, "substitution")
    return None


#: an extreme word's side (lowest or highest) and what it measures (None: whatever the request measures)
_EXTREMES = {"minimum": ("min", None), "lowest": ("min", None), "smallest": ("min", "size"),
             "cheapest": ("min", "price"), "earliest": ("min", "time"), "maximum": ("max", None),
             "highest": ("max", None), "largest": ("max", "size"), "latest": ("max", "time")}


def _same_extreme(a: str, b: str) -> bool:
    """Two extreme words that ask for the same entry: one side, and one of them measures nothing of its own ("the
    lowest fare" restated as "the cheapest"). "latest" for "largest" (one side, two measures) is still a change."""
    (side_a, what_a), (side_b, what_b) = _EXTREMES.get(a, (a, a)), _EXTREMES.get(b, (b, b))
    return side_a == side_b and (what_a is None or what_b is None or what_a == what_b)
