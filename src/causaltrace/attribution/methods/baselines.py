"""The Who&When baselines — All-at-Once, Step-by-Step, Binary-Search — as SEEDS §6 paraphrases the benchmark's code.

Stage ids and call structure (SEEDS §8): ``all-at-once`` → ``judge``: 1 call; ``step-by-step`` → ``step_check``:
one call per step until the first "yes" (≤ n); ``binary-search`` → ``halve``: between ⌊log2 n⌋ and ⌈log2 n⌉ calls.
``with_answer`` adds the line with the ground-truth answer to every prompt ("without ground truth" deletes it).
The prompts are our paraphrases of the benchmark's (no text copied); their structure, renderings and decision
rules follow SEEDS §6:

* **all-at-once**: the log one entry per line as ``speaker: content`` without numbers; asks for the responsible
  agent (pick one even if unsure), the step where it first erred counted from 0 (with the worked example), and the
  reason. The agent is the model's answer — it may differ from the step's speaker, as in the benchmark.
* **step-by-step**: idx = 0 … n−1 over the growing prefix rendered ``Step {idx} - speaker: content``; each call
  asks whether the MOST RECENT step holds an error that could derail the solution (not overly critical). The first
  "yes" predicts (speaker of idx, idx); an answer that stays unparseable after the repairs is logged in the
  artifact and the walk continues (as the benchmark does); no "yes" at all → no prediction: a Diagnosis marked
  failed ("no step was flagged"), scored wrong. (The benchmark's literal ``{idx}`` typo is not reproduced.)
* **binary-search**: recursive over [start, end], mid = start + (end − start) // 2; the segment is rendered
  ``speaker: content`` without numbers; the prompt names the range and both halves; "upper" = start … mid,
  "lower" = mid+1 … end; start == end predicts that entry.

Deviations, on purpose:

* **Structured answers.** Each call asks for a JSON object whose schema constrains the step (``minimum`` /
  ``maximum``) and the agent (``enum`` of the run's agents), sent as ``response_format`` (FACTS.md: a small model
  invents steps otherwise). The benchmark's plain-text formats (``Agent Name: … / Step Number: …``, ``1. Yes/No``,
  ``upper half`` / ``lower half``, checked in the benchmark's order) are still accepted as a fallback parse.
* **No guess on garbage.** The benchmark picks a random half when a binary-search answer names neither; here a
  bounded repair is tried and then the Diagnosis is marked failed (issue 5: never a guess presented as an
  answer). ``on_ambiguous="random"`` restores the benchmark's seeded coin flip.
* **Fitting the window.** When the rendered log exceeds the model's input budget, the longest steps are compressed
  (head and tail kept, the elision stated; :func:`~causaltrace.attribution.stages.segment.fit_texts`) until it
  fits; the artifact lists what was compressed. A log that fits is sent unchanged. (The benchmark sends it whole
  and fails on overflow.)
* **Live runs.** The rendered entries are the run's view (``agent_turn`` containers skipped) and the numbers
  shown are the step indices, so the answer maps back to the step. For Who&When logs the two coincide.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, ClassVar, Literal

from causaltrace.attribution.context import Conclusion, DiagnosisContext, Method, MethodFailed
from causaltrace.attribution.judge import Judge, agent_name, json_schema_for, output_model, short_text, step_index
from causaltrace.attribution.stages.segment import fit_texts
from causaltrace.attribution.stages.view import agent_of, agents_of, content_of, speaker, view_steps
from causaltrace.exceptions import JudgeOutputInvalid
from causaltrace.schema import Candidate, EvidenceItem, Step

__all__ = ["AllAtOnce", "BinarySearch", "StepByStep"]


def _problem(ctx: DiagnosisContext) -> str:
    return (ctx.run.task or "").strip() or "(the task was not recorded)"


def _answer_line(ctx: DiagnosisContext) -> str:
    answer = ctx.answer
    return f"The correct answer to the problem is: {answer}\n" if answer is not None else ""


def _plain(step: Step, text: str) -> str:
    return f"{speaker(step) or step.kind}: {text}"


def _numbered(step: Step, text: str) -> str:
    return f"Step {step.index} - {speaker(step) or step.kind}: {text}"


def _schema_text(model: Any) -> str:
    import json

    return json.dumps(json_schema_for(model), separators=(",", ":"))


class _Fitter:
    """Compresses the longest steps so a prompt fits the judge's input budget (memoised token counts)."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.count = lru_cache(maxsize=8192)(judge.count_tokens)
        self.compressed: dict[int, tuple[int, int]] = {}

    def texts(self, steps: list[Step], render: Any, frame: str) -> dict[int, str]:
        overhead = self.count(frame) + 16
        texts, compressed = fit_texts(steps, budget_tokens=self.judge.input_budget, count=self.count, render=render,
                                      overhead_tokens=overhead)
        for i, (before, after) in compressed.items():
            prev = self.compressed.get(i)
            self.compressed[i] = (prev[0] if prev else before, min(after, prev[1]) if prev else after)
        return texts

    def artifact(self) -> dict[str, Any]:
        return {str(i): {"tokens_before": a, "tokens_after": b} for i, (a, b) in sorted(self.compressed.items())}


