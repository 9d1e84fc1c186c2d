"""Foreign spans in (issue 23 item 1): the failing example team traced by the REAL OpenInference AutoGen AgentChat
instrumentor (and, alone, by autogen-core's own GenAI spans) → in-memory exporter → OTLP/JSON lines (the OTel
SDK's protobuf encoder as protobuf-JSON) → ``causaltrace import`` → ``diagnose --method graph``.

OpenInference writes LLM spans only for the OpenAI client classes, so the team runs on AutoGen's real
``OpenAIChatCompletionClient`` answered by the scripted endpoints of ``causaltrace.testing.openai_wire``; the native
run is the same team traced by causaltrace (``EXAMPLE_SHAPE`` of the adapter tests).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path

import pytest

from causaltrace.cli import main
from causaltrace.collector.chatlog_build import HAS_RECORDING_KEY, PROVENANCE_KEY
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.store import Store
from causaltrace.exceptions import InvalidInputError

pytest.importorskip("autogen_agentchat")
pytest.importorskip("openinference.instrumentation.autogen_agentchat")
pytest.importorskip("opentelemetry.exporter.otlp.proto.common")

from google.protobuf.json_format import MessageToDict
from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from _autogen import shape as autogen_shape
from _builders import capture_spans
from causaltrace.testing.openai_wire import arithmetic_team_endpoints

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
example = importlib.import_module("autogen_team")

#: The native run's shape (tests/instrumentation/test_autogen_adapter.py EXAMPLE_SHAPE): the final_answer step, which
#: causaltrace derives from the run's end, is read from the team span's TaskResult (collector/span_autogen.py).
NATIVE_SHAPE = [
    "0 task user ^root []",
    "1 agent_turn planner ^root []",
    "2 llm_response planner ^agent_turn#1 [saw:0]",
    "3 message planner ^agent_turn#1 [produced_by:2]",
    "4 agent_turn solver ^root []",
    "5 llm_response solver ^agent_turn#4 [saw:0 saw:3]",
    "6 tool_call solver ^agent_turn#4 [produced_by:5]",
    "7 tool_response solver ^agent_turn#4 [tool_result_of:6]",
    "8 llm_response solver ^agent_turn#4 [continues:5 observed:7]",
    "9 tool_call solver ^agent_turn#4 [produced_by:8]",
    "10 tool_response solver ^agent_turn#4 [tool_result_of:9]",
    "11 llm_response solver ^agent_turn#4 [continues:8 observed:10]",
    "12 message solver ^agent_turn#4 [produced_by:11]",
    "13 agent_turn reviewer ^root []",
    "14 llm_response reviewer ^agent_turn#13 [saw:0 saw:3 saw:12]",
    "15 message reviewer ^agent_turn#13 [produced_by:14]",
    "16 final_answer reviewer ^root [answer_of:15]",
]


def shape(run) -> list[str]:
    return autogen_shape(run, status=False)


def traced_team_file(tmp_path: Path, monkeypatch, *, openinference: bool) -> Path:
    """Run the failing team with the global provider on an in-memory exporter; write its spans as OTLP/JSON."""
    provider, exporter = capture_spans()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    instrumentor = AutogenAgentChatInstrumentor()
    if openinference:
        instrumentor.instrument(tracer_provider=provider)
    try:
        team = example.build_with(tuple(e.autogen_client() for e in arithmetic_team_endpoints(off_by_one=True)))
        exporter.clear()
        if openinference:
            asyncio.run(team.run(task=example.TASK))
        else:  # autogen-core starts a trace per published message; the user's own span makes the run one trace
            with provider.get_tracer("user-app").start_as_current_span("nightly-batch.run"):
                asyncio.run(team.run(task=example.TASK))
    finally:
        if openinference:
            instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    path = tmp_path / "trace.jsonl"
    # two export batches, as a collector's file exporter writes them: one trace over several lines
    half = len(spans) // 2
    lines = [json.dumps(MessageToDict(encode_spans(part))) for part in (spans[:half], spans[half:])]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def import_and_diagnose(capsys, path: Path) -> tuple[str, dict]:
    code, out, err = run_cli(capsys, "import", str(path), "--format", "auto")
    assert code == 0, err
    (run_id,) = out.split()
    code, out, err = run_cli(capsys, "diagnose", run_id, "--method", "graph", "--json")
    assert code == 0, err
    return run_id, json.loads(out)


def test_openinference_trace_imports_as_the_native_run_and_is_diagnosed(tmp_path, monkeypatch, capsys):
    path = traced_team_file(tmp_path, monkeypatch, openinference=True)
    run_id, diagnosis = import_and_diagnose(capsys, path)
    with Store() as store:
        run = store.get_run(run_id)
    assert shape(run) == NATIVE_SHAPE  # agents, containers, call/result pairs and recovered edges
    assert run.agents == ("planner", "solver", "reviewer") and run.task == example.TASK
    assert run.metadata[PROVENANCE_KEY] == "openinference" and run.metadata[HAS_RECORDING_KEY] is False
    assert run.recording is None and run.framework == "autogen"
    planted = run.step_at(6)
    assert planted.tool_name == "add" and planted.arguments == {"a": 17, "b": 26}
    assert planted.call_id == "scripted-solver-0-0" and run.step_at(7).call_id == "scripted-solver-0-0"
    assert run.step_at(7).content == "43" and run.step_at(2).model == "scripted-planner"
    # ranked as causaltrace's own run of the same execution is (s9, s3, s15 first: the run has no verifier, so its
    # final answer is a candidate too); the planted call comes 4th
    assert [c["step_id"] for c in diagnosis["candidates"][:4]].count(planted.step_id) == 1
    # re-importing the trace is idempotent: same id, nothing changes
    assert run_cli(capsys, "import", str(path), "--format", "otlp-json")[1].split() == [run_id]


def test_genai_only_trace_from_autogen_core_spans(tmp_path, monkeypatch, capsys):
    path = traced_team_file(tmp_path, monkeypatch, openinference=False)
    run_id, diagnosis = import_and_diagnose(capsys, path)
    with Store() as store:
        run = store.get_run(run_id)
    assert run.metadata[PROVENANCE_KEY] == "genai" and run.agents == ("planner", "solver", "reviewer")
    calls = [s for s in run.steps if s.kind == "tool_call"]
    results = [s for s in run.steps if s.kind == "tool_response"]
    assert [(c.tool_name, c.call_id) for c in calls] == [("add", "scripted-solver-0-0"),
                                                         ("multiply", "scripted-solver-1-0")]
    assert [r.depends_on[0].step_id for r in results] == [c.step_id for c in calls]
    assert all(c.agent == "solver" for c in calls + results)
    top3 = [c["step_id"] for c in diagnosis["candidates"][:3]]
    assert calls[0].step_id in top3


def test_spans_of_no_known_convention_are_one_line_naming_the_count(tmp_path, capsys):
    request = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "opentelemetry.instrumentation.requests"},
                                                  "spans": [{"traceId": "2" * 32, "spanId": f"{i:016x}",
                                                             "name": "GET", "attributes": []} for i in (1, 2, 3)]}]}]}
    path = tmp_path / "http.json"
    path.write_text(json.dumps(request))
    with pytest.raises(InvalidInputError, match=r"read 3 spans in 1 trace, but none forms a run: looked for"):
        load_otlp_json(path)
    code, out, err = run_cli(capsys, "import", str(path), "--format", "auto")
    assert code == 2 and out == "" and "read 3 spans" in err and "OpenInference" in err and "GenAI" in err
    assert len(err.strip().splitlines()) == 1


def test_tool_span_with_missing_parents_and_no_llm_still_pairs(tmp_path):
    """A TOOL span whose parent is not in the file, with no LLM span before it: the call is recovered from the span
    itself (tool.name, tool.parameters) and the result answers it."""
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "tool.parameters": '{"key": "x"}',
             "output.value": "no entry"}
    span = {"traceId": "4" * 32, "spanId": "5" * 16, "parentSpanId": "6" * 16, "name": "lookup",
            "startTimeUnixNano": "1", "endTimeUnixNano": "2", "status": {"code": 2, "message": "KeyError"},
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}
    (run,) = load_otlp_json(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    call, result = run.steps
    assert call.kind == "tool_call" and call.arguments == {"key": "x"} and call.metadata["recovered_from"]
    assert result.depends_on[0].step_id == call.step_id and result.status == "error"
    assert result.outputs == {"result": "no entry", "is_error": True} and result.error.message == "KeyError"


def failing_smolagents_team(endpoint):
    """examples/smolagents_agents.py's failing team (manager CodeAgent off by one, managed math_agent) on real
    OpenAIServerModels answered by scripted endpoints."""
    from smolagents import CodeAgent, LogLevel, ToolCallingAgent

    from causaltrace.testing.smolagents import code_manager_policy, sum_of_powers_tool, tool_worker_policy

    math_agent = ToolCallingAgent(tools=[sum_of_powers_tool()], model=endpoint(tool_worker_policy()).smolagents_model(),
                                  name="math_agent", description="Adds up the squares of a list of integers.",
                                  max_steps=4, verbosity_level=LogLevel.OFF)
    return CodeAgent(tools=[], model=endpoint(code_manager_policy(off_by_one=True)).smolagents_model(),
                     managed_agents=[math_agent], name="manager", max_steps=5, verbosity_level=LogLevel.OFF)


def test_openinference_smolagents_trace(tmp_path, monkeypatch, capsys):
    """The failing smolagents example (manager CodeAgent writes range(1, 6)) on smolagents' real OpenAIServerModel,
    traced by OpenInference's smolagents instrumentor: agents, the managed agent's call/result pair (its call id)
    and the planted code-bearing step in the graph method's top 3."""
    oi = pytest.importorskip("openinference.instrumentation.smolagents")
    pytest.importorskip("smolagents")
    from causaltrace.testing.openai_wire import smolagents_endpoint

    smol_example = importlib.import_module("smolagents_agents")
    provider, exporter = capture_spans()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    instrumentor = oi.SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        agent = failing_smolagents_team(smolagents_endpoint)
        exporter.clear()
        agent.run(smol_example.TASK)
    finally:
        instrumentor.uninstrument()
    path = tmp_path / "smol.jsonl"
    path.write_text(json.dumps(MessageToDict(encode_spans(exporter.get_finished_spans()))) + "\n")
    run_id, diagnosis = import_and_diagnose(capsys, path)
    with Store() as store:
        run = store.get_run(run_id)
    assert run.agents == ("manager", "math_agent") and run.task == smol_example.TASK
    call = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "sum_of_powers")
    result = next(s for s in run.steps if s.kind == "tool_response" and s.tool_name == "sum_of_powers")
    assert call.call_id == "call_0_0" and call.arguments == {"numbers": [1, 2, 3, 4, 5], "power": 2}
    assert result.depends_on[0].step_id == call.step_id and result.content == "55" and call.agent == "math_agent"
    planted = next(s for s in run.steps if s.kind == "tool_call" and "range(1, 6)" in s.arguments.get("code", ""))
    assert planted.agent == "manager" and planted.tool_name == "python_interpreter"
    by_id = {s.step_id: s for s in run.steps}
    # the code's run (the "Step 1" span's observations), the managed agent's call made by that code and answered
    execution = next(s for s in run.steps if s.kind == "code_execution" and s.depends_on[0].step_id == planted.step_id)
    assert "managed agent 'math_agent'" in execution.outputs["stdout"]
    delegated = next(s for s in run.steps if s.kind == "task" and s.agent == "math_agent")
    (call,) = [by_id[d.step_id] for d in delegated.depends_on if d.kind == "delegated_by"]
    assert call.tool_name == "math_agent" and by_id[call.depends_on[0].step_id] == execution
    assert [s.content for s in run.steps if s.kind == "final_answer"] == ["55", "55"]
    assert planted.step_id in [c["step_id"] for c in diagnosis["candidates"][:3]]
