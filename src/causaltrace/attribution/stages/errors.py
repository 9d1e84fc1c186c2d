"""Error-status signals (ARCHITECTURE "The default attribution method" step 3; decision 3 "Honest statuses").

An **error signal** is a step that *exposes* an error: a step with ERROR status or an ``error`` step (live runs), a
tool response with ``is_error``, a code execution with a non-zero exit code, or — for imported logs, whose steps
carry no status — the output of a tool / code-execution terminal whose text reports a failure (``exitcode: 1``, a
Python traceback, ``SomethingError:``, an HTTP 4xx/5xx). Agent messages are never scanned as text (an agent that
*mentions* an error has not failed).

Each signal names:

* the step that **introduced** it — the producer through a request→result edge (``executes``, ``tool_result_of``):
  the code's author or the tool call; failing that, the instruction that asked for the run (``instruction→reply``,
  an addressed message) — or none when the failure is the tool's / environment's own;
* a **category** when the text identifies a system failure (FACTS.md "Error categories", TRAIL's system-execution
  branch): rate limit → ``SYS-RATE-LIMIT``, 401/403 → ``SYS-AUTH``, 404 / missing file → ``SYS-NOT-FOUND``,
  5xx → ``SYS-SERVICE``, timeout → ``SYS-TIMEOUT``, memory / disk / quota → ``SYS-RESOURCE``, missing module or
  command → ``SYS-ENVIRONMENT``, a call that does not fit the tool's signature → ``SYS-TOOL-DEFINITION``; ``None``
  otherwise (a bug in the agent's own code is not a system failure, and no MAST mode is guessed from text);
* whether it was **transient**: the introducing structured call was repeated unchanged by the same agent and got
  its result — the tool's or service's failure, not the call's (issue 20: a recovered retry is no one's fault);
* whether it was **recovered**: a later output of the same tool / terminal succeeded. A recovered error is a weak
  signal — a distractor more often than the decisive error (issue 7's fault suite plants exactly that).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.dependencies import DependencyGraph, DependencyGraphStage
from causaltrace.attribution.stages.loops import call_identity
from causaltrace.attribution.stages.view import agent_of, content_of, is_execution_output, is_terminal, view_steps
from causaltrace.schema import Run, Step

__all__ = ["ErrorSignal", "ErrorSignalsStage", "categorise_error", "detect_error_signals"]

_FAILURE_TEXT = re.compile(
    r"exitcode:\s*[1-9]\d*|execution failed|Traceback \(most recent call last\)|"
    r"^\s*\w*(?:Error|Exception)\b[:\s]|\bHTTP(?:/\d(?:\.\d)?)? [45]\d\d\b|\b[45]\d\d (?:Client|Server) Error\b|"
    r"\bcommand not found\b|\berror:\s",
    re.MULTILINE | re.IGNORECASE,
)
_CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cat, re.compile(rx, re.IGNORECASE))
    for cat, rx in (
        ("SYS-RATE-LIMIT", r"\b429\b|rate.?limit|too many requests|RateLimitError"),
        ("SYS-AUTH", r"\b40[13]\b|unauthori[sz]ed|forbidden|permission denied|invalid api key|authentication"),
        ("SYS-TIMEOUT", r"timed? ?out|TimeoutError|deadline exceeded"),
        ("SYS-RESOURCE", r"MemoryError|out of memory|no space left|disk full|quota exceeded|resource exhausted"),
        ("SYS-ENVIRONMENT", r"ModuleNotFoundError|No module named|ImportError|command not found|not installed"),
        (
            "SYS-TOOL-DEFINITION",
            r"unexpected keyword argument|missing \d+ required (?:positional|keyword)|takes \d+ positional|"
            r"unknown tool|no such tool|invalid tool",
        ),
        ("SYS-NOT-FOUND", r"\b404\b|not found|no such file|FileNotFoundError|does not exist"),
        ("SYS-SERVICE", r"\b50[0-4]\b|service unavailable|internal server error|bad gateway"),
    )
)


def categorise_error(text: str) -> str | None:
    """The system-execution category a failure text identifies, or None."""
    for cat, rx in _CATEGORIES:
        if rx.search(text):
            return cat
    return None


@dataclass(frozen=True)
class ErrorSignal:
    """A step exposing an error, the step that introduced it (if any), its category and whether it was recovered."""

    index: int
    introduced_by: int | None
    category: str | None
    source: str
    message: str
    recovered: bool
    #: the introducing call was repeated UNCHANGED and then got its result: the tool's / service's failure
    transient: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "introduced_by": self.introduced_by,
            "category": self.category,
            "source": self.source,
            "message": self.message,
            "recovered": self.recovered,
            "transient": self.transient,
        }


def _failure(step: Step) -> tuple[str, str] | None:
    """(source, message) when ``step`` exposes an error."""
    if step.status == "error" or step.kind == "error":
        msg = f"{step.error.type}: {step.error.message}" if step.error else content_of(step)
        return "status", msg
    if step.outputs.get("is_error") is True:
        return "tool_error", content_of(step) or str(step.outputs.get("result", ""))
    code = step.outputs.get("exit_code")
    if step.kind == "code_execution" and isinstance(code, int) and code != 0:
        stderr = step.outputs.get("stderr")
        return "exit_code", f"exit code {code}: {stderr if isinstance(stderr, str) else ''}"
    if is_execution_output(step):
        text = content_of(step)
        m = _FAILURE_TEXT.search(text)
        if m:
            start = max(0, m.start() - 80)
            return "text", text[start : m.end() + 220].strip()
    return None


def _channel(step: Step) -> tuple[str, str]:
    if is_terminal(step):
        return ("terminal", "")
    return (step.kind, step.tool_name or agent_of(step))


def detect_error_signals(run: Run, graph: DependencyGraph) -> list[ErrorSignal]:
    """Every error signal of the run, in step order (module docstring)."""
    steps = view_steps(run)
    failing = {s.index: f for s in steps if (f := _failure(s)) is not None}
    succeeded_later: set[tuple[str, str]] = set()
    out: list[ErrorSignal] = []
    for step in reversed(steps):
        if step.index not in failing:
            if is_execution_output(step):
                succeeded_later.add(_channel(step))
            continue
        source, message = failing[step.index]
        producers = graph.producers(step.index, ("executes", "tool_result_of")) or [
            e.producer for e in graph.incoming(step.index) if e.rule == "instruction→reply"
        ]
        introducer = producers[0] if producers else None
        transient = introducer is not None and _retried_identically(run, introducer, failing)
        out.append(
            ErrorSignal(
                index=step.index,
                introduced_by=introducer,
                category=categorise_error(message),
                source=source,
                message=" ".join(message.split())[:400],
                recovered=_channel(step) in succeeded_later,
                transient=transient,
            )
        )
    out.reverse()
    return out


def _retried_identically(run: Run, index: int, failing: dict[int, Any]) -> bool:
    """Whether the structured call at ``index`` was later repeated UNCHANGED by the same agent and that repeat's
    result did not fail: the error was the tool's or the service's (a transient failure), not the call's."""
    call = run.step_at(index)
    identity = call_identity(call)
    if identity is None:
        return False
    for later in run.steps[index + 1 :]:
        if later.agent != call.agent or call_identity(later) != identity:
            continue
        result = next((s for s in run.steps[later.index + 1 : later.index + 4]
                       if s.kind in ("tool_response", "code_execution")), None)
        if result is not None and result.index not in failing and result.status != "error":
            return True
    return False


class ErrorSignalsStage(Stage[list[ErrorSignal]]):
    """Stage ``error_signals`` (deterministic; uses the dependency graph to find who introduced each error)."""

    stage_id: ClassVar[str] = "error_signals"

    async def run(self, ctx: DiagnosisContext) -> list[ErrorSignal]:
        graph = await ctx.run_stage(DependencyGraphStage())
        return detect_error_signals(ctx.run, graph)

    def artifact(self, result: list[ErrorSignal]) -> Any:
        return [s.to_json() for s in result]

    def skipped(self, ctx: DiagnosisContext) -> list[ErrorSignal]:
        return []
