"""CausalFlow as an attribution method, and the replay verification hook of the ``graph`` method.

* ``--method causalflow`` (SEEDS §4 and §7.5): attribution by the Causal Responsibility Score alone — every
  candidate step of a RECORDED run is intervened on (K = 3 LLM proposals at the configured temperature when a model
  is given, plus the deterministic mutations), each proposal replayed; CRS(step) = 1 when one flips the outcome;
  among flips the most minimal proposal is kept (position-wise minimality, Eq. 2); the decisive error is the
  EARLIEST step with CRS = 1. Exhaustive over all steps (the seed has no pre-filter), so it is the costly
  reference the graph-guided methods are compared with. The consensus stage (critic / meta-critic) needs a model:
  without one it is skipped and said so in the artifacts. A run without a recording cannot be replayed: the method
  fails with that reason (predictive re-execution is the graph methods' ``verified_by="prediction"`` path).
* The verification hook (ARCHITECTURE "The default attribution method", step 6): when ``graph`` diagnoses a
  recorded run inside :func:`verification_scope`, its top candidates are verified by replay and the earliest that
  flips becomes the decisive step (``verified_by="replay"``).

Both need the user's factory and verifier; the CLI passes ``--factory`` / ``--verify`` through
:func:`verification_scope`, and code may pass ``factory=`` / ``verify=`` options to ``diagnose(..., method=
"causalflow")``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from causaltrace.attribution.engine import (
    DiagnosisContext,
    Finding,
    Method,
    MethodFailed,
    VerificationResult,
    register_verification_hook,
)
from causaltrace.protocols import register_method
from causaltrace.replay.executor import has_recording
from causaltrace.schema import Candidate, Run

__all__ = ["CausalFlowMethod", "verification_scope"]

_SCOPE: contextvars.ContextVar[tuple[Callable[[], Any], Any] | None] = contextvars.ContextVar(
    "causaltrace_verification_scope", default=None
)


@contextmanager
def verification_scope(factory: Callable[[], Any], verify: Any) -> Iterator[None]:
    """Let diagnoses inside the block verify candidates by replay with this factory and verifier."""
    token = _SCOPE.set((factory, verify))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _inputs(options: Mapping[str, Any]) -> tuple[Callable[[], Any], Any] | None:
    if options.get("factory") is not None:
        return options["factory"], options.get("verify")
    return _SCOPE.get()


async def _repair(run: Run, factory: Any, verify: Any, candidates: Sequence[Any] | None, ctx: DiagnosisContext,
                  *, exhaustive: bool, k: int, agent_first: bool = True) -> Any:
    from causaltrace.replay.repair import repair

    return await repair(run, factory, verify, candidates, k, model=ctx.judge, store=False, exhaustive=exhaustive,
                        agent_first=agent_first)


async def _verification_hook(ctx: DiagnosisContext, candidates: Sequence[Candidate]) -> VerificationResult | None:
    inputs = _SCOPE.get()
    if inputs is None or ctx.run.outcome.status != "failure":
        return None
    factory, verify = inputs
    top = [c.step_id for c in candidates[:5]]
    result = await _repair(ctx.run, factory, verify, top, ctx, exhaustive=False, k=3)
    artifact = {"tried": top, "replays": result.replays, "flipped": result.decisive.step_id if result.decisive else None}
    if result.decisive is None or result.decisive.best is None:
        return None
    best = result.decisive.best
    step = ctx.run.step(result.decisive.step_id)
    return VerificationResult(
        step_id=step.step_id,
        explanation=(
            f"Replay verified: correcting step {step.index} ({best.intervention.description}) flips the run to "
            "success; no earlier top candidate's correction does."
        ),
        artifact=artifact,
    )


class CausalFlowMethod(Method):
    """``causalflow``: CRS by intervention and replay over every candidate step (module docstring)."""

    name: ClassVar[str] = "causalflow"
    ranks: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("propose", "replay", "consensus")
    llm_stage_ids: ClassVar[tuple[str, ...]] = ("propose", "consensus")
    uses_model: ClassVar[bool] = True
    default_options: ClassVar[Mapping[str, Any]] = {"factory": None, "verify": None, "k": 3}

    async def diagnose(self, ctx: DiagnosisContext) -> Finding:
        inputs = _inputs(self.options)
        if inputs is None:
            raise MethodFailed("causalflow replays the run: give --factory and --verify (or factory=/verify=)")
        if not has_recording(ctx.run):
            raise MethodFailed("causalflow needs a recorded run (this one was imported or recorded with record=False)")
        factory, verify = inputs
        result = await _repair(ctx.run, factory, verify, None, ctx, exhaustive=True, k=int(self.options["k"]),
                               agent_first=False)  # the published method: every step a candidate (SEEDS §7.5)
        crs = {a.step_id: a.crs for a in result.attempts}
        ctx.record("replay", {"crs": crs, "replays": result.replays,
                              "tried": result.diagnosis.artifacts.get("replays", [])})
        ctx.record("consensus", {"skipped": "no model" if ctx.judge is None else "not implemented: CRS decides"})
        flagged = [a for a in result.attempts if a.crs == 1.0]
        if not flagged:
            raise MethodFailed(f"no correction of any of {len(result.attempts)} steps flipped the outcome "
                               f"({result.replays} replays)")
        ranked = sorted(flagged, key=lambda a: (a.index, -(a.minimality or 0.0)))
        first = ctx.run.step(ranked[0].step_id)
        candidates = [
            Candidate(step_id=a.step_id, index=a.index, agent=ctx.run.step(a.step_id).agent,
                      score=round(0.5 + 0.5 * (a.minimality or 0.0), 4), reasons=("CRS = 1",))
            for a in ranked
        ]
        return Finding(
            step_index=first.index,
            agent=first.agent,
            explanation=result.diagnosis.explanation,
            evidence=list(result.diagnosis.evidence),
            candidates=candidates,
            confidence=1.0,
            verified_by="replay",
        )


register_method(CausalFlowMethod.name, CausalFlowMethod)
register_verification_hook(_verification_hook)
