"""Rewrite ``benchmarks/call_budget.json``: the calls per framework event of every benchmark team and mode, with the
Python and package versions they were counted on (issue 35 item 3).

``tests/benchmarks/test_call_budget.py`` fails when a causaltrace mode's count exceeds the file by more than 10 %,
and skips when the versions here differ from the installed ones (a different OpenTelemetry SDK or framework changes
the counts by itself). Rewrite it after a change that lowers the counts (lock the gain in), or that must raise them
— and then name the raised figures and why in the commit message and the issue's note. It prints each figure before
and after. The OpenInference rows are kept for comparison; the test asserts the causaltrace rows only.

Run: python benchmarks/update_budget.py [--check]   (``--check``: print the comparison, write nothing)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _call_counter as cc
from bench_call_counts import COUNTED, count

BUDGET = Path(__file__).resolve().parent / "call_budget.json"
ABOUT = (
    "Python calls per framework event of causaltrace.* (ct-store-off / ct-store-on) and openinference.* "
    "(openinference, for comparison) on the team's threads, one run after two warm-ups, everything synchronous: "
    "benchmarks/bench_call_counts.py. Rewritten by benchmarks/update_budget.py; checked by "
    "tests/benchmarks/test_call_budget.py (fails above +10 %, skips when the versions differ)."
)


def budget_document() -> dict[str, Any]:
    """A fresh budget: counted now, on the installed versions."""
    cc.examples_on_path()
    with cc.temporary_home():
        results = count(cc.TEAMS, cc.MODES)
    budget = {
        name: {
            mode: {"calls": rows[mode]["calls"], "events": rows["events"], "calls_per_event": rows[mode]["calls_per_event"]}
            for mode in cc.MODES
        }
        for name, rows in results.items()
    }
    counted = {
        mode: " and ".join(f"{p}*" for p in COUNTED[mode][0] if p.endswith("."))
        + "".join(f", not {e}.*" for e in COUNTED[mode][1])
        for mode in cc.MODES
    }
    return {"about": ABOUT, "counted": counted, "versions": cc.versions(), "budget": budget}


def comparison(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    lines = []
    for name, modes in new["budget"].items():
        for mode, row in modes.items():
            before = (old or {}).get("budget", {}).get(name, {}).get(mode, {}).get("calls_per_event")
            change = "" if before in (None, 0) else f"  ({100 * (row['calls_per_event'] / before - 1):+.1f} %)"
            lines.append(f"{name:30} {mode:14} {before if before is not None else '-':>8} -> {row['calls_per_event']:8}{change}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print the comparison only, do not write the file")
    args = parser.parse_args(argv)
    old = json.loads(BUDGET.read_text()) if BUDGET.is_file() else None
    new = budget_document()
    print("calls per event, budget file -> now")
    print(comparison(old, new))
    if old is not None and old.get("versions") != new["versions"]:
        print("versions changed: " + ", ".join(
            f"{k} {old['versions'].get(k)} -> {v}" for k, v in new["versions"].items() if old["versions"].get(k) != v))
    if not args.check:
        BUDGET.write_text(json.dumps(new, indent=2) + "\n")
        print(f"wrote {BUDGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
