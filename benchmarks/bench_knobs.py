"""What each TraceConfig knob costs per framework event, relative to the defaults (issue 35 item 4).

The defaults are store on, recording on, OpenInference content on (``TraceConfig()``; the store in a temporary
directory). Each knob is changed alone from them:

  store off        ``store=False`` (the collector still assembles runs; no SQLite writes)
  record off       ``record=False`` (no Recording of LLM / tool calls: no replay)
  content off      ``capture_content=False`` (no OpenInference / GenAI message content on spans)
  genai content    ``genai_content=True`` (the opt-in GenAI content attributes, beside OpenInference's)
  hide in+out      ``hide_inputs=True, hide_outputs=True`` (no step inputs / outputs / content on spans)
  attr 1024        ``max_attribute_chars=1024`` (the default is 16384)
  lightest         all of store off, record off, content off, hide in+out (for information)

on the benchmark teams of ``bench_autogen_overhead.py`` and ``bench_smolagents_overhead.py``, built by their own
builders (scripted clients by default; ``--client openai`` for the real OpenAI clients on a scripted endpoint).
Framework events are counted as those benchmarks count them.

Two measures per knob and team:

* Python calls per event, deterministic (``benchmarks/_call_counter.py``, shared with ``bench_call_counts.py``):
  ``sys.setprofile`` / ``threading.setprofile`` count every Python function call of ONE run (after two warm-up
  runs, garbage collection off) on the team's thread and the threads it starts, with the store written on the
  team's thread (``synchronous_store``: the writer's own loop, batched alike every run) and the spans exported by a
  SimpleSpanProcessor, so every piece of causaltrace's work is counted. Printed: the calls added per event (all
  calls minus the untraced run's, divided by the events) and the calls of causaltrace's own functions per event.
* CPU µs per event (``time.process_time``: all threads): the configs take turns in rounds (rotating order),
  ``--runs`` runs each per round, the store flushed at the end of each run; within a round a config's figure is
  the lower quartile of its runs, and what it adds is the median over rounds of (it - untraced of the same round)
  (``benchmarks/_overhead_stats.py``). Timing on a shared machine is noisy: read the call counts first.

Usage: python benchmarks/bench_knobs.py [--client scripted|openai] [--teams autogen,example,parallel]
       [--runs 5] [--rounds 10] [--json OUT] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _call_counter import CAUSALTRACE, NOT_CAUSALTRACE, CallCounter, Team, quiet_gc, synchronous_store
from _call_counter import team as build_team
from _overhead_stats import paired_added, rotated
from _traced_teams import flush, keep_results_unrepresented, traced

#: Knob name -> the TraceConfig fields changed from the defaults.
KNOBS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "store off": {"store": False},
    "record off": {"record": False},
    "content off": {"capture_content": False},
    "genai content": {"genai_content": True},
    "hide in+out": {"hide_inputs": True, "hide_outputs": True},
    "attr 1024": {"max_attribute_chars": 1024},
    "lightest": {"store": False, "record": False, "capture_content": False, "hide_inputs": True,
                 "hide_outputs": True},
}


@contextmanager
def config_active(team: Team, knob: str | None, home: Path, *, synchronous: bool = False) -> Iterator[None]:
    """The team instrumented with ``knob``'s config (None: untraced); ``synchronous``: the store written on the
    team's thread (``_call_counter.synchronous_store``), so its work is counted there and batched alike every run."""
    if knob is None:
        yield
        return
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.tracing import get_tracing

    with traced(TraceConfig(db_path=home / "knobs.db", **KNOBS[knob]), framework=team.framework):
        if synchronous:
            synchronous_store(get_tracing().collector)
        yield


def count_calls(team: Team, knob: str | None, home: Path) -> tuple[int, int]:
    """Python calls of one run with ``knob`` (None: untraced), after two warm-up runs, garbage collection off:
    (all calls, calls of causaltrace's own functions — ``causaltrace.*`` but its scripted models)."""
    with config_active(team, knob, home, synchronous=True):
        for _ in range(2):  # imports, patching at run start, the store's schema
            team.run()
        counter = CallCounter()
        with quiet_gc(), counter.counting():
            team.run()
    counts = counter.counts()
    return sum(counts.calls.values()), counts.total(CAUSALTRACE, exclude=NOT_CAUSALTRACE)


