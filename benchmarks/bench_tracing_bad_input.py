"""Tracing under bad input (issue 35 "Bad input"): a 50 MiB tool result, 20 runs at once, a 10,000-step run.

Every figure is causaltrace with its DEFAULT config (store on, recording on, OpenInference content on; the store in a
temporary directory) on real AutoGen AgentChat classes (and smolagents' in the concurrency case) driven by the
reactive scripted models of ``causaltrace.testing``, against a baseline measured in the same run. CPU is
``time.process_time`` (all threads: the store's writer counts; every traced run ends with the collector's flush).
Spans go through a SimpleSpanProcessor to a discarding exporter that counts them (``benchmarks/_overhead_stats.py``),
and in the concurrency case also through causaltrace's own ``CountingBatchSpanProcessor``, so ``export_stats()`` is
exercised.

1. ``big`` — one AssistantAgent calls a tool that returns a 50 MiB text (``reflect_on_tool_use=False``: the run ends
   with the tool's result, which AutoGen puts in two events, the ToolCallExecutionEvent and the
   ToolCallSummaryMessage; a new result each round: the store keeps a recorded text once, so a result it already
   holds would not be written again). The same run with a 16-byte result is the "small event". The added CPU of the big event
   is ``(traced big - traced small) - (untraced big - untraced small)``: what causaltrace spends on the payload,
   net of what AutoGen itself spends on it. Baseline: ``orjson.dumps`` of the payload + SHA-256 of the bytes.
   Target: <= 3x. The lower quartile of ``--big-repeats`` runs per mode, the modes interleaved. Its parts: the
   spans alone (store and recording off), what the recording adds (store off minus that), what the store adds
   (the defaults minus store off); and what the store holds on disk after them (the database, the files beside
   it) and the bytes each run handed to ``write()`` (the database, its write-ahead log, the files): figures the
   machine's load does not move.
2. ``concurrent`` — the benchmark teams of ``bench_autogen_overhead.py`` (planner, solver, reviewer on scripted
   clients; 15 framework events a run) and ``bench_smolagents_overhead.py`` (the example manager CodeAgent with its
   managed agent on ScriptedModel; 14 events): 20 runs in 20 threads released together, each with its own team or
   agent (AutoGen's each in its own event loop), against the same 20 runs one after another. Per-event added CPU =
   (traced - untraced CPU of a round) / events, the lower quartile over the rounds. Target: at once <= 2x one at
   a time. The ``export_stats()`` deltas are printed and checked: every span created is exported, failed or
   dropped (the counting property is also a test: tests/instrumentation/test_concurrent_runs_export.py).
3. ``long`` — two agents taking turns (RoundRobinGroupChat), each on a BufferedChatCompletionContext: every model
   request carries the system message and the last ``BUFFER`` messages, every answer the same length. A run of
   ``--long-messages`` messages (about 10,000 causaltrace steps) against the same team stopped after 12 messages.
   The content bytes the defaults export are EXCLUDED BY HOLDING THEM EQUAL PER EVENT: a long conversation's
   cost grows with the history each request carries (OpenInference's ``llm.input_messages.*``, the recording's
   requests); with the bounded context that history, and so the content exported per event, is the same in both
   runs, which the benchmark shows by counting the bytes of every exported attribute and event value per framework
   event (printed side by side, and their ratio: the long run carries the fewer, its per-run content — the task,
   the root span, the Recording event, capped at 2 MiB — being spread over more events). What remains is the
   per-event cost that could grow with the run's length (the step graph, dependency links, the collector's
   assembly, the store). Target: long <= 2x short.

Usage: python benchmarks/bench_tracing_bad_input.py [--only big,concurrent,long] [--json OUT]
       [--big-mb 50] [--big-repeats 5] [--threads 20] [--rounds 5] [--long-messages 3350] [--long-repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import itertools
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _overhead_stats import CountingExporter, lower_quartile
from _traced_teams import flush, framework_events, keep_results_unrepresented, timed_run, traced

BUFFER = 6  # messages of history a long-run model request carries


# ------------------------------------------------------------------------------------------ shared plumbing


def default_config(home: Path) -> Any:
    from causaltrace.config import TraceConfig

    return TraceConfig(db_path=home / "bench.db")


# ------------------------------------------------------------------------------------------ 1. a 50 MB tool result


def _big_agent(payload: str) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.tools import FunctionTool

    from causaltrace.testing.autogen import ScriptedChatCompletionClient, call

    async def fetch() -> str:
        """Fetch the document."""
        return payload

    client = ScriptedChatCompletionClient(lambda request: call("fetch") if not request.tool_rounds() else "done")
    return AssistantAgent("reader", model_client=client, tools=[FunctionTool(fetch, description="Fetch the document.")],
                          reflect_on_tool_use=False)


def baseline_dump_and_hash(payload: str, repeats: int) -> float:
    """Lowest CPU seconds of orjson.dumps(payload) + SHA-256 of the bytes."""
    import orjson

    times = []
    for _ in range(repeats):
        start = time.process_time()
        hashlib.sha256(orjson.dumps(payload)).hexdigest()
        times.append(time.process_time() - start)
    return min(times)


def store_bytes(db: Path, big_runs: int) -> dict[str, Any]:
    """What the store holds on disk after the big case (``big_runs`` big runs, each beside a small one, with the
    defaults), a load-independent figure: the database file and the content-addressed files beside it
    (``collector/blob_files.py``: the recorded tool result and its steps' cut, once per big run)."""
    files = [p for p in Path(f"{db}.blobs").rglob("*") if p.is_file()]
    return {"big_runs": big_runs, "database": db.stat().st_size if db.exists() else 0,
            "files": len(files), "files_bytes": sum(p.stat().st_size for p in files)}


def _bytes_written() -> int:
    """The bytes this process has handed to ``write()`` so far (Linux's ``/proc/self/io`` ``wchar``; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def bench_big(home: Path, megabytes: int, repeats: int) -> dict[str, Any]:
    import os

    big = os.urandom(megabytes * 1024 * 1024 // 2).hex()  # 50 MB of text that does not compress or repeat
    small = "x" * 16
    task = "Read the document."
    from causaltrace.config import TraceConfig

    # the defaults, and for information where the time goes: store off, store and recording off
    configs = {"": default_config(home), " store off": TraceConfig(store=False),
               " store+record off": TraceConfig(store=False, record=False)}
    modes = ["untraced small", "untraced big"] + [f"traced{k} {size}" for k in configs for size in ("small", "big")]
    times: dict[str, list[float]] = {m: [] for m in modes}
    wrote: dict[str, list[int]] = {m: [] for m in modes}
    exported: dict[str, int] = {}
    for round_no in range(repeats + 1):  # round 0 warms up
        if round_no:  # a new result each round, as a new run's would be: the store keeps a text once (content-
            big = os.urandom(megabytes * 1024 * 1024 // 2).hex()  # addressed), so the same one would cost it nothing
        for mode in modes:
            payload = big if mode.endswith("big") else small
            config = configs[mode[len("traced"):-len(" big" if mode.endswith("big") else " small")]] \
                if mode.startswith("traced") else None
            written = _bytes_written()
            with traced(config) if config is not None else contextlib.nullcontext() as exporter:
                seconds, _ = timed_run(lambda payload=payload: _big_agent(payload), task)
            if round_no:
                times[mode].append(seconds)
                wrote[mode].append(_bytes_written() - written)
            if exporter is not None:
                exported[mode] = exporter.bytes
    q = {m: lower_quartile(t) for m, t in times.items()}
    framework = q["untraced big"] - q["untraced small"]
    added_by = {k.strip() or "defaults": round(q[f"traced{k} big"] - q[f"traced{k} small"] - framework, 4)
                for k in configs}
    added = added_by["defaults"]
    base = baseline_dump_and_hash(big, repeats)
    # where it goes: the spans alone (store and recording off), what the recording adds, what the store adds
    parts = {"spans": added_by["store+record off"],
             "recording": round(added_by["store off"] - added_by["store+record off"], 4),
             "store": round(added - added_by["store off"], 4)}
    return {
        "payload_bytes": len(big),
        "store_bytes": store_bytes(home / "bench.db", big_runs=repeats + 1),
        # bytes the process handed to write() during a run (the store's database, its log, the files beside it)
        "bytes_written_per_run": {m: min(w) for m, w in wrote.items() if m.startswith("traced ")},
        "cpu_s_lower_quartile": {m: round(v, 4) for m, v in q.items()},
        "added_cpu_s_big_minus_small": round(added, 4),
        "added_cpu_s_big_minus_small_by_config": added_by,
        "added_cpu_s_parts": parts,
        "baseline_orjson_sha256_s": round(base, 4),
        "ratio_to_baseline": round(added / base, 2),
        "target": 3.0,
        "exported_bytes_per_run": exported,
    }


# ------------------------------------------------------------------------------------------ 2. 20 runs at once


def _in_threads(n: int, job: Callable[[], Any]) -> list[Any]:
    """``job`` in ``n`` threads released together (each its own event loop); their results."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def worker(i: int) -> None:
        barrier.wait()
        out[i] = job()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@dataclass
class FreshRuns:
    """A benchmark team as the concurrency case runs it: ``run()`` builds its own team or agent and runs it once
    (safe from many threads at once); ``events`` per run."""

    name: str
    framework: str
    run: Callable[[], Any]
    events: int


def fresh_runs() -> list[FreshRuns]:
    """The AutoGen team of bench_autogen_overhead.py (its runs build their own team) and the smolagents example of
    bench_smolagents_overhead.py (a new agent each run), on scripted models."""
    from _call_counter import _benchmark
    from _call_counter import team as build_team

    autogen = build_team("autogen/scripted")
    smolagents = _benchmark("bench_smolagents_overhead")
    build, task = smolagents._scenarios(smolagents._example(), "scripted")["example"]
    events = smolagents.count_events(build, task)["events"]
    return [FreshRuns(autogen.name, "autogen", autogen.run, autogen.events),
            FreshRuns("smolagents-example/scripted", "smolagents", lambda: build().run(task), events)]


def bench_concurrent(home: Path, team: FreshRuns, threads: int, rounds: int) -> dict[str, Any]:
    """``threads`` runs of ``team`` one after another, then the same runs in ``threads`` threads at once (each its
    own team or agent, AutoGen's each its own event loop); untraced, then traced, in every round."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from causaltrace.instrumentation._export import CountingBatchSpanProcessor, export_stats

    def round_cpu(together: bool) -> float:
        start = time.process_time()
        if together:
            _in_threads(threads, team.run)
        else:
            for _ in range(threads):
                team.run()
        flush()
        return time.process_time() - start

    events = team.events * threads
    per_event: dict[str, list[float]] = {"alone": [], "together": []}
    created = CountingExporter()
    stats_before = export_stats()
    for round_no in range(rounds + 1):  # round 0 warms up
        for label, together in (("alone", False), ("together", True)):
            untraced = round_cpu(together)
            processors = [SimpleSpanProcessor(created), CountingBatchSpanProcessor(CountingExporter())]
            with traced(default_config(home), processors, framework=team.framework):
                traced_cpu = round_cpu(together)
            if round_no:
                per_event[label].append((traced_cpu - untraced) / events * 1e6)
    stats_after = export_stats()
    delta = {k: getattr(stats_after, k) - getattr(stats_before, k) for k in vars(stats_after)}
    unaccounted = created.spans - (delta["exported"] + delta["failed"] + delta["dropped"] + delta["framework_dropped"]
                                   + delta["unexported_dropped"])
    alone, together = lower_quartile(per_event["alone"]), lower_quartile(per_event["together"])
    return {
        "team": team.name,
        "threads": threads,
        "rounds": rounds,
        "events_per_run": team.events,
        "added_cpu_us_per_event": {"alone": round(alone, 1), "together": round(together, 1)},
        "per_round_us_per_event": {k: [round(v, 1) for v in vs] for k, vs in per_event.items()},
        "ratio_together_to_alone": round(together / alone, 2),
        "target": 2.0,
        "spans_created": created.spans,
        "export_stats_delta": delta,
        "spans_unaccounted": unaccounted,
    }


# ------------------------------------------------------------------------------------------ 3. a 10,000-step run


def _chatter(messages: int) -> tuple[Any, Callable[[], int]]:
    """Two agents taking turns for ``messages`` messages (the task included), each request carrying the system
    message and the last BUFFER messages, every answer the same length."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.model_context import BufferedChatCompletionContext

    from causaltrace.testing.autogen import ScriptedChatCompletionClient

    clients = []
    agents = []
    for name in ("writer", "editor"):
        counter = itertools.count()
        client = ScriptedChatCompletionClient(
            lambda request, counter=counter, name=name: f"{name} note {next(counter):06d}: noted, carry on.")
        clients.append(client)
        agents.append(AssistantAgent(name, model_client=client, system_message=f"You are the {name}.",
                                     model_context=BufferedChatCompletionContext(buffer_size=BUFFER)))
    team = RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(messages))
    return team, lambda: sum(c.calls for c in clients)


