"""The attribution engine: ``diagnose(run, method, model) -> Diagnosis`` over a registry of methods built from stages.

Usage::

    diagnosis = await causaltrace.diagnose(run)                              # "graph", no model: deterministic
    diagnosis = await causaltrace.diagnose(run, "all-at-once", "gpt-4o-mini", with_answer=True)
    diagnosis = causaltrace.diagnose_sync(run, "binary-search", model="local")

Concepts (issue 5; ARCHITECTURE "The default attribution method", SEEDS §8):

* A **method** is registered by name with :func:`causaltrace.protocols.register_method` (a factory — usually the
  :class:`Method` subclass itself — called with the method's options, returning an object with an async
  ``diagnose(ctx) -> Finding``). The engine never changes when a method is added; ``replay/`` registers
  ``causalflow`` the same way.
* A method is a small composition of **stages**. A :class:`Stage` has a ``stage_id`` (SEEDS §8's snake_case ids);
  its LLM calls go through :meth:`DiagnosisContext.ask`, which counts calls and tokens under that id in
  ``Cost.calls_by_stage``; its artifact lands in ``Diagnosis.artifacts[stage_id]``. Deterministic stages are
  memoised per diagnosis (:meth:`DiagnosisContext.run_stage`), so methods that share them compute them once.
  ``ablate=("stage_id", …)`` switches stages off (an unknown id is a UserError listing the method's stages).
* A method returns a :class:`Finding` (decisive step, agent, category, explanation, evidence, ranked candidates,
  ``verified_by``) or raises :class:`MethodFailed`; the engine adds run id, method, model, cost and artifacts.
  A :class:`~causaltrace.exceptions.JudgeError` (a failed call, or an answer that stayed invalid after the bounded
  repairs) or ``MethodFailed`` becomes a Diagnosis with ``failed=True`` and ``failure_reason`` — never a crash and
  never a guess. UserErrors (no model for a method that needs one, the kill switch) propagate.
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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, JsonValue

from causaltrace.attribution.llm import CallRecord, Fallback, Judge, JudgeModel
from causaltrace.exceptions import AttributionError, UserError
from causaltrace.protocols import get_method, method_names
from causaltrace.schema import Candidate, Cost, Diagnosis, EvidenceItem, Run, Step, VerifiedBy

__all__ = [
    "DiagnosisContext",
    "available_methods",
    "Finding",
    "Method",
    "MethodFailed",
    "Stage",
    "VerificationHook",
    "VerificationResult",
    "diagnose",
    "diagnose_sync",
    "register_verification_hook",
    "resolve_judge",
    "verification_hook",
]

T = TypeVar("T")
ModelArg = str | JudgeModel | Judge | None


class MethodFailed(AttributionError):
    """Raised by a method that cannot produce an answer (the engine returns a Diagnosis marked failed)."""


@dataclass(kw_only=True)
class Finding:
    """What a method concludes; the engine turns it into a Diagnosis (``step_index`` or ``step_id`` suffices)."""

    step_index: int | None = None
    step_id: str | None = None
    agent: str | None = None
    category: str | None = None
    explanation: str = ""
    evidence: Sequence[EvidenceItem] = ()
    candidates: Sequence[Candidate] = ()
    confidence: float | None = None
    verified_by: VerifiedBy = "heuristic"


@dataclass(kw_only=True)
class VerificationResult:
    """What the replay verification hook concluded (ARCHITECTURE "The default attribution method", step 6)."""

    step_id: str
    explanation: str = ""
    category: str | None = None
    artifact: JsonValue = None


#: ``async hook(ctx, candidates) -> VerificationResult | None``; registered by ``replay/``.
VerificationHook = Callable[["DiagnosisContext", Sequence[Candidate]], Awaitable[VerificationResult | None]]
_VERIFICATION_HOOK: list[VerificationHook] = []


def register_verification_hook(hook: VerificationHook | None) -> None:
    """Install (or, with None, remove) the replay verification hook the ``graph`` method calls when present."""
    _VERIFICATION_HOOK.clear()
    if hook is not None:
        _VERIFICATION_HOOK.append(hook)


def verification_hook() -> VerificationHook | None:
    """The registered verification hook, if any."""
    return _VERIFICATION_HOOK[0] if _VERIFICATION_HOOK else None


# ---------------------------------------------------------------------------------------------------- stages


class Stage(Generic[T]):
    """A named unit of a method. Subclasses set ``stage_id`` and implement :meth:`run`.

    ``artifact(result)`` is what the Diagnosis keeps under ``artifacts[stage_id]`` (JSON); ``skipped(ctx)`` is the
    result used when the stage is ablated. Deterministic stages set ``memoise = True`` so that several methods (or
    several uses in one method) share one computation per diagnosis.
    """

    stage_id: ClassVar[str] = ""
    uses_model: ClassVar[bool] = False
    memoise: ClassVar[bool] = True

    async def run(self, ctx: DiagnosisContext) -> T:
        raise NotImplementedError

    def artifact(self, result: T) -> JsonValue:
        to_json = getattr(result, "to_json", None)
        return to_json() if callable(to_json) else None

    def skipped(self, ctx: DiagnosisContext) -> T:
        raise MethodFailed(f"stage {self.stage_id!r} is ablated and the method cannot run without it")


class DiagnosisContext:
    """Everything a method and its stages share during one diagnosis: the run, the judge, cost and artifacts."""

    def __init__(
        self,
        run: Run,
        *,
        method: str,
        judge: Judge | None,
        with_answer: bool = False,
        ablate: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.run = run
        self.method = method
        self.judge = judge
        self.with_answer = with_answer
        self.ablate = frozenset(ablate)
        self.options = dict(options or {})
        self.artifacts: dict[str, JsonValue] = {}
        self.calls_by_stage: dict[str, int] = {}
        self.llm_calls = 0
        self.cached_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.usd: float | None = 0.0
        self.model_used = False
        self._memo: dict[str, Any] = {}

    # -- model -----------------------------------------------------------------------------------------------------

    def require_judge(self) -> Judge:
        """The judge, or a UserError naming ``--model`` (the engine checks this up front for ``needs_model``)."""
        if self.judge is None:
            raise UserError(
                f"method {self.method!r} needs a model: pass model=... (CLI: --model MODEL, e.g. --model local or "
                "--model gpt-4o-mini; or set CAUSALTRACE_MODEL)"
            )
        return self.judge

    @property
    def answer(self) -> str | None:
        """The ground-truth answer when ``with_answer`` is on (None otherwise)."""
        if not self.with_answer:
            return None
        ann = self.run.annotations
        return ann.ground_truth if ann is not None else None

    def record_call(self, call: CallRecord) -> None:
        """Add one model call (or cache hit) to the cost, under its stage id."""
        self.model_used = True
        self.llm_calls += 1
        self.cached_calls += int(call.cached)
        self.calls_by_stage[call.stage_id] = self.calls_by_stage.get(call.stage_id, 0) + 1
        self.input_tokens += call.input_tokens
        self.output_tokens += call.output_tokens
        if call.usd is None or self.usd is None:
            self.usd = None
        else:
            self.usd += call.usd

    async def ask(
        self,
        stage_id: str,
        messages: Sequence[Mapping[str, str]],
        output: type[BaseModel],
        *,
        fallback: Fallback | None = None,
    ) -> BaseModel:
        """One structured LLM judgment for ``stage_id`` (see :meth:`Judge.ask`); counted in the cost."""
        judge = self.require_judge()
        return await judge.ask(messages, output, stage_id=stage_id, on_call=self.record_call, fallback=fallback)

    # -- stages ----------------------------------------------------------------------------------------------------

    def enabled(self, stage_id: str) -> bool:
        """False when ``stage_id`` was ablated."""
        return stage_id not in self.ablate

    def record(self, stage_id: str, artifact: JsonValue) -> None:
        """Keep ``artifact`` under ``Diagnosis.artifacts[stage_id]``."""
        self.artifacts[stage_id] = artifact

    async def run_stage(self, stage: Stage[T]) -> T:
        """Run ``stage`` (memoised by id when the stage allows), recording its artifact; honours ablation."""
        sid = stage.stage_id
        if not self.enabled(sid):
            self.artifacts.setdefault(sid, {"ablated": True})
            return stage.skipped(self)
        if stage.memoise and sid in self._memo:
            return self._memo[sid]  # type: ignore[no-any-return]
        result = await stage.run(self)
        if stage.memoise:
            self._memo[sid] = result
        artifact = stage.artifact(result)
        if artifact is not None:
            self.artifacts[sid] = artifact
        return result

    def step(self, index: int) -> Step:
        """The run's step with this index."""
        return self.run.step_at(index)


