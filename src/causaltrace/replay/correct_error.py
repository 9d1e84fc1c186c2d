"""The correction of an error never recovered at a refused call (family ``unrecovered_error``; issue 32 item 5).

A tool refused a call for one value it names ("unknown currency code 'SFR': use an ISO 4217 code" for
``get_rate(pair='SFR/EUR')``) and nothing later made the call again right, so what the call was for is missing from
the answer. What the call should have asked for is derived from the finding and the run, not from the case: the
value the refusal quotes, when it is (part of) an argument, replaced by **the task's one value of the same shape that
no call has used** — the same letters-digits-punctuation pattern (``SFR`` → three capitals: the task's ``EUR``,
``DKK`` and ``CHF``, of which the earlier ``get_rate(pair='DKK/EUR')`` used two): ``get_rate(pair='CHF/EUR')``.

Not derived: an error that quotes no argument's value (a transient failure, a crash), a refused value with no
unused counterpart in the task or several; the step keeps its alternatives.
"""

from __future__ import annotations

import json
import re

from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["refused_value_correction", "shape"]

_QUOTED = re.compile(r"'([^'\s]{2,})'|\"([^\"\s]{2,})\"")
_TOKEN = re.compile(r"(?<![\w-])[A-Za-z0-9][\w-]*(?<![-_])")


def shape(token: str) -> str:
    """``token``'s pattern: capitals ``A``, small letters ``a``, digits ``9``, anything else as itself."""
    return "".join("A" if c.isupper() else "a" if c.islower() else "9" if c.isdigit() else c for c in token)


def _written(token: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", text) is not None


def refused_value_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """``step``'s call asking for the task's unused value of the refused value's shape (module docstring), or
    None."""
    if step.kind != "tool_call" or replacement_kind(step) != "arguments":
        return None
    arguments = original_value(step, "arguments")
    error = next((str(e.value) for e in f.evidence if e.role == "error" and e.value), "")
    if not isinstance(arguments, dict) or not error:
        return None
    strings = {k: v for k, v in arguments.items() if isinstance(v, str)}
    quoted = [a or b for a, b in _QUOTED.findall(error)]
    refused = [q for q in dict.fromkeys(quoted) if q not in strings and any(_written(q, v) for v in strings.values())]
    used = " ".join(json.dumps(s.arguments or {}, default=str) for s in run.steps
                    if s.kind == "tool_call" and s.index <= step.index)
    for value in sorted(refused, key=len):
        fits = list(dict.fromkeys(t for t in _TOKEN.findall(run.task or "")
                                  if t != value and shape(t) == shape(value) and not _written(t, used)))
        if len(fits) != 1:
            continue
        fixed = {k: re.sub(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", fits[0], v)
                 for k, v in strings.items() if _written(value, v)}
        return Intervention(step_id=step.step_id, replacement={**arguments, **fixed}, source="mutation",
                            basis="correction", finding=f,
                            description="; ".join(f"argument {k}: {arguments[k]} → {v}" for k, v in fixed.items())
                            + f" (the task's {fits[0]} no call used, where the tool refused {value})")
    return None
