"""Issue 32's fresh failing teams and their fixed twins (:mod:`causaltrace.testing.faults.cases_fresh32`): the
diagnosis's development data. Every case is recorded live with the scripted models (no replay): the failing team
fails for its verifier's reason and its planted step is found by the case's rule; its twin (the same team with the
error corrected) succeeds. Where they sit in the suite: after the held-out rule's cases and before the blind ones,
all in the tuning half."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults import runner as faults_runner
from causaltrace.testing.faults.cases_fresh32 import fresh32_cases

CASES = fresh32_cases()
NAMES = [c.name for c in CASES]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Every fresh case recorded twice: with its planted error and as its fixed twin."""
    out = {}
    with zoo_home(tmp_path_factory.mktemp("fresh32-home")):
        for case in CASES:
            out[case.name] = (case, asyncio.run(faults_runner.record(case)),
                              asyncio.run(faults_runner.record(case, twin=True)))
    return out


def test_the_fresh_cases_are_many_in_both_frameworks_before_the_blind_ones_in_the_tuning_half():
    assert len(CASES) >= 14 and len(set(NAMES)) == len(NAMES)
    assert all(n.startswith("fresh32-") for n in NAMES)
    per_framework = {f: sum(c.framework == f for c in CASES) for f in ("smolagents", "autogen")}
    assert min(per_framework.values()) >= 7, per_framework
    everything = [c.name for c in all_cases()]
    first = everything.index(NAMES[0])  # after the held-out rule's cases (no mark moves), before blind32's (last)
    assert everything[first:first + len(NAMES)] == NAMES
    assert all(n.startswith("blind32-") for n in everything[first + len(NAMES):])
    assert not any(n.startswith("blind32-") for n in everything[:first])
    assert all(c.held_out is False for c in all_cases() if c.name in NAMES)
    assert [c.name for c in all_cases("autogen") if c.name.startswith("fresh32-")] == \
        [c.name for c in CASES if c.framework == "autogen"]
    assert all(c.fixed_factory is not None for c in CASES)


@pytest.mark.parametrize("name", NAMES)
def test_the_failing_team_fails_for_its_verifiers_reason_at_its_planted_step(recorded, name):
    case, failing, _ = recorded[name]
    assert failing.outcome.status == "failure", failing.outcome
    verdict = case.verify(failing.outcome)
    assert not verdict.passed and verdict.reason and failing.outcome.reason == verdict.reason
    planted = case.rule(failing)  # the planted step is in the recorded run
    assert planted.index == case.true_step(failing) and 0 < planted.index < len(failing.steps) - 1


@pytest.mark.parametrize("name", NAMES)
def test_the_fixed_twin_succeeds(recorded, name):
    case, _, twin = recorded[name]
    assert twin.outcome.status == "success", twin.outcome
    assert case.verify(twin.outcome).passed


@pytest.mark.parametrize("name", NAMES)
def test_each_run_recovers_from_a_transient_tool_failure(recorded, name):
    """The suite's distractor: a flaky tool fails once and the call is retried, in the failing run and its twin."""
    _, failing, twin = recorded[name]
    for run in (failing, twin):
        failed = [s for s in run.steps if s.kind == "tool_response" and s.status == "error"
                  and "temporarily unavailable" in (s.content or "")]
        assert failed, name
        later = [s for s in run.steps if s.kind == "tool_response" and s.status != "error"
                 and s.tool_name == failed[0].tool_name and s.index > failed[0].index]
        assert later, name
