"""``emfa`` — EMFA (Liao et al. 2026), error-propagation modelling for failure attribution, as SEEDS §2 and §7.3 fix it.

Pipeline (SEEDS §8 stage ids; LLM calls per trace):

====================== ================================ ==============================================================
stage id               calls                            paper
====================== ================================ ==============================================================
``success_spec``       1                                §2.2 stage 1: C_success from the query alone
``final_step``         1                                §2.2: the final failure step among the last w = 5 steps
``structure``          1 (or 1 per window)              §2.3 stage 2: H = (X, S, E_step, E_sub) + the deterministic
                                                        instruction→response rule
``trace_back``         0 (deterministic)                §2.4 stage 3a: backward relevance tracing → G_info
``annotate``           1                                §2.5 stage 3b: forward propagation annotation → G_prop
``loops``              1                                §2.6 stage 3c: persistent loops → G_loop
``screen_propagation`` 1                                §2.7: the propagation branch, ≤ 2 candidates
``screen_loops``       1 per loop + 1 aggregate         §2.7: the loop branch, ≤ 2 candidates
``verify``             1                                §2.8 stage 5: counterfactual decisive-error verification
====================== ================================ ==============================================================

Open choices (SEEDS §2 [OPEN], written down here):

* **Indexing**: 0-based step indices throughout (Who&When's ``mistake_step``); prompts show ``Step {i}``.
* **No ground truth** (the paper's setting) unless ``with_answer``, which adds the answer line to the prompts.
* **Final step** (§2.2.2–3): an LLM judgment over the last w = 5 agent steps, which says whether one of them is an
  explicit final answer and which (the latest that directly answers the query — plans, tool outputs and progress
  updates skipped). No explicit answer → the last agent step (the run hit its step limit). The chosen step is
  evaluated against C_success in the same call (the "final failure symptom").
* **Structure** (§2.3.3): one call when the trace fits half the input budget, else one call per window (the shared
  segmenter's segments of half the budget); each window's call sees the earlier windows' subtasks (id, range,
  goal) so it can emit E_sub edges to them. The answer is repaired deterministically into a contiguous,
  non-overlapping partition (a step in no subtask joins the one before it); an E_step edge whose ends lie in two
  subtasks becomes an E_sub edge; backward edges are dropped. The deterministic rule adds instruction→response
  when an instruction (``"X (-> Y)"``, handoff, selection) is immediately followed by a step of the addressed agent.
* **Backward tracing** (§2.4, deterministic): reached subtasks = x_final's subtask plus every subtask reachable
  backwards over E_sub; the "outputs" of a producing subtask are its steps with no E_step successor inside it
  (and its last step); from x_final and those outputs, reverse BFS over E_step inside reached subtasks. No depth
  limit. G_info keeps the producer→consumer direction.
* **Annotation** (§2.5.4): one call over G_info in chronological order (statuses introduced / propagated /
  transformed / corrected / none); roles follow deterministically (introduced and later corrected → recovered
  deviation; introduced or transformed and not corrected → unrecovered deviation, the earliest one the
  propagation source; propagated → carrier; x_final → symptom). The deterministic check (§2.5.3): each constraint
  of C_success whose salient words never appear in the trace is reported as a possibly omitted required action.
* **Loops** (§2.6): one call over H; the shared deterministic loop detector's loops are shown as hints. A loop
  needs ≥ 2 steps.
* **Screening** (§2.7): the responsibility-boundary rules (plan author vs executor, faulty transformation vs raw
  evidence, premature completion vs an earlier recoverable limitation) are instructions in the selector prompts;
  answers beyond 2 per branch are cut (first two kept). The aggregate loop selector is called whenever there is a
  loop. Both branches empty → the earliest unrecovered deviation, else the propagation source, else x_final.
* **Verify** (§2.8.4): one joint call over the full τ with C_success and every candidate; per candidate "would a
  minimal repair of this step recover the run" and "does it introduce the error"; the decision is the earliest
  candidate judged to recover the run (the paper's "earliest decisive step"); if none is judged to recover, the
  verifier's own choice. The agent is the step's recorded actor.
* **Ablations**: ``success_spec`` → the task text is the spec; ``final_step`` → the shared deterministic failure
  anchor; ``structure`` → one subtask, consecutive-step edges; ``annotate`` → no statuses; ``loops`` → no loops;
  ``screen_propagation`` / ``screen_loops`` → that branch yields nothing; ``verify`` → the earliest candidate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from causaltrace.attribution.context import Conclusion, DiagnosisContext, Method, Stage
from causaltrace.attribution.judge import output_model, short_text, step_index
from causaltrace.attribution.stages.anchor import find_failure_anchor
from causaltrace.attribution.stages.loops import Loop, LoopDetectStage
from causaltrace.attribution.stages.prompting import (
    SYSTEM_DECISIVE_ERROR,
    agent_of,
    allowed,
    answer_line,
    candidate_indices,
    clip,
    fit_prompt,
    problem,
    schema_tail,
    steps_or_fail,
)
from causaltrace.attribution.stages.segment import plan_segments
from causaltrace.attribution.stages.success_spec import SuccessSpec, SuccessSpecStage
from causaltrace.attribution.stages.tokens import salient_tokens
from causaltrace.attribution.stages.view import addressee, content_of, is_user_input
from causaltrace.schema import Candidate, EvidenceItem, Step

#: ``SuccessSpec`` / ``SuccessSpecStage`` are re-exported: they were this module's (the stage now lives in
#: :mod:`causaltrace.attribution.stages.success_spec`, shared with ``dcfa``).
__all__ = ["EMFA", "SuccessSpec", "SuccessSpecStage"]

_SYSTEM = SYSTEM_DECISIVE_ERROR
_W = 5
_BOUNDARIES = (
    "Responsibility boundaries: (a) plan author vs executor — if an executor faithfully carried out a flawed plan or "
    "instruction, the plan's author is responsible; if the plan was valid and the executor deviated, the executor "
    "is; (b) faulty transformation vs raw evidence — a tool output or retrieved page that is merely shown is raw "
    "evidence; the step that misread, miscomputed or misreported it introduced the error; (c) premature completion "
    "vs an earlier recoverable limitation — a step that declares success or answers despite an unresolved "
    "limitation is responsible, unless the limitation was unrecoverable and introduced earlier. A step that only "
    "carries an existing error (or the final symptom) is not decisive unless it introduces a new error, "
    "substantially transforms one, or makes a consequential control decision."
)


def _head(ctx: DiagnosisContext) -> str:
    return f"The query: {problem(ctx)}\n{answer_line(ctx)}"


# ------------------------------------------------------------------------------------- stage 1b: final step


@dataclass
class FinalStep:
    """x_final and the failure symptom."""

    index: int
    rule: str
    symptom: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "rule": self.rule, "symptom": self.symptom}


class FinalStepStage(Stage[FinalStep]):
    """``final_step`` — EMFA §2.2: one call over the last w = 5 agent steps picks the latest step that directly
    answers the query (plans, tool outputs, progress updates skipped) and evaluates it against C_success; with no
    explicit answer the last step is x_final (the run hit its step limit)."""

    stage_id: ClassVar[str] = "final_step"
    uses_model: ClassVar[bool] = True

    def __init__(self, spec: SuccessSpec) -> None:
        self.spec = spec

    async def run(self, ctx: DiagnosisContext) -> FinalStep:
        steps = steps_or_fail(ctx, "emfa")
        agents = [s for s in steps if not is_user_input(s)] or steps
        window = agents[-_W:]
        Answer = output_model("FinalStep", has_final_answer=bool, step=step_index([s.index for s in window]),
                              symptom=short_text(500))
        frame = (f"{_head(ctx)}Task-success specification:\n{self.spec.text()}\n\nThese are the last {len(window)} "
                 "steps of the failed trajectory. Scanning them from the latest backwards, is there an explicit "
                 "final answer to the query? If so, which step is the latest agent step that directly answers it "
                 "(skip plans, tool outputs and progress updates)? If not, choose the last step. Then evaluate that "
                 "step against the specification and describe the final failure symptom.\n\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, window), Answer)
        if not answer.has_final_answer:
            return FinalStep(window[-1].index, "no explicit answer: the last step", clip(answer.symptom, 500))
        return FinalStep(answer.step, "the latest step answering the query", clip(answer.symptom, 500))

    def skipped(self, ctx: DiagnosisContext) -> FinalStep:
        anchor = find_failure_anchor(ctx.run)
        return FinalStep(anchor.index, f"deterministic anchor ({anchor.rule}; final_step ablated)", anchor.symptom)


# -------------------------------------------------------------------------------------- stage 2: structure


@dataclass
class Structure:
    """H = (X, S, E_step, E_sub)."""

    subtasks: list[dict[str, Any]]  # {"id", "start", "end", "goal"}
    step_edges: list[tuple[int, int, str]]
    subtask_edges: list[tuple[int, int, str]]
    added: list[tuple[int, int]] = field(default_factory=list)
    windows: int = 1
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def subtask_of(self, index: int) -> int:
        for st in self.subtasks:
            if st["start"] <= index <= st["end"]:
                return int(st["id"])
        return int(self.subtasks[-1]["id"]) if self.subtasks else 0

    def to_json(self) -> dict[str, Any]:
        return {"windows": self.windows, "subtasks": self.subtasks,
                "step_edges": [list(e) for e in self.step_edges], "subtask_edges": [list(e) for e in self.subtask_edges],
                "instruction_response_added": [list(e) for e in self.added], "dropped": self.dropped}


class StructureStage(Stage[Structure]):
    """``structure`` — EMFA §2.3 (stage 2): an LLM partitions the trajectory into contiguous semantic subtasks and
    gives producer→consumer information edges within subtasks (E_step) and subtask→later-subtask reuse edges
    (E_sub); then the deterministic instruction→response rule (module docstring for windows and repairs)."""

    stage_id: ClassVar[str] = "structure"
    uses_model: ClassVar[bool] = True

    async def run(self, ctx: DiagnosisContext) -> Structure:
        judge = ctx.require_judge()
        steps = steps_or_fail(ctx, "emfa")
        plan = plan_segments(steps, budget_tokens=max(256, judge.input_budget // 2), count=judge.count_tokens)
        subtasks: list[dict[str, Any]] = []
        raw_step: list[tuple[int, int, str]] = []
        raw_sub: list[tuple[int, int, str]] = []
        by_index = {s.index: s for s in steps}
        for seg in plan.segments:
            base = len(subtasks)
            earlier = [st for st in subtasks]
            ids = list(range(len(subtasks) + 50))
            Sub = output_model("Subtask", id=Annotated[int, Field(ge=base, le=base + 49)],
                               start=step_index(seg.steps), end=step_index(seg.steps), goal=short_text(200))
            Edge = output_model("StepEdge", source=step_index(seg.steps), target=step_index(seg.steps),
                                info=short_text(200))
            SubEdge = output_model("SubtaskEdge", source=Annotated[int, Field(ge=0, le=ids[-1])],
                                   target=Annotated[int, Field(ge=base, le=base + 49)], info=short_text(200))
            Answer = output_model("Structure", subtasks=list[Sub], step_edges=list[Edge],  # type: ignore[valid-type]
                                  subtask_edges=list[SubEdge])  # type: ignore[valid-type]
            prior = "\n".join(f"- subtask {st['id']} (steps {st['start']}–{st['end']}): {st['goal']}" for st in earlier)
            frame = (f"{_head(ctx)}Structure the trajectory below (steps {seg.start}–{seg.end}). (1) Partition its "
                     f"steps into contiguous, non-overlapping semantic subtasks, numbered from {base}; every step "
                     "belongs to exactly one. (2) Within each subtask, list the producer→consumer information edges "
                     "(source step before target step) with what information was transferred; emphasise edges "
                     "between agents, keep same-agent edges that carry task information forward. (3) List the "
                     "subtask→later-subtask reuse edges (a later subtask reuses an earlier one's output; they may skip "
                     "subtasks)." + (f"\nSubtasks of the earlier part of the trajectory:\n{prior}" if prior else "")
                     + "\n\n")

            def make(body: str, _f: str = frame, _a: Any = Answer) -> str:
                return _f + body + schema_tail(_a)

            messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in seg.steps])
            answer: Any = await ctx.ask(self.stage_id, messages, Answer)
            subtasks.extend(_partition(seg.steps, answer.subtasks, base))
            raw_step += [(e.source, e.target, clip(e.info, 200)) for e in answer.step_edges]
            raw_sub += [(e.source, e.target, clip(e.info, 200)) for e in answer.subtask_edges]
        st = Structure(subtasks, [], [], windows=len(plan.segments))
        for s, t, info in raw_step:
            if s >= t:
                st.dropped.append({"edge": [s, t], "why": "not forward"})
            elif st.subtask_of(s) == st.subtask_of(t):
                st.step_edges.append((s, t, info))
            else:
                st.subtask_edges.append((st.subtask_of(s), st.subtask_of(t), f"step {s} → step {t}: {info}"))
        known = {int(x["id"]) for x in subtasks}
        for a, b, info in raw_sub:
            if a < b and a in known and b in known:
                st.subtask_edges.append((a, b, info))
            else:
                st.dropped.append({"subtask_edge": [a, b], "why": "not forward between known subtasks"})
        _instruction_rule(steps, st)
        return st

    def skipped(self, ctx: DiagnosisContext) -> Structure:
        steps = steps_or_fail(ctx, "emfa")
        edges = [(a.index, b.index, "next step") for a, b in zip(steps, steps[1:], strict=False)]
        return Structure([{"id": 0, "start": steps[0].index, "end": steps[-1].index, "goal": "(structure ablated)"}],
                         edges, [])


def _partition(indices: list[int], answered: list[Any], base: int) -> list[dict[str, Any]]:
    """A contiguous, non-overlapping partition of ``indices`` from the model's subtasks (module docstring)."""
    starts: dict[int, tuple[int, str]] = {}
    for n, st in enumerate(sorted(answered, key=lambda x: (x.start, x.end))):
        if st.start not in starts:
            starts[st.start] = (n, clip(st.goal, 200))
    if indices[0] not in starts:
        starts[indices[0]] = (-1, "(steps before the first subtask)")
    out: list[dict[str, Any]] = []
    for i in indices:
        if i in starts:
            out.append({"id": base + len(out), "start": i, "end": i, "goal": starts[i][1]})
        else:
            out[-1]["end"] = i
    return out


