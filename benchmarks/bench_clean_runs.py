"""The negative set of correct runs (issue 32): does ``graph`` blame only what a run shows is wrong?

Records each clean team of :mod:`causaltrace.testing.faults.clean_runs` (smolagents and AutoGen, reactive scripted
models, offline) into a temporary store, checks that it succeeds, then diagnoses it with ``graph`` (no model, no
replay) with a FAILING Outcome substituted (status failure, the verifier's reason "the answer is wrong"), as
``bench faults --twins`` does for the fixed twins. Prints per team the top step (index, agent, kind), whether a
finding is at the top (its family and claim), the confidence and whether the diagnosis is uncertain; then the totals:
"no finding at the top" n/N and the mean confidence. Wanted: no finding at the top of any of them.

``--expected-reason`` gives the substituted Outcome the reason the fault suite's strict verifiers give instead ("the
final answer is 'TOTAL: 23.25', expected 'TOTAL: 24.25'": values a stage may read off the reason).
``--all-findings`` also lists the findings below the top (a detector firing on a correct run, even where it does
not decide the verdict).

Usage: python benchmarks/bench_clean_runs.py [--only NAME ...] [--framework smolagents|autogen] [--all-findings]
       [--expected-reason] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


async def _run(names: list[str] | None, framework: str | None, every: bool, expected: bool) -> list[dict[str, Any]]:
    from causaltrace.testing.faults.clean_runs import clean_teams, record_clean, score_clean

    rows = []
    for team in clean_teams(framework):
        if names and team.name not in names:
            continue
        row: dict[str, Any] = {"name": team.name, "framework": team.framework, "shape": team.shape,
                               "content": team.content}
        try:
            run = await record_clean(team)
            row["score"] = await score_clean(run, expected=expected)
        except Exception as exc:  # a broken team is a row, the bench goes on
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
        _print_row(row, every)
    return rows


def _print_row(row: dict[str, Any], every: bool = False) -> None:
    if "error" in row:
        print(f"{row['name']:<28} ERROR {row['error']}")
        return
    s = row["score"]
    top = f"#{s['top']} {s['agent']}/{s['kind']}"
    verdict = ("FINDING " + ",".join(s["families"])) if s["finding_at_top"] else "no finding"
    print(f"{row['name']:<28} {s['status']:<8} top {top:<36} {verdict:<28} conf {s['confidence']} "
          f"{'uncertain' if s['uncertain'] else 'CERTAIN'}")
    for claim in s["claims"]:
        print(f"{'':<30}claim: {claim}")
    for f in s["findings"] if every else ():
        if f["index"] != s["top"]:
            print(f"{'':<30}below the top: #{f['index']} {f['family']}: {f['claim']}")
    if s["status"] != "success":
        print(f"{'':<30}the run did not succeed: final answer {s['final_answer']!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="only these teams")
    parser.add_argument("--framework", choices=("smolagents", "autogen"))
    parser.add_argument("--expected-reason", action="store_true",
                        help="the substituted reason names an expected answer, as the fault suite's verifiers do")
    parser.add_argument("--all-findings", action="store_true", help="also list the findings below the top")
    parser.add_argument("--json", type=Path, help="write the rows and totals here")
    args = parser.parse_args(argv)

    from causaltrace.testing.faults.clean_runs import summarize_clean

    os.environ.pop("CAUSALTRACE_MODEL", None)
    with tempfile.TemporaryDirectory(prefix="causaltrace-clean-") as home:
        os.environ["CAUSALTRACE_HOME"] = home
        rows = asyncio.run(_run(args.only, args.framework, args.all_findings, args.expected_reason))
    totals = summarize_clean(rows)
    print(f"\nsucceeded {totals['succeeded']}/{totals['n']}; no finding at the top {totals['no_finding_at_top']}/"
          f"{totals['n']}; uncertain {totals['uncertain']}/{totals['n']}; mean confidence "
          f"{totals['mean_confidence']}; any finding anywhere {totals['any_finding']}/{totals['n']}; errors "
          f"{sum(1 for r in rows if 'error' in r)}")
    if totals["top_finding_families"]:
        print("false findings at the top by family: " + ", ".join(f"{k} {v}" for k, v in
                                                                 totals["top_finding_families"].items()))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "totals": totals}, indent=2, default=str))
    return 0 if all("error" not in r and r["score"]["status"] == "success" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
