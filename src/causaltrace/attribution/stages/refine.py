"""``graph``'s ``refine`` stage (ARCHITECTURE "The default attribution method" step 5; issue 6): local
counterfactual refinement after adjudication — DCFA's LCE (:mod:`causaltrace.attribution.methods.dcfa` §1.5–1.7)
in its cheapest form, with the same rendering, prompt tail and system message, and the similarity and ΔS record
both share (:mod:`causaltrace.attribution.stages.simulation`).

* **Candidates**: the top ``refine_top`` (2) candidates after adjudication (adjudication's pick first).
* **No ``correct`` call**: the corrected step is a *hypothesis* — adjudication's explanation for its pick, a generic
  "fix this step" for the others. Per candidate i, **one** call shows the log up to and including step i (the steps
  after i are what the model re-simulates), names step i as corrected with the hypothesis, and asks for the run's
  simulated outcome (with what the deterministic stages found about step i — its changed values, the
  responsibility boundary, its reach and loop verdict: :mod:`~causaltrace.attribution.stages.evidence`, issue 20
  item 7 — so a faithful executor's correction is judged as such): ``reason``, ``answer`` (DCFA's ``SimulatedOutcome`` fields) and ``succeeds`` (would the
  corrected run complete the task correctly). As in DCFA's simulate, the expected outcome is not shown.
* **Scoring**: DCFA's :class:`~causaltrace.attribution.stages.simulation.Similarity` (embedding model when
  ``$CAUSALTRACE_EMBEDDING_MODEL`` is set, else the lexical fallback) against the expected outcome: the ground
  truth when ``with_answer``; else the verifier's expected answer or reason; else an already-computed
  ``success_spec`` artifact (never an extra call). ΔS = S(simulated outcome) − S(the run's actual outcome: its final
  answer, else the anchor's symptom), per candidate in the artifact (DCFA's ``Evaluation`` record).
* **Decision**: a candidate is *judged successful* when the model says ``succeeds`` and, when there is an expected
  outcome, ΔS > 0 (DCFA's acceptance test, §1.7). The earliest successful candidate wins (ties → higher S); it may
  overturn adjudication's pick. None successful → adjudication's pick stands.
* **Malformed answer**: like every other LLM stage, an answer that stays invalid after the judge's repairs makes the
  Diagnosis fail (the harness counts it) rather than silently keeping the adjudicated pick.
* **Ablation** (``--ablate refine``): no call; adjudication's pick stands; artifact ``{"ablated": true}``. With
  ``recall`` and ``adjudicate`` both ablated there is no model-made pick to refine: ``refine`` is skipped too (no
  call; artifact ``skipped``), so ``graph`` stays deterministic (``verified_by="heuristic"``).

Calls: ``refine_top`` = 2 per trace (within the issue's ≤ 6 / ≤ 10 budget: recall + adjudicate + refine ≈ 4).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.judge import output_model, short_text
from causaltrace.attribution.stages.evidence import evidence_of
from causaltrace.attribution.stages.prompting import (
    SYSTEM_ATTRIBUTION_EXPERT,
    clip,
    fit_prompt,
    problem,
    schema_tail,
    steps_or_fail,
)
from causaltrace.attribution.stages.simulation import EMBEDDING_ENV, Evaluation, Similarity

__all__ = ["GENERIC_FIX", "Refinement", "RefineStage", "expected_outcome", "refine_conclusion"]

GENERIC_FIX = "fix this step: make it correct, complete and supported by the evidence available at that point"

_Outcome = output_model("CorrectedRunOutcome", reason=short_text(600), answer=short_text(300), succeeds=bool)


def expected_outcome(ctx: DiagnosisContext) -> tuple[str | None, str]:
    """The target the simulated outcomes are scored against, and what it is (module docstring; no model call)."""
    if ctx.answer is not None:
        return str(ctx.answer), "the ground-truth answer (with_answer)"
    verdict = ctx.run.outcome.verdict
    expected = getattr(verdict, "expected", None) if verdict is not None else None
    if expected:
        return str(expected), "the verifier's expected answer"
    if verdict is not None and verdict.reason:
        return verdict.reason, "the verifier's reason"
    spec = ctx.artifacts.get("success_spec")
    if isinstance(spec, dict) and spec.get("expected_outcome"):
        return str(spec["expected_outcome"]), "the task-success specification (already computed)"
    return None, "none: success is the model's judgment alone"


@dataclass
class Refinement:
    """The per-candidate simulations and the step refine settles on (``changed``: it overturned adjudication)."""

    step: int
    adjudicated: int
    target_kind: str
    similarity: str
    evaluations: list[Evaluation] = field(default_factory=list)
    succeeded: dict[int, bool] = field(default_factory=dict)
    hypotheses: dict[int, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.step != self.adjudicated

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "adjudicated": self.adjudicated, "changed": self.changed,
                "target_kind": self.target_kind, "similarity": self.similarity,
                "candidates": [{**e.to_json(), "succeeds": self.succeeded.get(e.step, False),
                                "hypothesis": self.hypotheses.get(e.step, "")} for e in self.evaluations]}


class RefineStage(Stage[Refinement]):
    """``refine`` for ``graph`` (module docstring): one simulated-outcome call per top candidate."""

    stage_id: ClassVar[str] = "refine"
    uses_model: ClassVar[bool] = True
    memoise: ClassVar[bool] = False

    def __init__(self, candidates: Sequence[int], hypotheses: dict[int, str], actual: str,
                 embedding_model: str | None = None, evidence: Mapping[int, str] | None = None) -> None:
        self.candidates, self.hypotheses, self.actual = list(candidates), hypotheses, actual
        self.embedding_model = embedding_model
        self.evidence = dict(evidence or {})

    async def run(self, ctx: DiagnosisContext) -> Refinement:
        steps = steps_or_fail(ctx, "refine")
        target, target_kind = expected_outcome(ctx)
        sim = Similarity(self.embedding_model or os.environ.get(EMBEDDING_ENV) or None)
        out = Refinement(self.candidates[0], self.candidates[0], target_kind,
                         sim.kind if target is not None else "none (no expected outcome)")
        s_actual = await sim.score(self.actual, target) if target is not None else 0.0
        for i in self.candidates:
            hyp = self.hypotheses.get(i) or GENERIC_FIX
            out.hypotheses[i] = clip(hyp, 400)
            frame = (f"The question: {problem(ctx)}\n\nBelow is the log of a multi-agent system that FAILED its task, "
                     f"up to and including step {i}.\nTHE CORRECTED STEP: step {i}. Assume this step was corrected "
                     f"as follows: {clip(hyp, 600)}\n"
                     + (f"What the deterministic stages found about step {i} (evidence, may be wrong): "
                        f"{self.evidence[i]}\n" if self.evidence.get(i) else "")
                     + "Infer how the rest of the interaction would then have gone from "
                     "this point, reconstruct the downstream events, derive the final answer, say whether the "
                     "corrected run would complete the task correctly (succeeds), and explain.\n\nThe log:\n")

            def make(body: str, _f: str = frame) -> str:
                return _f + body + schema_tail(_Outcome)

            shown = [s for s in steps if s.index <= i]
            answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, SYSTEM_ATTRIBUTION_EXPERT, make, shown),
                                        _Outcome)
            s_after = await sim.score(answer.answer, target) if target is not None else 0.0
            ev = Evaluation(i, round(s_after - s_actual, 3), s_actual, s_after, clip(self.actual, 300),
                            clip(answer.answer, 300), clip(answer.reason, 600))
            out.evaluations.append(ev)
            out.succeeded[i] = bool(answer.succeeds) and (target is None or ev.delta > 0)
        won = [e for e in out.evaluations if out.succeeded[e.step]]
        if won:
            out.step = min(won, key=lambda e: (e.step, -e.s_after)).step
        return out

    def skipped(self, ctx: DiagnosisContext) -> Refinement:
        first = self.candidates[0]
        return Refinement(first, first, "ablated", "none")


async def refine_conclusion(ctx: DiagnosisContext, conclusion: Any, ranking: Sequence[Any], anchor: Any,
                         options: Any) -> None:
    """Run ``refine`` for ``graph`` over the conclusion's top candidates and update the Conclusion in place."""
    top = [c.index for c in conclusion.candidates[: int(options["refine_top"])]]
    if not top:
        return
    if ctx.enabled("refine") and not ctx.model_used:  # recall and adjudicate both ablated: graph stays deterministic
        ctx.record("refine", {"skipped": "recall and adjudicate made no model call: no model-made pick to refine"})
        return
    adj = ctx.artifacts.get("adjudicate")
    hypotheses: dict[int, str] = {}
    if isinstance(adj, dict) and adj.get("step") == top[0] and adj.get("explanation"):
        hypotheses[top[0]] = str(adj["explanation"])
    actual = ctx.run.outcome.final_answer or anchor.symptom or f"the run failed at step {anchor.index}"
    evidence = await evidence_of(ctx)
    result = await ctx.run_stage(RefineStage(top, hypotheses, actual, options.get("embedding_model"),
                                             {i: evidence.text(i) for i in top if evidence.of(i)}))
    if not result.changed:
        return
    by_rank = {c.index: c for c in ranking}
    new, old = result.step, result.adjudicated
    ev = next(e for e in result.evaluations if e.step == new)
    chosen = by_rank.get(new)
    conclusion.step_index = new
    conclusion.agent = chosen.agent if chosen is not None else ctx.run.step_at(new).agent
    conclusion.category = chosen.category if chosen is not None else None
    conclusion.explanation = (f"Counterfactual refinement overturned step {old}: with step {new} corrected "
                           f"({result.hypotheses.get(new, GENERIC_FIX)}), the simulated run succeeds "
                           f"(ΔS {ev.delta:+.3f}): {ev.reason}")
    cands = list(conclusion.candidates)
    first = next(c for c in cands if c.index == new)
    rest = [c.model_copy(update={"score": round(by_rank[c.index].score, 4)}) if c.index == old and c.index in by_rank
            else c for c in cands if c.index != new]
    conclusion.candidates = [first.model_copy(update={"score": 1.0})] + rest