def _instruction_rule(steps: list[Step], st: Structure) -> None:
    """EMFA §2.3.2: an instruction immediately followed by the addressed agent's step gets its edge."""
    have = {(s, t) for s, t, _ in st.step_edges}
    for a, b in zip(steps, steps[1:], strict=False):
        who = addressee(a)
        if who is None or who != agent_of(b) or (a.index, b.index) in have:
            continue
        if st.subtask_of(a.index) == st.subtask_of(b.index):
            st.step_edges.append((a.index, b.index, "instruction → response (deterministic rule)"))
        else:
            st.subtask_edges.append((st.subtask_of(a.index), st.subtask_of(b.index),
                                     f"step {a.index} → step {b.index}: instruction → response"))
        st.added.append((a.index, b.index))


# ------------------------------------------------------------------------------------ stage 3a: trace back


@dataclass
class InfoGraph:
    """G_info: the steps and E_step edges reached backwards from x_final."""

    nodes: list[int]
    edges: list[tuple[int, int, str]]
    subtasks: list[int]

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "edges": [list(e) for e in self.edges], "subtasks": self.subtasks}


def trace_back(st: Structure, final: int) -> InfoGraph:
    """EMFA §2.4, deterministic (module docstring for the choices)."""
    start_sub = st.subtask_of(final)
    reached_subs = {start_sub}
    queue = deque([start_sub])
    while queue:
        sub = queue.popleft()
        for a, b, _ in st.subtask_edges:
            if b == sub and a not in reached_subs:
                reached_subs.add(a)
                queue.append(a)
    incoming: dict[int, list[tuple[int, int, str]]] = {}
    has_succ: set[int] = set()
    for e in st.step_edges:
        incoming.setdefault(e[1], []).append(e)
        has_succ.add(e[0])
    seeds = {final}
    for sub in reached_subs - {start_sub}:
        rng = next((x for x in st.subtasks if x["id"] == sub), None)
        if rng is None:
            continue
        members = range(rng["start"], rng["end"] + 1)
        seeds |= {i for i in members if i not in has_succ and i <= final} | {min(rng["end"], final)}
    nodes = set(seeds)
    edges: list[tuple[int, int, str]] = []
    queue2 = deque(sorted(seeds))
    while queue2:
        k = queue2.popleft()
        for e in incoming.get(k, []):
            if st.subtask_of(e[0]) in reached_subs:
                edges.append(e)
                if e[0] not in nodes:
                    nodes.add(e[0])
                    queue2.append(e[0])
    return InfoGraph(sorted(i for i in nodes if i <= final), sorted(set(edges)), sorted(reached_subs))


