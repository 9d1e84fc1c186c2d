"""CausalFlow as an attribution method, and the replay verification hook of the ``graph`` method.

* ``--method causalflow`` (SEEDS §4 and §7.5): attribution by the Causal Responsibility Score — every candidate
  step is intervened on (K = 3 LLM proposals at the configured temperature when a model is given), each proposal's
  outcome re-executed; CRS(step) = 1 when one flips the run; among flips the most minimal proposal is kept
  (position-wise minimality, Eq. 2); the decisive error is the EARLIEST step with CRS = 1 that stands. Exhaustive
  over all steps, the last included (the seed has no pre-filter), so it is the costly reference the graph-guided
  methods are compared with. Two paths:

  - **replayed** (the run has a Recording): proposals are the LLM's (with a model) plus the deterministic
    mutations, each REPLAYED with the user's factory and verifier (``verified_by="replay"``). A deterministic
    executor decides, so the consensus is skipped, as the paper does where one exists (its artifact says so).
  - **predicted** (no Recording: an imported log, a Who&When trace): a model is required; proposals are the LLM's
    only (a deterministic mutation would cost one prediction each), each outcome PREDICTED
    (:mod:`causaltrace.replay.predictive`, ``verified_by="prediction"``), and every CRS-flagged step goes through
    the critic / meta-critic consensus (:mod:`causaltrace.replay.consensus`: the paper's formula by default,
    ``consensus_formula="code"`` or ``$CAUSALTRACE_CONSENSUS_FORMULA=code`` for the code's, ``tau_c`` = 0.5). A
    flagged step the critics reject is dropped; the decisive step is the earliest CONFIRMED one. When none is confirmed, the earliest flagged step is
    reported unconfirmed (SEEDS §4.5.7's fallback), its low consensus as the confidence, and the explanation says
    so. ``Diagnosis.confidence`` is the decisive step's consensus score; ``artifacts["consensus"]`` holds every
    critiqued step's score and both verdicts. The ground-truth answer reaches the prompts only with
    ``with_answer`` (``--with-answer``), as for the other methods. ``--ablate consensus`` keeps CRS alone.
    Calls, counted per stage in the Diagnosis's cost: ``propose`` K per step, ``predict`` 1 per distinct proposal
    until the step's first predicted flip, ``consensus`` 2 per flagged step — at most 2K + 2 per step, so
    hundreds on a 50-step trace. The search is not bounded in time unless ``max_seconds`` is given (a time bound
    would make the answer depend on the machine's speed), nor in predictions unless ``max_replays`` is given (each
    prediction counts as one, as in ``repair``); a search that stopped there says so.
  ``exhaustive=False`` stops either path at the first step that flips (replayed) or is confirmed (predicted): the
  decisive step is the same — the earliest such step — only the later candidates are not searched (the local-model
  plumbing test's bound, with ``k=1``).

  Both paths try every candidate step: no provenance pruning (``prune=False``), the published method's exhaustive
  CRS (``repair`` and ``graph``'s verification prune).

* The verification hook (ARCHITECTURE "The default attribution method", step 6): when ``graph`` diagnoses a
  recorded run inside :func:`verification_scope`, its top candidates are verified by replay and the earliest that
  flips becomes the decisive step (``verified_by="replay"``).

The replayed path needs the user's factory and verifier; the CLI passes ``--factory`` / ``--verify`` through
:func:`verification_scope`, and code may pass ``factory=`` / ``verify=`` options to ``diagnose(..., method=
"causalflow")``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from causaltrace.attribution.engine import (
    Conclusion,
    DiagnosisContext,
    Method,
    MethodFailed,
    VerificationResult,
    register_verification_hook,
)
from causaltrace.protocols import register_method
from causaltrace.replay.consensus import TAU_C, consensus_artifact, consensus_settings, current_settings
from causaltrace.replay.executor import has_recording
from causaltrace.schema import Candidate, EvidenceItem, Run

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


async def _repair(*args: Any, **kwargs: Any) -> Any:
    """:func:`causaltrace.replay.repair.repair`, imported on first use (``import causaltrace`` stays light)."""
    from causaltrace.replay.repair import repair

    return await repair(*args, **kwargs)


def _inputs(options: Mapping[str, Any]) -> tuple[Callable[[], Any], Any] | None:
    if options.get("factory") is not None:
        return options["factory"], options.get("verify")
    return _SCOPE.get()


async def _verification_hook(ctx: DiagnosisContext, candidates: Sequence[Candidate]) -> VerificationResult | None:
    inputs = _SCOPE.get()
    if inputs is None or ctx.run.outcome.status != "failure":
        return None
    factory, verify = inputs
    top = [c.step_id for c in candidates[:5]]
    result = await _repair(ctx.run, factory, verify, top, 3, model=ctx.judge, store=False, exhaustive=False)
    artifact = {"tried": top, "replays": result.replays, "flipped": result.decisive.step_id if result.decisive else None}
    if result.decisive is None or result.decisive.best is None:
        return None
    best = result.decisive.best
    step = ctx.run.step(result.decisive.step_id)
    return VerificationResult(
        step_id=step.step_id,
        explanation=(
            f"Replay verified: correcting step {step.index} ({best.intervention.description}) flips the run to "
            "success; no earlier top candidate's correction does." if best.intervention.basis == "correction" else
            f"Replay: the run succeeds if step {step.index} does this instead ({best.intervention.description}); "
            "nothing shows the step was wrong (no finding derives the edit): an alternative, not a verified error."
        ),
        artifact=artifact,
        basis=best.intervention.basis,
    )


class _CountingJudge:
    """The diagnosis's judge, every call counted in its cost under the caller's stage id (``ctx.ask``)."""

    def __init__(self, ctx: DiagnosisContext) -> None:
        self._ctx = ctx
        self.name = ctx.require_judge().name

    async def ask(self, messages: Any, output: Any, *, stage_id: str, **kwargs: Any) -> Any:
        return await self._ctx.ask(stage_id, messages, output, fallback=kwargs.get("fallback"))


class CausalFlowMethod(Method):
    """``causalflow``: CRS by intervention over every candidate step, replayed or predicted (module docstring)."""

    name: ClassVar[str] = "causalflow"
    ranks: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("propose", "replay", "predict", "consensus")
    llm_stage_ids: ClassVar[tuple[str, ...]] = ("propose", "predict", "consensus")
    uses_model: ClassVar[bool] = True
    default_options: ClassVar[Mapping[str, Any]] = {"factory": None, "verify": None, "k": 3,
                                                     "consensus_formula": None, "tau_c": TAU_C, "max_seconds": None,
                                                     "exhaustive": True, "max_replays": None}

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        if not has_recording(ctx.run):
            return await self._predicted(ctx)
        inputs = _inputs(self.options)
        if inputs is None:
            raise MethodFailed("causalflow replays the run: give --factory and --verify (or factory=/verify=)")
        factory, verify = inputs
        judge = _CountingJudge(ctx) if ctx.judge is not None else None
        result = await _repair(ctx.run, factory, verify, None, int(self.options["k"]), model=judge, store=False,
                              exhaustive=bool(self.options["exhaustive"]), agent_first=False,
                              prune=False)  # every step (SEEDS §7.5)
        crs = {a.step_id: a.crs for a in result.attempts}
        ctx.record("replay", {"crs": crs, "replays": result.replays,
                              "tried": result.diagnosis.artifacts.get("replays", [])})
        ctx.record("consensus", {"skipped": "replay-verified: a deterministic executor decides (SEEDS §4.4.1)"})
        flagged = [a for a in result.attempts if a.crs == 1.0]
        if not flagged:
            raise MethodFailed(f"no correction of any of {len(result.attempts)} steps flipped the outcome "
                               f"({result.replays} replays)")
        ranked = sorted(flagged, key=lambda a: (a.index, -(a.minimality or 0.0)))
        first = ctx.run.step(ranked[0].step_id)
        # issue 32 item 5: the published search's flips are labelled like repair's — a correction proves an error,
        # an alternative only another way
        first_basis = ranked[0].best.intervention.basis if ranked[0].best is not None else "alternative"
        candidates = [
            Candidate(step_id=a.step_id, index=a.index, agent=ctx.run.step(a.step_id).agent,
                      score=round(0.5 + 0.5 * (a.minimality or 0.0), 4), reasons=("CRS = 1",))
            for a in ranked
        ]
        return Conclusion(
            step_index=first.index,
            agent=first.agent,
            explanation=result.diagnosis.explanation,
            evidence=list(result.diagnosis.evidence),
            candidates=candidates,
            confidence=1.0 if first_basis == "correction" else None,
            verified_by="replay",
            basis="correction" if first_basis == "correction" else "alternative",
        )

    async def _predicted(self, ctx: DiagnosisContext) -> Conclusion:
        """The predictive path (module docstring): LLM proposals, predicted outcomes, the critics' consensus."""
        judge = _CountingJudge(ctx)
        if ctx.run.outcome.status != "failure":
            raise MethodFailed(f"causalflow corrects a failed run; this one's outcome is {ctx.run.outcome.status!r}")
        run = ctx.run if ctx.with_answer else _without_answer(ctx.run)
        formula = self.options["consensus_formula"] or current_settings().formula
        with consensus_settings(formula=formula, tau=float(self.options["tau_c"]),
                                enabled=ctx.enabled("consensus")):
            result = await _repair(run, None, None, None, int(self.options["k"]), model=judge, store=False,
                                  exhaustive=bool(self.options["exhaustive"]), agent_first=False, mutation_budget=0,
                                  prune=False, max_seconds=self.options["max_seconds"],
                                  max_replays=self.options["max_replays"])
        predictions = sum(len(a.replays) for a in result.attempts)
        ctx.record("replay", {"verified_by": "prediction", "crs": {a.step_id: a.crs for a in result.attempts},
                              "predictions": predictions, "budget_exhausted": result.budget_exhausted,
                              "tried": result.diagnosis.artifacts.get("replays", [])})
        artifact = consensus_artifact(result.attempts).get("consensus")
        ctx.record("consensus", artifact if artifact is not None else {
            "skipped": "ablated" if not ctx.enabled("consensus") else "no step was flagged"})
        flagged = [a for a in result.attempts if a.crs == 1.0]
        if not flagged:
            raise MethodFailed(f"no correction of any of {len(result.attempts)} steps is predicted to flip the "
                               f"outcome ({predictions} predictions)")
        finding = _predicted_conclusion(ctx.run, flagged)
        if result.budget_exhausted:
            bound = (f"{self.options['max_seconds']} s" if result.budget_exhausted == "seconds"
                     else f"{self.options['max_replays']} predictions")
            finding.explanation += (f" The search stopped when its {bound} ran out, after "
                                    f"{len(result.attempts)} steps.")
        return finding


