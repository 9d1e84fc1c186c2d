"""One span per tool call (issue 33 item 3): the call and its result (a tool's response, a CodeAgent's code
execution) are one exported span that starts with the call and ends with the result, input the arguments, output
the result; both steps keep their own attributes and the span's id; the live spans import back as the very run
the collector assembled.

Both example teams run on their scripted models, traced into memory.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

import causaltrace
from _autogen import example as autogen_example
from _autogen import traced_in_memory
from _example_spans import traced
from causaltrace import semconv
from causaltrace.collector import tool_spans
from causaltrace.collector.otlp import run_to_otlp, runs_from_otlp
from causaltrace.config import TraceConfig
from causaltrace.schema import Run

ROOT = Path(__file__).resolve().parents[2]


sys.path.insert(0, str(ROOT / "examples"))
smol_example = importlib.import_module("smolagents_agents")


@pytest.fixture
def autogen_traced(monkeypatch):
    yield from traced_in_memory(monkeypatch)


@pytest.fixture
def smol_traced():
    with traced("smolagents", TraceConfig(store=False)) as (exporter, runs):
        yield exporter, runs


def _imported(spans) -> Run:
    (run,) = runs_from_otlp(MessageToDict(encode_spans(spans)))
    return run


def _check_pairs(run: Run, spans) -> int:
    """Every call and its result: one span, from the call's start to the result's end; returns how many."""
    pairs = tool_spans.call_result_pairs(run.steps)
    by_step = {span.attributes.get(semconv.STEP_ID): span for span in spans}
    assert not any(result.step_id in by_step for result in pairs.values())  # no span of their own
    by_id = {s.step_id: s for s in run.steps}
    for call_id, result in pairs.items():
        call, span = by_id[call_id], by_step[call_id]
        attrs = span.attributes
        assert span.name == f"execute_tool {call.tool_name}"  # the conventions' name
        assert call.span_id == result.span_id == f"{span.context.span_id:016x}"
        assert attrs[semconv.RESULT_ID] == result.step_id and attrs[semconv.RESULT_KIND] == result.kind
        assert attrs[semconv.STEP_INDEX] == call.index and attrs[semconv.RESULT_PREFIX + "index"] == result.index
        assert attrs[semconv.GEN_AI_AGENT_NAME] == call.agent
        assert span.start_time <= attrs[semconv.RESULT_STARTED_AT] <= span.end_time
        assert span.start_time < attrs[semconv.STEP_ENDED_AT] <= span.end_time
        assert json.loads(attrs["input.value"]) == call.arguments
        assert attrs["output.value"] == result.content if result.content else json.loads(attrs["output.value"]) == result.outputs
        assert (span.status.status_code.name == "ERROR") == (result.status == "error" or call.status == "error")
    return len(pairs)


async def test_autogen_example_tool_calls_are_one_span_and_import_back(autogen_traced):
    async with causaltrace.run(task=autogen_example.TASK, verify=autogen_example.verify) as handle:
        await autogen_example.build().run(task=autogen_example.TASK)
    run, spans = handle.run, autogen_traced.exporter.get_finished_spans()
    assert _check_pairs(run, spans) == 2  # add, multiply
    imported = _imported(spans)
    assert [s.model_dump() for s in imported.steps] == [s.model_dump() for s in run.steps]
    # the stored run exports the same way: one span per call, and back
    assert runs_from_otlp(json.loads(json.dumps(run_to_otlp(run)))) == [run]


def test_smolagents_code_execution_is_inside_its_python_interpreter_span(smol_traced):
    exporter, runs = smol_traced
    with causaltrace.run(task=smol_example.TASK, verify=smol_example.verify) as handle:
        smol_example.build().run(smol_example.TASK)
    run, spans = handle.run, exporter.get_finished_spans()
    n = _check_pairs(run, spans)
    codes = [s for s in run.steps if s.kind == "code_execution"]
    assert codes and n >= len(codes) + 1  # every code run, and the managed agent's tool calls
    for code in codes:
        (span,) = [s for s in spans if s.attributes.get(semconv.RESULT_ID) == code.step_id]
        assert span.name == "execute_tool python_interpreter"
        # the execution's time is inside the span: it ends when the code has run
        assert span.end_time - span.start_time >= code.ended_at.timestamp() * 1e9 - code.started_at.timestamp() * 1e9 - 1000
        assert json.loads(span.attributes["input.value"]) == {"code": code.inputs["code"]}
    imported = _imported(spans)
    assert [s.model_dump() for s in imported.steps] == [s.model_dump() for s in run.steps]


def test_a_call_and_its_result_read_from_other_spans_keep_both_sources():
    """Imported steps keep where they came from (Step.source): a call and its result, one span on export, import
    back with each its own source."""
    from datetime import UTC, datetime

    from causaltrace.schema import Dependency, Step, StepSource

    t0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    call = Step(step_id="c", run_id="r", index=0, kind="tool_call", agent="a", tool_name="add", arguments={"a": 1},
                call_id="x1", started_at=t0, ended_at=t0, status="ok",
                source=StepSource(trace_id="ab" * 16, span_id="cd" * 8, span_kind="TOOL", start_time=t0))
    result = Step(step_id="t", run_id="r", index=1, kind="tool_response", agent="a", tool_name="add", call_id="x1",
                  content="2", depends_on=(Dependency(step_id="c", kind="tool_result_of"),), started_at=t0,
                  ended_at=t0, status="ok", source=StepSource(trace_id="ab" * 16, span_id="ef" * 8, span_kind="TOOL"))
    run = Run(run_id="r", framework="x", steps=(call, result))
    request = json.loads(json.dumps(run_to_otlp(run)))
    assert len(request["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 2  # the root and one tool span
    assert runs_from_otlp(request) == [run]
