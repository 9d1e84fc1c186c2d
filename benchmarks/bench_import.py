"""Import time of ``import causaltrace`` in a fresh interpreter, against ``python -c pass``.

Each sample starts a new interpreter (as a user's program or the CLI does), so what is measured includes the
interpreter's own start-up; the baseline is that start-up alone, and the difference is what ``import causaltrace``
adds. The two commands alternate in one loop, so machine load hits them alike; the medians and the lower quartiles
are reported. Also reported: how many modules the import loads (the light-import test checks WHICH ones: no
framework, litellm, docker or llama_cpp).

Usage: python benchmarks/bench_import.py [--runs 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

BASELINE = "pass"
IMPORT = "import causaltrace"
COUNT = "import sys; before = len(sys.modules); import causaltrace; print(len(sys.modules) - before)"


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered) * 1000, 1),
            "p25_ms": round(ordered[len(ordered) // 4] * 1000, 1)}


def _time(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    baseline: list[float] = []
    imported: list[float] = []
    for i in range(args.warmup + args.runs):
        base, full = _time(BASELINE), _time(IMPORT)
        if i >= args.warmup:
            baseline.append(base)
            imported.append(full)
    modules = int(subprocess.run([sys.executable, "-c", COUNT], check=True, capture_output=True,
                                 text=True).stdout)
    results = {
        "python": sys.executable,
        "runs": args.runs,
        "python_-c_pass": _ms(baseline),
        "import_causaltrace": _ms(imported),
        "added_median_ms": round((statistics.median(imported) - statistics.median(baseline)) * 1000, 1),
        "modules_loaded": modules,
    }
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
