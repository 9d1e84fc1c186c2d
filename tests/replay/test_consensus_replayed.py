"""Replay-verified results skip CausalFlow's consensus (issue 20 item 8): on a RECORDED run (a real smolagents team,
the real sandbox) ``--method causalflow`` with a model replays its corrections, and no critic is asked — a
deterministic executor decides, as in the paper. The model's proposal calls are counted in the Diagnosis's cost."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import causaltrace
from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.judge import Judge
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay import executor
from causaltrace.replay.sandbox import SubprocessSandbox
from causaltrace.testing import FunctionJudge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import smolagents_agents as example  # noqa: E402


@pytest.fixture(autouse=True)
def instrumented():
    instrument_smolagents(TracerProvider(), TraceConfig())
    yield
    uninstrument_smolagents()
    reset_tracing()


def test_a_replayed_causalflow_asks_no_critic(monkeypatch):
    monkeypatch.setattr(executor, "_DEFAULT_SANDBOX", SubprocessSandbox())
    with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        example.build_failing().run(example.TASK)
    run = handle.run
    assert run.outcome.status == "failure"
    stages = []

    def model(messages, info):  # every proposal unusable: the deterministic mutations find the flip
        stages.append(info.stage_id)
        return "no proposal"

    judge = Judge(FunctionJudge(model), cache=False, max_repairs=0)
    d = diagnose_sync(run, "causalflow", judge, factory=example.build_failing, verify=example.verify, store=False)
    assert not d.failed, d.failure_reason
    assert d.verified_by == "replay" and d.confidence == 1.0 and run.step(d.decisive_step_id).agent == "manager"
    assert set(stages) == {"propose"} and "consensus" not in d.cost.calls_by_stage
    assert d.artifacts["consensus"]["skipped"].startswith("replay-verified")
    tried = len(d.artifacts["replay"]["crs"])
    assert d.cost.calls_by_stage == {"propose": 3 * tried} and d.cost.llm_calls == len(stages)
