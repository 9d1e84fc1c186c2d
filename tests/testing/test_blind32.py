"""The twelve fault cases written blind to the attribution (:mod:`causaltrace.testing.faults.cases_blind32`), on
their RECORDED runs: the planted team fails its strict verifier and its twin passes it; the case's rule names a
candidate step of the failing run; every run holds a recovered tool error; every case is held out and comes last in
the suite."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.schema import Outcome, Run
from causaltrace.testing.faults import FAULT_TYPES, all_cases
from causaltrace.testing.faults import runner as faults_runner
from causaltrace.testing.faults.cases_blind32 import answer_marked, blind32_cases

#: every blind case, in suite order — each one held out of all tuning
NAMES = [
    "blind32-sm-crm-namesake",
    "blind32-sm-orders-cancelled",
    "blind32-sm-reorder-sku",
    "blind32-sm-trip-partial",
    "blind32-sm-invoice-cents",
    "blind32-sm-stock-stale",
    "blind32-ag-sales-transposed",
    "blind32-ag-latency-column",
    "blind32-ag-refund-speaker",
    "blind32-ag-fx-madeup-rate",
    "blind32-ag-warranty-handoff",
    "blind32-ag-margin-plan-year",
]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Every blind case recorded twice, into a module store: ``{name: (case, planted run, twin run)}``."""
    out = {}
    with zoo_home(tmp_path_factory.mktemp("blind32-home")):
        for case in blind32_cases():
            planted = asyncio.run(faults_runner.record(case))
            twin = asyncio.run(faults_runner.record(dataclasses.replace(case, factory=case.fixed_factory)))
            out[case.name] = (case, planted, twin)
    return out


def recovered_tool_errors(run: Run) -> list[tuple[int, int]]:
    """``(failed, retried)`` step indexes: a tool_response with ERROR status and a later successful response of the
    same tool in the same agent."""
    pairs = []
    for failed in run.steps:
        if failed.kind != "tool_response" or failed.status != "error":
            continue
        later = [s for s in run.steps if s.kind == "tool_response" and s.status == "ok" and s.index > failed.index
                 and s.tool_name == failed.tool_name and s.agent == failed.agent]
        if later:
            pairs.append((failed.index, later[0].index))
    return pairs


def test_the_blind_cases_are_pinned_held_out_and_come_last():
    cases = blind32_cases()
    assert [c.name for c in cases] == NAMES
    assert all(c.held_out is True for c in cases)
    suite = all_cases()
    assert [c.name for c in suite][-len(NAMES):] == NAMES
    assert all(c.held_out for c in suite if c.name in NAMES)
    by_framework = [c.name for fw in ("smolagents", "autogen") for c in all_cases(fw) if c.held_out and
                    c.name.startswith("blind32-")]
    assert sorted(by_framework) == sorted(NAMES)


def test_the_blind_cases_cover_both_frameworks_and_several_families():
    cases = blind32_cases()
    assert {c.framework for c in cases} == {"smolagents", "autogen"}
    assert all(c.fault in FAULT_TYPES and c.fixed_factory is not None for c in cases)
    assert len({c.fault for c in cases}) >= 6
    assert [c.name for c in blind32_cases("autogen")] == [n for n in NAMES if n.startswith("blind32-ag-")]


@pytest.mark.parametrize("name", NAMES)
def test_the_planted_run_fails_and_its_twin_passes(recorded, name):
    case, planted, twin = recorded[name]
    assert planted.outcome.status == "failure", planted.outcome
    assert planted.outcome.verdict is not None and not planted.outcome.verdict.passed
    assert twin.outcome.status == "success", twin.outcome
    assert planted.framework == twin.framework == case.framework


@pytest.mark.parametrize("name", NAMES)
def test_the_rule_names_a_candidate_step_of_the_failing_run(recorded, name):
    case, planted, _twin = recorded[name]
    step = case.rule(planted)
    assert planted.step_at(case.true_step(planted)).step_id == step.step_id
    assert step.step_id in {s.step_id for s in planted.candidate_steps()}


@pytest.mark.parametrize("name", NAMES)
def test_every_run_holds_a_recovered_tool_error(recorded, name):
    _case, planted, twin = recorded[name]
    assert recovered_tool_errors(planted), "no tool error followed by a successful retry in the planted run"
    assert recovered_tool_errors(twin), "no tool error followed by a successful retry in the twin"


def test_the_autogen_verifier_is_strict():
    verify = answer_marked("298.00 USD")
    assert verify(Outcome(status="unknown", final_answer="Thanks! ANSWER: 298.00 USD TERMINATE")).passed
    assert verify(Outcome(status="unknown", final_answer="Refund. ANSWER: 298.00 USD.\n")).passed
    assert not verify(Outcome(status="unknown", final_answer="ANSWER: 298.0 USD")).passed
    assert not verify(Outcome(status="unknown", final_answer="ANSWER: 298.00 USD\nANSWER: 790.00 USD")).passed
    assert not verify(Outcome(status="unknown", final_answer="the refund is 298.00 USD")).passed
