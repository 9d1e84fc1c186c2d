"""Where causaltrace's time goes, by stage, for each benchmark team (issue 35 item 1): CPU µs and Python calls per
framework event for hooks, Step construction, payload policy and attributes, the recording, spans, the collector
hand-over and the store.

Each team of ``_call_counter.TEAMS`` runs under causaltrace (``--mode``, default ``ct-store-on``: every stage runs)
with everything synchronous — SimpleSpanProcessor, the store written on the team's thread (``_call_counter``) — and
one run (after two warm-ups) is profiled by a profile function on every thread the team uses, which keeps per frame
the stage in force:

* a function of causaltrace is in the stage of its MODULE (:data:`STAGES`, longest prefix first; a causaltrace
  module not listed is "other causaltrace");
* a function of the framework or the benchmark (:data:`FRAMEWORK_PACKAGES`: AutoGen, smolagents, openai, httpx,
  the scripted models) is "framework (not tracing)", whoever calls it — causaltrace's hooks call the framework's
  original methods;
* any other function — a library: json, pydantic, contextlib, threading… — and every C function is in the stage of
  the frame that called it (it works for that stage); OpenTelemetry and sqlite3 called on causaltrace's behalf are
  stages of their own (:data:`LIBRARY_STAGES`), called by the framework (AutoGen's own no-op spans) they are the
  framework's.

Per stage: Python calls (``call`` events, generator resumptions included), C calls, and CPU time spent in its
functions' own code (the per-thread CPU clock read at every profile event, the profiler's own work between two
reads left out). Under the profiler every call costs more, so the µs are inflated (small functions the most): use
the shares and the calls per event to find the work, and the overhead benchmarks for the true cost. ``--runs N``
also times N unprofiled runs of the team with and without causaltrace (lower quartile of each, CPU of the process)
and prints the stages scaled to that added time ("scaled µs/event"): a direction only on a busy machine.

Run: python benchmarks/bench_stages.py [--team NAME ...] [--mode ct-store-on] [--runs 0] [--json OUT] [--markdown]
(``PYTHONPATH=<tree>/src`` profiles another source tree, e.g. the baseline.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _call_counter as cc

#: Stage → module prefixes (``x.`` a package's modules, ``x`` one module). Longest matching prefix wins.
STAGES: dict[str, tuple[str, ...]] = {
    "hooks": (
        "causaltrace.instrumentation.autogen.",
        "causaltrace.instrumentation.smolagents.",
        "causaltrace.instrumentation.scope",
        "causaltrace.instrumentation.runs",
        "causaltrace.instrumentation.tracing",
        "causaltrace.instrumentation.annotate",
    ),
    "step construction": ("causaltrace.instrumentation.steps", "causaltrace.schema"),
    "payload policy + attributes": (
        "causaltrace.instrumentation._emitter",
        "causaltrace.semconv",
        "causaltrace.config",
        "causaltrace.collector.oi_messages",
        "causaltrace.collector.genai",
        "causaltrace.collector.tool_spans",
        "causaltrace.instrumentation.autogen._oi",
        "causaltrace.instrumentation.smolagents._oi",
    ),
    "recording (canonical request, hashes)": ("causaltrace.recording", "causaltrace.instrumentation.calls"),
    "spans (OTel API + SDK, export)": ("causaltrace.instrumentation._export",),  # + opentelemetry: LIBRARY_STAGES
    "collector hand-over": ("causaltrace.collector.live", "causaltrace.collector.backlog", "causaltrace.collector.writers"),
    "store writes + chunking": (
        "causaltrace.collector.store",
        "causaltrace.collector.store_sql",
        "causaltrace.collector.store_sqlite",
        "causaltrace.collector.store_postgres",
        "causaltrace.collector.recording_chunks",
        "causaltrace.collector.recording_otlp",
        "causaltrace.collector._migrations",
    ),  # + sqlite3: LIBRARY_STAGES
}
OTHER_CT, FRAMEWORK = "other causaltrace", "framework (not tracing)"
ORDER = (*STAGES, OTHER_CT, FRAMEWORK)
_PREFIXES = sorted(((p, s) for s, ps in STAGES.items() for p in ps), key=lambda item: -len(item[0]))
#: The framework's and the benchmark's own code: never tracing, whoever calls it (causaltrace's hooks call the
#: framework's original methods).
FRAMEWORK_PACKAGES = (
    "autogen_agentchat", "autogen_core", "autogen_ext", "smolagents", "openai", "httpx", "httpcore",
    "causaltrace.testing", "autogen_team", "smolagents_agents", "bench_autogen_overhead", "bench_smolagents_overhead",
    "_call_counter", "_overhead_stats", "bench_stages", "__main__",
)
#: Libraries whose work for causaltrace is a stage of its own (on the framework's behalf it is the framework's).
LIBRARY_STAGES = {"opentelemetry": "spans (OTel API + SDK, export)", "sqlite3": "store writes + chunking"}


def _under(module: str, packages: tuple[str, ...] | Any) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def stage_of(module: str) -> str | None:
    """The stage of a function of ``module``: its own for causaltrace's modules (:data:`STAGES`), FRAMEWORK for
    the framework's; None for a library function (json, pydantic, threading, a C function…), whose stage is its
    callers' (module docstring)."""
    if _under(module, FRAMEWORK_PACKAGES):
        return FRAMEWORK
    for prefix, stage in _PREFIXES:
        if cc.in_modules(module, (prefix,)):
            return stage
    if cc.in_modules(module, cc.CAUSALTRACE, cc.NOT_CAUSALTRACE):
        return OTHER_CT
    return None


