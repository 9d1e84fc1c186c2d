"""The engine: the method registry, stages (cost by stage, artifacts, ablation, memoisation), the verification hook,
the sync twin, model resolution and the stored Diagnosis."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

import causaltrace
from causaltrace.attribution import (
    Conclusion,
    DiagnosisContext,
    Method,
    Stage,
    VerificationResult,
    available_methods,
    register_verification_hook,
    verification_hook,
)
from causaltrace.attribution.judge import ALLOW_MODEL_REQUESTS_ENV, output_model, step_index
from causaltrace.attribution.stages import DependencyGraphStage, FailureAnchorStage
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.store import Store
from causaltrace.collector.whowhen import load_whowhen
from causaltrace.exceptions import UserError
from causaltrace.protocols import register_method
from causaltrace.schema import Candidate, Diagnosis, RecordedCall, Recording
from causaltrace.testing.judges import FunctionJudge

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_run.otlp.jsonl"


@pytest.fixture(autouse=True)
def no_real_model_requests(monkeypatch):
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")


def hand1():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


class CountingStage(Stage[int]):
    stage_id: ClassVar[str] = "counting"
    runs = 0

    async def run(self, ctx: DiagnosisContext) -> int:
        type(self).runs += 1
        return 7

    def artifact(self, result: int) -> Any:
        return {"value": result}


class Pick(Stage[int]):
    """An LLM stage: asks for one step between the anchor's predecessors."""

    stage_id: ClassVar[str] = "pick"
    uses_model: ClassVar[bool] = True

    async def run(self, ctx: DiagnosisContext) -> int:
        anchor = await ctx.run_stage(FailureAnchorStage())
        Answer = output_model("Pick", step=step_index(0, anchor.index))
        answer: Any = await ctx.ask(self.stage_id, [{"role": "user", "content": "pick a step"}], Answer)
        return int(answer.step)

    def skipped(self, ctx: DiagnosisContext) -> int:
        return 0


class Toy(Method):
    """A method composed of shared stages plus its own LLM stage, registered without touching the engine."""

    name: ClassVar[str] = "toy"
    needs_model: ClassVar[bool] = True
    stage_ids: ClassVar[tuple[str, ...]] = ("dependency_graph", "failure_anchor", "counting", "pick")
    default_options: ClassVar[dict[str, Any]] = {"bonus": 0}

    async def diagnose(self, ctx: DiagnosisContext) -> Conclusion:
        await ctx.run_stage(DependencyGraphStage())
        value = await ctx.run_stage(CountingStage())
        assert await ctx.run_stage(CountingStage()) == value  # memoised
        step = await ctx.run_stage(Pick())
        step = min(step + self.options["bonus"], ctx.run.steps[-1].index)
        return Conclusion(step_index=step, explanation="toy", verified_by="prediction",
                       candidates=[Candidate(step_id=ctx.run.step_at(step).step_id, index=step, agent="x", score=1.0)])


register_method(Toy.name, Toy)


def test_a_registered_method_composes_stages_with_cost_and_artifacts_by_stage():
    CountingStage.runs = 0
    fake = FunctionJudge(lambda m, i: {"step": 3})
    d = causaltrace.diagnose_sync(hand1(), "toy", fake, bonus=1)
    assert isinstance(d, Diagnosis) and d.method == "toy" and d.model == fake.name
    assert (d.decisive_step_index, d.agent) == (4, "Orchestrator")  # the agent defaults to the step's
    assert d.cost.calls_by_stage == {"pick": 1} and d.cost.llm_calls == 1
    assert d.cost.input_tokens > 0 and d.cost.output_tokens > 0 and d.cost.seconds > 0
    assert d.cost.usd is None  # a fake has no price
    assert CountingStage.runs == 1
    assert d.artifacts["counting"] == {"value": 7}
    assert d.artifacts["dependency_graph"]["source"] == "recovered"
    assert d.artifacts["failure_anchor"]["index"] == 12
    assert d.artifacts["settings"] == {"with_answer": False, "ablate": [], "options": {"bonus": 1}}
    assert fake.calls[0].schema["properties"]["step"] == {"maximum": 12, "minimum": 0, "type": "integer"}
    assert "toy" in available_methods()


