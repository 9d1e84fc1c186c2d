"""Repair edits the agent, not the world (issue 19, "Interventions edit agent decisions first").

A real AutoGen team whose lookup tool returns the right price (21) and whose analyst restates it one too high
("The unit price is 22."): the old search found the earliest flip by LOWERING THE TOOL RESULT (21 -> 20, so the
analyst's +1 came out right) and called the tool_response the decisive error, verified by replay. Agent decisions
go first now: the analyst's sentence-final 22 is the decisive step, with a pair. When the tool itself returns a
stale price that every agent copies faithfully, no agent correction flips the run, and the last, labelled phase
reports a tool / data fault (SYS-ENVIRONMENT, no agent, no pair).
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import Any

import pytest

import causaltrace
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.repair import repair
from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, call

TASK = "Buy 3 boxes of tea. Look up the unit price, then report 'TOTAL: <dollars>'."


def verify(outcome: Outcome) -> Verdict:
    found = re.search(r"TOTAL: (\d+)", str(outcome.final_answer or ""))
    return Verdict(passed=bool(found and found.group(1) == "63"), reason=f"answer {outcome.final_answer!r}")


def _last_number(request: ScriptedRequest, source: str) -> int | None:
    said = request.last_from(source)
    numbers = re.findall(r"\d+", said[1]) if said else []
    return int(numbers[-1]) if numbers else None


def build(*, restate_wrong: bool = False, price: int = 21, noisy: bool = False, hang: bool = False,
          hang_unless: int | None = None) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.tools import FunctionTool

    async def lookup_price(item: str) -> int:
        """The unit price of an item in dollars."""
        return price

    async def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        if hang or (hang_unless is not None and a != hang_unless):  # a live tool that never answers (a replay
            await asyncio.sleep(3600)  # must not wait for it forever)
        return a * b

    def clerk(request: ScriptedRequest) -> Any:
        if request.tool_rounds() == 0:
            return call("lookup_price", item="tea")
        return "looked up"

    def analyst(request: ScriptedRequest) -> str:
        found = _last_number(request, "clerk")
        if found is None:
            return "I have no price."
        return f"The unit price is {found + 1 if restate_wrong else found}."

    def calculator(request: ScriptedRequest) -> Any:
        if noisy:  # as frameworks print tracebacks and panels while they run
            print("calculator: thinking hard", file=sys.stderr)
        product = [r for _, results in request.tool_rounds_since(0) for r in results]
        if product:
            return f"TOTAL: {product[-1].content} TERMINATE"
        found = _last_number(request, "analyst")
        return call("multiply", a=found or 0, b=3)

    def agent(name: str, policy: Any, tools: list[Any] | None = None) -> Any:
        return AssistantAgent(name, model_client=ScriptedChatCompletionClient(policy, model=f"scripted-{name}"),
                              tools=tools, system_message=f"You are {name}.")

    team = [agent("clerk", clerk, [FunctionTool(lookup_price, description="Unit price.")]),
            agent("analyst", analyst),
            agent("calculator", calculator, [FunctionTool(multiply, description="Multiply.")])]
    return RoundRobinGroupChat(team, name="shop",
                               termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(8))


async def _record(factory: Any) -> Any:
    causaltrace.instrument()
    async with causaltrace.run(task=TASK, verify=verify) as handle:
        await factory().run(task=TASK)
    return handle.run


async def test_a_wrong_restatement_of_a_correct_tool_result_is_the_agents_error_not_the_tools():
    def factory():
        return build(restate_wrong=True)

    run = await _record(factory)
    assert run.outcome.status == "failure"
    analyst = next(s for s in run.steps if s.kind == "message" and s.agent == "analyst")
    tool_result = next(s for s in run.steps if s.kind == "tool_response" and s.tool_name == "lookup_price")
    assert tool_result.index < analyst.index

    result = await repair(run, factory, verify, k=0, sandbox=default_sandbox(), store=False)
    assert result.repaired and result.decisive.step_id == analyst.step_id
    assert result.diagnosis.fault_source == "agent" and result.diagnosis.agent == "analyst"
    assert "22" in result.decisive.best.intervention.description  # the sentence-final number
    assert result.pair is not None and result.pair.chosen["content"] == "The unit price is 21."
    assert all(a.phase == "agent" for a in result.attempts)  # the tool result was never edited

    # the published CausalFlow order (every step a candidate, in step order) blames the correct tool result
    old = await repair(run, factory, verify, k=0, sandbox=default_sandbox(), store=False, agent_first=False)
    assert old.repaired and old.decisive.step_id == tool_result.step_id


async def test_a_stale_tool_result_copied_faithfully_is_reported_as_an_environment_fault():
    def factory():
        return build(price=22)  # the tool is wrong; every agent copies what it was given

    run = await _record(factory)
    assert run.outcome.status == "failure"
    result = await repair(run, factory, verify, k=0, sandbox=default_sandbox(), store=False)
    assert result.repaired, [a.phase for a in result.attempts]
    decisive = run.step(result.decisive.step_id)
    assert decisive.kind == "tool_response" and result.decisive.phase == "environment"
    diagnosis = result.diagnosis
    assert diagnosis.fault_source == "environment" and diagnosis.category == "SYS-ENVIRONMENT"
    assert diagnosis.agent is None and "lookup_price had returned" in diagnosis.explanation
    assert result.pair is None and "tool result" in result.pair_reason
    # every agent step was tried first, and none of their corrections flipped the run
    phases = [a.phase for a in result.attempts]
    assert phases.index("environment") == len([p for p in phases if p == "agent"])

    without = await repair(run, factory, verify, k=0, sandbox=default_sandbox(), store=False, environment=False)
    assert not without.repaired and all(a.phase == "agent" for a in without.attempts)


@pytest.fixture(autouse=True)
def _uninstrument():
    yield
    causaltrace.uninstrument()
    reset_tracing()  # the next test configures tracing (and its store) afresh


def build_stale() -> Any:
    """The stale-price team, noisy: the calculator prints to stderr on every model call, as frameworks do."""
    return build(price=22, noisy=True)


def verify_unreachable(outcome: Outcome) -> Verdict:
    """No small correction reaches this total: every proposal is replayed until the budget stops the search."""
    return Verdict(passed="TOTAL: 1000" in str(outcome.final_answer or ""), reason="expected TOTAL: 1000")


async def test_the_search_stops_at_its_budget_and_keeps_each_replays_output_off_the_terminal(capsys):
    causaltrace.instrument()
    async with causaltrace.run(task=TASK, verify=verify_unreachable) as handle:
        await build_stale().run(task=TASK)
    run = handle.run
    capsys.readouterr()
    result = await repair(run, build_stale, verify_unreachable, k=0, sandbox=default_sandbox(), store=False,
                          max_replays=3)
    assert not result.repaired and result.budget_exhausted == "replays" and result.replays == 3
    assert "budget of replays ran out" in result.diagnosis.explanation
    outputs = [o for a in result.attempts for o in a.outputs]
    assert len(outputs) == 3 and all("calculator: thinking hard" in o for o in outputs)
    assert "thinking hard" not in capsys.readouterr().err  # nothing reached the terminal
    records = result.diagnosis.artifacts["replays"]
    assert all(r["output_lines"] >= 1 and r["output_tail"] for r in records)


def test_cli_progress_lines_keep_their_outcome_at_any_width(capsys, monkeypatch):
    import asyncio

    from causaltrace.cli import main

    async def record() -> Any:
        causaltrace.instrument()
        async with causaltrace.run(task=TASK, verify=verify_unreachable) as handle:
            await build_stale().run(task=TASK)
        return handle.run

    run = asyncio.run(record())
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "40")
    here = __file__
    code = main(["repair", run.run_id, "--factory", f"{here}:build_stale", "--verify", f"{here}:verify_unreachable",
                 "--max-replays", "4"])
    assert code == 1  # no repair found (issue 33: repair's exit code says so)
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if "· step #" in line]
    assert len(progress) == 4
    assert all(line.lstrip().startswith(("failure", "flipped", "unknown")) for line in progress), progress
    assert "thinking hard" not in captured.err
    assert "repair budget: 4 replays" in captured.err
    assert "budget ran out" in captured.out


async def test_a_replay_that_hangs_or_raises_is_a_marked_result_and_the_search_goes_on():
    run = await _record(lambda: build(price=22))

    def hanging() -> Any:
        return build(price=22, hang=True)

    result = await repair(run, hanging, verify, k=0, sandbox=default_sandbox(), store=False, replay_timeout_s=2)
    tried = [r for a in result.attempts for r in a.replays]
    marks = [r.error.type for r in tried if r.error is not None]
    # every replay that reaches the live multiply hangs: each is stopped after 2 s, marked, and the search goes on
    assert marks.count("ReplayTimeout") >= 2 and len(tried) >= 3
    assert "environment" in {a.phase for a in result.attempts}  # it went on to the last phase
    assert not result.repaired and result.seconds < 60

    def broken_verify(outcome: Outcome) -> Verdict:
        raise RuntimeError("the verifier broke")

    again = await repair(run, lambda: build(price=22), broken_verify, k=0, sandbox=default_sandbox(), store=False,
                         max_replays=3)
    tried = [r for a in again.attempts for r in a.replays]
    assert not again.repaired and len(tried) >= 2
    assert all(r.error is not None or r.outcome.status != "success" for r in tried)