def _without_answer(run: Run) -> Run:
    """``run`` with its ground-truth answer hidden from the prompts (``with_answer`` off)."""
    ann = run.annotations
    if ann is None or ann.ground_truth is None:
        return run
    return run.model_copy(update={"annotations": ann.model_copy(update={"ground_truth": None})})


def _score(attempt: Any) -> float | None:
    best = attempt.best
    return best.consensus.score if best is not None and best.consensus is not None else None


def _confirmed(attempt: Any) -> bool:
    best = attempt.best
    return best is None or best.consensus is None or best.consensus.confirmed


def _reason(attempt: Any) -> str:
    best = attempt.best
    verdict = best.consensus if best is not None else None
    if verdict is None:
        return "CRS = 1 (predicted)"
    said = ", ".join(f"{c.role.replace('_', '-')} {c.agreement} {c.confidence:.2f}" for c in verdict.critiques)
    return (f"CRS = 1 (predicted); consensus {verdict.score:.2f} {'>=' if verdict.confirmed else '<'} "
            f"tau_c {verdict.tau:g} ({said})")


def _predicted_conclusion(run: Run, flagged: list[Any]) -> Conclusion:
    """The earliest confirmed flagged step (else the earliest flagged, unconfirmed), candidates confirmed first."""
    ranked = sorted(flagged, key=lambda a: (not _confirmed(a), a.index))
    chosen = ranked[0]
    step = run.step(chosen.step_id)
    best = chosen.best
    assert best is not None
    score = _score(chosen)
    how = (f"Correcting step #{step.index} ({step.kind} by {step.agent or '-'}) — {best.intervention.description} "
           "— is PREDICTED to flip the run to success (no recording to replay)")
    rejected = [a for a in flagged if not _confirmed(a)]
    if score is None:
        explanation = f"{how}; it is the earliest step whose correction is (the consensus was ablated)."
    elif _confirmed(chosen):
        explanation = f"{how}; the critics' consensus {score:.2f} confirms it; it is the earliest confirmed step."
    else:
        explanation = (f"{how}, but the critics' consensus {score:.2f} is below tau_c: no flagged step was "
                       "confirmed, so the earliest flagged step is reported UNCONFIRMED.")
    if rejected and _confirmed(chosen):
        explanation += " The critics rejected the flagged step(s) " + ", ".join(
            f"#{a.index} ({_score(a):.2f})" for a in rejected if _score(a) is not None) + "."
    evidence = [EvidenceItem(step_id=step.step_id, index=step.index, role="introduced",
                             note=best.intervention.description)]
    last = [s for s in run.steps if s.index > step.index and s.kind in ("message", "final_answer")]
    if last:
        evidence.append(EvidenceItem(step_id=last[-1].step_id, index=last[-1].index, role="exposed",
                                     note="final output"))
    candidates = [Candidate(step_id=a.step_id, index=a.index, agent=run.step(a.step_id).agent,
                            score=_score(a) if _score(a) is not None else 0.5, reasons=(_reason(a),))
                  for a in ranked]
    return Conclusion(step_index=step.index, agent=step.agent, explanation=explanation, evidence=evidence,
                   candidates=candidates, confidence=score, verified_by="prediction")


register_method(CausalFlowMethod.name, CausalFlowMethod)
register_verification_hook(_verification_hook)
