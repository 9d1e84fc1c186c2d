"""A call that passes a name nothing gave where the task names another (issue 32, family ``value_changed``).

A real smolagents ToolCallingAgent, driven by a scripted model, is asked for the temperature in Lyon and calls
``get_weather(city="Paris")``: nothing gave "Paris", and no call ever passes the task's "Lyon". The failing run has
a ``value_changed`` finding at that call with the task's name as its source, and repair's correction passes "Lyon";
the fixed twin, diagnosed with the failing Outcome substituted, has none. A name added to the task's ("Lyon, France"),
a task naming two cities neither of which any call passes, or the task's name passed by another call is no
evidence.
"""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("smolagents", reason="smolagents is not installed (pip install causaltrace[smolagents])")

from causaltrace.attribution.engine import diagnose
from causaltrace.replay.corrections import corrections_for
from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.faults.cases import FaultCase, first_step
from causaltrace.testing.faults.runner import record

TASK = "What is the temperature in Lyon right now? Answer 'C: <degrees>'."
TEMPERATURES = {"Lyon": 17, "Paris": 21, "Nice": 24, "Marseille": 23}


def _verify(expected: int):
    def verify(outcome: Outcome) -> Verdict:
        ok = re.search(rf"C:\s*{expected}\b", outcome.final_answer or "") is not None
        return Verdict(passed=ok, reason="" if ok else f"expected C: {expected}")

    return verify


def _team(cities: list[str]):
    """A weather agent that calls ``get_weather`` once per city of ``cities``, then answers the first one's."""
    import smolagents

    from causaltrace.testing.smolagents import Call, ScriptedModel

    @smolagents.tool
    def get_weather(city: str) -> str:
        """The current temperature of a city.

        Args:
            city: the city's name.
        """
        name = city.split(",")[0].strip()
        return f"{name}: {TEMPERATURES.get(name, 0)} C"

    def policy(request):
        done = len(request.observations)
        if done < len(cities):
            return [Call("get_weather", {"city": cities[done]})]
        first = re.search(r"(-?\d+) C", request.observations[0])
        return [Call("final_answer", {"answer": f"C: {first.group(1) if first else '?'}"})]

    return smolagents.ToolCallingAgent(tools=[get_weather], model=ScriptedModel(policy), name="weather",
                                       max_steps=5)


def _case(cities: list[str], fixed: list[str], task: str = TASK, expected: int = 17) -> FaultCase:
    return FaultCase(name="substituted-name", framework="smolagents", fault="wrong_tool_argument", task=task,
                     factory=lambda: _team(cities), fixed_factory=lambda: _team(fixed), verify=_verify(expected),
                     rule=first_step("tool_call", tool="get_weather"), rule_text="the get_weather call")


def _diagnosed(run):
    return asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))


def _substitutions(d):
    return [f for f in d.findings if f.family == "value_changed" and "entity" in f.claim]


def test_a_call_passing_a_name_nothing_gave_for_the_tasks_name_is_the_decisive_step():
    case = _case(["Paris"], ["Lyon"])
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    call = case.true_step(failing)
    d = _diagnosed(failing)
    [found] = _substitutions(d)
    assert (found.index, d.decisive_step_index) == (call, call)
    assert [(e.role, e.index, e.value) for e in found.evidence] == [("source", -1, "Lyon"),
                                                                     ("changed", call, "Paris")]
    [correction] = corrections_for(failing.step_at(call), failing, [found])
    assert correction.basis == "correction" and correction.replacement == {"city": "Lyon"}

    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _substitutions(_diagnosed(twin.model_copy(update={"outcome": failing.outcome}))) == []


def test_a_name_added_to_the_tasks_an_ambiguous_pair_or_the_name_passed_later_are_no_evidence():
    added = asyncio.run(record(_case(["Lyon, France"], ["Lyon"])))
    assert _substitutions(_diagnosed(added.model_copy(update={"outcome": Outcome(
        status="failure", final_answer="C: 17", verdict=Verdict(passed=False, reason="expected C: 18"))}))) == []
    two = "What are the temperatures in Lyon and Nice? Answer 'C: <degrees>' for Lyon."
    neither = asyncio.run(record(_case(["Paris", "Marseille"], ["Lyon", "Nice"], task=two)))
    assert neither.outcome.status == "failure" and _substitutions(_diagnosed(neither)) == []
    # one of the two passed: the other is the one substituted
    one = asyncio.run(record(_case(["Paris", "Nice"], ["Lyon", "Nice"], task=two)))
    assert [(e.role, e.value) for f in _substitutions(_diagnosed(one)) for e in f.evidence] == [
        ("source", "Lyon"), ("changed", "Paris")]
    later = asyncio.run(record(_case(["Paris", "Lyon"], ["Lyon"])))
    assert later.outcome.status == "failure" and _substitutions(_diagnosed(later)) == []


def test_argument_names_reads_short_values_not_prose():
    from causaltrace.attribution.stages.values import argument_names

    assert argument_names({"city": "Paris", "days": 3, "hotel": "Hotel Baixa"}) == {"paris", "hotel", "baixa"}
    assert argument_names({"query": "What is the weather in Paris today?"}) == frozenset()
    assert argument_names({"city": "Paris"}, skip=frozenset({"paris"})) == frozenset()


def test_the_same_substitution_in_an_autogen_team_is_found_and_its_twin_is_clean():
    """An AutoGen AssistantAgent with ``get_weather`` (and an auditor in a round robin) asked about Lyon calls
    ``get_weather(city="Paris")``: the finding is at that call, the fixed team's twin has none."""
    pytest.importorskip("autogen_agentchat", reason="AutoGen is not installed (pip install causaltrace[autogen])")
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, ok, round_robin, said, tool

    def build(city: str):
        async def get_weather(city: str) -> str:
            """The current temperature of a city."""
            return f"{city}: {TEMPERATURES.get(city, 0)} C"

        def forecaster(request):
            seen = ok(request, "get_weather")
            if seen is not None:
                found = re.search(r"(-?\d+) C", seen)
                return f"C: {found.group(1) if found else '?'}"
            return call("get_weather", city=city)

        def auditor(request):
            found = said(request, "forecaster", r"C: (-?\d+)")
            return f"C: {found.group(1)} checked. APPROVE" if found else "REJECT: no temperature."

        return round_robin([agent("forecaster", forecaster, [tool(get_weather, "Weather.")]),
                            agent("auditor", auditor)], "APPROVE", 6)

    case = FaultCase(name="autogen-substituted-name", framework="autogen", fault="wrong_tool_argument", task=TASK,
                     factory=lambda: build("Paris"), fixed_factory=lambda: build("Lyon"), verify=_verify(17),
                     rule=first_step("tool_call", tool="get_weather"), rule_text="the get_weather call")
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    d = _diagnosed(failing)
    [found] = _substitutions(d)
    assert found.index == case.true_step(failing) == d.decisive_step_index
    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _substitutions(_diagnosed(twin.model_copy(update={"outcome": failing.outcome}))) == []
