"""``dcfa`` — DCFA (Wang et al.), global causal-inspired attribution (GCA) + local counterfactual enhancement (LCE),
as SEEDS §1 and §7.1–7.2 fix it (the public code, wzhSteve/Dual-view-Causal-driven-Failure-Attribution @ 6355384).

Pipeline (SEEDS §8 stage ids; LLM calls per trace):

================ ======================================== ===========================================================
stage id         calls                                    source
================ ======================================== ===========================================================
``mdi``          1                                        §1.2 GCA 1: minor deviation identification (no question)
``cgc``          1                                        §1.3 GCA 2: one holistic call — causes/effects per step
                                                          under temporality, necessity, sufficiency (SEEDS §7.1)
``hypothesis``   1                                        §1.4 GCA 3: the initial root-cause hypothesis
``success_spec`` 1, only without an answer                §7.2: EMFA's C_success as the LCE target (shared stage)
``correct``      1                                        §1.5 LCE 1: the corrected trace T̂
``simulate``     2 per evaluated candidate                §1.6 LCE 2: "before" and "after" counterfactual outcomes
``search``       0 (deterministic)                        §1.7 LCE 3: bidirectional greedy search, ≤ 5 moves each way
``decide``       1                                        §1.8 LCE 4: decisive error decision (DED)
================ ======================================== ===========================================================

Choices (SEEDS §1 pitfalls and [OPEN] items, written down):

* **Events are steps**: the code's one event per step (``event_{i}_1``) is the step index i here; every schema's
  step fields are enums of the run's candidate steps (content steps that are not user input).
* **Target outcome** (§7.2): the ground-truth answer when ``with_answer`` (the paper's setting); else the run's
  verifier's expected answer when recorded; else EMFA's task-success spec C_success (the shared ``success_spec``
  stage, one call); if that is ablated too, LCE is skipped and the artifact ``lce`` says so (the decision is then
  the hypothesis). The answer line reaches HG, Correct and DED only with ``with_answer``, as in the code.
* **Correct**: the model returns corrected texts for the steps it changes (mistake events and the events whose
  effect on the answer is wrong); other steps keep their text. Counterfactual traces are assembled **by step index**,
  not by list position (pitfall §1.12.2 fixed). The Hand-Crafted variant (a Who&When subset ``hand`` or an
  orchestrator log: its messages address agents) adds the instruction to strip redundant content.
* **Simulate** follows the code: the "after" trace is corrected[:i+1] + original[i+1:], "before" is
  corrected[:i] + original[i:]; the root-cause hint (the candidate and its CGC effects) is given only to "after";
  the target is not shown. ΔS = S(after) − S(before), rounded to 3 decimals.
* **Similarity**: cosine of embeddings from ``embedding_model`` (option, or ``$CAUSALTRACE_EMBEDDING_MODEL``)
  through ``litellm.aembedding`` when configured (the code uses OpenAI ``text-embedding-3-large``); otherwise the
  **lexical fallback**: cosine similarity of bag-of-words vectors (lowercased alphanumeric tokens, numbers kept).
  The artifact ``simulate`` names which was used.
* **Search** (§1.7): the pivot starts at the hypothesis; the upstream walk (the pivot's CGC ``causes``; the code's
  "forward") runs first, then the downstream walk (``effects``); each ≤ ``max_iterations`` = 5 moves; the evaluated
  set is shared between the walks; a candidate is accepted when ΔS > 0 and greater than the best so far, or equal
  and further along the walk (upstream: smaller step, downstream: larger). Candidates are evaluated in step order
  (the code iterates a set: hash order). T^c = the hypothesis + accepted pivots.
* **Decide** (§1.8): the code's bug that keeps only the last candidate step's content is not reproduced: every T^c
  step's content is shown, with its simulation reason and MDI reason. The agent is the step's recorded actor.
* **Ablations**: ``mdi`` → no deviation reasons; ``cgc`` → no graph (nothing to search); ``hypothesis`` → the
  earliest MDI step (else the earliest candidate step); ``correct``, ``simulate`` or ``search`` → no LCE; ``decide`` → the
  hypothesis or, when the search moved, the last accepted pivot.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from causaltrace.attribution.context import Conclusion, DiagnosisContext, Method, Stage
from causaltrace.attribution.judge import output_model, short_text, step_index
from causaltrace.attribution.stages.prompting import (
    SYSTEM_ATTRIBUTION_EXPERT,
    agent_of,
    answer_line,
    candidate_indices,
    clip,
    fit_prompt,
    problem,
    schema_tail,
    steps_or_fail,
)
from causaltrace.attribution.stages.simulation import EMBEDDING_ENV, Evaluation, Similarity, lexical_similarity
from causaltrace.attribution.stages.success_spec import SuccessSpec, SuccessSpecStage
from causaltrace.attribution.stages.view import is_instruction, view_steps
from causaltrace.schema import Candidate, EvidenceItem, Step

#: ``lexical_similarity`` is re-exported: it was this module's (the shared helpers now live in
#: :mod:`causaltrace.attribution.stages.simulation`).
__all__ = ["DCFA", "lexical_similarity"]

_SYSTEM = SYSTEM_ATTRIBUTION_EXPERT


# ---------------------------------------------------------------------------------------------- GCA: MDI


@dataclass
class Deviations:
    """MDI: step → the reason it could be a root cause."""

    reasons: dict[int, str]

    def to_json(self) -> dict[str, Any]:
        return {"mistakes": {str(k): v for k, v in sorted(self.reasons.items())}}


class MDIStage(Stage[Deviations]):
    """``mdi`` — DCFA §1.2 (GCA stage 1, Eq. 1–2; code ``extract_events``): one call over the event log only (no
    question, no ground truth) marks every event that could be a root cause, with a reason, under five criteria;
    the prompt asks for more than one."""

    stage_id: ClassVar[str] = "mdi"
    uses_model: ClassVar[bool] = True

    async def run(self, ctx: DiagnosisContext) -> Deviations:
        steps = steps_or_fail(ctx, "dcfa")
        Item = output_model("MinorDeviation", step=step_index(candidate_indices(ctx)), reason=short_text(400))
        Answer = output_model("MinorDeviations", mistakes=list[Item])  # type: ignore[valid-type]
        frame = ("Below is the event log of a multi-agent system that failed its task, one event per step. Mark EVERY "
                 "event that could be a root cause of the failure, with a detailed reason. Criteria: (1) incorrect, "
                 "outdated or fabricated data; (2) a faulty assumption or shortcut taken after an obstacle (e.g. "
                 "placeholder data); (3) failure of the agent's core function (an error, a page or file that cannot "
                 "be loaded); (4) an unproductive loop or irrelevant action; (5) other. Your answer must contain MORE "
                 "THAN ONE mistake event.\n\nThe event log:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, steps),
                                    Answer)
        return Deviations({m.step: clip(m.reason, 400) for m in answer.mistakes})

    def skipped(self, ctx: DiagnosisContext) -> Deviations:
        return Deviations({})


# ---------------------------------------------------------------------------------------------- GCA: CGC


@dataclass
class CausalGraph:
    """CGC: per step, its label and its (asymmetric) cause and effect lists; edges breaking temporality dropped."""

    nodes: dict[int, dict[str, Any]]  # step -> {"label", "causes", "effects"}
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def causes(self, i: int) -> list[int]:
        return list(self.nodes.get(i, {}).get("causes", []))

    def effects(self, i: int) -> list[int]:
        return list(self.nodes.get(i, {}).get("effects", []))

    def to_json(self) -> dict[str, Any]:
        return {"nodes": {str(k): v for k, v in sorted(self.nodes.items())}, "dropped": self.dropped}


def _mdi_lines(dev: Deviations) -> str:
    return "\n".join(f"- step {i}: {r}" for i, r in sorted(dev.reasons.items())) or "- (none)"


class CGCStage(Stage[CausalGraph]):
    """``cgc`` — DCFA §1.3 (GCA stage 2, Eq. 3–5; code ``discover_intra_agent_causality``): ONE holistic call
    (SEEDS §7.1) labels each event mistake/normal and lists its causes and effects, admitting a link e_i → e_j only
    under temporality (i before j), necessity (without e_i, e_j would not have happened the same way) and
    sufficiency (e_i's content directly affects e_j); mistake→mistake, normal→mistake, mistake→normal stressed."""

    stage_id: ClassVar[str] = "cgc"
    uses_model: ClassVar[bool] = True

    def __init__(self, dev: Deviations) -> None:
        self.dev = dev

    async def run(self, ctx: DiagnosisContext) -> CausalGraph:
        steps = steps_or_fail(ctx, "dcfa")
        idx = [s.index for s in steps]
        Node = output_model("CausalNode", step=step_index(idx), label=Literal["mistake", "normal"],
                            causes=list[step_index(idx)], effects=list[step_index(idx)])  # type: ignore[misc]
        Answer = output_model("CausalGraph", steps=list[Node])  # type: ignore[valid-type]
        frame = ("Below is the event log of a failed multi-agent system and the events flagged as possible mistakes. "
                 "Label every event 'mistake' or 'normal', then build a CAUSAL GRAPH over all events: for each event "
                 "list its causes and its effects. Admit a link e_i → e_j only if (1) temporality: e_i happens "
                 "before e_j; (2) necessity: without e_i, e_j would not have happened the same way; (3) sufficiency: "
                 "e_i's content directly affects e_j. Pay special attention to mistake→mistake, normal→mistake and "
                 "mistake→normal links.\nPossible mistakes:\n" + _mdi_lines(self.dev) + "\n\nThe event log:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, steps),
                                    Answer)
        graph = CausalGraph({})
        for n in answer.steps:
            causes = sorted({c for c in n.causes if c < n.step})
            effects = sorted({e for e in n.effects if e > n.step})
            bad = sorted({c for c in n.causes if c >= n.step} | {e for e in n.effects if e <= n.step})
            if bad:
                graph.dropped.append({"step": n.step, "violating": bad, "why": "temporality"})
            graph.nodes[n.step] = {"label": n.label, "causes": causes, "effects": effects}
        return graph

    def skipped(self, ctx: DiagnosisContext) -> CausalGraph:
        return CausalGraph({})


def _graph_lines(g: CausalGraph, limit: int = 200) -> str:
    lines = [f"- step {i} ({v['label']}): causes {v['causes']}, effects {v['effects']}"
             for i, v in sorted(g.nodes.items())[:limit]]
    return "\n".join(lines) or "- (none)"


# --------------------------------------------------------------------------------------- GCA: hypothesis


@dataclass
class Hypothesis:
    """HG: the initial root-cause step, the wrong answer in the log, and why."""

    step: int
    log_answer: str
    reason: str
    via: str = "llm"

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "log_answer": self.log_answer, "reason": self.reason, "via": self.via}


