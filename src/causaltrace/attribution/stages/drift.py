"""The run's opening compared with the task (issue 20 item 4, "a restatement compared with its source"): an opening
about another task (MAST FM-2.3 Task Derailment), and an opening that merely restates the task.

A team is set on its way by the first substantial statement of what it works on — a planner's plan, a manager's
restatement of the task, an orchestrator's facts sheet. That statement is a restatement of the run's task, and it
is compared with its source like any other restatement: when it holds almost none of the task's salient words, the
team was sent after a different task from the start, and every later step — however faithful — executes the wrong
goal. Its author is responsible (the responsibility boundary "the author of an instruction, not its faithful
executor"), not the agent that finally answered.

The rule, deterministic and deliberately narrow:

* the **opening** is the earliest attribution candidate that is a text step (``message``, ``reasoning``,
  ``planning``) with at least :data:`MIN_OPENING_TOKENS` salient tokens — long enough to be a plan or a
  restatement, so a short first action ("Let me look that up", a tool call) is never judged;
* the task must have at least :data:`MIN_TASK_TOKENS` salient tokens (a three-word task says too little to
  compare with);
* the opening **drifts** when it holds less than :data:`MAX_COVERAGE` of the task's salient tokens.

Only the opening is judged: later steps legitimately narrow the task down to a sub-problem (a debugging turn, a
lookup) and share few of its words. A run whose opening quotes the task verbatim never drifts, whatever follows.

The opposite case is an opening that **restates the task and adds nothing** (:func:`bare_opening`): it holds at
least :data:`RESTATES` of the task's words, carries no code and no figure the task does not give. That is the task's
prompt — in an Algorithm-Generated log, the manager's "General Task / Plan / Output format / Constraints" template
spoken by the first expert — not a decision; it shares words with every later step and the first position, so
relevance and earliness ranked it first whatever the run did. Graph scales such an opening by ``restatement``
unless a signal of its own (an error, a loop, a changed value, a finding) supports it.

Data: the thresholds were set by reasoning about what a plan is (a plan names the task's entities; 20 tokens is a
paragraph). On Who&When's dev half (even file numbers) every Algorithm-Generated opening either holds at least 33 %
of the task's tokens or less than 18 % (six logs whose manager debugs an unrelated exit code — each labelled at
that opening), and every Hand-Crafted opening (the orchestrator's facts sheet) quotes the task. A bare opening
is found in 31 of the 63 dev Algorithm-Generated logs (labelled at none of them), in no Hand-Crafted log and in no
zoo run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import candidate_steps, content_of
from causaltrace.schema import Run, Step

__all__ = ["MAX_COVERAGE", "RESTATES", "bare_opening", "MIN_OPENING_TOKENS", "MIN_TASK_TOKENS", "TaskDrift", "TaskDriftResult", "TaskDriftStage",
           "find_task_drift"]

#: an opening holding less than this share of the task's salient tokens is about another task
MAX_COVERAGE = 0.25
#: an opening needs this many salient tokens to be judged (a plan or a restatement, not a first action)
MIN_OPENING_TOKENS = 20
#: a task needs this many salient tokens to be compared with
MIN_TASK_TOKENS = 5
_TEXT_KINDS = frozenset({"message", "reasoning", "planning"})
#: a step holding this share of the task's salient tokens restates it (relevance's rule too)
RESTATES = 0.8
#: numbers up to this are list numbering and counts of the plan's own steps, not figures a step brings in
_SMALL = 10


@dataclass(frozen=True)
class TaskDrift:
    """The opening that drifted from the task, and by how much."""

    index: int
    step_id: str
    shared: int
    task_tokens: int
    examples: tuple[str, ...] = ()

    def describe(self) -> str:
        missing = f" (none of {', '.join(self.examples)}…)" if self.examples and not self.shared else ""
        return (f"opens the run on another task: its plan holds {self.shared} of the task's {self.task_tokens} "
                f"salient words{missing}, so every later step executes a different goal (task derailment)")

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "step_id": self.step_id, "shared": self.shared,
                "task_tokens": self.task_tokens, "examples": list(self.examples)}


def find_task_drift(run: Run) -> TaskDrift | None:
    """The run's opening when it drifted from the task (module docstring), else None."""
    found = _task_and_opening(run)
    if found is None:
        return None
    task, step, tokens = found
    shared = task & tokens
    if len(shared) >= MAX_COVERAGE * len(task):
        return None
    examples = tuple(sorted((t for t in task - tokens if not t[0].isdigit()), key=lambda t: (-len(t), t))[:3])
    return TaskDrift(step.index, step.step_id, len(shared), len(task), examples)


def bare_opening(run: Run) -> int | None:
    """The run's opening (module docstring) when it restates the task and adds nothing of its own: it holds at least
    :data:`RESTATES` of the task's salient tokens, carries no code, and brings in no figure the task does not give
    (numbers above :data:`_SMALL`: a plan's numbering is not a figure). Such an opening is the task's prompt — a
    manager's restatement with its plan template — not a decision: what it says, the task said (graph's
    ``restatement`` factor). Only the opening: later restatements (an orchestrator restating the task in every
    instruction) come with a decision of their own, what to do next."""
    found = _task_and_opening(run)
    if found is None:
        return None
    task, step, tokens = found
    if step.inputs.get("code") or "```" in step.content or len(task & tokens) < RESTATES * len(task):
        return None
    figures = [t for t in tokens - task if t[0].isdigit() and not (t.isdigit() and int(t) <= _SMALL)]
    return None if figures else step.index


def _task_and_opening(run: Run) -> tuple[set[str], Step, set[str]] | None:
    """The task's salient tokens, the run's opening and its salient tokens — None when the task is too short to
    compare with or no step is long enough to be an opening."""
    task = salient_tokens(run.task or "")
    if len(task) < MIN_TASK_TOKENS:
        return None
    for step in candidate_steps(run):
        if step.kind not in _TEXT_KINDS:
            continue
        tokens = salient_tokens(content_of(step))
        if len(tokens) >= MIN_OPENING_TOKENS:
            return task, step, tokens
    return None


@dataclass(frozen=True)
class TaskDriftResult:
    """The stage's artifact: the drifting opening, or none."""

    drift: TaskDrift | None

    def to_json(self) -> dict[str, Any]:
        return {"drift": self.drift.to_json() if self.drift is not None else None}


class TaskDriftStage(Stage[TaskDriftResult]):
    """Stage ``task_drift`` (deterministic): the opening that drifted from the task (module docstring)."""

    stage_id: ClassVar[str] = "task_drift"

    async def run(self, ctx: DiagnosisContext) -> TaskDriftResult:
        return TaskDriftResult(find_task_drift(ctx.run))

    def skipped(self, ctx: DiagnosisContext) -> TaskDriftResult:
        return TaskDriftResult(None)
