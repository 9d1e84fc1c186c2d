"""Repair: prove a diagnosis by intervention and keep the fix (CausalFlow §4: CRS, minimal repairs, repair pairs).

For each candidate step — the diagnosis's candidates, or every candidate step of the run — in step order:

1. proposals: K corrections from an LLM (when a model is given) plus the deterministic mutations of ARCHITECTURE
   decision 9, ranked by minimality (CausalFlow Eq. 2, or the edit-distance variant);
2. each proposal is replayed (recorded calls before the step, live after it); CRS(step) = 1 if any proposal flips
   the outcome from failure to success. Because proposals are tried most-minimal first, the first flip is the most
   minimal flipping proposal (CausalFlow's argmax of minimality over successful repairs);
3. the decisive error is the EARLIEST step with CRS = 1 (Who&When's "earliest decisive error"); the search stops
   there unless ``exhaustive=True``.

The result updates the run's Diagnosis (``verified_by="replay"``, the replays tried in ``artifacts["replays"]``)
and yields a (wrong step, corrected step) :class:`RepairPair` whose prompt is the exact recorded LLM request at the
corrected step. Both are stored with the run.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from causaltrace.exceptions import UserError
from causaltrace.protocols import Factory, RunStore, Sandbox
from causaltrace.replay.edits import code_of, original_value, replacement_kind
from causaltrace.replay.executor import ReplayPolicy, has_recording, replay
from causaltrace.replay.minimality import minimality
from causaltrace.replay.proposals import proposals_for
from causaltrace.schema import (
    Candidate,
    Cost,
    Diagnosis,
    EvidenceItem,
    Intervention,
    Outcome,
    RepairPair,
    ReplayResult,
    Run,
    Step,
    StepError,
)

__all__ = ["RepairResult", "StepAttempt", "build_repair_pair", "repair", "repair_sync"]


@dataclass
class StepAttempt:
    """What the search did at one candidate step."""

    step_id: str
    index: int
    crs: float = 0.0
    replays: list[ReplayResult] = field(default_factory=list)
    best: ReplayResult | None = None
    minimality: float | None = None


@dataclass
class RepairResult:
    """The outcome of a repair search: the decisive step (if any flip was found), its fix, and every replay tried."""

    run_id: str
    attempts: list[StepAttempt]
    decisive: StepAttempt | None
    diagnosis: Diagnosis
    pair: RepairPair | None
    replays: int
    seconds: float

    @property
    def repaired(self) -> bool:
        return self.decisive is not None

    @property
    def live_calls_before_intervention(self) -> int:
        return sum(r.live_calls_before_intervention for a in self.attempts for r in a.replays)


# ------------------------------------------------------------------------------------------------ repair pairs


def _producing_llm(run: Run, step: Step) -> Step | None:
    """The llm_response whose output contains ``step`` (itself for an llm_response)."""
    seen: set[str] = set()
    current: Step | None = step
    while current is not None and current.step_id not in seen:
        if current.kind == "llm_response":
            return current
        seen.add(current.step_id)
        nxt = current.deps_of_kind("produced_by") or current.deps_of_kind("executes")
        current = run.step(nxt[0]) if nxt else None
    return None


def _assistant_turn(llm: Step) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "assistant", "content": str(llm.outputs.get("text") or llm.content or "")}
    calls = llm.outputs.get("tool_calls")
    if isinstance(calls, list) and calls:
        turn["tool_calls"] = [
            {"type": "function", "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
            for c in calls
            if isinstance(c, dict)
        ]
    return turn


def _corrected_turn(run: Run, step: Step, llm: Step, replacement: Any) -> dict[str, Any]:
    turn = _assistant_turn(llm)
    kind = replacement_kind(step)
    if kind == "code":
        old = code_of(step) or ""
        turn["content"] = turn["content"].replace(old, str(replacement)) if old in turn["content"] else str(replacement)
    elif kind == "arguments" and "tool_calls" in turn:
        for call in turn["tool_calls"]:
            if call["function"]["name"] == step.tool_name:
                call["function"]["arguments"] = replacement
                break
    elif kind == "text":
        old = str(original_value(step, kind) or "")
        content = turn["content"]
        turn["content"] = content.replace(old, str(replacement)) if old and old in content else str(replacement)
    else:
        turn["content"] = str(replacement)
    return turn


def build_repair_pair(run: Run, result: ReplayResult, *, crs: float, minimality_score: float) -> RepairPair | None:
    """The (wrong step, corrected step) pair of a flipping replay, or None when the step is not model output."""
    step = run.step(result.intervention.step_id)
    llm = _producing_llm(run, step)
    if llm is None or replacement_kind(step) == "result":
        return None
    prompt: Any = None
    tools: Any = None
    ref = llm.inputs.get("recording")
    if isinstance(ref, dict) and run.recording is not None:
        call = run.recording.find(str(ref.get("agent_key")), "llm", int(ref.get("ordinal", -1)))
        if call is not None and isinstance(call.request, dict):
            prompt = call.request.get("messages")
            tools = call.request.get("tools") or call.request.get("tools_to_call_from")
    if prompt is None:
        prompt = llm.inputs.get("messages")
    replays_run = result.replays_run
    return RepairPair(
        pair_id=uuid.uuid4().hex,
        run_id=run.run_id,
        step_id=step.step_id,
        step_index=step.index,
        step_kind=step.kind,
        agent=step.agent,
        prompt=prompt,
        chosen=_corrected_turn(run, step, llm, result.intervention.replacement),
        rejected=_assistant_turn(llm),
        tools=tools,
        task_id=str(run.metadata.get("task_id")) if run.metadata.get("task_id") else None,
        minimality=minimality_score,
        crs=crs,
        verified_by=result.verified_by,
        replays_run=replays_run,
        replays_succeeded=result.replays_flipped,
        replay_run_id=result.run.run_id if result.run is not None else None,
        created_at=datetime.now(UTC),
    )


# ------------------------------------------------------------------------------------------------------ search


def _resolve_candidates(run: Run, candidates: Iterable[str | int | Step] | None, diagnosis: Diagnosis | None) -> list[Step]:
    allowed = {s.step_id for s in run.candidate_steps()}
    if candidates is None and diagnosis is not None and diagnosis.candidates:
        candidates = [c.step_id for c in diagnosis.candidates]
    if candidates is None:
        steps = run.candidate_steps()
    else:
        steps = []
        for c in candidates:
            if isinstance(c, Step):
                step = c
            elif isinstance(c, int):
                step = run.step_at(c)
            else:
                step = run.step(c)
            if step.step_id not in allowed:
                raise UserError(f"step #{step.index} ({step.kind}) of run {run.run_id} cannot be intervened on")
            steps.append(step)
    return sorted({s.step_id: s for s in steps}.values(), key=lambda s: s.index)


def _replay_artifact(result: ReplayResult, step: Step) -> dict[str, Any]:
    return {
        "step_id": step.step_id,
        "index": step.index,
        "description": result.intervention.description,
        "source": result.intervention.source,
        "replacement": json.loads(json.dumps(result.intervention.replacement, default=str)),
        "flipped": result.flipped,
        "status": result.outcome.status,
        "replay_run_id": result.run.run_id if result.run is not None else None,
        "divergence": result.divergence,
        "live_calls_before_intervention": result.live_calls_before_intervention,
    }


async def repair(
    run: Run,
    factory: Factory,
    verify: Any,
    candidates: Iterable[str | int | Step] | None = None,
    k: int = 3,
    *,
    model: str | Any = None,
    diagnosis: Diagnosis | None = None,
    sandbox: Sandbox | None = None,
    policy: ReplayPolicy | None = None,
    mutation_budget: int = 30,
    measure: str = "positional",
    exhaustive: bool = False,
    store: RunStore | bool = True,
    on_replay: Callable[[Step, ReplayResult], None] | None = None,
) -> RepairResult:
    """Search for the earliest step whose minimal correction flips the run (module docstring); store the result.

    ``store`` is True (the default store), False (nothing is stored), or a
    :class:`~causaltrace.protocols.RunStore`. ``on_replay`` is called after every replay (progress).
    """
    if run.outcome.status != "failure":
        raise UserError(f"run {run.run_id} did not fail (status {run.outcome.status!r}): nothing to repair")
    if not has_recording(run) and model is None:
        raise UserError(f"run {run.run_id} has no recording: repairing it needs a model (--model) to predict replays")
    started = time.perf_counter()
    store_obj = _open_store(store)
    if diagnosis is None and store_obj is not None:
        previous = store_obj.diagnoses(run.run_id)
        diagnosis = previous[-1] if previous else None
    steps = _resolve_candidates(run, candidates, diagnosis)
    judge = None
    if model is not None:
        from causaltrace.attribution.judge import Judge

        judge = model if hasattr(model, "ask") else Judge(model)
    attempts: list[StepAttempt] = []
    decisive: StepAttempt | None = None
    replays = 0
    for step in steps:
        attempt = StepAttempt(step_id=step.step_id, index=step.index)
        attempts.append(attempt)
        await _try_proposals(
            attempt, step, run, factory, verify, judge=judge, k=k, mutation_budget=mutation_budget,
            sandbox=sandbox, policy=policy, measure=measure, on_replay=on_replay,
        )
        replays += sum(result.replays_run for result in attempt.replays)
        if attempt.crs == 1.0 and decisive is None:
            decisive = attempt
            if not exhaustive:
                break
    pair = None
    if decisive is not None and decisive.best is not None:
        pair = build_repair_pair(run, decisive.best, crs=decisive.crs, minimality_score=decisive.minimality or 0.0)
    updated = _updated_diagnosis(run, diagnosis, attempts, decisive, replays, time.perf_counter() - started)
    if store_obj is not None:
        store_obj.save_diagnosis(updated)
        if pair is not None:
            store_obj.save_repair_pair(pair)
    return RepairResult(
        run_id=run.run_id,
        attempts=attempts,
        decisive=decisive,
        diagnosis=updated,
        pair=pair,
        replays=replays,
        seconds=time.perf_counter() - started,
    )


async def _try_proposals(
    attempt: StepAttempt,
    step: Step,
    run: Run,
    factory: Factory,
    verify: Any,
    *,
    judge: Any,
    k: int,
    mutation_budget: int,
    sandbox: Sandbox | None,
    policy: ReplayPolicy | None,
    measure: str,
    on_replay: Callable[[Step, ReplayResult], None] | None,
) -> None:
    """Replay the proposals for ``step`` in order into ``attempt`` until one flips the run (CRS = 1, with the
    minimality of its edit)."""
    original = original_value(step, replacement_kind(step))
    for proposal in await proposals_for(step, run, judge=judge, k=k, mutation_budget=mutation_budget):
        result = await _replay_proposal(run, factory, proposal, verify, sandbox=sandbox, policy=policy, judge=judge)
        attempt.replays.append(result)
        if on_replay is not None:
            on_replay(step, result)
        if result.flipped:
            attempt.crs = 1.0
            attempt.best = result
            attempt.minimality = minimality(original, proposal.replacement, kind="edit" if measure == "edit" else "positional")
            return


async def _replay_proposal(
    run: Run,
    factory: Factory,
    proposal: Intervention,
    verify: Any,
    *,
    sandbox: Sandbox | None,
    policy: ReplayPolicy | None,
    judge: Any,
) -> ReplayResult:
    """One replay of ``proposal``; a proposal the adapter refuses (e.g. a handoff target the agent lacks) is a
    failed replay that says why, not an error of the search."""
    try:
        return await replay(run, factory, proposal, verify, sandbox=sandbox, policy=policy, model=judge)
    except UserError as exc:
        return ReplayResult(
            original_run_id=run.run_id,
            intervention=proposal,
            outcome=Outcome(status="unknown", reason=f"intervention refused: {exc.message}"),
            flipped=False,
            replays_run=0,
            error=StepError(type="InterventionRefused", message=exc.message),
        )


def _open_store(store: RunStore | bool | None) -> RunStore | None:
    if store is False or store is None:
        return None
    if store is True:
        from causaltrace.collector.store import Store

        return Store()
    return store


def _updated_diagnosis(
    run: Run,
    diagnosis: Diagnosis | None,
    attempts: list[StepAttempt],
    decisive: StepAttempt | None,
    replays: int,
    seconds: float,
) -> Diagnosis:
    artifacts: dict[str, Any] = dict(diagnosis.artifacts) if diagnosis is not None else {}
    artifacts["replays"] = [
        _replay_artifact(r, run.step(a.step_id)) for a in attempts for r in a.replays
    ]
    artifacts["crs"] = {a.step_id: a.crs for a in attempts}
    cost = diagnosis.cost if diagnosis is not None else Cost()
    cost = cost.model_copy(update={"seconds": cost.seconds + seconds})
    base = {
        "run_id": run.run_id,
        "method": diagnosis.method if diagnosis is not None else "repair",
        "model": diagnosis.model if diagnosis is not None else None,
        "artifacts": artifacts,
        "cost": cost,
        "created_at": datetime.now(UTC),
    }
    if decisive is None:
        reason = f"no correction among {replays} replays flipped the outcome"
        if diagnosis is not None:
            return diagnosis.model_copy(update={**base, "explanation": f"{diagnosis.explanation} ({reason})".strip()})
        return Diagnosis(**base, explanation=reason, verified_by="heuristic")
    step = run.step(decisive.step_id)
    best = decisive.best
    assert best is not None
    if best.verified_by == "prediction":
        how = "is PREDICTED to flip the run to success (no recording to replay)"
    else:
        how = f"flips the run to success in replay ({best.replays_flipped} of {best.replays_run} replays)"
    explanation = (
        f"Correcting step #{step.index} ({step.kind} by {step.agent or '-'}) — {best.intervention.description} — "
        f"{how}; it is the earliest step whose correction does."
    )
    evidence = [EvidenceItem(step_id=step.step_id, index=step.index, role="introduced", note=best.intervention.description)]
    downstream = [s for s in run.steps if s.index > step.index and s.kind in ("message", "final_answer")]
    if downstream:
        last = downstream[-1]
        evidence.append(EvidenceItem(step_id=last.step_id, index=last.index, role="exposed", note="final output"))
    candidates = list(diagnosis.candidates) if diagnosis is not None else []
    if step.step_id not in {c.step_id for c in candidates}:
        candidates.insert(0, Candidate(step_id=step.step_id, index=step.index, agent=step.agent, score=1.0,
                                       reasons=("replay flip",)))
    return Diagnosis(
        **base,
        decisive_step_id=step.step_id,
        decisive_step_index=step.index,
        agent=step.agent,
        category=(diagnosis.category if diagnosis is not None and diagnosis.decisive_step_id == step.step_id else None),
        explanation=explanation,
        evidence=tuple(evidence),
        candidates=tuple(candidates),
        confidence=1.0 if best.verified_by == "replay" else None,
        verified_by=best.verified_by,
    )


def repair_sync(run: Run, factory: Factory, verify: Any, candidates: Any = None, k: int = 3, **kwargs: Any) -> RepairResult:
    """:func:`repair` for sync code."""
    return asyncio.run(repair(run, factory, verify, candidates, k, **kwargs))
