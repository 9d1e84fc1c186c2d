"""Localisation scoring of the fault suite (issue 20 item 2): how the ranking methods place the true step.

Localisation is measured on the DIAGNOSIS ALONE — ``diagnose(run, method)`` with no model, before any repair and
with ``graph``'s replay verification switched off — for ``graph`` and the two rule baselines, plus the expectation
of a uniformly random pick among the run's attribution candidates. Per method and case:

* ``rank`` — the 1-based place of the true step in the method's candidate list (None: not ranked);
* ``top1`` / ``top3`` — the true step ranked first / among the first three;
* ``near`` — the first-ranked step within one step index of the true step (±1).

The random row holds expectations (fractions), not hits. Aggregates (:func:`aggregate`) are rates 0–100 with two
decimals over a list of case rows; the suite reports them on the held-out half (and the tuning half separately).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["METHODS", "aggregate", "localize", "random_expectation", "spread"]

#: the ranking methods scored (no model); "random" is added as an expectation
METHODS: tuple[str, ...] = ("graph", "first-agent-step", "most-active-agent")


def random_expectation(candidate_indices: Sequence[int], true_index: int) -> dict[str, float]:
    """Expected top-1 / top-3 / ±1 of a uniformly random ranking of ``candidate_indices`` (step indices)."""
    n = len(candidate_indices)
    if n == 0:
        return {"top1": 0.0, "top3": 0.0, "near": 0.0}
    hit = 1.0 if true_index in candidate_indices else 0.0
    near = sum(1 for i in candidate_indices if abs(i - true_index) <= 1) / n
    return {"top1": hit / n, "top3": hit * min(3, n) / n, "near": near}


async def localize(run: Any, true_index: int) -> dict[str, dict[str, Any]]:
    """Score every method of :data:`METHODS` on ``run`` (no model, no replay) and the random expectation."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.attribution.stages.confidence import is_uncertain

    out: dict[str, dict[str, Any]] = {}
    for method in METHODS:
        ablate = ("replay_verify",) if method == "graph" else ()
        try:
            diagnosis = await diagnose(run, method, None, ablate=ablate, store=False)
        except Exception as exc:  # a method that raises scores nothing for this case; the suite goes on
            out[method] = {"rank": None, "top1": False, "top3": False, "near": False, "first": None,
                           "error": f"{type(exc).__name__}: {exc}"}
            continue
        ranked = [c.index for c in diagnosis.candidates]
        decisive = diagnosis.decisive_step_index
        if decisive is not None:  # the decisive step is the method's first answer, whatever the list's order
            ranked = [decisive, *(i for i in ranked if i != decisive)]
        rank = ranked.index(true_index) + 1 if true_index in ranked else None
        first = ranked[0] if ranked else None
        out[method] = {"rank": rank, "top1": rank == 1, "top3": rank is not None and rank <= 3,
                       "near": first is not None and abs(first - true_index) <= 1, "first": first,
                       "confidence": diagnosis.confidence, "uncertain": is_uncertain(diagnosis),
                       "finding_at_top": bool(diagnosis.top_findings)}
    candidates = [s.index for s in run.candidate_steps()]
    out["random"] = random_expectation(candidates, true_index)
    return out


def aggregate(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n", "graph": {"top1", "top3", "near"}, …, "random": {…}}`` over case rows that carry ``localization``
    (rates 0–100, two decimals; rows without one — a case that errored before diagnosis — count as misses)."""
    rows = list(rows)
    n = len(rows)
    out: dict[str, Any] = {"n": n}
    for method in (*METHODS, "random"):
        sums = {"top1": 0.0, "top3": 0.0, "near": 0.0}
        for row in rows:
            scores = (row.get("localization") or {}).get(method) or {}
            for key in sums:
                sums[key] += float(scores.get(key) or 0)
        out[method] = {key: round(100.0 * value / n, 2) if n else 0.0 for key, value in sums.items()}
    # issue 32 item 2: graph's uncertain share, and the top-1 of its answers that are not uncertain
    graph = [(row.get("localization") or {}).get("graph") or {} for row in rows]
    certain = [g for g in graph if g and not g.get("uncertain", False)]
    out["graph"]["uncertain"] = round(100.0 * (n - len(certain)) / n, 2) if n else 0.0
    out["graph"]["certain_top1"] = round(100.0 * sum(bool(g.get("top1")) for g in certain) / len(certain), 2) \
        if certain else None
    return out


def spread(values: Sequence[float]) -> dict[str, float]:
    """``{"median", "max"}`` of ``values`` (0 for none)."""
    if not values:
        return {"median": 0.0, "max": 0.0}
    return {"median": round(float(statistics.median(values)), 3), "max": round(float(max(values)), 3)}
