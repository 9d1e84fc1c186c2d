"""Correction proposals for a candidate step: K from an LLM (CausalFlow §4.3) plus the deterministic mutations.

The LLM prompt follows CausalFlow's repair stage (SEEDS.md §4.3): the task, the failure feedback (the verifier's
reason and the errors seen in the run), the step's dependency context (the steps it depends on, summarised), and
the step itself, with the instruction to make the SMALLEST change that fixes this step's own error without
jumping to the final answer. Its answer is validated into the replacement shape the step's kind needs
(ARCHITECTURE "Intervention"). ``K`` calls are made with the same prompt; at temperature 0 identical answers are
deduplicated, so fewer than ``K`` distinct proposals may come back (CausalFlow relies on sampling for diversity;
our default temperature 0.0 stays 0.0 — SEEDS §7.5).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import BaseModel, Field

from causaltrace.exceptions import JudgeError
from causaltrace.replay.edits import original_value, replacement_kind
from causaltrace.replay.mutations import propose_mutations
from causaltrace.schema import Intervention, Run, Step

__all__ = ["llm_proposals", "proposals_for", "replacement_kind"]

logger = logging.getLogger("causaltrace")


class _Proposal(BaseModel):
    corrected: str = Field(description="the corrected text, code, result or JSON arguments of this one step")
    changes_made: str = Field(default="", description="what was changed, in one sentence")


def _summary(step: Step, width: int = 300) -> str:
    text = " ".join((step.content or json.dumps(step.outputs, default=str)).split())
    return f"#{step.index} {step.kind} by {step.agent or '-'}: {text[:width]}"


def _prompt(step: Step, run: Run, kind: str) -> list[dict[str, str]]:
    deps = [run.step(d.step_id) for d in step.depends_on if d.step_id in {s.step_id for s in run.steps}]
    errors = [s for s in run.steps if s.status == "error"]
    what = {
        "code": "the corrected code (the whole code of this step, nothing else)",
        "arguments": "the corrected tool arguments as a JSON object",
        "result": "the corrected tool result",
        "target": f"the agent that should have been chosen, one of {list(run.agents)}",
        "text": "the corrected text of this step",
    }[kind]
    original = original_value(step, kind)
    original_text = original if isinstance(original, str) else json.dumps(original, ensure_ascii=False)
    lines = [
        f"Task: {run.task or '(unknown)'}",
        f"The run FAILED. Final answer: {run.outcome.final_answer!r}. Feedback: {run.outcome.reason or 'none'}",
        "Errors seen in the run: " + ("; ".join(_summary(s, 160) for s in errors[:5]) or "none"),
        "This step depended on:",
        *[f"  {_summary(d)}" for d in deps[-3:]],
        f"The step to correct: #{step.index} {step.kind} by {step.agent or '-'}"
        + (f" (tool {step.tool_name})" if step.tool_name else ""),
        "Original:",
        original_text,
        f"Give {what}. Fix only this step's own error with the smallest possible change; do not jump to the "
        "final answer and do not change anything else.",
    ]
    return [
        {"role": "system", "content": "You debug multi-agent runs. Answer with a JSON object only."},
        {"role": "user", "content": "\n".join(lines)},
    ]


def _parse(corrected: str, kind: str) -> Any:
    if kind == "arguments":
        value = json.loads(corrected)
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value
    return corrected


async def llm_proposals(step: Step, run: Run, judge: Any, *, k: int = 3, stage_id: str = "propose") -> list[Intervention]:
    """Up to ``k`` distinct LLM corrections of ``step`` (an unusable answer is skipped, never guessed)."""
    kind = replacement_kind(step)
    original = original_value(step, kind)
    out: list[Intervention] = []
    seen: set[str] = set()
    for attempt in range(k):
        messages = _prompt(step, run, kind)
        if attempt:
            messages = [*messages, {"role": "user", "content": f"Proposal {attempt + 1} of {k}."}]
        try:
            answer = await judge.ask(messages, _Proposal, stage_id=stage_id)
            replacement = _parse(answer.corrected, kind)  # type: ignore[attr-defined]
        except (JudgeError, ValueError) as exc:
            logger.info("causaltrace: LLM proposal %d for step %d unusable: %s", attempt + 1, step.index, exc)
            continue
        key = json.dumps(replacement, sort_keys=True, default=str)
        if replacement == original or key in seen:
            continue
        seen.add(key)
        out.append(
            Intervention(
                step_id=step.step_id,
                replacement=replacement,
                description=str(getattr(answer, "changes_made", "")) or "LLM correction",
                source="llm",
            )
        )
    return out


async def proposals_for(
    step: Step, run: Run, *, judge: Any = None, k: int = 3, mutation_budget: int = 30, suspicion: Any = None
) -> list[Intervention]:
    """LLM proposals (when a judge is given) then deterministic mutations, deduplicated, most minimal first; with a
    ``suspicion`` (:class:`causaltrace.replay.suspicion.StepSuspicion`, from the run's provenance) the edits of the
    values provenance marks as suspicious for this step come first, ties in that order
    (:func:`~causaltrace.replay.suspicion.suspicious_first`)."""
    from causaltrace.replay.minimality import minimality

    proposals: list[Intervention] = []
    if judge is not None:
        proposals += await llm_proposals(step, run, judge, k=k)
    proposals += propose_mutations(step, run, limit=mutation_budget)
    original = original_value(step, replacement_kind(step))
    unique: dict[str, Intervention] = {}
    for p in proposals:
        unique.setdefault(json.dumps(p.replacement, sort_keys=True, default=str), p)
    ranked = sorted(enumerate(unique.values()), key=lambda item: (-minimality(original, item[1].replacement), item[0]))
    ordered = [p for _, p in ranked]
    if suspicion:
        from causaltrace.replay.suspicion import suspicious_first

        ordered = suspicious_first(ordered, original, replacement_kind(step), suspicion)
    return ordered
