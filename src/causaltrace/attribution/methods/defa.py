"""``defa`` — DeFA (Deng et al. 2026), dependency-guided failure attribution, as SEEDS §3 and §7.4 fix it.

Pipeline (each a :class:`~causaltrace.attribution.context.Stage` with its SEEDS §8 id; LLM calls per trace):

=================== ===================================== ==========================================================
stage id            calls                                 paper
=================== ===================================== ==========================================================
``normalise``       1 per oversize step                   §3.2 stage 0: compress oversize steps into τ̃
``protocol_rules``  1                                     §3.3 stage 1: LLM-induced rules, deterministic interpreter
``segments``        0 (deterministic)                     §3.4 stage 2: segments under a step and a content budget
``summarise``       M when M > 1 segments                 §3.4: a narrative summary u_j per segment
``semantic_deps``   1 per segment                         §3.5 stage 3: local and cross semantic edges
``recall``          1 per segment                         §3.6 stage 4: candidate records Q_j
``propagation``     1 per segment with candidates         §3.7 stage 5: the failure propagation graph G_f
``adjudicate``      1                                     §3.8 stage 6: t̂ ∈ V_f and its error category
=================== ===================================== ==========================================================

DeFA reports 8.73 calls per Who&When trace (GLM-5.2); with a 128k window an Algorithm-Generated trace is one
segment: ``protocol_rules`` + ``semantic_deps`` + ``recall`` + ``propagation`` + ``adjudicate`` = 5 calls.

Open choices (SEEDS §3 [OPEN], written down here; options of the method where they are numbers):

* **Ground truth**: not used unless ``with_answer`` (the paper does not say; SEEDS §3.1 calls no-answer the closer
  reading).
* **Budgets** (§7.4): a segment holds at most ``segment_fraction`` (25%) of the model's window and at most
  ``max_segment_steps`` (25) steps; a step is *oversize* when its rendered line exceeds ``oversize_fraction`` (50%)
  of the segment budget. Normalisation is one call per oversize step (no batching); the step is first cut
  deterministically to what the call's budget allows (head and tail kept) — an 88k-character step does not fit a
  16k window even on its own — and the model's answer is cut to the oversize limit if it ignores it.
* **Rule schema** (§3.3.4): a rule matches source and target steps on a speaker regex (``fullmatch``; the model
  writes it after reading the log's labels), a content regex (``search``) and "carries a code block"; pairing is
  next-match / all-match / FIFO / LIFO; ``addressed`` requires the target's agent to be the one the source
  addresses (a value the importer gave the step: :func:`causaltrace.collector.protocol_rules.addressee`);
  ``max_gap`` bounds the distance. Unmatched sources and targets are dropped. Rules the interpreter rejects (bad regex, unknown
  relation) are listed in the artifact and skipped. The rule-induction prompt shows the speakers with their counts
  and every step's head (240 characters). Rules run on the original step texts.
* **Cross edges** (§3.5.5): emitted by the earlier segment's call (source in S_j, target a later segment), as the
  paper defines them; incoming uses from earlier segments are the earlier calls' cross edges.
* **Recall**: no cap on the number of candidates; candidate steps are the run's content steps that are not user
  input. **Propagation** is skipped for a segment with no candidate (nothing to trace); its edges may start
  anywhere before their target (upstream sources in earlier segments).
* **Adjudication**: t̂ is constrained to V_f (the schema's enum); the taxonomy Y is causaltrace's error categories
  (MAST + TRAIL, ``causaltrace.schema.ERROR_CATEGORIES``) plus ``other`` — Who&When Pro's taxonomy is not public.
  The agent is the actor recorded at t̂ (§3.1), never the model's.
* **Ablations** (``--ablate``): ``normalise`` → oversize steps are cut deterministically; ``protocol_rules`` → no
  protocol edges; ``summarise`` → other segments are shown by their step ranges only; ``semantic_deps`` → only
  protocol edges; ``recall`` → every candidate step of a segment is a candidate; ``propagation`` → V_f = C, no
  propagation edges; ``adjudicate`` → the earliest step of V_f.

The Diagnosis carries every stage's artifact (rules and pairings, compressed steps, segments, summaries, edges,
candidates with reasons, the propagation graph, the adjudication) and ``verified_by="prediction"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from causaltrace.attribution.context import Conclusion, DiagnosisContext, Method, MethodFailed, Stage
from causaltrace.attribution.judge import output_model, short_text, step_index
from causaltrace.attribution.stages.adjudicate import AdjudicateStage, DepEdge, edge_lines
from causaltrace.attribution.stages.dependencies import Edge, ProtocolRule, interpret_rules
from causaltrace.attribution.stages.prompting import (
    SYSTEM_CAUSING_STEP,
    agent_of,
    allowed,
    candidate_indices,
    clip,
    fit_prompt,
    schema_text,
    steps_or_fail,
    task_head,
)
from causaltrace.attribution.stages.segment import Segment, compress_text, plan_segments, step_line
from causaltrace.attribution.stages.view import content_of, speaker
from causaltrace.schema import DEPENDENCY_KINDS, Candidate, EvidenceItem, Step

#: ``AdjudicateStage`` is re-exported: it was this module's (it now lives in
#: :mod:`causaltrace.attribution.stages.adjudicate`, shared with ``graph``).
__all__ = [
    "AdjudicateStage",
    "DeFA",
    "NormaliseStage",
    "PropagationStage",
    "ProtocolRulesStage",
    "RecallStage",
    "SegmentsStage",
    "SemanticDepsStage",
    "SummariseStage",
]

_SYSTEM = SYSTEM_CAUSING_STEP


# ------------------------------------------------------------------------------------------- stage 0: normalise


@dataclass
class Normalised:
    """τ̃: step index → text (only the compressed steps), and the segment budget they were sized for."""

    texts: dict[int, str]
    budget_tokens: int
    compressed: dict[int, tuple[int, int]] = field(default_factory=dict)
    via: str = "llm"

    def to_json(self) -> dict[str, Any]:
        return {"segment_budget_tokens": self.budget_tokens, "via": self.via,
                "compressed_steps": {str(i): {"tokens_before": a, "tokens_after": b}
                                     for i, (a, b) in sorted(self.compressed.items())}}


def _segment_budget(ctx: DiagnosisContext, fraction: float) -> int:
    judge = ctx.require_judge()
    return max(256, min(int(judge.context_window * fraction), judge.input_budget))


class NormaliseStage(Stage[Normalised]):
    """``normalise`` — DeFA §3.2 (stage 0): an LLM compresses each oversize step, keeping facts, provenance, action
    status, the step id and the actor (one call per oversize step; module docstring for the threshold)."""

    stage_id: ClassVar[str] = "normalise"
    uses_model: ClassVar[bool] = True

    def __init__(self, segment_fraction: float, oversize_fraction: float) -> None:
        self.segment_fraction = segment_fraction
        self.oversize_fraction = oversize_fraction

    def _oversize(self, ctx: DiagnosisContext) -> tuple[int, list[tuple[Step, int]]]:
        judge = ctx.require_judge()
        budget = _segment_budget(ctx, self.segment_fraction)
        limit = max(16, int(budget * self.oversize_fraction))
        out = []
        for s in steps_or_fail(ctx, "defa"):
            size = judge.count_tokens(step_line(s, content_of(s)))
            if size > limit:
                out.append((s, size))
        return limit, out

    async def run(self, ctx: DiagnosisContext) -> Normalised:
        judge = ctx.require_judge()
        limit, oversize = self._oversize(ctx)
        result = Normalised({}, _segment_budget(ctx, self.segment_fraction))
        for step, size in oversize:
            target_chars = max(200, (limit - 40) * 3)  # ~3 characters per token leaves room for the frame
            Answer = output_model("NormalisedStep", step=step_index([step.index]),
                                  compressed=short_text(target_chars))
            frame = (f"{task_head(ctx)}Step {step.index} of the trajectory, by {speaker(step) or step.kind}, is too long "
                     "to analyse as it is. Compress it: keep every fact, number, name, URL, file name, the provenance "
                     "of information (who or which tool produced it) and the status of each action (succeeded, "
                     "failed, pending); drop repetition, boilerplate and page chrome. Keep the step id and the actor."
                     f" At most {target_chars} characters.\n\nThe step:\n")

            def make(body: str, _f: str = frame, _a: Any = Answer) -> str:
                return f"{_f}{body}\n\nReply with only a JSON object matching this schema: {schema_text(_a)}"

            messages = fit_prompt(ctx, _SYSTEM, make, [step])
            answer: Any = await ctx.ask(self.stage_id, messages, Answer)
            text = answer.compressed
            if judge.count_tokens(step_line(step, text)) > limit:
                text = compress_text(text, max(16, limit - judge.count_tokens(step_line(step, ""))), judge.count_tokens)
            result.texts[step.index] = text
            result.compressed[step.index] = (size, judge.count_tokens(step_line(step, text)))
        return result

    def skipped(self, ctx: DiagnosisContext) -> Normalised:
        return Normalised({}, _segment_budget(ctx, self.segment_fraction), via="deterministic (ablated)")


# ------------------------------------------------------------------------------------- stage 1: protocol rules


@dataclass
class ProtocolRelations:
    """The induced rules, the rules the interpreter rejected, and the edges E_p it produced."""

    rules: list[ProtocolRule]
    rejected: list[dict[str, Any]]
    edges: list[Edge]

    def to_json(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules], "rejected": self.rejected,
                "pairings": [e.to_json() for e in self.edges]}


_MATCH = output_model(
    "StepCondition",
    speaker=(str | None, None),
    content=(str | None, None),
    has_code=(bool | None, None),
)
_RULE = output_model(
    "InducedRule",
    name=str,
    source=_MATCH,
    target=_MATCH,
    pairing=Literal["next", "all", "fifo", "lifo"],
    relation=Literal[tuple(sorted(DEPENDENCY_KINDS))],  # type: ignore[valid-type]
    addressed=bool,
    max_gap=(int | None, None),
)
_RULES = output_model("InducedRules", rules=list[_RULE])  # type: ignore[valid-type]


class ProtocolRulesStage(Stage[ProtocolRelations]):
    """``protocol_rules`` — DeFA §3.3 (stage 1): one call induces protocol rules from roles, formats and interaction
    patterns; the deterministic interpreter (:func:`~causaltrace.attribution.stages.dependencies.interpret_rules`,
    shared with the ``dependency_graph`` stage) pairs sources and targets by next-match / all-match / FIFO / LIFO."""

    stage_id: ClassVar[str] = "protocol_rules"
    uses_model: ClassVar[bool] = True

    async def run(self, ctx: DiagnosisContext) -> ProtocolRelations:
        steps = steps_or_fail(ctx, "defa")
        counts: dict[str, int] = {}
        for s in steps:
            counts[speaker(s) or s.kind] = counts.get(speaker(s) or s.kind, 0) + 1
        speakers = "\n".join(f"- {name!r}: {n} step(s)" for name, n in counts.items())
        frame = (
            f"{task_head(ctx)}Below are the speakers of a multi-agent trajectory and the beginning of each of its steps. "
            "Induce the PROTOCOL RULES of this system: recurring structural relations between a source step and a "
            "later target step that follow from message roles, formats and interaction patterns (e.g. a message "
            "with a code block → the next code-execution output; an instruction to an agent → that agent's next "
            "reply; a tool request → its result; a plan → the instruction that carries it out).\n"
            "Each rule has: a source condition and a target condition (speaker: a Python regular expression the "
            "whole speaker label must match; content: a regular expression searched in the text; has_code: the "
            "step carries a code block; null = any), a pairing mode — 'next' (the source pairs with the first "
            "later matching target), 'all' (with every later matching target), 'fifo' (pending sources queue; each "
            "target takes the oldest), 'lifo' (pending sources stack; each target takes the newest: nested calls) "
            "—, the relation it creates, 'addressed' (the target must be the agent the source step addresses: an "
            "instruction, handoff or selection naming that agent), and max_gap (the largest distance in steps, or "
            "null).\n\n"
            f"Speakers:\n{speakers}\n\nThe steps (heads only):\n"
        )
        heads = {s.index: clip(content_of(s), 240) for s in steps}

        def make(body: str) -> str:
            return f"{frame}{body}\n\nReply with only a JSON object matching this schema: {schema_text(_RULES)}"

        messages = fit_prompt(ctx, _SYSTEM, make, steps, texts=heads)
        answer: Any = await ctx.ask(self.stage_id, messages, _RULES)
        rules: list[ProtocolRule] = []
        rejected: list[dict[str, Any]] = []
        for n, r in enumerate(answer.rules):
            data = {"name": r.name or f"rule {n}", "source": _cond(r.source), "target": _cond(r.target),
                    "pairing": r.pairing, "kind": r.relation, "addressed": r.addressed, "max_gap": r.max_gap}
            try:
                for cond in (data["source"], data["target"]):
                    for key in ("speaker", "content"):
                        if cond.get(key) is not None:
                            re.compile(cond[key])
                rules.append(ProtocolRule.from_json(data))
            except (re.error, ValueError, TypeError) as exc:
                rejected.append({"rule": data, "why": str(exc)[:200]})
        edges = interpret_rules(steps, rules)
        edges = sorted({(e.producer, e.consumer, e.kind, e.rule): e for e in edges
                        if e.producer < e.consumer}.values(), key=lambda e: (e.consumer, e.producer))
        return ProtocolRelations(rules, rejected, edges)

    def skipped(self, ctx: DiagnosisContext) -> ProtocolRelations:
        return ProtocolRelations([], [], [])


def _cond(c: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.speaker:
        out["speaker"] = c.speaker
    if c.content:
        out["content"] = c.content
    if c.has_code is not None:
        out["has_code"] = c.has_code
    return out


# ------------------------------------------------------------------------------- stage 2: segments, summaries


@dataclass
class Segmentation:
    """The segments of τ̃ and the texts to render."""

    segments: list[Segment]
    texts: dict[int, str]
    budget_tokens: int
    compressed: dict[int, tuple[int, int]]

    def segment_of(self, index: int) -> int:
        for seg in self.segments:
            if index in seg.steps:
                return seg.number
        return -1

    def to_json(self) -> dict[str, Any]:
        return {"budget_tokens": self.budget_tokens, "segments": [s.to_json() for s in self.segments],
                "compressed_deterministically": {str(i): {"tokens_before": a, "tokens_after": b}
                                                 for i, (a, b) in sorted(self.compressed.items())}}


class SegmentsStage(Stage[Segmentation]):
    """``segments`` — DeFA §3.4 (stage 2): consecutive segments under a step budget and a content budget, boundaries
    moved so protocol-related steps stay together (the shared segmenter,
    :func:`~causaltrace.attribution.stages.segment.plan_segments`); deterministic."""

    stage_id: ClassVar[str] = "segments"

    def __init__(self, normalised: Normalised, protocol: ProtocolRelations, max_steps: int, oversize: float) -> None:
        self.normalised, self.protocol, self.max_steps, self.oversize = normalised, protocol, max_steps, oversize

    async def run(self, ctx: DiagnosisContext) -> Segmentation:
        judge = ctx.require_judge()
        plan = plan_segments(steps_or_fail(ctx, "defa"), budget_tokens=self.normalised.budget_tokens, count=judge.count_tokens,
                             max_steps=self.max_steps, oversize_fraction=self.oversize,
                             keep_together=[(e.producer, e.consumer) for e in self.protocol.edges],
                             texts=self.normalised.texts, counting=judge.token_counting)
        return Segmentation(plan.segments, plan.texts, plan.budget_tokens, plan.compressed)

    def skipped(self, ctx: DiagnosisContext) -> Segmentation:
        raise MethodFailed("defa cannot run without its segments stage")


_SUMMARY = output_model("SegmentSummary", summary=short_text(1200))


class SummariseStage(Stage[dict[int, str]]):
    """``summarise`` — DeFA §3.4: when M > 1, one narrative summary u_j per segment (one call each) that keeps the
    step range, the key facts and values, and who produced them (SEEDS §3.4.2's choice)."""

    stage_id: ClassVar[str] = "summarise"
    uses_model: ClassVar[bool] = True

    def __init__(self, seg: Segmentation) -> None:
        self.seg = seg

    async def run(self, ctx: DiagnosisContext) -> dict[int, str]:
        if len(self.seg.segments) < 2:
            return {}
        by_index = {s.index: s for s in steps_or_fail(ctx, "defa")}
        out: dict[int, str] = {}
        for seg in self.seg.segments:
            frame = (f"{task_head(ctx)}Summarise steps {seg.start}–{seg.end} of the trajectory below in at most 1200 "
                     "characters: what the agents did, the key facts, numbers and values they obtained or used (with "
                     "the step numbers where they appear), decisions taken, and errors or open problems.\n\n")

            def make(body: str, _f: str = frame) -> str:
                return f"{_f}{body}\n\nReply with only a JSON object matching this schema: {schema_text(_SUMMARY)}"

            messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in seg.steps], texts=self.seg.texts)
            answer: Any = await ctx.ask(self.stage_id, messages, _SUMMARY)
            out[seg.number] = clip(answer.summary, 1200)
        return out

    def artifact(self, result: dict[int, str]) -> Any:
        return {str(k): v for k, v in result.items()}

    def skipped(self, ctx: DiagnosisContext) -> dict[int, str]:
        return {}


