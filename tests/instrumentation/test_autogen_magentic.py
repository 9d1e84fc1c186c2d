"""MagenticOneGroupChat under the AutoGen adapter (issue 3, "Teams"): driven OFFLINE by the reactive scripted
orchestrator of :mod:`causaltrace.testing.autogen`, its orchestrator's model calls are llm_responses of
``MagenticOneOrchestrator``, each next-speaker decision a ``speaker_selection``, and the run records and replays.

Snapshots are one line per step, as in ``test_autogen_adapter.py``: ``<index> <kind> <agent> <^parent-kind#parent
index> [<dep-kind>:<producer index>…] <status>``.
"""

from __future__ import annotations

import json
import logging
import os

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode

try:
    import autogen_agentchat  # noqa: F401
except ImportError:  # pragma: no cover - the autogen extra is part of the CI install
    if os.environ.get("CAUSALTRACE_STRICT", "").lower() in {"1", "true", "yes"}:
        raise
    pytest.skip("autogen-agentchat is not installed", allow_module_level=True)

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.teams import MagenticOneGroupChat
from autogen_core.tools import FunctionTool

import causaltrace
from _autogen import example, shape, traced_and_stored, traced_in_memory
from causaltrace import semconv
from causaltrace.collector import tool_spans
from causaltrace.config import TraceConfig
from causaltrace.instrumentation import autogen as autogen_adapter
from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import replay
from causaltrace.schema import Intervention, Run
from causaltrace.testing.autogen import (
    ScriptedChatCompletionClient,
    ScriptedRequest,
    orchestrator_client,
    orchestrator_policy,
    planner_client,
    reviewer_client,
    solver_client,
)

pytestmark = pytest.mark.timeout(180)


ORCH = "MagenticOneOrchestrator"
KEY = f"MagenticOneGroupChat/{ORCH}"


async def broken_add(a: int, b: int) -> int:
    """Add two integers."""
    raise RuntimeError("the adder is offline")


def magentic_team(*, fail: bool = False, broken: bool = False, **options) -> MagenticOneGroupChat:
    """The example's planner / solver / reviewer under a MagenticOne orchestrator (all scripted)."""
    tools = [
        FunctionTool(broken_add if broken else example.add, name="add", description="Add two integers."),
        FunctionTool(example.multiply, description="Multiply two integers."),
    ]
    return MagenticOneGroupChat(
        [
            AssistantAgent("planner", planner_client(), description="Restates the task as a two-step plan."),
            AssistantAgent(
                "solver",
                solver_client(off_by_one=fail),
                tools=tools,
                max_tool_iterations=5,
                description="Computes with the add and multiply tools.",
            ),
            AssistantAgent("reviewer", reviewer_client(), description="Checks the solver's arithmetic."),
        ],
        model_client=orchestrator_client(),
        **options,
    )


def failing_team() -> MagenticOneGroupChat:
    return magentic_team(fail=True)


@pytest.fixture
def traced(monkeypatch):
    """AutoGen instrumented onto an in-memory exporter (store off); ``runs`` collects every finished Run."""
    yield from traced_in_memory(monkeypatch)


@pytest.fixture
def stored():
    """Traced and STORED (the per-test CAUSALTRACE_HOME of conftest.py), as replay needs."""
    yield from traced_and_stored()


def rows(run: Run) -> list[tuple]:
    by_id = {s.step_id: s for s in run.steps}
    return [
        (s.kind, s.agent, s.tool_name, tuple(sorted((d.kind, by_id[d.step_id].index) for d in s.depends_on)))
        for s in run.steps
    ]


async def record(factory, task: str = example.TASK, verify=example.verify):
    async with causaltrace.run(task=task, verify=verify) as handle:
        await factory().run(task=task)
    return handle


