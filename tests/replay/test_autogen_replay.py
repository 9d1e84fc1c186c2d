"""Replay of AutoGen AgentChat runs by playback (ARCHITECTURE decisions 6–7; issue 7 "Replay").

Every run here uses real AgentChat classes (RoundRobinGroupChat, SelectorGroupChat, Swarm, GraphFlow,
CodeExecutorAgent, AgentTool, UserProxyAgent) driven by the REACTIVE scripted clients of
``causaltrace.testing.autogen``. A replay builds a fresh team with the factory, serves the recording before the
intervened call, applies the intervention and runs whatever the recording cannot answer live; code re-runs in the
sandbox (``SubprocessSandbox``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from types import SimpleNamespace

import pytest

try:
    import autogen_agentchat  # noqa: F401
except ImportError:  # pragma: no cover - the autogen extra is part of the CI install
    if os.environ.get("CAUSALTRACE_STRICT", "").lower() in {"1", "true", "yes"}:
        raise
    pytest.skip("autogen-agentchat is not installed", allow_module_level=True)

from autogen_agentchat.agents import (
    ApprovalRequest,
    ApprovalResponse,
    AssistantAgent,
    CodeExecutorAgent,
    UserProxyAgent,
)
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import DiGraphBuilder, GraphFlow, RoundRobinGroupChat, SelectorGroupChat, Swarm
from autogen_agentchat.tools import AgentTool
from autogen_core.tools import FunctionTool

import causaltrace
from _autogen import SubprocessExecutor, example, traced_and_stored
from causaltrace.collector.store import Store
from causaltrace.exceptions import ReplayDivergence, UserError
from causaltrace.instrumentation.autogen import _playback_clients as clients_module
from causaltrace.instrumentation.autogen._playback import AutogenReplayAdapter
from causaltrace.protocols import ReplayAdapter, get_replay_adapter
from causaltrace.replay.executor import replay
from causaltrace.replay.playback import playback_for
from causaltrace.replay.repair import repair
from causaltrace.replay.sandbox import SubprocessSandbox
from causaltrace.replay.sandbox.session import PythonWorkerSession
from causaltrace.replay.turns import producing_llm
from causaltrace.schema import Intervention, Run
from causaltrace.testing.autogen import (
    ScriptedChatCompletionClient,
    ScriptedRequest,
    call,
    planner_client,
    reviewer_client,
    selector_client,
    solver_client,
)

pytestmark = pytest.mark.timeout(180)



@pytest.fixture(scope="module")
def sandbox():
    return SubprocessSandbox()


@pytest.fixture(autouse=True)
def instrumented():
    """Traced and STORED (the per-test CAUSALTRACE_HOME of conftest.py), spans kept in memory."""
    yield from traced_and_stored()


async def record(factory, task=example.TASK, verify=example.verify) -> Run:
    async with causaltrace.run(task=task, verify=verify) as handle:
        await factory().run(task=task)
    return handle.run


def one(run: Run, **match):
    found = [s for s in run.steps if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def rows(run: Run) -> list[tuple]:
    """(kind, agent, tool, sorted (dependency kind, producer index)) per step: the shape of a run."""
    by_id = {s.step_id: s for s in run.steps}
    return [
        (s.kind, s.agent, s.tool_name, tuple(sorted((d.kind, by_id[d.step_id].index) for d in s.depends_on)))
        for s in run.steps
    ]


def first_tool_call(run: Run):
    return next(s for s in run.steps if s.kind == "tool_call")


def test_the_adapter_is_registered():
    adapter = get_replay_adapter("autogen")
    assert isinstance(adapter, AutogenReplayAdapter) and adapter.framework == "autogen"
    assert isinstance(adapter, ReplayAdapter)  # the typed seam: replay + edit_transform, edit_kinds


def test_importing_the_adapter_does_not_import_autogen():
    import subprocess

    code = (
        "import sys, causaltrace.instrumentation.autogen, causaltrace.instrumentation.autogen._playback; "
        "print('autogen_core' in sys.modules or 'autogen_agentchat' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout == "False\n", out.stderr


# --------------------------------------------------------------------------------------------- (1) no-op replay


async def test_noop_replay_of_the_successful_example_serves_every_call(sandbox):
    run = await record(example.build)
    assert run.outcome.status == "success"
    step = first_tool_call(run)
    result = await replay(run, example.build, Intervention(step_id=step.step_id, replacement=step.arguments),
                          example.verify, sandbox=sandbox)
    assert result.divergence is None and result.flipped is False
    assert result.outcome.status == "success" and result.outcome.final_answer == run.outcome.final_answer
    # everything but the intervened call (whose response is the recorded one, edited to the same arguments) is served
    assert result.served_calls == len(run.recording.calls) - 1
    assert result.live_calls == 0 and result.live_calls_before_intervention == 0
    assert result.replays_run == 1
    new = result.run
    assert rows(new) == rows(run)
    # the new run's own recording hashes every request exactly as the original: the same (key, kind, ordinal, hash)
    assert new.recording.signature() == run.recording.signature()
    stats = new.metadata["replay"]
    assert stats["of"] == run.run_id and stats["intervention"] == step.step_id
    assert stats["deterministic"] is True and stats["divergence"] is None


async def test_pure_playback_through_the_adapter_serves_every_call():
    run = await record(example.build)
    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = example.build, None
    new = await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                               open_session=PythonWorkerSession, verify=example.verify)
    assert new.outcome.status == "success" and new.outcome.final_answer == run.outcome.final_answer
    assert new.metadata["replay"]["served"] == len(run.recording.calls)
    assert new.metadata["replay"]["live"] == 0
    # a playback client declares the wrapped client's model_info and settings: the new recording keeps them
    by_key = {c.key: c for c in new.recording.calls}
    for c in run.recording.calls:
        assert by_key[c.key].settings == c.settings


async def test_an_async_factory_is_accepted():
    run = await record(example.build)

    async def build():
        return example.build()

    step = first_tool_call(run)
    result = await replay(run, build, Intervention(step_id=step.step_id, replacement=step.arguments), example.verify)
    assert result.outcome.status == "success" and result.live_calls == 0


async def test_two_replays_of_one_run_run_at_once_without_sharing_state(sandbox):
    run = await record(example.build_failing)
    step = first_tool_call(run)
    fix = Intervention(step_id=step.step_id, replacement={"a": 17, "b": 25})
    worse = Intervention(step_id=step.step_id, replacement={"a": 17, "b": 27})
    fixed, broken = await asyncio.gather(replay(run, example.build_failing, fix, example.verify, sandbox=sandbox),
                                         replay(run, example.build_failing, worse, example.verify, sandbox=sandbox))
    assert fixed.flipped is True and "RESULT: 126" in fixed.outcome.final_answer
    assert broken.flipped is False and broken.divergence is None
    assert one(broken.run, kind="tool_call", tool_name="add").arguments == {"a": 17, "b": 27}
    assert fixed.live_calls_before_intervention == broken.live_calls_before_intervention == 0


# ------------------------------------------------------------------------------------------- (2) the planted fault


async def test_fixing_the_wrong_tool_argument_flips_the_failing_example(sandbox):
    run = await record(example.build_failing)
    assert run.outcome.status == "failure" and "129" in (run.outcome.final_answer or "")
    step = first_tool_call(run)
    assert (step.tool_name, step.arguments) == ("add", {"a": 17, "b": 26})
    fix = Intervention(step_id=step.step_id, replacement={"a": 17, "b": 25}, description="b: 26 → 25")
    result = await replay(run, example.build_failing, fix, example.verify, sandbox=sandbox)
    assert result.flipped is True and result.divergence is None
    assert result.outcome.status == "success" and "RESULT: 126" in result.outcome.final_answer
    # the prefix (the planner's call) was served from the recording; nothing ran live before the intervened call
    assert result.live_calls_before_intervention == 0 and result.served_calls >= 1
    # the live calls after the fix go to the reactive scripted clients (declared deterministic): one replay decides
    assert result.live_calls > 0 and result.replays_run == 1 and result.replays_flipped == 1
    new = result.run
    # the downstream changed: the real tool ran on the corrected argument, the solver multiplied the new sum
    assert one(new, kind="tool_call", tool_name="add").arguments == {"a": 17, "b": 25}
    assert one(new, kind="tool_response", tool_name="add").content == "42"
    assert one(new, kind="tool_call", tool_name="multiply").arguments == {"a": 42, "b": 3}
    assert rows(new) == rows(run)
    # the first solver request is the recorded one (same hash); the intervened response is the edited one
    first = {c.key: c for c in new.recording.calls}[("team/solver", "llm", 0)]
    assert first.request_hash == run.recording.find("team/solver", "llm", 0).request_hash
    # the new run is traced and stored like any run, linked to the original
    with Store() as store:
        stored = store.get_run(new.run_id)
    assert stored.metadata["replay"]["of"] == run.run_id
    assert stored.metadata["replay"]["intervention"] == step.step_id
    assert stored.outcome.status == "success" and stored.recording is not None


async def test_a_wrong_intervention_does_not_flip():
    run = await record(example.build_failing)
    step = first_tool_call(run)
    result = await replay(run, example.build_failing, Intervention(step_id=step.step_id,
                                                                   replacement={"a": 17, "b": 27}), example.verify)
    assert result.flipped is False and result.divergence is None
    assert result.outcome.status == "failure" and "RESULT: 132" in (result.outcome.final_answer or "")
    assert result.live_calls_before_intervention == 0


async def test_a_different_team_is_a_divergence_naming_agent_key_and_ordinal():
    run = await record(example.build_failing)

    def other_team():
        team = example.build_failing()
        team._participants[0]._system_messages[0].content = "You are a different planner."
        return team

    step = first_tool_call(run)
    result = await replay(run, other_team, Intervention(step_id=step.step_id, replacement={"a": 17, "b": 25}),
                          example.verify)
    assert result.flipped is False and result.run is None
    assert result.error is not None and result.error.type == "ReplayDivergence"
    assert "team/planner llm #0" in result.divergence
    assert "before the intervened call (team/solver llm #0)" in result.divergence
    assert ".messages[0].content" in result.divergence and "different planner" in result.divergence


async def test_a_team_with_other_tools_diverges_at_the_first_request_that_differs():
    run = await record(example.build)

    def fewer_tools():
        team = example.build()
        solver = team._participants[1]
        solver._workbench[0]._tools.pop()  # the factory's solver lost its multiply tool
        return team

    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = fewer_tools, None
    with pytest.raises(ReplayDivergence) as caught:
        await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                             open_session=PythonWorkerSession, verify=example.verify)
    message = caught.value.message
    assert message.startswith("replay diverged at team/solver llm #0 (model call) (a pure playback")
    assert ".tools (length)" in message


async def test_tool_response_intervention_replaces_the_result_without_running_the_tool():
    run = await record(example.build_failing)
    response = one(run, kind="tool_response", tool_name="add")
    assert response.content == "43"
    calls = []

    def counting():
        team = example.build_failing()
        solver = team._participants[1]
        tool = FunctionTool(example.add, description="Add two integers.")

        async def add(a: int, b: int) -> int:
            calls.append((a, b))
            return a + b

        solver._workbench[0]._tools[0] = FunctionTool(add, name=tool.name, description=tool.description)
        return team

    result = await replay(run, counting, Intervention(step_id=response.step_id, replacement="42"), example.verify)
    new = result.run
    assert result.live_calls_before_intervention == 0
    responses = [s for s in new.steps if s.kind == "tool_response" and s.tool_name == "add"]
    multiplies = [s for s in new.steps if s.kind == "tool_call" and s.tool_name == "multiply"]
    # the intervened add never ran (its result is the replacement); the solver multiplied the replaced sum
    assert responses[0].content == "42" and multiplies[0].arguments == {"a": 42, "b": 3}
    # the solver then reports add(17, 26) = 42, which the reviewer's arithmetic check rejects; the later rounds
    # are live (the add tool runs for real there, once per later round)
    solver_text = next(s.content for s in new.steps if s.kind == "message" and s.agent == "solver")
    assert "add(17, 26) = 42" in solver_text
    assert next(s.content for s in new.steps if s.kind == "message" and s.agent == "reviewer").startswith("REJECT")
    assert len(calls) == len(responses) - 1 and all(c == (17, 26) for c in calls)


async def test_message_and_final_answer_interventions_edit_the_producing_text():
    run = await record(example.build_failing)
    plan = next(s for s in run.steps if s.kind == "message" and s.agent == "planner")
    fixed = plan.content.replace("add 17 and 25", "add 17 and 24")
    result = await replay(run, example.build_failing, Intervention(step_id=plan.step_id, replacement=fixed),
                          example.verify)
    # the solver's off-by-one now lands on 25: a compensating edit also flips (CausalFlow's CRS only sees flips)
    assert result.flipped is True and result.live_calls_before_intervention == 0
    assert one(result.run, kind="tool_call", tool_name="add").arguments == {"a": 17, "b": 25}

    answer = one(run, kind="final_answer")
    assert answer.content == "RESULT: 129 verified."
    result = await replay(run, example.build_failing,
                          Intervention(step_id=answer.step_id, replacement="RESULT: 126 verified."), example.verify)
    # the final answer's text is replaced inside its message: the termination keyword stays, the run ends there
    assert result.flipped is True and result.served_calls == len(run.recording.calls) - 1
    assert one(result.run, kind="message", agent="reviewer").content == "RESULT: 126 verified. APPROVE"


async def test_llm_response_intervention_with_new_tool_calls():
    run = await record(example.build_failing)
    step = first_tool_call(run)
    producer = producing_llm(run, step)
    result = await replay(run, example.build_failing,
                          Intervention(step_id=producer.step_id, replacement=[{"name": "add", "arguments": {"a": 17,
                                                                                                            "b": 25}}]),
                          example.verify)
    assert result.flipped is True
    assert one(result.run, kind="tool_call", tool_name="add").arguments == {"a": 17, "b": 25}


async def test_unsupported_steps_are_user_errors_naming_the_kind():
    run = await record(example.build_failing)
    turn = next(s for s in run.steps if s.kind == "agent_turn")
    with pytest.raises(UserError, match="'agent_turn'"):
        await replay(run, example.build_failing, Intervention(step_id=turn.step_id, replacement="x"), example.verify)
    step = first_tool_call(run)
    with pytest.raises(UserError, match="arguments as a dict"):
        await replay(run, example.build_failing, Intervention(step_id=step.step_id, replacement=[1]), example.verify)


# --------------------------------------------------------------------------------------------- (3) repair


async def test_repair_finds_the_decisive_tool_call_with_mutations_only(sandbox):
    run = await record(example.build_failing)
    result = await repair(run, example.build_failing, example.verify, store=False, sandbox=sandbox)
    assert result.repaired
    step = run.step(result.decisive.step_id)
    # the planted fault: the solver's add(17, 26); the first flipping proposal is the +-1 fix of b
    assert (step.kind, step.agent, step.tool_name) == ("tool_call", "solver", "add")
    assert result.decisive.best.intervention.replacement == {"a": 17, "b": 25}
    assert result.decisive.best.intervention.source == "mutation"
    # the earliest flip: every earlier candidate was tried and none flipped; the search stopped at the first flip
    assert all(a.crs == 0.0 for a in result.attempts[:-1]) and result.attempts[-1].crs == 1.0
    assert all(run.step(a.step_id).index < step.index for a in result.attempts[:-1])
    assert result.live_calls_before_intervention == 0
    assert result.diagnosis.verified_by == "replay" and result.diagnosis.decisive_step_id == step.step_id
    # the repair pair's prompt is exactly the recorded request messages of the producing llm call (solver llm #0)
    pair = result.pair
    assert pair is not None and pair.step_id == step.step_id
    producing = run.recording.find("team/solver", "llm", 0)
    assert producing_llm(run, step).inputs["recording"]["ordinal"] == 0
    assert pair.prompt == producing.request["messages"]
    assert pair.tools == producing.request["tools"]
    assert pair.chosen["tool_calls"][0]["function"]["arguments"] == {"a": 17, "b": 25}


# ---------------------------------------------------------------------------------- (4) other teams and agents


def parallel_team():
    team = example.build_failing()
    team._participants[1]._model_client = solver_client(off_by_one=True, parallel=True)
    return team


async def test_parallel_tool_calls_keep_their_ordinals():
    run = await record(parallel_team)
    assert run.outcome.status == "failure"
    calls = [s for s in run.steps if s.kind == "tool_call"]
    assert [(c.tool_name, c.arguments) for c in calls[:2]] == [("multiply", {"a": 17, "b": 3}),
                                                                ("multiply", {"a": 26, "b": 3})]
    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = parallel_team, None
    new = await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                               open_session=PythonWorkerSession, verify=example.verify)
    assert new.metadata["replay"]["served"] == len(run.recording.calls) and new.metadata["replay"]["live"] == 0
    # the SECOND of two parallel calls is the wrong one; fixing it flips the run, the first stays served
    result = await replay(run, parallel_team, Intervention(step_id=calls[1].step_id, replacement={"a": 25, "b": 3}),
                          example.verify)
    assert result.flipped is True and result.live_calls_before_intervention == 0
    first, second = [s for s in result.run.steps if s.kind == "tool_response"][:2]
    assert (first.content, second.content) == ("51", "75")
    assert {c.key: c for c in result.run.recording.calls}[("team/solver", "tool", 0)].request_hash == (
        run.recording.find("team/solver", "tool", 0).request_hash)


async def test_a_single_agent_run_replays():
    def calculator():
        def policy(request: ScriptedRequest):
            rounds = request.tool_rounds_since(0)
            if not rounds:
                return call("add", a=2, b=3)
            return f"the sum is {rounds[-1][1][0].content}"

        tool = FunctionTool(example.add, description="Add two integers.")
        return AssistantAgent("calc", ScriptedChatCompletionClient(policy), tools=[tool], max_tool_iterations=3)

    run = await record(calculator, task="add 2 and 3", verify="sum is 5")
    assert run.outcome.status == "success" and run.recording.find("calc", "llm", 1) is not None
    step = first_tool_call(run)
    result = await replay(run, calculator, Intervention(step_id=step.step_id, replacement={"a": 2, "b": 4}),
                          "sum is 5")
    assert result.outcome.final_answer == "the sum is 6" and result.outcome.status == "failure"
    assert result.live_calls_before_intervention == 0


async def test_a_factory_that_returns_the_same_team_twice_is_a_user_error():
    run = await record(example.build)
    team = example.build()
    adapter = get_replay_adapter("autogen")
    adapter.assemble(team, playback_for(adapter, run), sandbox=None)
    with pytest.raises(UserError, match="FRESH team"):
        adapter.assemble(team, playback_for(adapter, run), sandbox=None)
    with pytest.raises(UserError, match="AutoGen team or agent"):
        await adapter.replay(lambda: object(), playback_for(adapter, run), sandbox=None, open_session=None)


def nested_team():
    from autogen_agentchat.agents import SocietyOfMindAgent

    def inner(name, limit):
        return RoundRobinGroupChat(
            [
                AssistantAgent("i1", ScriptedChatCompletionClient(lambda r: f"an idea ({len(r.messages)})")),
                AssistantAgent("i2", ScriptedChatCompletionClient(lambda r: f"a critique ({len(r.messages)})")),
            ],
            name=name,
            termination_condition=MaxMessageTermination(limit),
        )

    # the society's inner team gets the outer transcript as its task (3 messages), then speaks twice
    som = SocietyOfMindAgent("som", team=inner("minds", 5),
                             model_client=ScriptedChatCompletionClient(lambda r: f"summary of {len(r.messages)}"))
    closer = AssistantAgent("o", ScriptedChatCompletionClient(lambda r: f"done after {len(r.messages)}. APPROVE"))
    return RoundRobinGroupChat([inner("inner", 3), som, closer], name="outer",
                               termination_condition=TextMentionTermination("APPROVE"))


async def test_nested_teams_and_society_of_mind_replay_under_the_recorded_keys():
    run = await record(nested_team, task="x", verify="APPROVE")
    keys = {c.agent_key for c in run.recording.calls}
    assert keys == {"outer/inner/i1", "outer/inner/i2", "outer/som", "outer/som/minds/i1", "outer/som/minds/i2",
                    "outer/o"}
    adapter = get_replay_adapter("autogen")
    assembled = adapter.assemble(nested_team(), playback_for(adapter, run), sandbox=None)
    assert keys <= set(assembled.agents)  # the static keys (used when not instrumented) are the recording's keys
    new = await adapter.run_assembled(assembled, verify="APPROVE")
    assert new.metadata["replay"]["served"] == len(run.recording.calls) and new.metadata["replay"]["live"] == 0
    assert new.recording.signature() == run.recording.signature()
    # an intervention inside the SocietyOfMind's inner team changes what the society's summary call sees
    first_idea = next(s for s in run.steps if s.kind == "message" and s.content.startswith("an idea")
                      and s.index > one(run, kind="agent_turn", agent="som").index)
    result = await replay(run, nested_team, Intervention(step_id=first_idea.step_id, replacement="a new idea"),
                          "APPROVE")
    assert result.live_calls_before_intervention == 0 and result.divergence is None
    assert any(s.content == "a new idea" for s in result.run.steps if s.kind == "message")


def selector_team():
    return SelectorGroupChat(
        [
            AssistantAgent("planner", planner_client()),
            AssistantAgent("solver", solver_client(off_by_one=True), tools=tools(), max_tool_iterations=5),
            AssistantAgent("reviewer", reviewer_client()),
        ],
        model_client=selector_client(),
        termination_condition=TextMentionTermination("APPROVE") | MaxMessageTermination(10),
    )


def tools():
    return [
        FunctionTool(example.add, description="Add two integers."),
        FunctionTool(example.multiply, description="Multiply two integers."),
    ]


async def test_selector_group_chat_replays_deterministically():
    run = await record(selector_team)
    assert run.outcome.status == "failure"
    mgr = "SelectorGroupChat/SelectorGroupChatManager"
    assert run.recording.find(mgr, "llm", 0) is not None
    selection = [s for s in run.steps if s.kind == "speaker_selection"][1]
    assert selection.outputs["selected"] == "solver"
    noop = await replay(run, selector_team, Intervention(step_id=selection.step_id, replacement="solver"),
                        example.verify)
    assert noop.divergence is None and noop.outcome.final_answer == run.outcome.final_answer
    assert noop.outcome.status == "failure"
    assert noop.live_calls == 0 and noop.served_calls == len(run.recording.calls) - 1
    assert rows(noop.run) == rows(run)
    assert noop.run.recording.signature() == run.recording.signature()
    # the tool-call fix flips the Selector team too, with nothing live before it
    step = first_tool_call(run)
    fixed = await replay(run, selector_team, Intervention(step_id=step.step_id, replacement={"a": 17, "b": 25}),
                         example.verify)
    assert fixed.flipped is True and fixed.live_calls_before_intervention == 0


async def test_speaker_selection_intervention_changes_the_next_speaker():
    run = await record(selector_team)
    selection = [s for s in run.steps if s.kind == "speaker_selection"][1]
    result = await replay(run, selector_team, Intervention(step_id=selection.step_id, replacement="reviewer"),
                          example.verify)
    assert result.divergence is None and result.live_calls_before_intervention == 0
    new_selection = [s for s in result.run.steps if s.kind == "speaker_selection"][1]
    assert new_selection.outputs["selected"] == "reviewer"
    turn = next(s for s in result.run.steps if s.kind == "agent_turn" and s.index > new_selection.index)
    assert turn.agent == "reviewer"


def swarm_team():
    def alice(request: ScriptedRequest):
        return call("transfer_to_bob") if request.tool_rounds() == 0 else "done"

    def named(name):
        return lambda request: f"{name} read {len(request.messages)} messages. END"

    return Swarm(
        [
            AssistantAgent("alice", ScriptedChatCompletionClient(alice), handoffs=["bob", "carol"]),
            AssistantAgent("bob", ScriptedChatCompletionClient(named("bob"))),
            AssistantAgent("carol", ScriptedChatCompletionClient(named("carol"))),
        ],
        termination_condition=TextMentionTermination("END"),
    )


async def test_swarm_replays_deterministically_and_a_handoff_can_be_redirected():
    run = await record(swarm_team, task="hello", verify="bob read")
    assert run.outcome.status == "success"
    handoff = one(run, kind="handoff")
    assert handoff.outputs["target"] == "bob"
    noop = await replay(run, swarm_team, Intervention(step_id=handoff.step_id, replacement="bob"), "bob read")
    assert noop.outcome.final_answer == run.outcome.final_answer and noop.outcome.status == "success"
    assert noop.live_calls == 0 and noop.served_calls == len(run.recording.calls) - 1
    assert noop.run.recording.signature() == run.recording.signature()
    moved = await replay(run, swarm_team, Intervention(step_id=handoff.step_id, replacement="carol"), "bob read")
    assert moved.live_calls_before_intervention == 0
    assert one(moved.run, kind="handoff").outputs["target"] == "carol"
    assert moved.outcome.final_answer.startswith("carol read") and moved.outcome.status == "failure"
    with pytest.raises(UserError, match="no handoff to 'dave'"):
        await replay(run, swarm_team, Intervention(step_id=handoff.step_id, replacement="dave"), "bob read")


def code_team():
    def writer(request: ScriptedRequest):
        if len(request.messages) <= 2:  # the system message and the task
            return "Run this:\n```python\nimport os\nprint(6 * 7, os.getuid())\n```\n"
        return f"done: {request.last_user_text().strip()}"

    def approve(request: ApprovalRequest) -> ApprovalResponse:
        return ApprovalResponse(approved=True, reason="scripted")

    return RoundRobinGroupChat(
        [
            AssistantAgent("writer", ScriptedChatCompletionClient(writer)),
            CodeExecutorAgent("runner", code_executor=SubprocessExecutor(), approval_func=approve),
        ],
        name="team",
        termination_condition=MaxMessageTermination(4),
    )


async def test_code_executor_agent_code_reruns_in_the_sandbox(sandbox):
    uid = os.getuid()
    run = await record(code_team, task="print 42", verify=f"done: 42 {uid}")
    assert run.outcome.status == "success"
    execution = one(run, kind="code_execution")
    assert execution.outputs["stdout"] == f"42 {uid}\n"
    message = next(s for s in run.steps if s.kind == "message" and s.agent == "writer")
    assert message.inputs["code"] == "import os\nprint(6 * 7, os.getuid())\n"
    # a pure playback: the code re-runs in the sandbox, but before any intervention the RECORDED output is returned
    # (code reading the time, random numbers or, here, the uid would otherwise make every later request diverge)
    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = code_team, sandbox
    new = await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                               open_session=PythonWorkerSession, verify=f"done: 42 {uid}")
    stats = new.metadata["replay"]
    assert stats["code_executions"] == 1 and stats["live"] == 0 and stats["divergence"] is None
    assert new.outcome.status == "success"
    assert one(new, kind="code_execution").outputs["stdout"] == execution.outputs["stdout"]
    # new code in the code-bearing message: it runs in the SubprocessSandbox (the unprivileged uid 65534) and the
    # writer's next call sees the new output (live)
    new_code = "import os\nprint(6 * 8, os.getuid())\n"
    result = await replay(run, code_team, Intervention(step_id=message.step_id, replacement=new_code),
                          f"done: 42 {uid}", sandbox=sandbox)
    assert result.live_calls_before_intervention == 0
    new_execution = one(result.run, kind="code_execution")
    assert new_execution.inputs["code"] == new_code
    assert new_execution.outputs["stdout"] == "48 65534\n"
    assert next(s for s in result.run.steps if s.kind == "message" and s.agent == "writer").content == (
        f"Run this:\n```python\n{new_code}```\n")
    assert result.outcome.final_answer == "done: 48 65534" and result.outcome.status == "failure"
    # the code_execution step itself is a valid target: the code changes where it was written
    again = await replay(run, code_team, Intervention(step_id=execution.step_id, replacement=new_code),
                         f"done: 42 {uid}", sandbox=sandbox)
    assert one(again.run, kind="code_execution").outputs["stdout"] == "48 65534\n"


def graph_flow(delay_b: float):
    class Slow(ScriptedChatCompletionClient):
        async def create(self, messages, **kwargs):
            await asyncio.sleep(delay_b)
            return await super().create(messages, **kwargs)

    def texts(request):
        return " | ".join(m.content for m in request.messages[2:] if isinstance(m.content, str))

    a = AssistantAgent("A", ScriptedChatCompletionClient(lambda r: "A says go"))
    b = AssistantAgent("B", Slow(lambda r: "B done"))
    c = AssistantAgent("C", ScriptedChatCompletionClient(lambda r: "C done"))
    d = AssistantAgent("D", ScriptedChatCompletionClient(lambda r: "D saw " + texts(r)))
    graph = DiGraphBuilder()
    graph.add_node(a).add_node(b).add_node(c).add_node(d)
    graph.add_edge(a, b).add_edge(a, c).add_edge(b, d).add_edge(c, d)
    return GraphFlow([a, b, c, d], graph=graph.build())


async def test_graph_flow_fan_out_is_served_in_the_recorded_finish_order():
    # B is slow in the original run, so C finishes first and D sees C before B
    run = await record(lambda: graph_flow(0.2), task="fan out", verify=None)
    assert run.outcome.final_answer == "D saw A says go | C done | B done"
    order = {c.agent_key: (c.start_order, c.finish_order) for c in run.recording.calls}
    assert order["GraphFlow/B"][0] < order["GraphFlow/C"][0] and order["GraphFlow/B"][1] > order["GraphFlow/C"][1]
    # the replay serves B at once, but releases it only after C: D's request matches the recording
    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = lambda: graph_flow(0.0), None
    new = await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                               open_session=PythonWorkerSession)
    assert new.outcome.final_answer == run.outcome.final_answer
    assert new.metadata["replay"]["served"] == 4 and new.metadata["replay"]["live"] == 0


async def test_agent_tool_is_rerun_and_its_nested_calls_are_served():
    def helper_team():
        helper = AssistantAgent("helper", ScriptedChatCompletionClient(lambda r: "helper says 42"))
        tool = AgentTool(helper, return_value_as_last_message=True)

        def boss(request: ScriptedRequest):
            return call("helper", task="what is 6 * 7?") if request.tool_rounds() == 0 else "boss says 42. END"

        return RoundRobinGroupChat(
            [AssistantAgent("boss", ScriptedChatCompletionClient(boss), tools=[tool])],
            name="team",
            termination_condition=TextMentionTermination("END"),
        )

    run = await record(helper_team, task="ask the helper", verify="42")
    assert run.outcome.status == "success"
    assert run.recording.find("team/boss/helper", "llm", 0) is not None
    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = helper_team, None
    new = await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                               open_session=PythonWorkerSession, verify="42")
    # the nested agent RE-RAN (its own call is served under its own key) and the tool call counts as served
    assert new.outcome.status == "success" and new.metadata["replay"]["live"] == 0
    assert new.metadata["replay"]["served"] == len(run.recording.calls)
    assert new.recording.signature() == run.recording.signature()
    assert any(s.kind == "agent_turn" and s.agent == "helper" for s in new.steps)
    # a tool_response intervention on the AgentTool answers without running the nested agent
    response = one(run, kind="tool_response", tool_name="helper")
    result = await replay(run, helper_team, Intervention(step_id=response.step_id, replacement="helper says 41"),
                          "42")
    assert not any(s.kind == "agent_turn" and s.agent == "helper" for s in result.run.steps)
    assert one(result.run, kind="tool_response", tool_name="helper").content == "helper says 41"


async def test_user_proxy_answers_are_served_from_the_recording():
    asked = []

    def user_team():
        def human(prompt: str) -> str:
            asked.append(prompt)
            return "use 42"

        return RoundRobinGroupChat(
            [
                UserProxyAgent("human", input_func=human),
                AssistantAgent("echo", ScriptedChatCompletionClient(lambda r: f"heard: {r.last_user_text()}")),
            ],
            termination_condition=MaxMessageTermination(3),
        )

    run = await record(user_team, task="go", verify="heard: use 42")
    assert run.outcome.status == "success" and len(asked) == 1
    adapter = get_replay_adapter("autogen")
    factory, sandbox_ = user_team, None
    new = await adapter.replay(factory, playback_for(adapter, run), sandbox=sandbox_,
                               open_session=PythonWorkerSession, verify="heard: use 42")
    assert len(asked) == 1  # nobody was asked again: the recorded answer was served
    assert new.outcome.status == "success" and new.metadata["replay"]["live"] == 0


async def test_streaming_clients_are_played_back():
    def streaming():
        team = example.build()
        for agent in team._participants:
            agent._model_client_stream = True
        return team

    run = await record(streaming)
    assert run.outcome.status == "success"
    step = first_tool_call(run)
    result = await replay(run, streaming, Intervention(step_id=step.step_id, replacement=step.arguments),
                          example.verify)
    assert result.outcome.status == "success" and result.live_calls == 0
    assert result.run.recording.signature() == run.recording.signature()


# ----------------------------------------------------------------------------------------------- live calls


async def test_live_override_sends_live_calls_to_a_litellm_client(monkeypatch):
    run = await record(example.build_failing)
    seen = []

    async def fake_acompletion(**kwargs):
        seen.append(kwargs)
        message = SimpleNamespace(content="RESULT: 126 verified. APPROVE", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")],
                               usage=SimpleNamespace(prompt_tokens=3, completion_tokens=5))

    monkeypatch.setattr(clients_module, "acompletion", fake_acompletion)
    step = first_tool_call(run)
    result = await replay(run, example.build_failing, Intervention(step_id=step.step_id,
                                                                   replacement={"a": 17, "b": 25}),
                          example.verify, live_override="openai/some-model")
    assert result.live_calls_before_intervention == 0
    # every live model call after the intervention went to litellm at temperature 0 with a seed
    assert seen and all(k["model"] == "openai/some-model" and k["temperature"] == 0 and k["seed"] == 0 for k in seen)
    first = seen[0]
    assert first["messages"][0]["role"] == "system"
    assert {t["function"]["name"] for t in first["tools"]} == {"add", "multiply"}
    assert any(m["role"] == "tool" and m["content"] == "42" for m in first["messages"])
    # a litellm model is not deterministic: the flip needs r of R replays
    assert result.run.metadata["replay"]["deterministic"] is False
    assert result.flipped is True and result.replays_run >= 2


def test_live_calls_to_openai_style_clients_get_temperature_0_and_a_seed():
    class FakeOpenAI:
        _create_args = {"model": "gpt-x", "temperature": 0.7}

    FakeOpenAI.__module__ = "autogen_ext.models.openai._openai_client"

    class Other:
        pass

    pb = clients_module.ClientPlayback(None, "team/a", FakeOpenAI(), None)
    kwargs = pb.live_kwargs(pb.inner, {"tools": [], "extra_create_args": {"top_p": 1}})
    assert kwargs["extra_create_args"] == {"top_p": 1, "temperature": 0, "seed": 0}
    plain = clients_module.ClientPlayback(None, "team/a", Other(), None)
    assert plain.live_kwargs(plain.inner, {"tools": []}) == {"tools": []}


async def test_the_playback_client_declares_the_wrapped_model_info():
    team = selector_team()
    run = await record(selector_team)
    adapter = get_replay_adapter("autogen")
    clients = adapter.assemble(team, playback_for(adapter, run), sandbox=None).clients
    assert len(clients) == 4 and all(type(c).__name__ == "PlaybackChatCompletionClient" for c in clients)
    for client in clients:
        assert client.model_info == client.playback.inner.model_info
    assert json.dumps(dict(clients[0].model_info), sort_keys=True) == json.dumps(
        run.recording.calls[0].settings["model_info"], sort_keys=True)


# ------------------------------------------------------------------------- (5) a divergence at a tool call ends


def with_recorded_tool_arguments(run: Run, tool: str, arguments: dict) -> Run:
    """``run`` whose recording says the first call of ``tool`` had other ``arguments`` (a recording that no longer
    matches the team: an edited or redacted trace), so the replay diverges AT THAT TOOL CALL."""
    from causaltrace.recording import canonicalize_request, request_hash

    calls = list(run.recording.calls)
    i = next(n for n, c in enumerate(calls) if c.kind == "tool" and c.request.get("name") == tool)
    request = canonicalize_request({"name": tool, "arguments": arguments})
    calls[i] = calls[i].model_copy(update={"request": request, "request_hash": request_hash(request)})
    return run.model_copy(update={"recording": run.recording.model_copy(update={"calls": calls})})


def plain_workbench_team():
    """The failing example with its solver's tools in a plain (non-stream) ``StaticWorkbench``."""
    from autogen_core.tools import StaticWorkbench

    team = example.build_failing()
    solver = team._participants[1]
    solver._workbench = [StaticWorkbench(list(solver._workbench[0]._tools))]
    return team


