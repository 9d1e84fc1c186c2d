"""An omission inside a list (issue 32 item 1): code that retypes a tool's list and leaves an element out.

A real smolagents CodeAgent, driven by a scripted model, reads a tool's list and retypes it by hand without one
item; its fixed twin retypes it whole. The failing run has an ``omission`` finding at the code step, with the
source list, the written list and the missing item as evidence, and repair's correction (put the item back) flips
the outcome by replay; the twin, diagnosed with the failing Outcome substituted, has none. A task that asks for a
subset is no evidence.
"""

from __future__ import annotations

import asyncio
import re

import pytest

pytest.importorskip("smolagents", reason="smolagents is not installed (pip install causaltrace[smolagents])")

from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.findings.retyped_lists import list_literals
from causaltrace.schema import Outcome, Verdict
from causaltrace.testing.faults.cases import FaultCase, first_step
from causaltrace.testing.faults.runner import record

TASK = "Read the sensor readings and report their sum as 'SUM: <n>'."
SUBSET_TASK = "Read the sensor readings and report the sum of those above 10 as 'SUM: <n>'."


def _verify(outcome: Outcome) -> Verdict:
    ok = re.search(r"SUM:\s*56\b", outcome.final_answer or "") is not None
    return Verdict(passed=ok, reason="" if ok else "the final answer reports no SUM: 56")


def _team(planted: bool):
    import smolagents

    from causaltrace.testing.smolagents import ScriptedModel

    @smolagents.tool
    def get_readings() -> str:
        """The sensor's readings, as a list.
        """
        return "[12, 15, 9, 20]"

    def policy(request) -> str:
        if request.is_planning:
            return "1. Read.\n2. Sum.\n<end_plan>"
        if not request.observations:
            return "Thought: read them.\n<code>\nprint(get_readings())\n</code>"
        written = "[12, 15, 20]" if planted else "[12, 15, 9, 20]"
        return f"Thought: add them up.\n<code>\nvalues = {written}\nfinal_answer(f'SUM: {{sum(values)}}')\n</code>"

    return smolagents.CodeAgent(tools=[get_readings], model=ScriptedModel(policy), name="reader", max_steps=4)


def _case(task: str = TASK) -> FaultCase:
    return FaultCase(name="retyped", framework="smolagents", fault="premature_termination", task=task,
                     factory=lambda: _team(True), fixed_factory=lambda: _team(False), verify=_verify,
                     rule=first_step("tool_call", contains="values ="), rule_text="the code that retypes the list")


def _omissions(run):
    d = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))
    return d, [f for f in d.findings if f.family == "omission"]


def test_a_list_retyped_without_an_item_is_an_omission_that_repair_corrects():
    case = _case()
    failing = asyncio.run(record(case))
    assert failing.outcome.status == "failure"
    code = case.true_step(failing)
    d, found = _omissions(failing)
    assert [f.index for f in found] == [code] and d.decisive_step_index == code
    roles = {e.role: e.value for e in found[0].evidence}
    assert roles == {"source": "[12, 15, 9, 20]", "changed": "[12, 15, 20]", "omitted_item": "9"}

    from causaltrace.replay.executor import default_sandbox
    from causaltrace.replay.repair import repair

    step_id = failing.step_at(code).step_id
    result = asyncio.run(repair(failing, case.factory, _verify, candidates=[step_id], k=0, diagnosis=d,
                                sandbox=default_sandbox()))
    assert result.repaired and (result.decisive.index, result.decisive.basis) == (code, "correction")

    twin = asyncio.run(record(case, twin=True))
    assert twin.outcome.status == "success"
    assert _omissions(twin.model_copy(update={"outcome": failing.outcome}))[1] == []


def test_a_task_that_asks_for_a_subset_is_no_evidence():
    run = asyncio.run(record(_case(SUBSET_TASK)))
    assert _omissions(run)[1] == []


def test_list_literals_reads_flat_lists_of_numbers_or_strings_only():
    assert list_literals("x = [1, 2.5, -3]; y = ['a', \"b\"]") == [("[1, 2.5, -3]", ["1", "2.5", "-3"]),
                                                                  ("['a', \"b\"]", ["a", "b"])]
    assert list_literals("f([a, b]) [1] [x + 1, 2]") == []  # names, one item, an expression
    assert [items for _, items in list_literals("[[1, 2], [3, 4]]")] == [["1", "2"], ["3", "4"]]  # a table's rows
