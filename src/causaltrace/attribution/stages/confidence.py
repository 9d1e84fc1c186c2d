"""Confidence that means something (issue 20 item 6): ``Diagnosis.confidence`` from the ranking's evidence.

Features of the ranking, all deterministic:

* **agreement** — how many independent signals (relevance to the failure, an error the step introduced, a loop it
  starts, a value it changed, its being the failure's symptom) support the first candidate (its reasons, at most 3);
* **margin** — how far the first candidate's score is ahead of the second's, relative to the first's
  (0 = a tie, 1 = alone);
* **length** — ``ln(1 + n)`` for the ``n`` candidates the diagnosis keeps (at most 20): a pick among 60 steps of a
  browsing log is less certain than among 6.

Two regimes, fitted separately (least squares of a hit — the first candidate is the decisive step — on the
features), because their evidence differs in kind:

* **imported logs** (no recorded dependencies; Who&When): ``IMPORTED[0] + IMPORTED[1] · agreement +
  IMPORTED[2] · length``, fitted on Who&When's DEV half only (92 traces, graph without a model, issue 20's second
  pass). The margin is left out: there its fitted weight is negative (a first candidate far ahead is most often the
  first agent quoting the task — a relevance sink — not the decisive step), which no user would read as confidence.
  Cross-validated on dev (two folds by file number): quartile hits 4 / 7 / 8 / 10 of 23.
* **live runs** (instrumentation recorded the dependencies): ``LIVE[0] + LIVE[1] · (agreement + margin)``, fitted
  on the zoo's tuning half (31 runs, 30 of them hits: a small sample, so the slope is weak and the level high).

Both are clamped to ``[FLOOR, CEILING]``. The test halves' figures are in the notes (``bench whowhen --split test
--json``, ``bench faults``).

Below :data:`UNCERTAIN_BELOW` the CLI says "uncertain" and shows the top 3 with their evidence;
:func:`calibration` gives the benchmark's ``calibration`` key (accuracy per confidence quartile and the ECE).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["CEILING", "FLOOR", "IMPORTED", "INTERCEPT", "LIVE", "NO_SIGNAL", "SLOPE", "UNCERTAIN_BELOW",
           "calibrated_confidence", "calibration"]

#: imported logs: intercept, agreement, length (module docstring)
IMPORTED = (0.946, 0.1855, -0.4027)
#: live runs: intercept, agreement + margin (module docstring)
LIVE = (0.843, 0.058)
#: the old single fit's names, kept for callers: the live regime's line
INTERCEPT, SLOPE = LIVE
FLOOR = 0.02
CEILING = 0.95
#: below this the answer is reported as uncertain (about the dev half's median confidence, 0.35; a live run's
#: confidence is above it unless its ranking is a near tie with no supporting signal)
UNCERTAIN_BELOW = 0.35
#: the reason a candidate gets when no signal supports it (it never counts as agreement)
NO_SIGNAL = "no error, repetition or relevance signal: ranked by position (earliness) only"


def calibrated_confidence(scores: Sequence[float], top_reasons: Sequence[str], *, explicit: bool = True,
                          kept: int = 20) -> float:
    """The confidence of a ranking whose scores are ``scores`` (best first; every candidate) and whose first candidate
    has ``top_reasons``; ``explicit``: the run's dependencies were recorded (a live run), else it is an imported log;
    ``kept``: how many candidates the diagnosis keeps (module docstring)."""
    if not scores:
        return FLOOR
    first = scores[0]
    second = scores[1] if len(scores) > 1 else 0.0
    margin = max(0.0, (first - second) / first) if first > 0 else 0.0
    agreement = min(3, sum(1 for r in top_reasons if r and r != NO_SIGNAL))
    if explicit:
        value = LIVE[0] + LIVE[1] * (agreement + margin)
    else:
        value = IMPORTED[0] + IMPORTED[1] * agreement + IMPORTED[2] * math.log(1 + min(len(scores), kept))
    return round(max(FLOOR, min(CEILING, value)), 4)


def calibration(pairs: Sequence[tuple[float | None, bool]]) -> dict[str, Any]:
    """``{"buckets": [{"lo", "hi", "n", "hits", "accuracy", "mean_confidence"}, …], "ece"}`` over
    ``(confidence, hit)`` pairs, in confidence quartiles (pairs without a confidence are left out); accuracy and
    confidence as percentages with 2 decimals, the ECE as a fraction."""
    rows = sorted((float(c), bool(h)) for c, h in pairs if c is not None)
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
