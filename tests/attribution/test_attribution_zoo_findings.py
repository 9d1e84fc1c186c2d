"""The whole-run findings on LIVE runs (issue 20 item 4): real smolagents and AutoGen teams driven by the fault
suite's reactive scripted models, recorded with causaltrace and ranked by ``graph`` with no model. Only cases of
the zoo's TUNING half (``held_out=False``) are used here: the held-out half stays out of every test and tuning."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

import causaltrace
from _zoo import zoo_home
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults import runner as faults_runner


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The tuning-half cases used below, each recorded once with its planted error."""
    names = {"smol-derail-keyerror", "ag-derail-refund", "smol-fabricated-sales", "ag-fabricated-voyage"}
    cases = {c.name: c for c in all_cases() if c.name in names}
    assert set(cases) == names and not any(c.held_out for c in cases.values())
    with zoo_home(tmp_path_factory.mktemp("zoo-findings-home")):
        yield {name: (case, asyncio.run(faults_runner.record(case))) for name, case in cases.items()}


def _diagnosis(recorded, name: str):
    case, run = recorded[name]
    assert run.outcome.status == "failure"
    return case, run, causaltrace.diagnose_sync(run, "graph", store=False)


def test_a_plan_that_follows_the_tasks_side_remark_is_the_decisive_step(recorded):
    # smolagents' planning step debugs the KeyError the task mentions in passing, not the count it asks for: it
    # holds half of the task's words but almost none of its request
    case, run, d = _diagnosis(recorded, "smol-derail-keyerror")
    assert d.decisive_step_index == case.rule(run).index
    assert run.step_at(d.decisive_step_index).kind == "planning"
    assert d.category == "FM-2.3" and "what the task asks for" in " ".join(d.candidates[0].reasons)


def test_the_tasks_context_does_not_route_the_first_speaker(recorded):
    # the task says "support has answered that ticket"; choosing the planner first is not a target substitution
    case, run, d = _diagnosis(recorded, "ag-derail-refund")
    assert d.decisive_step_index == case.rule(run).index
    selections = [s.index for s in run.steps if s.kind == "speaker_selection"]
    reasons = {c.index: " ".join(c.reasons) for c in d.candidates}
    assert "uses target" not in reasons.get(selections[0], "")


def test_a_thought_that_simulates_the_data_is_charged_to_its_code(recorded):
    # the Thought says "I'll simulate West's Q3 revenue"; the code of the same model reply builds the numbers, and
    # the get_sales failures before it are worked around, not the decisive error
    case, run, d = _diagnosis(recorded, "smol-fabricated-sales")
    top = run.step_at(d.decisive_step_index)
    assert d.decisive_step_index == case.rule(run).index and top.kind == "tool_call"
    assert "makes up its data" in " ".join(d.candidates[0].reasons)
    assert d.artifacts["fabrication"]["fabrication"]["index"] == top.index


def test_a_figure_recalled_from_training_data_after_a_timeout_is_the_decisive_step(recorded):
    # the navigator's routing lookup times out; "From my training data, that leg is approximately 110 nautical
    # miles" stands in for it, and the calculator and the reviewer carry the figure faithfully
    case, run, d = _diagnosis(recorded, "ag-fabricated-voyage")
    assert d.decisive_step_index == case.rule(run).index
    assert "from my training data" in d.artifacts["fabrication"]["fabrication"]["markers"]
