"""A recording that fails to start (an internal error in CallLog.begin or reserve_ordinals) leaves that call
unrecorded and is logged as RunContext.begin_call / reserve_ordinals logged it: the steps of the run are all there
(the hooks start the recording inline, each in its own try)."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("smolagents")

from smolagents import LogLevel, ToolCallingAgent

import causaltrace
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.calls import CallLog
from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.testing.smolagents import ScriptedModel, sum_of_powers_tool, tool_worker_policy

TASK = "Compute the sum of the squares of these numbers: [1, 2, 3, 4, 5, 6]"
KINDS = ["task", "agent_turn", "llm_response", "tool_call", "tool_response", "llm_response", "tool_call",
         "tool_response", "final_answer"]


@pytest.fixture
def instrumented(span_capture):
    provider, _ = span_capture
    instrument_smolagents(provider, TraceConfig(store=False))
    yield
    uninstrument_smolagents()
    reset_tracing()


def _agent() -> ToolCallingAgent:
    return ToolCallingAgent(tools=[sum_of_powers_tool()], model=ScriptedModel(tool_worker_policy()),
                            name="math_agent", description="adds up powers", verbosity_level=LogLevel.OFF)


@pytest.mark.parametrize("method", ["begin", "reserve_ordinals"])
def test_a_failing_recording_loses_the_call_not_the_steps(instrumented, monkeypatch, caplog, method):
    def broken(*args, **kwargs):
        raise RuntimeError("broken recording")

    monkeypatch.setattr(CallLog, method, broken)
    with caplog.at_level(logging.WARNING, logger="causaltrace"), causaltrace.run(verify="91") as handle:
        _agent().run(TASK)
    run = handle.run
    assert [s.kind for s in run.steps] == KINDS
    assert run.outcome.status == "success"
    expected = "RunContext.begin_call" if method == "begin" else "RunContext.reserve_ordinals"
    assert any(expected in r.getMessage() for r in caplog.records)
    if method == "begin":
        assert run.recording is None or run.recording.calls == ()
        assert "messages" in run.steps[2].inputs  # unrecorded: the step keeps its messages