class TraceBackStage(Stage[InfoGraph]):
    """``trace_back`` — EMFA §2.4 (stage 3a): backward relevance tracing over H from x_final (deterministic)."""

    stage_id: ClassVar[str] = "trace_back"

    def __init__(self, st: Structure, final: FinalStep) -> None:
        self.st, self.final = st, final

    async def run(self, ctx: DiagnosisContext) -> InfoGraph:
        return trace_back(self.st, self.final.index)

    def skipped(self, ctx: DiagnosisContext) -> InfoGraph:
        return InfoGraph([s.index for s in steps_or_fail(ctx, "emfa") if s.index <= self.final.index], [], [])


# -------------------------------------------------------------------------------------- stage 3b: annotate


STATUS = Literal["introduced", "propagated", "transformed", "corrected", "none"]


@dataclass
class Annotations:
    """G_prop: a status and note per G_info step, the derived roles, and the deterministic checks."""

    status: dict[int, tuple[str, str]]
    roles: dict[int, str]
    checks: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"steps": [{"step": i, "status": s, "note": n, "role": self.roles.get(i)}
                          for i, (s, n) in sorted(self.status.items())], "checks": self.checks}


def _roles(status: Mapping[int, tuple[str, str]], final: int) -> dict[int, str]:
    roles: dict[int, str] = {}
    corrected_at = sorted(i for i, (s, _) in status.items() if s == "corrected")
    for i, (s, _) in sorted(status.items()):
        if s in ("introduced", "transformed"):
            roles[i] = "recovered deviation" if any(c > i for c in corrected_at) else "unrecovered deviation"
        elif s == "propagated":
            roles[i] = "propagation carrier"
    unrec = [i for i, r in sorted(roles.items()) if r == "unrecovered deviation"]
    if unrec:
        roles[unrec[0]] = "propagation source"
    roles[final] = "failure symptom"
    return roles