def _per_event(home: Path, messages: int, repeats: int) -> dict[str, Any]:
    task = "Take turns noting progress."
    untraced, traced_cpu = [], []
    events = spans = content = 0
    for _ in range(repeats):
        team, calls = _chatter(messages)
        start = time.process_time()
        result = asyncio.run(team.run(task=task))
        untraced.append(time.process_time() - start)
        events = framework_events(result, calls())
        with traced(default_config(home)) as exporter:
            seconds, result = timed_run(lambda: _chatter(messages)[0], task)
            spans, content = exporter.spans, exporter.bytes
        traced_cpu.append(seconds)
    added = (lower_quartile(traced_cpu) - lower_quartile(untraced)) / events * 1e6
    return {"messages": messages, "events": events, "spans": spans, "added_cpu_us_per_event": round(added, 1),
            "exported_bytes_per_event": round(content / events, 1)}


def bench_long(home: Path, messages: int, repeats: int, short_repeats: int) -> dict[str, Any]:
    _per_event(home, 12, 2)  # warm-up
    short = _per_event(home, 12, short_repeats)
    long = _per_event(home, messages, repeats)
    return {
        "short": short,
        "long": long,
        "ratio_long_to_short": round(long["added_cpu_us_per_event"] / short["added_cpu_us_per_event"], 2),
        "exported_bytes_per_event_ratio": round(long["exported_bytes_per_event"] / short["exported_bytes_per_event"],
                                                2),
        "target": 2.0,
    }