def _view(ctx: DiagnosisContext, seg: Segmentation, summaries: Mapping[int, str], j: int) -> tuple[str, str]:
    """V_j around the segment's steps: (text before, text after) — summaries of earlier and later segments."""
    before, after = [], []
    for other in seg.segments:
        if other.number == j:
            continue
        line = f"Segment {other.number} (steps {other.start}–{other.end}): " + summaries.get(
            other.number, "(summary not available)")
        (before if other.number < j else after).append(line)
    cur = seg.segments[j]
    head = ""
    if before:
        head += "Summaries of the earlier segments:\n" + "\n".join(before) + "\n\n"
    head += f"Segment {j} (steps {cur.start}–{cur.end}), in full:\n"
    tail = ("\n\nSummaries of the later segments:\n" + "\n".join(after)) if after else ""
    return head, tail


# ----------------------------------------------------------------------------------- stage 3: semantic deps


@dataclass
class EdgeSet:
    """Edges with the ones dropped for breaking the constraints (forward only, endpoints where allowed)."""

    edges: list[DepEdge] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"edges": [e.to_json() for e in self.edges], "dropped": self.dropped}


def _edge_models(name: str, seg_steps: list[int], sources: list[int], later: list[int]) -> Any:
    local = output_model(f"{name}Edge", source=step_index(sources), target=step_index(seg_steps),
                         explanation=short_text(300))
    fields: dict[str, Any] = {"edges": list[local]}  # type: ignore[valid-type]
    if later:
        cross = output_model(f"{name}Cross", source=step_index(seg_steps),
                             target_segment=Literal[tuple(later)],  # type: ignore[valid-type]
                             explanation=short_text(300))
        fields["cross"] = (list[cross], [])  # type: ignore[valid-type]
    return output_model(name, **fields)


