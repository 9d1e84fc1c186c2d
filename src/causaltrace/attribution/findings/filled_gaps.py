"""Family ``made_up_data``, inside a collection: code or a message that writes a table of figures whose items all
come from earlier results but one, which no result, task or user ever gave — the gap left by a lookup that failed or
never ran, filled in by the agent (issue 32, tuning case smol-fabricated-meters: ``usage_kwh = {'A': 21430, 'B':
17980, 'C': 18400}`` after building C's meter timed out; 21430 and 17980 are the meters' answers, 18400 is nobody's).

The siblings are the evidence that the step was carrying results forward; the one figure with no source is the
made-up one. Unlike :mod:`.fabrication` it needs no marker word ("simulated", "assume"): the gap itself shows it.

Not evidence: a collection of fewer than three figures, or fewer than two that results gave (no table was being
carried); a figure the task, a user or any earlier result or reply states; a figure arithmetic derives from its
siblings (a total, a difference, a ratio); a reply (the call it produced is blamed), a result, the task or the
answer; more than one sourceless figure (a collection of new numbers, not a gap).
"""

from __future__ import annotations

import re

from causaltrace.attribution.findings._common import change_strength, evidence, finding
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.values import number_key
from causaltrace.attribution.stages.view import content_of, is_user_input
from causaltrace.schema import Finding, Run, Step

__all__ = ["detect_filled_gaps", "sourceless_fill"]

#: a flat list, tuple or dict literal (no nested brackets)
_COLLECTION = re.compile(r"[\[{(]([^\[\]{}()]{1,4000})[\]})]")
#: a figure: digits with optional thousands separators and decimals, not part of a name or a quoted key
#: a figure, whole or not at all: never the integer part of a decimal the lookahead refused ("0" of '0.89"')
_FIGURE = re.compile(r"(?<![\w.'\"])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w'\"]|\.\d)"
                     r"|(?<![\w.,'\"])-?\d+(?:\.\d+)?(?![\w'\"]|\.\d)")
_RESULT_KINDS = ("tool_response", "code_execution")
#: steps that never write a table of their own: results, the reply that produced a call (the call is blamed),
#: its reasoning, the task and the answer
_SKIPPED = (*_RESULT_KINDS, "llm_response", "reasoning", "task", "final_answer")
_MIN_ITEMS = 3
_MIN_GIVEN = 2


def _number(raw: str) -> float:
    return float(raw.replace(",", ""))


def _figures(text: str) -> list[float]:
    return [_number(m.group(0)) for m in _FIGURE.finditer(text)]


def _derived(x: float, others: list[float]) -> bool:
    """True when ``x`` is what arithmetic makes of its siblings: their total, or a sum, difference, product or
    ratio of two of them."""
    if others and abs(sum(others) - x) < 1e-6:
        return True
    for i, a in enumerate(others):
        for b in others[i + 1:]:
            if any(abs(y - x) < 1e-6 for y in (a + b, a - b, b - a, a * b, *(
                    (a / b,) if b else ()), *((b / a,) if a else ()))):
                return True
    return False


class _Stated:
    """The figures stated so far: the first result step that gave each, and who else stated it (the task and users
    give to everyone; another agent's message gives to the agents that read it; an agent's own replies and
    reasoning give nothing — they are what is being checked)."""

    def __init__(self) -> None:
        self.result_at: dict[float, int] = {}
        self.said_by: dict[float, set[str]] = {}

    def add(self, step: Step) -> None:
        result = step.kind in _RESULT_KINDS
        who = "*" if step.kind == "task" or is_user_input(step) else (step.agent or "")
        for x in _figures(content_of(step)[:200_000]):
            if result:
                self.result_at.setdefault(x, step.index)
            else:
                self.said_by.setdefault(x, set()).add(who)

    def given(self, x: float, agent: str) -> bool:
        said = self.said_by.get(x, ())
        return x in self.result_at or "*" in said or any(a != agent for a in said)


def sourceless_fill(step: Step, stated: _Stated) -> tuple[float, list[tuple[float, int]]] | None:
    """``(the made-up figure, [(sibling, the result step that gave it)])`` for the first collection the step writes
    with exactly one figure nobody gave it (module docstring)."""
    agent = step.agent or ""
    for m in _COLLECTION.finditer(content_of(step)[:50_000]):
        figures = _figures(m.group(1))
        if len(figures) < _MIN_ITEMS or len(set(figures)) != len(figures):
            continue
        missing = [x for x in figures if not stated.given(x, agent)]
        from_results = [(x, stated.result_at[x]) for x in figures if x in stated.result_at]
        if len(missing) != 1 or len(from_results) < _MIN_GIVEN:
            continue
        made_up = missing[0]
        if _derived(made_up, [x for x in figures if x != made_up]):
            continue
        return made_up, from_results
    return None


def detect_filled_gaps(run: Run, prov: Provenance) -> list[Finding]:
    """One finding at the first step that fills a gap in a table of results with a figure nobody gave."""
    unsupported = {(c.index, c.after) for c in prov.changes if c.how == "unsupported"}
    stated = _Stated()
    for step in run.steps:
        found = None if step.kind in _SKIPPED or is_user_input(step) else sourceless_fill(step, stated)
        stated.add(step)
        if found is None:
            continue
        made_up, siblings = found
        shown = f"{made_up:g}"
        if (step.index, shown) in unsupported:  # the provenance walk already reports it
            continue
        if f"number:{number_key(shown)}" in prov.derived.get(step.index, {}):
            continue  # arithmetic of the figures the step was given derives it: computed, not made up

        sources = ", ".join(f"{x:g} from step {j}" for x, j in siblings[:3])
        claim = (f"step {step.index} writes {shown} beside figures results gave ({sources}); no result, task, user "
                 f"or other agent gave {shown}: a figure made up to fill the table")
        items = [*(evidence(run, j, "source", f"{x:g}") for x, j in siblings[:4]),
                 evidence(run, step.index, "changed", shown)]
        return [finding(run, "made_up_data", step.index, claim, items, strength=change_strength(prov, step.index))]
    return []
