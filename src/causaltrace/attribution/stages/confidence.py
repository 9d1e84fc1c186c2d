"""Confidence that means something (issue 20 item 6, issue 32 item 4): ``Diagnosis.confidence`` from the evidence.

Since issue 32, ``graph`` uses ONE model of the findings at its first candidate for live runs and imported logs
alike (:data:`EVIDENCE`, :func:`evidence_confidence`; fitted on dev data only — the fault suite's tuning half with
its twins as negatives, and Who&When's dev half — by ``scripts/fit_evidence_confidence.py``). The two regimes below
(issue 20) remain as :func:`calibrated_confidence`, the earlier record (refitted by ``scripts/fit_confidence.py``; no
method uses it since issue 32):

* **imported logs** (no recorded dependencies; Who&When): a logistic model of a hit (the first candidate is the
  decisive step), ``sigmoid(IMPORTED · (1, error, loop, ln(1 + n), unanswered, finding))``, where ``error`` is 1 when
  an error signal (a tool error, an exit code, an exception the step introduced or hit) supports the first
  candidate, ``loop`` is 1 when its support is a repetition (the first reply to a re-issued instruction, a later
  reply, the start of an action loop), ``unanswered`` is 1 when the run ended on it, an executor's reply to an
  instruction (graph's ``unanswered`` signal), ``finding`` is 1 when a whole-run finding singles it out (the
  opening that drifted from the task, the first step that made its data up: graph's ``drift`` / ``fabrication``),
  and ``n`` is the number of candidates ranked. Fitted on Who&When's DEV half only by ``scripts/fit_confidence.py``
  (92 traces, graph without a model, L2 1.0; issue 20's fifth pass, with graph's ``restatement`` factor): on dev an error signal is right 13 times in
  20, a repetition never (0 / 13), an unanswered reply 4 times in 7, a finding 10 times in 15, and a pick among 100
  steps of a browsing log far less often than among 6. Quartile hits of the fit on dev 3 / 8 / 14 / 15 of 23;
  cross-validated on dev (two folds by file number, two fold rules) 4 / 9 / 17 / 10 and 7 / 7 / 13 / 13 (the model
  without ``finding``, on the picks before graph's ``restatement``: 3 / 13 / 6 / 16 on dev). The margin and the number of agreeing reasons
  add nothing there (their fitted weights were near zero or negative: a first candidate far ahead is most often the
  first agent quoting the task).
* **live runs** (instrumentation recorded the dependencies): ``LIVE[0] + LIVE[1] · (agreement + margin)``, fitted
  on the zoo's tuning half (31 runs, 30 of them hits: a small sample, so the slope is weak and the level high);
  **agreement** is how many independent signals support the first candidate (its reasons, at most 3) and the
  **margin** how far its score is ahead of the second's, relative to its own (0 = a tie, 1 = alone).

Both are clamped to ``[FLOOR, CEILING]``. The test halves' figures are in the notes (``bench whowhen --split test
--json``, ``bench faults``).

Below :data:`UNCERTAIN_BELOW` the CLI says "uncertain" and shows the top 3 with their evidence;
:func:`calibration` gives the benchmark's ``calibration`` key (accuracy per confidence quartile and the ECE).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# the "uncertain" rule lives with the verdict, so every surface (the collector's included) applies one rule
from causaltrace.collector.verdict import UNCERTAIN_BELOW, is_uncertain

__all__ = ["CEILING", "EVIDENCE", "EVIDENCE_FEATURES", "FLOOR", "IMPORTED", "INTERCEPT", "LIVE",
           "NO_EVIDENCE_CONFIDENCE", "NO_SIGNAL", "SLOPE", "UNCERTAIN_BELOW", "calibrated_confidence", "calibration",
           "evidence_confidence", "evidence_features", "is_uncertain"]

#: imported logs: intercept, error, loop, ln(1 + n), unanswered of the logistic model (module docstring)
IMPORTED = (0.8410, 0.6070, -1.3026, -0.4965, 0.7188, 0.5246)
#: live runs: intercept, agreement + margin (module docstring)
LIVE = (0.843, 0.058)
#: the old single fit's names, kept for callers: the live regime's line
INTERCEPT, SLOPE = LIVE
FLOOR = 0.02
CEILING = 0.95
#: below this the answer is reported as uncertain: the dev half's lowest confidence quartile (up to 0.403 with the
#: fifth pass's model, right 3 times in 23 there; the quartile above it, 0.41-0.45, is right 8 times in 23): an imported log's
#: pick supported by a repetition only, or by nothing in a long log; a live run's confidence is above it unless its
#: ranking is a near tie with no supporting signal
#: the most a diagnosis whose decisive step has no finding may claim (issue 32 item 2: no evidence, no verdict):
#: below :data:`UNCERTAIN_BELOW`, so every surface says "uncertain"
NO_EVIDENCE_CONFIDENCE = 0.25
#: the reason a candidate gets when no signal supports it (it never counts as agreement)
NO_SIGNAL = "no error, repetition or relevance signal: ranked by position (earliness) only"


#: Issue 32 item 4 — confidence from evidence: ONE logistic model of the findings at the first candidate, for live
#: runs and imported logs alike (whether the dependencies were recorded is a feature, not a separate model). Fitted
#: by ``scripts/fit_evidence_confidence.py`` on dev data only: the fault suite's TUNING half (its failing runs, a
#: hit when the first candidate is the planted step, and their fixed twins with the failing outcome substituted, never
#: a hit) and Who&When's dev half. ``live × finding`` (this session's refit, with the tuning-half twin fixes): a finding
#: on a run with recorded dependencies is worth more than one on an imported log — without it the one model spread
#: the suite's and Who&When's base rates alike (suite + twins ECE 0.195 → 0.084 fitted, 0.194 → 0.128 cross-validated;
#: Who&When dev ECE 0.104 → 0.011; AUROC failing vs twin 0.959 fitted, 0.960 cross-validated). Refitted in issue 32's
#: fourth session after the filled-gap and narrowed-period detectors and the anchor's repeated-reply rule (tuning
#: half 40 / 41, Who&When dev 40 / 92): suite + twins ECE 0.102 → 0.094 fitted (0.136 cross-validated); Who&When dev
#: ECE 0.040, quartile hits 4 / 10 / 11 / 15; AUROC failing vs twin 0.981 fitted and cross-validated.
#: Features (:func:`evidence_features`), in order after the intercept:
EVIDENCE_FEATURES = ("live", "finding", "strength", "loop", "ln(1 + n)", "unanswered", "live × finding")
EVIDENCE: tuple[float, ...] = (1.3639, -0.9874, 0.6205, 0.5076, -1.0271, -0.9151, 0.8795, 3.5149)


def evidence_features(families: Sequence[str], strength: float, *, live: bool, n: int,
                      unanswered: bool = False) -> list[float]:
    """The model's inputs (:data:`EVIDENCE_FEATURES`, after the intercept's 1) for a first candidate whose findings
    have ``families`` and the greatest ``strength``, among ``n`` ranked candidates; ``live``: the run's dependencies
    were recorded. A loop is its own feature: on Who&When a repetition was never the labelled step."""
    fams = set(families)
    return [1.0, float(live), float(bool(fams)), strength if fams else 0.0, float("loop_no_progress" in fams),
            math.log(1 + n), float(unanswered), float(live and bool(fams))]


def evidence_confidence(features: Sequence[float], coefficients: Sequence[float] = EVIDENCE) -> float:
    """``sigmoid(coefficients · features)``, clamped to ``[FLOOR, CEILING]``."""
    logit = sum(b * x for b, x in zip(coefficients, features, strict=True))
    return round(max(FLOOR, min(CEILING, 1.0 / (1.0 + math.exp(-logit)))), 4)


def calibrated_confidence(scores: Sequence[float], top_reasons: Sequence[str], *, explicit: bool = True,
                          error: bool = False, loop: bool = False, unanswered: bool = False,
                          finding: bool = False) -> float:
    """The confidence of a ranking whose scores are ``scores`` (best first; every candidate) and whose first candidate
    has ``top_reasons``; ``explicit``: the run's dependencies were recorded (a live run), else it is an imported log;
    ``error`` / ``loop`` / ``unanswered``: an error signal / a repetition supports the first candidate / the run
    ended on it, an executor's reply to an instruction (module docstring)."""
    if not scores:
        return FLOOR
    first = scores[0]
    second = scores[1] if len(scores) > 1 else 0.0
    margin = max(0.0, (first - second) / first) if first > 0 else 0.0
    agreement = min(3, sum(1 for r in top_reasons if r and r != NO_SIGNAL))
    if explicit:
        value = LIVE[0] + LIVE[1] * (agreement + margin)
    else:
        b0, b_error, b_loop, b_length, b_unanswered, b_finding = IMPORTED
        logit = (b0 + b_error * error + b_loop * loop + b_length * math.log(1 + len(scores))
                 + b_unanswered * unanswered + b_finding * finding)
        value = 1.0 / (1.0 + math.exp(-logit))
    return round(max(FLOOR, min(CEILING, value)), 4)


