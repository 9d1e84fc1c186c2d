"""Fit the confidence model of imported logs (``attribution.stages.confidence.IMPORTED``) on Who&When's DEV half.

Why a script: the coefficients in ``confidence.py`` are a fit, and a fit nobody can rerun is a number nobody can
check. This diagnoses every dev trace (even file numbers) with ``graph`` and no model, reads what supports the
first candidate (the rank artifact's ``signals``: an error signal, a repetition, an unanswered reply, a whole-run
finding) and the number of candidates, and fits ``sigmoid(b · x)`` with an L2 penalty by Newton's method. It
prints the coefficients, the quartile hits of the fit on dev, and two-fold cross-validated quartile hits (folds by
file number: n mod 4 in {0, 2} vs the rest, and the first half vs the second) — never the test half.

Usage: ``.venv/bin/python scripts/fit_confidence.py [--data DIR] [--l2 1.0]``
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from pathlib import Path

import numpy as np

from causaltrace.attribution.bench import default_data_dir, select_runs
from causaltrace.attribution.engine import diagnose
from causaltrace.attribution.stages.confidence import calibration

FEATURES = ("error", "loop", "ln(1 + n)", "unanswered", "finding")


async def _rows(data: Path) -> list[tuple[int, list[float], bool]]:
    rows = []
    for run in select_runs(data, "all", split="dev"):
        d = await diagnose(run, "graph", None, store=False)
        rank = d.artifacts["rank"]
        top = rank["candidates"][0]
        sig = top["signals"]
        x = [1.0, float(sig["error"]), float(sig["loop"]), math.log(1 + rank["n"]), float(sig["unanswered"]),
             float(sig["finding"])]
        hit = run.annotations is not None and top["index"] == run.annotations.mistake_step
        rows.append((int(run.annotations.extra.get("file_number", 0)) if run.annotations else 0, x, hit))
    return rows


def fit(x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """L2-penalised logistic regression by Newton's method (the intercept is not penalised)."""
    b = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * l2
    penalty[0, 0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ b))
        grad = x.T @ (p - y) + penalty @ b
        hess = x.T @ (x * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hess, grad)
        b -= step
        if np.abs(step).max() < 1e-9:
            break
    return b


def _quartiles(conf: np.ndarray, y: np.ndarray, order: list[int]) -> list[int]:
    report = calibration([(float(conf[i]), bool(y[i])) for i in order])
    return [b["hits"] for b in report["buckets"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="the Who&When folder (default: ../shared/data/whowhen)")
    ap.add_argument("--l2", type=float, default=1.0)
    args = ap.parse_args(argv)
    rows = asyncio.run(_rows(args.data or default_data_dir()))
    numbers = [n for n, _, _ in rows]
    x = np.array([r for _, r, _ in rows])
    y = np.array([float(h) for _, _, h in rows])
    b = fit(x, y, args.l2)
    print(f"dev traces {len(rows)}, hits {int(y.sum())}")
    print("IMPORTED = (" + ", ".join(f"{v:.4f}" for v in b) + ")   # intercept, " + ", ".join(FEATURES))
    file_order = sorted(range(len(rows)), key=lambda i: numbers[i])
    print("fit on all of dev, quartile hits:", _quartiles(1 / (1 + np.exp(-x @ b)), y, file_order))
    for name, fold in (("n mod 4", lambda n: n % 4 == 0), ("halves", lambda n: n <= sorted(numbers)[len(numbers) // 2])):
        conf = np.zeros(len(rows))
        for side in (True, False):
            train = [i for i in range(len(rows)) if fold(numbers[i]) != side]
            test = [i for i in range(len(rows)) if fold(numbers[i]) == side]
            bb = fit(x[train], y[train], args.l2)
            conf[test] = 1 / (1 + np.exp(-x[test] @ bb))
        print(f"cross-validated ({name}) quartile hits:", _quartiles(conf, y, file_order))
    for i, name in enumerate(FEATURES, start=1):
        on = x[:, i] > 0 if name != "ln(1 + n)" else None
        if on is not None:
            print(f"  {name}: picks {int(on.sum())}, right {int(y[on].sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