def _checks(ctx: DiagnosisContext, spec: SuccessSpec) -> list[dict[str, Any]]:
    text = " ".join(content_of(s) for s in steps_or_fail(ctx, "emfa")).casefold()
    out = []
    for c in spec.constraints:
        words = sorted(salient_tokens(c["text"]))
        present = [w for w in words if w in text]
        out.append({"constraint": c["text"], "kind": c["kind"],
                    "possibly_omitted": bool(words) and not present})
    return out


class AnnotateStage(Stage[Annotations]):
    """``annotate`` — EMFA §2.5 (stage 3b): one call goes through G_info in chronological order and marks where a
    deviation is introduced, propagated, transformed or corrected; roles follow deterministically, and the
    deterministic check for omitted required actions complements it (module docstring)."""

    stage_id: ClassVar[str] = "annotate"
    uses_model: ClassVar[bool] = True

    def __init__(self, spec: SuccessSpec, final: FinalStep, info: InfoGraph) -> None:
        self.spec, self.final, self.info = spec, final, info

    async def run(self, ctx: DiagnosisContext) -> Annotations:
        by_index = {s.index: s for s in steps_or_fail(ctx, "emfa")}
        nodes = allowed(self.info.nodes, [self.final.index])
        Note = output_model("StepStatus", step=step_index(nodes), status=STATUS, note=short_text(300))
        Answer = output_model("PropagationAnnotation", steps=list[Note])  # type: ignore[valid-type]
        edges = "\n".join(f"- step {a} → step {b}: {info}" for a, b, info in self.info.edges[:200]) or "- (none)"
        frame = (f"{_head(ctx)}Task-success specification:\n{self.spec.text()}\nFinal failure step: {self.final.index} "
                 f"— {self.final.symptom}\n\nGo through the steps of the information graph below in chronological "
                 "order and annotate each: is a deviation from what the task needs INTRODUCED here, PROPAGATED "
                 "(carried on unchanged), TRANSFORMED (changed into another error), CORRECTED here, or none?\n"
                 f"Information edges (producer → consumer):\n{edges}\n\nThe steps:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in nodes]),
                                    Answer)
        status = {n.step: (n.status, clip(n.note, 300)) for n in answer.steps}
        return Annotations(status, _roles(status, self.final.index), _checks(ctx, self.spec))

    def skipped(self, ctx: DiagnosisContext) -> Annotations:
        return Annotations({}, {self.final.index: "failure symptom"}, _checks(ctx, self.spec))


