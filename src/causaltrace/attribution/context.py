"""The contracts every attribution method and stage is written against (issue 18: the engine's core, without the
engine): :class:`DiagnosisContext` (what a method and its stages share during one diagnosis: the run, the judge,
cost and artifacts), :class:`Stage`, :class:`Method`, :class:`Conclusion`, :class:`MethodFailed`, and the
verification hook that ``replay/`` registers and the ``graph`` method's step 6 calls.

Stages and methods import this module, never :mod:`causaltrace.attribution.engine` (which imports the methods to
register them): so the import graph engine → methods → stages → context has no circle. The engine re-exports
these names, which is where the public API (``causaltrace.attribution``) takes them from.

Concepts (issue 5; ARCHITECTURE "The default attribution method", SEEDS §8):

* A method is a small composition of **stages**. A :class:`Stage` has a ``stage_id`` (SEEDS §8's snake_case ids);
  its LLM calls go through :meth:`DiagnosisContext.ask`, which counts calls and tokens under that id in
  ``Cost.calls_by_stage``; its artifact lands in ``Diagnosis.artifacts[stage_id]``. Deterministic stages are
  memoised per diagnosis (:meth:`DiagnosisContext.run_stage`), so methods that share them compute them once.
* A method returns a :class:`Conclusion` (decisive step, agent, category, explanation, evidence, ranked candidates,
  ``verified_by``, the findings and the basis) or raises :class:`MethodFailed`; the engine adds run id, method, model, cost and artifacts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, JsonValue

from causaltrace.attribution.judge import CallRecord, Fallback, Judge
from causaltrace.exceptions import AttributionError, UserError
from causaltrace.schema import Candidate, DiagnosisBasis, EvidenceItem, Finding, Run, Step, VerifiedBy

__all__ = [
    "DiagnosisContext",
    "Conclusion",
    "Method",
    "MethodFailed",
    "Stage",
    "VerificationHook",
    "VerificationResult",
    "register_verification_hook",
    "verification_hook",
]

T = TypeVar("T")


class MethodFailed(AttributionError):
    """Raised by a method that cannot produce an answer (the engine returns a Diagnosis marked failed)."""


@dataclass(kw_only=True)
class Conclusion:
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
    #: the findings the method's detectors made (``Diagnosis.findings``); methods without detectors leave it empty
    findings: Sequence[Finding] = ()
    #: what the answer rests on (``Diagnosis.basis``); None: the method does not say (no detectors)
    basis: DiagnosisBasis | None = None


@dataclass(kw_only=True)
class VerificationResult:
    """What the replay verification hook concluded (ARCHITECTURE "The default attribution method", step 6)."""

    step_id: str
    explanation: str = ""
    category: str | None = None
    artifact: JsonValue = None
    #: ``correction``: the flipping edit was derived from a finding; ``alternative``: any other edit
    basis: str = "correction"


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

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        raise NotImplementedError
