"""The fault-injection suite and its failure zoo (issue 7 "Proof", issue 20 item 2): its structural rules, checked on
the RECORDED runs of a small fixed subset (one case of each type; never on the cases' metadata), the held-out rule,
the localisation scoring, and the ``causaltrace bench faults`` command and its JSON keys. Rates are the
benchmark's (``causaltrace bench faults``), never asserted here."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections import Counter

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.cli import main
from causaltrace.schema import Run
from causaltrace.testing.faults import FAULT_TYPES, all_cases, run_suite
from causaltrace.testing.faults import runner as faults_runner
from causaltrace.testing.faults.scoring import METHODS, aggregate, random_expectation

CASE_KEYS = {"name", "framework", "true_step", "found_step", "repaired", "replays", "live_calls_before_intervention"}
REPORT_KEYS = {"n", "localized_rate", "repaired_rate", "mean_replays", "cases"}
ZOO_REPORT_KEYS = {"localization", "by_type", "by_framework", "replays", "seconds_per_case", "repair_run_ratio"}
#: smolagents has no speaker selection (a manager's choice of delegate is code: ``wrong_handoff``)
AUTOGEN_ONLY = {"wrong_speaker"}


def subset() -> list:
    """The fixed structural subset: the first case of each (type, framework), in suite order, and the zoo's
    speaker-selection team."""
    seen, out = set(), []
    for case in all_cases():
        if (case.fault, case.framework) not in seen or case.name == "ag-speaker-oslo":
            seen.add((case.fault, case.framework))
            out.append(case)
    return out


@pytest.fixture(scope="module")
def module_home(tmp_path_factory):
    """One store for the module-scoped recordings (the per-test home of conftest.py is function-scoped)."""
    with zoo_home(tmp_path_factory.mktemp("faults-home")):
        yield


@pytest.fixture(scope="module")
def recorded(module_home):
    """Every case of the fixed subset recorded twice: with the planted error and without it."""
    out = []
    for case in subset():
        planted = asyncio.run(faults_runner.record(case))
        fixed = asyncio.run(faults_runner.record(dataclasses.replace(case, factory=case.fixed_factory)))
        out.append((case, planted, fixed))
    return out


@pytest.fixture(scope="module")
def report(module_home):
    names = ("smol-shop-quantity", "ag-speaker-oslo", "smol-premature-four")
    return run_suite([c for c in all_cases() if c.name in names])


def recovered_tool_errors(run: Run) -> list[tuple[int, int]]:
    """(failed tool_response, later successful tool_response of the same tool by the same agent) index pairs."""
    responses = [s for s in run.steps if s.kind == "tool_response" and s.tool_name]
    pairs = []
    for failed in responses:
        if failed.status != "error":
            continue
        later = [s for s in responses if s.index > failed.index and s.tool_name == failed.tool_name
                 and s.agent == failed.agent and s.status != "error"]
        if later:
            pairs.append((failed.index, later[0].index))
    return pairs


def _zoo() -> list:
    """The suite without issue 32's blind teams (``blind32-*``: all held out, scored as their own split; their
    counts are pinned in tests/testing/test_blind32.py) and its fresh development teams (``fresh32-*``: all in the
    tuning half, set by each case outside the alternating rule; checked in tests/attribution/test_fresh32_cases.py)."""
    return [c for c in all_cases() if not c.name.startswith(("blind32-", "fresh32-"))]


def test_the_case_set_has_the_required_counts():
    cases = _zoo()
    assert len(cases) >= 60
    assert len({c.name for c in cases}) == len(cases)
    assert {c.framework for c in cases} == {"smolagents", "autogen"}
    by_type = Counter(c.fault for c in cases)
    zoo_types = [t for t in FAULT_TYPES if t not in ("wrong_entity", "stale_value")]  # the blind teams' own
    assert set(by_type) == set(zoo_types) and len(zoo_types) >= 12 and min(by_type.values()) >= 3, by_type
    for fault in zoo_types:
        frameworks = {c.framework for c in cases if c.fault == fault}
        assert frameworks == ({"autogen"} if fault in AUTOGEN_ONLY else {"smolagents", "autogen"}), fault


def test_every_second_case_of_each_type_is_held_out():
    cases = _zoo()
    for fault in FAULT_TYPES:
        marks = [c.held_out for c in cases if c.fault == fault]
        assert marks == [i % 2 == 1 for i in range(len(marks))], fault
    # a case keeps its mark whatever is asked for (the rule runs over the whole suite)
    marks = {c.name: c.held_out for c in all_cases()}
    assert {c.name: c.held_out for c in all_cases("autogen")} == {c.name: marks[c.name] for c in all_cases()
                                                                  if c.framework == "autogen"}


def test_the_cases_written_blind_to_the_attribution_come_last():
    """They were added after the held-out marks were fixed: listed last (smolagents, then AutoGen), they move no
    earlier case's mark."""
    from causaltrace.testing.faults.cases_zoo import zoo_pick_cases
    from causaltrace.testing.faults.cases_zoo_blind import zoo_blind_autogen_cases, zoo_blind_smolagents_cases

    blind = [c.name for c in zoo_blind_smolagents_cases() + zoo_blind_autogen_cases()]
    later = [c.name for c in zoo_pick_cases()]  # issue 32's fifth session: after them, for the same reason
    assert len(blind) == 8 and [c.name for c in _zoo()][-len(blind) - len(later):] == blind + later
    names = [c.name for c in all_cases()]  # issue 32's fresh teams come after them, then its blind teams
    assert all(n.startswith(("blind32-", "fresh32-")) for n in names[names.index(later[-1]) + 1:])


