"""The diagnosis a repair search stores (split from :mod:`causaltrace.replay.repair`): the guiding diagnosis updated
with what the search found — a correction's replay-verified error, an alternative's "the run succeeds if step N does X
instead" (issue 32 item 5), a tool / data fault found by editing a tool result (decision 9), or why nothing flipped
— with the replays tried as artifacts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from causaltrace.replay.consensus import consensus_artifact
from causaltrace.replay.corrections import explains
from causaltrace.schema import Candidate, Cost, Diagnosis, EvidenceItem, ReplayResult, Run, Step

if TYPE_CHECKING:
    from causaltrace.replay.repair import StepAttempt

__all__ = ["environment_diagnosis", "flip_confidence", "no_flip_reason", "nondeterministic_diagnosis", "pruned_note",
           "repair_artifacts", "replay_artifact", "updated_diagnosis"]


def replay_artifact(result: ReplayResult, step: Step, output: str = "", check: str | None = None) -> dict[str, Any]:
    """One replay's record in ``artifacts["replays"]``; ``check`` marks a reproduction check (``control``: the
    unedited run replayed live after the step; ``again``: the flipping edit once more)."""
    lines = output.splitlines()
    return {
        "check": check,
        "output_lines": len(lines),
        "output_tail": lines[-20:],
        "step_id": step.step_id,
        "index": step.index,
        "description": result.intervention.description,
        "source": result.intervention.source,
        "replacement": json.loads(json.dumps(result.intervention.replacement, default=str)),
        "flipped": result.flipped,
        "status": result.outcome.status,
        "replay_run_id": result.run.run_id if result.run is not None else None,
        "divergence": result.divergence,
        "error": result.error.model_dump(mode="json") if result.error is not None else None,
        "verified_by": result.verified_by,
        "live_calls_before_intervention": result.live_calls_before_intervention,
    }


def updated_diagnosis(run: Run, diagnosis: Diagnosis | None, attempts: list[StepAttempt], decisive: StepAttempt | None,
                      replays: int, seconds: float, *, exhausted: str = "", predictions: int = 0,
                      pruned: list[Step] | None = None, unproven: StepAttempt | None = None, hung: str = "",
                      ) -> Diagnosis:
    """The guiding diagnosis updated with what the search found (module docstring); ``unproven``: the attempt whose
    flip did not reproduce (a nondeterministic run); ``hung``: what the last timed-out replay was stuck in."""
    pruned = pruned or []
    artifacts = repair_artifacts(run, diagnosis, attempts, pruned)
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
    if unproven is not None:
        return nondeterministic_diagnosis(run, diagnosis, unproven, base, replays, hung=hung)
    if decisive is None:
        reason = (no_flip_reason(attempts, replays, predictions, exhausted) + (f"; {hung}" if hung else "")
                  + pruned_note(pruned))
        if diagnosis is not None:
            return diagnosis.model_copy(update={**base, "explanation": f"{diagnosis.explanation} ({reason})".strip()})
        return Diagnosis(**base, explanation=reason, verified_by="heuristic")
    step = run.step(decisive.step_id)
    best = decisive.best
    assert best is not None
    if decisive.phase == "environment":
        return environment_diagnosis(run, step, best, base, diagnosis, note=pruned_note(pruned, sentence=True))
    if best.verified_by == "prediction":
        how = "is PREDICTED to flip the run to success (no recording to replay)"
    else:
        how = f"flips the run to success in replay ({best.replays_flipped} of {best.replays_run} replays)"
    basis = best.intervention.basis
    if basis == "correction":
        found = best.intervention.finding
        rests = f", {explains(found)}" if found is not None else ""
        explanation = (
            f"Correcting step #{step.index} ({step.kind} by {step.agent or '-'}) — {best.intervention.description}"
            f"{rests} — {how}; it is the earliest step whose correction does.{pruned_note(pruned, sentence=True)}"
        )
    else:  # issue 32 item 5: a flip by an alternative shows another way, not an error
        explanation = (
            f"The run succeeds if step #{step.index} ({step.kind} by {step.agent or '-'}) does this instead: "
            f"{best.intervention.description} ({how.replace('flips the run to success', 'it flips')}); nothing "
            f"shows step #{step.index} was wrong (no finding derives the edit): an alternative, not a verified "
            f"error.{pruned_note(pruned, sentence=True)}"
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
        confidence=flip_confidence(best, diagnosis),
        verified_by=best.verified_by,
        fault_source="agent",
        findings=diagnosis.findings if diagnosis is not None else (),
        basis="correction" if basis == "correction" else "alternative",
    )


def flip_confidence(best: ReplayResult, diagnosis: Diagnosis | None) -> float | None:
    """1.0 for a replayed correction; a replayed alternative proves no error, so it claims no more than the guiding
    diagnosis did; a predicted flip, the critics' consensus."""
    if best.verified_by != "replay":
        return best.consensus.score if best.consensus else None
    if best.intervention.basis == "correction":
        return 1.0
    from causaltrace.attribution.stages.confidence import NO_EVIDENCE_CONFIDENCE

    guide = diagnosis.confidence if diagnosis is not None and diagnosis.confidence is not None else 1.0
    return min(guide, NO_EVIDENCE_CONFIDENCE)


