"""The ``graph`` method's LLM stages (ARCHITECTURE "The default attribution method" steps 4–5; issue 6):
segmented candidate recall on top of the deterministic ranking, then one adjudication call.

* ``recall`` (DeFA §3.6's recall, guided): the run is cut by the shared segmenter into segments of at most
  ``segment_fraction`` (50%) of the input budget, protocol pairs kept together. Each segment gets one call showing
  the task, the failure anchor, the deterministic top candidates with their signals (hints), and the segment in
  full; the model returns candidate steps of that segment with reasons. When there are more segments than
  ``max_recall_calls`` (default 8 — with a 128k window a Who&When trace is 1–2 segments), only the segments holding
  the best-ranked deterministic candidates are asked (the artifact lists the ones skipped).
* **Evidence** (issue 20 item 7): both prompts also show, per candidate step, what the deterministic stages found
  (:mod:`~causaltrace.attribution.stages.evidence`: value origins, a changed value, the responsibility boundary,
  the reach to the failure, the loop verdict), within a character budget — ranked steps of the segment first for
  ``recall``, the candidates by rank for ``adjudicate``. It costs no call.
* ``adjudicate``: DeFA's adjudication stage (:class:`~causaltrace.attribution.stages.adjudicate.AdjudicateStage`) over
  the union of the deterministic top ``adjudicate_top`` (10) and the recalled steps, with the dependency edges that
  touch them and every candidate's reasons; the whole trace is the evidence view (fitted to the window).

Calls: ``recall`` = number of segments asked (1 for every Algorithm-Generated trace and most Hand-Crafted ones at
128k), ``adjudicate`` = 1 — at most 2 per Algorithm-Generated trace and ``max_recall_calls`` + 1 in the worst case,
within the issue's targets (≤ 6 / ≤ 10). Ablating ``recall`` adjudicates over the deterministic top candidates;
ablating ``adjudicate`` takes the best-ranked (deterministic rank) of the recalled steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.judge import output_model, short_text, step_index
from causaltrace.attribution.stages.adjudicate import AdjudicateStage, DepEdge
from causaltrace.attribution.stages.dependencies import PROTOCOL_KINDS, DependencyGraph, DependencyGraphStage
from causaltrace.attribution.stages.evidence import EVIDENCE_INTRO, Evidence, evidence_of, rank_order
from causaltrace.attribution.stages.prompting import (
    SYSTEM_DECISIVE_ERROR,
    allowed,
    answer_line,
    candidate_indices,
    clip,
    fit_prompt,
    problem,
    schema_text,
)
from causaltrace.attribution.stages.segment import plan_segments
from causaltrace.attribution.stages.view import view_steps
from causaltrace.schema import Candidate

__all__ = ["Recall", "RecallStage"]

_SYSTEM = SYSTEM_DECISIVE_ERROR


@dataclass
class Recall:
    """Recalled steps with reasons, the segments asked and skipped, the steps whose evidence a prompt showed."""

    steps: dict[int, str]
    asked: list[list[int]]
    skipped: list[list[int]]
    evidence_shown: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"candidates": [{"step": i, "reason": r} for i, r in sorted(self.steps.items())],
                "segments_asked": self.asked, "segments_skipped": self.skipped,
                "evidence_shown": self.evidence_shown}


class RecallStage(Stage[Recall]):
    """``recall`` for ``graph`` (module docstring)."""

    stage_id: ClassVar[str] = "recall"
    uses_model: ClassVar[bool] = True
    memoise: ClassVar[bool] = True

    def __init__(self, ranked: Sequence[Any], anchor: Any, graph: DependencyGraph, *, segment_fraction: float = 0.5,
                 max_calls: int = 8, hints: int = 10, evidence: Evidence | None = None) -> None:
        self.ranked, self.anchor, self.graph = list(ranked), anchor, graph
        self.segment_fraction, self.max_calls, self.hints = segment_fraction, max_calls, hints
        self.evidence = evidence if evidence is not None else Evidence()

    async def run(self, ctx: DiagnosisContext) -> Recall:
        judge = ctx.require_judge()
        steps = view_steps(ctx.run)
        by_index = {s.index: s for s in steps}
        pairs = [(e.producer, e.consumer) for e in self.graph.edges
                 if e.kind in PROTOCOL_KINDS or e.rule not in ("previous message", "explicit")]
        plan = plan_segments(steps, budget_tokens=max(256, int(judge.input_budget * self.segment_fraction)),
                             count=judge.count_tokens, keep_together=pairs, counting=judge.token_counting)
        rank_of = {c.index: n for n, c in enumerate(self.ranked)}
        segments = plan.segments
        if len(segments) > self.max_calls:
            best = sorted(segments, key=lambda s: min((rank_of.get(i, 10**9) for i in s.steps), default=10**9))
            keep = {s.number for s in best[: self.max_calls]}
        else:
            keep = {s.number for s in segments}
        top = self.ranked[: self.hints]
        hints = "\n".join(f"- step {c.index} ({c.agent}), score {c.score:.2f}: {clip('; '.join(c.reasons), 240)}"
                          for c in top) or "- (none)"
        cands = set(candidate_indices(ctx))
        out = Recall({}, [], [])
        for seg in segments:
            if seg.number not in keep:
                out.skipped.append([seg.start, seg.end])
                continue
            out.asked.append([seg.start, seg.end])
            options = allowed([i for i in seg.steps if i in cands], seg.steps)
            order = rank_order(self.ranked, [c.index for c in self.ranked if c.index in set(seg.steps)])
            found = self.evidence.block(order)
            out.evidence_shown = sorted(set(out.evidence_shown) | set(self.evidence.shown(order)))
            Item = output_model("RecalledStep", step=step_index(options), reason=short_text(300))
            Answer = output_model("GraphRecall", candidates=list[Item])  # type: ignore[valid-type]
            frame = (f"The task: {problem(ctx)}\n{answer_line(ctx)}The run FAILED; the failure shows at step "
                     f"{self.anchor.index}: {clip(self.anchor.symptom or '(no verdict recorded)', 300)}\n"
                     "Deterministic analysis ranked these steps first (signals: dependencies, error statuses, loops, "
                     f"backward relevance; hints, may be wrong):\n{hints}\n"
                     + (f"{EVIDENCE_INTRO}\n{found}\n" if found else "")
                     + f"\nRead steps {seg.start}–{seg.end} below "
                     "and list the steps of this part that may have introduced the error behind the failure (a wrong "
                     "or unsupported fact, a faulty plan or instruction, a wrong tool use, an omitted necessary "
                     "action, a result used without checking), each with a reason. Return an empty list if none.\n\n")

            def make(body: str, _f: str = frame, _a: Any = Answer) -> str:
                return f"{_f}{body}\n\nReply with only a JSON object matching this schema: {schema_text(_a)}"

            messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in seg.steps], texts=plan.texts)
            answer: Any = await ctx.ask(self.stage_id, messages, Answer)
            for item in answer.candidates:
                out.steps.setdefault(item.step, clip(item.reason, 300))
        return out

    def skipped(self, ctx: DiagnosisContext) -> Recall:
        return Recall({}, [], [])


async def refine_with_model(ctx: DiagnosisContext, conclusion: Any, ranking: Sequence[Any], anchor: Any,
                            options: Any) -> None:
    """Run ``recall`` and ``adjudicate`` for ``graph`` and update its Conclusion in place (module docstring)."""
    graph = await ctx.run_stage(DependencyGraphStage())
    evidence = await evidence_of(ctx)
    recall = await ctx.run_stage(RecallStage(ranking, anchor, graph, max_calls=int(options["max_recall_calls"]),
                                             evidence=evidence))
    rank_of = {c.index: n for n, c in enumerate(ranking)}
    by_rank = {c.index: c for c in ranking}
    top = [c.index for c in ranking[: int(options["adjudicate_top"])]]
    pool = sorted(set(top) | {i for i in recall.steps if i in by_rank})
    notes = {i: "; ".join(x for x in [recall.steps.get(i, ""), clip("; ".join(by_rank[i].reasons), 240)] if x)
             for i in pool}
    touching = [DepEdge(e.producer, e.consumer, e.kind, e.rule) for e in graph.edges
                if (e.producer in pool or e.consumer in pool) and e.rule != "previous message"]
    if ctx.enabled("adjudicate"):
        found = evidence.block(sorted(pool, key=lambda i: rank_of.get(i, 10**9)))
        verdict = await ctx.run_stage(AdjudicateStage(None, {}, pool, touching, notes, evidence=found))
        step_i, category, explanation = verdict.step, verdict.category, verdict.explanation
    else:
        ctx.record("adjudicate", {"ablated": True})
        recalled = sorted((i for i in recall.steps if i in by_rank), key=lambda i: rank_of[i])
        step_i = recalled[0] if recalled else ranking[0].index
        category, explanation = by_rank[step_i].category, conclusion.explanation
    if not ctx.model_used:
        return
    chosen = by_rank.get(step_i)
    step = ctx.run.step_at(step_i)
    conclusion.step_index = step_i
    conclusion.agent = chosen.agent if chosen is not None else step.agent
    conclusion.category = category if category is not None else (chosen.category if chosen is not None else None)
    conclusion.explanation = explanation
    ordered = [step_i] + [i for i in [c.index for c in ranking] if i != step_i]
    cands = []
    for i in ordered[: int(options["max_candidates"])]:
        c = by_rank.get(i)
        if c is None:
            continue
        reasons = tuple(x for x in [recall.steps.get(i, "")] if x) + tuple(c.reasons)
        cands.append(Candidate(step_id=c.step_id, index=i, agent=c.agent,
                               score=1.0 if i == step_i else round(c.score, 4), reasons=reasons))
    conclusion.candidates = cands
    conclusion.verified_by = "prediction"
