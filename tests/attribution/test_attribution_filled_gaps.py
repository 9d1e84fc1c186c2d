"""A table of results with one figure nobody gave (issue 32, family ``made_up_data``).

A real smolagents CodeAgent, driven by a scripted model, reads three meters; building C's meter times out, and the
agent sums a table with a figure for C that no result gave. The failing run has a ``made_up_data`` finding at the
code step (the two meters' answers as its sources, the made-up figure as what it changed) and the timeout is not
blamed (the agent worked around it); the fixed twin, whose meter answers, diagnosed with the failing Outcome
substituted, has no such finding. Figures the task, another agent or arithmetic gives are no evidence.
"""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("smolagents", reason="smolagents is not installed (pip install causaltrace[smolagents])")

from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.findings.filled_gaps import _Stated, sourceless_fill
from causaltrace.schema import Outcome, Step, Verdict
from causaltrace.testing.faults.cases import FaultCase, first_step
from causaltrace.testing.faults.runner import record

TASK = "Read the January meters of buildings A, B and C and report their total as 'KWH: <n>'."
METERS = {"A": 21430, "B": 17980, "C": 19265}


def _verify(outcome: Outcome) -> Verdict:
    ok = re.search(rf"KWH:\s*{sum(METERS.values())}\b", outcome.final_answer or "") is not None
    return Verdict(passed=ok, reason="" if ok else "the final answer reports another total")


def _team(planted: bool):
    import smolagents

    from causaltrace.testing.smolagents import ScriptedModel

    @smolagents.tool
    def read_meter(building: str) -> str:
        """A building's January meter reading.

        Args:
            building: the building's letter.
        """
        if planted and building == "C":
            raise TimeoutError("read_meter: the gateway of building C did not answer")
        return f"building {building}: {METERS[building]} kWh"

    def policy(request) -> str:
        if request.is_planning:
            return "1. Read each meter.\n2. Sum.\n<end_plan>"
        done = len(request.observations)
        if done < 3:
            building = "ABC"[done]
            return f"Thought: read {building}.\n<code>\nprint(read_meter(building='{building}'))\n</code>"
        c = 18400 if planted else METERS["C"]
        return ("Thought: sum the table.\n<code>\n"
                f"usage = {{'A': {METERS['A']}, 'B': {METERS['B']}, 'C': {c}}}\n"
                "final_answer(f'KWH: {sum(usage.values())}')\n</code>")

    return smolagents.CodeAgent(tools=[read_meter], model=ScriptedModel(policy), name="energy", max_steps=6)


def _case() -> FaultCase:
    return FaultCase(name="filled-gap", framework="smolagents", fault="fabricated_data", task=TASK,
                     factory=lambda: _team(True), fixed_factory=lambda: _team(False), verify=_verify,
                     rule=first_step("tool_call", contains="usage ="), rule_text="the code that sums the table")


def _diagnosed(run):
    return asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))


def test_a_figure_nobody_gave_in_a_table_of_results_is_made_up_data():
    case = _case()
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    code = case.true_step(failing)
    d = _diagnosed(failing)
    [found] = [f for f in d.findings if f.family == "made_up_data"]
    assert found.index == code == d.decisive_step_index
    roles = [(e.role, e.value) for e in found.evidence]
    assert roles[-1] == ("changed", "18400")
    assert {v for r, v in roles if r == "source"} == {"21430", "17980"}
    assert all(failing.step_at(e.index).kind in ("tool_response", "code_execution")
               for e in found.evidence if e.role == "source")
    assert not [f for f in d.findings if f.family == "unrecovered_error"]  # the timeout was worked around

    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert [f for f in _diagnosed(twin.model_copy(update={"outcome": failing.outcome})).findings
            if f.family == "made_up_data"] == []


def _step(i: int, kind: str, content: str, agent: str = "a") -> Step:
    return Step(step_id=f"s{i}", run_id="r", index=i, kind=kind, agent=agent, content=content)


def _fill(*earlier: Step, written: str):
    stated = _Stated()
    for s in earlier:
        stated.add(s)
    return sourceless_fill(_step(len(earlier), "tool_call", written), stated)


def test_only_a_single_sourceless_figure_beside_results_is_a_gap():
    results = (_step(0, "tool_response", "A: 21,430"), _step(1, "tool_response", "B: 17980"))
    assert _fill(*results, written="x = [21430, 17980, 18400]") == (18400.0, [(21430.0, 0), (17980.0, 1)])
    # the task, or another agent, gives a figure; the agent's own reply does not
    assert _fill(_step(0, "task", "C read 18400 by hand"), *results[1:], _step(2, "tool_response", "21430"),
                 written="[21430, 17980, 18400]") is None
    assert _fill(*results, _step(2, "message", "C: 18400", agent="b"), written="[21430, 17980, 18400]") is None
    assert _fill(*results, _step(2, "llm_response", "C: 18400"), written="[21430, 17980, 18400]") is not None
    # arithmetic of the siblings, two new figures, fewer than two results or three items: no gap
    assert _fill(*results, written="[21430, 17980, 39410]") is None
    assert _fill(*results, written="[21430, 17980, 18400, 555]") is None
    assert _fill(results[0], written="[21430, 18400, 555]") is None
    assert _fill(*results, written="[21430, 18400]") is None