def _lines(steps: list[Step], texts: Mapping[int, str], render: Any) -> str:
    return "\n".join(render(s, texts.get(s.index, content_of(s))) for s in steps)


# ----------------------------------------------------------------------------------------------- all-at-once

_AAO_SYSTEM = "You are an assistant who analyses conversations between AI agents and finds where they went wrong."
_AAO_USER = """You are analysing the conversation of several AI agents that tried to solve a real-world problem and failed.
The problem: {problem}
{answer_line}Find which agent made an error, at which step, and why. This is the conversation:

{conversation}

From this conversation, determine:
1. The name of the agent whose mistake is directly responsible for the wrong solution. If no agent made an obvious mistake, still choose the single agent you hold most responsible. Give only the agent's name.
2. The step at which that agent first made the mistake. Steps are the entries of the conversation counted from 0: in a conversation whose entries come from agent a, agent b, agent c and then agent a again, a mistake in agent c's entry is step 2, and a mistake in the second entry by agent a is step 3.
3. The reason for your prediction.
Reply with only a JSON object with the keys "agent_name", "step_number" and "reason", matching this schema: {schema}"""

_AGENT_LINE = re.compile(r"agent\s*name\s*[:：]\s*\**\s*([^\n*]+)", re.IGNORECASE)
_STEP_LINE = re.compile(r"step\s*number\s*[:：]\s*\**\s*(\d+)", re.IGNORECASE)
_REASON_LINE = re.compile(r"reason(?:\s*for\s*mistake)?\s*[:：]\s*(.+)", re.IGNORECASE | re.DOTALL)


def _aao_fallback(text: str) -> dict[str, Any] | None:
    agent, step = _AGENT_LINE.search(text), _STEP_LINE.search(text)
    if not agent or not step:
        return None
    reason = _REASON_LINE.search(text)
    return {"agent_name": agent.group(1).strip(), "step_number": int(step.group(1)),
            "reason": reason.group(1).strip() if reason else ""}


class AllAtOnce(Method):
    """``all-at-once``: one call over the whole log (module docstring)."""

    name: ClassVar[str] = "all-at-once"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("judge",)

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        judge = ctx.require_judge()
        steps = view_steps(ctx.run)
        if not steps:
            raise MethodFailed("the run has no steps")
        agents = agents_of(ctx.run) or [agent_of(steps[0])]
        lo, hi = steps[0].index, steps[-1].index
        Answer = output_model("AllAtOnceAnswer", agent_name=agent_name(agents), step_number=step_index(lo, hi),
                              reason=short_text(600))
        frame = _AAO_USER.format(problem=_problem(ctx), answer_line=_answer_line(ctx), conversation="",
                                 schema=_schema_text(Answer))
        fitter = _Fitter(judge)
        texts = fitter.texts(steps, _plain, _AAO_SYSTEM + frame)
        prompt = _AAO_USER.format(problem=_problem(ctx), answer_line=_answer_line(ctx),
                                  conversation=_lines(steps, texts, _plain), schema=_schema_text(Answer))
        answer: Any = await ctx.ask("judge", [{"role": "system", "content": _AAO_SYSTEM},
                                              {"role": "user", "content": prompt}], Answer, fallback=_aao_fallback)
        step = ctx.run.step_at(answer.step_number) if _has_index(ctx, answer.step_number) else None
        if step is None:
            raise MethodFailed(f"all-at-once: the model named step {answer.step_number}, which the run does not have")
        ctx.record("judge", {"agent": answer.agent_name, "step": answer.step_number, "reason": answer.reason,
                             "compressed_steps": fitter.artifact()})
        return Conclusion(
            step_index=step.index,
            agent=answer.agent_name,
            explanation=answer.reason,
            evidence=[EvidenceItem(step_id=step.step_id, index=step.index, role="introduced", note=answer.reason)],
            candidates=[Candidate(step_id=step.step_id, index=step.index, agent=answer.agent_name, score=1.0,
                                  reasons=(answer.reason[:300],))],
            verified_by="prediction",
        )


