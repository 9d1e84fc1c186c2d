"""The negative set of correct runs (issue 32, "blame only what the run shows is wrong";
:mod:`causaltrace.testing.faults.clean_runs`): every clean team runs and succeeds, and on the teams listed in
:data:`NO_FINDING_AT_TOP` ``graph`` — diagnosing the run with a FAILING Outcome substituted, no model, no replay —
puts no finding at its top (the diagnosis is uncertain).

Known false findings (a finding at the top of a correct run) are listed in :data:`KNOWN_FALSE_FINDINGS` until a
detector is fixed and the team moves into :data:`NO_FINDING_AT_TOP` (``benchmarks/bench_clean_runs.py`` shows what
fires):

None today: the last two (a rate per 100 km with three operands; a request of two parts routed one part at a
time) were fixed by the lead (tests/attribution/test_clean_shapes.py).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("smolagents")
pytest.importorskip("autogen_agentchat")

from _zoo import zoo_home
from causaltrace.testing.faults.clean_runs import clean_teams, expected_reason, record_clean, score_clean

pytestmark = pytest.mark.timeout(600)

#: the clean teams on which graph puts no finding at the top (regression-tested below)
NO_FINDING_AT_TOP = ("clean-smol-pantry", "clean-smol-invoices", "clean-smol-parcels", "clean-smol-restock",
                     "clean-smol-warmest", "clean-smol-risotto", "clean-smol-accounts", "clean-smol-laptops",
                     "clean-smol-overdue", "clean-smol-welcome", "clean-smol-growth", "clean-ag-invoice", "clean-ag-refund",
                     "clean-ag-tickets", "clean-ag-gate", "clean-ag-contractor", "clean-ag-rice", "clean-ag-census",
                     "clean-ag-tax", "clean-ag-balance", "clean-smol-capacity", "clean-smol-courier",
                     "clean-smol-checked",
                     # data variants of the teams above (clean_runs' rows with builder keyword arguments)
                     "clean-smol-trip-3n", "clean-smol-restock-up", "clean-smol-growth-down",
                     "clean-smol-invoices-first", "clean-smol-capacity-none", "clean-ag-refund-bulb",
                     "clean-smol-warmest-5", "clean-smol-estimate-once", "clean-ag-export-long", "clean-ag-fare-first",
                     "clean-ag-tickets-4p", "clean-ag-gate-b14", "clean-ag-contractor-20", "clean-smol-meeting-2025",
                     "clean-smol-booking-1h", "clean-smol-trip-5n", "clean-ag-router-credit-first",
                     "clean-ag-fuel-lisbon", "clean-ag-legs-2", "clean-ag-invoice-6", "clean-smol-accounts-zero",
                     "clean-smol-pantry-7", "clean-smol-risotto-6", "clean-smol-capacity-all", "clean-ag-rice-first",
                     "clean-ag-tax-porto", "clean-ag-nested", "clean-ag-fuel-204", "clean-smol-courier-600",
                     "clean-smol-risotto-7", "clean-smol-laptops-950", "clean-smol-parcels-4", "clean-smol-overdue-leap",
                     "clean-ag-contractor-21", "clean-ag-refund-not", "clean-smol-restock-not-more",
                     "clean-ag-fare-not-whole", "clean-smol-restock-morning", "clean-smol-pantry-last-month",
                     "clean-smol-pantry-remark", "clean-smol-warmest-each", "clean-smol-trip-budget",
                     "clean-ag-gate-boarding-pass", "clean-ag-fuel-roughly", "clean-ag-contractor-approximately",
                     "clean-ag-invoice-all", "clean-ag-tickets-only", "clean-smol-estimate-3",
                     "clean-smol-invoices-1-page", "clean-ag-export-long-stall", "clean-ag-export-mixed",
                     "clean-ag-tax-rate-1", "clean-smol-courier-delivered", "clean-smol-trip-hotel-first",
                     "clean-ag-fare-convert-first", "clean-ag-refund-money-back", "clean-smol-invoices-6-pages",
                     "clean-smol-capacity-8", "clean-ag-tickets-6-pages", "clean-smol-restock-at-most",
                     "clean-smol-trip-at-most", "clean-smol-booking-before", "clean-smol-meeting-not-before",
                     "clean-ag-gate-30-minutes", "clean-smol-trip-bed", "clean-smol-courier-eta",
                     "clean-smol-meeting-sync", "clean-ag-refund-reimbursed", "clean-ag-router-wifi",
                     "clean-smol-invoices-newest", "clean-smol-laptops-highest-first", "clean-smol-capacity-out-of-space",
                     "clean-ag-tickets-unresolved", "clean-ag-rice-lowest",
                     # fixed by the lead (tests/attribution/test_clean_shapes.py): headings, computed totals, code output
                     "clean-smol-trip", "clean-smol-meeting", "clean-smol-booking", "clean-ag-legs",
                     # and: an observation's header, loops that name other agents or make progress, routes to the
                     # request's next part and hand-backs
                     "clean-ag-fare", "clean-ag-fuel", "clean-ag-router", "clean-ag-export",
                     # and a retry that recovered (the last try got what the others did not)
                     "clean-smol-estimate", "clean-ag-export-stalled",
                     "clean-smol-pantry-salt", "clean-smol-coffee", "clean-smol-pantry-5",
                     "clean-smol-accounts-excluding", "clean-ag-invoice-without-exception", "clean-ag-contractor-ignoring",
                     "clean-ag-tickets-excluding", "clean-ag-invoice-including", "clean-ag-tax-excluding",
                     "clean-ag-invoice-without-vat",
                     "clean-ag-fare-at-most",
                     "clean-ag-contractor-cap", "clean-ag-fare-lowest",
                     # and: a rate per a round quantity is an operand; the request's other part routed later
                     "clean-ag-fuel-087", "clean-ag-router-short")
#: the known false findings of the module docstring
KNOWN_FALSE_FINDINGS: tuple[str, ...] = ()


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Every clean team recorded once and scored (:func:`score_clean`), by name."""
    with zoo_home(tmp_path_factory.mktemp("clean-runs-home")):
        out = {}
        for team in clean_teams():
            run = asyncio.run(record_clean(team))
            out[team.name] = (team, run, asyncio.run(score_clean(run)))
        yield out