#: facts, plan, task ledger; then per round: progress ledger → speaker_selection + instruction → the agent's turn;
#: the reviewer's APPROVE → a satisfied ledger → the final-answer call, its message and the run's final_answer.
MAGENTIC_SHAPE = [
    "0 task user ^root [] ok",
    f"1 llm_response {ORCH} ^root [saw:0] ok",
    f"2 llm_response {ORCH} ^root [continues:1] ok",
    f"3 planning {ORCH} ^root [produced_by:2] ok",
    f"4 llm_response {ORCH} ^root [continues:2] ok",
    f"5 speaker_selection {ORCH} ^root [produced_by:4] ok",
    f"6 message {ORCH} ^root [produced_by:4] ok",
    "7 agent_turn planner ^root [selected_by:5] ok",
    "8 llm_response planner ^agent_turn#7 [saw:3 saw:6] ok",
    "9 message planner ^agent_turn#7 [produced_by:8] ok",
    f"10 llm_response {ORCH} ^root [continues:4 saw:9] ok",
    f"11 speaker_selection {ORCH} ^root [produced_by:10] ok",
    f"12 message {ORCH} ^root [produced_by:10] ok",
    "13 agent_turn solver ^root [selected_by:11] ok",
    "14 llm_response solver ^agent_turn#13 [saw:3 saw:6 saw:9 saw:12] ok",
    "15 tool_call solver ^agent_turn#13 [produced_by:14] ok",
    "16 tool_response solver ^agent_turn#13 [tool_result_of:15] ok",
    "17 llm_response solver ^agent_turn#13 [continues:14 observed:16] ok",
    "18 tool_call solver ^agent_turn#13 [produced_by:17] ok",
    "19 tool_response solver ^agent_turn#13 [tool_result_of:18] ok",
    "20 llm_response solver ^agent_turn#13 [continues:17 observed:19] ok",
    "21 message solver ^agent_turn#13 [produced_by:20] ok",
    f"22 llm_response {ORCH} ^root [continues:10 saw:21] ok",
    f"23 speaker_selection {ORCH} ^root [produced_by:22] ok",
    f"24 message {ORCH} ^root [produced_by:22] ok",
    "25 agent_turn reviewer ^root [selected_by:23] ok",
    "26 llm_response reviewer ^agent_turn#25 [saw:3 saw:6 saw:9 saw:12 saw:21 saw:24] ok",
    "27 message reviewer ^agent_turn#25 [produced_by:26] ok",
    f"28 llm_response {ORCH} ^root [continues:22 saw:27] ok",
    f"29 llm_response {ORCH} ^root [continues:28] ok",
    f"30 message {ORCH} ^root [produced_by:29] ok",
    f"31 final_answer {ORCH} ^root [answer_of:30] ok",
]


# ----------------------------------------------------------------------------------------- the scripted run


