"""What a fault case is: a factory, a task, a verifier, the planted error's type and the rule naming its step.

The true decisive step is never a hard-coded number: each case states a RULE ("the first ``multiply`` tool_call",
"the manager's routing code") that :meth:`FaultCase.true_step` applies to the recorded run, so the index follows
the run's real shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from causaltrace.schema import Outcome, Run, Step, Verdict

__all__ = ["FAULT_TYPES", "FaultCase", "answer_is", "first_step", "mark_held_out"]

FaultType = Literal["wrong_tool_argument", "boundary_bug", "wrong_fact", "nonconverging_loop", "wrong_handoff",
                    "wrong_plan_word", "misread_observation", "premature_termination", "reviewer_approval",
                    "repetition_progress", "ignored_instruction", "wrong_unit", "wrong_speaker", "fabricated_data",
                    "task_derailment", "wrong_entity", "stale_value"]
#: The failure types (issue 20's zoo): a wrong number / copy typo in a tool call (``wrong_tool_argument``), wrong
#: code logic — operator, bound, divisor (``boundary_bug``), a wrong restatement of a correct tool result
#: (``wrong_fact``), a true action loop without progress (``nonconverging_loop``), a wrong handoff / delegation
#: target (``wrong_handoff``), then the zoo's types (:mod:`.cases_zoo`), then those of :mod:`.cases_blind32`: the
#: wrong one of several matching records (``wrong_entity``), a value read before an update that changed it
#: (``stale_value``).
FAULT_TYPES: tuple[str, ...] = ("wrong_tool_argument", "boundary_bug", "wrong_fact", "nonconverging_loop",
                                "wrong_handoff", "wrong_plan_word", "misread_observation", "premature_termination",
                                "reviewer_approval", "repetition_progress", "ignored_instruction", "wrong_unit",
                                "wrong_speaker", "fabricated_data", "task_derailment", "wrong_entity",
                                "stale_value")


@dataclass(frozen=True)
class FaultCase:
    """One scripted run with ONE planted decisive error and a recovered tool error as a distractor."""

    name: str
    framework: Literal["smolagents", "autogen"]
    fault: FaultType
    task: str
    #: the zero-argument factory of the team WITH the planted error (a fresh team per call)
    factory: Callable[[], Any]
    verify: Callable[[Outcome], Verdict]
    #: the rule that finds the decisive step in the recorded run, and its wording
    rule: Callable[[Run], Step]
    rule_text: str
    #: the factory of the same team WITHOUT the planted error (used by the tests to check that it succeeds)
    fixed_factory: Callable[[], Any] | None = None
    #: held out of all tuning (issue 20: every second case of each type, in suite order — :func:`mark_held_out`)
    held_out: bool = False

    def true_step(self, run: Run) -> int:
        """The index of the decisive step in ``run`` (the case's rule applied to the recorded run)."""
        return self.rule(run).index


def first_step(kind: str, *, agent: str | None = None, tool: str | None = None, contains: str | None = None,
               nth: int = 0) -> Callable[[Run], Step]:
    """A rule: the ``nth`` step of ``kind`` (optionally by ``agent``, calling ``tool``, whose content or code
    contains ``contains``), in step order."""

    def rule(run: Run) -> Step:
        found = []
        for step in run.steps:
            if step.kind != kind or (agent is not None and step.agent != agent):
                continue
            if tool is not None and step.tool_name != tool:
                continue
            text = (step.content or "") + str(step.arguments or "") + str(step.inputs.get("code") or "")
            if contains is not None and contains not in text:
                continue
            found.append(step)
        if len(found) <= nth:
            raise LookupError(f"no step #{nth} of kind {kind!r} (agent={agent}, tool={tool}, contains={contains!r})")
        return found[nth]

    return rule


def answer_is(expected: str) -> Callable[[Outcome], Verdict]:
    """A strict verifier: the final answer, whitespace-normalised, must be exactly ``expected``."""

    def verify(outcome: Outcome) -> Verdict:
        answer = " ".join(str(outcome.final_answer or "").split())
        if answer == expected:
            return Verdict(passed=True)
        return Verdict(passed=False, reason=f"the final answer is {answer!r}, expected {expected!r}")

    verify.__name__ = f"answer_is_{expected}"
    return verify


def mark_held_out(cases: list[FaultCase]) -> list[FaultCase]:
    """The fixed held-out rule (issue 20): within each type, in suite order, the 2nd, 4th, … case is held out of all
    tuning. Applied to the WHOLE suite's order (never a filtered list), so a case's mark never depends on which
    cases were asked for."""
    seen: dict[str, int] = {}
    out = []
    for case in cases:
        position = seen.get(case.fault, 0)
        seen[case.fault] = position + 1
        out.append(replace(case, held_out=position % 2 == 1))
    return out
