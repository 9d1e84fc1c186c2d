"""Predictive replay for runs without a Recording (imported logs): an LLM predicts the corrected run's outcome.

CausalFlow's predictive re-execution (SEEDS.md §4.2.5): the prompt gives the task, the original final answer, the
expected answer when one is known (the verifier's reason or the benchmark's ground truth), the original outcome
(FAILED), the intervened step with one-line summaries of its original and corrected versions, and the summaries of
every step downstream of it; the model answers ``would_succeed`` / ``confidence`` / ``reasoning`` and is told to be
conservative (a cosmetic edit, or one that does not address the root error, does not flip the run). Only
``would_succeed`` decides. Every result says ``verified_by="prediction"``; it never claims a replay.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from causaltrace.exceptions import JudgeError, UserError
from causaltrace.schema import Intervention, Outcome, ReplayResult, Run, StepError

__all__ = ["predict_replay"]


class _Prediction(BaseModel):
    would_succeed: bool
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    reasoning: str = Field(default="", max_length=1200)


def _summary(text: str, width: int = 240) -> str:
    return " ".join(text.split())[:width]


def _prompt(run: Run, intervention: Intervention) -> list[dict[str, str]]:
    step = run.step(intervention.step_id)
    replacement = intervention.replacement
    corrected = replacement if isinstance(replacement, str) else json.dumps(replacement, ensure_ascii=False)
    expected = run.annotations.ground_truth if run.annotations is not None else None
    downstream = [s for s in run.steps if s.index > step.index and s.kind != "agent_turn"]
    lines = [
        f"Task: {run.task or '(unknown)'}",
        f"Original final answer: {run.outcome.final_answer!r}",
        f"Expected: {expected!r}" if expected else f"Why it failed: {run.outcome.reason or 'unknown'}",
        "Original outcome: FAILED",
        f"Intervened step #{step.index} ({step.kind} by {step.agent or '-'}):",
        f"  original:  {_summary(step.content or json.dumps(step.outputs, default=str))}",
        f"  corrected: {_summary(corrected)}",
        "Steps after it in the original run:",
        *[f"  #{s.index} {s.kind} by {s.agent or '-'}: {_summary(s.content, 160)}" for s in downstream[-40:]],
        "Would this correction, and what follows from it, make the run succeed? Be conservative: a cosmetic edit, or "
        "one that does not fix the root error, does NOT flip the run.",
    ]
    return [
        {"role": "system", "content": "You predict the outcome of corrected multi-agent runs. Answer with JSON only."},
        {"role": "user", "content": "\n".join(lines)},
    ]


async def predict_replay(run: Run, intervention: Intervention, *, judge: Any) -> ReplayResult:
    """Predict whether ``intervention`` flips the failed ``run`` (``verified_by="prediction"``)."""
    if judge is None:
        raise UserError(f"run {run.run_id} has no recording: predictive replay needs a model (--model)")
    if intervention.step_id not in {s.step_id for s in run.steps}:
        raise UserError(f"step {intervention.step_id!r} is not a step of run {run.run_id}")
    try:
        answer = await judge.ask(_prompt(run, intervention), _Prediction, stage_id="predict")
    except JudgeError as exc:
        return ReplayResult(
            original_run_id=run.run_id,
            intervention=intervention,
            outcome=Outcome(status="unknown", reason=f"prediction failed: {exc.message}"),
            flipped=False,
            verified_by="prediction",
            replays_run=0,
            error=StepError(type=type(exc).__name__, message=exc.message),
        )
    assert isinstance(answer, _Prediction)
    success = run.outcome.status == "failure" and answer.would_succeed
    return ReplayResult(
        original_run_id=run.run_id,
        intervention=intervention,
        outcome=Outcome(
            status="success" if answer.would_succeed else "failure",
            reason=f"predicted (confidence {answer.confidence:.2f}): {answer.reasoning}",
        ),
        flipped=success,
        verified_by="prediction",
        replays_run=0,
        replays_flipped=0,
    )