def calibration(pairs: Sequence[tuple[float | None, bool]]) -> dict[str, Any]:
    """``{"buckets": [{"lo", "hi", "n", "hits", "accuracy", "mean_confidence"}, …], "ece"}`` over
    ``(confidence, hit)`` pairs, in confidence quartiles (pairs without a confidence are left out); accuracy and
    confidence as percentages with 2 decimals, the ECE as a fraction. Equal confidences keep the order they were
    given in (file order in the benchmark): sorting a hit after a miss of the same confidence would flatter the
    upper buckets."""
    rows = sorted(((float(c), bool(h)) for c, h in pairs if c is not None), key=lambda row: row[0])
    n = len(rows)
    buckets: list[dict[str, Any]] = []
    ece = 0.0
    if n:
        cuts = [round(n * q / 4) for q in range(5)]
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            part = rows[lo:hi]
            if not part:
                continue
            hits = sum(1 for _, h in part if h)
            mean = sum(c for c, _ in part) / len(part)
            ece += len(part) / n * abs(hits / len(part) - mean)
            buckets.append({"lo": part[0][0], "hi": part[-1][0], "n": len(part), "hits": hits,
                            "accuracy": round(100.0 * hits / len(part), 2),
                            "mean_confidence": round(100.0 * mean, 2)})
    return {"buckets": buckets, "ece": round(ece, 4), "n": n}
