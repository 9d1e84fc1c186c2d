"""Provenance orders the proposals within a step (issue 19 item 3).

A real AutoGen team: the clerk's lookup tool says the unit price is 21 dollars, the analyst restates it as 22 in a
sentence that also states the task's 3 boxes and 4 people, and the calculator multiplies the analyst's last number
by 3. In minimality order the analyst's proposals edit the 3 and the 4 first (they come first in the sentence and
every one-number edit is equally minimal); provenance knows the 22 is a restatement that changed its source's 21,
so ``22 -> 21`` is tried first: the same decisive step, the same pair, after 1 replay instead of 8. A step
provenance marks nothing in keeps the minimality order exactly, and so do ties.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import causaltrace
from causaltrace.attribution.stages.provenance import build_provenance
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.replay.executor import default_sandbox
from causaltrace.replay.proposals import proposals_for
from causaltrace.replay.repair import repair
from causaltrace.replay.suspicion import StepSuspicion, SuspicionIndex, suspicious_first
from causaltrace.schema import Intervention, Outcome, Verdict
from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, call

TASK = "Buy 3 boxes of tea for the 4 of us. Look up the unit price, then report 'TOTAL: <dollars>'."


def verify(outcome: Outcome) -> Verdict:
    found = re.search(r"TOTAL: (\d+)", str(outcome.final_answer or ""))
    return Verdict(passed=bool(found and found.group(1) == "63"), reason=f"answer {outcome.final_answer!r}")


def _numbers(request: ScriptedRequest, source: str) -> list[int]:
    said = request.last_from(source)
    return [int(n) for n in re.findall(r"\d+", said[1])] if said else []


def build(*, restate_wrong: bool = True) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.tools import FunctionTool

    async def lookup_price(item: str) -> str:
        """The unit price of an item."""
        return "The unit price of tea is 21 dollars."

    async def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    def clerk(request: ScriptedRequest) -> Any:
        return call("lookup_price", item="tea") if request.tool_rounds() == 0 else "looked up"

    def analyst(request: ScriptedRequest) -> str:
        price = (_numbers(request, "clerk") or [0])[-1]
        return (f"We need 3 boxes for 4 people, and the unit price of tea is "
                f"{price + 1 if restate_wrong else price} dollars.")

    def calculator(request: ScriptedRequest) -> Any:
        product = [r for _, results in request.tool_rounds_since(0) for r in results]
        if product:
            return f"TOTAL: {product[-1].content} TERMINATE"
        return call("multiply", a=(_numbers(request, "analyst") or [0])[-1], b=3)

    def agent(name: str, policy: Any, tools: list[Any] | None = None) -> Any:
        return AssistantAgent(name, model_client=ScriptedChatCompletionClient(policy, model=f"scripted-{name}"),
                              tools=tools, system_message=f"You are {name}.")

    team = [agent("clerk", clerk, [FunctionTool(lookup_price, description="Unit price.")]),
            agent("analyst", analyst),
            agent("calculator", calculator, [FunctionTool(multiply, description="Multiply.")])]
    return RoundRobinGroupChat(team, name="shop",
                               termination_condition=TextMentionTermination("TERMINATE") | MaxMessageTermination(8))


@pytest.fixture(autouse=True)
def _uninstrument():
    yield
    causaltrace.uninstrument()
    reset_tracing()


async def _record() -> Any:
    causaltrace.instrument()
    async with causaltrace.run(task=TASK, verify=verify) as handle:
        await build().run(task=TASK)
    assert handle.run.outcome.status == "failure"
    return handle.run


async def test_provenance_tries_the_restated_value_first_same_decisive_step_fewer_replays():
    run = await _record()
    analyst = next(s for s in run.steps if s.kind == "message" and s.agent == "analyst")
    suspicion = SuspicionIndex(build_provenance(run)).of(analyst)
    assert "22" in suspicion.changed and "21" in suspicion.before

    plain = await proposals_for(analyst, run)
    ordered = await proposals_for(analyst, run, suspicion=suspicion)
    assert sorted(p.description for p in plain) == sorted(p.description for p in ordered)  # the same proposals
    assert not plain[0].description.startswith("number 22")  # minimality alone edits the 3 first
    assert ordered[0].replacement == "We need 3 boxes for 4 people, and the unit price of tea is 21 dollars."
    # the ones provenance says nothing about keep their minimality order
    rest = [p.description for p in ordered if not p.description.startswith("number 22")]
    assert rest == [p.description for p in plain if not p.description.startswith("number 22")]

    # the alternatives' order (corrections off: every edit is an alternative)
    guided = await repair(run, build, verify, k=0, sandbox=default_sandbox(), store=False, corrections=False)
    unguided = await repair(run, build, verify, k=0, sandbox=default_sandbox(), store=False, order_proposals=False,
                            corrections=False)
    assert guided.repaired and unguided.repaired
    assert guided.decisive.step_id == unguided.decisive.step_id == analyst.step_id
    assert guided.pair is None and guided.alternative_pair.chosen["content"].endswith("tea is 21 dollars.")
    assert guided.decisive.best.intervention.replacement == unguided.decisive.best.intervention.replacement
    assert len(guided.decisive.replays) == 1 < len(unguided.decisive.replays)
    assert guided.replays < unguided.replays
    # with corrections (the default) the restored price is the finding's correction: one replay, a pair
    corrected = await repair(run, build, verify, k=0, sandbox=default_sandbox(), store=False)
    assert corrected.decisive.step_id == analyst.step_id and corrected.decisive.basis == "correction"
    assert corrected.decisive.best.intervention.basis == "correction"
    assert corrected.decisive.best.intervention.finding.family == "value_changed"
    assert corrected.pair is not None and corrected.pair.chosen["content"].endswith("tea is 21 dollars.")
    assert corrected.diagnosis.basis == "correction" and corrected.diagnosis.confidence == 1.0
    # prune=False uses no provenance at all (the published CausalFlow search passes it): the minimality order
    bare = await repair(run, build, verify, k=0, sandbox=default_sandbox(), store=False, prune=False,
                        corrections=False)
    assert len(bare.decisive.replays) == len(unguided.decisive.replays)


async def test_a_step_provenance_marks_nothing_in_keeps_the_minimality_order():
    run = await _record()
    index = SuspicionIndex(build_provenance(run))
    tool_call = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "multiply")
    message = next(s for s in run.steps if s.kind == "message" and s.agent == "clerk")
    for step in (tool_call, message):
        suspicion = index.of(step)
        assert not suspicion.changed
        plain = await proposals_for(step, run)
        assert [p.replacement for p in await proposals_for(step, run, suspicion=suspicion)] == [
            p.replacement for p in plain]


def _proposal(text: str) -> Intervention:
    return Intervention(step_id="s", replacement=text, description=text, source="mutation")


def test_ties_keep_the_given_order_and_restoring_edits_come_first():
    original = "Buy 3 boxes at 22 each, 5 days from Monday."
    given = [_proposal(t) for t in (
        "Buy 4 boxes at 22 each, 5 days from Monday.",   # other
        "Buy 3 boxes at 23 each, 5 days from Monday.",   # changed value, edited to something else
        "Buy 3 boxes at 22 each, 6 days from Monday.",   # a value that reaches the answer
        "Buy 2 boxes at 22 each, 5 days from Monday.",   # other
        "Buy 3 boxes at 21 each, 5 days from Monday.",   # changed value, back to its source's
        "Buy 3 boxes at 22 each, 4 days from Monday.",   # a value that reaches the answer
        "Buy 3 boxes at 20 each, 5 days from Monday.",   # changed value, edited to something else
    )]
    suspicion = StepSuspicion(changed=frozenset({"22"}), before=frozenset({"21"}), reaching=frozenset({"5"}))
    ordered = suspicious_first(given, original, "text", suspicion)
    assert [given.index(p) for p in ordered] == [4, 1, 6, 2, 5, 0, 3]
    # nothing suspicious: the order is the given one, untouched
    assert suspicious_first(given, original, "text", StepSuspicion()) == given
    assert suspicious_first(given, original, "text", StepSuspicion(changed=frozenset({"99"}))) == given


async def test_one_edit_reached_from_two_steps_is_replayed_once(tmp_path):
    """Issue 32 (repair cost): a CodeAgent's code is the same recorded edit whether it is changed on the
    ``python_interpreter`` tool_call or on the code_execution that ran it (``edits.edit_key``), so the search
    replays each edit once: the later step's proposals that repeat the earlier step's are not replayed again."""
    from _zoo import zoo_home
    from causaltrace.replay.edits import edit_key
    from causaltrace.schema import Intervention
    from causaltrace.testing.faults import all_cases
    from causaltrace.testing.faults import runner as faults_runner

    case = next(c for c in all_cases() if c.name == "smol-readings-threshold")
    with zoo_home(tmp_path):
        run = await faults_runner.record(case)
        ran = next(s for s in run.steps if s.kind == "code_execution" and "r > 50" in s.inputs.get("code", ""))
        call = next(s for s in run.steps if s.kind == "tool_call" and s.tool_name == "python_interpreter"
                    and s.index < ran.index and "r > 50" in str(s.arguments))
        code = ran.inputs["code"]
        same = [edit_key(run, Intervention(step_id=s.step_id, replacement=code.replace("> 50", ">= 50")))
                for s in (call, ran)]
        assert same[0] is not None and same[0] == same[1]
        assert edit_key(run, Intervention(step_id=ran.step_id, replacement=code.replace("> 50", "> 49"))) != same[0]
        never = lambda outcome: False  # noqa: E731  (nothing flips: every proposal of both steps is tried)
        result = await repair(run, case.factory, never, [call.step_id, ran.step_id], k=0, store=False,
                              probe=False, concurrency=1, corrections=False, max_alternatives=None, prune=False,
                              sandbox=default_sandbox())
    keys = [edit_key(run, r.intervention) for a in result.attempts for r in a.replays]
    assert len(keys) == len(set(keys)) and len(keys) > 1  # five proposals on each step, five replays in all
    assert [a.index for a in result.attempts if a.replays] == [call.index]
