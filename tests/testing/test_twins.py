"""The twin property on live runs (issue 32 item 3; :mod:`causaltrace.testing.faults.twins`): real AutoGen and
smolagents teams of the fault suite, each recorded with its planted error and as its fixed twin. On the twin,
diagnosed with the failing run's outcome substituted, nothing the run shows is wrong: no finding at the top, and the
answer says "uncertain"; on the failing run the planted step carries a finding. The detectors never read the
outcome: the twin's findings are the same under its own outcome and the failing one.

A fixed subset of cases (one per family of planted error the detectors cover, both frameworks) keeps CI short; the
whole suite is ``causaltrace bench faults --no-repair --twins``.
"""

from __future__ import annotations

import asyncio

import pytest

from _zoo import zoo_home
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults import runner as faults_runner
from causaltrace.testing.faults.twins import auroc, score_twin

#: a wrong tool argument, a restated fact, a wrong unit, a boundary bug, a premature answer, a wrong speaker, a
#: task derailment, an instruction loop (both frameworks)
SUBSET = ("smol-shop-quantity", "ag-fx-rate", "ag-unit-two", "smol-readings-threshold", "smol-premature-three",
          "ag-speaker-oslo", "ag-derail-refund", "smol-progress-sales")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    pytest.importorskip("smolagents", reason="the smolagents extra is not installed")
    pytest.importorskip("autogen_agentchat", reason="the autogen extra is not installed")
    cases = {c.name: c for c in all_cases()}
    missing = [n for n in SUBSET if n not in cases]
    assert not missing, f"the subset names cases the suite no longer has: {missing}"
    out = {}
    with zoo_home(tmp_path_factory.mktemp("twins-home")):
        for name in SUBSET:
            case = cases[name]
            failing = asyncio.run(faults_runner.record(case))
            twin = asyncio.run(faults_runner.record(case, twin=True))
            out[name] = (case, failing, twin)
    return out


@pytest.mark.parametrize("name", SUBSET)
def test_the_twin_has_no_finding_at_the_top_and_the_failing_run_does(recorded, name):
    case, failing, twin = recorded[name]
    assert failing.outcome.status == "failure" and twin.outcome.status == "success"
    scored = asyncio.run(score_twin(case, failing, twin))
    assert not scored["finding_at_top"] and scored["uncertain"], scored
    from causaltrace.attribution.engine import diagnose

    d = asyncio.run(diagnose(failing, "graph", None, ablate=("replay_verify",), store=False))
    assert d.basis == "finding" and d.decisive_step_index == case.true_step(failing)
    assert scored["confidence"] < d.confidence  # the confidence tells the two apart


@pytest.mark.parametrize("name", SUBSET[:3])
def test_the_detectors_give_the_same_findings_under_either_outcome(recorded, name):
    from causaltrace.attribution.engine import diagnose

    _, failing, twin = recorded[name]
    for run in (failing, twin):
        other = run.model_copy(update={"outcome": (twin if run is failing else failing).outcome})
        a = asyncio.run(diagnose(run, "graph", None, ablate=("replay_verify",), store=False, force=True))
        b = asyncio.run(diagnose(other, "graph", None, ablate=("replay_verify",), store=False, force=True))
        assert a.findings == b.findings


def test_auroc_counts_pairs_and_ties():
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auroc([0.1], [0.9]) == 0.0
    assert auroc([0.5, 0.9], [0.5]) == 0.75
    assert auroc([], [0.1]) is None


def test_the_blind_teams_are_their_own_split_in_the_report():
    from causaltrace.testing.faults.runner import CaseResult, summarize

    rows = [CaseResult(name=n, framework="autogen", fault="wrong_fact", true_step=3, found_step=None, repaired=False,
                       replays=0, live_calls_before_intervention=0, held_out=held,
                       localization={"graph": {"top1": hit, "top3": hit, "near": hit, "uncertain": False}})
            for n, held, hit in (("ag-a", True, True), ("ag-b", False, True), ("blind32-x", True, False))]
    report = summarize(rows, repair_run=False)
    assert report["localization"]["held_out"]["n"] == 1 and report["localization"]["held_out"]["graph"]["top1"] == 100
    assert report["localization"]["blind"]["n"] == 1 and report["localization"]["blind"]["graph"]["top1"] == 0
