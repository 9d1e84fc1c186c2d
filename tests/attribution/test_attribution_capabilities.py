"""Routing by what agents can do (issue 32 item 1: "the chosen agent has no tool or description for what is asked").

A live run stores its team's roster (each agent's description and tools, ``Run.metadata["roster"]``); when the
agents' names decide nothing (``desk_one`` / ``desk_two``), a routing choice whose agent can do nothing the request
asks for, where exactly one other agent can, is an ``unfit_routing`` finding. Checked on a real AutoGen
SelectorGroupChat driven by scripted models, with its fixed twin (same failing Outcome substituted) and with the
roster removed (the rule is silent without one); the roster itself on real AutoGen and smolagents objects.
"""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("autogen_agentchat", reason="autogen-agentchat is not installed (pip install causaltrace[autogen])")

from _autogen import traced_in_memory
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.stages.capabilities import Capability, capability_words, stems
from causaltrace.attribution.stages.targets import capable_alternative
from causaltrace.instrumentation.roster import autogen_roster, smolagents_roster
from causaltrace.replay.corrections import corrections_for
from causaltrace.schema import Outcome, Run, Verdict
from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, call
from causaltrace.testing.faults.teams_autogen import tool_results

TASK = "A customer writes: I want a refund for order B7. Report 'REFUND: <dollars>'."


def lookup_refund(order: str) -> str:
    """The refundable amount of an order."""
    return f"order {order}: 40 dollars refundable"


def restart_router(customer: str) -> str:
    """Restart a customer's router remotely."""
    return f"router of {customer} restarted"


def reset_router(customer: str) -> str:
    """Restart a customer's router remotely.

    Args:
        customer: whose router
    """
    return f"router of {customer} restarted"


def _verify(outcome: Outcome) -> Verdict:
    ok = re.search(r"REFUND:\s*40\b", outcome.final_answer or "") is not None
    return Verdict(passed=ok, reason="" if ok else "the final answer reports no REFUND: 40")


def _team(planted: bool):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat
    from autogen_core.tools import FunctionTool

    def refunds(request: ScriptedRequest):
        done = [c for name, _, c, err in tool_results(request) if name == "lookup_refund" and not err]
        return "REFUND: 40. DONE" if done else call("lookup_refund", order="B7")

    def routers(request: ScriptedRequest) -> str:
        return "I restarted nothing: please restart the router yourself. DONE"

    def selector(request: ScriptedRequest) -> str:
        return "desk_two" if planted else "desk_one"

    def agent(name, policy, tool):
        return AssistantAgent(name, model_client=ScriptedChatCompletionClient(policy, model=f"scripted-{name}"),
                              tools=[FunctionTool(tool, description=tool.__doc__, name=tool.__name__)],
                              system_message=f"You are {name}.", reflect_on_tool_use=True)

    return SelectorGroupChat([agent("desk_one", refunds, lookup_refund), agent("desk_two", routers, restart_router)],
                             model_client=ScriptedChatCompletionClient(selector, model="scripted-selector"),
                             termination_condition=TextMentionTermination("DONE") | MaxMessageTermination(6))


@pytest.fixture
def traced(monkeypatch):
    yield from traced_in_memory(monkeypatch)


def _record(traced, planted: bool) -> Run:
    import causaltrace

    async def go() -> Run:
        async with causaltrace.run(task=TASK, verify=_verify, name="desks") as handle:
            await _team(planted).run(task=TASK)
        return handle.run

    return asyncio.run(go())


def _unfit(run: Run) -> list:
    d = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))
    return d, [f for f in d.findings if f.family == "unfit_routing"]