async def test_magentic_one_run_is_captured_with_speaker_selections(traced):
    handle = await record(magentic_team)
    run = handle.run
    assert shape(run) == MAGENTIC_SHAPE
    outcome = handle.outcome
    assert (outcome.status, outcome.stop) == ("success", "normal")
    assert outcome.final_answer == "The answer is RESULT: 126."
    assert outcome.reason == "The reviewer approved: RESULT: 126 verified. APPROVE"  # the ledger's reason
    assert list(run.agents) == ["user", ORCH, "planner", "solver", "reviewer"]
    # each decision names the selected agent and the instruction it was given, among the participants
    selections = [s for s in run.steps if s.kind == "speaker_selection"]
    assert [(s.outputs["selected"], s.outputs["instruction"]) for s in selections] == [
        ("planner", "Restate the numbers of the request as a two-step plan for the solver."),
        ("solver", "Compute the plan with the add and multiply tools and end with 'RESULT: n'."),
        ("reviewer", "Check the solver's arithmetic: say APPROVE if it is right, else REJECT."),
    ]
    for selection in selections:
        assert selection.content == selection.outputs["selected"]
        assert selection.metadata["candidates"] == ["planner", "solver", "reviewer"]
        assert selection.metadata["agent_key"] == KEY and selection.metadata["by_model"] is True
        ledger = run.step(selection.deps_of_kind("produced_by")[0])
        assert ledger.kind == "llm_response" and ledger.agent == ORCH
        assert json.loads(ledger.outputs["text"])["next_speaker"]["answer"] == selection.outputs["selected"]
        instruction = run.step_at(selection.index + 1)
        assert instruction.kind == "message" and instruction.content == selection.outputs["instruction"]
        turn = run.step_at(selection.index + 2)
        assert turn.kind == "agent_turn" and turn.agent == selection.outputs["selected"]
        assert turn.deps_of_kind("selected_by") == [selection.step_id]
    # the task ledger the agents read: task, team, facts and plan
    ledger_msg = run.step_at(3)
    assert "Compute (17 + 25) * 3." in ledger_msg.content and "solver: Computes with the add" in ledger_msg.content
    assert "- reviewer: Check the solver's arithmetic" in ledger_msg.content
    assert run.step_at(31).outputs == {"text": "The answer is RESULT: 126."}
    # every orchestrator llm_response is the orchestrator's recorded call: agent_key under the team, in order
    orch_llms = [s for s in run.steps if s.kind == "llm_response" and s.agent == ORCH]
    assert [s.inputs["recording"]["agent_key"] for s in orch_llms] == [KEY] * 7
    assert [s.inputs["recording"]["ordinal"] for s in orch_llms] == list(range(7))
    assert {s.model for s in orch_llms} == {"scripted-orchestrator"}
    # one recorded call for every model call (and every tool call), each pointing back to its step
    recording = run.recording
    llm_steps = [s for s in run.steps if s.kind == "llm_response"]
    assert sorted(c.step_id for c in recording.calls if c.kind == "llm") == sorted(s.step_id for s in llm_steps)
    assert len([c for c in recording.calls if c.kind == "tool"]) == 2
    for step in llm_steps:
        ref = step.inputs["recording"]
        call = recording.find(ref["agent_key"], "llm", ref["ordinal"])
        assert call is not None and call.request_hash == ref["request_hash"] and call.step_id == step.step_id
    ledger_request = recording.find(KEY, "llm", 2).request
    assert ledger_request["json_output"]["name"] == "LedgerEntry"  # the structured-output progress ledger
    assert "is_request_satisfied" in ledger_request["messages"][-1]["content"]
    # spans: one trace, all OK, the selected_by edges as links
    spans = traced.exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1
    steps = [s for s in spans if (s.attributes or {}).get(semconv.STEP_KIND)]
    pairs = tool_spans.call_result_pairs(run.steps)  # a tool call and its result are one span
    assert len(steps) == len(run.steps) - len(pairs) and all(s.status.status_code is StatusCode.OK for s in steps)
    turns = [s for s in steps if s.attributes[semconv.STEP_KIND] == "agent_turn"]
    assert all([link.attributes[semconv.DEPENDENCY_KIND] for link in s.links] == ["selected_by"] for s in turns)


async def test_the_recording_is_identical_across_fresh_runs(traced):
    first = (await record(magentic_team)).run.recording
    second = (await record(magentic_team)).run.recording
    assert first.signature() == second.signature()
    assert [(k, kind, o) for k, kind, o, _ in first.signature()] == [
        *[(KEY, "llm", i) for i in range(7)],
        ("MagenticOneGroupChat/planner", "llm", 0),
        ("MagenticOneGroupChat/reviewer", "llm", 0),
        ("MagenticOneGroupChat/solver", "llm", 0),
        ("MagenticOneGroupChat/solver", "llm", 1),
        ("MagenticOneGroupChat/solver", "llm", 2),
        ("MagenticOneGroupChat/solver", "tool", 0),
        ("MagenticOneGroupChat/solver", "tool", 1),
    ]
    assert first.find(KEY, "llm", 0).settings["model"] == "scripted-orchestrator"


