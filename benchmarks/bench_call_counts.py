"""Calls per framework event: a load-independent measure of what tracing costs (issue 35 item 3).

For each benchmark team (AutoGen example on scripted clients and on OpenAI clients over the scripted endpoint;
smolagents example and parallel on ScriptedModel and on OpenAIServerModel) and each mode (causaltrace store off /
store on; OpenInference for comparison), one run after two warm-ups is counted with ``sys.setprofile`` on the team's
thread and the threads it starts (``_call_counter.py`` says how: a SimpleSpanProcessor, the store written on the
team's thread, garbage collection off). Columns, per framework event (events counted as the overhead benchmarks
count them):

* ``traced calls`` — Python calls (``call`` events, generator and coroutine resumptions included) of functions whose
  module is ``causaltrace.*`` (without ``causaltrace.testing``, the scripted models) in the causaltrace modes, or
  ``openinference.*`` in the OpenInference mode: the figure ``benchmarks/call_budget.json`` keeps;
* ``otel calls`` — calls of ``opentelemetry.*`` (both instrumentations build spans with it; AutoGen's own no-op
  spans are in every mode);
* ``C calls`` — C functions called FROM the counted functions (orjson, hashlib, sqlite3, dict methods): reported, not
  budgeted, so that moving work into C is not penalised;
* ``peak KB`` — peak tracemalloc bytes of one more run (every allocation of the run, the framework's too; the
  ``baseline`` row is the uninstrumented run): reported, not asserted.

The counts are deterministic: the same in every run and process (``tests/benchmarks/test_call_budget.py`` compares
them with the budget). Run: python benchmarks/bench_call_counts.py [--team NAME ...] [--mode MODE ...]
[--no-memory] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _call_counter as cc

#: The modules each mode's budgeted figure counts.
COUNTED = {
    "ct-store-off": (cc.CAUSALTRACE, cc.NOT_CAUSALTRACE),
    "ct-store-on": (cc.CAUSALTRACE, cc.NOT_CAUSALTRACE),
    "openinference": (("openinference", "openinference."), ()),
    "baseline": ((), ()),
}


def count(teams: tuple[str, ...] = cc.TEAMS, modes: tuple[str, ...] = cc.MODES, *, memory: bool = False) -> dict[str, Any]:
    """Per team and mode: events, the budgeted calls (per run and per event), otel and C calls, spans and (with
    ``memory``) peak bytes per event — plus a ``baseline`` row per team when ``memory`` is on."""
    results: dict[str, Any] = {}
    for name in teams:
        team = cc.team(name)
        rows: dict[str, Any] = {"events": team.events}
        for mode in (*modes, "baseline") if memory else modes:
            measured = cc.measure(team, mode, memory=memory)
            prefixes, exclude = COUNTED[mode]
            calls = measured.counts.total(prefixes, exclude=exclude)
            rows[mode] = {
                "calls": calls,
                "calls_per_event": round(calls / team.events, 2),
                "otel_calls_per_event": round(measured.counts.total(("opentelemetry.",)) / team.events, 2),
                "c_calls_per_event": round(measured.counts.total(prefixes, exclude=exclude, c=True) / team.events, 2),
                "spans": measured.spans,
            }
            if measured.peak_bytes is not None:
                rows[mode]["peak_bytes_per_event"] = round(measured.peak_bytes / team.events)
        results[name] = rows
    return results


def table(results: dict[str, Any]) -> str:
    head = ("team", "mode", "events", "traced calls/event", "otel calls/event", "C calls/event", "spans", "peak KB/event")
    rows = [head]
    for name, modes in results.items():
        for mode, row in modes.items():
            if mode == "events":
                continue
            peak = row.get("peak_bytes_per_event")
            rows.append(
                (
                    name,
                    mode,
                    str(modes["events"]),
                    f"{row['calls_per_event']:.1f}",
                    f"{row['otel_calls_per_event']:.1f}",
                    f"{row['c_calls_per_event']:.1f}",
                    str(row["spans"]),
                    "" if peak is None else f"{peak / 1024:.1f}",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--team", action="append", choices=cc.TEAMS, help="a team (repeatable; default: all)")
    parser.add_argument("--mode", action="append", choices=cc.MODES, help="a mode (repeatable; default: all)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument("--json", help="also write the results as JSON to this file ('-' = stdout only)")
    args = parser.parse_args(argv)
    cc.examples_on_path()
    with cc.temporary_home():
        results = count(tuple(args.team or cc.TEAMS), tuple(args.mode or cc.MODES), memory=not args.no_memory)
    document = {"versions": cc.versions(), "teams": results}
    if args.json == "-":
        print(json.dumps(document, indent=2))
        return 0
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
