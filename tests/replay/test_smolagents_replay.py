"""Replay of smolagents runs by playback (ARCHITECTURE decisions 6–7; issue 7 "Replay").

Every run here is driven by REACTIVE scripted models (``causaltrace.testing.smolagents``) and real smolagents
classes; CodeAgent code re-executes in the sandbox's persistent Python worker (``SubprocessSandbox``). A replay
builds a fresh agent with the factory, serves the recording before the intervened call, applies the intervention
and runs everything the recording cannot answer live.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

pytest.importorskip("smolagents")

from smolagents import CodeAgent, LogLevel, ToolCallingAgent, tool

import causaltrace
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.exceptions import ReplayDivergence, UserError
from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
from causaltrace.instrumentation.smolagents._playback import SmolagentsReplayAdapter
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.protocols import ReplayAdapter, get_replay_adapter
from causaltrace.replay.executor import replay, replay_sync
from causaltrace.replay.mutations import propose_mutations
from causaltrace.replay.playback import playback_for
from causaltrace.replay.sandbox import SubprocessSandbox
from causaltrace.replay.sandbox.session import PythonWorkerSession
from causaltrace.schema import Intervention, Run
from causaltrace.testing.smolagents import (
    ScriptedModel,
    ScriptedRequest,
    code_manager_policy,
    sum_of_powers_tool,
    tool_worker_policy,
)

ROOT = Path(__file__).resolve().parents[2]
SQUARES_TASK_5 = "Compute the sum of the squares of these numbers: [1, 2, 3, 4, 5]"


def load_example():
    spec = importlib.util.spec_from_file_location("smolagents_agents_example_replay",
                                                  ROOT / "examples" / "smolagents_agents.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = load_example()


@pytest.fixture(scope="module")
def sandbox():
    return SubprocessSandbox()


@pytest.fixture(autouse=True)
def instrumented():
    """Traced and STORED (the per-test CAUSALTRACE_HOME of conftest.py), spans kept in memory."""
    instrument_smolagents(TracerProvider(), TraceConfig())
    yield
    uninstrument_smolagents()
    reset_tracing()


def record(factory, task, verify) -> Run:
    with causaltrace.run(task=task, verify=verify) as handle:
        try:
            factory().run(task)
        except Exception:
            pass
    return handle.run


def rows(run: Run) -> list[tuple]:
    """(kind, agent, tool, sorted (dependency kind, producer index)) per step: the shape of a run."""
    by_id = {s.step_id: s for s in run.steps}
    return [(s.kind, s.agent, s.tool_name, tuple(sorted((d.kind, by_id[d.step_id].index) for d in s.depends_on)))
            for s in run.steps]


def one(run: Run, **match) -> object:
    found = [s for s in run.steps if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def non_managed_calls(run: Run) -> int:
    return sum(1 for c in run.recording.calls if not c.settings.get("managed_agent"))


def test_the_adapter_is_registered():
    adapter = get_replay_adapter("smolagents")
    assert isinstance(adapter, SmolagentsReplayAdapter) and adapter.framework == "smolagents"
    assert isinstance(adapter, ReplayAdapter)  # the typed seam: replay + edit_transform, edit_kinds


# ------------------------------------------------------------------------------------------- (1) no-op replay


@pytest.mark.parametrize("which", ["manager code", "manager reasoning", "math_agent tool_call", "math_agent answer"])
def test_noop_replay_of_the_successful_example_serves_every_call(sandbox, which):
    run = record(example.build, example.TASK, example.verify)
    assert run.outcome.status == "success"
    if which == "manager code":
        step = one(run, kind="tool_call", tool_name="python_interpreter", agent="manager",
                   content=next(s.content for s in run.steps if s.tool_name == "python_interpreter"))
        replacement = step.arguments["code"]
    elif which == "manager reasoning":
        step = next(s for s in run.steps if s.kind == "reasoning" and s.agent == "manager")
        replacement = step.content
    elif which == "math_agent tool_call":
        step = one(run, kind="tool_call", tool_name="sum_of_powers")
        replacement = dict(step.arguments)
    else:
        step = one(run, kind="final_answer", agent="math_agent")
        replacement = step.content
    result = replay_sync(run, example.build, Intervention(step_id=step.step_id, replacement=replacement),
                         example.verify, sandbox=sandbox)
    assert result.divergence is None and result.error is None
    assert result.outcome.status == "success" and result.outcome.final_answer == "91"
    assert not result.flipped  # it was a success already
    # every recorded call but the intervened one is served (managed agents re-run: their call is not "served")
    assert result.live_calls == 0 and result.live_calls_before_intervention == 0
    assert result.served_calls == non_managed_calls(run) - 1
    assert result.replays_run == 1  # no live LLM call: deterministic, one replay decides
    new = result.run
    assert new.metadata["replay"]["deterministic"] is True and new.metadata["replay"]["applied"] is True
    # the replayed run has the original's shape and issues the very same requests (same hashes, same keys)
    assert rows(new) == rows(run)
    assert new.recording.signature() == run.recording.signature()


# ----------------------------------------------------------------------------------- (2) the --fail example


def code_step(run: Run):
    return one(run, kind="tool_call", tool_name="python_interpreter", agent="manager",
               content=next(s.content for s in run.steps if s.tool_name == "python_interpreter"))


def test_fixing_the_off_by_one_in_the_managers_code_flips_the_run(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    assert run.outcome.status == "failure" and run.outcome.final_answer == "55"
    step = code_step(run)
    code = step.arguments["code"]
    assert "range(1, 6))" in code
    fixed = code.replace("range(1, 6)", "range(1, 6 + 1)")
    import asyncio

    result = asyncio.run(replay(run, example.build_failing, Intervention(step_id=step.step_id, replacement=fixed),
                                example.verify, sandbox=sandbox))
    assert result.flipped is True and result.divergence is None
    assert result.outcome.status == "success" and result.outcome.final_answer == "91"
    assert result.live_calls_before_intervention == 0
    # the live calls after the fix go to the reactive scripted model, a pure function of the request: one replay
    # decides (with a real model the flip would need r of R = 2 of 3)
    assert result.replays_run == 1 and result.replays_flipped == 1
    new = result.run
    # the new run is traced and stored like any run, linked to the original
    stored = Store().get_run(new.run_id)
    assert stored.metadata["replay"]["of"] == run.run_id
    assert stored.metadata["replay"]["intervention"] == step.step_id
    assert stored.outcome.status == "success" and stored.recording is not None
    # the corrected code ran in the sandbox and the managed agent RE-RAN on the new list
    assert "range(1, 6 + 1)" in one(new, kind="code_execution", content=next(
        s.content for s in new.steps if s.kind == "code_execution")).inputs["code"]
    task = next(s for s in new.steps if s.kind == "task" and s.agent == "math_agent")
    assert "[1, 2, 3, 4, 5, 6]" in task.content
    assert rows(new) == rows(run)
    # the prefix (the manager's first model call) was served from the recording: same request hash
    first = [c for c in new.recording.calls if c.key == ("manager", "llm", 0)][0]
    assert first.request_hash == run.recording.find("manager", "llm", 0).request_hash


# ---------------------------------------------------------------------------------- (3) a wrong correction


def test_a_wrong_correction_does_not_flip(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    step = code_step(run)
    wrong = step.arguments["code"].replace("range(1, 6)", "range(2, 6 + 1)")
    result = replay_sync(run, example.build_failing, Intervention(step_id=step.step_id, replacement=wrong),
                         example.verify, sandbox=sandbox)
    assert result.flipped is False and result.divergence is None
    assert result.outcome.status == "failure" and result.outcome.final_answer == "90"  # 4+9+16+25+36
    assert result.live_calls_before_intervention == 0 and result.replays_flipped == 0


# ------------------------------------------------------------------------------------------ (4) divergence


def _manager_with_instructions():
    agent = example.build_failing()
    fresh = CodeAgent(tools=[], model=ScriptedModel(code_manager_policy(off_by_one=True)),
                      managed_agents=[agent.managed_agents["math_agent"]], name="manager", max_steps=5,
                      instructions="Always double-check your ranges.", verbosity_level=LogLevel.OFF)
    return fresh


def _manager_with_another_math_tool():
    agent = example.build_failing()
    worker = agent.managed_agents["math_agent"]

    @tool
    def sum_of_powers(numbers: list, power: int) -> int:
        """Add up each number raised to a power (a changed description).

        Args:
            numbers: the integers to raise and add.
            power: the exponent (2 for squares, 3 for cubes).
        """
        return sum(int(n) ** int(power) for n in numbers)

    worker.tools["sum_of_powers"] = sum_of_powers
    return agent


@pytest.mark.parametrize(
    ("factory", "where", "path"),
    [
        (_manager_with_instructions, "manager llm #0", ".messages[0].content"),
        # inside the managed agent: reported as the FIRST divergence, not as the manager's later error
        (_manager_with_another_math_tool, "manager/math_agent llm #0", ".messages[0].content"),
    ],
    ids=["system prompt", "managed agent's tool"],
)
def test_a_different_agent_diverges_and_says_where(sandbox, factory, where, path):
    run = record(example.build_failing, example.TASK, example.verify)
    step = code_step(run)
    # intervene late (the manager's final code): the divergence happens in the served prefix
    final_code = [s for s in run.steps if s.tool_name == "python_interpreter"][-1]
    result = replay_sync(run, factory, Intervention(step_id=final_code.step_id, replacement="final_answer(91)"),
                         example.verify, sandbox=sandbox)
    assert result.flipped is False and result.run is None
    assert result.divergence is not None and result.error.type == "ReplayDivergence"
    assert result.divergence.startswith(f"replay diverged at {where} (model call) before the intervened call")
    assert path in result.divergence and "recorded" in result.divergence and "replayed" in result.divergence
    assert step.step_id  # the code step exists; the divergence came first


def test_pure_playback_with_a_renamed_agent_names_the_missing_key(sandbox):
    run = record(example.build, example.TASK, example.verify)

    def renamed():
        agent = example.build()
        agent.name = "boss"
        return agent

    adapter = get_replay_adapter("smolagents")
    with pytest.raises(ReplayDivergence, match=r"boss llm #0 .*no such call.*'manager'"):
        adapter.replay_sync(renamed, playback_for(adapter, run), sandbox=sandbox, open_session=PythonWorkerSession)


@pytest.mark.parametrize("agent", ["manager", "math_agent"], ids=["CodeAgent final_answer", "ToolCallingAgent final_answer"])
def test_final_answer_interventions_flip(sandbox, agent):
    run = record(example.build_failing, example.TASK, example.verify)
    step = one(run, kind="final_answer", agent=agent)
    result = replay_sync(run, example.build_failing, Intervention(step_id=step.step_id, replacement="91"),
                         example.verify, sandbox=sandbox)
    assert result.flipped is True and result.outcome.final_answer == "91"
    assert result.live_calls_before_intervention == 0
    if agent == "manager":  # only the final_answer(...) call of the producing code changed
        code = [s for s in result.run.steps if s.tool_name == "python_interpreter"][-1].arguments["code"]
        assert code == "final_answer('91')"


def test_a_code_call_argument_intervention_reruns_the_managed_agent(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    call = one(run, kind="tool_call", tool_name="math_agent")
    assert call.deps_of_kind("produced_by")  # made by the manager's running code
    task = call.arguments["task"].replace("[1, 2, 3, 4, 5]", "[1, 2, 3, 4, 5, 6]")
    result = replay_sync(run, example.build_failing, Intervention(step_id=call.step_id, replacement={"task": task}),
                         example.verify, sandbox=sandbox)
    assert result.flipped is True and result.live_calls_before_intervention == 0
    assert one(result.run, kind="tool_call", tool_name="math_agent").arguments == {"task": task}


def build_planning_manager():
    agent = example.build_failing()
    agent.planning_interval = 1
    return agent


def test_planning_steps_are_played_back_and_can_be_replaced(sandbox):
    run = record(build_planning_manager, example.TASK, example.verify)
    plans = [s for s in run.steps if s.kind == "planning"]
    assert plans and plans[0].content.startswith("Here are the facts I know")
    # the plan step as recorded (with smolagents' wrapper around the model's text): a no-op
    same = replay_sync(run, build_planning_manager, Intervention(step_id=plans[0].step_id, replacement=plans[0].content),
                       example.verify, sandbox=sandbox)
    assert same.live_calls == 0 and same.run.recording.signature() == run.recording.signature()
    changed = plans[0].content.replace("Delegate the arithmetic", "Delegate the arithmetic for 1 to 6 inclusive")
    other = replay_sync(run, build_planning_manager, Intervention(step_id=plans[0].step_id, replacement=changed),
                        example.verify, sandbox=sandbox)
    assert other.divergence is None and other.live_calls_before_intervention == 0 and other.live_calls > 0
    assert [s for s in other.run.steps if s.kind == "planning"][0].content == changed


def _failing_code_policy(request: ScriptedRequest) -> str:
    if not request.observations:
        return "Thought: try.\n<code>\nprint('start')\nx = 1 / 0\n</code>"
    return "Thought: recover.\n<code>\nfinal_answer(42)\n</code>"


def build_failing_code():
    return CodeAgent(tools=[], model=ScriptedModel(_failing_code_policy), name="coder", max_steps=3,
                     verbosity_level=LogLevel.OFF)


def test_a_recorded_code_error_is_served_with_its_logs(sandbox):
    run = record(build_failing_code, "Divide.", "42")
    failed = [s for s in run.steps if s.kind == "code_execution"][0]
    assert failed.status == "error" and "ZeroDivisionError" in failed.error.message
    final = one(run, kind="final_answer")
    # the same answer (an int, as the code wrote it): the new code is the old one
    result = replay_sync(run, build_failing_code, Intervention(step_id=final.step_id, replacement=42), "42",
                         sandbox=sandbox)
    assert result.live_calls == 0 and result.outcome.final_answer == "42"
    assert result.run.recording.signature() == run.recording.signature()
    replayed = [s for s in result.run.steps if s.kind == "code_execution"][0]
    assert replayed.status == "error" and replayed.error.message == failed.error.message


def test_a_sandboxed_code_error_after_the_intervention_reads_like_smolagents(sandbox):
    run = record(build_failing_code, "Divide.", "42")
    code = [s for s in run.steps if s.tool_name == "python_interpreter"][0]
    result = replay_sync(run, build_failing_code,
                         Intervention(step_id=code.step_id, replacement="print('again')\ny = [1][3]"), "42",
                         sandbox=sandbox)
    failed = [s for s in result.run.steps if s.kind == "code_execution"][0]
    assert failed.status == "error"
    assert "Code execution failed at line 'y = [1][3]' due to: IndexError: list index out of range" in (
        failed.error.message)
    assert failed.outputs["stdout"] == "again\n" and result.outcome.final_answer == "42"


def test_live_override_replaces_the_live_model_at_temperature_0(sandbox, monkeypatch):
    import smolagents

    built = []

    class FakeLiteLLMModel(ScriptedModel):  # stands in for smolagents.LiteLLMModel (no litellm, no network)
        deterministic = False  # a real remote model is not a pure function of the request

        def __init__(self, model_id, **kwargs):
            super().__init__(tool_worker_policy(), model_id=model_id, **kwargs)
            built.append(self)

    monkeypatch.setattr(smolagents, "LiteLLMModel", FakeLiteLLMModel)
    run = record(build_worker, SQUARES_TASK_5, "91")
    call = one(run, kind="tool_call", tool_name="sum_of_powers")
    adapter = get_replay_adapter("smolagents")
    pure = adapter.assemble(build_worker(), playback_for(adapter, run, live_override="openai/some-model"),
                            sandbox=sandbox, open_session=PythonWorkerSession)
    adapter.run_assembled_sync(pure)
    assert built == []  # a pure playback never builds (or reaches) the live model
    fix = Intervention(step_id=call.step_id, replacement={"numbers": [1, 2, 3, 4, 5, 6], "power": 2})
    playback = adapter.assemble(build_worker(), playback_for(adapter, run, fix, live_override="openai/some-model"),
                                sandbox=sandbox, open_session=PythonWorkerSession)
    inner = playback.agent.model.playback.inner
    new = adapter.run_assembled_sync(playback, verify="91")
    assert new.outcome.status == "success" and new.metadata["replay"]["deterministic"] is False
    assert len(built) == 1 and built[0].model_id == "openai/some-model" and built[0].kwargs["temperature"] == 0
    assert built[0].calls == 1 and inner.calls == 0  # the call after the intervention went to the override


# ---------------------------------------------------------------------------------- (5) tool_response


def test_tool_response_intervention_inside_the_managed_agent(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    response = one(run, kind="tool_response", tool_name="sum_of_powers")
    assert response.content == "55"
    result = replay_sync(run, example.build_failing, Intervention(step_id=response.step_id, replacement=91),
                         example.verify, sandbox=sandbox)
    assert result.flipped is True and result.outcome.final_answer == "91"
    assert result.live_calls_before_intervention == 0
    new = result.run
    assert one(new, kind="tool_response", tool_name="sum_of_powers").content == "91"
    # the manager's code still ran (and re-ran the managed agent) before its output was known: it enclosed the
    # intervened call, so its ACTUAL output (with 91) went back to the manager, not the recorded one (55)
    assert "91" in next(s for s in new.steps if s.kind == "code_execution").content


def test_tool_response_intervention_on_a_managed_agents_answer(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    answer = one(run, kind="tool_response", tool_name="math_agent")
    corrected = answer.content.replace("55", "91")
    result = replay_sync(run, example.build_failing, Intervention(step_id=answer.step_id, replacement=corrected),
                         example.verify, sandbox=sandbox)
    assert result.flipped is True and result.live_calls_before_intervention == 0
    new = result.run
    # the managed agent did not run; the manager got the replacement as its report
    assert not [s for s in new.steps if s.agent == "math_agent"]
    assert one(new, kind="tool_response", tool_name="math_agent").content == corrected


# ------------------------------------------------------------------------ (6) ToolCallingAgent tool_call


SHARED_TOOL = sum_of_powers_tool()


def build_worker():
    """A ToolCallingAgent using a module-level (shared) tool object: a replay must never patch it."""
    return ToolCallingAgent(tools=[SHARED_TOOL], model=ScriptedModel(tool_worker_policy()), name="math_agent",
                            max_steps=4, verbosity_level=LogLevel.OFF)


def test_tool_call_argument_intervention_in_a_tool_calling_agent(sandbox):
    run = record(build_worker, SQUARES_TASK_5, "91")
    assert run.outcome.status == "failure" and run.outcome.final_answer == "55"
    call = one(run, kind="tool_call", tool_name="sum_of_powers")
    assert call.arguments == {"numbers": [1, 2, 3, 4, 5], "power": 2}
    forward = SHARED_TOOL.forward
    result = replay_sync(run, build_worker,
                         Intervention(step_id=call.step_id, replacement={"numbers": [1, 2, 3, 4, 5, 6], "power": 2}),
                         "91", sandbox=sandbox)
    assert result.flipped is True and result.outcome.final_answer == "91"
    assert result.live_calls_before_intervention == 0
    new = result.run
    assert one(new, kind="tool_call", tool_name="sum_of_powers").arguments["numbers"] == [1, 2, 3, 4, 5, 6]
    assert one(new, kind="tool_response", tool_name="sum_of_powers").content == "91"
    # the shared tool object was copied, never patched
    assert "forward" not in vars(SHARED_TOOL) and SHARED_TOOL.forward == forward


def test_a_recorded_tool_error_is_served_without_calling_the_tool(sandbox):
    busy = {"on": True, "calls": 0}

    def build():
        @tool
        def sum_of_powers(numbers: list, power: int) -> int:
            """Add up powers; the service may be busy.

            Args:
                numbers: the integers.
                power: the exponent.
            """
            busy["calls"] += 1
            if busy["on"]:
                busy["on"] = False
                raise TimeoutError("the arithmetic service is busy")
            return sum(int(n) ** int(power) for n in numbers)

        return ToolCallingAgent(tools=[sum_of_powers], model=ScriptedModel(tool_worker_policy()), name="math_agent",
                                max_steps=4, verbosity_level=LogLevel.OFF)

    run = record(build, SQUARES_TASK_5, "55")
    assert run.outcome.status == "success" and busy["calls"] == 2
    error = [s for s in run.steps if s.kind == "tool_response" and s.status == "error"]
    assert len(error) == 1 and "TimeoutError" in error[0].content
    final = one(run, kind="final_answer")
    result = replay_sync(run, build, Intervention(step_id=final.step_id, replacement="55"), "55", sandbox=sandbox)
    assert result.live_calls == 0 and busy["calls"] == 2  # both calls served: the error too
    assert rows(result.run) == rows(run) and result.run.recording.signature() == run.recording.signature()


def build_streaming_worker():
    """The worker with ``stream_outputs=True`` and a model that streams (one delta per reply)."""
    from smolagents.models import ChatMessageStreamDelta, ChatMessageToolCallFunction, ChatMessageToolCallStreamDelta

    class StreamingScriptedModel(ScriptedModel):
        def generate_stream(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None,
                            **kwargs):
            message = self.generate(messages, stop_sequences, response_format, tools_to_call_from, **kwargs)
            calls = [ChatMessageToolCallStreamDelta(index=i, id=tc.id, type=tc.type, function=ChatMessageToolCallFunction(
                name=tc.function.name, arguments=json.dumps(tc.function.arguments)))
                for i, tc in enumerate(message.tool_calls or [])]
            yield ChatMessageStreamDelta(content=message.content, tool_calls=calls or None,
                                         token_usage=message.token_usage)

    return ToolCallingAgent(tools=[sum_of_powers_tool()], model=StreamingScriptedModel(tool_worker_policy()),
                            name="math_agent", max_steps=4, stream_outputs=True, verbosity_level=LogLevel.OFF)


def test_streaming_models_are_played_back(sandbox):
    run = record(build_streaming_worker, SQUARES_TASK_5, "91")
    assert run.outcome.final_answer == "55"
    call = one(run, kind="tool_call", tool_name="sum_of_powers")
    same = replay_sync(run, build_streaming_worker, Intervention(step_id=call.step_id, replacement=call.arguments),
                       "91", sandbox=sandbox)
    assert same.live_calls == 0 and same.run.recording.signature() == run.recording.signature()
    fixed = replay_sync(run, build_streaming_worker,
                        Intervention(step_id=call.step_id, replacement={"numbers": [1, 2, 3, 4, 5, 6], "power": 2}),
                        "91", sandbox=sandbox)
    assert fixed.flipped is True and fixed.live_calls_before_intervention == 0


# ------------------------------------------------------------------------ (7) parallel managed agents


def _slow_first_call(policy, delay_s):
    calls = []

    def slow(request: ScriptedRequest):
        if not calls:
            time.sleep(delay_s)
        calls.append(1)
        return policy(request)

    return slow


def build_parallel_squares_late():
    """The parallel example whose squares_agent is slow to start: its threads finish in another order."""
    agent = example.build_parallel()
    agent.managed_agents["squares_agent"].model = ScriptedModel(_slow_first_call(tool_worker_policy(), 0.2))
    return agent


@pytest.mark.parametrize("factory", [example.build_parallel, build_parallel_squares_late],
                         ids=["same build", "other thread order"])
def test_parallel_managed_agents_replay_deterministically_by_key(sandbox, factory):
    run = record(example.build_parallel, example.TASK_PARALLEL, example.verify_parallel)
    assert run.outcome.final_answer == "191"
    final = one(run, kind="final_answer", agent="manager")
    for _ in range(3):
        result = replay_sync(run, factory, Intervention(step_id=final.step_id, replacement="191"),
                             example.verify_parallel, sandbox=sandbox)
        assert result.divergence is None and result.outcome.final_answer == "191"
        assert result.live_calls == 0 and result.served_calls == non_managed_calls(run) - 1
        assert result.run.recording.signature() == run.recording.signature()


def test_intervening_in_one_parallel_agent_leaves_the_other_served(sandbox):
    run = record(example.build_parallel, example.TASK_PARALLEL, example.verify_parallel)
    squares = next(s for s in run.steps if s.kind == "tool_response" and s.agent == "squares_agent"
                   and s.tool_name == "sum_of_powers")
    result = replay_sync(run, build_parallel_squares_late, Intervention(step_id=squares.step_id, replacement=90),
                         example.verify_parallel, sandbox=sandbox)
    assert result.outcome.final_answer == "190" and result.live_calls_before_intervention == 0
    # live: squares_agent's next model call and its final_answer tool, the manager's next model call and its
    # final_answer tool; cubes_agent's four calls are served by key although its thread finished first
    assert result.live_calls == 4
    cubes = [c for c in result.run.recording.calls if c.agent_key == "manager/cubes_agent"]
    original = {c.key: c.request_hash for c in run.recording.calls}
    assert len(cubes) == 4 and all(original[c.key] == c.request_hash for c in cubes)


# --------------------------------------------------------------------- code with random output; no sandbox


def _random_policy(request: ScriptedRequest) -> str:
    if not request.observations:
        return "Thought: draw a number.\n<code>\nimport random\nx = random.random()\nprint(x)\n</code>"
    drawn = request.observations[-1].split("Execution logs:")[-1].split()[0]
    return f"Thought: report it.\n<code>\nfinal_answer('{drawn}')\n</code>"


def build_random():
    return CodeAgent(tools=[], model=ScriptedModel(_random_policy), name="drawer", max_steps=3,
                     verbosity_level=LogLevel.OFF)


def test_code_before_the_intervention_returns_its_recorded_output(sandbox):
    random.seed(1)
    run = record(build_random, "Draw a number.", None)
    drawn = run.outcome.final_answer
    final = one(run, kind="final_answer")
    result = replay_sync(run, build_random, Intervention(step_id=final.step_id, replacement=drawn), drawn,
                         sandbox=sandbox)
    # the code ran again (a new random number) but its RECORDED output went back: the next request matched
    assert result.divergence is None and result.live_calls == 0
    assert result.outcome.final_answer == drawn


def test_without_a_sandbox_the_local_executor_runs_the_code():
    run = record(example.build_failing, example.TASK, example.verify)
    step = code_step(run)
    fixed = step.arguments["code"].replace("range(1, 6)", "range(1, 6 + 1)")
    adapter = get_replay_adapter("smolagents")
    fix = Intervention(step_id=step.step_id, replacement=fixed)
    new = adapter.replay_sync(example.build_failing, playback_for(adapter, run, fix), sandbox=None, open_session=None,
                              verify=example.verify)
    assert new.outcome.status == "success" and new.metadata["replay"]["live_before_intervention"] == 0


# ------------------------------------------------------------------------------------------- misuse


@pytest.mark.parametrize("kind", ["agent_turn", "task"])
def test_an_unsupported_step_kind_is_a_user_error_naming_it(sandbox, kind):
    run = record(example.build_failing, example.TASK, example.verify)
    step = next(s for s in run.steps if s.kind == kind)
    with pytest.raises(UserError, match=kind):
        replay_sync(run, example.build_failing, Intervention(step_id=step.step_id, replacement="x"),
                    example.verify, sandbox=sandbox)


async def test_two_replays_of_one_run_run_at_once_without_sharing_state(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    step = code_step(run)
    fixed = step.arguments["code"].replace("range(1, 6)", "range(1, 6 + 1)")
    fix = Intervention(step_id=step.step_id, replacement=fixed)
    same = Intervention(step_id=step.step_id, replacement=step.arguments["code"])
    flipped, unchanged = await asyncio.gather(replay(run, example.build_failing, fix, example.verify, sandbox=sandbox),
                                              replay(run, example.build_failing, same, example.verify, sandbox=sandbox))
    assert flipped.flipped is True and unchanged.flipped is False
    assert unchanged.divergence is None and unchanged.outcome.final_answer == run.outcome.final_answer
    assert flipped.live_calls_before_intervention == unchanged.live_calls_before_intervention == 0


async def test_an_async_factory_is_awaited(sandbox):
    run = record(example.build, example.TASK, example.verify)
    step = code_step(run)

    async def build():
        return example.build()

    same = Intervention(step_id=step.step_id, replacement=step.arguments["code"])
    result = await replay(run, build, same, example.verify, sandbox=sandbox)
    assert result.divergence is None and result.outcome.status == "success"
    assert result.live_calls_before_intervention == 0 and result.served_calls > 0


def test_the_factory_must_build_an_agent(sandbox):
    run = record(example.build, example.TASK, example.verify)
    with pytest.raises(UserError, match="smolagents agent"):
        replay_sync(run, lambda: object(), Intervention(step_id=code_step(run).step_id, replacement="x"),
                    example.verify, sandbox=sandbox)


# ------------------------------------------------------------------ mutation proposals: the repair search


def test_a_deterministic_mutation_of_the_code_step_flips_the_failed_run(sandbox):
    run = record(example.build_failing, example.TASK, example.verify)
    step = code_step(run)
    proposals = propose_mutations(step, run, limit=30)
    assert proposals
    flipped_at = None
    for position, proposal in enumerate(proposals):
        result = replay_sync(run, example.build_failing, proposal, example.verify, sandbox=sandbox)
        assert result.divergence is None and result.live_calls_before_intervention == 0
        if result.flipped:
            flipped_at = position
            break
    assert flipped_at is not None, [p.description for p in proposals]
    winner = proposals[flipped_at]
    assert "range(1, 6 + 1)" in winner.replacement or "range(1, 7)" in winner.replacement
    assert flipped_at < 30
    print(f"mutation #{flipped_at} flips the run: {winner.description}")