async def test_the_failing_variant_is_an_honest_failure(traced):
    handle = await record(failing_team)
    run = handle.run
    assert shape(run) == MAGENTIC_SHAPE  # same structure; the planted fault is in a value
    assert (handle.outcome.status, handle.outcome.stop) == ("failure", "normal")
    assert handle.outcome.final_answer == "The answer is RESULT: 129."
    assert "129 is wrong" in handle.outcome.reason
    assert run.step_at(15).arguments == {"a": 17, "b": 26}


async def test_stalls_replan_and_max_rounds_is_a_limit_failure(traced):
    """A broken tool: the solver reports no result, the orchestrator stalls (``max_stalls=1``), re-plans (facts and
    plan updates, a new task ledger, the agents reset) and stops at ``max_turns`` with the answer it has."""
    handle = await record(lambda: magentic_team(broken=True, max_stalls=1, max_turns=3))
    run = handle.run
    assert shape(run) == [
        *MAGENTIC_SHAPE[:16],  # the same opening as the successful run, up to the tool call
        "16 tool_response solver ^agent_turn#13 [tool_result_of:15] error",
        "17 llm_response solver ^agent_turn#13 [continues:14 observed:16] ok",
        "18 message solver ^agent_turn#13 [produced_by:17] ok",
        f"19 llm_response {ORCH} ^root [continues:10 saw:18] ok",  # no progress: a stall → re-plan
        f"20 llm_response {ORCH} ^root [continues:19] ok",  # facts update
        f"21 llm_response {ORCH} ^root [continues:20] ok",  # plan update
        f"22 planning {ORCH} ^root [produced_by:21] ok",  # the new task ledger
        f"23 llm_response {ORCH} ^root [continues:21] ok",
        f"24 speaker_selection {ORCH} ^root [produced_by:23] ok",
        f"25 message {ORCH} ^root [produced_by:23] ok",
        "26 agent_turn planner ^root [selected_by:24] ok",
        "27 llm_response planner ^agent_turn#26 [saw:22 saw:25] ok",  # reset: no `continues:8`
        "28 message planner ^agent_turn#26 [produced_by:27] ok",
        f"29 llm_response {ORCH} ^root [continues:23 saw:28] ok",  # max rounds: the final-answer call
        f"30 message {ORCH} ^root [produced_by:29] ok",
    ]
    assert json.loads(run.step_at(19).outputs["text"])["is_progress_being_made"]["answer"] is False
    assert "New plan" in run.step_at(22).content and "New plan" in run.step_at(21).outputs["text"]
    outcome = handle.outcome
    assert (outcome.status, outcome.stop) == ("failure", "limit")  # no final_answer step on a limit stop
    assert outcome.final_answer == "We could not complete the request. RESULT: unknown"
    assert outcome.reason == "the final answer reports no RESULT"
    # without a verifier a limit stop is a failure too
    async with causaltrace.run(task=example.TASK) as bare:
        await magentic_team(broken=True, max_stalls=1, max_turns=3).run(task=example.TASK)
    assert (bare.outcome.status, bare.outcome.stop, bare.outcome.reason) == ("failure", "limit", "Max rounds reached.")


def _flaky_orchestrator(*, always: bool) -> ScriptedChatCompletionClient:
    """The scripted orchestrator, whose progress ledger is not JSON the first time (or every time)."""
    policy = orchestrator_policy(("alice", "bob"))
    bad = []

    def flaky(request: ScriptedRequest) -> str:
        out = policy(request)
        if out.startswith("{") and (always or not bad):
            bad.append(out)
            return "not json"
        return out

    return ScriptedChatCompletionClient(flaky, model="scripted-orchestrator")


def _pair(orchestrator: ScriptedChatCompletionClient) -> MagenticOneGroupChat:
    return MagenticOneGroupChat(
        [
            AssistantAgent("alice", ScriptedChatCompletionClient(lambda r: "RESULT: 5"), description="says five"),
            AssistantAgent("bob", ScriptedChatCompletionClient(lambda r: "RESULT: 5 verified"), description="checks"),
        ],
        model_client=orchestrator,
        max_turns=1,
    )