def repair_artifacts(run: Run, diagnosis: Diagnosis | None, attempts: list[StepAttempt], pruned: list[Step]
                      ) -> dict[str, Any]:
    """The guiding diagnosis's artifacts plus the search's: every replay tried, CRS per step, what was pruned, the
    critics' consensus on predicted flips (issue 20 item 8)."""
    artifacts: dict[str, Any] = dict(diagnosis.artifacts) if diagnosis is not None else {}
    artifacts["replays"] = [
        replay_artifact(r, run.step(a.step_id), out)
        for a in attempts
        for r, out in zip(a.replays, a.outputs + [""] * (len(a.replays) - len(a.outputs)), strict=True)
    ] + [
        replay_artifact(r, run.step(a.step_id), out, check="control" if i % 2 == 0 else "again")
        for a in attempts
        for i, (r, out) in enumerate(zip(a.checks, a.check_outputs + [""] * (len(a.checks) - len(a.check_outputs)),
                                         strict=True))
    ]
    artifacts["crs"] = {a.step_id: a.crs for a in attempts}
    artifacts["pruned"] = {"steps": [s.index for s in pruned], "rule": "provenance reach 0: nothing the step "
                           "decided reaches the failing answer"}
    artifacts.update(consensus_artifact(attempts))
    return artifacts


def nondeterministic_diagnosis(run: Run, diagnosis: Diagnosis | None, attempt: StepAttempt, base: dict[str, Any],
                              replays: int, *, hung: str = "") -> Diagnosis:
    """Issue 36 item 2: a flip that did not reproduce proves nothing. The guiding diagnosis stands, marked
    ``artifacts["nondeterministic"]`` (``["unconfirmed"]`` when the seconds budget ended the checks) and said in its
    explanation; it never carries the "replay" label, and no pair is made."""
    step = run.step(attempt.step_id)
    edit = attempt.best.intervention.description if attempt.best is not None else ""
    cut = "budget ran out" in attempt.unreproduced  # the budget ended the checks: unconfirmed, not nondeterministic
    note = (f"{'unconfirmed flip' if cut else 'nondeterministic run'}: a replay flipped it at step #{step.index} "
            f"({edit}), but {attempt.unreproduced}; nothing is verified by replay and no repair pair is stored "
            f"({replays} replays, {sum(r.replays_run for r in attempt.checks)} of them checking the flip)"
            + (f"; {hung}" if cut and hung else ""))
    artifacts = {**base["artifacts"], "unconfirmed" if cut else "nondeterministic": {
        "step_index": step.index, "step_id": step.step_id, "edit": edit, "reason": attempt.unreproduced,
        "checks": [["control" if i % 2 == 0 else "again", r.outcome.status, r.error.type if r.error else None]
                   for i, r in enumerate(attempt.checks)]}}
    if diagnosis is not None:
        verified = diagnosis.verified_by if diagnosis.verified_by != "replay" else "heuristic"
        return diagnosis.model_copy(update={**base, "artifacts": artifacts, "verified_by": verified,
                                            "explanation": f"{diagnosis.explanation} ({note})".strip()})
    return Diagnosis(**{**base, "artifacts": artifacts}, explanation=note[0].upper() + note[1:],
                     verified_by="heuristic")


