"""What "agent decisions first" changes, measured on the fault suite (issue 19, "Measured in benchmarks").

For every case of ``causaltrace.testing.faults`` (the zoo included) the planted run is recorded once, diagnosed with
``graph`` (no model) and repaired as ``bench faults`` does (the diagnosis's candidates first, then every other
candidate), in several searches on the same recorded run (``--orders``, default all five):

* ``agent-first`` — today's rule: the agents' decisions, then tool results in a labelled last phase; provenance
  prunes the steps whose values never reach the failing answer; the default ``--concurrency``;
* ``concurrency-1`` — the same search with ``concurrency=1`` (one replay at a time): the same answer, its own time;
* ``unpruned`` — ``agent-first`` without provenance pruning (``prune=False``): what pruning saves, and the check
  that it never changes a decisive step (``decisive_changed_by_pruning`` lists any case where it did);
* ``unordered`` — ``agent-first`` with each step's proposals in minimality order only (``order_proposals=False``):
  what provenance's ordering of the proposals saves (``decisive_changed_by_ordering`` lists any case whose decisive
  step it moved; ``unpruned`` uses no provenance at all, neither pruning nor ordering);
* ``old-order`` — every candidate step in step order, tool results included (the behaviour before issue 19).

Per search it prints: localized (the repaired step is the case's true step) and repaired rates, how many decisive
steps are tool results that the old rule reported as an agent's decisive error, replays per case (median, max),
seconds per case, the median repair / run wall-time ratio (repair wall time over the original run's recorded wall
time, per case), the candidate steps provenance pruned, and for every repair pair the two structural checks
(``chosen`` differs from ``rejected``; they differ in exactly one part). The third pair check (substituting
``chosen`` reproduces the flip) runs in ``tests/replay/test_pairs_training.py`` on a fixed subset.

    python benchmarks/bench_repair_order.py [--case NAME,...] [--orders agent-first,unpruned,...] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any


def _differences(chosen: dict[str, Any], rejected: dict[str, Any]) -> list[str]:
    out = ["content"] if chosen.get("content") != rejected.get("content") else []
    a, b = chosen.get("tool_calls") or [], rejected.get("tool_calls") or []
    if len(a) != len(b):
        return [*out, "tool_calls"]
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        out += [f"tool_calls[{i}].{f}" for f in ("name", "arguments") if x["function"].get(f) != y["function"].get(f)]
    return out


#: search name -> repair() options; none bounds the alternatives (``max_alternatives=None``): the orders are
#: compared like for like with ``old-order``, which has no such budget
ORDERS: dict[str, dict[str, Any]] = {
    "agent-first": {"agent_first": True, "max_alternatives": None},
    "concurrency-1": {"agent_first": True, "concurrency": 1, "max_alternatives": None},
    "unordered": {"agent_first": True, "order_proposals": False, "max_alternatives": None},
    "unpruned": {"agent_first": True, "prune": False, "max_alternatives": None},
    "old-order": {"agent_first": False, "prune": False, "max_alternatives": None},
}


async def _case(case: Any, orders: list[str]) -> dict[str, Any]:
    """Every search on one recorded run (the scripted teams are deterministic)."""
    from causaltrace.attribution.engine import diagnose
    from causaltrace.replay.repair import repair
    from causaltrace.testing.faults import runner

    out: dict[str, Any] = {"name": case.name, "fault": case.fault, "framework": case.framework}
    started = time.perf_counter()
    run = await runner.record(case)
    out["run_seconds"] = time.perf_counter() - started
    true_step = case.true_step(run)
    diagnosis = await diagnose(run, "graph", None, store=False) if _takes_store() else await diagnose(run, "graph")
    allowed = {s.step_id for s in run.candidate_steps()}
    first = [c.step_id for c in diagnosis.candidates if c.step_id in allowed]
    rest = [s.step_id for s in run.candidate_steps() if s.step_id not in set(first)]
    for order in orders:
        t0 = time.perf_counter()
        replays, found, pair, tool_step, pruned = 0, None, None, False, []
        for candidates in (first, rest):
            if not candidates:
                continue
            res = await repair(run, case.factory, case.verify, candidates=candidates, k=0, diagnosis=diagnosis,
                               store=False, **ORDERS[order])
            replays += res.replays
            pruned += res.pruned
            if res.repaired:
                step = run.step(res.decisive.step_id)
                found, pair, tool_step = step.index, res.pair, step.kind == "tool_response"
                break
        seconds = time.perf_counter() - t0
        out[order] = {"replays": replays, "found": found, "localized": found == true_step,
                      "repaired": found is not None, "tool_result_decisive": tool_step, "seconds": seconds,
                      "pair": pair is not None, "pruned": pruned,
                      "pair_ok": pair is None or (pair.chosen != pair.rejected
                                                  and len(_differences(pair.chosen, pair.rejected)) == 1)}
    return out


def _takes_store() -> bool:
    import inspect

    from causaltrace.attribution.engine import diagnose

    return "store" in inspect.signature(diagnose).parameters


def _summary(rows: list[dict[str, Any]], order: str) -> dict[str, Any]:
    mine = [r[order] for r in rows if order in r]
    n = len(mine)
    replays = [m["replays"] for m in mine]
    ratio = [r[order]["seconds"] / max(r["run_seconds"], 1e-6) for r in rows if order in r]
    return {
        "n": n,
        "localized_rate": round(100 * sum(m["localized"] for m in mine) / n, 2),
        "repaired_rate": round(100 * sum(m["repaired"] for m in mine) / n, 2),
        "tool_result_decisive": sum(m["tool_result_decisive"] for m in mine),
        "replays_median": statistics.median(replays), "replays_max": max(replays),
        "replays_mean": round(statistics.mean(replays), 2),
        "seconds_per_case_median": round(statistics.median(m["seconds"] for m in mine), 2),
        "repair_run_ratio_median": round(statistics.median(ratio), 1),
        "pairs": sum(m["pair"] for m in mine), "pairs_failing_checks": sum(not m["pair_ok"] for m in mine),
        "pruned_steps": sum(len(m.get("pruned", [])) for m in mine),
        "cases_with_pruning": sum(bool(m.get("pruned")) for m in mine),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="comma-separated case names (default: all)")
    parser.add_argument("--json", help="write the rows and summaries to this file")
    parser.add_argument("--orders", default=",".join(ORDERS), help=f"searches to run (default: {','.join(ORDERS)})")
    args = parser.parse_args(argv)
    orders = [o for o in args.orders.split(",") if o]
    unknown = [o for o in orders if o not in ORDERS]
    if unknown:
        parser.error(f"unknown search(es) {unknown}; choose from {list(ORDERS)}")
    import os
    import tempfile

    # the recorded runs go to a throwaway store unless CAUSALTRACE_HOME says where
    os.environ.setdefault("CAUSALTRACE_HOME", tempfile.mkdtemp(prefix="ct-bench-repair-"))
    from causaltrace.testing.faults import all_cases

    cases = all_cases()
    if args.case:
        wanted = set(args.case.split(","))
        cases = [c for c in cases if c.name in wanted]
    rows = []
    for i, case in enumerate(cases, 1):
        try:
            rows.append(asyncio.run(_case(case, orders)))
        except Exception as exc:  # one bad case never stops the benchmark
            rows.append({"name": case.name, "error": f"{type(exc).__name__}: {exc}"})
        row = rows[-1]
        print(f"[{i}/{len(cases)}] {case.name}: " + (row.get("error") or " | ".join(
            f"{o} found #{row[o]['found']} in {row[o]['replays']} replays" for o in orders)),
            file=sys.stderr, flush=True)
    ok = [r for r in rows if "error" not in r]
    report: dict[str, Any] = {order: _summary(ok, order) for order in orders}
    if "agent-first" in orders and "unpruned" in orders:  # pruning must never move the decisive step
        report["decisive_changed_by_pruning"] = [r["name"] for r in ok
                                                 if r["agent-first"]["found"] != r["unpruned"]["found"]]
    if "agent-first" in orders and "unordered" in orders:  # nor must ordering the proposals
        report["decisive_changed_by_ordering"] = [r["name"] for r in ok
                                                  if r["agent-first"]["found"] != r["unordered"]["found"]]
    if "agent-first" in orders and "concurrency-1" in orders:
        report["decisive_changed_by_concurrency"] = [r["name"] for r in ok
                                                     if r["agent-first"]["found"] != r["concurrency-1"]["found"]]
    report["errors"] = [r for r in rows if "error" in r]
    print(json.dumps(report, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"summary": report, "rows": rows}, fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