class _StageTable:
    """One thread's stage profile: a stack of the stage in force per frame, and per stage the Python calls, the C
    calls and the thread CPU time spent in its functions' own code (between profile events)."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.roles: dict[Any, tuple[str | None, str | None]] = {}
        self.calls = dict.fromkeys(ORDER, 0)
        self.c_calls = dict.fromkeys(ORDER, 0)
        self.ns = dict.fromkeys(ORDER, 0)
        self.last = time.thread_time_ns()

    def _role(self, frame: Any) -> tuple[str | None, str | None]:
        module = frame.f_globals.get("__name__") or ""
        stage = stage_of(module)
        library = None if stage is not None else _under(module, LIBRARY_STAGES)
        return stage, LIBRARY_STAGES[library] if library else None

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        now = time.thread_time_ns()
        stack = self.stack
        current = stack[-1] if stack else FRAMEWORK
        self.ns[current] += now - self.last
        if event == "call":
            code = frame.f_code
            role = self.roles.get(code)
            if role is None:
                role = self.roles[code] = self._role(frame)
            stage, library = role
            if stage is None:  # a library function works for its caller's stage
                stage = current if library is None or current == FRAMEWORK else library
            stack.append(stage)
            self.calls[stage] += 1
        elif event == "return":
            if stack:
                stack.pop()
        elif event == "c_call":
            self.c_calls[current] += 1
        self.last = time.thread_time_ns()


def stage_profile(team: cc.Team, mode: str) -> dict[str, dict[str, float]]:
    """One profiled run of ``team`` under ``mode`` (after warm-ups): per stage its calls, C calls and CPU µs."""
    profiler = cc.ThreadProfiler(_StageTable)
    with cc.mode(mode, team.framework):
        for _ in range(2):
            team.run()
        with cc.quiet_gc(), profiler.counting():
            team.run()
    totals = {stage: {"calls": 0.0, "c_calls": 0.0, "us": 0.0} for stage in ORDER}
    for table in profiler.tables:
        for stage in ORDER:
            totals[stage]["calls"] += table.calls[stage]
            totals[stage]["c_calls"] += table.c_calls[stage]
            totals[stage]["us"] += table.ns[stage] / 1000
    return totals


def _cpu_per_run(team: cc.Team, mode: str, runs: int) -> float:
    """Lower quartile of ``runs`` unprofiled runs' process CPU seconds under ``mode`` (after one warm-up)."""
    import statistics

    times = []
    with cc.mode(mode, team.framework):
        team.run()
        for _ in range(runs):
            start = time.process_time()
            team.run()
            times.append(time.process_time() - start)
    return statistics.quantiles(times, n=4)[0] if len(times) > 1 else times[0]


