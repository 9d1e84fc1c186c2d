"""CausalFlow's critic / meta-critic consensus on PREDICTED counterfactuals (SEEDS.md §4.4; issue 20 item 8).

On the predictive path — a run with no Recording, whose corrected outcomes a model predicts
(:mod:`causaltrace.replay.predictive`) — a prediction is permissive: a weak or eager predictor says "this would
have succeeded" for steps that were not wrong (SEEDS §4.7.7). CausalFlow's answer for settings without a
deterministic executor is a second opinion: every CRS-flagged step (a step one of whose corrections is predicted to
flip the run) is put to two critics before it counts.

* **Critic** (agent B): given the task, the final and expected answers, the number of steps, the claim ("step i is
  the decisive error; correcting it is predicted to make the run succeed", with its CRS), the step (id, kind,
  author, the steps it depends on, its content), the correction that was predicted to flip the run, and the steps
  after it, it answers ``agreement`` (AGREE / PARTIAL / DISAGREE), ``confidence``, ``reasoning``,
  ``alternative_explanation`` and ``evidence_strength``; it is asked whether the step is really wrong, whether
  fixing it alone would make the run succeed, whether another explanation fits better, and whether the chain to
  the failure is clear — and to challenge a weak claim. Showing the correction is our addition (CausalFlow's
  critique sees the step only); the critic judges the claim the search actually makes.
* **Meta-critic** (agent C) gets the same and the critic's verdict, and gives its own.
* A call that fails (or whose answer stays invalid) counts as DISAGREE with confidence 0, as CausalFlow does.
* **Consensus**, agent A being the CRS itself (:func:`consensus_score`):

  - ``paper`` (the default; §4.3 of the paper): ``(CRS + Σ c_j·a_j) / 3`` with a = 1 for AGREE, 0.5 for PARTIAL,
    0 for DISAGREE;
  - ``code`` (the switch; CausalFlow's code): ``0.33·CRS + Σ 0.33·c_j·[AGREE or PARTIAL]``;

  the step is confirmed when the score is at least ``tau`` (τ_c = 0.5). A flagged step the critics reject is
  dropped: the search goes on to the next step.

Replay-verified results skip the consensus (``confirm_flagged`` returns True without a call), as CausalFlow does
where a deterministic executor exists. The same model answers both critics (CausalFlow uses two other models; we
use the configured one, at the judge's temperature). Both calls are counted under the stage id ``consensus``.

The search hook is :func:`confirm_flagged` (called by :func:`causaltrace.replay.repair.repair` for each flagged
step); :func:`consensus_settings` chooses the formula, τ_c, or switches the stage off for the block (the
``causalflow`` method's ``consensus_formula`` / ``tau_c`` options and ``--ablate consensus``);
``CAUSALTRACE_CONSENSUS_FORMULA=code`` is the switch for commands that take no option (``repair``, ``diagnose``,
``bench``).
"""

from __future__ import annotations

import contextvars
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue

from causaltrace.exceptions import JudgeError, UserError
from causaltrace.schema import Consensus, Critique, Intervention, Run, Step

__all__ = [
    "FORMULAS",
    "FORMULA_ENV",
    "TAU_C",
    "ConsensusSettings",
    "confirm_flagged",
    "consensus_artifact",
    "consensus_score",
    "consensus_settings",
    "critique_step",
    "current_settings",
]

Formula = Literal["paper", "code"]
#: τ_c, the consensus a flagged step needs to be confirmed (SEEDS §4.4.5).
TAU_C = 0.5
#: The weight a_j of each agreement under each formula (module docstring).
FORMULAS: dict[str, dict[str, float]] = {
    "paper": {"AGREE": 1.0, "PARTIAL": 0.5, "DISAGREE": 0.0},
    "code": {"AGREE": 1.0, "PARTIAL": 1.0, "DISAGREE": 0.0},
}
STAGE_ID = "consensus"


@dataclass(frozen=True)
class ConsensusSettings:
    """Which formula, which threshold, and whether the consensus runs at all."""

    formula: Formula = "paper"
    tau: float = TAU_C
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.formula not in FORMULAS:
            raise UserError(f"unknown consensus formula {self.formula!r}; expected one of {sorted(FORMULAS)}")
        if not 0.0 <= self.tau <= 1.0:
            raise UserError(f"the consensus threshold tau_c must be between 0 and 1, got {self.tau}")


