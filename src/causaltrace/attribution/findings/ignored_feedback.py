"""Family ``ignored_instruction``, from a teammate (MAST FM-2.5, ignored other agent's input): one agent corrects a
value another stated — "the rate is 0.25, not 0.52", "use 25 instead of 26", "change 26 to 25" — and a later step
still acts on the corrected-away value and not on the correction.

The finding is at the first later step whose call arguments, code or answer carry the old value without the new
one: the step that ignored the input. Its evidence is the correction (the teammate's step, the value it gave) and
what the step still used.

Not evidence: a correction of a value nobody had stated before it (nothing to correct); one an agent makes of its
own earlier statement (it changed its mind: the later steps show which); a later step that carries both values
(it may compare them) or that is the corrector's own; prose without a value (only numbers and quoted words are
read); a result, a reply that produced a call (the call is blamed), the task.
"""

from __future__ import annotations

import re

from causaltrace.attribution.findings._common import change_strength, evidence, finding
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.view import content_of, is_user_input
from causaltrace.schema import Finding, Run, Step

__all__ = ["corrections_in", "detect_ignored_feedback"]

_VALUE = r"(-?\d[\d,]*(?:\.\d+)?%?|'[^'\n]{1,60}'|\"[^\"\n]{1,60}\")"
#: (pattern, index of the new value's group, index of the old value's group)
_CORRECTIONS = (
    (re.compile(rf"\b(?:is|be|should be|must be|use|means)\s+{_VALUE},?\s+not\s+{_VALUE}", re.IGNORECASE), 1, 2),
    (re.compile(rf"\buse\s+{_VALUE}\s+instead\s+of\s+{_VALUE}", re.IGNORECASE), 1, 2),
    (re.compile(rf"\b(?:change|replace|correct)\s+{_VALUE}\s+(?:to|with|by)\s+{_VALUE}", re.IGNORECASE), 2, 1),
    (re.compile(rf"\bnot\s+{_VALUE}\s+but\s+{_VALUE}", re.IGNORECASE), 2, 1),
)
_SKIPPED = ("tool_response", "code_execution", "llm_response", "reasoning", "task")
#: how many corrections a run's check reads, and how many steps before and after each it looks at: a 10,000-step
#: run of corrections stays linear (the statement corrected and the step that ignores it are near the correction)
_MAX_CORRECTIONS = 20
_WINDOW = 200


def _bare(value: str) -> str:
    return value.strip("'\"").replace(",", "").rstrip("%")


def corrections_in(text: str) -> list[tuple[str, str]]:
    """``(new value, old value)`` for every correction the text states (module docstring), values bare (no quotes,
    thousands separators or percent sign)."""
    out = []
    for pattern, new, old in _CORRECTIONS:
        for m in pattern.finditer(text[:50_000]):
            pair = (_bare(m.group(new)), _bare(m.group(old)))
            if pair[0] and pair[1] and pair[0] != pair[1] and pair not in out:
                out.append(pair)
    return out


def _acted(step: Step) -> str:
    """What a step acts on: its call's arguments, else its content (code, a message, an answer)."""
    if step.arguments:
        return " ".join(str(v) for v in step.arguments.values())
    return content_of(step)


def _holds(text: str, value: str) -> bool:
    if re.fullmatch(r"-?[\d.]+", value):
        return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text.replace(",", "")) is not None
    return value.casefold() in text.casefold()


def detect_ignored_feedback(run: Run, prov: Provenance) -> list[Finding]:
    """One finding per correction a later step ignored (module docstring), at that step."""
    out: list[Finding] = []
    steps = run.steps
    checked = 0
    for pos, corrector in enumerate(steps):
        if corrector.kind in _SKIPPED or is_user_input(corrector) or not corrector.agent:
            continue
        for new, old in corrections_in(content_of(corrector))[:3]:
            checked += 1
            if checked > _MAX_CORRECTIONS:  # a run of corrections: bounded work, linear in the run's length
                return out
            before, after = steps[max(0, pos - _WINDOW):pos], steps[pos + 1:pos + 1 + _WINDOW]
            stated_by = {s.agent for s in before if s.kind not in _SKIPPED and _holds(content_of(s), old)}
            if not stated_by or stated_by == {corrector.agent}:
                continue
            ignored = next((s for s in after if s.kind not in _SKIPPED and s.agent != corrector.agent
                            and _holds(_acted(s), old) and not _holds(_acted(s), new)), None)
            if ignored is None:
                continue
            claim = (f"step {ignored.index} still uses {old!r} after step {corrector.index} ({corrector.agent}) "
                     f"corrected it to {new!r}: a teammate's input ignored")
            items = [evidence(run, corrector.index, "source", new), evidence(run, ignored.index, "changed", old)]
            out.append(finding(run, "ignored_instruction", ignored.index, claim, items, category="FM-2.5",
                               strength=change_strength(prov, ignored.index)))
    return out
