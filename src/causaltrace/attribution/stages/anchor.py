"""Failure anchor (ARCHITECTURE "The default attribution method" step 1; EMFA §2.2, SEEDS §2.2): the final failure
step that backward tracing starts from.

Deterministic rules, in order:

1. the run stopped on an exception (``outcome.stop == "error"``): the last ``error`` step or step with ERROR status;
2. the run produced a final answer: the last ``final_answer`` step (the answer the verifier rejected);
3. otherwise, scanning the last ``window`` (5, EMFA's w) steps that are not user input in reverse, the latest one
   with substance — at least three salient tokens besides termination keywords, so a bare ``TERMINATE`` is skipped
   (EMFA skips progress updates to find the step that answers) and that is not a verbatim repeat of an earlier
   step (a framework's standard reply — a code executor's "there is no code to execute", sent every time it has
   nothing to run — says nothing about this run's answer); else the last such step.

The artifact records the index, the rule used, and the failure symptom (the verdict's / outcome's reason when known).
EMFA's LLM refinement (pick the latest step in the last w=5 that answers the query) is issue 6's ``final_step``
stage; it can replace this anchor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, MethodFailed, Stage
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import is_user_input, view_steps
from causaltrace.schema import Run

__all__ = ["FailureAnchor", "FailureAnchorStage", "find_failure_anchor"]


@dataclass(frozen=True)
class FailureAnchor:
    """The final failure step and why it was chosen."""

    index: int
    step_id: str
    rule: str
    symptom: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "step_id": self.step_id, "rule": self.rule, "symptom": self.symptom}


_TERMINATION_WORDS = frozenset({"terminate", "terminated", "termination", "exit", "done", "end"})


def _has_substance(text: str) -> bool:
    return len(salient_tokens(text) - _TERMINATION_WORDS) >= 3


def find_failure_anchor(run: Run, *, window: int = 5) -> FailureAnchor:
    """The failure anchor of ``run`` (rules in the module docstring). MethodFailed for a run with no steps."""
    steps = view_steps(run)
    if not steps:
        raise MethodFailed(f"run {run.run_id!r} has no steps to diagnose")
    symptom = run.outcome.verdict.reason if run.outcome.verdict and run.outcome.verdict.reason else run.outcome.reason
    if run.outcome.stop == "error":
        errors = [s for s in steps if s.kind == "error" or s.status == "error"]
        if errors:
            last = errors[-1]
            msg = last.error.message if last.error else last.content
            return FailureAnchor(last.index, last.step_id, "last error", symptom or msg[:500])
    answers = [s for s in steps if s.kind == "final_answer"]
    if answers:
        last = answers[-1]
        return FailureAnchor(last.index, last.step_id, "final answer", symptom or "")
    agent_steps = [s for s in steps if not is_user_input(s)] or steps
    seen: set[str] = set()
    repeats: set[int] = set()
    for step in steps:
        text = step.content.strip()
        if text in seen:
            repeats.add(step.index)
        seen.add(text)
    for step in reversed(agent_steps[-window:]):
        if step.index not in repeats and _has_substance(step.content):
            rule = "final step" if step is agent_steps[-1] else "latest substantive step"
            return FailureAnchor(step.index, step.step_id, rule, symptom or "")
    last = agent_steps[-1]
    return FailureAnchor(last.index, last.step_id, "final step", symptom or "")


class FailureAnchorStage(Stage[FailureAnchor]):
    """Stage ``failure_anchor`` (deterministic)."""

    stage_id: ClassVar[str] = "failure_anchor"

    async def run(self, ctx: DiagnosisContext) -> FailureAnchor:
        return find_failure_anchor(ctx.run)
