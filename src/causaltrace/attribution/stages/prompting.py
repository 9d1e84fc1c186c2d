"""Prompt building shared by the LLM stages of ``defa``, ``emfa``, ``dcfa`` and ``graph`` (issue 6).

Every LLM stage sends some steps of the run in full plus its own frame (task, instructions, schema, summaries,
edges). :func:`fit_prompt` renders the steps with :func:`~causaltrace.attribution.stages.segment.step_line`
(``Step {index} - {speaker}: {text}``, the step's real index so answers map back) and compresses the longest steps
(:func:`~causaltrace.attribution.stages.segment.fit_texts`) until system + frame + steps fit the judge's input
budget — the window minus the answer's room and a margin — so no call exceeds the model's context. What was
compressed is collected in :class:`PromptLog` and lands in the stage's artifact. For a backend that reuses the
evaluated prefix of earlier prompts (``steps_first``: the local llama.cpp model), the same texts go out steps first
(:func:`steps_first_messages`), so stages that show the same steps share that prefix.

Other helpers: the task text (:func:`problem`), the target answer line (:func:`answer_line`, only with
``with_answer``; :func:`task_head` puts the two together), the agent of a step as Who&When labels it
(:func:`agent_of`), the allowed step indices for a schema (:func:`allowed`), the schema line that ends a prompt
(:func:`schema_tail`), the run's steps or a failed method (:func:`steps_or_fail`), the system messages several
stages share (``SYSTEM_*``: one text, so one cache key, wherever it is sent), and :func:`ask` (one structured
call: system + user message).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from causaltrace.attribution.context import DiagnosisContext, MethodFailed
from causaltrace.attribution.judge import json_schema_for
from causaltrace.attribution.stages.segment import compress_text, fit_texts, step_line
from causaltrace.attribution.stages.view import agent_of, candidate_steps, content_of, view_steps
from causaltrace.schema import Step

__all__ = [
    "SYSTEM_ATTRIBUTION_EXPERT",
    "SYSTEM_CAUSING_STEP",
    "SYSTEM_DECISIVE_ERROR",
    "PromptLog",
    "agent_of",
    "allowed",
    "answer_line",
    "ask",
    "candidate_indices",
    "clip",
    "fit_prompt",
    "problem",
    "schema_tail",
    "schema_text",
    "simple_messages",
    "steps_first_messages",
    "steps_or_fail",
    "task_head",
]

#: The system message of ``emfa``'s stages, the shared ``success_spec`` stage and ``graph``'s ``recall``.
SYSTEM_DECISIVE_ERROR = ("You analyse the trajectory of a failed multi-agent system to find the decisive error. You "
                         "answer with a JSON object only.")
#: The system message of ``defa``'s stages and the shared ``adjudicate`` stage.
SYSTEM_CAUSING_STEP = ("You analyse the execution trajectory of a failed multi-agent system to find which step caused "
                       "the failure. You answer with a JSON object only.")
#: The system message of ``dcfa``'s stages and ``graph``'s ``refine``.
SYSTEM_ATTRIBUTION_EXPERT = ("You are an expert in failure attribution for multi-agent systems. You answer with a JSON "
                             "object only.")


def problem(ctx: DiagnosisContext) -> str:
    """The task as recorded (Who&When: the question)."""
    return (ctx.run.task or "").strip() or "(the task was not recorded)"


def answer_line(ctx: DiagnosisContext) -> str:
    """``"The correct answer to the problem is: …"`` when ``with_answer`` is on, else empty."""
    return f"The correct answer to the problem is: {ctx.answer}\n" if ctx.answer is not None else ""


def task_head(ctx: DiagnosisContext) -> str:
    """``"The task: …"`` and, with ``with_answer``, the answer line: how most stage prompts begin."""
    return f"The task: {problem(ctx)}\n{answer_line(ctx)}"


def steps_or_fail(ctx: DiagnosisContext, who: str) -> list[Step]:
    """The run's steps as the stages see them (:func:`~causaltrace.attribution.stages.view.view_steps`); a run
    with none makes ``who`` (a method or stage) fail with :class:`MethodFailed` instead of sending an empty log."""
    steps = view_steps(ctx.run)
    if not steps:
        raise MethodFailed(f"{who}: the run has no steps")
    return steps


def candidate_indices(ctx: DiagnosisContext) -> list[int]:
    """Indices of the attribution candidates (content steps that are not user input); all steps when none."""
    out = [s.index for s in candidate_steps(ctx.run)]
    return out or [s.index for s in view_steps(ctx.run)]


def allowed(indices: Iterable[int], fallback: Iterable[int]) -> list[int]:
    """Sorted distinct ``indices``, or ``fallback`` when empty (a schema enum cannot be empty)."""
    out = sorted(set(indices))
    return out or sorted(set(fallback))


def schema_text(model: type[BaseModel]) -> str:
    """The output model's JSON schema, compact (shown in the prompt as well as sent as ``response_format``)."""
    return json.dumps(json_schema_for(model), separators=(",", ":"))


