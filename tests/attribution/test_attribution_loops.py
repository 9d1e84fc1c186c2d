"""Loops that are loops (issue 20 item 3), on LIVE runs of real framework classes driven by reactive scripted models
(the fault suite's teams): a repetition counts only when the same agent repeats the same action with the same
arguments and gets no new information. Each false positive the issue reports is a regression test here, next to the
true loops that must still be found."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.stages.loops import detect_loops
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults import runner as faults_runner

NAMES = ("ag-speaker-oslo", "ag-selector-choice", "smol-weather-average", "smol-plan-pounds", "ag-swarm-handoff",
         "smol-unit-two", "ag-unit-two", "smol-review-lamps", "smol-progress-sales", "ag-progress-sales",
         "smol-job-timeout", "ag-job-timeout", "smol-newton-bound")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cases = {c.name: c for c in all_cases() if c.name in NAMES}
    cases["per-account"] = _per_account_case()
    with zoo_home(tmp_path_factory.mktemp("loops-home")):
        yield {name: asyncio.run(faults_runner.record(case)) for name, case in cases.items()}


def _per_account_case():
    """The zoo's ignored-instruction team on three accounts of its own (the supervisor instructs the bookkeeper once
    per account; one cancelled amount equals another account's sum)."""
    from causaltrace.testing.faults.cases import first_step
    from causaltrace.testing.faults.cases_autogen import reports
    from causaltrace.testing.faults.cases_zoo import _case
    from causaltrace.testing.faults.zoo_autogen import BUILDERS

    accounts = (("C1", ((40, "paid"), (20, "paid"))), ("C2", ((25, "paid"), (60, "cancelled"), (35, "paid"))),
                ("C3", ((60, "paid"), (30, "cancelled"))))
    return _case("autogen", BUILDERS, "per-account", "ignored", "ignored_instruction",
                 "Report the total of accounts C1, C2 and C3, excluding cancelled orders, as 'TOTAL: <dollars>'.",
                 reports("TOTAL", "180"), first_step("tool_call", agent="bookkeeper", tool="add", nth=1), "",
                 accounts=accounts, at=1)


def reasons(run) -> list[str]:
    diagnosis = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",)))
    return [r for c in diagnosis.candidates for r in c.reasons]


def test_repeated_speaker_selection_is_turn_taking_not_a_loop(runs):
    # the selector picks the researcher twice in a row (allow_repeated_speaker=True), then the guesser
    run = runs["ag-speaker-oslo"]
    picks = [s.outputs.get("selected") for s in run.steps if s.kind == "speaker_selection"]
    assert picks[:2] == ["researcher", "researcher"]
    assert detect_loops(run) == []
    assert not [r for r in reasons(run) if "re-issued" in r or "loop" in r]
    assert detect_loops(runs["ag-selector-choice"]) == []


def test_one_call_per_item_with_different_arguments_is_not_a_loop(runs):
    # the manager asks weather_agent once per city (Paris, Rome, Oslo); the manager delegates one conversion per item
    run = runs["smol-weather-average"]
    calls = [s for s in run.steps if s.kind == "tool_call" and s.agent == "manager"
             and "weather_agent(" in str(s.arguments)]
    assert len(calls) == 3
    assert detect_loops(run) == []
    assert not [r for r in reasons(run) if "loop" in r]
    assert detect_loops(runs["smol-plan-pounds"]) == []


def test_a_message_and_the_final_answer_that_returns_it_are_not_a_loop(runs):
    run = runs["ag-swarm-handoff"]
    answer = next(s for s in run.steps if s.kind == "final_answer")
    message = run.step_at(answer.index - 1)
    assert message.kind == "message" and str(answer.content) in str(message.content)
    assert detect_loops(run) == []


def test_a_retry_that_gets_the_result_is_not_a_loop(runs):
    # the flaky tool fails once and the identical retry succeeds: new information, so no loop
    for name in ("smol-unit-two", "ag-unit-two"):
        assert detect_loops(runs[name]) == [], name


def test_a_reviewer_asked_again_after_a_change_is_not_a_loop(runs):
    run = runs["smol-review-lamps"]
    asks = [s for s in run.steps if s.kind == "tool_call" and s.tool_name == "reviewer"]
    assert len(asks) == 2 and asks[0].arguments != asks[1].arguments
    assert detect_loops(run) == []


def test_the_same_call_repeated_with_progress_is_not_a_loop(runs):
    for name in ("smol-progress-sales", "ag-progress-sales"):
        polls = [s for s in runs[name].steps if s.kind == "tool_call" and s.tool_name == "poll_job"]
        assert len(polls) >= 3 and len({str(s.arguments) for s in polls}) == 1, name
        assert detect_loops(runs[name]) == [], name


def test_true_loops_without_progress_are_still_found(runs):
    for name in ("smol-job-timeout", "ag-job-timeout"):
        run = runs[name]
        first = next(s.index for s in run.steps if s.kind == "tool_call" and s.tool_name == "wait_for_job")
        loops = [lp for lp in detect_loops(run) if lp.kind == "action"]
        assert loops and loops[0].start == first and len(loops[0].members) >= 2, (name, loops)
    run = runs["smol-newton-bound"]
    code = [s.index for s in run.steps if s.kind == "tool_call" and "while" in str(s.arguments)]
    loops = detect_loops(run)
    assert loops and loops[0].start == code[0], loops


def test_a_transient_tool_failure_is_no_ones_decisive_error(runs):
    # the flaky tool fails once and the UNCHANGED retry gets the result: the failing call is not the fault
    from causaltrace.attribution.stages.dependencies import build_dependency_graph
    from causaltrace.attribution.stages.errors import detect_error_signals

    for name in ("smol-unit-two", "ag-unit-two"):
        run = runs[name]
        signals = detect_error_signals(run, build_dependency_graph(run))
        assert signals and all(s.transient and s.recovered for s in signals), (name, signals)
        failed_call = signals[0].introduced_by
        d = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False))
        assert d.decisive_step_index not in (failed_call, signals[0].index), name


def test_the_same_instruction_for_another_account_is_not_a_loop(runs):
    # "sum the order amounts of account C2 …", then "… of account C3 …": one instruction per item, not a repeat
    run = runs["per-account"]
    asks = [s for s in run.steps if s.kind == "message" and s.agent == "supervisor" and "account" in s.content]
    assert len(asks) == 3
    assert detect_loops(run) == []
    # the decisive step is the bookkeeper's add that kept C2's cancelled 60 (60 is also C1's and C3's sum)
    diagnosis = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",)))
    assert diagnosis.decisive_step_index == _per_account_case().true_step(run)
    assert any("excluded" in r for r in diagnosis.candidates[0].reasons)
