"""The ``adjudicate`` stage — DeFA §3.8 (stage 6), shared by ``defa`` and ``graph`` (issue 18: a stage-level module, so
``graph``'s LLM stages do not import ``defa``).

One call over the evidence view Z and the failure propagation graph G_f: why the task failed, which plausible error
a correct alternative would have turned into success, compared by directness and evidence; the decisive step t̂ is
constrained to the candidate set V_f (the schema's enum) and classified into causaltrace's error categories (MAST +
TRAIL, ``causaltrace.schema.ERROR_CATEGORIES``) plus ``other``. ``defa`` passes its segmentation, summaries and
propagation edges; ``graph`` passes no segmentation (the whole trace is the evidence view, fitted to the window),
its ranked and recalled candidates with their reasons, the dependency edges that touch them and, as ``evidence``,
the per-candidate block of :mod:`~causaltrace.attribution.stages.evidence` (issue 20 item 7; ``defa`` passes none,
so its prompt is unchanged).

Also here: :class:`DepEdge`, the dependency / propagation edge both methods hand to the stage, and
:func:`edge_lines`, how edges are shown in prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.judge import output_model, short_text, step_index
from causaltrace.attribution.stages.evidence import EVIDENCE_INTRO
from causaltrace.attribution.stages.prompting import (
    SYSTEM_CAUSING_STEP,
    allowed,
    candidate_indices,
    clip,
    fit_prompt,
    schema_text,
    steps_or_fail,
    task_head,
)
from causaltrace.attribution.stages.segment import Segment
from causaltrace.schema import ERROR_CATEGORIES

__all__ = ["CATEGORY", "AdjudicateStage", "Adjudication", "DepEdge", "SegmentedSteps", "edge_lines"]

#: The adjudication's category field: an error category id, or ``other``.
CATEGORY = Literal[tuple([*ERROR_CATEGORIES, "other"])]  # type: ignore[valid-type]


class SegmentedSteps(Protocol):
    """What adjudication reads of a segmentation (``defa``'s): the segments and the texts to render."""

    segments: Sequence[Segment]
    texts: Mapping[int, str]


@dataclass
class DepEdge:
    """A dependency or propagation edge: step → step, or step → later segment (``segment`` set)."""

    source: int
    target: int | None
    kind: str
    explanation: str = ""
    segment: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "kind": self.kind, "explanation": self.explanation}
        if self.segment is not None:
            out["target_segment"] = self.segment
        else:
            out["target"] = self.target
        return out


def edge_lines(edges: list[DepEdge], limit: int = 120) -> str:
    """The edges as prompt lines (``- step i → step j (kind): explanation``), at most ``limit`` of them."""
    lines = []
    for e in edges[:limit]:
        tgt = f"segment {e.segment}" if e.segment is not None else f"step {e.target}"
        lines.append(f"- step {e.source} → {tgt} ({e.kind}){': ' + e.explanation if e.explanation else ''}")
    if len(edges) > limit:
        lines.append(f"- … {len(edges) - limit} more")
    return "\n".join(lines) or "- (none)"


@dataclass
class Adjudication:
    """t̂, ŷ and the explanation."""

    step: int
    category: str | None
    explanation: str
    via: str = "llm"

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "category": self.category, "explanation": self.explanation, "via": self.via}


class AdjudicateStage(Stage[Adjudication]):
    """``adjudicate`` — DeFA §3.8 (stage 6): one call over the evidence view Z (the full τ̃ for one segment; else
    every summary plus the full content of each step of V_f) and G_f: why the task failed, which plausible error a
    correct alternative would have turned into success, compared by directness and evidence; t̂ ∈ V_f, classified.
    Reused by ``graph`` (its ``adjudicate`` stage) with its own candidate set."""

    stage_id: ClassVar[str] = "adjudicate"
    uses_model: ClassVar[bool] = True

    def __init__(self, seg: SegmentedSteps | None, summaries: Mapping[int, str], nodes: list[int],
                 edges: list[DepEdge], notes: Mapping[int, str] | None = None, *, evidence: str = "") -> None:
        self.seg, self.summaries, self.nodes, self.edges, self.notes = seg, summaries, nodes, edges, notes or {}
        self.evidence = evidence

    async def run(self, ctx: DiagnosisContext) -> Adjudication:
        steps = steps_or_fail(ctx, "adjudicate")
        nodes = allowed(self.nodes, candidate_indices(ctx))
        texts = self.seg.texts if self.seg is not None else {}
        single = self.seg is None or len(self.seg.segments) <= 1
        shown = steps if single else [s for s in steps if s.index in set(nodes)]
        summary = "" if single else "Summaries of the trajectory's segments, in order:\n" + "\n".join(
            f"Segment {s.number} (steps {s.start}–{s.end}): {self.summaries.get(s.number, '(no summary)')}"
            for s in self.seg.segments) + "\n\n"  # type: ignore[union-attr]
        Answer = output_model("Adjudication", step=step_index(nodes), category=CATEGORY, explanation=short_text(800))
        notes = "\n".join(f"- step {i}: {clip(self.notes[i], 300)}" for i in nodes if self.notes.get(i))
        cats = "; ".join(f"{k} {v}" for k, v in ERROR_CATEGORIES.items())
        frame = (f"{task_head(ctx)}The task FAILED. Find the decisive error: the EARLIEST erroneous step whose correction "
                 "would have made the run succeed. Proceed as follows: (1) determine why the task failed; (2) compare "
                 "the plausible errors among the candidate steps and their effects along the propagation graph; (3) "
                 "for each, ask whether a correct alternative was available at that point and whether substituting "
                 "it, with execution continuing from the corrected state, would turn failure into success; (4) if "
                 "several qualify, prefer the one that explains the failure most directly with the strongest "
                 "evidence, and the earliest among equals; (5) pick the step and classify its error "
                 f"(categories: {cats}; or 'other').\nCandidate steps: {', '.join(map(str, nodes))}\n"
                 + (f"Why they are candidates:\n{notes}\n" if notes else "")
                 + (f"{EVIDENCE_INTRO}\n{self.evidence}\n" if self.evidence else "")
                 + "Propagation edges:\n" + edge_lines(self.edges) + "\n\n" + summary
                 + ("The trajectory:\n" if single else "The candidate steps in full:\n"))

        def make(body: str) -> str:
            return f"{frame}{body}\n\nReply with only a JSON object matching this schema: {schema_text(Answer)}"

        messages = fit_prompt(ctx, SYSTEM_CAUSING_STEP, make, shown, texts=texts)
        answer: Any = await ctx.ask(self.stage_id, messages, Answer)
        category = answer.category if answer.category in ERROR_CATEGORIES else None
        return Adjudication(answer.step, category, clip(answer.explanation, 800))

    def skipped(self, ctx: DiagnosisContext) -> Adjudication:
        nodes = allowed(self.nodes, candidate_indices(ctx))
        return Adjudication(nodes[0], None, "adjudication ablated: the earliest candidate", via="earliest (ablated)")