def schema_tail(model: type[BaseModel]) -> str:
    """The line that ends a stage's prompt: reply with only a JSON object matching the output model's schema."""
    return f"\n\nReply with only a JSON object matching this schema: {schema_text(model)}"


def clip(text: str, n: int) -> str:
    """``text`` on one line, at most ``n`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


@dataclass
class PromptLog:
    """What the prompts of one stage compressed: step index → (tokens before, tokens after), smallest after kept."""

    compressed: dict[int, tuple[int, int]] = field(default_factory=dict)
    max_input_tokens: int = 0

    def add(self, compressed: Mapping[int, tuple[int, int]]) -> None:
        for i, (before, after) in compressed.items():
            prev = self.compressed.get(i)
            self.compressed[i] = (max(before, prev[0]) if prev else before, min(after, prev[1]) if prev else after)

    def to_json(self) -> dict[str, Any]:
        return {str(i): {"tokens_before": a, "tokens_after": b} for i, (a, b) in sorted(self.compressed.items())}


def fit_prompt(
    ctx: DiagnosisContext,
    system: str,
    frame: Callable[[str], str],
    steps: Sequence[Step],
    *,
    texts: Mapping[int, str] | None = None,
    log: PromptLog | None = None,
    render: Callable[[Step, str], str] = step_line,
) -> list[dict[str, str]]:
    """The messages ``[system, user]`` where ``user = frame(rendered steps)``, fitted to the input budget (for a
    backend with ``steps_first``, the same texts in :func:`steps_first_messages`' layout).

    ``texts`` overrides step contents (e.g. DeFA's normalised steps). The frame itself (the text before and after
    the steps) is compressed if it alone would take more than 60% of the budget.
    """
    judge = ctx.require_judge()
    count = _counter(judge)
    budget = judge.input_budget
    head, _, tail = frame(_MARK).partition(_MARK)
    overhead = count(system) + count(head) + count(tail) + 16
    if overhead > budget * 0.6:  # a frame too long on its own (many summaries or edges): cut its two parts
        room = int(budget * 0.45)
        share = max(1, count(head) + count(tail))
        head = compress_text(head, room * count(head) // share, count)
        tail = compress_text(tail, room * count(tail) // share, count)
        overhead = count(system) + count(head) + count(tail) + 16
    src = {s.index: (texts[s.index] if texts and s.index in texts else content_of(s)) for s in steps}
    fitted, compressed = fit_texts(list(steps), budget_tokens=budget, count=count, render=render,
                                   overhead_tokens=overhead, texts=src)
    if log is not None:
        log.add(compressed)
    body = "\n".join(render(s, fitted[s.index]) for s in steps)
    if steps and getattr(judge.backend, "steps_first", False):
        messages = steps_first_messages(system, head, body, tail)
    else:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": head + body + tail}]
    used = judge.count_message_tokens(messages)
    if used > budget:
        raise MethodFailed(f"a prompt of {used} tokens does not fit the input budget of {budget} tokens")
    if log is not None:
        log.max_input_tokens = max(log.max_input_tokens, used)
    return messages


_MARK = "\x00STEPS\x00"
#: The system message of the steps-first layout: the same for every stage and method, so it is part of the prefix.
STEPS_FIRST_SYSTEM = "You analyse the log of a failed multi-agent run. You answer with a JSON object only."
STEPS_FIRST_INTRO = "The steps of the run (your instructions follow in the next message):\n"
STEPS_FIRST_HERE = "(the steps are in the previous message)"


def steps_first_messages(system: str, head: str, body: str, tail: str) -> list[dict[str, str]]:
    """The steps-first layout, for a backend that reuses the evaluated prefix of the previous prompts (a local
    llama.cpp server keeps the KV cache of the prompts it evaluated; ``steps_first = True`` on the backend).

    ``[fixed system, user: the steps, user: the stage's system text + instructions + schema]``: consecutive stages
    that show the same steps — most stages of a method, and the same trace across methods — then share the whole
    prefix up to the instructions, so the server evaluates only the instructions. The texts are those of the usual
    ``[system, user]`` layout; only where the steps stand changes.
    """
    return [
        {"role": "system", "content": STEPS_FIRST_SYSTEM},
        {"role": "user", "content": STEPS_FIRST_INTRO + body},
        {"role": "user", "content": f"{system}\n\n{head}{STEPS_FIRST_HERE}{tail}"},
    ]


_COUNTERS: dict[int, Callable[[str], int]] = {}


def _counter(judge: Any) -> Callable[[str], int]:
    key = id(judge)
    if key not in _COUNTERS:
        if len(_COUNTERS) > 64:
            _COUNTERS.clear()
        _COUNTERS[key] = lru_cache(maxsize=16384)(judge.count_tokens)
    return _COUNTERS[key]


async def ask(
    ctx: DiagnosisContext, stage_id: str, messages: list[dict[str, str]], output: type[BaseModel]
) -> Any:
    """One structured call for ``stage_id`` (counted in ``calls_by_stage``)."""
    return await ctx.ask(stage_id, messages, output)


def simple_messages(system: str, user: str) -> list[dict[str, str]]:
    """``[system, user]``."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
