"""The smolagents adapter: exact steps, dependencies, statuses, outcomes and recordings of scripted runs.

Every agent here is driven by a REACTIVE scripted model (``causaltrace.testing.smolagents``): its reply is a function
of the request, so these runs are deterministic and a replay could change them.

Snapshot rows are ``(index, kind, agent, parent kind, sorted (dependency kind, producer index), status)``; refresh
one with ``dump(run)`` after checking the new run by hand.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode

pytest.importorskip("smolagents")

from smolagents import CodeAgent, LogLevel, ToolCallingAgent, tool
from smolagents.models import ChatMessage
from smolagents.utils import AgentGenerationError

import causaltrace
from causaltrace import semconv
from causaltrace.config import TraceConfig
from causaltrace.exceptions import MissingExtraError
from causaltrace.instrumentation.smolagents import (
    instrument_smolagents,
    is_instrumented,
    uninstrument_smolagents,
)
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.schema import Run
from causaltrace.testing.smolagents import (
    Call,
    ScriptedModel,
    ScriptedRequest,
    numbers_in,
    sum_of_powers_tool,
    tool_worker_policy,
)

ROOT = Path(__file__).resolve().parents[2]
SQUARES_TASK = "Compute the sum of the squares of these numbers: [1, 2, 3, 4, 5, 6]"


def load_example():
    """examples/smolagents_agents.py as a module (it is not a package)."""
    spec = importlib.util.spec_from_file_location("smolagents_agents_example", ROOT / "examples" / "smolagents_agents.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = load_example()


@pytest.fixture
def exporter(span_capture):
    provider, exp = span_capture
    instrument_smolagents(provider, TraceConfig(store=False))
    yield exp
    uninstrument_smolagents()
    reset_tracing()


def rows(run: Run) -> list[tuple]:
    """(index, kind, agent, parent kind, sorted deps as (kind, producer index), status) per step."""
    by_id = {s.step_id: s for s in run.steps}
    out = []
    for s in run.steps:
        parent = by_id[s.parent_step_id].kind if s.parent_step_id else None
        deps = tuple(sorted((d.kind, by_id[d.step_id].index) for d in s.depends_on))
        out.append((s.index, s.kind, s.agent, parent, deps, s.status))
    return out


def dump(run: Run) -> str:
    """The rows as Python literals (to write a snapshot after checking the run by hand)."""
    return "\n".join(f"    {row!r}," for row in rows(run))


def math_agent(tools=None, policy=None, **kwargs) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=tools if tools is not None else [sum_of_powers_tool()],
        model=ScriptedModel(policy or tool_worker_policy()),
        name="math_agent",
        description="adds up powers",
        verbosity_level=LogLevel.OFF,
        **kwargs,
    )


# math_agent's plain run on SQUARES_TASK: a sum_of_powers round, a final_answer round, the answer
MATH_AGENT_ROWS = [
    (0, "task", "user", None, (), "ok"),
    (1, "agent_turn", "math_agent", None, (), "ok"),
    (2, "llm_response", "math_agent", "agent_turn", (("saw", 0),), "ok"),
    (3, "tool_call", "math_agent", "agent_turn", (("produced_by", 2),), "ok"),
    (4, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 3),), "ok"),
    (5, "llm_response", "math_agent", "agent_turn", (("continues", 2), ("observed", 4)), "ok"),
    (6, "tool_call", "math_agent", "agent_turn", (("produced_by", 5),), "ok"),
    (7, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 6),), "ok"),
    (8, "final_answer", "math_agent", "agent_turn", (("answer_of", 7), ("produced_by", 5)), "ok"),
]


def coder(policy, tools=()) -> CodeAgent:
    return CodeAgent(tools=list(tools), model=ScriptedModel(policy), name="coder", verbosity_level=LogLevel.OFF)


def root_span(exporter):
    return [s for s in exporter.get_finished_spans() if semconv.is_root_span_name(s.name)]


# ------------------------------------------------------------------------------------------- ToolCallingAgent


def test_tool_calling_agent_success(exporter):
    with causaltrace.run(verify="91") as handle:
        answer = math_agent().run(SQUARES_TASK)
    assert answer == "91"
    run = handle.run
    assert rows(run) == MATH_AGENT_ROWS
    assert handle.outcome.status == "success" and handle.outcome.stop == "normal"
    assert run.framework == "smolagents" and run.task == SQUARES_TASK
    llm, call, resp = run.steps[2], run.steps[3], run.steps[4]
    assert llm.model == "scripted" and llm.usage is not None and llm.usage.output_tokens > 0
    assert llm.outputs["tool_calls"] == [
        {"name": "sum_of_powers", "arguments": {"numbers": [1, 2, 3, 4, 5, 6], "power": 2}, "call_alias": "call#0",
         "id": "call_0_0"}
    ]
    assert (call.tool_name, call.arguments, call.call_id) == (
        "sum_of_powers", {"numbers": [1, 2, 3, 4, 5, 6], "power": 2}, "call_0_0")
    assert resp.call_id == "call_0_0" and resp.outputs == {"result": 91, "is_error": False}
    assert run.steps[1].metadata["agent_key"] == "math_agent"
    # one trace; spans nest under the agent_turn; links carry the dependency kinds
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    by_step = {s.attributes.get(semconv.STEP_ID): s for s in spans}
    turn_span = by_step[run.steps[1].step_id]
    assert by_step[llm.step_id].parent.span_id == turn_span.context.span_id
    # the call and its result are one span: the result's dependency on its call is no link to itself
    assert resp.span_id == call.span_id and resp.step_id not in by_step
    assert by_step[call.step_id].attributes[semconv.RESULT_ID] == resp.step_id
    assert list(by_step[call.step_id].attributes[semconv.RESULT_PREFIX + "depends_on.kinds"]) == ["tool_result_of"]
    assert by_step[call.step_id].attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_0_0"


def test_tool_that_raises_then_recovers(exporter):
    attempts = []

    @tool
    def sum_of_powers(numbers: list, power: int) -> int:
        """Add up powers; the service is busy on the first call.

        Args:
            numbers: the integers.
            power: the exponent.
        """
        attempts.append(list(numbers))
        if len(attempts) == 1:
            raise TimeoutError("the arithmetic service is busy")
        return sum(int(n) ** int(power) for n in numbers)

    with causaltrace.run(verify="91") as handle:
        math_agent(tools=[sum_of_powers]).run(SQUARES_TASK)
    run = handle.run
    assert rows(run) == [  # the plain run, but the first tool response failed, so one more round
        *MATH_AGENT_ROWS[:4],
        (4, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 3),), "error"),
        *MATH_AGENT_ROWS[5:8],
        (8, "llm_response", "math_agent", "agent_turn", (("continues", 5), ("observed", 7)), "ok"),
        (9, "tool_call", "math_agent", "agent_turn", (("produced_by", 8),), "ok"),
        (10, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 9),), "ok"),
        (11, "final_answer", "math_agent", "agent_turn", (("answer_of", 10), ("produced_by", 8)), "ok"),
    ]
    failed = run.steps[4]
    # smolagents empties step.tool_calls when a tool raises: the id still comes from the model's message
    assert failed.call_id == run.steps[3].call_id == "call_0_0"
    assert failed.error.type == "AgentToolExecutionError" and "service is busy" in failed.error.message
    assert failed.outputs["is_error"] is True
    # the verifier decides: the run succeeded although a tool failed
    assert handle.outcome.status == "success"
    span = next(s for s in exporter.get_finished_spans() if s.attributes.get(semconv.RESULT_ID) == failed.step_id)
    assert span.status.status_code is StatusCode.ERROR
    # recorded: the failed call with its error, then the retry
    tools = [c for c in run.recording.calls if c.kind == "tool"]
    assert [(c.ordinal, c.error is not None) for c in tools] == [(0, True), (1, False), (2, False)]


# -------------------------------------------------------------------------------------------------- CodeAgent


def _code_policy(request: ScriptedRequest) -> str:
    """Reads the numbers of its task; writes code calling the tool and final_answer in one snippet."""
    numbers = numbers_in(request.task.split("numbers:")[-1])
    return (
        "Thought: I add the squares with the tool, then answer.\n"
        f"<code>\ntotal = sum_of_powers(numbers={numbers}, power=2)\nprint(total)\nfinal_answer(total)\n</code>"
    )


def test_code_agent_calls_tools_and_final_answer(exporter):
    agent = coder(_code_policy, [sum_of_powers_tool()])
    with causaltrace.run(verify="91") as handle:
        assert agent.run(SQUARES_TASK) == 91
    run = handle.run
    assert rows(run) == [
        (0, "task", "user", None, (), "ok"),
        (1, "agent_turn", "coder", None, (), "ok"),
        (2, "llm_response", "coder", "agent_turn", (("saw", 0),), "ok"),
        (3, "reasoning", "coder", "agent_turn", (("produced_by", 2),), "ok"),
        (4, "tool_call", "coder", "agent_turn", (("produced_by", 2),), "ok"),
        (5, "code_execution", "coder", "agent_turn", (("executes", 4),), "ok"),
        (6, "tool_call", "coder", "agent_turn", (("produced_by", 5),), "ok"),
        (7, "tool_response", "coder", "agent_turn", (("tool_result_of", 6),), "ok"),
        (8, "tool_call", "coder", "agent_turn", (("produced_by", 5),), "ok"),
        (9, "tool_response", "coder", "agent_turn", (("tool_result_of", 8),), "ok"),
        (10, "final_answer", "coder", "agent_turn", (("answer_of", 9), ("produced_by", 5)), "ok"),
    ]
    code_call, execution = run.steps[4], run.steps[5]
    assert code_call.tool_name == "python_interpreter" and "sum_of_powers(numbers=" in code_call.arguments["code"]
    assert execution.inputs == {"code": code_call.arguments["code"]}
    assert execution.outputs["stdout"] == "91\n" and execution.outputs["exit_code"] == 0
    assert execution.outputs["error"] is None and execution.call_id == code_call.call_id
    assert [s.tool_name for s in run.steps if s.kind == "tool_call"] == ["python_interpreter", "sum_of_powers",
                                                                          "final_answer"]
    assert run.steps[6].arguments == {"numbers": [1, 2, 3, 4, 5, 6], "power": 2}
    assert run.steps[3].content.startswith("Thought: I add the squares")
    # the code's calls ran in the executor's thread, yet stayed in the run's trace
    assert len({s.context.trace_id for s in exporter.get_finished_spans()}) == 1
    # recorded in call order: the code execution first, then the calls the code made
    assert [(c.kind, c.ordinal, c.request["name"] if c.kind == "tool" else None) for c in run.recording.calls] == [
        ("llm", 0, None), ("tool", 0, "python_interpreter"), ("tool", 1, "sum_of_powers"), ("tool", 2, "final_answer")]
    code_output = run.recording.calls[1].decoded_response()
    assert type(code_output).__name__ == "CodeOutput" and code_output.output == 91 and code_output.is_final_answer


def test_code_agent_error_in_code_is_an_error_code_execution(exporter):
    def policy(request: ScriptedRequest) -> str:
        if not request.observations:
            return "Thought: divide.\n<code>\nprint('start')\nx = 1 / 0\n</code>"
        return "Thought: recover.\n<code>\nfinal_answer(7)\n</code>"

    agent = coder(policy)
    with causaltrace.run(verify="7") as handle:
        agent.run("divide")
    run = handle.run
    execution = [s for s in run.steps if s.kind == "code_execution"][0]
    assert execution.status == "error" and execution.outputs["exit_code"] == 1
    assert "ZeroDivisionError" in execution.outputs["error"] and execution.outputs["stdout"] == "start\n"
    second_llm = [s for s in run.steps if s.kind == "llm_response"][1]
    assert ("observed", execution.step_id) in [(d.kind, d.step_id) for d in second_llm.depends_on]
    assert not [s for s in run.steps if s.kind == "error"]  # the code_execution carries the error
    assert handle.outcome.status == "success"


# ---------------------------------------------------------------------------------- manager + managed agent


EXAMPLE_ROWS = [
    (0, "task", "user", None, (), "ok"),
    (1, "agent_turn", "manager", None, (), "ok"),
    (2, "llm_response", "manager", "agent_turn", (("saw", 0),), "ok"),
    (3, "reasoning", "manager", "agent_turn", (("produced_by", 2),), "ok"),
    (4, "tool_call", "manager", "agent_turn", (("produced_by", 2),), "ok"),
    (5, "code_execution", "manager", "agent_turn", (("executes", 4),), "ok"),
    (6, "tool_call", "manager", "agent_turn", (("produced_by", 5),), "ok"),
    (7, "agent_turn", "math_agent", "tool_call", (), "ok"),
    (8, "task", "math_agent", "agent_turn", (("delegated_by", 6),), "ok"),
    (9, "llm_response", "math_agent", "agent_turn", (("saw", 8),), "ok"),
    (10, "tool_call", "math_agent", "agent_turn", (("produced_by", 9),), "ok"),
    (11, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 10),), "ok"),
    (12, "llm_response", "math_agent", "agent_turn", (("continues", 9), ("observed", 11)), "ok"),
    (13, "tool_call", "math_agent", "agent_turn", (("produced_by", 12),), "ok"),
    (14, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 13),), "ok"),
    (15, "final_answer", "math_agent", "agent_turn", (("answer_of", 14), ("produced_by", 12)), "ok"),
    (16, "tool_response", "manager", "agent_turn", (("answer_of", 15), ("tool_result_of", 6)), "ok"),
    (17, "llm_response", "manager", "agent_turn", (("continues", 2), ("observed", 5), ("observed", 16)), "ok"),
    (18, "reasoning", "manager", "agent_turn", (("produced_by", 17),), "ok"),
    (19, "tool_call", "manager", "agent_turn", (("produced_by", 17),), "ok"),
    (20, "code_execution", "manager", "agent_turn", (("executes", 19),), "ok"),
    (21, "tool_call", "manager", "agent_turn", (("produced_by", 20),), "ok"),
    (22, "tool_response", "manager", "agent_turn", (("tool_result_of", 21),), "ok"),
    (23, "final_answer", "manager", "agent_turn", (("answer_of", 22), ("produced_by", 20)), "ok"),
]


@pytest.mark.parametrize("fail", [False, True], ids=["success", "fail"])
def test_manager_with_managed_agent_example(exporter, fail):
    team = example.build_failing() if fail else example.build()
    with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        answer = team.run(example.TASK)
    run = handle.run
    assert rows(run) == EXAMPLE_ROWS  # the same graph; only the numbers differ
    code = run.steps[4].arguments["code"]
    if fail:
        assert "range(1, 6))" in code and answer == 55
        assert handle.outcome.status == "failure" and "expected 91" in handle.outcome.reason
        assert run.steps[8].content.count("[1, 2, 3, 4, 5]") == 1  # the managed agent got the wrong list
        assert root_span(exporter)[0].status.status_code is StatusCode.ERROR
    else:
        assert "range(1, 6 + 1))" in code and answer == 91
        assert handle.outcome.status == "success" and handle.outcome.final_answer == "91"
    assert run.agents == ("user", "manager", "math_agent")
    assert run.steps[7].metadata["agent_key"] == "manager/math_agent"
    assert run.steps[6].tool_name == "math_agent" and run.steps[6].arguments["task"].startswith("Compute the sum")
    # the managed agent's report flows back as the manager's tool_response and observation
    assert "Here is the final answer from your managed agent 'math_agent'" in run.steps[16].content
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    by_step = {s.attributes.get(semconv.STEP_ID): s for s in spans}
    assert by_step[run.steps[7].step_id].parent.span_id == by_step[run.steps[6].step_id].context.span_id
    keys = sorted({(c.agent_key, c.kind) for c in run.recording.calls})
    assert keys == [("manager", "llm"), ("manager", "tool"), ("manager/math_agent", "llm"),
                    ("manager/math_agent", "tool")]


@pytest.mark.parametrize("parallel", [False, True], ids=["example", "parallel"])
def test_example_on_real_openai_server_models_matches_the_scripted_run(exporter, parallel):
    """smolagents' OpenAIServerModel on scripted endpoints (causaltrace.testing.openai_wire): the real model class
    other instrumentations trace gives the same steps and answer as the ScriptedModel."""
    from causaltrace.testing.openai_wire import smolagents_endpoint

    endpoints = []

    def factory(policy):
        endpoints.append(smolagents_endpoint(policy, model=f"scripted-{len(endpoints)}"))
        return endpoints[-1].smolagents_model()

    build, task, verify = ((example.build_parallel, example.TASK_PARALLEL, example.verify_parallel) if parallel
                           else (example.build, example.TASK, example.verify))
    runs = []
    for make in (lambda: build(factory), build):
        with causaltrace.run(task=task, verify=verify) as handle:
            make().run(task)
        runs.append(handle)
    wired, scripted = runs
    assert type(build(factory).model).__name__ in ("OpenAIModel", "OpenAIServerModel")
    assert sum(e.calls for e in endpoints) == (6 if parallel else 4)  # every model call went over the wire
    assert wired.outcome.status == "success" and wired.outcome.final_answer == scripted.outcome.final_answer
    facts = [[(s.kind, s.agent, s.content, s.tool_name, s.arguments, s.status) for s in h.run.steps
              if s.kind != "llm_response"] for h in runs]
    if parallel:  # the two managed agents run in threads, so their steps interleave differently: compare as sets
        facts = [sorted(f, key=repr) for f in facts]
    else:
        assert rows(wired.run) == rows(scripted.run) == EXAMPLE_ROWS
    assert facts[0] == facts[1]
    assert [s.model for s in wired.run.steps if s.kind == "llm_response"][0] == "scripted-0"


def test_two_managed_agents_in_parallel(exporter):
    with causaltrace.run(task=example.TASK_PARALLEL, verify=example.verify_parallel) as handle:
        example.build_parallel().run(example.TASK_PARALLEL)
    run = handle.run
    assert handle.outcome.status == "success" and handle.outcome.final_answer == "191"
    by_id = {s.step_id: s for s in run.steps}
    calls = {s.tool_name: s for s in run.steps if s.kind == "tool_call" and s.agent == "manager"
             and s.tool_name != "final_answer"}
    assert sorted(calls) == ["cubes_agent", "squares_agent"]
    for name, numbers, result in (("squares_agent", "[1, 2, 3, 4, 5, 6]", "91"), ("cubes_agent", "[1, 2, 3, 4]", "100")):
        own = [s for s in run.steps if s.agent == name]
        turn = own[0]
        assert turn.kind == "agent_turn" and turn.parent_step_id == calls[name].step_id
        assert turn.metadata["agent_key"] == f"manager/{name}"
        assert all(s.parent_step_id == turn.step_id for s in own[1:])
        assert [s.kind for s in own] == ["agent_turn", "task", "llm_response", "tool_call", "tool_response",
                                         "llm_response", "tool_call", "tool_response", "final_answer"]
        assert own[1].deps_of_kind("delegated_by") == [calls[name].step_id] and numbers in own[1].content
        assert own[8].content == result
        # the manager-side response of this call carries this agent's answer, not the other one's
        response = next(s for s in run.steps if s.kind == "tool_response" and s.deps_of_kind("tool_result_of") == [
            calls[name].step_id])
        assert response.deps_of_kind("answer_of") == [own[8].step_id] and result in response.content
        # this agent's llm_responses chain among themselves only
        llms = [s for s in own if s.kind == "llm_response"]
        assert llms[1].deps_of_kind("continues") == [llms[0].step_id]
        assert by_id[llms[1].deps_of_kind("observed")[0]].agent == name
    final_llm = [s for s in run.steps if s.kind == "llm_response" and s.agent == "manager"][1]
    observed = sorted(by_id[i].tool_name for i in final_llm.deps_of_kind("observed"))
    assert observed == ["cubes_agent", "squares_agent"]
    # per-agent ordinals, never thread order: each managed agent has llm 0,1 and tool 0,1
    for name in ("squares_agent", "cubes_agent"):
        assert sorted((c.kind, c.ordinal) for c in run.recording.calls if c.agent_key == f"manager/{name}") == [
            ("llm", 0), ("llm", 1), ("tool", 0), ("tool", 1)]
    assert [c.request["name"] for c in run.recording.calls if c.agent_key == "manager" and c.kind == "tool"
            and c.ordinal < 2] == ["squares_agent", "cubes_agent"]


def test_managed_agents_called_from_threads_the_code_starts(exporter):
    """Code that runs two managed agents in its own thread pool: no context reaches those threads, yet both runs
    are steps of this run, each under its own tool_call."""

    def policy(request: ScriptedRequest) -> str:
        reports = [int(v) for v in re.findall(r"managed agent '\w+':\s*(\d+)", "\n".join(request.observations))]
        if len(reports) == 2:
            return f"Thought: add them.\n<code>\nfinal_answer({sum(reports)})\n</code>"
        return (
            "Thought: both at once.\n<code>\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "with ThreadPoolExecutor(2) as pool:\n"
            "    a = pool.submit(squares_agent, task='Compute the sum of the squares of these numbers: [1, 2, 3]')\n"
            "    b = pool.submit(cubes_agent, task='Compute the sum of the cubes of these numbers: [1, 2]')\n"
            "    print(a.result())\n    print(b.result())\n</code>"
        )

    squares = math_agent()
    squares.name = "squares_agent"
    cubes = math_agent()
    cubes.name = "cubes_agent"
    manager = CodeAgent(tools=[], model=ScriptedModel(policy), managed_agents=[squares, cubes], name="manager",
                        additional_authorized_imports=["concurrent.futures"], verbosity_level=LogLevel.OFF)
    with causaltrace.run(verify="23") as handle:
        manager.run("squares of 1..3 plus cubes of 1..2")
    run = handle.run
    assert handle.outcome.status == "success"
    execution = [s for s in run.steps if s.kind == "code_execution"][0]
    for name in ("squares_agent", "cubes_agent"):
        call = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == name)
        assert call.deps_of_kind("produced_by") == [execution.step_id]
        turn = next(s for s in run.steps if s.kind == "agent_turn" and s.agent == name)
        assert turn.parent_step_id == call.step_id and turn.metadata["agent_key"] == f"manager/{name}"
        assert len([s for s in run.steps if s.agent == name]) == 9
    assert len({s.context.trace_id for s in exporter.get_finished_spans()}) == 1


# ------------------------------------------------------------------------------------------------ failures


def _never_answers(request: ScriptedRequest):
    if request.is_final_summary:
        return "I could not finish: 42"
    return [Call("sum_of_powers", {"numbers": [1, 2], "power": 2})]


def test_max_steps_is_a_limit_failure_and_the_root_span_ends_with_error(exporter):
    agent = math_agent(policy=_never_answers, max_steps=2)
    answer = agent.run(SQUARES_TASK)  # no causaltrace.run block: the adapter owns the run
    assert answer == "I could not finish: 42"
    roots = root_span(exporter)
    assert len(roots) == 1 and roots[0].end_time is not None
    assert roots[0].status.status_code is StatusCode.ERROR and "max steps" in roots[0].status.description
    assert roots[0].attributes[semconv.RUN_STATUS] == "failure"

    with causaltrace.run() as handle:
        math_agent(policy=_never_answers, max_steps=2).run(SQUARES_TASK)
    run = handle.run
    assert handle.outcome.status == "failure" and handle.outcome.stop == "limit"
    assert handle.outcome.final_answer == "I could not finish: 42"
    assert rows(run) == [  # the plain run's two tool rounds, then the limit instead of an answer
        MATH_AGENT_ROWS[0],
        (1, "agent_turn", "math_agent", None, (), "error"),
        *MATH_AGENT_ROWS[2:8],
        (8, "error", "math_agent", "agent_turn", (), "error"),
        (9, "llm_response", "math_agent", "agent_turn", (("continues", 5), ("observed", 7), ("observed", 8)), "ok"),
        (10, "final_answer", "math_agent", "agent_turn", (("produced_by", 9),), "ok"),
    ]
    assert run.steps[8].error.type == "AgentMaxStepsError" and run.steps[1].error.type == "AgentMaxStepsError"
    assert run.steps[10].metadata == {"forced": True}
    assert run.steps[9].metadata == {"phase": "final"}

    # with a verifier, its verdict decides even after a limit stop
    with causaltrace.run(verify="42") as lenient:
        math_agent(policy=_never_answers, max_steps=1).run(SQUARES_TASK)
    assert lenient.outcome.status == "success" and lenient.outcome.stop == "limit"


def test_generation_error_fails_the_run_and_passes_through(exporter):
    def broken(request: ScriptedRequest):
        raise ConnectionError("the model endpoint is down")

    agent = math_agent(policy=broken)
    with pytest.raises(AgentGenerationError) as info:
        agent.run(SQUARES_TASK)
    assert isinstance(info.value.__cause__, ConnectionError)
    roots = root_span(exporter)
    assert len(roots) == 1 and roots[0].end_time is not None
    assert roots[0].status.status_code is StatusCode.ERROR and "AgentGenerationError" in roots[0].status.description

    with pytest.raises(AgentGenerationError), causaltrace.run() as handle:
        math_agent(policy=broken).run(SQUARES_TASK)
    run = handle.run
    assert handle.outcome.status == "failure" and handle.outcome.stop == "error"
    assert rows(run) == [
        (0, "task", "user", None, (), "ok"),
        (1, "agent_turn", "math_agent", None, (), "error"),
        (2, "llm_response", "math_agent", "agent_turn", (("saw", 0),), "error"),
        (3, "error", "math_agent", "agent_turn", (), "error"),
    ]
    assert run.steps[2].error.type == "ConnectionError"
    assert run.steps[3].error.type == "AgentGenerationError"
    llm_call = run.recording.calls[0]
    assert llm_call.kind == "llm" and llm_call.error.type == "ConnectionError"


def test_final_answer_checks_rejection(exporter):
    def policy(request: ScriptedRequest):
        last = request.observations[-1] if request.observations else ""
        if "failed" in last:  # the check's rejection comes back as an error observation
            return [Call("final_answer", {"answer": "The sum is 91."})]
        if request.observations:
            return [Call("final_answer", {"answer": str(numbers_in(last)[-1])})]
        return [Call("sum_of_powers", {"numbers": numbers_in(request.task.split(":")[-1]), "power": 2})]

    def is_a_sentence(answer, memory, agent=None):
        return str(answer).endswith(".")

    agent = math_agent(policy=policy, final_answer_checks=[is_a_sentence])
    with causaltrace.run(verify="91") as handle:
        agent.run(SQUARES_TASK)
    run = handle.run
    assert rows(run) == [  # the plain run, but its answer was rejected, so one more round
        *MATH_AGENT_ROWS[:8],
        (8, "final_answer", "math_agent", "agent_turn", (("answer_of", 7), ("produced_by", 5)), "error"),
        (9, "llm_response", "math_agent", "agent_turn", (("continues", 5), ("observed", 7), ("observed", 8)), "ok"),
        (10, "tool_call", "math_agent", "agent_turn", (("produced_by", 9),), "ok"),
        (11, "tool_response", "math_agent", "agent_turn", (("tool_result_of", 10),), "ok"),
        (12, "final_answer", "math_agent", "agent_turn", (("answer_of", 11), ("produced_by", 9)), "ok"),
    ]
    rejected = run.steps[8]
    assert rejected.content == "91" and "is_a_sentence failed" in rejected.error.message
    assert handle.outcome.status == "success" and handle.outcome.final_answer == "The sum is 91."


def test_parsing_error_becomes_an_error_step(exporter):
    def policy(request: ScriptedRequest) -> str:
        if not request.observations:
            return "I forgot the code block."
        return "Thought: now with code.\n<code>\nfinal_answer(3)\n</code>"

    agent = coder(policy)
    with causaltrace.run(verify="3") as handle:
        agent.run("give 3")
    run = handle.run
    kinds = [(s.kind, s.status) for s in run.steps]
    assert kinds[:5] == [("task", "ok"), ("agent_turn", "ok"), ("llm_response", "ok"), ("reasoning", "ok"),
                         ("error", "error")]
    error = run.steps[4]
    assert error.error.type == "AgentParsingError" and error.deps_of_kind("produced_by") == [run.steps[2].step_id]
    assert run.steps[5].kind == "llm_response" and error.step_id in run.steps[5].deps_of_kind("observed")


# -------------------------------------------------------------------------------------- models and phases


def test_custom_model_subclass_overriding_generate(exporter):
    class MyModel(ScriptedModel):  # a user's subclass that overrides generate again (and calls super)
        def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
            message = super().generate(messages, stop_sequences, response_format, tools_to_call_from, **kw)
            message.content = (message.content or "") + ""
            return message

    agent = ToolCallingAgent(tools=[sum_of_powers_tool()], model=MyModel(tool_worker_policy(), model_id="mine"),
                             name="math_agent", verbosity_level=LogLevel.OFF)
    with causaltrace.run(verify="91") as handle:
        agent.run(SQUARES_TASK)
    llms = [s for s in handle.run.steps if s.kind == "llm_response"]
    assert len(llms) == 2 and all(s.model == "mine" for s in llms)  # one step per call, not one per override
    assert [c.kind for c in handle.run.recording.calls].count("llm") == 2
    response = handle.run.recording.calls[0].decoded_response()
    assert isinstance(response, ChatMessage) and response.tool_calls[0].function.name == "sum_of_powers"
    assert response.raw is None


def test_streaming_model_calls_are_recorded_as_one_message(exporter):
    from smolagents.models import ChatMessageStreamDelta, TokenUsage

    class StreamingModel(ScriptedModel):
        def generate_stream(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None,
                            **kw):
            text = self.generate(messages, stop_sequences, response_format, tools_to_call_from).content
            for i in range(0, len(text), 16):
                yield ChatMessageStreamDelta(content=text[i:i + 16])
            yield ChatMessageStreamDelta(content="", token_usage=TokenUsage(input_tokens=7, output_tokens=5))

    agent = CodeAgent(tools=[sum_of_powers_tool()], model=StreamingModel(_code_policy), name="coder",
                      stream_outputs=True, verbosity_level=LogLevel.OFF)
    with causaltrace.run(verify="91") as handle:
        agent.run(SQUARES_TASK)
    run = handle.run
    llms = [s for s in run.steps if s.kind == "llm_response"]
    assert len(llms) == 1  # generate_stream calling generate inside gives one step, not two
    assert llms[0].content.startswith("Thought: I add the squares") and llms[0].usage.output_tokens == 5
    recorded = [c for c in run.recording.calls if c.kind == "llm"]
    assert len(recorded) == 1 and recorded[0].decoded_response().content.startswith("Thought: I add")
    assert [s.kind for s in run.steps][-2:] == ["tool_response", "final_answer"]
    assert handle.outcome.status == "success"


def test_planning_steps(exporter):
    def policy(request: ScriptedRequest):
        if request.is_planning:
            return "1. call the tool\n2. answer\n<end_plan>"
        return tool_worker_policy()(request)

    agent = math_agent(policy=policy, planning_interval=1)
    with causaltrace.run(verify="91") as handle:
        agent.run(SQUARES_TASK)
    run = handle.run
    assert [s.kind for s in run.steps][:7] == ["task", "agent_turn", "llm_response", "planning", "llm_response",
                                               "tool_call", "tool_response"]
    plan_llm, plan, act_llm = run.steps[2], run.steps[3], run.steps[4]
    assert plan_llm.metadata == {"phase": "planning"} and plan_llm.deps_of_kind("saw") == [run.steps[0].step_id]
    assert plan.deps_of_kind("produced_by") == [plan_llm.step_id] and "call the tool" in plan.content
    assert act_llm.deps_of_kind("saw") == [plan.step_id] and act_llm.deps_of_kind("continues") == [plan_llm.step_id]
    assert sum(1 for s in run.steps if s.kind == "planning") == 2  # planning_interval=1: before each action step
    assert handle.outcome.status == "success"


def test_stream_run_is_one_run_that_ends_with_the_generator(exporter):
    agent = math_agent()
    items = list(agent.run(SQUARES_TASK, stream=True))
    assert type(items[-1]).__name__ == "FinalAnswerStep"
    roots = root_span(exporter)
    assert len(roots) == 1 and roots[0].end_time is not None
    assert roots[0].attributes[semconv.RUN_STATUS] == "unknown"  # no verifier, normal finish
    step_spans = [s for s in exporter.get_finished_spans() if s.attributes.get(semconv.STEP_KIND)]
    assert len(step_spans) == 7 and len({s.context.trace_id for s in step_spans}) == 1  # 9 steps, 2 tool calls

    exporter.clear()
    stream = math_agent().run(SQUARES_TASK, stream=True)
    for item in stream:  # the consumer stops after the first action step: the run ends as a limit stop
        if type(item).__name__ == "ActionStep":
            break
    stream.close()
    roots = root_span(exporter)
    assert len(roots) == 1 and roots[0].attributes[semconv.RUN_STATUS] == "failure"
    assert "stream was closed" in roots[0].status.description


def test_stream_inside_a_run_block(exporter):
    with causaltrace.run(verify="91") as handle:
        for _ in math_agent().run(SQUARES_TASK, stream=True):
            pass
    assert handle.outcome.status == "success" and len(handle.run.steps) == 9


# -------------------------------------------------------------------------------------------- the recording


def test_recording_is_identical_across_fresh_runs_with_parallel_managed_agents(exporter):
    signatures = []
    for _ in range(2):
        with causaltrace.run(task=example.TASK_PARALLEL, verify=example.verify_parallel) as handle:
            example.build_parallel().run(example.TASK_PARALLEL)
        assert handle.outcome.status == "success"
        signatures.append(handle.run.recording.signature())
    assert signatures[0] == signatures[1]
    assert len(signatures[0]) == 13
    assert {key for key, *_ in signatures[0]} == {"manager", "manager/squares_agent", "manager/cubes_agent"}

    example_signatures = []
    for _ in range(2):
        with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
            example.build().run(example.TASK)
        example_signatures.append(handle.run.recording.signature())
    assert example_signatures[0] == example_signatures[1] and len(example_signatures[0]) == 10


def test_recorded_requests_are_canonical(exporter):
    with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
        example.build().run(example.TASK)
    run = handle.run
    llm = [c for c in run.recording.calls if c.kind == "llm" and c.agent_key == "manager/math_agent"]
    second = llm[1].request
    # tool SCHEMAS, never Tool objects; ids aliased by key and inside the text smolagents writes them into
    assert [t["function"]["name"] for t in second["tools_to_call_from"]] == ["sum_of_powers", "final_answer"]
    text = str(second["messages"])
    assert "call_0_0" not in text and "call#0" in text
    assert second["stop_sequences"] == ["Observation:", "Calling tools:"]
    step = run.step(llm[1].step_id)
    assert step.kind == "llm_response" and step.inputs["recording"]["request_hash"] == llm[1].request_hash
    assert all(c.settings.get("model") == "scripted" for c in llm)
    code = [c for c in run.recording.calls if c.settings.get("code_execution")]
    assert [c.request["name"] for c in code] == ["python_interpreter", "python_interpreter"]
    assert all(c.finish_order is not None and not c.live_only for c in run.recording.calls)


def test_record_off_keeps_messages_on_the_step(exporter):
    provider = TracerProvider()
    instrument_smolagents(provider, TraceConfig(store=False, record=False))
    with causaltrace.run(verify="91") as handle:
        math_agent().run(SQUARES_TASK)
    assert handle.run.recording is None
    llm = handle.run.steps[2]
    assert llm.inputs["messages"][0]["role"] == "system"


# -------------------------------------------------------------------------------------------- the switch


def test_instrument_is_idempotent_and_uninstrument_restores(exporter):
    from smolagents.agents import MultiStepAgent

    wrapped_run = vars(MultiStepAgent)["run"]
    instrument_smolagents()
    instrument_smolagents()
    assert vars(MultiStepAgent)["run"] is wrapped_run and is_instrumented()
    assert wrapped_run.__wrapped__ is not wrapped_run
    original = wrapped_run.__wrapped__
    with causaltrace.run() as handle:
        math_agent().run(SQUARES_TASK)  # patches ScriptedModel.generate at run start
    assert len(handle.run.steps) == 9
    assert hasattr(vars(ScriptedModel)["generate"], "__wrapped__")
    uninstrument_smolagents()
    uninstrument_smolagents()
    assert vars(MultiStepAgent)["run"] is original and not is_instrumented()
    assert not hasattr(vars(ScriptedModel)["generate"], "__wrapped__")
    exporter.clear()
    with causaltrace.run() as handle:
        math_agent().run(SQUARES_TASK)
    assert handle.run.steps == ()  # nothing instrumented any more
    instrument_smolagents()
    with causaltrace.run() as handle:
        math_agent().run(SQUARES_TASK)
    assert len(handle.run.steps) == 9


def test_a_wrapper_another_library_wrapped_over_stays_inert(exporter):
    """uninstrument cannot remove our wrapper from under another library's: it stays, passing straight through, and
    instrumenting again wraps over both (one step per event, not two)."""
    import wrapt
    from smolagents.agents import MultiStepAgent

    ours = vars(MultiStepAgent)["run"]
    original = ours.__wrapped__
    seen = []

    def theirs(wrapped, instance, args, kwargs):
        seen.append(instance.name)
        return wrapped(*args, **kwargs)

    wrapt.wrap_function_wrapper(MultiStepAgent, "run", theirs)
    foreign = vars(MultiStepAgent)["run"]
    try:
        uninstrument_smolagents()
        assert vars(MultiStepAgent)["run"] is foreign and not is_instrumented()
        with causaltrace.run() as handle:
            assert math_agent().run(SQUARES_TASK) == "91"
        assert handle.run.steps == () and seen == ["math_agent"]  # theirs ran, ours passed through
        instrument_smolagents()
        with causaltrace.run() as handle:
            math_agent().run(SQUARES_TASK)
        assert len(handle.run.steps) == 9 and seen == ["math_agent", "math_agent"]
    finally:
        uninstrument_smolagents()
        MultiStepAgent.run = original


def test_every_patch_target_is_defined_by_smolagents():
    """A smolagents upgrade that renames a patched method fails here (instrumenting skips a missing target
    silently); the private ones are exactly those ``_access.PRIVATE_TARGETS`` declares."""
    from causaltrace.instrumentation.smolagents import _patch_table
    from causaltrace.instrumentation.smolagents._access import PRIVATE_TARGETS

    table = list(_patch_table())
    missing = [f"{owner.__name__}.{attr}" for owner, attr, _ in table if attr not in vars(owner)]
    assert missing == []
    private = {f"{owner.__name__}.{attr}" for owner, attr, _ in table if attr.startswith("_") and attr[1] != "_"}
    assert private == set(PRIVATE_TARGETS)


def test_the_private_attribute_read_follows_smolagents():
    """``uses_structured_outputs`` reads smolagents' private flag: it must track the public constructor argument."""
    from causaltrace.instrumentation.smolagents._access import uses_structured_outputs

    def agent(**kwargs):
        return CodeAgent(tools=[], model=ScriptedModel(tool_worker_policy()), verbosity_level=LogLevel.OFF, **kwargs)

    assert uses_structured_outputs(agent(use_structured_outputs_internally=True)) is True
    assert uses_structured_outputs(agent()) is False
    assert uses_structured_outputs(math_agent()) is False


def test_missing_extra_names_the_pip_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "smolagents", None)
    with pytest.raises(MissingExtraError) as info:
        instrument_smolagents()
    assert "pip install 'causaltrace[smolagents]'" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_example_script_runs(tmp_path, capsys):
    assert example.main([]) == 0
    out = capsys.readouterr().out
    assert "outcome success: final answer '91'" in out and out.startswith("run ")
    assert example.main(["--fail"]) == 0
    assert "outcome failure: final answer '55'" in capsys.readouterr().out
    uninstrument_smolagents()
    reset_tracing()