# ----------------------------------------------------------------------------------------- stage 3c: loops


@dataclass
class LoopGroups:
    """G_loop: groups of steps that pursue the same unresolved objective without progress."""

    loops: list[dict[str, Any]]  # {"objective", "steps"}

    def to_json(self) -> dict[str, Any]:
        return {"loops": self.loops}


class LoopsStage(Stage[LoopGroups]):
    """``loops`` — EMFA §2.6 (stage 3c): one call over H, independently of G_info, links repeated interaction
    rounds that pursue the same unresolved objective without progress (loops may cross subtasks); the shared
    deterministic loop detector's findings are shown as hints."""

    stage_id: ClassVar[str] = "loops"
    uses_model: ClassVar[bool] = True

    def __init__(self, st: Structure, hints: list[Loop]) -> None:
        self.st, self.hints = st, hints

    async def run(self, ctx: DiagnosisContext) -> LoopGroups:
        steps = steps_or_fail(ctx, "emfa")
        idx = [s.index for s in steps]
        Group = output_model("LoopGroup", objective=short_text(300), steps=list[step_index(idx)])  # type: ignore[misc]
        Answer = output_model("PersistentLoops", loops=list[Group])  # type: ignore[valid-type]
        subs = "\n".join(f"- subtask {x['id']} (steps {x['start']}–{x['end']}): {x['goal']}" for x in self.st.subtasks)
        hints = "\n".join(f"- steps {lp.members} by {lp.agent}: {clip(lp.signature, 120)}" for lp in self.hints)
        frame = (f"{_head(ctx)}Find PERSISTENT LOOPS: groups of steps that repeatedly pursue the same unresolved "
                 "objective without making progress (compare the objectives, actions, observations and progress "
                 "of repeated interaction rounds; loops may cross subtasks). Return an empty list if there are "
                 f"none.\nSubtasks:\n{subs}\n"
                 + (f"Repetitions a detector flagged (hints, may be incomplete or wrong):\n{hints}\n" if hints else "")
                 + "\nThe trajectory:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, steps), Answer)
        loops = []
        for g in answer.loops:
            members = sorted(set(g.steps))
            if len(members) >= 2:
                loops.append({"objective": clip(g.objective, 300), "steps": members})
        return LoopGroups(loops)

    def skipped(self, ctx: DiagnosisContext) -> LoopGroups:
        return LoopGroups([])


# ------------------------------------------------------------------------------------------ stage 4: screen


@dataclass
class Screened:
    """One branch's candidates (≤ 2) with reasons, plus per-loop analyses for the loop branch."""

    candidates: list[tuple[int, str]]
    per_loop: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"candidates": [{"step": i, "reason": r} for i, r in self.candidates]}
        if self.per_loop:
            out["per_loop"] = self.per_loop
        return out


