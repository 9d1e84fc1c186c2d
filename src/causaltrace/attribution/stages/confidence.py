"""Confidence that means something (issue 20 item 6): ``Diagnosis.confidence`` from the ranking's evidence.

Two features of the ranking, both deterministic:

* **agreement** — how many independent signals (relevance to the failure, an error the step introduced, a loop it
  starts, its being the failure's symptom) support the first candidate (its reasons, at most 3);
* **margin** — how far the first candidate's score is ahead of the second's, relative to the first's
  (0 = a tie, 1 = alone).

``confidence = clamp(INTERCEPT + SLOPE · (agreement + margin), FLOOR, CEILING)`` — a least-squares fit of a hit
(the first candidate is the labelled decisive step) on ``agreement + margin`` over Who&When's DEV half only (92
traces, graph without a model). Fitted on dev: quartile accuracy 17 / 13 / 26 / 39 % against mean confidence
14 / 20 / 28 / 35 %, expected calibration error 0.041. The test half, held out of the fit: 13 / 17 / 26 / 30 %,
ECE 0.011. The zoo's figures are in the fault benchmark (``causaltrace bench faults``).

Below :data:`UNCERTAIN_BELOW` the CLI says "uncertain" and shows the top 3 with their evidence;
:func:`calibration` gives the benchmark's ``calibration`` key (accuracy per confidence quartile and the ECE).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CEILING", "FLOOR", "INTERCEPT", "NO_SIGNAL", "SLOPE", "UNCERTAIN_BELOW", "calibrated_confidence",
           "calibration"]

INTERCEPT = -0.0719
SLOPE = 0.1732
FLOOR = 0.02
CEILING = 0.95
#: below this the answer is reported as uncertain (about the dev half's median confidence)
UNCERTAIN_BELOW = 0.25
#: the reason a candidate gets when no signal supports it (it never counts as agreement)
NO_SIGNAL = "no error, repetition or relevance signal: ranked by position (earliness) only"


def calibrated_confidence(scores: Sequence[float], top_reasons: Sequence[str]) -> float:
    """The confidence of a ranking whose scores are ``scores`` (best first) and whose first candidate has
    ``top_reasons`` (module docstring)."""
    if not scores:
        return FLOOR
    first = scores[0]
    second = scores[1] if len(scores) > 1 else 0.0
    margin = (first - second) / first if first > 0 else 0.0
    agreement = min(3, sum(1 for r in top_reasons if r and r != NO_SIGNAL))
    return round(max(FLOOR, min(CEILING, INTERCEPT + SLOPE * (agreement + max(0.0, margin)))), 4)


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
