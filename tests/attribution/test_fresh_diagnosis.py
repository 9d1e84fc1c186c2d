"""What ``graph`` says on issue 32's fresh failing teams (:mod:`causaltrace.testing.faults.cases_fresh32`, the
development data the detectors of ``tests/attribution/test_fresh_shapes.py`` were fitted on), pinned so a detector
change cannot lose it unnoticed: on the cases in :data:`FOUND` the top of the diagnosis is the planted step with a
finding there, and on EVERY case's fixed twin, diagnosed with the failing run's outcome substituted
(:func:`causaltrace.testing.faults.twins.score_twin`), no finding is at the top, bar the known ones
(:data:`KNOWN_TWIN_FINDINGS`, listed, not hidden). No model, no replay."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.attribution.engine import diagnose
from causaltrace.testing.faults import runner as faults_runner
from causaltrace.testing.faults.cases_fresh32 import fresh32_cases
from causaltrace.testing.faults.twins import score_twin

CASES = {c.name: c for c in fresh32_cases()}
#: the fresh cases graph names at the top with a finding (26 of 42 at this module's commit; the others are listed in
#: the session's note with why)
FOUND = ("fresh32-smol-fx-rounding", "fresh32-smol-retyped-returns", "fresh32-smol-each-warehouse",
         "fresh32-smol-repriced", "fresh32-smol-meeting-date", "fresh32-smol-wrong-delegate",
         "fresh32-smol-currency-code", "fresh32-smol-cursor-loop", "fresh32-smol-workdays",
         "fresh32-smol-nested-managers", "fresh32-smol-case-compare", "fresh32-smol-sort-order",
         "fresh32-ag-distance-unit", "fresh32-ag-discount-sign", "fresh32-ag-order-id", "fresh32-ag-revised-rate",
         "fresh32-ag-handback", "fresh32-ag-no-tools-writer", "fresh32-ag-date-loop", "fresh32-ag-net-price",
         "fresh32-ag-assumed-rate", "fresh32-ag-boxes", "fresh32-ag-rows-rate", "fresh32-ag-society-summary",
         "fresh32-ag-structured-po", "fresh32-ag-swarm-chain")


#: fixed twins that still get a finding at the top — the 11 newest cases were written after the detectors' last change
#: and measured once, untuned (3 of their 11 twins fired: an unsupported number the twin corrected itself, an entry's
#: "5,150" read as 150, and an unchecked approval — the first two fixed since); the lead fixes a detector and moves
#: the case out
KNOWN_TWIN_FINDINGS = ("fresh32-ag-renewal-date",)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Every fresh case recorded with its planted error and as its fixed twin."""
    out = {}
    with zoo_home(tmp_path_factory.mktemp("fresh-diagnosis-home")):
        for case in CASES.values():
            out[case.name] = (asyncio.run(faults_runner.record(case)),
                              asyncio.run(faults_runner.record(case, twin=True)))
    return out


@pytest.mark.parametrize("name", FOUND)
def test_graph_names_the_planted_step_with_a_finding(recorded, name):
    failing, _ = recorded[name]
    d = asyncio.run(diagnose(failing, "graph", None, ablate=("replay_verify",), store=False))
    assert d.decisive_step_index == CASES[name].true_step(failing), [f.claim for f in d.findings]
    assert d.top_findings, "the top has no finding"


@pytest.mark.parametrize("name", sorted(set(CASES) - set(KNOWN_TWIN_FINDINGS)))
def test_no_finding_at_the_top_of_the_fixed_twin(recorded, name):
    failing, twin = recorded[name]
    score = asyncio.run(score_twin(CASES[name], failing, twin))
    assert twin.outcome.status == "success"
    assert not score["finding_at_top"], (score["first"], score["families"])


def test_the_known_twin_findings_are_still_fresh_cases():
    assert set(KNOWN_TWIN_FINDINGS) <= set(CASES) and set(FOUND) <= set(CASES)
