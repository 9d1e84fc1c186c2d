"""Confidence that means something (issue 20 item 6): a calibrated ``Diagnosis.confidence`` from the ranking's
margin and the agreement of its signals, the benchmark's ``calibration`` key, "uncertain" below the threshold,
``--min-confidence``, and a reason for every ranked candidate."""

from __future__ import annotations

import json
from pathlib import Path

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.attribution.stages.confidence import (
    CEILING,
    FLOOR,
    NO_SIGNAL,
    UNCERTAIN_BELOW,
    calibrated_confidence,
    calibration,
)
from causaltrace.cli import main
from causaltrace.collector.whowhen import load_whowhen

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "attribution" / "whowhen"


def test_confidence_grows_with_margin_and_agreement():
    tie = calibrated_confidence([0.5, 0.5], ["relevance 0.5"])
    ahead = calibrated_confidence([0.9, 0.3], ["relevance 0.5"])
    agreed = calibrated_confidence([0.9, 0.3], ["relevance 0.5", "introduced the error", "starts a loop"])
    assert FLOOR <= tie < ahead < agreed <= CEILING
    # the filler reason of an unsupported candidate is no agreement
    assert calibrated_confidence([0.5, 0.5], [NO_SIGNAL]) == calibrated_confidence([0.5, 0.5], [])
    assert calibrated_confidence([], []) == FLOOR


def test_an_imported_logs_confidence_follows_its_error_and_loop_signals_and_falls_with_its_length():
    # imported logs (no recorded dependencies) have their own logistic fit: an error signal behind the pick raises
    # it, a repetition behind it lowers it, and a longer log lowers it (the number of candidates, uncapped)
    ranking = [0.9, 0.3, 0.2, 0.1]
    plain = calibrated_confidence(ranking, ["relevance 0.5"], explicit=False)
    errored = calibrated_confidence(ranking, ["relevance 0.5", "introduced the error"], explicit=False, error=True)
    looped = calibrated_confidence(ranking, ["first reply to an instruction"], explicit=False, loop=True)
    assert FLOOR <= looped < plain < errored <= CEILING
    # a run that ended on the pick, an executor's reply to an instruction, is graph's `unanswered` signal
    assert calibrated_confidence(ranking, ["the run ended on this reply"], explicit=False, unanswered=True) > plain
    longer = calibrated_confidence([0.9, 0.3] + [0.1] * 18, ["relevance 0.5"], explicit=False)
    longest = calibrated_confidence([0.9, 0.3] + [0.1] * 120, ["relevance 0.5"], explicit=False)
    assert longest < longer < plain
    # the number of agreeing reasons is not a feature of this regime (it added nothing on the dev half)
    assert calibrated_confidence(ranking, ["a", "b", "c"], explicit=False) == plain
    # live runs: far stronger evidence (recorded dependencies), so a higher level for the same ranking
    assert calibrated_confidence(ranking, ["relevance 0.5"]) > plain


def test_calibration_buckets_are_quartiles_with_the_expected_calibration_error():
    pairs = [(0.1, False), (0.1, False), (0.2, True), (0.2, False), (0.5, True), (0.5, False), (0.9, True),
             (0.9, True), (None, True)]
    out = calibration(pairs)
    assert out["n"] == 8 and [b["n"] for b in out["buckets"]] == [2, 2, 2, 2]
    assert [b["hits"] for b in out["buckets"]] == [0, 1, 1, 2]
    assert [b["accuracy"] for b in out["buckets"]] == [0.0, 50.0, 50.0, 100.0]
    # |0 - .1| + |.5 - .2| + |.5 - .5| + |1 - .9|, each a quarter
    assert out["ece"] == round((0.1 + 0.3 + 0.0 + 0.1) / 4, 4)
    assert calibration([]) == {"buckets": [], "ece": 0.0, "n": 0}


def test_calibration_keeps_equal_confidences_in_their_given_order():
    # sorting a hit after a miss of the same confidence would put every tied hit in the upper buckets
    tied = calibration([(0.5, True), (0.5, False), (0.5, True), (0.5, False)])
    assert [b["hits"] for b in tied["buckets"]] == [1, 0, 1, 0]


def fixture_run():
    return load_whowhen(FIXTURES / "Hand-Crafted" / "1.json")


def test_graph_gives_a_confidence_and_every_candidate_a_reason():
    d = diagnose_sync(fixture_run(), "graph")
    assert d.confidence is not None and FLOOR <= d.confidence <= CEILING
    assert d.candidates and all(c.reasons and all(r for r in c.reasons) for c in d.candidates)


def test_min_confidence_names_no_decisive_step_below_it():
    run = fixture_run()
    confident = diagnose_sync(run, "graph", min_confidence=0.0)
    assert confident.decisive_step_index is not None
    unsure = diagnose_sync(run, "graph", min_confidence=0.99)
    assert unsure.decisive_step_index is None and unsure.agent is None and not unsure.failed
    assert unsure.explanation.startswith("uncertain") and unsure.candidates == confident.candidates


def test_the_cli_says_uncertain_and_shows_the_top_three(capsys):
    path = FIXTURES / "Hand-Crafted" / "1.json"
    assert main(["import", "--format", "whowhen", str(path)]) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["diagnose", run_id, "--min-confidence", "0.99"]) == 0
    out = capsys.readouterr().out
    assert "uncertain" in out and "decisive error" not in out
    assert " 1. step " in out and " 3. step " in out or len(diagnose_sync(fixture_run(), "graph").candidates) < 3
    assert main(["diagnose", run_id, "--json", "--min-confidence", "0.99"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["decisive_step_index"] is None and data["confidence"] < 0.99
    d = diagnose_sync(fixture_run(), "graph")
    assert main(["diagnose", run_id]) == 0
    out = capsys.readouterr().out
    assert ("uncertain" in out) == (d.confidence < UNCERTAIN_BELOW)