def _has_index(ctx: DiagnosisContext, index: int) -> bool:
    return any(s.index == index for s in ctx.run.steps)


# ---------------------------------------------------------------------------------------------- step-by-step

_SBS_SYSTEM = "You are a careful evaluator of multi-agent conversations, one step at a time."
_SBS_USER = """You are checking, step by step, a conversation in which several AI agents try to solve a real-world problem. The problem: {problem}
{answer_line}This is the conversation up to the current step:
{conversation}

The most recent step is step {idx}, by '{who}'.
Does this most recent step contain an error that could derail the problem solving or lead to a wrong solution? Do not be overly critical: flag only errors that clearly derail the process.
Reply with only a JSON object with the keys "error" ("Yes" or "No") and "reason", matching this schema: {schema}"""


_YES_NO = re.compile(r"^\s*(?:1\.\s*)?(yes|no)\b", re.IGNORECASE)


def _sbs_fallback(text: str) -> dict[str, Any] | None:
    """The benchmark's format: the reply starts with "1. Yes" / "1. No" (a bare "Yes" / "No" is accepted too)."""
    m = _YES_NO.match(text)
    if m is None:
        return None
    return {"error": m.group(1).capitalize(), "reason": text.split("Reason:", 1)[-1].strip()}


class StepByStep(Method):
    """``step-by-step``: one call per step until the first "yes" (module docstring)."""

    name: ClassVar[str] = "step-by-step"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("step_check",)

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        judge = ctx.require_judge()
        steps = view_steps(ctx.run)
        if not steps:
            raise MethodFailed("the run has no steps")
        Verdict = output_model("StepCheck", error=Literal["Yes", "No"], reason=short_text(300))
        schema = _schema_text(Verdict)
        fitter = _Fitter(judge)
        checked: list[dict[str, Any]] = []
        artifact: dict[str, Any] = {"checked": checked, "flagged": None}
        ctx.record("step_check", artifact)
        for pos, step in enumerate(steps):
            prefix = steps[: pos + 1]
            who = speaker(step) or step.kind
            frame = _SBS_USER.format(problem=_problem(ctx), answer_line=_answer_line(ctx), conversation="",
                                     idx=step.index, who=who, schema=schema)
            texts = fitter.texts(prefix, _numbered, _SBS_SYSTEM + frame)
            prompt = _SBS_USER.format(problem=_problem(ctx), answer_line=_answer_line(ctx),
                                      conversation=_lines(prefix, texts, _numbered), idx=step.index, who=who,
                                      schema=schema)
            messages = [{"role": "system", "content": _SBS_SYSTEM}, {"role": "user", "content": prompt}]
            try:
                verdict: Any = await ctx.ask("step_check", messages, Verdict, fallback=_sbs_fallback)
            except JudgeOutputInvalid as exc:
                checked.append({"step": step.index, "verdict": None, "unparsed": (exc.body or "")[:300]})
                continue
            checked.append({"step": step.index, "verdict": verdict.error, "reason": verdict.reason[:500]})
            if verdict.error == "Yes":
                artifact["flagged"] = step.index
                artifact["compressed_steps"] = fitter.artifact()
                agent = agent_of(step)
                return Conclusion(
                    step_index=step.index,
                    agent=agent,
                    explanation=verdict.reason,
                    evidence=[EvidenceItem(step_id=step.step_id, index=step.index, role="introduced",
                                           note=verdict.reason)],
                    candidates=[Candidate(step_id=step.step_id, index=step.index, agent=agent, score=1.0,
                                          reasons=(verdict.reason[:300],))],
                    verified_by="prediction",
                )
        artifact["compressed_steps"] = fitter.artifact()
        unparsed = sum(1 for c in checked if c["verdict"] is None)
        extra = f"; {unparsed} answer(s) could not be parsed" if unparsed else ""
        raise MethodFailed(f"step-by-step: no step was flagged as an error ({len(checked)} checked{extra})")