class ScreenPropagationStage(Stage[Screened]):
    """``screen_propagation`` — EMFA §2.7 (propagation branch): one selector call over G_prop returns at most two
    (agent, step) candidates, earliest unrecovered material deviation first, with the responsibility-boundary rules."""

    stage_id: ClassVar[str] = "screen_propagation"
    uses_model: ClassVar[bool] = True

    def __init__(self, spec: SuccessSpec, final: FinalStep, info: InfoGraph, ann: Annotations) -> None:
        self.spec, self.final, self.info, self.ann = spec, final, info, ann

    async def run(self, ctx: DiagnosisContext) -> Screened:
        by_index = {s.index: s for s in steps_or_fail(ctx, "emfa")}
        cands = set(candidate_indices(ctx))
        nodes = allowed([i for i in self.info.nodes if i in cands], candidate_indices(ctx))
        Pick = output_model("PropagationCandidate", step=step_index(nodes), reason=short_text(400))
        Answer = output_model("PropagationScreen",
                              candidates=Annotated[list[Pick], Field(json_schema_extra={"maxItems": 2})])  # type: ignore[valid-type]
        notes = "\n".join(f"- step {i} ({agent_of(by_index[i])}): {s}, role {self.ann.roles.get(i, '—')}: {n}"
                          for i, (s, n) in sorted(self.ann.status.items()) if i in by_index) or "- (no annotations)"
        checks = "\n".join(f"- possibly omitted: {c['constraint']}" for c in self.ann.checks if c["possibly_omitted"])
        edges = "\n".join(f"- step {a} → step {b}: {info}" for a, b, info in self.info.edges[:200]) or "- (none)"
        frame = (f"{_head(ctx)}Task-success specification:\n{self.spec.text()}\nFinal failure step: "
                 f"{self.final.index} — {self.final.symptom}\n\nSelect AT MOST TWO candidate decisive steps from the "
                 "error-propagation graph. Priority: the earliest unrecovered deviation that materially affects later "
                 "reasoning or actions. A later wrong step is only a carrier (or the symptom) unless it introduces a "
                 "new error, substantially transforms an existing one, or makes a consequential control decision.\n"
                 f"{_BOUNDARIES}\nAnnotations:\n{notes}\n" + (f"Deterministic checks:\n{checks}\n" if checks else "")
                 + f"Information edges:\n{edges}\n\nThe steps of the graph:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        messages = fit_prompt(ctx, _SYSTEM, make, [by_index[i] for i in nodes])
        answer: Any = await ctx.ask(self.stage_id, messages, Answer)
        return Screened(_two([(c.step, clip(c.reason, 400)) for c in answer.candidates]))

    def skipped(self, ctx: DiagnosisContext) -> Screened:
        return Screened([])


def _two(items: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for i, r in items:
        if all(i != j for j, _ in out):
            out.append((i, r))
    return out[:2]


LOOP_KIND = Literal["ambiguous_or_incorrect_instruction", "failure_to_follow_valid_instruction", "omitted_action",
                    "failure_to_adapt", "other"]


class ScreenLoopsStage(Stage[Screened]):
    """``screen_loops`` — EMFA §2.7 (loop branch): one call per loop finds the earliest step that starts or sustains
    the repetition (ambiguous/incorrect instruction vs failure to follow a valid one; omitted actions; failure to
    adapt; a recurring error's first occurrence), then one aggregate call keeps at most two."""

    stage_id: ClassVar[str] = "screen_loops"
    uses_model: ClassVar[bool] = True

    def __init__(self, spec: SuccessSpec, loops: LoopGroups) -> None:
        self.spec, self.loops = spec, loops

    async def run(self, ctx: DiagnosisContext) -> Screened:
        if not self.loops.loops:
            return Screened([])
        steps = steps_or_fail(ctx, "emfa")
        by_index = {s.index: s for s in steps}
        cands = set(candidate_indices(ctx))
        per_loop: list[dict[str, Any]] = []
        for n, lp in enumerate(self.loops.loops):
            lo, hi = lp["steps"][0], lp["steps"][-1]
            span = [s for s in steps if lo - 2 <= s.index <= hi]
            options = allowed([s.index for s in span if s.index in cands], [lo])
            Answer = output_model("LoopAnalysis", step=step_index(options), kind=LOOP_KIND, reason=short_text(400))
            frame = (f"{_head(ctx)}A persistent loop (loop {n}): steps {lp['steps']} repeatedly pursue the objective "
                     f"'{lp['objective']}' without progress. Find the EARLIEST step that starts or sustains this "
                     "repetition. Distinguish an ambiguous or incorrect instruction from a failure to follow or carry "
                     "out a valid one; consider omitted actions and failure to adapt after repeated failures. If the "
                     "same unresolved error recurs across rounds, answer its FIRST occurrence.\n"
                     f"{_BOUNDARIES}\n\nThe steps around the loop:\n")

            def make(body: str, _f: str = frame, _a: Any = Answer) -> str:
                return _f + body + schema_tail(_a)

            answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, span), Answer)
            per_loop.append({"loop": n, "step": answer.step, "kind": answer.kind, "reason": clip(answer.reason, 400)})
        picks = allowed([p["step"] for p in per_loop], [per_loop[0]["step"]])
        Pick = output_model("LoopCandidate", step=step_index(picks), reason=short_text(400))
        Agg = output_model("LoopScreen",
                           candidates=Annotated[list[Pick], Field(json_schema_extra={"maxItems": 2})])  # type: ignore[valid-type]
        listing = "\n".join(f"- loop {p['loop']}: step {p['step']} ({p['kind']}): {p['reason']}" for p in per_loop)
        frame = (f"{_head(ctx)}Task-success specification:\n{self.spec.text()}\n\nEach persistent loop of the failed "
                 f"trajectory has been analysed:\n{listing}\n\nKeep AT MOST TWO of these steps: those most likely to "
                 f"be the decisive error of the whole run.\n{_BOUNDARIES}\n\nThe steps:\n")

        def make_agg(body: str) -> str:
            return frame + body + schema_tail(Agg)

        answer = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make_agg, [by_index[i] for i in picks]), Agg)
        return Screened(_two([(c.step, clip(c.reason, 400)) for c in answer.candidates]), per_loop)

    def skipped(self, ctx: DiagnosisContext) -> Screened:
        return Screened([])


