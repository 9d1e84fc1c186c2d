"""Segmenter and step compression (ARCHITECTURE step 4; DeFA §3.2 stage 0 and §3.4; SEEDS §7.4).

Every LLM call must fit the model's context with room to spare, and Who&When holds steps of ~88k characters
(Hand-Crafted/30.json), more than many windows by themselves. Two tools:

* :func:`plan_segments` — split a run's steps into consecutive segments of at most ``budget_tokens`` each (SEEDS
  §7.4: a segment ≤ 25% of the window; :class:`SegmentStage` computes that from the judge) and optionally at most
  ``max_steps`` steps. **Oversize single steps are compressed first**: a step whose rendered line exceeds
  ``oversize_fraction`` of the budget is cut to that size (:func:`compress_text` keeps the head and the tail and
  says how much was elided). A boundary that would separate a protocol pair (``keep_together``: e.g. code →
  its execution output) moves back so the pair stays in one segment when it fits (DeFA §3.4).
* :func:`fit_texts` — for methods that send the whole trace in one prompt (all-at-once, step-by-step's prefixes,
  binary-search's halves): shrink the longest steps (water-filling: every step above a common cap is cut to the
  cap) until the prompt fits the judge's input budget. A trace that fits is sent unchanged.

Token counting is the judge's (:meth:`~causaltrace.attribution.judge.Judge.count_tokens`: litellm's counter for
litellm models, characters / 4 otherwise). DeFA's LLM normalisation of oversize steps (issue 6's ``normalise``
stage) can supply its own compressed texts through the ``texts`` argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, MethodFailed, Stage
from causaltrace.attribution.stages.dependencies import PROTOCOL_KINDS, DependencyGraphStage
from causaltrace.attribution.stages.view import content_of, speaker, view_steps
from causaltrace.schema import Step

__all__ = [
    "ELISION",
    "Segment",
    "SegmentPlan",
    "SegmentStage",
    "compress_text",
    "fit_texts",
    "plan_segments",
    "step_line",
]

Counter = Callable[[str], int]
Render = Callable[[Step, str], str]
ELISION = "\n…[causaltrace: {n} characters elided]…\n"


def step_line(step: Step, text: str) -> str:
    """The default rendering of a step in segment prompts: ``Step {index} - {speaker}: {text}``."""
    return f"Step {step.index} - {speaker(step) or step.kind}: {text}"


def compress_text(text: str, max_tokens: int, count: Counter) -> str:
    """``text`` cut to at most ``max_tokens`` (by ``count``): the first two thirds and the last third are kept."""
    if max_tokens <= 0:
        return ELISION.format(n=len(text)).strip()
    if count(text) <= max_tokens:
        return text
    ratio = len(text) / max(1, count(text))  # characters per token in this text
    keep = max(0, int(max_tokens * ratio) - 60)
    while True:
        head, tail = keep * 2 // 3, keep - keep * 2 // 3
        out = text[:head] + ELISION.format(n=len(text) - head - tail) + (text[-tail:] if tail else "")
        if count(out) <= max_tokens or keep == 0:
            return out
        keep = int(keep * 0.85)


@dataclass
class Segment:
    """Consecutive steps sent together; ``tokens`` is the size of their rendered lines."""

    number: int
    steps: list[int]
    tokens: int

    @property
    def start(self) -> int:
        return self.steps[0]

    @property
    def end(self) -> int:
        return self.steps[-1]

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "start": self.start, "end": self.end, "steps": len(self.steps),
                "tokens": self.tokens}


@dataclass
class SegmentPlan:
    """The segments, the texts to render (compressed where needed) and what was compressed."""

    segments: list[Segment]
    texts: dict[int, str]
    budget_tokens: int
    compressed: dict[int, tuple[int, int]] = field(default_factory=dict)
    counting: str = "characters/4"

    def to_json(self) -> dict[str, Any]:
        return {
            "budget_tokens": self.budget_tokens,
            "counting": self.counting,
            "segments": [s.to_json() for s in self.segments],
            "compressed_steps": {str(i): {"tokens_before": a, "tokens_after": b}
                                 for i, (a, b) in sorted(self.compressed.items())},
        }


def plan_segments(
    steps: Sequence[Step],
    *,
    budget_tokens: int,
    count: Counter,
    render: Render = step_line,
    max_steps: int | None = None,
    oversize_fraction: float = 0.5,
    keep_together: Iterable[tuple[int, int]] = (),
    texts: Mapping[int, str] | None = None,
    counting: str = "characters/4",
) -> SegmentPlan:
    """Split ``steps`` into segments within ``budget_tokens`` (module docstring)."""
    if budget_tokens <= 0:
        raise ValueError("budget_tokens must be positive")
    out_texts = {s.index: (texts[s.index] if texts and s.index in texts else content_of(s)) for s in steps}
    compressed: dict[int, tuple[int, int]] = {}
    limit = max(16, int(budget_tokens * oversize_fraction))
    sizes: dict[int, int] = {}
    for s in steps:
        size = count(render(s, out_texts[s.index]))
        if size > limit:
            overhead = count(render(s, ""))
            out_texts[s.index] = compress_text(out_texts[s.index], max(0, limit - overhead), count)
            new = count(render(s, out_texts[s.index]))
            compressed[s.index] = (size, new)
            size = new
        sizes[s.index] = size
    partner = {}
    for a, b in keep_together:
        if a < b:
            partner[b] = min(a, partner.get(b, a))
    segments: list[Segment] = []
    current: list[int] = []
    used = 0
    for s in steps:
        size = sizes[s.index]
        full = current and (used + size > budget_tokens or (max_steps is not None and len(current) >= max_steps))
        if full:
            carry: list[int] = []
            a = partner.get(s.index)
            if a is not None and a in current and current.index(a) > 0:
                cut = current.index(a)
                moved = current[cut:]
                if sum(sizes[i] for i in moved) + size <= budget_tokens and (
                    max_steps is None or len(moved) + 1 <= max_steps
                ):
                    carry, current = moved, current[:cut]
            segments.append(Segment(len(segments), current, sum(sizes[i] for i in current)))
            current, used = carry, sum(sizes[i] for i in carry)
        current.append(s.index)
        used += size
    if current:
        segments.append(Segment(len(segments), current, sum(sizes[i] for i in current)))
    return SegmentPlan(segments, out_texts, budget_tokens, compressed, counting)


def fit_texts(
    steps: Sequence[Step],
    *,
    budget_tokens: int,
    count: Counter,
    render: Render,
    overhead_tokens: int = 0,
    texts: Mapping[int, str] | None = None,
) -> tuple[dict[int, str], dict[int, tuple[int, int]]]:
    """Texts for ``steps`` whose rendered lines fit ``budget_tokens - overhead_tokens`` (module docstring).

    Returns ``(texts, compressed)`` where ``compressed`` maps a step index to (tokens before, tokens after).
    Raises :class:`MethodFailed` when even a minimal version of every step does not fit.
    """
    out = {s.index: (texts[s.index] if texts and s.index in texts else content_of(s)) for s in steps}
    available = budget_tokens - overhead_tokens
    sizes = {s.index: count(render(s, out[s.index])) for s in steps}
    if sum(sizes.values()) <= available:
        return out, {}
    frames = {s.index: count(render(s, "")) for s in steps}
    floor = 24
    if sum(frames[i] + floor for i in sizes) > available:
        raise MethodFailed(
            f"the trace ({len(steps)} steps) does not fit the model's input budget of {budget_tokens} tokens even "
            "with every step compressed; use a model with a larger context window"
        )
    lo, hi = floor, max(sizes.values())
    while lo < hi:  # the largest cap whose water-filled total fits
        mid = (lo + hi + 1) // 2
        if sum(min(sizes[i], frames[i] + mid) for i in sizes) <= available:
            lo = mid
        else:
            hi = mid - 1
    cap = lo
    compressed: dict[int, tuple[int, int]] = {}
    for _ in range(8):
        for s in steps:
            i = s.index
            if sizes[i] > frames[i] + cap:
                before = compressed.get(i, (sizes[i], 0))[0]
                out[i] = compress_text(out[i], cap, count)
                sizes[i] = count(render(s, out[i]))
                compressed[i] = (before, sizes[i])
        if sum(sizes.values()) <= available:
            return out, compressed
        cap = max(floor, int(cap * 0.8))
    raise MethodFailed(f"could not compress the trace into the model's input budget of {budget_tokens} tokens")


class SegmentStage(Stage[SegmentPlan]):
    """Stage ``segment`` (deterministic): segments of at most ``fraction`` of the judge's window (SEEDS §7.4)."""

    stage_id: ClassVar[str] = "segment"

    def __init__(self, *, fraction: float = 0.25, max_steps: int | None = None, render: Render = step_line) -> None:
        self.fraction = fraction
        self.max_steps = max_steps
        self.render = render

    async def run(self, ctx: DiagnosisContext) -> SegmentPlan:
        judge = ctx.require_judge()
        graph = await ctx.run_stage(DependencyGraphStage())
        pairs = [(e.producer, e.consumer) for e in graph.edges
                 if e.kind in PROTOCOL_KINDS or e.rule not in ("previous message", "explicit")]
        budget = max(256, min(int(judge.context_window * self.fraction), judge.input_budget))
        return plan_segments(view_steps(ctx.run), budget_tokens=budget, count=judge.count_tokens, render=self.render,
                             max_steps=self.max_steps, keep_together=pairs, counting=judge.token_counting)