def _collect(answer: Any, kind: str, seg_steps: set[int], out: EdgeSet, *, source_anywhere: bool) -> None:
    for e in answer.edges:
        if e.source >= e.target or (not source_anywhere and e.source not in seg_steps) or e.target not in seg_steps:
            out.dropped.append({"source": e.source, "target": e.target, "why": "not a forward edge into the segment"})
            continue
        out.edges.append(DepEdge(e.source, e.target, kind, clip(e.explanation, 300)))
    for c in getattr(answer, "cross", []) or []:
        out.edges.append(DepEdge(c.source, None, f"{kind}_cross", clip(c.explanation, 300), segment=c.target_segment))


def _touching(edges: list[DepEdge], seg: Segment) -> list[DepEdge]:
    """G_c^(j): step-to-step edges with an endpoint in S_j, plus cross edges from S_j or into S_j."""
    inside = set(seg.steps)
    return [e for e in edges if e.source in inside or (e.target is not None and e.target in inside)
            or e.segment == seg.number]


class SemanticDepsStage(Stage[EdgeSet]):
    """``semantic_deps`` — DeFA §3.5 (stage 3): one call per segment over V_j and the protocol edges; local edges
    (both ends in S_j) and cross edges (S_j → a later segment), each with what was supplied and how it was used."""

    stage_id: ClassVar[str] = "semantic_deps"
    uses_model: ClassVar[bool] = True

    def __init__(self, seg: Segmentation, summaries: Mapping[int, str], protocol: ProtocolRelations) -> None:
        self.seg, self.summaries, self.protocol = seg, summaries, protocol

    async def run(self, ctx: DiagnosisContext) -> EdgeSet:
        by_index = {s.index: s for s in steps_or_fail(ctx, "defa")}
        out = EdgeSet()
        proto = [DepEdge(e.producer, e.consumer, f"protocol:{e.kind}", e.rule) for e in self.protocol.edges]
        for seg in self.seg.segments:
            later = [s.number for s in self.seg.segments if s.number > seg.number]
            Answer = _edge_models("SemanticDeps", seg.steps, seg.steps, later)
            head, tail = _view(ctx, self.seg, self.summaries, seg.number)
            relevant = _touching(proto, seg)
            frame = (f"{task_head(ctx)}Find the SEMANTIC DEPENDENCIES of the steps of segment {seg.number}: where a step "
                     "directly uses earlier content, instructions, results or state. For each edge say what the "
                     "source supplied and how the target used it. 'edges' are local (both steps in this segment, "
                     "source before target)" + ("; 'cross' edges go from a step of this segment to a LATER segment "
                                               "whose summary shows the information was still used" if later else "")
                     + ".\nProtocol relations already known:\n" + edge_lines(relevant) + "\n\n" + head)

            def make(body: str, _f: str = frame, _t: str = tail, _a: Any = Answer) -> str:
                return f"{_f}{body}{_t}\n\nReply with only a JSON object matching this schema: {schema_text(_a)}"

            messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in seg.steps], texts=self.seg.texts)
            answer: Any = await ctx.ask(self.stage_id, messages, Answer)
            _collect(answer, "semantic", set(seg.steps), out, source_anywhere=False)
        return out

    def skipped(self, ctx: DiagnosisContext) -> EdgeSet:
        return EdgeSet()