# ------------------------------------------------------------------------------------------ stage 5: verify


@dataclass
class Verification:
    """Per-candidate verdicts and the decision."""

    verdicts: list[dict[str, Any]]
    step: int
    explanation: str
    rule: str

    def to_json(self) -> dict[str, Any]:
        return {"verdicts": self.verdicts, "step": self.step, "explanation": self.explanation, "rule": self.rule}


class VerifyStage(Stage[Verification]):
    """``verify`` — EMFA §2.8 (stage 5): one joint call over the full τ, C_success and X_cand judges, per candidate,
    whether a minimal repair would stop the downstream failure and satisfy C_success, with the responsibility-
    boundary principles; the decision is the earliest candidate judged to recover the run."""

    stage_id: ClassVar[str] = "verify"
    uses_model: ClassVar[bool] = True

    def __init__(self, spec: SuccessSpec, final: FinalStep, pool: list[tuple[int, str]]) -> None:
        self.spec, self.final, self.pool = spec, final, pool

    async def run(self, ctx: DiagnosisContext) -> Verification:
        steps = steps_or_fail(ctx, "emfa")
        ids = sorted(i for i, _ in self.pool)
        Verdict = output_model("CandidateVerdict", step=step_index(ids), recovers=bool, introduces_error=bool,
                               reason=short_text(400))
        Answer = output_model("Verification", verdicts=list[Verdict], decisive_step=step_index(ids),  # type: ignore[valid-type]
                              explanation=short_text(800))
        listing = "\n".join(f"- step {i}: {r}" for i, r in sorted(self.pool))
        frame = (f"{_head(ctx)}Task-success specification:\n{self.spec.text()}\nFinal failure step: "
                 f"{self.final.index} — {self.final.symptom}\n\nCandidate decisive steps:\n{listing}\n\nFor EACH "
                 "candidate judge by counterfactual reasoning (no replay): would a MINIMAL repair of this step alone "
                 "stop the downstream failure and satisfy the specification? Repairing a step that only carries an "
                 "error, or the final symptom, is less decisive. Does the step introduce the error? Then name the "
                 f"decisive step: the earliest step whose repair recovers the run.\n{_BOUNDARIES}\n\nThe trajectory:\n")

        def make(body: str) -> str:
            return frame + body + schema_tail(Answer)

        answer: Any = await ctx.ask(self.stage_id, fit_prompt(ctx, _SYSTEM, make, steps), Answer)
        verdicts = [{"step": v.step, "recovers": v.recovers, "introduces_error": v.introduces_error,
                     "reason": clip(v.reason, 400)} for v in answer.verdicts]
        recovering = sorted({v["step"] for v in verdicts if v["recovers"]})
        if recovering:
            return Verification(verdicts, recovering[0], clip(answer.explanation, 800),
                                "the earliest candidate judged to recover the run")
        return Verification(verdicts, answer.decisive_step, clip(answer.explanation, 800),
                            "no candidate judged to recover: the verifier's choice")

    def skipped(self, ctx: DiagnosisContext) -> Verification:
        first = min(i for i, _ in self.pool)
        return Verification([], first, "verification ablated: the earliest candidate", "earliest (ablated)")