def no_flip_reason(attempts: list[StepAttempt], replays: int, predictions: int, exhausted: str) -> str:
    """Why no step was found: what was tried (replays, predictions, or both), flips the critics rejected, the
    budget."""
    tried = " and ".join(part for part in (f"{replays} replays" if replays or not predictions else "",
                                           f"{predictions} predictions" if predictions else "") if part)
    reason = f"no correction among {tried} flipped the outcome"
    rejected = [a for a in attempts if a.crs == 1.0 and a.best is not None and a.best.consensus is not None
                and not a.best.consensus.confirmed]
    if rejected:
        reason += ("; the critics' consensus rejected the predicted flip" + ("s" if len(rejected) > 1 else "")
                   + " at " + ", ".join(f"step #{a.index} ({a.best.consensus.score:.2f})" for a in rejected
                                        if a.best is not None and a.best.consensus is not None))
    if exhausted == "alternatives":
        reason += "; every correction was tried, and the search stopped when the alternatives' budget ran out"
    elif exhausted:
        reason += f"; the search stopped when its budget of {exhausted} ran out"
    return reason


def pruned_note(pruned: list[Step], *, sentence: bool = False) -> str:
    """What provenance ruled out, for an explanation ("" when nothing was pruned)."""
    if not pruned:
        return ""
    shown = ", ".join(f"#{s.index}" for s in pruned[:12]) + (", …" if len(pruned) > 12 else "")
    what = (f"provenance ruled out {len(pruned)} candidate step{'s' if len(pruned) > 1 else ''} ({shown}): nothing "
            f"{'they' if len(pruned) > 1 else 'it'} decided reaches the failing answer")
    return f" {what[0].upper()}{what[1:]}." if sentence else f"; {what}"


def environment_diagnosis(run: Run, step: Step, best: ReplayResult, base: dict[str, Any],
                           diagnosis: Diagnosis | None, *, note: str = "") -> Diagnosis:
    """A flip found by editing a tool result: a tool / data fault, never an agent's decisive error."""
    tool = step.tool_name or "the tool"
    replacement = best.intervention.replacement
    shown = replacement if isinstance(replacement, str) else json.dumps(replacement, default=str)
    how = ("is PREDICTED to succeed" if best.verified_by == "prediction"
           else f"succeeds in replay ({best.replays_flipped} of {best.replays_run} replays)")
    explanation = (
        f"No correction of an agent's decision flipped the run. The run {how} if {tool} had returned "
        f"{shown[:200]!r} at step #{step.index} ({best.intervention.description}): a tool or data fault "
        f"(the environment's output), not an agent's decisive error.{note}"
    )
    evidence = (EvidenceItem(step_id=step.step_id, index=step.index, role="introduced",
                             note=f"tool result of {tool}"),)
    return Diagnosis(
        **base,
        decisive_step_id=step.step_id,
        decisive_step_index=step.index,
        agent=None,
        category="SYS-ENVIRONMENT",
        explanation=explanation,
        evidence=evidence,
        candidates=tuple(diagnosis.candidates) if diagnosis is not None else (),
        confidence=1.0 if best.verified_by == "replay" else None,
        verified_by=best.verified_by,
        fault_source="environment",
    )
