"""The run's opening compared with the task (issue 20 item 4, "a restatement compared with its source"): an opening
about another task (MAST FM-2.3 Task Derailment), and an opening that merely restates the task.

A team is set on its way by the first substantial statement of what it works on — a planner's plan, a manager's
restatement of the task or first delegation, an orchestrator's facts sheet. That statement is a restatement of the
run's task, and it is compared with its source like any other restatement: when it holds almost none of what the
task asks for, the team was sent after a different task from the start, and every later step — however faithful —
executes the wrong goal. Its author is responsible (the responsibility boundary "the author of an instruction, not
its faithful executor"), not the agent that finally answered.

The rule, deterministic and deliberately narrow:

* the **opening** is the earliest attribution candidate that is a text step (``message``, ``reasoning``,
  ``planning``) or a delegation (a ``tool_call`` whose string arguments carry an instruction, as a smolagents
  manager delegates to a managed agent; code and the final answer are not delegations), with at least
  :data:`MIN_OPENING_TOKENS` salient tokens — long enough to be a plan or a restatement, so a short first action
  ("Let me look that up", a lookup call) is never judged;
* the opening is compared with the task's **request** (:func:`task_request`): the sentences that ask for something
  — a question, "I need …", "find / compute / report …", the answer format — or the whole task when no sentence
  does. A task often carries context beside its request (a heads-up about an unrelated failure, a figure that
  "checks out", a ticket already answered); a plan that follows the context holds many of the task's words and
  little of what it asks for;
* the request must have at least :data:`MIN_TASK_TOKENS` salient tokens besides the request words themselves
  ("answer", "need", "find" …: every request has them);
* the opening **drifts** when it holds less than :data:`MAX_COVERAGE` of the request's salient tokens.

Only the opening is judged: later steps legitimately narrow the task down to a sub-problem (a debugging turn, a
lookup) and share few of its words. A run whose opening quotes the task verbatim never drifts, whatever follows.

The opposite case is an opening that **restates the task and adds nothing** (:func:`bare_opening`): a text step
holding at least :data:`RESTATES` of the task's words, with no code and no figure the task does not give. That is
the task's prompt — in an Algorithm-Generated log, the manager's "General Task / Plan / Output format /
Constraints" template spoken by the first expert — not a decision; it shares words with every later step and the
first position, so relevance and earliness ranked it first whatever the run did. Graph scales such an opening by
``restatement`` unless a signal of its own (an error, a loop, a changed value, a finding) supports it.

Data: the thresholds were set by reasoning about what a plan is (a plan names what the task asks for; 20 tokens is
a paragraph). On Who&When's dev half (even file numbers) every Algorithm-Generated opening holds either all of the
request's tokens (it quotes the task) or at most 21 % of them (six logs whose manager debugs an unrelated exit
code — each labelled at that opening), and every Hand-Crafted opening (the orchestrator's facts sheet) quotes the
task. On the zoo's tuning half the derailed plans hold 10-33 % of the request (but 39-53 % of the whole task: why
the request is what is compared); no other zoo run has an opening long enough to be judged. A bare opening is found
in 31 of the 63 dev Algorithm-Generated logs (labelled at none of them), in no Hand-Crafted log and in no zoo run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import candidate_steps, content_of
from causaltrace.schema import Run, Step

__all__ = ["MAX_COVERAGE", "MIN_OPENING_TOKENS", "MIN_TASK_TOKENS", "RESTATES", "TaskDrift", "TaskDriftResult",
           "TaskDriftStage", "bare_opening", "find_task_drift", "task_request"]

#: an opening holding less than this share of the request's salient tokens is about another task
MAX_COVERAGE = 0.4
#: an opening needs this many salient tokens to be judged (a plan or a restatement, not a first action)
MIN_OPENING_TOKENS = 20
#: a request needs this many salient tokens (besides the request words) to be compared with
MIN_TASK_TOKENS = 5
#: a step holding this share of the task's salient tokens restates it (relevance's rule too)
RESTATES = 0.8
_TEXT_KINDS = frozenset({"message", "reasoning", "planning"})
#: calls that are not delegations: code a CodeAgent runs, and the final answer
_NOT_DELEGATIONS = frozenset({"python_interpreter", "final_answer"})
#: a sentence that asks for something: a question, a request verb, the answer format
_ASKS = re.compile(r"\?|\b(?:i need|i want|we need|please|find|compute|calculate|count|report|give|answer|tell me|"
                   r"determine|identify|list|provide|return|what|which|how many|how much|who|when|where)\b",
                   re.IGNORECASE)
#: the request words themselves: every request has them, so they tell nothing about what it asks
_REQUEST_WORDS = frozenset({"need", "want", "please", "find", "compute", "calculate", "count", "report", "give",
                            "answer", "tell", "determine", "identify", "list", "provide", "return", "what", "which",
                            "many", "much", "who", "when", "where"})
_SENTENCE = re.compile(r"(?<=[.?!])\s+|\n+")
#: numbers up to this are list numbering and counts of the plan's own steps, not figures a step brings in
_SMALL = 10


@dataclass(frozen=True)
class TaskDrift:
    """The opening that drifted from the task's request, and by how much."""

    index: int
    step_id: str
    shared: int
    task_tokens: int
    examples: tuple[str, ...] = ()

    def describe(self) -> str:
        missing = f" (none of {', '.join(self.examples)}…)" if self.examples and not self.shared else ""
        return (f"opens the run on another task: its plan holds {self.shared} of the {self.task_tokens} salient words "
                f"of what the task asks for{missing}, so every later step executes a different goal (task "
                "derailment)")

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "step_id": self.step_id, "shared": self.shared,
                "task_tokens": self.task_tokens, "examples": list(self.examples)}


