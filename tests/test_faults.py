"""The fault-injection suite (issue 7 "Proof"): its structural rules, checked on the RECORDED runs (never on the
cases' metadata), and the suite's offline targets (localise and repair >= 90%, no live call before an
intervention), plus the ``causaltrace bench faults`` command and its JSON keys."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections import Counter

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from causaltrace.cli import main
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.schema import Run
from causaltrace.testing.faults import FAULT_TYPES, all_cases, run_suite
from causaltrace.testing.faults import runner as faults_runner

CASE_KEYS = {"name", "framework", "true_step", "found_step", "repaired", "replays", "live_calls_before_intervention"}
REPORT_KEYS = {"n", "localized_rate", "repaired_rate", "mean_replays", "cases"}


@pytest.fixture(scope="module")
def module_home(tmp_path_factory):
    """One store for the module-scoped recordings (the per-test home of conftest.py is function-scoped)."""
    previous = os.environ.get("CAUSALTRACE_HOME")
    os.environ["CAUSALTRACE_HOME"] = str(tmp_path_factory.mktemp("faults-home"))
    model = os.environ.pop("CAUSALTRACE_MODEL", None)
    faults_runner._INSTRUMENTED = False
    yield
    from causaltrace.instrumentation.autogen import uninstrument_autogen
    from causaltrace.instrumentation.smolagents import uninstrument_smolagents

    uninstrument_smolagents()
    uninstrument_autogen()
    reset_tracing()
    faults_runner._INSTRUMENTED = False
    if previous is None:
        os.environ.pop("CAUSALTRACE_HOME", None)
    else:
        os.environ["CAUSALTRACE_HOME"] = previous
    if model is not None:
        os.environ["CAUSALTRACE_MODEL"] = model


@pytest.fixture(scope="module")
def recorded(module_home):
    """Every case recorded twice: with the planted error and without it."""
    out = []
    for case in all_cases():
        planted = asyncio.run(faults_runner.record(case))
        fixed = asyncio.run(faults_runner.record(dataclasses.replace(case, factory=case.fixed_factory)))
        out.append((case, planted, fixed))
    return out


@pytest.fixture(scope="module")
def report(module_home):
    return run_suite()


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


def test_the_case_set_has_the_required_counts():
    cases = all_cases()
    assert len(cases) >= 20
    assert len({c.name for c in cases}) == len(cases)
    assert {c.framework for c in cases} == {"smolagents", "autogen"}
    by_type = Counter(c.fault for c in cases)
    assert set(by_type) == set(FAULT_TYPES) and min(by_type.values()) >= 4, by_type


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


def test_the_suite_localizes_and_repairs_offline(report):
    assert set(report) == REPORT_KEYS
    assert report["n"] == len(report["cases"]) >= 20
    for row in report["cases"]:
        assert set(row) == CASE_KEYS
        assert row["live_calls_before_intervention"] == 0, row
        assert isinstance(row["true_step"], int)
    assert report["localized_rate"] >= 90.0, report
    assert report["repaired_rate"] >= 90.0, report
    localized = sum(1 for r in report["cases"] if r["found_step"] == r["true_step"])
    assert report["localized_rate"] == round(100 * localized / report["n"], 2)
    assert report["mean_replays"] == round(sum(r["replays"] for r in report["cases"]) / report["n"], 2)


def test_bench_faults_cli_writes_the_json(tmp_path, capsys):
    out = tmp_path / "faults.json"
    code = main(["bench", "faults", "--case", "smol-shop-quantity,ag-shop-quantity", "--json", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert "smol-shop-quantity" in captured.out and "localized" in captured.out
    assert "[2/2]" in captured.err
    data = json.loads(out.read_text())
    assert set(data) == REPORT_KEYS and data["n"] == 2
    assert [set(r) for r in data["cases"]] == [CASE_KEYS, CASE_KEYS]
    assert data["localized_rate"] == 100.0 and data["repaired_rate"] == 100.0
    assert main(["bench", "faults", "--case", "nope"]) == 2
    assert "no fault case named nope" in capsys.readouterr().err