def test_a_choice_whose_agent_cannot_do_what_is_asked_is_an_unfit_routing_finding(traced):
    failing = _record(traced, planted=True)
    assert failing.outcome.status == "failure"
    roster = failing.metadata["roster"]
    assert [t["name"] for t in roster["desk_one"]["tools"]] == ["lookup_refund"]
    selection = next(s for s in failing.steps if s.kind == "speaker_selection" and s.content == "desk_two")

    d, found = _unfit(failing)
    assert [f.index for f in found] == [selection.index]
    assert d.decisive_step_index == selection.index and d.basis == "finding"
    roles = {e.role: e.value for e in found[0].evidence}
    assert roles == {"request": "desk_one", "chosen_agent": "desk_two"}
    assert "refund" in found[0].claim and "does not fit the request" in found[0].claim

    # repair derives the correction from the finding: route to the agent whose tools fit (it never ran)
    assert "desk_one" not in failing.agents
    fixes = corrections_for(failing.step_at(selection.index), failing, d.findings)
    assert [(c.basis, c.replacement) for c in fixes] == [("correction", "desk_one")]

    # ... and replay proves it: the run succeeds with the corrected route, a replay-verified correction
    from causaltrace.replay.executor import default_sandbox
    from causaltrace.replay.repair import repair

    result = asyncio.run(repair(failing, lambda: _team(planted=True), _verify, candidates=[selection.step_id], k=0,
                                diagnosis=d, sandbox=default_sandbox()))
    assert result.repaired and result.decisive is not None
    assert (result.decisive.index, result.decisive.basis) == (selection.index, "correction")

    # the fixed twin, diagnosed with the failing Outcome substituted: the fitting choice is no finding
    twin = _record(traced, planted=False)
    assert twin.outcome.status == "success", (twin.outcome, [(x.kind, x.agent, x.content[:80]) for x in twin.steps])
    _, twin_found = _unfit(twin.model_copy(update={"outcome": failing.outcome}))
    assert twin_found == []

    # without the roster (an imported trace, an older store) nothing tells the agents apart: no finding
    bare = failing.model_copy(update={"metadata": {k: v for k, v in failing.metadata.items() if k != "roster"}})
    assert _unfit(bare)[1] == []


def _run_with(roster: dict) -> Run:
    return Run(run_id="r", metadata={"roster": roster})


def test_capability_words_drop_what_every_agent_has():
    generic = "An agent that provides assistance with ability to use tools."
    caps = capability_words(_run_with({
        "a": {"description": generic, "tools": [{"name": "lookup_refund", "description": "Refundable amount."}]},
        "b": {"description": generic, "tools": []},
    }))
    assert caps["a"].names == {"lookup", "refund"} and caps["a"].words == {"amount"}  # "refundable" is refund's
    assert caps["b"] == Capability(frozenset(), frozenset())
    assert capability_words(Run(run_id="r")) == {}
    assert capability_words(_run_with({"solo": {"description": "does all"}})) == {}


def test_a_capable_alternative_fits_clearly_better_than_the_chosen_agent():
    def cap(names: str, words: str = "") -> Capability:
        return Capability(stems(names), stems(words))

    caps = {"refunds": cap("lookup refund", "amount order"), "routers": cap("restart router", "customer remotely"),
            "invoices": cap("refund invoice"), "blank": cap("")}
    # refunds: 2 (refund) + 1 (order) = 3 > 2 x routers' 1 (customer)
    assert capable_alternative("routers", ["refunds", "routers"], TASK, caps) == ("refunds", ("order", "refund"))
    assert capable_alternative("blank", ["refunds", "blank"], TASK, caps) is None  # a planner: no tool, no words
    assert capable_alternative("refunds", ["refunds", "routers"], TASK, caps) is None  # the chosen one fits
    assert capable_alternative("unknown", ["refunds", "unknown"], TASK, caps) is None  # not in the roster
    assert capable_alternative("routers", ["routers", "invoices"], "a refund please", caps) == ("invoices", ("refund",))
    assert capable_alternative("routers", ["routers", "refunds", "invoices"], "a refund please", caps) is None  # tie
    assert capable_alternative("routers", ["routers", "refunds"], "the weather today", caps) is None  # nobody fits


def test_the_roster_comes_from_the_frameworks_own_objects():
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.tools import FunctionTool

    client = ScriptedChatCompletionClient(lambda request: "DONE", model="scripted")
    team = RoundRobinGroupChat([
        AssistantAgent("desk_one", model_client=client, description="Refund desk.",
                       tools=[FunctionTool(lookup_refund, description="Look up a refund.")], handoffs=["desk_two"]),
        AssistantAgent("desk_two", model_client=client),
    ])
    roster = autogen_roster(team)
    assert roster["desk_one"] == {"description": "Refund desk.",
                                  "tools": [{"name": "lookup_refund", "description": "Look up a refund."}]}
    assert roster["desk_two"]["tools"] == []  # handoff tools are routing, not capability

    smolagents = pytest.importorskip("smolagents", reason="smolagents is not installed")
    from causaltrace.testing.smolagents import ScriptedModel

    model = ScriptedModel(lambda messages: "final_answer('x')")
    worker = smolagents.ToolCallingAgent(tools=[smolagents.tool(reset_router)], model=model, name="desk_two",
                                         description="Fixes routers.")
    manager = smolagents.CodeAgent(tools=[], model=model, managed_agents=[worker], name="manager")
    roster = smolagents_roster(manager)
    assert roster["desk_two"]["description"] == "Fixes routers."
    assert [t["name"] for t in roster["desk_two"]["tools"]] == ["reset_router"]
    assert roster["manager"]["tools"] == []  # final_answer, which every agent has, is left out