class HypothesisStage(Stage[Hypothesis]):
    """``hypothesis`` — DCFA §1.4 (GCA stage 3, Eq. 6–7; code ``identify_initial_mistake``): with the question, the
    answer (``with_answer``), the events, MDI and CGC: the responsible agent, its obvious mistakes, their path to
    the wrong answer, and the single root-cause event (upstream non-obvious or downstream decisive)."""

    stage_id: ClassVar[str] = "hypothesis"
    uses_model: ClassVar[bool] = True

    def __init__(self, dev: Deviations, graph: CausalGraph) -> None:
        self.dev, self.graph = dev, graph

    async def run(self, ctx: DiagnosisContext) -> Hypothesis:
        steps = steps_or_fail(ctx, "dcfa")
        agents = sorted({agent_of(s) for s in steps if s.index in set(candidate_indices(ctx))}) or ["unknown"]
        Answer = output_model("RootCauseHypothesis", responsible_agent=Literal[tuple(agents)],  # type: ignore[valid-type]
                              log_answer=short_text(300), step=step_index(candidate_indices(ctx)),
                              reason=short_text(600))
        frame = (f"The question: {problem(ctx)}\n{answer_line(ctx)}A multi-agent system answered it wrongly. Using the "
                 "event log, the possible mistakes and the causal graph: (1) identify the responsible agent; (2) list "
                 "that agent's obvious mistakes; (3) trace them through the graph to the wrong final answer, noting "
                 "mistakes that are isolated or corrected later; (4) pick the single ROOT-CAUSE event — it may be an "
                 "upstream non-obvious error (a flawed assumption, fabricated data, a wrong tool) or a downstream "
                 "decisive error (a wrong calculation or decision made from correct data); prefer the upstream data "
                 "error when a later error only follows from it; (5) explain why. Also give the wrong final answer "
                 "found in the log.\nPossible mistakes:\n" + _mdi_lines(self.dev) + "\nCausal graph:\n"
                 + _graph_lines(self.graph) + "\n\nThe event log:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, steps),
                                    Answer)
        return Hypothesis(answer.step, clip(answer.log_answer, 300), clip(answer.reason, 600))

    def skipped(self, ctx: DiagnosisContext) -> Hypothesis:
        first = min(self.dev.reasons) if self.dev.reasons else candidate_indices(ctx)[0]
        return Hypothesis(first, "", "hypothesis ablated: the earliest flagged step", via="earliest (ablated)")