# ------------------------------------------------------------------------------------------ stage 4: recall


@dataclass
class Recalled:
    """Candidate records Q_j per segment: step → (action, link to the failure)."""

    by_segment: dict[int, dict[int, tuple[str, str]]]
    via: str = "llm"

    @property
    def steps(self) -> list[int]:
        return sorted({i for recs in self.by_segment.values() for i in recs})

    def record(self, index: int) -> tuple[str, str] | None:
        for recs in self.by_segment.values():
            if index in recs:
                return recs[index]
        return None

    def to_json(self) -> dict[str, Any]:
        return {"via": self.via, "candidates": [
            {"step": i, "segment": j, "action": a, "link": link}
            for j, recs in sorted(self.by_segment.items()) for i, (a, link) in sorted(recs.items())]}


class RecallStage(Stage[Recalled]):
    """``recall`` — DeFA §3.6 (stage 4): one call per segment examines every step of S_j with V_j and G_c^(j) and
    returns candidate records (step, what it did, its possible link to the failure); C is their union."""

    stage_id: ClassVar[str] = "recall"
    uses_model: ClassVar[bool] = True

    def __init__(self, seg: Segmentation, summaries: Mapping[int, str], graph: list[DepEdge]) -> None:
        self.seg, self.summaries, self.graph = seg, summaries, graph

    async def run(self, ctx: DiagnosisContext) -> Recalled:
        by_index = {s.index: s for s in steps_or_fail(ctx, "defa")}
        cands = set(candidate_indices(ctx))
        out = Recalled({})
        for seg in self.seg.segments:
            allowed_steps = allowed([i for i in seg.steps if i in cands], seg.steps)
            Record = output_model("CandidateRecord", step=step_index(allowed_steps), action=short_text(300),
                                  link=short_text(400))
            Answer = output_model("CandidateRecall", candidates=list[Record])  # type: ignore[valid-type]
            head, tail = _view(ctx, self.seg, self.summaries, seg.number)
            frame = (f"{task_head(ctx)}The task FAILED. Examine EVERY step of segment {seg.number} and recall the "
                     "candidate steps that may have caused or contributed to the failure: a conflict with the task's "
                     "requirements, a wrong or unsupported fact, a wrong tool use, an omitted necessary operation, "
                     "an instruction that misled others, a result used without checking. For each give the step, "
                     "what it did, and its possible link to the failure. Dependencies:\n"
                     + edge_lines(_touching(self.graph, seg)) + "\n\n" + head)

            def make(body: str, _f: str = frame, _t: str = tail, _a: Any = Answer) -> str:
                return f"{_f}{body}{_t}\n\nReply with only a JSON object matching this schema: {schema_text(_a)}"

            messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in seg.steps], texts=self.seg.texts)
            answer: Any = await ctx.ask(self.stage_id, messages, Answer)
            out.by_segment[seg.number] = {r.step: (clip(r.action, 300), clip(r.link, 400)) for r in answer.candidates}
        return out

    def skipped(self, ctx: DiagnosisContext) -> Recalled:
        cands = set(candidate_indices(ctx))
        return Recalled({seg.number: {i: ("", "") for i in seg.steps if i in cands} for seg in self.seg.segments},
                        via="every candidate step (recall ablated)")