def test_the_random_expectation_and_the_aggregates():
    assert random_expectation([2, 5, 6, 9], 5) == {"top1": 0.25, "top3": 0.75, "near": 0.5}
    assert random_expectation([2, 5], 4) == {"top1": 0.0, "top3": 0.0, "near": 0.5}
    assert random_expectation([], 1)["top1"] == 0.0
    rows = [{"localization": {"graph": {"top1": True, "top3": True, "near": True}, "random": {"top1": 0.5}}},
            {"localization": {"graph": {"top1": False, "top3": True, "near": False}}},
            {"localization": None}]
    agg = aggregate(rows)
    # rows without "uncertain" (stored before issue 32) count as certain; the row with no localisation as uncertain
    assert agg["n"] == 3 and agg["graph"] == {"top1": 33.33, "top3": 66.67, "near": 33.33, "uncertain": 33.33,
                                              "certain_top1": 50.0}
    assert agg["random"]["top1"] == 16.67 and agg["most-active-agent"]["top3"] == 0.0


def test_each_recorded_run_fails_only_because_of_its_planted_error(recorded):
    for case, planted, fixed in recorded:
        assert planted.outcome.status == "failure", (case.name, planted.outcome)
        assert fixed.outcome.status == "success", (case.name, fixed.outcome)
        assert planted.recording is not None and planted.framework == case.framework


def test_the_true_step_is_found_by_the_rule_and_is_a_candidate(recorded):
    for case, planted, _ in recorded:
        index = case.true_step(planted)
        assert planted.step_at(index).step_id in {s.step_id for s in planted.candidate_steps()}, case.name


def test_every_recorded_run_holds_a_recovered_tool_error(recorded):
    for case, planted, _ in recorded:
        assert recovered_tool_errors(planted), f"{case.name}: no tool error followed by a successful retry"


def test_in_a_third_of_the_cases_an_error_comes_before_the_decisive_step(recorded):
    earlier = 0
    for case, planted, _ in recorded:
        true = case.true_step(planted)
        errors = [s.index for s in planted.steps if s.status == "error"]
        assert errors, case.name
        if errors[0] < true:
            earlier += 1  # the decisive step is NOT the first step with ERROR status
    assert earlier * 3 >= len(recorded), f"only {earlier} of {len(recorded)} cases"


def test_the_zoo_distractors_are_in_the_recorded_runs(recorded):
    """The zoo's distractors are real: one tool called with different arguments, a call repeated with progress, a
    reviewer consulted twice, a speaker selected twice in a row."""
    runs = {case.name: planted for case, planted, _ in recorded}
    calls = [s.arguments for s in runs["smol-plan-pounds"].steps if s.kind == "tool_call"
             and s.tool_name == "converter"]
    assert len(calls) == 2 and calls[0] != calls[1]
    polls = [s for s in runs["smol-progress-sales"].steps if s.kind == "tool_call" and s.tool_name == "poll_job"]
    answers = [str(s.content) for s in runs["smol-progress-sales"].steps if s.kind == "tool_response"
               and s.tool_name == "poll_job"]
    assert len(polls) >= 3 and len({str(s.arguments) for s in polls}) == 1
    assert len(set(answers)) == len(answers) == len(polls)  # the same call, new information every time
    verdicts = [s for s in runs["ag-review-lamps"].steps if s.kind == "message" and s.agent == "reviewer"]
    assert len(verdicts) == 2
    picks = [str(s.content) for s in runs["ag-speaker-oslo"].steps if s.kind == "speaker_selection"]
    assert picks[:2] == ["researcher", "researcher"] and "guesser" in picks