# ---------------------------------------------------------------------------------------------------- methods


class Method:
    """Base class of attribution methods (a convenience: the registry accepts any factory with the same shape).

    Class attributes: ``name``; ``needs_model`` (no model → UserError naming ``--model``); ``uses_model`` (uses a
    model when one is given); ``ranks`` (its candidates are a ranking, so ``coverage_at_k`` is meaningful);
    ``stage_ids`` (what ``ablate`` may name); ``llm_stage_ids``; ``default_options``.
    """

    name: ClassVar[str] = ""
    needs_model: ClassVar[bool] = False
    uses_model: ClassVar[bool] = False
    ranks: ClassVar[bool] = False
    stage_ids: ClassVar[tuple[str, ...]] = ()
    #: The stages that call the model (the keys of the benchmark's ``calls_by_stage``); None = all of
    #: ``stage_ids`` when ``needs_model``, else none.
    llm_stage_ids: ClassVar[tuple[str, ...] | None] = None
    default_options: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(self.default_options))
        if unknown:
            known = ", ".join(sorted(self.default_options)) or "none"
            raise UserError(f"method {self.name!r} has no option(s) {', '.join(map(repr, unknown))}; known: {known}")
        self.options = {**self.default_options, **options}

    async def diagnose(self, ctx: DiagnosisContext) -> Finding:
        raise NotImplementedError