_DEFAULT_SETTINGS = ConsensusSettings()
_SETTINGS: contextvars.ContextVar[ConsensusSettings | None] = contextvars.ContextVar(
    "causaltrace_consensus_settings", default=None
)


#: The switch for code and CLI commands that take no consensus option (``repair``, ``diagnose``, ``bench``).
FORMULA_ENV = "CAUSALTRACE_CONSENSUS_FORMULA"


def current_settings() -> ConsensusSettings:
    """The settings in force: :func:`consensus_settings` inside its block, else the paper's formula (or
    ``$CAUSALTRACE_CONSENSUS_FORMULA``, ``paper`` / ``code``) and τ_c = 0.5."""
    settings = _SETTINGS.get()
    if settings is not None:
        return settings
    formula = os.environ.get(FORMULA_ENV, "").strip().lower()
    if not formula or formula == _DEFAULT_SETTINGS.formula:
        return _DEFAULT_SETTINGS
    return ConsensusSettings(formula=formula)  # type: ignore[arg-type]  # an unknown name is a UserError


@contextmanager
def consensus_settings(formula: Formula = "paper", tau: float = TAU_C, enabled: bool = True) -> Iterator[None]:
    """Use this formula and threshold (or no consensus, ``enabled=False``) for predicted flips inside the block."""
    token = _SETTINGS.set(ConsensusSettings(formula=formula, tau=float(tau), enabled=enabled))
    try:
        yield
    finally:
        _SETTINGS.reset(token)


def consensus_score(crs: float, critiques: Sequence[Critique], formula: Formula = "paper") -> float:
    """Agent A (the CRS) plus the critics' confidence-weighted agreement, by ``formula`` (module docstring)."""
    weights = FORMULAS[formula]
    agreed = sum(c.confidence * weights[c.agreement] for c in critiques)
    if formula == "paper":
        return (crs + agreed) / 3.0
    return 0.33 * crs + 0.33 * agreed


class _CritiqueAnswer(BaseModel):
    agreement: Literal["AGREE", "PARTIAL", "DISAGREE"]
    confidence: float = Field(ge=0.0, le=1.0)
    reasoning: str = Field(default="", max_length=1200)
    alternative_explanation: str = Field(default="", max_length=600)
    evidence_strength: Literal["STRONG", "MODERATE", "WEAK"] = "MODERATE"


def _summary(text: str, width: int) -> str:
    return " ".join(text.split())[:width]


def _step_line(step: Step, width: int = 160) -> str:
    content = step.content or json.dumps(step.outputs, default=str, ensure_ascii=False)
    return f"#{step.index} {step.kind} by {step.agent or '-'}: {_summary(content, width)}"


def _prompt(run: Run, step: Step, crs: float, correction: Intervention | None,
            previous: Critique | None) -> list[dict[str, str]]:
    """The critic's prompt (the meta-critic's when ``previous`` is the critic's verdict)."""
    expected = run.annotations.ground_truth if run.annotations is not None else None
    known = {s.step_id: s for s in run.steps}
    deps = [f"#{known[d.step_id].index}" for d in step.depends_on if d.step_id in known]
    downstream = [s for s in run.steps if s.index > step.index and s.kind != "agent_turn"]
    lines = [
        f"Task: {run.task or '(unknown)'}",
        f"Final answer of the run: {run.outcome.final_answer!r}",
        f"Expected answer: {expected!r}" if expected else f"Why the run failed: {run.outcome.reason or 'unknown'}",
        f"The run FAILED. It has {len(run.steps)} steps.",
        f"Claim: step #{step.index} is the decisive error; a correction of it is predicted to make the run succeed "
        f"(causal responsibility score CRS = {crs:g}).",
        f"The step: {_step_line(step, 600)}",
        f"It depends on: {', '.join(deps) or 'no earlier step'}",
    ]
    if correction is not None:
        shown = correction.replacement if isinstance(correction.replacement, str) else json.dumps(
            correction.replacement, default=str, ensure_ascii=False)
        lines.append(f"The correction predicted to flip the run: {_summary(shown, 400)}"
                     + (f" ({correction.description})" if correction.description else ""))
    lines += ["Steps after it:", *[f"  {_step_line(s)}" for s in downstream[-40:]]]
    if previous is not None:
        lines.append(f"A first critic answered {previous.agreement} (confidence {previous.confidence:.2f}): "
                     f"{_summary(previous.reasoning, 400)}"
                     + (f" Alternative: {_summary(previous.alternative_explanation, 200)}"
                        if previous.alternative_explanation else ""))
        lines.append("Review the claim and that verdict; keep it only if the evidence holds.")
    lines.append("Is this step actually wrong? Would correcting it alone make the run succeed? Does another step "
                 "explain the failure better? Is the chain from this step to the failure clear? Challenge a weak "
                 "claim. Answer AGREE, PARTIAL or DISAGREE, with your confidence.")
    role = "a second reviewer of" if previous is not None else "a critic of"
    return [
        {"role": "system", "content": f"You are {role} causal claims about failed multi-agent runs. Answer with "
                                      "JSON only."},
        {"role": "user", "content": "\n".join(lines)},
    ]