def test_the_made_up_data_and_the_derailed_plan_are_what_they_claim(recorded):
    """The made-up data follows an honest retry of the same lookup tool and a second failure of it (the agent gave
    up on the tool, it was not refused an answer), and every later step carries it; the derailed opening is a plan —
    several numbered steps — that the executor follows with several different tools."""
    runs = {case.name: (case, planted) for case, planted, _ in recorded}
    for name in ("smol-fabricated-sales", "ag-fabricated-sales"):
        case, run = runs[name]
        true = case.true_step(run)
        assert any(fixed < true for _, fixed in recovered_tool_errors(run)), name  # the benign retry comes first
        lookups = [s for s in run.steps if s.tool_name == "get_sales" and s.kind == "tool_response" and s.index < true]
        assert [s.status for s in lookups].count("error") == 2 and lookups[-1].status == "error", name
        assert len({str(s.arguments) for s in run.steps if s.kind == "tool_call" and s.tool_name == "get_sales"}) == 3
    for name in ("smol-derail-keyerror", "ag-derail-keyerror"):
        case, run = runs[name]
        plan = run.step_at(case.true_step(run))
        assert len(re.findall(r"^\d+\. ", plan.content, re.M)) >= 3, name
        later = {s.tool_name for s in run.steps if s.kind == "tool_call" and s.index > plan.index}
        assert {"read_log", "describe_table"} <= later and "count_orders" not in later, name


def test_the_suite_report_has_its_keys_offline(report):
    assert REPORT_KEYS | ZOO_REPORT_KEYS <= set(report)
    assert report["n"] == len(report["cases"]) == 3
    for row in report["cases"]:
        assert CASE_KEYS <= set(row)
        assert row["live_calls_before_intervention"] == 0, row
        assert isinstance(row["true_step"], int) and row["error"] is None, row
        assert set(row["localization"]) == {*METHODS, "random"}
        graph = row["localization"]["graph"]
        assert graph["top1"] == (graph["rank"] == 1) and graph["first"] is not None
    localized = sum(1 for r in report["cases"] if r["found_step"] == r["true_step"])
    assert report["localized_rate"] == round(100 * localized / report["n"], 2)
    assert report["mean_replays"] == round(sum(r["replays"] for r in report["cases"]) / report["n"], 2)
    held = [r for r in report["cases"] if r["held_out"]]
    assert report["localization"]["held_out"]["n"] == len(held)
    assert report["localization"]["held_out"] == aggregate(held)
    assert set(report["by_type"]) == {"wrong_tool_argument", "wrong_speaker", "premature_termination"}
    assert set(report["by_framework"]) == {"smolagents", "autogen"}
    assert report["replays"]["max"] == max(r["replays"] for r in report["cases"])
    assert set(report["repair_run_ratio"]) == {"median", "max"}


def test_bench_faults_cli_writes_the_json(tmp_path, capsys):
    out = tmp_path / "faults.json"
    code = main(["bench", "faults", "--case", "smol-shop-quantity,ag-shop-quantity", "--json", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert "smol-shop-quantity" in captured.out and "localized" in captured.out
    assert "held-out localisation" in captured.out
    assert "[2/2]" in captured.err
    data = json.loads(out.read_text())
    assert REPORT_KEYS | ZOO_REPORT_KEYS <= set(data) and data["n"] == 2
    assert all(CASE_KEYS <= set(r) for r in data["cases"])
    assert main(["bench", "faults", "--case", "nope"]) == 2
    assert "no fault case named nope" in capsys.readouterr().err


def test_bench_faults_without_repair_replays_nothing(tmp_path, capsys):
    out = tmp_path / "faults.json"
    assert main(["bench", "faults", "--no-repair", "--held-out", "--case", "smol-unit-three,smol-unit-two",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["repair"] is False and [r["name"] for r in data["cases"]] == ["smol-unit-three"]
    assert data["cases"][0]["replays"] == 0 and data["cases"][0]["localization"]["graph"]["first"] is not None