def test_the_lists_name_every_team_once():
    names = [t.name for t in clean_teams()]
    assert len(names) == len(set(names)) >= 12
    assert sorted(NO_FINDING_AT_TOP + KNOWN_FALSE_FINDINGS) == sorted(names)
    assert {t.framework for t in clean_teams()} == {"smolagents", "autogen"}


def test_every_clean_team_succeeds(scored):
    failed = {name: (run.outcome.final_answer, run.outcome.reason) for name, (_, run, _) in scored.items()
              if run.outcome.status != "success"}
    assert not failed


def test_the_diagnosis_sees_a_failing_outcome_not_the_runs_own(scored):
    # the substituted outcome is what graph diagnoses; the recorded run keeps its success
    _, run, score = scored["clean-smol-pantry"]
    assert run.outcome.status == "success" and score["status"] == "success"
    assert score["top"] is not None and score["confidence"] is not None


@pytest.mark.parametrize("name", NO_FINDING_AT_TOP)
def test_no_finding_at_the_top_of_a_correct_run(scored, name):
    _, run, score = scored[name]
    assert run.outcome.status == "success"
    assert not score["finding_at_top"], (score["top"], score["families"], score["claims"])
    assert score["uncertain"]


@pytest.fixture(scope="module")
def scored_expected(scored):
    """The same runs diagnosed with the fault suite's kind of reason, naming an expected answer."""
    return {name: asyncio.run(score_clean(run, expected=True)) for name, (_, run, _) in scored.items()}


def test_the_expected_reason_names_another_answer():
    assert expected_reason("TOTAL: 23.25") == "the final answer is 'TOTAL: 23.25', expected 'TOTAL: 24.25'"
    assert expected_reason("GATE: C4") == "the final answer is 'GATE: C4', expected 'GATE: C5'"


@pytest.mark.parametrize("name", NO_FINDING_AT_TOP)
def test_no_finding_at_the_top_with_an_expected_answer_in_the_reason(scored_expected, name):
    # a reason that names values ("expected 'TOTAL: 24.25'") gives no detector a pretext on a correct run either
    score = scored_expected[name]
    assert not score["finding_at_top"], (score["top"], score["families"], score["claims"])