def task_request(task: str) -> str:
    """The sentences of ``task`` that ask for something (module docstring), else the whole task."""
    asking = [part for part in _SENTENCE.split(task) if part.strip() and _ASKS.search(part)]
    return " ".join(asking) if asking else task


def find_task_drift(run: Run) -> TaskDrift | None:
    """The run's opening when it drifted from the task's request (module docstring), else None."""
    request = salient_tokens(task_request(_task_text(run))) - _REQUEST_WORDS
    found = _opening(run) if len(request) >= MIN_TASK_TOKENS else None
    if found is None:
        return None
    step, tokens = found
    shared = request & tokens
    if len(shared) >= MAX_COVERAGE * len(request):
        return None
    examples = tuple(sorted((t for t in request - tokens if not t[0].isdigit()), key=lambda t: (-len(t), t))[:3])
    return TaskDrift(step.index, step.step_id, len(shared), len(request), examples)


def bare_opening(run: Run) -> int | None:
    """The run's opening (module docstring) when it restates the task and adds nothing of its own: a text step
    holding at least :data:`RESTATES` of the task's salient tokens, with no code and no figure the task does not give
    (numbers above :data:`_SMALL`: a plan's numbering is not a figure). Such an opening is the task's prompt — a
    manager's restatement with its plan template — not a decision: what it says, the task said (graph's
    ``restatement`` factor). Only the opening: later restatements (an orchestrator restating the task in every
    instruction) come with a decision of their own, what to do next."""
    task = salient_tokens(_task_text(run))
    found = _opening(run) if len(task) >= MIN_TASK_TOKENS else None
    if found is None or found[0].kind not in _TEXT_KINDS:
        return None
    step, tokens = found
    if step.inputs.get("code") or "```" in step.content or len(task & tokens) < RESTATES * len(task):
        return None
    figures = [t for t in tokens - task if t[0].isdigit() and not (t.isdigit() and int(t) <= _SMALL)]
    return None if figures else step.index


def _task_text(run: Run) -> str:
    """The run's task: ``Run.task``, else its first ``task`` step's text."""
    if run.task:
        return run.task
    first = next((s for s in run.steps if s.kind == "task"), None)
    return content_of(first) if first is not None else ""


def _opening_text(step: Step) -> str | None:
    """What an opening candidate says: a text step's content; a delegation's instruction (the string arguments of a
    call that is neither code nor the final answer); None for any other step."""
    if step.kind in _TEXT_KINDS:
        return content_of(step)
    if step.kind == "tool_call" and step.tool_name not in _NOT_DELEGATIONS:
        return " ".join(v for v in (step.arguments or {}).values() if isinstance(v, str))
    return None


def _opening(run: Run) -> tuple[Step, set[str]] | None:
    """The run's opening and its salient tokens: the earliest text step or delegation long enough to be a plan or a
    restatement; None when there is none."""
    kinds = {s.step_id: s.kind for s in run.steps}
    for step in candidate_steps(run):
        text = _opening_text(step)
        if text is None:
            continue
        if step.depends_on and all(kinds.get(d.step_id) in ("code_execution", "tool_response")
                                   for d in step.depends_on):
            continue  # a message that reports what code or a tool returned (an executor's output) plans nothing
        tokens = salient_tokens(text)
        if len(tokens) >= MIN_OPENING_TOKENS:
            return step, tokens
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