def time_knobs(team: Team, knobs: list[str], home: Path, runs: int, rounds: int) -> dict[str, list[list[float]]]:
    """CPU seconds of each run (the store's writer thread on, flushed after each run), per config and round
    ("untraced" is the baseline)."""
    names = ["untraced", *knobs]
    cpu: dict[str, list[list[float]]] = {name: [] for name in names}
    for round_no in range(rounds + 1):  # round 0 warms up
        for name in rotated(names, round_no):
            with config_active(team, None if name == "untraced" else name, home):
                team.run()
                flush()
                times = []
                for _ in range(runs):
                    start = time.process_time()
                    team.run()
                    flush()
                    times.append(time.process_time() - start)
            if round_no:
                cpu[name].append(times)
    return cpu


def measure(team: Team, home: Path, runs: int, rounds: int) -> dict[str, Any]:
    knobs = list(KNOBS)
    base_all, _ = count_calls(team, None, home)
    calls = {}
    for knob in knobs:
        every, ours = count_calls(team, knob, home)
        calls[knob] = {"added": round((every - base_all) / team.events, 1), "causaltrace": round(ours / team.events, 1)}
    cpu = time_knobs(team, knobs, home, runs, rounds)
    added = {knob: paired_added(cpu, mode=knob, baseline="untraced") * 1e6 / team.events for knob in knobs}
    return {
        "events_per_run": team.events,
        "untraced_calls_per_event": round(base_all / team.events, 1),
        "calls_per_event": calls,
        "calls_vs_defaults": {k: round(c["added"] / calls["defaults"]["added"], 2) for k, c in calls.items()},
        "added_cpu_us_per_event": {k: round(v, 1) for k, v in added.items()},
        "cpu_vs_defaults": {k: round(v / added["defaults"], 2) if added["defaults"] > 0 else None
                            for k, v in added.items()},
    }


def markdown(results: dict[str, Any], machine: str) -> str:
    """The README table: per knob, added calls and CPU per event on each team, and the ratio to the defaults."""
    teams = list(results)
    head = "| knob | " + " | ".join(f"{t}: calls/event (× defaults), µs/event" for t in teams) + " |"
    lines = [head, "|---" * (len(teams) + 1) + "|"]
    for knob in KNOBS:
        cells = []
        for t in teams:
            r = results[t]
            c = r["calls_per_event"][knob]
            cells.append(f"{c['added']:.0f} ({r['calls_vs_defaults'][knob]:.2f}×), "
                         f"{r['added_cpu_us_per_event'][knob]:.0f}")
        lines.append(f"| {knob} | " + " | ".join(cells) + " |")
    lines.append(f"\n{machine}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=("scripted", "openai"), default="scripted")
    parser.add_argument("--teams", default="autogen,example,parallel")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--markdown", action="store_true", help="also print the README table")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("causaltrace").setLevel(logging.ERROR)
    keep_results_unrepresented()
    names = {"autogen": "autogen/", "example": "smolagents-example/", "parallel": "smolagents-parallel/"}
    teams = [build_team(names[t.strip()] + args.client) for t in args.teams.split(",")]
    results: dict[str, Any] = {}
    machine = (f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
               f"{time.strftime('%Y-%m-%d', time.gmtime())}, {args.rounds} rounds x {args.runs} runs")
    with tempfile.TemporaryDirectory() as tmp:
        for team in teams:
            r = results[team.name] = measure(team, Path(tmp), args.runs, args.rounds)
            print(f"{team.name}: {team.events} events/run; untraced {r['untraced_calls_per_event']} calls/event")
            print(f"  {'knob':14} {'calls/event':>11} {'causaltrace':>11} {'x defaults':>10} {'µs/event':>9} "
                  f"{'x defaults':>10}")
            for knob in KNOBS:
                c = r["calls_per_event"][knob]
                ratio = r["cpu_vs_defaults"][knob]
                print(f"  {knob:14} {c['added']:11.1f} {c['causaltrace']:11.1f} "
                      f"{r['calls_vs_defaults'][knob]:10.2f} {r['added_cpu_us_per_event'][knob]:9.1f} "
                      f"{'' if ratio is None else f'{ratio:10.2f}'}")
    if args.markdown:
        print()
        print(markdown(results, machine))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