async def _one(judge: Any, messages: list[dict[str, str]], role: Literal["critic", "meta_critic"]) -> Critique:
    try:
        answer = await judge.ask(messages, _CritiqueAnswer, stage_id=STAGE_ID)
    except JudgeError as exc:  # CausalFlow: a failed critique is a disagreement with no confidence
        return Critique(role=role, agreement="DISAGREE", confidence=0.0, error=f"{type(exc).__name__}: {exc.message}")
    assert isinstance(answer, _CritiqueAnswer)
    return Critique(role=role, agreement=answer.agreement, confidence=answer.confidence, reasoning=answer.reasoning,
                    alternative_explanation=answer.alternative_explanation,
                    evidence_strength=answer.evidence_strength)


async def critique_step(run: Run, step: Step, *, crs: float, judge: Any, correction: Intervention | None = None,
                        settings: ConsensusSettings | None = None) -> Consensus:
    """Put the claim "``step`` is decisive" to the critic, then the meta-critic; their consensus (2 calls)."""
    settings = settings or current_settings()
    critic = await _one(judge, _prompt(run, step, crs, correction, None), "critic")
    meta = await _one(judge, _prompt(run, step, crs, correction, critic), "meta_critic")
    score = consensus_score(crs, (critic, meta), settings.formula)
    return Consensus(step_id=step.step_id, crs=crs, score=round(score, 4), tau=settings.tau,
                     formula=settings.formula, confirmed=round(score, 9) >= settings.tau, critiques=(critic, meta))


async def confirm_flagged(run: Run, attempt: Any, judge: Any) -> bool:
    """The repair search's hook for a CRS-flagged step (``attempt`` is a ``StepAttempt`` with ``crs == 1``).

    A replay-verified flip (or the consensus switched off) is confirmed without a call. A predicted flip goes to
    the critics; their :class:`~causaltrace.schema.Consensus` is kept on ``attempt.best`` and the step counts only
    when it is confirmed.
    """
    best = getattr(attempt, "best", None)
    settings = current_settings()
    if best is None or best.verified_by != "prediction" or not settings.enabled or judge is None:
        return True
    step = run.step(attempt.step_id)
    verdict = await critique_step(run, step, crs=float(attempt.crs), judge=judge, correction=best.intervention,
                                  settings=settings)
    attempt.best = best.model_copy(update={"consensus": verdict})
    return verdict.confirmed


def consensus_artifact(attempts: Sequence[Any]) -> dict[str, JsonValue]:
    """``{"consensus": {...}}`` for a Diagnosis's artifacts when any flagged step was critiqued (else ``{}``): the
    formula, τ_c and, per critiqued step, its score, whether it was confirmed and both verdicts."""
    verdicts = [a.best.consensus for a in attempts
                if getattr(a, "best", None) is not None and a.best.consensus is not None]
    if not verdicts:
        return {}
    return {"consensus": {
        "formula": verdicts[0].formula,
        "tau": verdicts[0].tau,
        "steps": {v.step_id: v.model_dump(mode="json", exclude={"step_id", "formula", "tau"}) for v in verdicts},
    }}
