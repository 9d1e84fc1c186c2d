"""The twin property, measured (issue 32 item 3; ``causaltrace bench faults --twins``).

Each case's *twin* is the same team with the error fixed (``FaultCase.fixed_factory``). It is recorded like the
case (``runner.record(case, twin=True)``, stored under the name ``<case>~twin``, so ``--from-store`` finds it again) and diagnosed by ``graph`` — no
model, no replay — **with the failing run's Outcome substituted** (same status, final answer and verifier reason):
a method cannot pass by reading the outcome. On a twin nothing is wrong, so a diagnosis that follows the error and
not the team's shape has no finding at its top and says so (uncertain).

Reported: the twin "no finding at the top" rate (overall, on the held-out half, per type) and the AUROC of graph's
confidence, failing runs against twins (1.0: every failing run is more confident than every twin; 0.5: the
confidence does not tell them apart), and its ECE over failing runs and twins (a twin's answer is always wrong).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["TWIN_SUFFIX", "auroc", "score_twin", "summarize_twins"]

#: the stored name of a case's twin run is the case's name plus this
TWIN_SUFFIX = "~twin"


async def score_twin(case: Any, failing_run: Any, twin_run: Any) -> dict[str, Any]:
    """Diagnose ``twin_run`` with ``failing_run``'s Outcome substituted (module docstring): the twin's own status,
    its first pick, whether a finding backs it, the confidence and whether the answer is uncertain."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.attribution.stages.confidence import is_uncertain

    substituted = twin_run.model_copy(update={"outcome": failing_run.outcome})
    d = await diagnose(substituted, "graph", None, ablate=("replay_verify",), store=False)
    top = d.top_findings
    return {"status": twin_run.outcome.status, "first": d.decisive_step_index,
            "finding_at_top": bool(top), "families": sorted({f.family for f in top}),
            "confidence": d.confidence, "uncertain": is_uncertain(d)}


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The area under the ROC curve of scores ``positives`` (should be high) against ``negatives``: the share of
    pairs a positive outranks, ties counting half (Mann–Whitney); None when either side is empty."""
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return round(wins / (len(positives) * len(negatives)), 4)


def _rate(hits: int, n: int) -> float | None:
    return round(100.0 * hits / n, 2) if n else None


def _group(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    twins = [r for r in rows if r.get("twin")]
    clean = sum(1 for r in twins if not r["twin"]["finding_at_top"])
    fail_conf = [float(((r.get("localization") or {}).get("graph") or {}).get("confidence") or 0.0) for r in twins]
    twin_conf = [float(r["twin"]["confidence"] or 0.0) for r in twins]
    return {"n": len(twins), "no_finding_at_top": clean, "no_finding_at_top_rate": _rate(clean, len(twins)),
            "uncertain_rate": _rate(sum(1 for r in twins if r["twin"]["uncertain"]), len(twins)),
            "auroc": auroc(fail_conf, twin_conf)}


def summarize_twins(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``twins`` key of the fault-suite report: overall, held-out, tuning and per type (module docstring), and
    the ECE of graph's confidence over failing runs (hit: top-1) and twins (never a hit)."""
    from causaltrace.attribution.stages.confidence import calibration

    rows = [r for r in rows if r.get("twin")]
    pairs = [(((r.get("localization") or {}).get("graph") or {}).get("confidence"),
              bool(((r.get("localization") or {}).get("graph") or {}).get("top1"))) for r in rows]
    pairs += [(r["twin"]["confidence"], False) for r in rows]
    blind = [r for r in rows if str(r["name"]).startswith("blind32-")]
    return {"all": _group(rows), "held_out": _group([r for r in rows if r["held_out"] and r not in blind]),
            "tuning": _group([r for r in rows if not r["held_out"]]),
            **({"blind": _group(blind)} if blind else {}),
            "by_type": {t: _group([r for r in rows if r["fault"] == t]) for t in sorted({r["fault"] for r in rows})},
            "calibration": calibration(pairs)}
