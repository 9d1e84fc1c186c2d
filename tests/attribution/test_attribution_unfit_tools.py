"""The wrong tool chosen (issue 32 item 1, family ``unfit_routing`` for a tool).

A real AutoGen team driven by scripted models: the analyst has two tools, ``rainfall_archive`` ("recorded rainfall of
past days, from the archive") and ``rainfall_forecast`` ("predicted rainfall of the coming days"); asked for last
week's recorded rainfall from the archive, it calls the forecast. The live run stores the team's roster, so the
finding is at that call, naming the archive tool that covers the request and was never called; the fixed twin (it
calls the archive), diagnosed with the failing Outcome substituted, has none. A tool that is called somewhere in the
run, or an agent with one tool, is no evidence.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("autogen_agentchat", reason="autogen-agentchat is not installed (pip install causaltrace[autogen])")

from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.findings.unfit_tools import tool_capabilities
from causaltrace.schema import Outcome, Run, Verdict
from causaltrace.testing.faults.cases import FaultCase, first_step
from causaltrace.testing.faults.runner import record

TASK = "What was the recorded rainfall in Oslo last week? Look it up in the archive and report 'RAIN: <mm>'."
ARCHIVE_DESCRIPTION = "Recorded rainfall of the past days, from the archive, in mm."
FORECAST_DESCRIPTION = "Predicted rainfall of the coming days, in mm."


def _verify(outcome: Outcome) -> Verdict:
    ok = "RAIN: 31" in str(outcome.final_answer or "")
    return Verdict(passed=ok, reason="" if ok else "last week's recorded rainfall was 31 mm")


def _team(planted: bool):
    from causaltrace.testing.autogen import call
    from causaltrace.testing.faults.teams_autogen import agent, ok, round_robin, tool

    async def rainfall_archive(city: str) -> str:
        return "31"

    async def rainfall_forecast(city: str) -> str:
        return "12"

    def analyst(request):
        for name in ("rainfall_archive", "rainfall_forecast"):
            found = ok(request, name)
            if found is not None:
                return f"RAIN: {found}. DONE"
        return call("rainfall_forecast" if planted else "rainfall_archive", city="Oslo")

    def reporter(request):
        return "Noted."

    return round_robin([agent("analyst", analyst, [tool(rainfall_archive, ARCHIVE_DESCRIPTION),
                                                  tool(rainfall_forecast, FORECAST_DESCRIPTION)]),
                        agent("reporter", reporter)], "DONE", 6)


def _case() -> FaultCase:
    return FaultCase(name="unfit-tool", framework="autogen", fault="wrong_tool", task=TASK,
                     factory=lambda: _team(True), fixed_factory=lambda: _team(False), verify=_verify,
                     rule=first_step("tool_call", tool="rainfall_forecast"), rule_text="the forecast call")


def _unfit(run):
    d = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))
    return d, [f for f in d.findings if f.family == "unfit_routing"]


def test_a_tool_that_fits_nothing_asked_while_the_fitting_one_is_never_called_is_a_finding():
    case = _case()
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    call = case.true_step(failing)
    d, [found] = _unfit(failing)
    assert found.index == call == d.decisive_step_index
    assert "'rainfall_archive'" in found.claim and "never called" in found.claim
    assert [(e.role, e.value) for e in found.evidence][1:] == [("source", "rainfall_archive"),
                                                               ("chosen_agent", "rainfall_forecast")]
    assert "archiv" in found.evidence[0].value  # the request's words the archive covers

    from causaltrace.replay.executor import default_sandbox
    from causaltrace.replay.repair import repair
    from causaltrace.replay.turns import producing_llm

    reply = producing_llm(failing, failing.step_at(call))
    result = asyncio.run(repair(failing, case.factory, _verify, candidates=[failing.step_at(call).step_id],
                                k=0, diagnosis=d, sandbox=default_sandbox()))
    assert result.repaired and result.decisive.basis == "correction"  # the same call of the archive
    assert result.decisive.index in (reply.index, call)

    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _unfit(twin.model_copy(update={"outcome": failing.outcome}))[1] == []


def test_tool_capabilities_drop_what_all_of_an_agents_tools_share_and_need_two_tools():
    roster = {"analyst": {"tools": [{"name": "rainfall_archive", "description": ARCHIVE_DESCRIPTION},
                                    {"name": "rainfall_forecast", "description": FORECAST_DESCRIPTION}]},
              "solo": {"tools": [{"name": "lookup", "description": "Look things up."}]}}
    caps = tool_capabilities(Run(run_id="r", metadata={"roster": roster}))
    assert set(caps) == {"analyst"}
    archive, forecast = caps["analyst"]["rainfall_archive"], caps["analyst"]["rainfall_forecast"]
    assert "rainfa" not in archive.names | archive.words and "archiv" in archive.names
    assert "predic" in forecast.words and "mm" not in forecast.words


def _logged(*, plan: str | None, also_archive: bool = False):
    """The same choice as a built run with the roster: an optional teammate's plan, the forecast call, and maybe a
    later archive call."""
    from _builders import RunBuilder

    roster = {"analyst": {"tools": [{"name": "rainfall_archive", "description": ARCHIVE_DESCRIPTION},
                                    {"name": "rainfall_forecast", "description": FORECAST_DESCRIPTION}]},
              "planner": {"description": "Plans the work."}}
    b = RunBuilder("rain").task(TASK)
    if plan is not None:
        b = b.message("planner", plan, deps=[("task", "saw")])
    b = (b.llm("analyst", "", tool_calls=[{"name": "rainfall_forecast", "arguments": {"city": "Oslo"}}])
         .tool_call("analyst", "rainfall_forecast", {"city": "Oslo"}, deps=[("llm-1", "produced_by")])
         .tool_response("analyst", "12", deps=[("call-1", "tool_result_of")]))
    if also_archive:
        b = (b.llm("analyst", "", tool_calls=[{"name": "rainfall_archive", "arguments": {"city": "Oslo"}}])
             .tool_call("analyst", "rainfall_archive", {"city": "Oslo"}, deps=[("llm-2", "produced_by")])
             .tool_response("analyst", "31", deps=[("call-2", "tool_result_of")]))
    b = b.final_answer("analyst", "RAIN: 12")
    return b.build(outcome=Outcome(status="failure", final_answer="RAIN: 12",
                                   verdict=Verdict(passed=False, reason="expected RAIN: 31")),
                   metadata={"roster": roster})


def test_a_call_a_teammate_asked_for_or_a_fitting_tool_called_later_is_no_evidence():
    assert len(_unfit(_logged(plan=None))[1]) == 1  # the same choice alone is a finding
    assert _unfit(_logged(plan="Plan: analyst, call rainfall_forecast for Oslo and report it."))[1] == []
    assert _unfit(_logged(plan=None, also_archive=True))[1] == []