# ------------------------------------------------------------------------------------------- LCE: correct


@dataclass
class Correction:
    """T̂: corrected texts by step index (unchanged steps absent)."""

    texts: dict[int, str]
    variant: str

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "corrected_steps": sorted(self.texts),
                "texts": {str(k): clip(v, 500) for k, v in sorted(self.texts.items())}}


def _hand_crafted(ctx: DiagnosisContext) -> bool:
    ann = ctx.run.annotations
    if ann is not None and ann.extra.get("subset") == "hand":
        return True
    # an orchestrator log: messages addressed to agents (an importer's ``outputs["target"]``), never a name
    return any(s.kind == "message" and is_instruction(s) for s in view_steps(ctx.run))


class CorrectStage(Stage[Correction]):
    """``correct`` — DCFA §1.5 (LCE stage 1, Eq. 8; code ``correct_event_and_log``): one call corrects every mistake
    event and every event whose downstream effect on the answer is wrong, so the log reaches the target outcome;
    only factual elements change (names, numbers, terms, labels), nothing is added, style and structure stay."""

    stage_id: ClassVar[str] = "correct"
    uses_model: ClassVar[bool] = True

    def __init__(self, dev: Deviations, graph: CausalGraph, target: str) -> None:
        self.dev, self.graph, self.target = dev, graph, target

    async def run(self, ctx: DiagnosisContext) -> Correction:
        steps = steps_or_fail(ctx, "dcfa")
        hand = _hand_crafted(ctx)
        Fix = output_model("CorrectedEvent", step=step_index(candidate_indices(ctx)), text=short_text(2000))
        Answer = output_model("CorrectedLog", corrected=list[Fix])  # type: ignore[valid-type]
        strip = (" Also strip redundant content (code snippets, intermediate calculations, long analysis, partial "
                 "outputs) from the events you rewrite, keeping a 1:1 mapping to the original steps." if hand else "")
        frame = (f"The question: {problem(ctx)}\nThe expected outcome: {self.target}\n\nA multi-agent system failed. "
                 "Correct every mistake event, and every event whose downstream effect on the answer is wrong, so "
                 "that the corrected log reaches the expected outcome. Change only factual elements (names, numbers, "
                 "terms, labels); add nothing; keep style and structure." + strip + " Return the corrected text of "
                 "each event you change (by step); unchanged events are kept as they are.\nPossible mistakes:\n"
                 + _mdi_lines(self.dev) + "\nCausal graph:\n" + _graph_lines(self.graph) + "\n\nThe event log:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, steps),
                                    Answer)
        return Correction({c.step: c.text for c in answer.corrected},
                          "hand-crafted (strip redundancy)" if hand else "algorithm-generated")

    def skipped(self, ctx: DiagnosisContext) -> Correction:
        return Correction({}, "ablated")


