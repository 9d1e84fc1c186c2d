"""The AutoGen AgentChat adapter (issue 3): the exact steps, dependencies and statuses scripted teams produce.

Snapshots are one line per step: ``<index> <kind> <agent> <^parent-kind#parent-index> [<dep-kind>:<producer index>…]
<status>``. The teams run on the reactive scripted clients of :mod:`causaltrace.testing.autogen`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode

try:
    import autogen_agentchat  # noqa: F401
except ImportError:  # pragma: no cover - the autogen extra is part of the CI install
    if os.environ.get("CAUSALTRACE_STRICT", "").lower() in {"1", "true", "yes"}:
        raise
    pytest.skip("autogen-agentchat is not installed", allow_module_level=True)

from autogen_agentchat.agents import AssistantAgent, CodeExecutorAgent, UserProxyAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat, Swarm
from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool

import causaltrace
from _autogen import SubprocessExecutor, example, shape, traced_in_memory
from _builders import capture_spans
from causaltrace import semconv
from causaltrace.collector import tool_spans
from causaltrace.config import TraceConfig
from causaltrace.exceptions import MissingExtraError
from causaltrace.instrumentation.autogen import instrument_autogen, is_instrumented, uninstrument_autogen
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.schema import Run
from causaltrace.testing.autogen import (
    ScriptedChatCompletionClient,
    ScriptedRequest,
    call,
    planner_client,
    reviewer_client,
    selector_client,
    solver_client,
    solver_policy,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def traced(monkeypatch):
    """AutoGen instrumented onto an in-memory exporter (store off); ``runs`` collects every finished Run."""
    yield from traced_in_memory(monkeypatch)


def tools():
    return [
        FunctionTool(example.add, description="Add two integers."),
        FunctionTool(example.multiply, description="Multiply two integers."),
    ]


def spans_by_kind(exporter):
    out = {}
    for span in exporter.get_finished_spans():
        kind = (span.attributes or {}).get(semconv.STEP_KIND)
        if kind:
            out.setdefault(kind, []).append(span)
        result = (span.attributes or {}).get(semconv.RESULT_KIND)  # a tool call's span carries its result too
        if result:
            out.setdefault(result, []).append(span)
    return out


EXAMPLE_SHAPE = [
    "0 task user ^root [] ok",
    "1 agent_turn planner ^root [] ok",
    "2 llm_response planner ^agent_turn#1 [saw:0] ok",
    "3 message planner ^agent_turn#1 [produced_by:2] ok",
    "4 agent_turn solver ^root [] ok",
    "5 llm_response solver ^agent_turn#4 [saw:0 saw:3] ok",
    "6 tool_call solver ^agent_turn#4 [produced_by:5] ok",
    "7 tool_response solver ^agent_turn#4 [tool_result_of:6] ok",
    "8 llm_response solver ^agent_turn#4 [continues:5 observed:7] ok",
    "9 tool_call solver ^agent_turn#4 [produced_by:8] ok",
    "10 tool_response solver ^agent_turn#4 [tool_result_of:9] ok",
    "11 llm_response solver ^agent_turn#4 [continues:8 observed:10] ok",
    "12 message solver ^agent_turn#4 [produced_by:11] ok",
    "13 agent_turn reviewer ^root [] ok",
    "14 llm_response reviewer ^agent_turn#13 [saw:0 saw:3 saw:12] ok",
    "15 message reviewer ^agent_turn#13 [produced_by:14] ok",
    "16 final_answer reviewer ^root [answer_of:15] ok",
]


async def run_example(factory):
    async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        await factory().run(task=example.TASK)
    return handle


# ------------------------------------------------------------------------------------------- the example team


async def test_example_team_success(traced):
    handle = await run_example(example.build)
    run = handle.run
    assert shape(run) == EXAMPLE_SHAPE
    assert handle.outcome.status == "success" and handle.outcome.stop == "normal"
    assert handle.outcome.final_answer == "RESULT: 126 verified."  # the APPROVE keyword is stripped
    assert run.framework == "autogen" and run.task == example.TASK
    assert list(run.agents) == ["user", "planner", "solver", "reviewer"]
    add_call = run.step_at(6)
    assert (add_call.tool_name, add_call.arguments, add_call.call_id) == (
        "add",
        {"a": 17, "b": 25},
        "scripted-solver-0-0",
    )
    assert run.step_at(7).outputs == {"result": "42", "is_error": False}
    llm = run.step_at(5)
    assert llm.model == "scripted-solver"
    assert llm.outputs["tool_calls"] == [
        {"name": "add", "arguments": {"a": 17, "b": 25}, "call_alias": "call#0", "call_id": "scripted-solver-0-0"}
    ]
    assert llm.usage is not None and llm.usage.input_tokens > 0 and llm.usage.output_tokens > 0
    assert llm.inputs["recording"]["agent_key"] == "team/solver"
    assert run.step_at(16).outputs == {"text": "RESULT: 126 verified."}
    # spans: one trace, statuses set, dependencies as links and attributes
    spans = traced.exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    kinds = spans_by_kind(traced.exporter)
    assert all(s.status.status_code is StatusCode.OK for group in kinds.values() for s in group)
    (turn,) = [s for s in kinds["agent_turn"] if s.attributes[semconv.STEP_INDEX] == 4]
    assert all(s.parent.span_id == turn.context.span_id for s in kinds["tool_call"])
    # the tool call (6) and its result (7) are one span: its links are both steps' but the result's on the call
    (resp,) = [s for s in kinds["tool_response"] if s.attributes[semconv.RESULT_PREFIX + "index"] == 7]
    assert resp.attributes[semconv.STEP_INDEX] == 6 and run.step_at(6).span_id == run.step_at(7).span_id
    assert [link.attributes[semconv.DEPENDENCY_KIND] for link in resp.links] == ["produced_by"]
    assert list(resp.attributes[semconv.RESULT_PREFIX + "depends_on.kinds"]) == ["tool_result_of"]
    pairs = tool_spans.call_result_pairs(run.steps)
    assert sum(len(s.links) for s in spans) == sum(len(s.depends_on) for s in run.steps) - len(pairs) == 18 - 2


def _step_facts(run):
    return [(s.kind, s.agent, s.content, s.arguments, s.call_id, s.model, s.usage, s.status) for s in run.steps]


async def test_example_team_on_real_openai_clients_matches_the_scripted_run(traced):
    """AutoGen's OpenAIChatCompletionClient on scripted endpoints (causaltrace.testing.openai_wire): the real
    client classes other instrumentations trace give the same steps, answers and Recording as the scripted ones."""
    from causaltrace.testing.openai_wire import arithmetic_team_endpoints

    endpoints = arithmetic_team_endpoints()
    clients = tuple(endpoint.autogen_client() for endpoint in endpoints)
    assert type(clients[0]).__name__ == "OpenAIChatCompletionClient"
    wired = await run_example(lambda: example.build_with(clients))
    scripted = await run_example(example.build)
    assert [endpoint.calls for endpoint in endpoints] == [1, 3, 1]  # every model call went over the wire
    assert shape(wired.run) == EXAMPLE_SHAPE
    assert wired.outcome.status == "success" and wired.outcome.final_answer == "RESULT: 126 verified."
    assert _step_facts(wired.run) == _step_facts(scripted.run)  # same text, tool calls, ids, models and usage
    assert wired.run.recording.signature() == scripted.run.recording.signature()
    failing = await run_example(
        lambda: example.build_with(tuple(e.autogen_client() for e in arithmetic_team_endpoints(off_by_one=True)))
    )
    assert failing.outcome.status == "failure" and failing.run.step_at(6).arguments == {"a": 17, "b": 26}


async def test_example_team_failing_variant(traced):
    handle = await run_example(example.build_failing)
    run = handle.run
    assert shape(run) == EXAMPLE_SHAPE  # same structure; the fault is in a value
    assert handle.outcome.status == "failure" and handle.outcome.stop == "normal"
    assert handle.outcome.final_answer == "RESULT: 129 verified."
    assert "129 is wrong" in handle.outcome.reason
    assert run.step_at(6).arguments == {"a": 17, "b": 26}  # the planted off-by-one tool argument
    assert run.step_at(7).content == "43"
    assert run.step_at(9).arguments == {"a": 43, "b": 3}  # carried forward by the solver
    assert run.step_at(15).content == "RESULT: 129 verified. APPROVE"  # and by the reviewer
    root = [s for s in traced.exporter.get_finished_spans() if semconv.is_root_span_name(s.name)][0]
    assert root.status.status_code is StatusCode.ERROR


async def test_recording_is_identical_across_fresh_runs(traced):
    first = (await run_example(example.build)).run.recording
    second = (await run_example(example.build)).run.recording
    assert first.signature() == second.signature()
    assert [(k, kind, o) for k, kind, o, _ in first.signature()] == [
        ("team/planner", "llm", 0),
        ("team/reviewer", "llm", 0),
        ("team/solver", "llm", 0),
        ("team/solver", "llm", 1),
        ("team/solver", "llm", 2),
        ("team/solver", "tool", 0),
        ("team/solver", "tool", 1),
    ]
    solver0 = first.find("team/solver", "llm", 0)
    assert solver0.settings["model"] == "scripted-solver" and solver0.settings["model_info"]["function_calling"]
    assert [t["name"] for t in solver0.request["tools"]] == ["add", "multiply"]
    response = solver0.decoded_response()
    assert type(response).__name__ == "CreateResult" and response.content[0].name == "add"
    tool0 = first.find("team/solver", "tool", 0)
    assert tool0.request == {"name": "add", "arguments": {"a": 17, "b": 25}}
    assert tool0.decoded_response().content == "42"
    assert all(c.step_id for c in first.calls)
    # … and across processes
    code = (
        "import asyncio, json, sys; sys.path.insert(0, sys.argv[1]); import autogen_team as ex, causaltrace; "
        "from causaltrace.config import TraceConfig; "
        "from causaltrace.instrumentation.autogen import instrument_autogen; "
        "from opentelemetry.sdk.trace import TracerProvider; "
        "instrument_autogen(TracerProvider(), TraceConfig(store=False)); "
        "h = causaltrace.run(task=ex.TASK)\n"
        "async def main():\n"
        "    async with h:\n"
        "        await ex.build().run(task=ex.TASK)\n"
        "asyncio.run(main()); print(json.dumps(h.run.recording.signature()))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code, str(ROOT / "examples")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert [tuple(x) for x in json.loads(out.stdout.strip().splitlines()[-1])] == first.signature()
    # the planted fault changes the downstream requests, not the first ones
    failing = (await run_example(example.build_failing)).run.recording
    assert failing.find("team/solver", "llm", 0).request_hash == solver0.request_hash
    assert failing.find("team/solver", "llm", 1).request_hash != first.find("team/solver", "llm", 1).request_hash


# ------------------------------------------------------------------------------------------- other team shapes


async def test_tool_error_is_an_error_tool_response_and_the_run_can_succeed(traced):
    async def boom(x: int) -> int:
        raise ValueError(f"boom on {x}")

    def policy(request: ScriptedRequest):
        return call("boom", x=1) if request.tool_rounds() == 0 else "the tool failed; I give up. APPROVE"

    agent = AssistantAgent(
        "a", ScriptedChatCompletionClient(policy), tools=[FunctionTool(boom, description="b")], max_tool_iterations=3
    )
    team = RoundRobinGroupChat([agent], termination_condition=TextMentionTermination("APPROVE"))
    async with causaltrace.run(task="x", verify=lambda outcome: True) as handle:
        await team.run(task="x")
    assert shape(handle.run) == [
        "0 task user ^root [] ok",
        "1 agent_turn a ^root [] ok",
        "2 llm_response a ^agent_turn#1 [saw:0] ok",
        "3 tool_call a ^agent_turn#1 [produced_by:2] ok",
        "4 tool_response a ^agent_turn#1 [tool_result_of:3] error",
        "5 llm_response a ^agent_turn#1 [continues:2 observed:4] ok",
        "6 message a ^agent_turn#1 [produced_by:5] ok",
        "7 final_answer a ^root [answer_of:6] ok",
    ]
    failed = handle.run.step_at(4)
    assert failed.outputs == {"result": "boom on 1", "is_error": True}
    assert failed.error.type == "ToolError" and failed.error.message == "boom on 1"
    assert handle.outcome.status == "success"
    (span,) = spans_by_kind(traced.exporter)["tool_response"]
    assert span.status.status_code is StatusCode.ERROR and "boom on 1" in span.status.description


async def test_parallel_tool_calls(traced):
    team = RoundRobinGroupChat(
        [
            AssistantAgent("planner", planner_client()),
            AssistantAgent("solver", solver_client(parallel=True), tools=tools(), max_tool_iterations=5),
            AssistantAgent("reviewer", reviewer_client()),
        ],
        name="team",
        termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(10),
    )
    async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        await team.run(task=example.TASK)
    run = handle.run
    assert shape(run)[4:15] == [
        "4 agent_turn solver ^root [] ok",
        "5 llm_response solver ^agent_turn#4 [saw:0 saw:3] ok",
        "6 tool_call solver ^agent_turn#4 [produced_by:5] ok",
        "7 tool_call solver ^agent_turn#4 [produced_by:5] ok",
        "8 tool_response solver ^agent_turn#4 [tool_result_of:6] ok",
        "9 tool_response solver ^agent_turn#4 [tool_result_of:7] ok",
        "10 llm_response solver ^agent_turn#4 [continues:5 observed:8 observed:9] ok",
        "11 tool_call solver ^agent_turn#4 [produced_by:10] ok",
        "12 tool_response solver ^agent_turn#4 [tool_result_of:11] ok",
        "13 llm_response solver ^agent_turn#4 [continues:10 observed:12] ok",
        "14 message solver ^agent_turn#4 [produced_by:13] ok",
    ]
    assert [run.step_at(i).arguments for i in (6, 7)] == [{"a": 17, "b": 3}, {"a": 25, "b": 3}]
    assert [run.step_at(i).content for i in (8, 9)] == ["51", "75"]
    recording = run.recording
    # tool ordinals follow the model's response order
    assert recording.find("team/solver", "tool", 0).request["arguments"] == {"a": 17, "b": 3}
    assert recording.find("team/solver", "tool", 1).request["arguments"] == {"a": 25, "b": 3}
    assert recording.find("team/solver", "tool", 2).request == {"name": "add", "arguments": {"a": 51, "b": 75}}
    assert handle.outcome.status == "success"


async def test_repeated_call_ids_are_paired_correctly(traced):
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, RequestUsage

    def reusing_ids(request: ScriptedRequest):  # a model that reuses one call id everywhere
        if request.tool_rounds() >= 2:
            return "done. APPROVE"
        n = request.tool_rounds() + 1
        calls = [
            FunctionCall(id="dup", name="add", arguments=json.dumps({"a": n, "b": 10})),
            FunctionCall(id="dup", name="multiply", arguments=json.dumps({"a": n, "b": 10})),
        ]
        usage = RequestUsage(prompt_tokens=1, completion_tokens=1)
        return CreateResult(finish_reason="function_calls", content=calls, usage=usage, cached=False)

    agent = AssistantAgent("a", ScriptedChatCompletionClient(reusing_ids), tools=tools(), max_tool_iterations=3)
    team = RoundRobinGroupChat([agent], termination_condition=TextMentionTermination("APPROVE"))
    async with causaltrace.run(task="x") as handle:
        await team.run(task="x")
    run = handle.run
    calls = {s.step_id: s for s in run.steps if s.kind == "tool_call"}
    pairs = []
    for s in run.steps:
        if s.kind == "tool_response":
            (call_id,) = s.deps_of_kind("tool_result_of")
            call = calls[call_id]
            pairs.append((call.tool_name, call.arguments["a"], s.content))
    assert pairs == [("add", 1, "11"), ("multiply", 1, "10"), ("add", 2, "12"), ("multiply", 2, "20")]
    assert all(s.call_id == "dup" for s in calls.values())


async def test_selector_group_chat_speaker_selection(traced):
    team = SelectorGroupChat(
        [
            AssistantAgent("planner", planner_client()),
            AssistantAgent("solver", solver_client(), tools=tools(), max_tool_iterations=5),
            AssistantAgent("reviewer", reviewer_client()),
        ],
        model_client=selector_client(),
        termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(10),
    )
    async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        await team.run(task=example.TASK)
    run = handle.run
    mgr = "SelectorGroupChatManager"
    assert shape(run) == [
        "0 task user ^root [] ok",
        f"1 llm_response {mgr} ^root [saw:0] ok",
        f"2 speaker_selection {mgr} ^root [produced_by:1] ok",
        "3 agent_turn planner ^root [selected_by:2] ok",
        "4 llm_response planner ^agent_turn#3 [saw:0] ok",
        "5 message planner ^agent_turn#3 [produced_by:4] ok",
        f"6 llm_response {mgr} ^root [continues:1 saw:5] ok",
        f"7 speaker_selection {mgr} ^root [produced_by:6] ok",
        "8 agent_turn solver ^root [selected_by:7] ok",
        "9 llm_response solver ^agent_turn#8 [saw:0 saw:5] ok",
        "10 tool_call solver ^agent_turn#8 [produced_by:9] ok",
        "11 tool_response solver ^agent_turn#8 [tool_result_of:10] ok",
        "12 llm_response solver ^agent_turn#8 [continues:9 observed:11] ok",
        "13 tool_call solver ^agent_turn#8 [produced_by:12] ok",
        "14 tool_response solver ^agent_turn#8 [tool_result_of:13] ok",
        "15 llm_response solver ^agent_turn#8 [continues:12 observed:14] ok",
        "16 message solver ^agent_turn#8 [produced_by:15] ok",
        f"17 llm_response {mgr} ^root [continues:6 saw:16] ok",
        f"18 speaker_selection {mgr} ^root [produced_by:17] ok",
        "19 agent_turn reviewer ^root [selected_by:18] ok",
        "20 llm_response reviewer ^agent_turn#19 [saw:0 saw:5 saw:16] ok",
        "21 message reviewer ^agent_turn#19 [produced_by:20] ok",
        "22 final_answer reviewer ^root [answer_of:21] ok",
    ]
    assert [run.step_at(i).outputs["selected"] for i in (2, 7, 18)] == ["planner", "solver", "reviewer"]
    assert run.recording.find(f"SelectorGroupChat/{mgr}", "llm", 2) is not None
    assert handle.outcome.status == "success"


async def test_swarm_handoff(traced):
    def alice(request: ScriptedRequest):
        return call("transfer_to_bob") if request.tool_rounds() == 0 else "done"

    team = Swarm(
        [
            AssistantAgent("alice", ScriptedChatCompletionClient(alice), handoffs=["bob"]),
            AssistantAgent("bob", ScriptedChatCompletionClient(lambda r: f"bob read {len(r.messages)} messages. END")),
        ],
        termination_condition=TextMentionTermination("END"),
    )
    async with causaltrace.run(task="hello") as handle:
        await team.run(task="hello")
    run = handle.run
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn alice ^root [] ok",
        "2 llm_response alice ^agent_turn#1 [saw:0] ok",
        "3 tool_call alice ^agent_turn#1 [produced_by:2] ok",
        "4 tool_response alice ^agent_turn#1 [tool_result_of:3] ok",
        "5 handoff alice ^agent_turn#1 [produced_by:2] ok",
        "6 agent_turn bob ^root [handoff_from:5] ok",
        "7 llm_response bob ^agent_turn#6 [saw:0 saw:5] ok",
        "8 message bob ^agent_turn#6 [produced_by:7] ok",
        "9 final_answer bob ^root [answer_of:8] ok",
    ]
    assert run.step_at(5).outputs["target"] == "bob"
    assert handle.outcome.final_answer == "bob read 3 messages."
    assert handle.outcome.status == "unknown"  # normal finish, no verifier


async def test_code_executor_agent(traced):
    def writer(request: ScriptedRequest):
        return "```python\nprint(6 * 7)\n```" if request.tool_rounds() == 0 else "unused"

    with pytest.warns(UserWarning):  # "No approval function set"
        runner = CodeExecutorAgent("runner", code_executor=SubprocessExecutor())
    team = RoundRobinGroupChat(
        [AssistantAgent("writer", ScriptedChatCompletionClient(writer)), runner],
        termination_condition=MaxMessageTermination(3),
    )
    async with causaltrace.run(task="print 42", verify=lambda outcome: outcome.final_answer == "42") as handle:
        await team.run(task="print 42")
    run = handle.run
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn writer ^root [] ok",
        "2 llm_response writer ^agent_turn#1 [saw:0] ok",
        "3 message writer ^agent_turn#1 [produced_by:2] ok",
        "4 agent_turn runner ^root [] ok",
        "5 code_execution runner ^agent_turn#4 [executes:3] ok",
        "6 message runner ^agent_turn#4 [produced_by:5] ok",
    ]
    assert run.step_at(3).inputs == {"code": "print(6 * 7)\n", "language": "python"}
    execution = run.step_at(5)
    assert execution.inputs == {"code": "print(6 * 7)\n", "language": "python"}
    assert execution.outputs == {"stdout": "42\n", "stderr": "", "exit_code": 0, "error": None}
    # a limit stop (MaxMessageTermination): no final_answer step; the verifier still decides
    assert handle.outcome.stop == "limit" and handle.outcome.status == "success"


async def test_failing_code_is_an_error_code_execution(traced):
    def writer(request: ScriptedRequest):
        return "```python\nraise SystemExit(3)\n```"

    with pytest.warns(UserWarning):
        runner = CodeExecutorAgent("runner", code_executor=SubprocessExecutor())
    team = RoundRobinGroupChat(
        [AssistantAgent("writer", ScriptedChatCompletionClient(writer)), runner],
        termination_condition=MaxMessageTermination(3),
    )
    async with causaltrace.run(task="fail") as handle:
        await team.run(task="fail")
    execution = handle.run.step_at(5)
    assert execution.kind == "code_execution" and execution.status == "error"
    assert execution.outputs["exit_code"] == 3 and execution.outputs["error"] == "exit code 3"


async def test_max_messages_stop_is_a_limit_failure(traced):
    team = RoundRobinGroupChat(
        [
            AssistantAgent("a", ScriptedChatCompletionClient(lambda r: f"thinking ({len(r.messages)})")),
            AssistantAgent("b", ScriptedChatCompletionClient(lambda r: f"still thinking ({len(r.messages)})")),
        ],
        termination_condition=MaxMessageTermination(4),
    )
    result = await team.run(task="go")  # no causaltrace.run(): the adapter owns the run
    (run,) = traced.runs
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn a ^root [] ok",
        "2 llm_response a ^agent_turn#1 [saw:0] ok",
        "3 message a ^agent_turn#1 [produced_by:2] ok",
        "4 agent_turn b ^root [] ok",
        "5 llm_response b ^agent_turn#4 [saw:0 saw:3] ok",
        "6 message b ^agent_turn#4 [produced_by:5] ok",
        "7 agent_turn a ^root [] ok",
        "8 llm_response a ^agent_turn#7 [continues:2 saw:6] ok",
        "9 message a ^agent_turn#7 [produced_by:8] ok",
    ]
    assert run.outcome.status == "failure" and run.outcome.stop == "limit"
    assert run.outcome.final_answer == "thinking (4)"
    assert run.outcome.reason == result.stop_reason
    root = [s for s in traced.exporter.get_finished_spans() if semconv.is_root_span_name(s.name)][0]
    assert root.status.status_code is StatusCode.ERROR and "Maximum number of messages" in root.status.description


async def test_agent_exception_is_an_error_step_and_a_failed_run(traced):
    def broken(request: ScriptedRequest):
        raise ConnectionError("model endpoint down")

    team = RoundRobinGroupChat(
        [
            AssistantAgent("ok", ScriptedChatCompletionClient(lambda r: "fine")),
            AssistantAgent("bad", ScriptedChatCompletionClient(broken)),
        ],
        termination_condition=MaxMessageTermination(5),
    )
    with pytest.raises(RuntimeError, match="model endpoint down"):  # AutoGen's own exception, unchanged
        await team.run(task="go")
    (run,) = traced.runs
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn ok ^root [] ok",
        "2 llm_response ok ^agent_turn#1 [saw:0] ok",
        "3 message ok ^agent_turn#1 [produced_by:2] ok",
        "4 agent_turn bad ^root [] error",
        "5 llm_response bad ^agent_turn#4 [saw:0 saw:3] error",
        "6 error bad ^agent_turn#4 [] error",
    ]
    assert run.step_at(6).error.type == "ConnectionError"
    assert run.outcome.status == "failure" and run.outcome.stop == "error"
    assert run.outcome.reason == "agent 'bad' raised ConnectionError: model endpoint down"
    turn = [s for s in spans_by_kind(traced.exporter)["agent_turn"] if s.attributes[semconv.STEP_INDEX] == 4][0]
    assert turn.status.status_code is StatusCode.ERROR


def _slow_agent(started: asyncio.Event, seconds: float) -> AssistantAgent:
    async def slow(x: int) -> int:
        started.set()
        await asyncio.sleep(seconds)
        return x

    def policy(request: ScriptedRequest):
        return call("slow", x=1) if request.tool_rounds() == 0 else "done"

    return AssistantAgent("a", ScriptedChatCompletionClient(policy), tools=[FunctionTool(slow, description="s")])


async def _cancelled_mid_tool(traced, runnable) -> Run:
    """Run ``runnable(started)`` (``started`` is set once its slow tool runs), cancel its asyncio task then (what
    asyncio.wait_for or a UI stop button does): the cancellation passes through and the run is a limit stop."""
    started = asyncio.Event()
    task = asyncio.ensure_future(runnable(started).run(task="go"))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (run,) = traced.runs
    assert run.outcome.status == "failure" and run.outcome.stop == "limit"
    assert "cancelled" in run.outcome.reason
    return run


async def test_cancelled_agent_run_is_a_limit_stop(traced):
    # Cancelling the asyncio task in the middle of a tool call.
    run = await _cancelled_mid_tool(traced, lambda started: _slow_agent(started, 30))
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn a ^root [] error",
        "2 llm_response a ^agent_turn#1 [saw:0] ok",
        "3 tool_call a ^agent_turn#1 [produced_by:2] error",
    ]
    assert run.step_at(1).error.type == "Cancelled" and run.step_at(3).error.type == "NoResult"


async def test_cancelled_team_run_is_a_limit_stop(traced):
    # AutoGen lets a cancelled team.run end only once its runtime is idle (the running turn completes first);
    # AutoGen's own CancellationToken, cancelled while a tool runs, leaves team.run hanging even uninstrumented.
    run = await _cancelled_mid_tool(
        traced,
        lambda started: RoundRobinGroupChat(
            [_slow_agent(started, 0.2)], termination_condition=MaxMessageTermination(5)
        ),
    )
    assert all(s.ended_at is not None for s in run.steps)
    assert "final_answer" not in [s.kind for s in run.steps]


async def test_user_proxy_input_is_a_user_message(traced):
    async def typed(prompt: str, token: CancellationToken | None = None) -> str:
        return "use 5"

    team = RoundRobinGroupChat(
        [
            UserProxyAgent("human", input_func=typed),
            AssistantAgent("a", ScriptedChatCompletionClient(lambda r: f"ok, {r.last_user_text()}. APPROVE")),
        ],
        termination_condition=TextMentionTermination("APPROVE"),
    )
    async with causaltrace.run(task="x") as handle:
        await team.run(task="x")
    assert shape(handle.run) == [
        "0 task user ^root [] ok",
        "1 agent_turn human ^root [] ok",
        "2 message human ^agent_turn#1 [] ok",
        "3 agent_turn a ^root [] ok",
        "4 llm_response a ^agent_turn#3 [saw:0 saw:2] ok",
        "5 message a ^agent_turn#3 [produced_by:4] ok",
        "6 final_answer a ^root [answer_of:5] ok",
    ]
    user_message = handle.run.step_at(2)
    assert user_message.metadata["user_input"] is True and user_message.content == "use 5"
    assert user_message not in handle.run.candidate_steps()
    assert handle.outcome.final_answer == "ok, use 5."


async def test_memory_access_and_memory_read(traced):
    from autogen_core.memory import ListMemory, MemoryContent

    memory = ListMemory()
    await memory.add(MemoryContent(content="the user likes 7", mime_type="text/plain"))
    agent = AssistantAgent(
        "a",
        ScriptedChatCompletionClient(lambda r: "likes 7" if "likes 7" in r.text() else "no memory"),
        memory=[memory],
    )
    result = await agent.run(task="what do I like?")  # a single agent's run (BaseChatAgent.run)
    (run,) = traced.runs
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn a ^root [] ok",
        "2 memory_access a ^agent_turn#1 [] ok",
        "3 llm_response a ^agent_turn#1 [saw:0 memory_read:2] ok",
        "4 message a ^agent_turn#1 [produced_by:3] ok",
        "5 final_answer a ^root [answer_of:4] ok",
    ]
    access = run.step_at(2)
    assert access.inputs == {"query": "what do I like?"} and access.outputs == {"results": ["the user likes 7"]}
    assert run.outcome.final_answer == result.messages[-1].content == "likes 7"
    assert run.recording.signature()[0][:3] == ("a", "llm", 0)  # a top-level agent's key is its name


async def test_streaming_agent_run_stream(traced):
    agent = AssistantAgent(
        "streamer", ScriptedChatCompletionClient(lambda r: "three streamed words"), model_client_stream=True
    )
    items = [item async for item in agent.run_stream(task="go")]
    assert type(items[-1]).__name__ == "TaskResult"
    (run,) = traced.runs
    assert [s.kind for s in run.steps] == ["task", "agent_turn", "llm_response", "message", "final_answer"]
    assert run.step_at(2).content == "three streamed words" and run.step_at(2).usage.output_tokens == 3
    assert run.outcome.final_answer == "three streamed words"
    assert len(run.recording.calls) == 1


async def test_agent_tool_runs_nest_under_their_tool_call(traced):
    from autogen_agentchat.tools import AgentTool

    helper = AssistantAgent(
        "helper", ScriptedChatCompletionClient(lambda r: f"helper says {r.task()}"), description="h"
    )

    def boss(request: ScriptedRequest):
        return call("helper", task="what is 9?") if request.tool_rounds() == 0 else "helper answered. APPROVE"

    team = RoundRobinGroupChat(
        [AssistantAgent("boss", ScriptedChatCompletionClient(boss), tools=[AgentTool(helper)], max_tool_iterations=3)],
        name="team",
        termination_condition=TextMentionTermination("APPROVE"),
    )
    async with causaltrace.run(task="x") as handle:
        await team.run(task="x")
    run = handle.run
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn boss ^root [] ok",
        "2 llm_response boss ^agent_turn#1 [saw:0] ok",
        "3 tool_call boss ^agent_turn#1 [produced_by:2] ok",
        "4 task boss ^tool_call#3 [delegated_by:3] ok",
        "5 agent_turn helper ^tool_call#3 [] ok",
        "6 llm_response helper ^agent_turn#5 [saw:4] ok",
        "7 message helper ^agent_turn#5 [produced_by:6] ok",
        "8 tool_response boss ^agent_turn#1 [tool_result_of:3 answer_of:7] ok",
        "9 llm_response boss ^agent_turn#1 [continues:2 observed:8] ok",
        "10 message boss ^agent_turn#1 [produced_by:9] ok",
        "11 final_answer boss ^root [answer_of:10] ok",
    ]
    assert run.step_at(7).content == "helper says what is 9?"
    keys = [key for key, _, _, _ in run.recording.signature()]
    assert keys == ["team/boss", "team/boss", "team/boss", "team/boss/helper"]


def _inner_team(first: str, second: str) -> RoundRobinGroupChat:
    """A team ``inner`` of two agents, i1 and i2, that always say ``first`` and ``second``, for three messages."""
    return RoundRobinGroupChat(
        [
            AssistantAgent("i1", ScriptedChatCompletionClient(lambda r: first)),
            AssistantAgent("i2", ScriptedChatCompletionClient(lambda r: second)),
        ],
        name="inner",
        termination_condition=MaxMessageTermination(3),
    )


async def test_nested_team_participant(traced):
    inner = _inner_team("inner one", "inner two")
    outer = RoundRobinGroupChat(
        [inner, AssistantAgent("o", ScriptedChatCompletionClient(lambda r: "outer done. APPROVE"))],
        name="outer",
        termination_condition=TextMentionTermination("APPROVE"),
    )
    async with causaltrace.run(task="x") as handle:
        await outer.run(task="x")
    run = handle.run
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn inner ^root [] ok",
        "2 agent_turn i1 ^agent_turn#1 [] ok",
        "3 llm_response i1 ^agent_turn#2 [saw:0] ok",
        "4 message i1 ^agent_turn#2 [produced_by:3] ok",
        "5 agent_turn i2 ^agent_turn#1 [] ok",
        "6 llm_response i2 ^agent_turn#5 [saw:0 saw:4] ok",
        "7 message i2 ^agent_turn#5 [produced_by:6] ok",
        "8 agent_turn o ^root [] ok",
        "9 llm_response o ^agent_turn#8 [saw:0 saw:4 saw:7] ok",
        "10 message o ^agent_turn#8 [produced_by:9] ok",
        "11 final_answer o ^root [answer_of:10] ok",
    ]
    assert [k for k, _, _, _ in run.recording.signature()] == ["outer/inner/i1", "outer/inner/i2", "outer/o"]


async def test_society_of_mind_sees_its_inner_team(traced):
    from autogen_agentchat.agents import SocietyOfMindAgent

    inner = _inner_team("an idea", "a critique")
    som = SocietyOfMindAgent("som", team=inner, model_client=ScriptedChatCompletionClient(lambda r: "summary. APPROVE"))
    team = RoundRobinGroupChat([som], name="team", termination_condition=TextMentionTermination("APPROVE"))
    async with causaltrace.run(task="x") as handle:
        await team.run(task="x")
    assert shape(handle.run) == [
        "0 task user ^root [] ok",
        "1 agent_turn som ^root [] ok",
        "2 agent_turn inner ^agent_turn#1 [] ok",
        "3 agent_turn i1 ^agent_turn#2 [] ok",
        "4 llm_response i1 ^agent_turn#3 [saw:0] ok",
        "5 message i1 ^agent_turn#3 [produced_by:4] ok",
        "6 agent_turn i2 ^agent_turn#2 [] ok",
        "7 llm_response i2 ^agent_turn#6 [saw:0 saw:5] ok",
        "8 message i2 ^agent_turn#6 [produced_by:7] ok",
        "9 llm_response som ^agent_turn#1 [saw:0 saw:5 saw:8] ok",
        "10 message som ^agent_turn#1 [produced_by:9] ok",
        "11 final_answer som ^root [answer_of:10] ok",
    ]
    keys = [k for k, _, _, _ in handle.run.recording.signature()]
    assert keys == ["team/som", "team/som/inner/i1", "team/som/inner/i2"]


async def test_reflection_tool_summary_and_thought(traced):
    from autogen_core.models import CreateResult, RequestUsage

    def reflecting(request: ScriptedRequest):
        if request.tool_choice == "none":  # the reflection call
            return CreateResult(
                finish_reason="stop",
                content=f"the sum is {request.messages[-1].content[0].content}",
                thought="the tool added them",
                usage=RequestUsage(prompt_tokens=5, completion_tokens=4),
                cached=False,
            )
        return call("add", a=1, b=2)

    a = AssistantAgent(
        "a",
        ScriptedChatCompletionClient(reflecting),
        tools=[FunctionTool(example.add, description="add")],
        reflect_on_tool_use=True,
    )
    b = AssistantAgent(  # no reflection, one tool iteration: a ToolCallSummaryMessage
        "b",
        ScriptedChatCompletionClient(lambda r: call("add", a=3, b=4)),
        tools=[FunctionTool(example.add, description="add")],
    )
    team = RoundRobinGroupChat([a, b], name="team", termination_condition=MaxMessageTermination(3))
    async with causaltrace.run(task="x") as handle:
        await team.run(task="x")
    run = handle.run
    assert shape(run) == [
        "0 task user ^root [] ok",
        "1 agent_turn a ^root [] ok",
        "2 llm_response a ^agent_turn#1 [saw:0] ok",
        "3 tool_call a ^agent_turn#1 [produced_by:2] ok",
        "4 tool_response a ^agent_turn#1 [tool_result_of:3] ok",
        "5 llm_response a ^agent_turn#1 [continues:2 observed:4] ok",
        "6 reasoning a ^agent_turn#1 [produced_by:5] ok",
        "7 message a ^agent_turn#1 [produced_by:5] ok",
        "8 agent_turn b ^root [] ok",
        "9 llm_response b ^agent_turn#8 [saw:0 saw:7] ok",
        "10 tool_call b ^agent_turn#8 [produced_by:9] ok",
        "11 tool_response b ^agent_turn#8 [tool_result_of:10] ok",
        "12 message b ^agent_turn#8 [produced_by:9] ok",
    ]
    assert run.step_at(5).outputs["thought"] == "the tool added them" and run.step_at(5).content == "the sum is 3"
    assert run.step_at(6).content == "the tool added them"
    assert run.step_at(12).metadata["message_type"] == "ToolCallSummaryMessage" and run.step_at(12).content == "7"
    assert run.recording.find("team/a", "llm", 1).request["tool_choice"] == "none"


async def test_two_concurrent_teams_are_two_runs(traced):
    def team_for():
        return example.build()

    task_a, task_b = example.TASK, "Compute (2 + 3) * 4. Report the answer as 'RESULT: <number>'."
    await asyncio.gather(team_for().run(task=task_a), team_for().run(task=task_b))
    assert len(traced.runs) == 2
    by_task = {run.task: run for run in traced.runs}
    assert shape(by_task[task_a]) == EXAMPLE_SHAPE and shape(by_task[task_b]) == EXAMPLE_SHAPE
    assert by_task[task_a].outcome.final_answer == "RESULT: 126 verified."
    assert by_task[task_b].outcome.final_answer == "RESULT: 20 verified."
    assert by_task[task_a].trace_id != by_task[task_b].trace_id
    for run in traced.runs:
        assert {s.run_id for s in run.steps} == {run.run_id}
        assert len(run.recording.calls) == 7
    spans = traced.exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 2


async def test_autogen_own_spans_land_in_the_run_trace(traced, monkeypatch):
    # AutoGen emits its spans to the GLOBAL provider; make ours global for this test only.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", traced.provider)
    team = example.build()
    traced.exporter.clear()  # create_agent spans are emitted at build time, outside any run
    async with causaltrace.run(task=example.TASK) as handle:
        await team.run(task=example.TASK)
    spans = traced.exporter.get_finished_spans()
    autogen_spans = [s for s in spans if not s.instrumentation_scope.name.startswith("causaltrace")]
    assert len(autogen_spans) > 20
    assert {s.context.trace_id for s in spans} == {int(handle.run.trace_id, 16)}
    # AUTOGEN_DISABLE_RUNTIME_TRACING=true (read when the team's runtime is built) drops the runtime's spans
    monkeypatch.setenv("AUTOGEN_DISABLE_RUNTIME_TRACING", "true")
    quiet = example.build()
    traced.exporter.clear()
    async with causaltrace.run(task=example.TASK):
        await quiet.run(task=example.TASK)
    names = [s.name for s in traced.exporter.get_finished_spans()]
    assert not any(name.startswith("autogen ") for name in names)  # autogen create/send/publish/process/ack
    ours = [s for s in traced.exporter.get_finished_spans() if s.instrumentation_scope.name == "causaltrace"]
    assert sum(1 for s in ours if (s.attributes or {}).get(semconv.STEP_KIND) in ("llm_response", "tool_call")) == 7


# --------------------------------------------------------------------------------------- instrumentation API


def test_instrument_is_idempotent_and_uninstrument_restores_originals():
    from autogen_agentchat.agents import AssistantAgent as Assistant
    from autogen_agentchat.teams._group_chat._base_group_chat import BaseGroupChat

    from causaltrace.instrumentation.autogen import _patches as patches

    assert not is_instrumented()
    run_stream = BaseGroupChat.__dict__["run_stream"]
    execute = Assistant.__dict__["_execute_tool_call"]
    create = ScriptedChatCompletionClient.__dict__["create"]
    provider = TracerProvider()
    try:
        instrument_autogen(provider, TraceConfig(store=False))
        first = dict(patches.patched())
        wrapped = BaseGroupChat.__dict__["run_stream"]
        instrument_autogen(provider, TraceConfig(store=False))  # idempotent: nothing wrapped twice
        assert patches.patched() == first and BaseGroupChat.__dict__["run_stream"] is wrapped
        assert wrapped.__wrapped__ is run_stream
        assert ScriptedChatCompletionClient.__dict__["create"].__wrapped__ is create
        assert len(first) >= 12
    finally:
        uninstrument_autogen()
        uninstrument_autogen()  # idempotent
        reset_tracing()
    assert BaseGroupChat.__dict__["run_stream"] is run_stream
    assert Assistant.__dict__["_execute_tool_call"] is execute
    assert ScriptedChatCompletionClient.__dict__["create"] is create
    assert patches.patched() == {}


async def test_uninstrumented_runs_emit_nothing():
    provider, exporter = capture_spans()
    instrument_autogen(provider, TraceConfig(store=False))
    uninstrument_autogen()
    try:
        result = await example.build().run(task=example.TASK)
        assert result.messages[-1].content == "RESULT: 126 verified. APPROVE"
        assert exporter.get_finished_spans() == ()
    finally:
        reset_tracing()


def test_missing_extra_names_the_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "autogen_agentchat", None)
    with pytest.raises(MissingExtraError) as info:
        instrument_autogen()
    assert "pip install 'causaltrace[autogen]'" in str(info.value)
    assert info.value.extra == "autogen" and not is_instrumented()


def test_autogen_instrumentor_is_a_base_instrumentor():
    pytest.importorskip("opentelemetry.instrumentation.instrumentor")
    from causaltrace.instrumentation.autogen import AutogenInstrumentor

    instrumentor = AutogenInstrumentor()
    try:
        instrumentor.instrument(tracer_provider=TracerProvider(), config=TraceConfig(store=False))
        assert is_instrumented()
    finally:
        instrumentor.uninstrument()
        reset_tracing()
    assert not is_instrumented()


def test_stop_classification():
    from causaltrace.instrumentation.autogen._runs import classify_stop

    assert classify_stop("Maximum number of messages 4 reached, current message count: 4") == ("limit", None)
    assert classify_stop("Maximum number of turns 3 reached.") == ("limit", None)
    assert classify_stop("Timeout of 2.0 seconds reached") == ("limit", None)
    assert classify_stop(
        "Token usage limit reached, total token count: 90, prompt token count: 80, completion token count: 10."
    ) == ("limit", None)
    assert classify_stop("Text 'APPROVE' mentioned") == ("normal", "APPROVE")
    assert classify_stop(
        "Text 'APPROVE' mentioned, Maximum number of messages 4 reached, current message count: 4"
    ) == (
        "normal",
        "APPROVE",
    )
    assert classify_stop("Handoff to user from alice detected.") == ("normal", None)
    assert classify_stop(None) == ("normal", None)


def test_scripted_solver_is_reactive_not_canned():
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        UserMessage,
    )

    policy = solver_policy()
    plan = "PLAN: step 1: add 2 and 3. step 2: multiply the sum by 4. solver, use the tools."
    first = policy(ScriptedRequest([UserMessage(content=plan, source="planner")]))
    assert first == call("add", a=2, b=3)
    other = policy(ScriptedRequest([UserMessage(content=plan.replace("2 and 3", "5 and 8"), source="planner")]))
    assert other == call("add", a=5, b=8)
    # the next call is built from the tool RESULT in the context, whatever produced it
    history = [
        UserMessage(content=plan, source="planner"),
        AssistantMessage(content=[FunctionCall(id="c", name="add", arguments='{"a": 2, "b": 3}')], source="solver"),
        FunctionExecutionResultMessage(content=[FunctionExecutionResult(content="99", call_id="c", name="add")]),
    ]
    assert policy(ScriptedRequest(history)) == call("multiply", a=99, b=4)


def test_example_runs_as_a_script():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    ok = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "autogen_team.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "run id:" in ok.stdout and "outcome: success" in ok.stdout
    failed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "autogen_team.py"), "--fail"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert failed.returncode == 1, failed.stderr
    assert "outcome: failure" in failed.stdout and "RESULT 129 is wrong" in failed.stdout