# ------------------------------------------------------------------------------------------------ the method


class EMFA(Method):
    """``emfa``: EMFA as published (module docstring)."""

    name: ClassVar[str] = "emfa"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("success_spec", "final_step", "structure", "trace_back", "annotate",
                                            "loops", "screen_propagation", "screen_loops", "verify")
    llm_stage_ids: ClassVar[tuple[str, ...] | None] = ("success_spec", "final_step", "structure", "annotate",
                                                       "loops", "screen_propagation", "screen_loops", "verify")

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        steps = steps_or_fail(ctx, "emfa")
        by_index = {s.index: s for s in steps}
        spec = await ctx.run_stage(SuccessSpecStage())
        final = await ctx.run_stage(FinalStepStage(spec))
        st = await ctx.run_stage(StructureStage())
        info = await ctx.run_stage(TraceBackStage(st, final))
        ann = await ctx.run_stage(AnnotateStage(spec, final, info))
        hints = await ctx.run_stage(LoopDetectStage())
        loops = await ctx.run_stage(LoopsStage(st, hints))
        prop = await ctx.run_stage(ScreenPropagationStage(spec, final, info, ann))
        loop_c = await ctx.run_stage(ScreenLoopsStage(spec, loops))
        pool: list[tuple[int, str]] = []
        for i, r in prop.candidates + loop_c.candidates:
            if i in by_index and all(i != j for j, _ in pool):
                pool.append((i, r))
        fallback = None
        if not pool:
            order = [i for i, r in sorted(ann.roles.items()) if r == "unrecovered deviation"] + [
                i for i, r in sorted(ann.roles.items()) if r == "propagation source"] + [final.index]
            fallback = order[0]
            pool = [(fallback, "both screening branches were empty: " + ann.roles.get(fallback, "x_final"))]
        ctx.record("candidates", {"pool": [{"step": i, "reason": r} for i, r in pool], "fallback": fallback})
        verdict = await ctx.run_stage(VerifyStage(spec, final, pool))
        step = by_index[verdict.step]
        reasons = dict(pool)
        recovers = {v["step"]: v for v in verdict.verdicts}
        order = [verdict.step] + [i for i, _ in sorted(pool) if i != verdict.step]
        candidates = [Candidate(step_id=by_index[i].step_id, index=i, agent=agent_of(by_index[i]),
                                score=1.0 if i == verdict.step else (0.6 if recovers.get(i, {}).get("recovers") else 0.3),
                                reasons=tuple(x for x in [reasons.get(i, ""), recovers.get(i, {}).get("reason", "")] if x))
                      for i in order]
        evidence = [EvidenceItem(step_id=step.step_id, index=step.index, role="introduced", note=verdict.explanation)]
        if final.index != step.index and final.index in by_index:
            evidence.append(EvidenceItem(step_id=by_index[final.index].step_id, index=final.index, role="exposed",
                                         note=final.symptom or "the final failure step"))
        return Conclusion(step_index=step.index, agent=agent_of(step), explanation=verdict.explanation,
                       evidence=evidence, candidates=candidates, verified_by="prediction")

