"""A negative set of CORRECT runs (issue 32, "blame only what the run shows is wrong"): teams that succeed, in shapes
and content the fault suite lacks, diagnosed as if they had failed.

Each :class:`CleanTeam` is a reactive scripted team (:mod:`.clean_teams_smolagents`, :mod:`.clean_teams_autogen`)
whose run succeeds — its strict verifier says so — and in which no step is wrong: numbers come from tools and are
used faithfully, lists are handled in full, the cheapest / latest entry is picked, a failed call is retried and
recovers, pagination makes progress, a later observation supersedes an earlier one and is the one used, names and
dates are passed as given. Nobody should be blamed for such a run.

The measurement (:func:`score_clean`) is the twin property of :mod:`.twins` without a failing sibling: the run is
diagnosed by ``graph`` (no model, no replay) with a FAILING Outcome substituted (:func:`failing_outcome`: status
failure, the run's own final answer, the verifier's reason "the answer is wrong"), so a detector that fires on the
shape of a correct run puts a finding at the top. Wanted: no finding at the top (the diagnosis is uncertain).
``benchmarks/bench_clean_runs.py`` prints it per team; ``tests/attribution/test_clean_runs.py`` pins it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from causaltrace.schema import Outcome, Verdict

__all__ = ["FAILING_REASON", "CleanTeam", "clean_teams", "failing_outcome", "record_clean", "score_clean",
           "summarize_clean"]

#: the verifier's reason of the substituted failing Outcome
FAILING_REASON = "the answer is wrong"


@dataclass(frozen=True)
class CleanTeam:
    """One correct run: a fresh team per ``factory()`` call, its task and the strict verifier it passes."""

    name: str
    framework: Literal["smolagents", "autogen"]
    task: str
    factory: Callable[[], Any]
    verify: Callable[[Outcome], Verdict]
    #: the team's shape (agents, team type) and what its content exercises, one line each
    shape: str
    content: str


def clean_teams(framework: str | None = None) -> list[CleanTeam]:
    """Every clean team (optionally of one framework), smolagents first."""
    out: list[CleanTeam] = []
    if framework in (None, "smolagents"):
        from causaltrace.testing.faults.clean_teams_smolagents import smolagents_clean_teams

        out += [CleanTeam(**team) for team in smolagents_clean_teams()]
    if framework in (None, "autogen"):
        from causaltrace.testing.faults.clean_teams_autogen import autogen_clean_teams

        out += [CleanTeam(**team) for team in autogen_clean_teams()]
    return out


def _record_sync(team: CleanTeam) -> Any:
    import causaltrace

    with causaltrace.run(task=team.task, verify=team.verify, name=team.name) as handle:
        try:
            team.factory().run(team.task)
        except Exception:
            pass
    return handle.run


async def record_clean(team: CleanTeam) -> Any:
    """Run ``team`` on its task, instrumented and stored in ``$CAUSALTRACE_HOME``'s store; return the Run."""
    from causaltrace.testing.faults.runner import _instrument

    _instrument()
    if team.framework == "smolagents":
        return await asyncio.to_thread(_record_sync, team)
    import causaltrace

    async with causaltrace.run(task=team.task, verify=team.verify, name=team.name) as handle:
        try:
            await team.factory().run(task=team.task)
        except Exception:
            pass
    return handle.run


def failing_outcome(run: Any) -> Outcome:
    """The Outcome substituted for a correct run's: status failure, its own final answer and stop, and a verifier
    verdict "the answer is wrong" (the way :func:`.twins.score_twin` substitutes a failing run's Outcome)."""
    verdict = Verdict(passed=False, reason=FAILING_REASON)
    return Outcome(status="failure", final_answer=run.outcome.final_answer, stop=run.outcome.stop, verdict=verdict,
                   reason=FAILING_REASON)


async def score_clean(run: Any) -> dict[str, Any]:
    """Diagnose ``run`` by ``graph`` (no model, no replay) with :func:`failing_outcome` substituted: the run's own
    status, the top step (index, agent, kind), whether a finding backs it (families and claims), the confidence,
    and whether the diagnosis is uncertain."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.attribution.stages.confidence import is_uncertain

    substituted = run.model_copy(update={"outcome": failing_outcome(run)})
    d = await diagnose(substituted, "graph", None, ablate=("replay_verify",), store=False)
    top = d.top_findings
    step = run.step_at(d.decisive_step_index) if d.decisive_step_index is not None else None
    return {"status": run.outcome.status, "final_answer": run.outcome.final_answer, "steps": len(run.steps),
            "top": d.decisive_step_index, "agent": step.agent if step else None, "kind": step.kind if step else None,
            "finding_at_top": bool(top), "families": sorted({f.family for f in top}),
            "claims": [f.claim for f in top], "confidence": d.confidence, "uncertain": is_uncertain(d),
            "findings": [{"index": f.index, "family": f.family, "claim": f.claim} for f in d.findings]}


def summarize_clean(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals over scored rows: how many succeeded, how many have no finding at the top (and how many any finding
    at all), how many are uncertain, the mean confidence."""
    scored = [r for r in rows if r.get("score")]
    clean = sum(1 for r in scored if not r["score"]["finding_at_top"])
    confidences = [float(r["score"]["confidence"] or 0.0) for r in scored]
    return {"n": len(scored), "succeeded": sum(1 for r in scored if r["score"]["status"] == "success"),
            "no_finding_at_top": clean,
            "uncertain": sum(1 for r in scored if r["score"]["uncertain"]),
            "any_finding": sum(1 for r in scored if r["score"]["findings"]),
            "mean_confidence": round(sum(confidences) / len(confidences), 4) if confidences else None}