# ------------------------------------------------------------------------------- LCE: simulate + search


_Outcome = output_model("SimulatedOutcome", reason=short_text(600), answer=short_text(300))


class Simulator:
    """``simulate`` — DCFA §1.6 (LCE stage 2, Eq. 9–11; code ``calculate_total_effect`` / ``run_simulation``): for
    candidate i, simulate the "before" trace (corrected[:i] + original[i:]) and the "after" trace (corrected[:i+1] +
    original[i+1:], with the root-cause hint) — 2 calls — and score each outcome's similarity to the target."""

    stage_id = "simulate"

    def __init__(self, ctx: DiagnosisContext, corr: Correction, graph: CausalGraph, target: str,
                 sim: Similarity) -> None:
        self.ctx, self.corr, self.graph, self.target, self.sim = ctx, corr, graph, target, sim
        self.evaluations: list[Evaluation] = []

    async def _simulate(self, steps: list[Step], upto: int, hint: str | None) -> Any:
        texts = {s.index: self.corr.texts[s.index] for s in steps if s.index < upto and s.index in self.corr.texts}
        frame = (f"The question: {problem(self.ctx)}\n\nBelow is the log of a multi-agent system, PARTIALLY CORRECTED "
                 "(the root cause and its direct effects may have been fixed). Infer how the rest of the interaction "
                 "should have gone from this point, reconstruct the downstream events, derive the final answer, and "
                 "explain." + (f"\nRoot cause event and its effects: {hint}" if hint else "") + "\n\nThe log:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(_Outcome)

        messages = fit_prompt(self.ctx, _SYSTEM, make, steps, texts=texts)
        return await self.ctx.ask(self.stage_id, messages, _Outcome)

    async def evaluate(self, i: int) -> Evaluation:
        steps = steps_or_fail(self.ctx, "dcfa")
        after: Any = await self._simulate(steps, i + 1, f"step {i} → effects {self.graph.effects(i)}")
        before: Any = await self._simulate(steps, i, None)
        s_after = await self.sim.score(after.answer, self.target)
        s_before = await self.sim.score(before.answer, self.target)
        ev = Evaluation(i, round(s_after - s_before, 3), s_before, s_after, clip(before.answer, 300),
                        clip(after.answer, 300), clip(after.reason, 600))
        self.evaluations.append(ev)
        return ev


@dataclass
class SearchResult:
    """The walks' accepted pivots, and T^c."""

    upstream: list[int]
    downstream: list[int]
    pool: dict[int, str]
    evaluated: list[int]

    def to_json(self) -> dict[str, Any]:
        return {"upstream_pivots": self.upstream, "downstream_pivots": self.downstream, "evaluated": self.evaluated,
                "T_c": sorted(self.pool)}


async def bidirectional_search(hyp: Hypothesis, graph: CausalGraph, sim: Simulator, allowed_steps: set[int],
                               max_iterations: int = 5) -> SearchResult:
    """DCFA §1.7 (LCE stage 3, Eq. 12–13; code ``search_on_direction``): module docstring."""
    history: set[int] = {hyp.step}
    pool: dict[int, str] = {hyp.step: "the initial hypothesis of the global stage; it must be checked "
                                      f"({hyp.reason})"}
    walks: dict[str, list[int]] = {"upstream": [], "downstream": []}
    for direction in ("upstream", "downstream"):
        pivot, best, best_step = hyp.step, 0.0, hyp.step
        for _ in range(max_iterations):
            nxt = graph.causes(pivot) if direction == "upstream" else graph.effects(pivot)
            todo = sorted(c for c in nxt if c not in history and c in allowed_steps)
            if not todo:
                break
            chosen: Evaluation | None = None
            for c in todo:
                history.add(c)
                ev = await sim.evaluate(c)
                further = c < best_step if direction == "upstream" else c > best_step
                if ev.delta > 0 and (ev.delta > best or (ev.delta == best and further)):
                    chosen, best, best_step = ev, ev.delta, c
            if chosen is None:
                break
            pivot = chosen.step
            pool[pivot] = chosen.reason
            walks[direction].append(pivot)
    return SearchResult(walks["upstream"], walks["downstream"], pool, sorted(history - {hyp.step}))


# ---------------------------------------------------------------------------------------------- LCE: DED


class DecideStage(Stage[tuple[int, str]]):
    """``decide`` — DCFA §1.8 (LCE stage 4, Eq. 14; code ``identify_final_mistake``): one call over T^c (each
    step's content, simulation reason and MDI reason) chooses the single causally decisive event."""

    stage_id: ClassVar[str] = "decide"
    uses_model: ClassVar[bool] = True

    def __init__(self, pool: Mapping[int, str], dev: Deviations, fallback: int) -> None:
        self.pool, self.dev, self.fallback = pool, dev, fallback

    async def run(self, ctx: DiagnosisContext) -> tuple[int, str]:
        by_index = {s.index: s for s in steps_or_fail(ctx, "dcfa")}
        ids = sorted(self.pool)
        Answer = output_model("DecisiveError", step=step_index(ids), reason=short_text(800))
        reasons = "\n".join(f"- step {i}: {self.pool[i]}" + (f" | flagged: {self.dev.reasons[i]}"
                                                              if i in self.dev.reasons else "") for i in ids)
        frame = (f"The question: {problem(ctx)}\n{answer_line(ctx)}A multi-agent system answered it wrongly. These "
                 "candidate mistake events were found, with the reasons from counterfactual simulation and from the "
                 f"first screening:\n{reasons}\n\nWork out what each mistake is and its role in the causal chain, "
                 "then choose the single event that is causally DECISIVE for the wrong outcome (an upstream "
                 "non-obvious error or a downstream decisive error), with your reasoning.\n\nThe candidate events:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in ids]),
                                    Answer)
        return answer.step, clip(answer.reason, 800)

    def artifact(self, result: tuple[int, str]) -> Any:
        return {"step": result[0], "reason": result[1]}

    def skipped(self, ctx: DiagnosisContext) -> tuple[int, str]:
        return self.fallback, "decision ablated: the last accepted pivot, else the hypothesis"


# ------------------------------------------------------------------------------------------------ the method


class DCFA(Method):
    """``dcfa``: DCFA as published (module docstring)."""

    name: ClassVar[str] = "dcfa"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("mdi", "cgc", "hypothesis", "success_spec", "correct", "simulate",
                                            "search", "decide")
    llm_stage_ids: ClassVar[tuple[str, ...] | None] = ("mdi", "cgc", "hypothesis", "success_spec", "correct",
                                                       "simulate", "decide")
    default_options: ClassVar[Mapping[str, Any]] = {"max_iterations": 5, "embedding_model": None}

    async def _target(self, ctx: DiagnosisContext) -> tuple[str | None, str]:
        if ctx.answer is not None:
            return str(ctx.answer), "the ground-truth answer (with_answer)"
        verdict = ctx.run.outcome.verdict
        expected = getattr(verdict, "expected", None) if verdict is not None else None
        if expected:
            return str(expected), "the verifier's expected answer"
        if not ctx.enabled("success_spec"):
            ctx.record("success_spec", {"ablated": True})
            return None, "none: no answer, no verifier's expected answer, success_spec ablated"
        spec: SuccessSpec = await ctx.run_stage(SuccessSpecStage())
        return spec.text(), "EMFA's task-success specification C_success"

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        steps = steps_or_fail(ctx, "dcfa")
        by_index = {s.index: s for s in steps}
        dev = await ctx.run_stage(MDIStage())
        graph = await ctx.run_stage(CGCStage(dev))
        hyp = await ctx.run_stage(HypothesisStage(dev, graph))
        target, target_kind = await self._target(ctx)
        pool: dict[int, str] = {hyp.step: f"the initial hypothesis ({hyp.reason})"}
        lce: dict[str, Any] = {"target": clip(target or "", 500), "target_kind": target_kind}
        fallback = hyp.step
        off = [s for s in ("correct", "simulate", "search") if not ctx.enabled(s)]
        if target is None or off:
            lce["skipped"] = ("no target outcome to score simulations against" if target is None
                              else f"{', '.join(off)} ablated")
            for s in off:
                ctx.record(s, {"ablated": True})
        else:
            corr = await ctx.run_stage(CorrectStage(dev, graph, target))
            model = self.options["embedding_model"] or os.environ.get(EMBEDDING_ENV) or None
            sim = Similarity(model)
            simulator = Simulator(ctx, corr, graph, target, sim)
            allowed_steps = set(candidate_indices(ctx))
            result = await bidirectional_search(hyp, graph, simulator, allowed_steps,
                                                int(self.options["max_iterations"]))
            ctx.record("simulate", {"similarity": sim.kind, "embedding_calls": sim.embedding_calls,
                                    "evaluations": [e.to_json() for e in simulator.evaluations]})
            ctx.record("search", result.to_json())
            pool = result.pool
            pivots = result.upstream + result.downstream
            fallback = pivots[-1] if pivots else hyp.step
        ctx.record("lce", lce)
        step_i, reason = await ctx.run_stage(DecideStage(pool, dev, fallback))
        step = by_index[step_i]
        order = [step_i] + [i for i in sorted(pool) if i != step_i]
        candidates = [Candidate(step_id=by_index[i].step_id, index=i, agent=agent_of(by_index[i]),
                                score=1.0 if i == step_i else 0.5, reasons=(clip(pool.get(i, ""), 300),))
                      for i in order if i in by_index]
        evidence = [EvidenceItem(step_id=step.step_id, index=step.index, role="introduced", note=reason)]
        for n, e in enumerate(graph.effects(step_i)[:4]):
            if e in by_index:
                evidence.append(EvidenceItem(step_id=by_index[e].step_id, index=e,
                                             role="exposed" if n == len(graph.effects(step_i)[:4]) - 1 else "carried",
                                             note="a CGC effect of the decisive step"))
        return Conclusion(step_index=step.index, agent=agent_of(step), explanation=reason, evidence=evidence,
                       candidates=candidates, verified_by="prediction")