# --------------------------------------------------------------------------------------------- binary-search

_BS_SYSTEM = "You are an assistant who locates errors in segments of multi-agent conversations."
_BS_USER = """You are analysing a segment of a conversation in which several AI agents collaborate to resolve a user's query.
Your task is to locate the most critical mistake in this segment: decide which half of the segment contains the single step where the crucial error that led to the failure occurs.
The problem: {problem}
{answer_line}This is the conversation segment from step {start} to step {end}:

{conversation}

Is the most critical error more likely in the upper half (from step {start} to step {mid}) or in the lower half (from step {mid1} to step {end}) of this segment? Base your answer on the mistake that directly contributes to the failure to resolve the query. If no single error is clear, choose the step you hold most responsible and answer with its half.
Reply with only a JSON object with the keys "half" ("upper" or "lower") and "reason", matching this schema: {schema}"""


def _bs_fallback(text: str) -> dict[str, Any] | None:
    low = text.lower()
    if "upper half" in low:
        return {"half": "upper", "reason": text.strip()}
    if "lower half" in low:
        return {"half": "lower", "reason": text.strip()}
    return None


class BinarySearch(Method):
    """``binary-search``: halve the range until one step is left (module docstring)."""

    name: ClassVar[str] = "binary-search"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("halve",)
    default_options: ClassVar[Mapping[str, Any]] = {"on_ambiguous": "fail", "seed": 0}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if self.options["on_ambiguous"] not in ("fail", "random"):
            from causaltrace.exceptions import UserError

            raise UserError("binary-search option on_ambiguous must be 'fail' or 'random'")

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        judge = ctx.require_judge()
        steps = view_steps(ctx.run)
        if not steps:
            raise MethodFailed("the run has no steps")
        Half = output_model("HalfAnswer", half=Literal["upper", "lower"], reason=short_text(300))
        schema = _schema_text(Half)
        fitter = _Fitter(judge)
        ranges: list[dict[str, Any]] = []
        ctx.record("halve", {"ranges": ranges})
        rng = random.Random(f"{self.options['seed']}:{ctx.run.run_id}")
        start, end = 0, len(steps) - 1
        reason = ""
        while start < end:
            mid = start + (end - start) // 2
            seg = steps[start : end + 1]
            s0, s1, sm, sm1 = steps[start].index, steps[end].index, steps[mid].index, steps[mid + 1].index
            frame = _BS_USER.format(problem=_problem(ctx), answer_line=_answer_line(ctx), start=s0, end=s1,
                                    mid=sm, mid1=sm1, conversation="", schema=schema)
            texts = fitter.texts(seg, _plain, _BS_SYSTEM + frame)
            prompt = _BS_USER.format(problem=_problem(ctx), answer_line=_answer_line(ctx), start=s0, end=s1, mid=sm,
                                     mid1=sm1, conversation=_lines(seg, texts, _plain), schema=schema)
            messages = [{"role": "system", "content": _BS_SYSTEM}, {"role": "user", "content": prompt}]
            try:
                answer: Any = await ctx.ask("halve", messages, Half, fallback=_bs_fallback)
                half, reason = answer.half, answer.reason
            except JudgeOutputInvalid:
                if self.options["on_ambiguous"] != "random":
                    raise
                half, reason = rng.choice(["upper", "lower"]), "ambiguous answer: half chosen at random (seeded)"
            ranges.append({"start": s0, "end": s1, "mid": sm, "half": half, "reason": reason[:500]})
            if half == "upper":
                end = mid
            else:
                start = min(mid + 1, end)
        step = steps[start]
        ctx.record("halve", {"ranges": ranges, "result": step.index, "compressed_steps": fitter.artifact()})
        agent = agent_of(step)
        explanation = reason or "binary search narrowed the log down to this step"
        return Conclusion(
            step_index=step.index,
            agent=agent,
            explanation=explanation,
            evidence=[EvidenceItem(step_id=step.step_id, index=step.index, role="introduced", note=explanation)],
            candidates=[Candidate(step_id=step.step_id, index=step.index, agent=agent, score=1.0,
                                  reasons=(explanation[:300],))],
            verified_by="prediction",
        )