# ------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="big,concurrent,long", help="comma-separated: big, concurrent, long")
    parser.add_argument("--big-mb", type=int, default=50)
    parser.add_argument("--big-repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the concurrency case")
    parser.add_argument("--long-messages", type=int, default=3350,
                        help="messages of the long run (about 3 steps each: ~10,000 steps)")
    parser.add_argument("--long-repeats", type=int, default=2)
    parser.add_argument("--json", help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("causaltrace").setLevel(logging.ERROR)
    keep_results_unrepresented()
    wanted = {part.strip() for part in args.only.split(",") if part.strip()}
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        if "big" in wanted:
            r = results["big"] = bench_big(home, args.big_mb, args.big_repeats)
            by_config = r["added_cpu_s_big_minus_small_by_config"]
            print(f"{r['payload_bytes'] / 2**20:.0f} MiB tool result: added CPU (big - small event, net of AutoGen's "
                  f"own) {r['added_cpu_s_big_minus_small'] * 1e3:.0f} ms; orjson dump + SHA-256 "
                  f"{r['baseline_orjson_sha256_s'] * 1e3:.0f} ms; ratio {r['ratio_to_baseline']:.2f} (target <= 3); "
                  "added by config: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in by_config.items())
                  + "; parts: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in r["added_cpu_s_parts"].items()))
            b, w = r["store_bytes"], r["bytes_written_per_run"]
            print(f"  the store after {b['big_runs']} big runs: database {b['database'] / 2**20:.1f} MiB, {b['files']} "
                  f"files beside it {b['files_bytes'] / 2**20:.1f} MiB; written per run (write() calls, all files): "
                  + ", ".join(f"{k[len('traced '):]} {v / 2**20:.2f} MiB" for k, v in w.items()))
        if "concurrent" in wanted:
            for team in fresh_runs():
                r = bench_concurrent(home, team, args.threads, args.rounds)
                results.setdefault("concurrent", {})[team.name] = r
                a, d = r["added_cpu_us_per_event"], r["export_stats_delta"]
                print(f"{team.name}, {r['threads']} runs at once: added CPU {a['together']:.0f} µs/event vs "
                      f"{a['alone']:.0f} one at a time; ratio {r['ratio_together_to_alone']:.2f} (target <= 2); spans "
                      f"created {r['spans_created']}, export_stats: exported {d['exported']}, failed {d['failed']}, "
                      f"dropped {d['dropped']}; unaccounted {r['spans_unaccounted']}")
        if "long" in wanted:
            r = results["long"] = bench_long(home, args.long_messages, args.long_repeats, max(5, args.long_repeats))
            s, g = r["short"], r["long"]
            print(f"long run: {g['spans']} spans, {g['events']} events: added CPU {g['added_cpu_us_per_event']:.0f} "
                  f"µs/event vs {s['added_cpu_us_per_event']:.0f} for a {s['events']}-event run; ratio "
                  f"{r['ratio_long_to_short']:.2f} (target <= 2); exported bytes/event "
                  f"{g['exported_bytes_per_event']:.0f} vs {s['exported_bytes_per_event']:.0f} "
                  f"(ratio {r['exported_bytes_per_event_ratio']:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