# ------------------------------------------------------------------------------------- stage 5: propagation


@dataclass
class Propagation:
    """G_f: exact (step → step) and cross (step → later segment) propagation edges, and V_f."""

    edges: EdgeSet
    nodes: list[int]

    def to_json(self) -> dict[str, Any]:
        return {**self.edges.to_json(), "V_f": self.nodes}


class PropagationStage(Stage[Propagation]):
    """``propagation`` — DeFA §3.7 (stage 5): one call per segment with candidates traces each candidate's upstream
    sources and downstream continuation, amplification or correction, selecting edges of G_c or adding new ones;
    V_f = C ∪ endpoints(E_f^exact) ∪ sources(E_f^cross)."""

    stage_id: ClassVar[str] = "propagation"
    uses_model: ClassVar[bool] = True

    def __init__(self, seg: Segmentation, summaries: Mapping[int, str], graph: list[DepEdge],
                 recalled: Recalled) -> None:
        self.seg, self.summaries, self.graph, self.recalled = seg, summaries, graph, recalled

    async def run(self, ctx: DiagnosisContext) -> Propagation:
        steps = steps_or_fail(ctx, "defa")
        by_index = {s.index: s for s in steps}
        all_idx = [s.index for s in steps]
        out = EdgeSet()
        for seg in self.seg.segments:
            recs = self.recalled.by_segment.get(seg.number) or {}
            if not recs:
                continue
            later = [s.number for s in self.seg.segments if s.number > seg.number]
            Answer = _edge_models("Propagation", seg.steps, [i for i in all_idx if i <= seg.end], later)
            head, tail = _view(ctx, self.seg, self.summaries, seg.number)
            cand_lines = "\n".join(f"- step {i}: {a} — {link}" for i, (a, link) in sorted(recs.items()))
            frame = (f"{task_head(ctx)}Build the FAILURE PROPAGATION GRAPH around the candidate steps of segment "
                     f"{seg.number}. For each candidate trace its upstream sources (steps whose errors it took over) "
                     "and its downstream continuation, amplification or correction. Select edges from the "
                     "dependencies below or add new ones from the trajectory's evidence, each with an explanation. "
                     "'edges' go from a step (this segment or earlier) to a step of this segment"
                     + ("; 'cross' edges go from a step of this segment to a later segment" if later else "")
                     + ".\nCandidates:\n" + cand_lines + "\nDependencies:\n"
                     + edge_lines(_touching(self.graph, seg)) + "\n\n" + head)

            def make(body: str, _f: str = frame, _t: str = tail, _a: Any = Answer) -> str:
                return f"{_f}{body}{_t}\n\nReply with only a JSON object matching this schema: {schema_text(_a)}"

            messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in seg.steps], texts=self.seg.texts)
            answer: Any = await ctx.ask(self.stage_id, messages, Answer)
            _collect(answer, "propagation", set(seg.steps), out, source_anywhere=True)
        cands = set(candidate_indices(ctx))
        nodes = set(self.recalled.steps)
        for e in out.edges:
            nodes.add(e.source)
            if e.target is not None:
                nodes.add(e.target)
        return Propagation(out, sorted(i for i in nodes if i in cands))

    def skipped(self, ctx: DiagnosisContext) -> Propagation:
        return Propagation(EdgeSet(), self.recalled.steps)


