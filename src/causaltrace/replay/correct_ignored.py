"""The correction of an ignored exclusion (family ``ignored_instruction`` from the provenance walk; issue 32 item 5).

A step used a value its source labelled as what the request excludes ("Sum the orders, excluding cancelled orders",
and the bookkeeper's ``add`` carries the cancelled 80): the finding's evidence is the instruction (``request``, its
label) and the value used against it (``changed``). What the step should have done is the same step honouring the
instruction — the excluded values left out — derived from the evidence, not from the case:

* **the values**: every value the step's findings of that instruction name (two cancelled orders are two findings at
  one step; one correction leaves out both), each left out once per finding;
* **the shape**: an element of a list argument (``numbers: [120, 80, 45]`` → ``[120, 45]``), an element of a list
  literal or a term of a sum in code (``[120, 80, 45]``, ``120 + 80 + 45``).

Not derived: a value the step states in prose (a total already added up is no list to leave an item out of), a value
the step holds in a shape other than those above; the step keeps its alternatives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["exclusion_correction", "is_exclusion", "left_out"]

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
        return None
    return Intervention(step_id=step.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=f"leave out {', '.join(values)} ({request})")
