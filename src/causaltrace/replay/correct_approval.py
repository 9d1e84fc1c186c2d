"""The correction of an approval nobody checked (family ``unchecked_approval``; issue 32 item 5).

A reviewer approved a result that never used a value the task gave (the finding's ``unchecked`` evidence: the value
and where it was given, the task or a step). What the reviewer should have said is derived from that evidence, not
from the case: the approval is replaced by a rejection that names the unchecked claim — the words the source wrote
around the value (``10% member discount``, not only ``10``) — and asks for the check. The rejection takes the
approval's place in the shape the step writes it: a message's text, the answer argument of a ``final_answer`` call,
a code action's ``final_answer(...)``.

Not derived: a call of a checking tool in place of the approval — the teams measured (issue 32's tuning half) give
their reviewers no tool, and a call needs arguments no finding holds.
"""

from __future__ import annotations

import re
from typing import Any

from causaltrace.replay.edits import final_answer_code, original_value, replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["approval_correction", "claim_phrase", "in_shape", "rejection"]

#: how far past the value a claim's phrase runs (words), and where it stops
_PHRASE_WORDS = 3
_STOP = re.compile(r"[.,;:!?()\[\]{}\n]|\s(?:and|or|but|then|so)\s")


def claim_phrase(text: str, value: str) -> str:
    """The words ``text`` writes around ``value``: the value's whole token and up to :data:`_PHRASE_WORDS` words
    after it, to the end of its clause (``with the 10% member discount.`` → ``10% member discount``); the value
    itself when the text does not hold it as a whole token."""
    found = re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\d])", text)
    if found is None:
        return value
    rest = text[found.start():]
    stop = _STOP.search(rest, len(value))
    clause = rest[:stop.start()] if stop else rest
    return " ".join(clause.split()[:1 + _PHRASE_WORDS]).strip() or value


def rejection(claims: list[str]) -> str:
    """The verdict in place of the approval: it rejects, names what was not checked and asks for the check."""
    named = " and ".join(f"the task's {c}" for c in claims)
    return (f"REJECT: the result never uses {named}. Check the result against {'them' if len(claims) > 1 else 'it'} "
            "and correct it.")  # no word of approval: a team may end on one (AutoGen's TextMentionTermination)


def in_shape(kind: str, original: Any, text: str) -> Any:
    """``text`` in the place a step of replacement ``kind`` writes what it says: the text itself, the one string
    argument of a call (an answer, a delegation's task), or a code action's ``final_answer``; None for any other
    shape."""
    if kind == "text":
        return text
    if kind == "arguments" and isinstance(original, dict):
        strings = [k for k, v in original.items() if isinstance(v, str)]
        return {**original, strings[0]: text} if len(strings) == 1 else None
    if kind == "code" and isinstance(original, str) and "final_answer(" in original:
        return final_answer_code(original, text)
    return None


def approval_correction(step: Step, run: Run, f: Finding) -> Intervention | None:
    """The rejection of the unchecked result in place of ``step``'s approval (module docstring), or None when the
    finding names no unchecked value or the step's shape holds no verdict."""
    claims: list[str] = []
    for e in f.evidence:
        if e.role != "unchecked" or e.value in (None, ""):
            continue
        source = (run.task or "") if e.index < 0 else (run.step_at(e.index).content or "")
        claims.append(claim_phrase(source, str(e.value)))
    if not claims:
        return None
    kind = replacement_kind(step)
    original = original_value(step, kind)
    replacement = in_shape(kind, original, rejection(list(dict.fromkeys(claims))))
    if replacement is None or replacement == original:
        return None
    return Intervention(step_id=step.step_id, replacement=replacement, source="mutation", basis="correction",
                        finding=f, description=f"approval → rejection naming the unchecked {', '.join(claims)}")