# ------------------------------------------------------------------------------------------------- the method


class DeFA(Method):
    """``defa``: DeFA as published (module docstring)."""

    name: ClassVar[str] = "defa"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("normalise", "protocol_rules", "segments", "summarise", "semantic_deps",
                                            "recall", "propagation", "adjudicate")
    llm_stage_ids: ClassVar[tuple[str, ...] | None] = ("normalise", "protocol_rules", "summarise", "semantic_deps",
                                                       "recall", "propagation", "adjudicate")
    default_options: ClassVar[Mapping[str, Any]] = {"segment_fraction": 0.25, "max_segment_steps": 25,
                                                    "oversize_fraction": 0.5}

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        o = self.options
        steps = steps_or_fail(ctx, "defa")
        normalised = await ctx.run_stage(NormaliseStage(o["segment_fraction"], o["oversize_fraction"]))
        protocol = await ctx.run_stage(ProtocolRulesStage())
        seg = await ctx.run_stage(SegmentsStage(normalised, protocol, o["max_segment_steps"], o["oversize_fraction"]))
        summaries = await ctx.run_stage(SummariseStage(seg))
        semantic = await ctx.run_stage(SemanticDepsStage(seg, summaries, protocol))
        proto = [DepEdge(e.producer, e.consumer, f"protocol:{e.kind}", e.rule) for e in protocol.edges]
        graph = proto + semantic.edges
        recalled = await ctx.run_stage(RecallStage(seg, summaries, graph))
        prop = await ctx.run_stage(PropagationStage(seg, summaries, graph, recalled))
        notes: dict[int, str] = {}
        for i in recalled.steps:
            action, link = recalled.record(i) or ("", "")
            if action or link:
                notes[i] = f"{action} — {link}"
        verdict = await ctx.run_stage(AdjudicateStage(seg, summaries, prop.nodes, prop.edges.edges, notes))
        by_index = {s.index: s for s in steps}
        step = by_index[verdict.step]
        order = [verdict.step] + [i for i in prop.nodes if i != verdict.step]
        candidates = [Candidate(step_id=by_index[i].step_id, index=i, agent=agent_of(by_index[i]),
                                score=round(1.0 if i == verdict.step else 0.5, 4),
                                reasons=tuple(x for x in [notes.get(i, "")] if x)) for i in order if i in by_index]
        evidence = [EvidenceItem(step_id=step.step_id, index=step.index, role="introduced", note=verdict.explanation)]
        downstream = sorted({e.target for e in prop.edges.edges if e.source == step.index and e.target is not None})
        for n, i in enumerate(downstream[:5]):
            role = "exposed" if n == len(downstream[:5]) - 1 else "carried"
            evidence.append(EvidenceItem(step_id=by_index[i].step_id, index=i, role=role,  # type: ignore[arg-type]
                                         note="propagation edge from the decisive step"))
        return Conclusion(step_index=step.index, agent=agent_of(step), category=verdict.category,
                       explanation=verdict.explanation, evidence=evidence, candidates=candidates,
                       verified_by="prediction")