def test_ablating_a_stage_removes_it_from_calls_by_stage():
    fake = FunctionJudge(lambda m, i: {"step": 3})
    d = causaltrace.diagnose_sync(hand1(), "toy", fake, ablate=["pick"])
    assert d.cost.calls_by_stage == {} and fake.calls == [] and d.decisive_step_index == 0
    assert d.artifacts["pick"] == {"ablated": True}
    with pytest.raises(UserError, match="no stage.*'nope'.*its stages: dependency_graph"):
        causaltrace.diagnose_sync(hand1(), "toy", fake, ablate=["nope"])


def test_unknown_method_and_option_are_user_errors():
    with pytest.raises(UserError, match="unknown attribution method 'nope'.*all-at-once.*graph"):
        causaltrace.diagnose_sync(hand1(), "nope")
    with pytest.raises(UserError, match="no option.*'colour'.*known: bonus"):
        causaltrace.diagnose_sync(hand1(), "toy", FunctionJudge(lambda m, i: "{}"), colour="red")
    with pytest.raises(UserError, match="expects a causaltrace Run"):
        causaltrace.diagnose_sync({"steps": []})  # type: ignore[arg-type]


def test_builtin_methods_are_registered():
    assert {"graph", "all-at-once", "step-by-step", "binary-search", "first-agent-step",
            "most-active-agent"} <= set(available_methods())


def test_model_falls_back_to_the_env_var(monkeypatch):
    from causaltrace.testing.judges import register_function_model

    fake = FunctionJudge(lambda m, i: {"agent_name": "WebSurfer", "step_number": 6, "reason": "r"}, name="envfake")
    register_function_model("envfake", fake)
    monkeypatch.setenv("CAUSALTRACE_MODEL", "function:envfake")
    d = causaltrace.diagnose_sync(hand1(), "all-at-once")
    assert d.model == "envfake" and d.decisive_step_index == 6 and len(fake.calls) == 1


def test_graph_is_deterministic_without_a_model_or_with_its_llm_stages_ablated():
    # issue 6: with a model, graph adds its LLM stages (recall, adjudicate: tests/attribution/test_methods_long_traces.py)
    assert causaltrace.diagnose_sync(hand1(), "graph").verified_by == "heuristic"
    fake = FunctionJudge(lambda m, i: "{}")
    d = causaltrace.diagnose_sync(hand1(), "graph", fake, ablate=["recall", "adjudicate"])
    assert fake.calls == [] and d.verified_by == "heuristic" and d.cost.calls_by_stage == {}


def test_diagnose_sync_works_inside_a_running_loop():
    async def inside():
        return causaltrace.diagnose_sync(hand1(), "first-agent-step")

    assert asyncio.run(inside()).decisive_step_index == 1


def test_async_diagnose_is_the_public_api():
    d = asyncio.run(causaltrace.diagnose(hand1()))
    assert d.method == "graph" and d.created_at is not None and d.candidates


def test_the_verification_hook_is_called_for_runs_with_a_recording():
    run = load_otlp_json(SAMPLE)[0].model_copy(update={"recording": None})
    seen: list[list[int]] = []

    async def hook(ctx, candidates):
        seen.append([c.index for c in candidates])
        return VerificationResult(step_id=ctx.run.step_at(3).step_id, explanation="flipped by replay",
                                  artifact={"replays": 1})

    previous = verification_hook()  # replay/ installs one at import: put it back afterwards
    register_verification_hook(hook)
    try:
        plain = causaltrace.diagnose_sync(run)
        assert seen == [] and plain.verified_by == "heuristic"  # no Recording: step 6 is skipped
        recorded = run.model_copy(update={"recording": Recording(run_id=run.run_id, calls=(RecordedCall(
            run_id=run.run_id, agent_key="planner", kind="llm", ordinal=0, request={}, request_hash="h",
            start_order=0),))})
        d = causaltrace.diagnose_sync(recorded)
        assert seen and d.verified_by == "replay" and d.decisive_step_index == 3
        assert d.artifacts["replay_verify"] == {"replays": 1} and d.explanation == "flipped by replay"
        skipped = causaltrace.diagnose_sync(recorded, ablate=["replay_verify"])
        assert skipped.verified_by == "heuristic" and len(seen) == 1
    finally:
        register_verification_hook(previous)


def test_the_diagnosis_round_trips_through_the_store():
    run = hand1()
    d = causaltrace.diagnose_sync(run)
    with Store() as store:
        store.save_run(run)
        store.save_diagnosis(d)
        assert store.diagnoses(run.run_id) == [d]
