"""Backward relevance from the failure anchor (ARCHITECTURE step 3; EMFA §2.4 "backward relevance tracing",
SEEDS §2.4 — deterministic here, over the dependency graph and the information the steps share).

Reachability alone says little in a group chat (consecutive ``saw`` edges make every earlier step an ancestor of
the anchor), so relevance follows **information**: starting with relevance 1 at the anchor, each step, latest
first, passes ``damping`` × its relevance back to the steps it used:

1. **request → result** (``executes``, ``tool_result_of``, ``answer_of``, ``produced_by`` edges): a share
   ``protocol_share`` goes to the producer — a terminal's output is its code's author's responsibility, a tool
   result its call's (the responsibility boundary "faulty transformation vs raw evidence", EMFA §2.7);
2. **instruction → reply** (``instruction→reply`` rule, ``handoff_from``, ``selected_by``, ``delegated_by``): a
   share ``instruction_share`` goes to the instruction (plan author vs executor);
3. the rest follows the step's **salient tokens** (words of 3+ letters minus stop-words, and numbers): each token
   the step uses that an earlier step introduced (its first occurrence in the run) sends a part proportional to
   the token's inverse step frequency to that introducer — scaled by ``same_agent`` when the introducer is the
   same agent (an agent restating its own earlier words carries them; EMFA emphasises information passed between
   agents) and by ``task_restatement`` when the introducer RESTATES the task (holds 80 % of its salient words: the
   first agent of an Algorithm-Generated log quotes the task, its manager's plan and constraints — a prompt, whose
   words every later step reuses without being built on that step's decision). Only steps the dependency graph
   lets the consumer see (its ancestors) can receive anything. A step that reuses nothing passes its share to its
   direct producers.

An llm_response that produced child steps introduces nothing here (its children carry its content and are the
candidates), though it passes on what it used. The run's task text counts as introduced before the first step (a sink: words the task gave are nobody's
introduction — in Algorithm-Generated logs the first agent restates the task); user input steps receive credit
for what they introduced but are not candidates. The result: a score
per step (the anchor's is 1; others are normalised so the largest non-anchor score is 1), for each step the later
step it gave most of its relevance to (``via``, which traces the propagation path introduced → carried →
exposed), and the tokens that carried the most credit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.anchor import FailureAnchorStage
from causaltrace.attribution.stages.dependencies import PROTOCOL_KINDS, DependencyGraph, DependencyGraphStage
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import agent_of, content_of, split_producers, view_steps
from causaltrace.schema import Run, Step

__all__ = ["Relevance", "RelevanceStage", "backward_relevance", "salient_tokens"]

INSTRUCTION_KINDS = frozenset({"handoff_from", "selected_by", "delegated_by"})
_TASK = -1


def _step_text(step: Step) -> str:
    text = content_of(step)
    if step.kind == "tool_call" and step.arguments:
        text = f"{text} {step.arguments}"
    return text


@dataclass
class Relevance:
    """Relevance of each step to the failure anchor, and how it flowed (module docstring)."""

    anchor: int
    scores: dict[int, float]
    via: dict[int, int] = field(default_factory=dict)
    carried: dict[int, list[str]] = field(default_factory=dict)

    def path(self, index: int) -> list[int]:
        """The propagation path from ``index`` to the anchor (following ``via``)."""
        out = [index]
        seen = {index}
        while out[-1] != self.anchor:
            nxt = self.via.get(out[-1])
            if nxt is None or nxt in seen:
                break
            out.append(nxt)
            seen.add(nxt)
        return out

    def to_json(self) -> dict[str, Any]:
        ranked = sorted(self.scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return {
            "anchor": self.anchor,
            "scores": {str(i): round(v, 4) for i, v in ranked if v > 0},
            "via": {str(i): j for i, j in sorted(self.via.items())},
            "carried": {str(i): toks for i, toks in sorted(self.carried.items()) if toks},
        }


def backward_relevance(
    run: Run,
    graph: DependencyGraph,
    anchor: int,
    *,
    damping: float = 0.85,
    protocol_share: float = 0.5,
    instruction_share: float = 0.3,
    same_agent: float = 0.3,
    task_restatement: float = 0.3,
) -> Relevance:
    """Relevance of every step to ``anchor`` (algorithm in the module docstring)."""
    steps = [s for s in view_steps(run) if s.index <= anchor]
    # an llm_response that produced child steps is shadowed by them (they carry its content and are the candidates)
    producers = split_producers(run)
    tokens = {s.index: salient_tokens(_step_text(s)) for s in steps}
    shadowed = {s.index for s in steps if s.step_id in producers}
    task_words = salient_tokens(run.task or "")
    df, intro = _introducers(steps, tokens, shadowed, task_words)
    n = len(steps)
    agent_by = {s.index: agent_of(s) for s in steps}
    restates = {s.index for s in steps if task_words and len(task_words & tokens[s.index]) >= 0.8 * len(task_words)}
    idf = {t: math.log((n + 1) / c) for t, c in df.items()}
    reach = graph.ancestors(anchor) | {anchor}
    rel: dict[int, float] = defaultdict(float)
    rel[anchor] = 1.0
    received: dict[int, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    by_token: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def give(src: int, dst: int, amount: float, token: str | None = None) -> None:
        if amount <= 0 or dst == src or dst == _TASK:
            return
        rel[dst] += amount
        received[dst][src] += amount
        if token is not None:
            by_token[dst][token] += amount

    for step in reversed(steps):
        k = step.index
        r = rel.get(k, 0.0)
        if r <= 0 or k not in reach:
            continue
        remaining = damping * r
        incoming = [e for e in graph.incoming(k) if e.producer in reach]
        protocol = sorted({e.producer for e in incoming if e.kind in PROTOCOL_KINDS})
        instructions = sorted(
            {e.producer for e in incoming if e.rule == "instruction→reply" or e.kind in INSTRUCTION_KINDS}
            - set(protocol)
        )
        if protocol:
            share = remaining * protocol_share
            for p in protocol:
                give(k, p, share / len(protocol))
            remaining -= share
        if instructions:
            share = remaining * instruction_share
            for p in instructions:
                give(k, p, share / len(instructions))
            remaining -= share
        # explicit graphs say exactly what a step could see; bounded so a 10,000-step run stays linear-ish
        visible = graph.ancestors(k) if graph.source == "explicit" and n <= 2000 else None
        used = [t for t in tokens[k] if t in intro and intro[t] < k and (visible is None or intro[t] in visible or intro[t] == _TASK)]
        weight = sum(idf[t] for t in used)
        if weight > 0:
            for t in used:
                j = intro[t]
                factor = same_agent if j in agent_by and agent_by[j] == agent_by[k] else 1.0
                if j in restates:
                    factor *= task_restatement
                give(k, j, remaining * factor * idf[t] / weight, t)
        else:
            direct = sorted({e.producer for e in incoming})
            for p in direct:
                give(k, p, remaining / len(direct))
    return _normalised(anchor, rel, received, by_token)


def _introducers(steps: list[Step], tokens: dict[int, set[str]], shadowed: set[int], task_words: set[str]
                 ) -> tuple[dict[str, int], dict[str, int]]:
    """Each token's step frequency and its introducer: the first unshadowed step using it — the task's words are
    given, not introduced by any step: they belong to a virtual step -1 (a sink)."""
    df: dict[str, int] = defaultdict(int)
    intro: dict[str, int] = dict.fromkeys(task_words, _TASK)
    for s in steps:
        for t in tokens[s.index]:
            df[t] += 1
            if s.index not in shadowed:
                intro.setdefault(t, s.index)
    return df, intro


def _normalised(anchor: int, rel: dict[int, float], received: dict[int, dict[int, float]],
                by_token: dict[int, dict[str, float]]) -> Relevance:
    """The Relevance of the raw credits: the anchor 1, the others scaled so the largest is 1; ``via`` = the later
    step each got most from; ``carried`` = the five tokens that brought each the most."""
    rel.pop(_TASK, None)
    others = [v for i, v in rel.items() if i != anchor]
    top = max(others, default=0.0)
    scores = {i: (1.0 if i == anchor else (v / top if top > 0 else 0.0)) for i, v in rel.items()}
    via = {i: max(srcs.items(), key=lambda kv: kv[1])[0] for i, srcs in received.items() if srcs}
    carried = {
        i: [t for t, _ in sorted(toks.items(), key=lambda kv: -kv[1])[:5]] for i, toks in by_token.items()
    }
    return Relevance(anchor=anchor, scores=scores, via=via, carried=carried)


class RelevanceStage(Stage[Relevance]):
    """Stage ``relevance`` (deterministic; needs ``dependency_graph`` and ``failure_anchor``)."""

    stage_id: ClassVar[str] = "relevance"

    def __init__(self, **params: Any) -> None:
        self.params = params

    async def run(self, ctx: DiagnosisContext) -> Relevance:
        graph = await ctx.run_stage(DependencyGraphStage())
        anchor = await ctx.run_stage(FailureAnchorStage())
        return backward_relevance(ctx.run, graph, anchor.index, **self.params)

    def skipped(self, ctx: DiagnosisContext) -> Relevance:
        return Relevance(anchor=-1, scores={})