async def test_a_rejected_progress_ledger_is_retried_and_the_retry_is_linked(traced):
    async with causaltrace.run(task="say five", verify="RESULT: 5") as handle:
        await _pair(_flaky_orchestrator(always=False)).run(task="say five")
    assert shape(handle.run)[3:11] == [
        f"3 planning {ORCH} ^root [produced_by:2] ok",
        f"4 llm_response {ORCH} ^root [continues:2] ok",  # "not json": the orchestrator asks again
        f"5 llm_response {ORCH} ^root [retry_of:4] ok",
        f"6 speaker_selection {ORCH} ^root [produced_by:5] ok",
        f"7 message {ORCH} ^root [produced_by:5] ok",
        "8 agent_turn alice ^root [selected_by:6] ok",
        "9 llm_response alice ^agent_turn#8 [saw:3 saw:7] ok",
        "10 message alice ^agent_turn#8 [produced_by:9] ok",
    ]
    assert handle.outcome.status == "success"  # the verifier decides after the max-rounds limit


async def test_an_orchestrator_exception_is_an_error_step_and_a_failed_run(traced):
    with pytest.raises(Exception, match="Failed to parse ledger information"):
        async with causaltrace.run(task="say five") as handle:
            await _pair(_flaky_orchestrator(always=True)).run(task="say five")
    run = handle.run
    errors = [s for s in run.steps if s.kind == "error"]
    assert [(s.agent, s.status) for s in errors] == [(ORCH, "error")]
    assert errors[0].content.startswith("ValueError: Failed to parse ledger information after multiple retries")
    retries = [s for s in run.steps if s.kind == "llm_response" and s.deps_of_kind("retry_of")]
    assert len(retries) == 9  # ten attempts, each retry linked to the one before
    assert not [s for s in run.steps if s.kind == "speaker_selection"]
    assert (handle.outcome.status, handle.outcome.stop) == ("failure", "error")
    assert handle.outcome.reason.startswith(f"agent '{ORCH}' raised ValueError: Failed to parse ledger")


async def test_a_missing_orchestrator_hook_degrades_with_a_warning(monkeypatch, caplog):
    patches = tuple(
        patch._replace(path=patch.path.replace("_orchestrate_step", "_no_such_step"))
        for patch in autogen_adapter.PATCHES
    )
    monkeypatch.setattr(autogen_adapter, "PATCHES", patches)
    caplog.set_level(logging.WARNING, logger="causaltrace")
    instrument_autogen(TracerProvider(), TraceConfig(store=False))
    try:
        handle = await record(magentic_team)
    finally:
        uninstrument_autogen()
        reset_tracing()
    assert any("MagenticOneOrchestrator._no_such_step not found" in r.getMessage() for r in caplog.records)
    run = handle.run
    assert handle.outcome.status == "success"
    assert not [s for s in run.steps if s.kind == "speaker_selection"]  # that phase's steps are missing …
    orch_llms = [s for s in run.steps if s.kind == "llm_response" and s.agent == ORCH]
    assert [s.inputs["recording"]["agent_key"] for s in orch_llms] == [KEY] * 7  # … its model calls are not
    assert [s.kind for s in run.steps if s.agent == ORCH][-2:] == ["message", "final_answer"]