def _ensure_builtin_methods() -> None:
    import causaltrace.attribution.methods  # noqa: F401  (registers the built-in methods on import)


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
    **options: Any,
) -> Diagnosis:
    """Diagnose a failed run: which agent made the decisive error, at which step, why, and how sure we are.

    Args:
        run: the run (live, imported, or from the store).
        method: a registered method name (``graph`` by default; see :func:`causaltrace.protocols.method_names`).
        model: a litellm model name, ``"local"``, a :class:`Judge` (shared across diagnoses), a judge backend such
            as :class:`~causaltrace.attribution.testing_models.FunctionJudge`, or None (``$CAUSALTRACE_MODEL``).
        with_answer: put the run's ground-truth answer in the prompts (Who&When's "with ground truth" setting).
        ablate: stage ids to switch off.
        judge_options: keyword arguments for :class:`Judge` (``max_tokens``, ``timeout_s``, ``concurrency``…).
        **options: the method's own options.

    Returns:
        The Diagnosis (``failed=True`` with ``failure_reason`` when the method or its model could not answer).
    """
    if not isinstance(run, Run):
        raise UserError(f"diagnose expects a causaltrace Run, got {type(run).__name__}")
    _ensure_builtin_methods()
    factory = get_method(method)
    impl = factory(**options)
    needs_model = bool(getattr(impl, "needs_model", False))
    uses_model = needs_model or bool(getattr(impl, "uses_model", False))
    judge = resolve_judge(model, judge_options) if uses_model else None
    ctx = DiagnosisContext(run, method=method, judge=judge, with_answer=with_answer, ablate=ablate,
                           options=getattr(impl, "options", options))
    if needs_model and judge is None:
        ctx.require_judge()
    stage_ids = tuple(getattr(impl, "stage_ids", ()))
    unknown = sorted(set(ablate) - set(stage_ids))
    if unknown:
        raise UserError(
            f"method {method!r} has no stage(s) {', '.join(map(repr, unknown))} to ablate; its stages: "
            f"{', '.join(stage_ids) or 'none'}"
        )
    if with_answer and ctx.answer is None and uses_model:
        raise UserError(f"with_answer needs a ground-truth answer, and run {run.run_id!r} has none")
    ctx.record("settings", {"with_answer": with_answer, "ablate": sorted(ablate),
                            "options": _jsonable(getattr(impl, "options", options))})
    started = time.perf_counter()
    finding: Finding | None = None
    failure: str | None = None
    try:
        finding = await impl.diagnose(ctx)
    except AttributionError as exc:
        failure = f"{type(exc).__name__}: {exc.message}"
        body = getattr(exc, "body", None)
        if body:
            ctx.record("failure", {"error": type(exc).__name__, "body": str(body)[:2000]})
    seconds = time.perf_counter() - started
    cost = Cost(
        llm_calls=ctx.llm_calls,
        calls_by_stage=dict(ctx.calls_by_stage),
        input_tokens=ctx.input_tokens,
        output_tokens=ctx.output_tokens,
        seconds=round(seconds, 6),
        usd=(round(ctx.usd, 8) if ctx.usd is not None else None) if ctx.model_used else None,
        cached_calls=ctx.cached_calls,
    )
    model_name = judge.name if (judge is not None and uses_model) else None
    default_verified: VerifiedBy = "prediction" if ctx.model_used else "heuristic"
    now = datetime.now(UTC)
    if finding is None:
        return Diagnosis(run_id=run.run_id, method=method, model=model_name, failed=True, failure_reason=failure,
                         verified_by=default_verified, artifacts=ctx.artifacts, cost=cost, created_at=now)
    return _to_diagnosis(run, method, model_name, finding, ctx, cost, now)


def _to_diagnosis(
    run: Run, method: str, model: str | None, f: Finding, ctx: DiagnosisContext, cost: Cost, now: datetime
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
    _ensure_builtin_methods()
    return method_names()