def profile_team(name: str, mode: str, runs: int) -> dict[str, Any]:
    team = cc.team(name)
    totals = stage_profile(team, mode)
    result: dict[str, Any] = {
        "events": team.events,
        "stages": {
            stage: {
                "profiled_us_per_event": round(totals[stage]["us"] / team.events, 1),
                "calls_per_event": round(totals[stage]["calls"] / team.events, 1),
                "c_calls_per_event": round(totals[stage]["c_calls"] / team.events, 1),
            }
            for stage in ORDER
        },
    }
    if runs:
        added = (_cpu_per_run(team, mode, runs) - _cpu_per_run(team, "baseline", runs)) * 1e6
        tracing = sum(totals[s]["us"] for s in ORDER if s != FRAMEWORK)
        result["added_cpu_us_per_event"] = round(added / team.events, 1)
        for stage in ORDER:
            if stage != FRAMEWORK and tracing > 0:
                share = totals[stage]["us"] / tracing
                result["stages"][stage]["scaled_us_per_event"] = round(added * share / team.events, 1)
    return result


def _table(name: str, result: dict[str, Any], markdown: bool) -> list[str]:
    stages = result["stages"]
    scaled = "scaled_us_per_event" in stages[ORDER[0]]
    head = ["stage", "profiled µs/event", "share of tracing", "calls/event", "C calls/event"] + (
        ["scaled µs/event"] if scaled else []
    )
    tracing = sum(stages[s]["profiled_us_per_event"] for s in ORDER if s != FRAMEWORK) or 1.0
    rows = []
    for stage in ORDER:
        row = stages[stage]
        share = "" if stage == FRAMEWORK else f"{100 * row['profiled_us_per_event'] / tracing:.0f} %"
        rows.append(
            [stage, f"{row['profiled_us_per_event']:.1f}", share, f"{row['calls_per_event']:.1f}", f"{row['c_calls_per_event']:.1f}"]
            + ([f"{row.get('scaled_us_per_event', '')}"] if scaled else [])
        )
    total_calls = sum(stages[s]["calls_per_event"] for s in ORDER if s != FRAMEWORK)
    rows.append(["tracing total", f"{tracing:.1f}", "100 %", f"{total_calls:.1f}", ""] + ([""] if scaled else []))
    title = f"{name}: {result['events']} framework events per run" + (
        f"; added CPU {result['added_cpu_us_per_event']} µs/event unprofiled" if scaled else ""
    )
    if markdown:
        return [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + [
            "| " + " | ".join(r) + " |" for r in rows
        ] + [""]
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return [title] + ["  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in [head, *rows]] + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--team", action="append", choices=cc.TEAMS, help="a team (repeatable; default: all)")
    parser.add_argument("--mode", choices=("ct-store-on", "ct-store-off"), default="ct-store-on")
    parser.add_argument("--runs", type=int, default=0, help="also time N unprofiled runs per mode (scaled column)")
    parser.add_argument("--json", help="write the results as JSON to this file")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args(argv)
    cc.examples_on_path()
    results: dict[str, Any] = {"mode": args.mode, "versions": cc.versions(), "teams": {}}
    with cc.temporary_home():
        for name in args.team or cc.TEAMS:
            result = results["teams"][name] = profile_team(name, args.mode, args.runs)
            print("\n".join(_table(name, result, args.markdown)), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