async def test_a_nested_magentic_team_keys_its_orchestrator_under_the_team_path(traced):
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    inner = MagenticOneGroupChat(
        [
            AssistantAgent("alice", ScriptedChatCompletionClient(lambda r: "ok"), description="a"),
            AssistantAgent("reviewer", ScriptedChatCompletionClient(lambda r: "RESULT: 5 verified. APPROVE")),
        ],
        model_client=orchestrator_client(("alice", "reviewer")),
        name="inner",
    )
    boss = AssistantAgent("boss", ScriptedChatCompletionClient(lambda r: "go"))
    outer = RoundRobinGroupChat(
        [boss, inner], name="outer", termination_condition=MaxMessageTermination(30), max_turns=2
    )
    async with causaltrace.run(task="hello") as handle:
        await outer.run(task="hello")
    run = handle.run
    team_turn = next(s for s in run.steps if s.kind == "agent_turn" and s.agent == "inner")
    orch_steps = [s for s in run.steps if s.agent == ORCH]
    assert orch_steps and all(s.parent_step_id == team_turn.step_id for s in orch_steps)
    assert {s.inputs["recording"]["agent_key"] for s in orch_steps if s.kind == "llm_response"} == {
        f"outer/inner/{ORCH}"
    }
    assert [s.outputs["selected"] for s in orch_steps if s.kind == "speaker_selection"] == ["alice", "reviewer"]
    assert [c.agent_key for c in run.recording.calls if c.kind == "llm"].count("outer/inner/alice") == 1


# ------------------------------------------------------------------------------------------------------ replay


async def test_a_magentic_run_replays_deterministically(stored):
    run = (await record(failing_team)).run
    assert run.outcome.status == "failure"
    selection = [s for s in run.steps if s.kind == "speaker_selection"][1]
    noop = await replay(
        run, failing_team, Intervention(step_id=selection.step_id, replacement="solver"), example.verify
    )
    assert noop.divergence is None and noop.outcome.final_answer == run.outcome.final_answer
    assert noop.live_calls == 0 and noop.served_calls == len(run.recording.calls) - 1
    assert rows(noop.run) == rows(run)
    assert noop.run.recording.signature() == run.recording.signature()
    # the planted fault, fixed: the prefix (orchestrator included) is served, the rest runs on the scripted clients
    step = next(s for s in run.steps if s.kind == "tool_call")
    fixed = await replay(
        run, failing_team, Intervention(step_id=step.step_id, replacement={"a": 17, "b": 25}), example.verify
    )
    assert fixed.flipped is True and fixed.divergence is None and fixed.live_calls_before_intervention == 0
    assert fixed.outcome.final_answer == "The answer is RESULT: 126."
    assert rows(fixed.run) == rows(run)


async def test_orchestrator_decisions_can_be_intervened_on(stored):
    run = (await record(failing_team)).run
    selection = [s for s in run.steps if s.kind == "speaker_selection"][1]
    # the next speaker: the ledger's next_speaker answer is changed, the orchestrator publishes to the reviewer
    redirected = await replay(
        run, failing_team, Intervention(step_id=selection.step_id, replacement="reviewer"), example.verify
    )
    assert redirected.divergence is None and redirected.live_calls_before_intervention == 0
    new = redirected.run
    new_selection = [s for s in new.steps if s.kind == "speaker_selection"][1]
    assert new_selection.outputs["selected"] == "reviewer"
    assert new.step_at(new_selection.index + 2).agent == "reviewer"
    # the instruction: the ledger's instruction_or_question answer is what the solver receives
    instruction = run.step_at(selection.index + 1)
    told = await replay(
        run, failing_team, Intervention(step_id=instruction.step_id, replacement="Use add(17, 25)."), example.verify
    )
    assert told.divergence is None
    assert [s.content for s in told.run.steps if s.kind == "message" and s.agent == ORCH][1] == "Use add(17, 25)."
    assert [s.outputs["selected"] for s in told.run.steps if s.kind == "speaker_selection"][1] == "solver"
    # the task ledger: the plan call that wrote it gets the new plan
    planning = next(s for s in run.steps if s.kind == "planning")
    replanned = await replay(
        run, failing_team, Intervention(step_id=planning.step_id, replacement="- solver: go"), example.verify
    )
    assert replanned.divergence is None
    assert next(s for s in replanned.run.steps if s.kind == "planning").content.rstrip().endswith("- solver: go")