@pytest.mark.parametrize("factory", [example.build_failing, plain_workbench_team], ids=["stream", "plain"])
async def test_a_divergence_at_a_tool_call_ends_the_replay_instead_of_hanging_it(factory):
    # AssistantAgent waits for its tool calls on a queue that only a RETURNING call ends: a playback workbench that
    # raised the divergence hung team.run until the per-replay timeout (issue 19, bug found in session 27)
    run = await record(factory)
    assert run.outcome.status == "failure"
    changed = with_recorded_tool_arguments(run, "add", {"a": 17, "b": 99})
    later = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "multiply")
    result = await asyncio.wait_for(
        replay(changed, factory, Intervention(step_id=later.step_id, replacement={"a": 42, "b": 3}), example.verify),
        timeout=30,
    )
    assert result.error is not None and result.error.type == "ReplayDivergence" and not result.flipped
    assert result.divergence.startswith("replay diverged at team/solver tool #0 (tool add)")
    assert result.divergence.endswith("at .arguments.b: recorded 99 / replayed 26")


async def test_a_divergence_at_a_handoff_ends_the_replay_instead_of_hanging_it():
    run = await record(swarm_team, task="hello", verify="bob read")
    changed = with_recorded_tool_arguments(run, "transfer_to_bob", {"reason": "recorded otherwise"})
    final = next(s for s in run.steps if s.kind == "message" and s.agent == "bob")
    result = await asyncio.wait_for(
        replay(changed, swarm_team, Intervention(step_id=final.step_id, replacement="bob read it all. END"),
               "bob read"),
        timeout=30,
    )
    assert result.error is not None and result.error.type == "ReplayDivergence" and not result.flipped
    assert "(tool transfer_to_bob)" in result.divergence and "recorded otherwise" in result.divergence


async def test_repair_goes_on_past_a_replay_that_diverges_at_a_tool_call():
    run = await record(example.build_failing)
    changed = with_recorded_tool_arguments(run, "multiply", {"a": 43, "b": 4})
    # proposals at the first add call replay up to the (changed) multiply call: the add fix never reaches it live,
    # so the replays that keep the recorded add diverge there, and each such replay ends at once, marked
    first = first_tool_call(run)
    later = [s.step_id for s in run.steps if s.kind in ("message", "final_answer") and s.index > first.index]
    result = await asyncio.wait_for(
        repair(changed, example.build_failing, example.verify, [*later], k=0, store=False, replay_timeout_s=20,
               probe=False, max_replays=6),
        timeout=120,
    )
    tried = [r for a in result.attempts for r in a.replays]
    assert tried and all(r.error is None or r.error.type != "ReplayTimeout" for r in tried)
    assert any(r.error is not None and r.error.type == "ReplayDivergence" for r in tried)
