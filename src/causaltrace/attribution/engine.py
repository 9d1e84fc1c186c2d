"""The attribution engine: ``diagnose(run, method, model) -> Diagnosis`` over a registry of methods built from stages.

Usage::

    diagnosis = await causaltrace.diagnose(run)                              # "graph", no model: deterministic
    diagnosis = await causaltrace.diagnose(run, "all-at-once", "gpt-4o-mini", with_answer=True)
    diagnosis = causaltrace.diagnose_sync(run, "binary-search", model="local")

Concepts (issue 5; ARCHITECTURE "The default attribution method", SEEDS §8):

* A **method** is registered by name with :func:`causaltrace.protocols.register_method` (a factory — usually the
  :class:`Method` subclass itself — called with the method's options, returning an object with an async
  ``diagnose(ctx) -> Conclusion``). The engine never changes when a method is added; ``replay/`` registers
  ``causalflow`` the same way.
* A method is a small composition of **stages** (:mod:`causaltrace.attribution.context`: :class:`Stage`,
  :class:`DiagnosisContext`, :class:`Method`, :class:`Conclusion`, re-exported here). ``ablate=("stage_id", …)``
  switches stages off (an unknown id is a UserError listing the method's stages).
* A method returns a :class:`Conclusion` or raises :class:`MethodFailed`; the engine adds run id, method, model, cost
  and artifacts. A :class:`~causaltrace.exceptions.JudgeError` (a failed call, or an answer that stayed invalid
  after the bounded repairs) or ``MethodFailed`` becomes a Diagnosis with ``failed=True`` and ``failure_reason`` —
  never a crash and never a guess. UserErrors (no model for a method that needs one, the kill switch) propagate.
* The **verification hook** (ARCHITECTURE: ``replay/`` registers it; the ``graph`` method's step 6 calls it when
  the run has a Recording): :func:`register_verification_hook`.

Decisions: ``model=None`` falls back to ``$CAUSALTRACE_MODEL``; ``Diagnosis.model`` names the model only when the
method used one; ``Diagnosis.artifacts["settings"]`` records ``with_answer``, ``ablate`` and the method options;
cache hits count as calls in ``Cost`` (with ``Cost.cached_calls`` saying how many were served from the cache).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

from causaltrace.attribution.context import (
    Conclusion,
    DiagnosisContext,
    Method,
    MethodFailed,
    Stage,
    VerificationHook,
    VerificationResult,
    register_verification_hook,
    verification_hook,
)
from causaltrace.attribution.judge import Judge, JudgeModel
from causaltrace.collector.speakers import mark_human_speakers
from causaltrace.collector.whowhen import current_form
from causaltrace.exceptions import AttributionError, UserError
from causaltrace.protocols import get_method, method_names
from causaltrace.schema import Cost, Diagnosis, Run, Step, VerifiedBy

__all__ = [
    "DiagnosisContext",
    "Conclusion",
    "Method",
    "MethodFailed",
    "ModelArg",
    "Stage",
    "VerificationHook",
    "VerificationResult",
    "available_methods",
    "below_confidence",
    "diagnose",
    "diagnose_sync",
    "ensure_builtin_methods",
    "register_verification_hook",
    "resolve_judge",
    "verification_hook",
]

#: What ``model=`` accepts: a litellm model name, ``"local"``, a judge backend, a shared :class:`Judge`, or None.
ModelArg = str | JudgeModel | Judge | None


def ensure_builtin_methods() -> None:
    """Register the built-in methods (importing :mod:`causaltrace.attribution.methods` registers them).

    Lazy, so ``import causaltrace`` does not build every method's output models; the engine is the only module
    that imports the methods package, and no method or stage imports the engine (no import circle).
    """
    import causaltrace.attribution.methods  # noqa: F401


def resolve_judge(model: ModelArg, judge_options: Mapping[str, Any] | None = None) -> Judge | None:
    """A Judge for ``model`` (``None`` → ``$CAUSALTRACE_MODEL`` → no judge); a Judge passes through unchanged."""
    if isinstance(model, Judge):
        return model
    if model is None:
        env = os.environ.get("CAUSALTRACE_MODEL", "").strip()
        if not env:
            return None
        model = env
    return Judge(model, **dict(judge_options or {}))


async def diagnose(
    run: Run,
    method: str = "graph",
    model: ModelArg = None,
    *,
    with_answer: bool = False,
    ablate: Sequence[str] = (),
    judge_options: Mapping[str, Any] | None = None,
    human_speakers: Iterable[str] | None = None,
    min_confidence: float | None = None,
    force: bool = False,
    store: bool = True,
    **options: Any,
) -> Diagnosis:
    """Diagnose a failed run: which agent made the decisive error, at which step, why, and how sure we are.

    Args:
        run: the run (live, imported, or from the store).
        method: a registered method name (``graph`` by default; see :func:`causaltrace.protocols.method_names`).
        model: a litellm model name, ``"local"``, a :class:`Judge` (shared across diagnoses), a judge backend such
            as :class:`~causaltrace.testing.judges.FunctionJudge`, or None (``$CAUSALTRACE_MODEL``).
        with_answer: put the run's ground-truth answer in the prompts (Who&When's "with ground truth" setting).
        ablate: stage ids to switch off.
        judge_options: keyword arguments for :class:`Judge` (``max_tokens``, ``timeout_s``, ``concurrency``…).
        human_speakers: the speakers that count as humans who cannot be at fault (default: the task giver only,
            so a simulated user can be blamed; :func:`causaltrace.collector.speakers.mark_human_speakers`).
        min_confidence: below this confidence the Diagnosis names no decisive step (its candidates stay).
        force: analyse a run whose outcome is ``success`` (otherwise a failed Diagnosis says there is nothing to do).
        store: save the Diagnosis in the default store when the run is stored there, as the CLI does
            (``store=False`` opts out; the benchmarks and ``watch`` do).
        **options: the method's own options.

    Returns:
        The Diagnosis (``failed=True`` with ``failure_reason`` when the method or its model could not answer).
    """
    run = _prepared(run, human_speakers)
    if run.outcome.status == "success" and not force:
        return _stored(Diagnosis(run_id=run.run_id, method=method, failed=True, created_at=datetime.now(UTC),
                                 failure_reason="the run succeeded (its outcome is success): nothing to diagnose; "
                                                "force=True (--force) analyses it anyway"), store)
    ensure_builtin_methods()
    factory = get_method(method)
    impl = factory(**options)
    needs_model = bool(getattr(impl, "needs_model", False))
    uses_model = needs_model or bool(getattr(impl, "uses_model", False))
    judge = resolve_judge(model, judge_options) if uses_model else None
    ctx = DiagnosisContext(run, method=method, judge=judge, with_answer=with_answer, ablate=ablate,
                           options=getattr(impl, "options", options))
    if needs_model and judge is None:
        ctx.require_judge()
    _check_ablate(method, impl, ablate)
    if with_answer and ctx.answer is None and uses_model:
        raise UserError(f"with_answer needs a ground-truth answer, and run {run.run_id!r} has none")
    ctx.record("settings", {"with_answer": with_answer, "ablate": sorted(ablate),
                            "options": _jsonable(getattr(impl, "options", options))})
    started = time.perf_counter()
    conclusion: Conclusion | None = None
    failure: str | None = None
    try:
        conclusion = await impl.diagnose(ctx)
    except AttributionError as exc:
        failure = f"{type(exc).__name__}: {exc.message}"
        body = getattr(exc, "body", None)
        if body:
            ctx.record("failure", {"error": type(exc).__name__, "body": str(body)[:2000]})
    seconds = time.perf_counter() - started
    cost = _cost(ctx, seconds)
    model_name = judge.name if (judge is not None and uses_model) else None
    default_verified: VerifiedBy = "prediction" if ctx.model_used else "heuristic"
    now = datetime.now(UTC)
    if conclusion is None:
        return _stored(Diagnosis(run_id=run.run_id, method=method, model=model_name, failed=True,
                                 failure_reason=failure, verified_by=default_verified, artifacts=ctx.artifacts,
                                 cost=cost, created_at=now), store)
    found = below_confidence(_to_diagnosis(run, method, model_name, conclusion, ctx, cost, now), min_confidence)
    return _stored(_assumed_anchor(run, found), store)


def _cost(ctx: DiagnosisContext, seconds: float) -> Cost:
    return Cost(
        llm_calls=ctx.llm_calls,
        calls_by_stage=dict(ctx.calls_by_stage),
        input_tokens=ctx.input_tokens,
        output_tokens=ctx.output_tokens,
        seconds=round(seconds, 6),
        usd=(round(ctx.usd, 8) if ctx.usd is not None else None) if ctx.model_used else None,
        cached_calls=ctx.cached_calls,
    )


def _check_ablate(method: str, impl: Any, ablate: Sequence[str]) -> None:
    stage_ids = tuple(getattr(impl, "stage_ids", ()))
    unknown = sorted(set(ablate) - set(stage_ids))
    if unknown:
        raise UserError(
            f"method {method!r} has no stage(s) {', '.join(map(repr, unknown))} to ablate; its stages: "
            f"{', '.join(stage_ids) or 'none'}"
        )


def _assumed_anchor(run: Run, d: Diagnosis) -> Diagnosis:
    """A run whose outcome is ``unknown`` / ``incomplete`` (an imported log, no verifier) is diagnosed as if it
    failed: the Diagnosis says so and names the failure anchor it assumed (issue 19 item 5)."""
    status = run.outcome.status
    if status not in ("unknown", "incomplete"):
        return d
    anchor = d.artifacts.get("failure_anchor")
    where = ""
    if isinstance(anchor, dict) and anchor.get("index") is not None:
        where = f" at step {anchor.get('index')} ({anchor.get('rule', 'the failure anchor')})"
    note = f"The run's outcome is {status}: this diagnosis assumed it failed, with the failure anchored{where}."
    artifacts = {**d.artifacts, "assumed_failure": {"outcome": status, "anchor": anchor}}
    return d.model_copy(update={"explanation": f"{d.explanation} {note}".strip(), "artifacts": artifacts})


def _stored(d: Diagnosis, store: bool) -> Diagnosis:
    """Save ``d`` in the default store when ``store`` and the run is stored there (never creating a store; a store
    that cannot be written is logged, never raised: diagnosing does not depend on it)."""
    if not store:
        return d
    from causaltrace.collector.store import Store
    from causaltrace.config import default_db_path

    try:
        if not default_db_path().exists():
            return d
        with Store() as s:
            if s.has_run(d.run_id):
                s.save_diagnosis(d)
    except Exception as exc:  # pragma: no cover - a broken or locked store
        import logging

        logging.getLogger("causaltrace").warning("causaltrace: the diagnosis was not stored: %s", exc)
    return d


def below_confidence(diagnosis: Diagnosis, min_confidence: float | None) -> Diagnosis:
    """``diagnosis`` without a decisive step when its confidence is below ``min_confidence`` (its candidates, with
    their evidence, stay: the answer is "uncertain", not "step N")."""
    if min_confidence is None or diagnosis.confidence is None or diagnosis.confidence >= min_confidence:
        return diagnosis
    why = (f"uncertain: confidence {diagnosis.confidence:.2f} is below the minimum {min_confidence:.2f}; "
           f"no decisive step. Ranked first: {diagnosis.explanation}")
    return diagnosis.model_copy(update={"decisive_step_id": None, "decisive_step_index": None, "agent": None,
                                        "category": None, "explanation": why})


def _prepared(run: Run, human_speakers: Iterable[str] | None) -> Run:
    """The run in its importer's current form (a Who&When run stored before issue 32 gets the kinds, values and
    dependencies its importer derives today: :func:`causaltrace.collector.whowhen.current_form`), with its human
    speakers marked (a comma-separated string is accepted too)."""
    if not isinstance(run, Run):
        raise UserError(f"diagnose expects a causaltrace Run, got {type(run).__name__}")
    if isinstance(human_speakers, str):
        human_speakers = [n for n in human_speakers.split(",") if n.strip()]
    return mark_human_speakers(current_form(run), human_speakers)


def _to_diagnosis(
    run: Run, method: str, model: str | None, f: Conclusion, ctx: DiagnosisContext, cost: Cost, now: datetime
) -> Diagnosis:
    step: Step | None = None
    if f.step_id is not None:
        step = run.step(f.step_id)
    elif f.step_index is not None:
        step = run.step_at(f.step_index)
    return Diagnosis(
        run_id=run.run_id,
        method=method,
        model=model,
        decisive_step_id=step.step_id if step else None,
        decisive_step_index=step.index if step else None,
        agent=f.agent if f.agent is not None else (step.agent if step else None),
        category=f.category,
        explanation=f.explanation,
        evidence=tuple(f.evidence),
        candidates=tuple(f.candidates),
        confidence=f.confidence,
        verified_by=f.verified_by,
        findings=tuple(f.findings),
        basis=f.basis,
        artifacts=ctx.artifacts,
        cost=cost,
        created_at=now,
    )


def _jsonable(value: Any) -> JsonValue:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return repr(value)


def diagnose_sync(run: Run, method: str = "graph", model: ModelArg = None, **kwargs: Any) -> Diagnosis:
    """The sync twin of :func:`diagnose` (runs it in a fresh event loop; in a worker thread if one is running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(diagnose(run, method, model, **kwargs))
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, diagnose(run, method, model, **kwargs)).result()


def available_methods() -> list[str]:
    """Names of every registered method (built-ins included)."""
    ensure_builtin_methods()
    return method_names()

