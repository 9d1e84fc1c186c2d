"""Fit the evidence confidence model (``attribution.stages.confidence.EVIDENCE``; issue 32 item 4) on dev data only.

Data: the fault suite's TUNING half as recorded by ``causaltrace bench faults --no-repair --twins --home DIR`` — each
failing run (a hit when graph's first candidate is the planted step) and its fixed twin diagnosed with the failing
outcome substituted (never a hit: nothing is wrong there) — and Who&When's DEV half (a hit when the first candidate
is the labelled step). The held-out half of the suite and Who&When's test half are never read. Features are
``confidence.evidence_features`` of graph's first candidate (no model, no replay); the fit is the L2 logistic
regression of ``scripts/fit_confidence.py``. It prints the coefficients, the ECE and the AUROC (failing vs twin) on
the fitted data, and two-fold cross-validated figures (folds by case / file order, a case's failing run and its twin in one fold).

Usage: ``.venv/bin/python scripts/fit_evidence_confidence.py --faults-home DIR [--data WHOWHEN] [--l2 1.0]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np
from fit_confidence import fit

from causaltrace.attribution.bench import default_data_dir, select_runs
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.stages.confidence import EVIDENCE_FEATURES, calibration, evidence_features
from causaltrace.attribution.stages.view import has_explicit_dependencies
from causaltrace.testing.faults import all_cases
from causaltrace.testing.faults.runner import stored_run
from causaltrace.testing.faults.twins import TWIN_SUFFIX, auroc


async def _features(run) -> tuple[list[float], int | None]:
    d = await diagnose(run, "graph", None, ablate=("replay_verify",), store=False)
    rank = d.artifacts.get("rank") or {"candidates": [{}], "n": 0}
    top = (rank["candidates"] or [{}])[0]
    found = d.top_findings
    x = evidence_features([f.family for f in found], max((f.strength for f in found), default=0.0),
                          live=has_explicit_dependencies(run), n=int(rank.get("n") or 0),
                          unanswered=bool((top.get("signals") or {}).get("unanswered")))
    return x, d.decisive_step_index


async def _rows(home: str, data: Path) -> list[tuple[str, list[float], bool, int]]:
    """``(kind, features, hit, fold)`` rows; a case's failing run and its twin share a fold."""
    rows = []
    for number, case in enumerate(all_cases()):
        if case.held_out:
            continue
        try:
            run, twin = stored_run(case, home), stored_run(case, home, suffix=TWIN_SUFFIX)
        except LookupError:
            continue
        x, pick = await _features(run)
        rows.append(("fail", x, pick == case.true_step(run), number % 2))
        x, _ = await _features(twin.model_copy(update={"outcome": run.outcome}))
        rows.append(("twin", x, False, number % 2))
    for number, run in enumerate(select_runs(data, "all", split="dev")):
        x, pick = await _features(run)
        rows.append(("whowhen", x, run.annotations is not None and pick == run.annotations.mistake_step, number % 2))
    return rows


def _report(label: str, kinds: list[str], conf: np.ndarray, y: np.ndarray) -> None:
    fail = [float(c) for k, c in zip(kinds, conf, strict=True) if k == "fail"]
    twin = [float(c) for k, c in zip(kinds, conf, strict=True) if k == "twin"]
    suite = [i for i, k in enumerate(kinds) if k != "whowhen"]
    ww = [i for i, k in enumerate(kinds) if k == "whowhen"]
    ece_suite = calibration([(float(conf[i]), bool(y[i])) for i in suite])["ece"]
    ece_ww = calibration([(float(conf[i]), bool(y[i])) for i in ww])
    print(f"{label}: AUROC failing vs twin {auroc(fail, twin)}, ECE suite+twins {ece_suite}, ECE Who&When dev "
          f"{ece_ww['ece']}, Who&When quartile hits {[b['hits'] for b in ece_ww['buckets']]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults-home", required=True, help="the --home of a `bench faults --no-repair --twins` run")
    ap.add_argument("--data", type=Path, default=None, help="the Who&When folder (default: ../shared/data/whowhen)")
    ap.add_argument("--l2", type=float, default=1.0)
    args = ap.parse_args(argv)
    rows = asyncio.run(_rows(args.faults_home, args.data or default_data_dir()))
    kinds = [k for k, _, _, _ in rows]
    folds = [f for _, _, _, f in rows]
    x = np.array([r for _, r, _, _ in rows])
    y = np.array([float(h) for _, _, h, _ in rows])
    b = fit(x, y, args.l2)
    print(f"rows {len(rows)}: {kinds.count('fail')} failing, {kinds.count('twin')} twins, "
          f"{kinds.count('whowhen')} Who&When dev; hits {int(y.sum())}")
    print("EVIDENCE = (" + ", ".join(f"{v:.4f}" for v in b) + ")   # intercept, " + ", ".join(EVIDENCE_FEATURES))
    _report("fitted", kinds, 1 / (1 + np.exp(-x @ b)), y)
    conf = np.zeros(len(rows))
    for side in (0, 1):  # two folds by case (a failing run and its twin together) and by trace
        train = [i for i in range(len(rows)) if folds[i] != side]
        test = [i for i in range(len(rows)) if folds[i] == side]
        conf[test] = 1 / (1 + np.exp(-x[test] @ fit(x[train], y[train], args.l2)))
    _report("cross-validated (two folds)", kinds, conf, y)
    return 0


if __name__ == "__main__":
    sys.exit(main())
