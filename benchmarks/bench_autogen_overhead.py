"""Overhead of tracing an AutoGen team: uninstrumented vs OpenInference vs causaltrace (store off / store on).

The scripted example team (examples/autogen_team.py: planner, tool-using solver, reviewer on the reactive scripted
clients) runs many times under each mode. The modes are INTERLEAVED in small batches inside one process —
instrument, run a batch, uninstrument, next mode — so the drifting load of a shared machine hits every mode alike
(both instrumentations restore AutoGen's originals when uninstrumented; they are never active together). Only
``await team.run(task)`` is timed; the team is built before each run. Each top-level ``team.run`` is a run of its own
(no ``causaltrace.run`` block), so causaltrace's time includes finishing and storing the Run.

Modes:
  baseline       no instrumentation
  openinference  openinference-instrumentation-autogen-agentchat
  ct-store-off   causaltrace, TraceConfig(store=False): collector and recording on, no SQLite writes
  ct-store-on    causaltrace, TraceConfig(store=True), CAUSALTRACE_HOME in a temporary directory
  ct-no-record   causaltrace, store off AND record off (for information: what the Recording costs)
  ct-no-spans    causaltrace, store off, on a provider whose sampler drops every trace: steps, collector and
                 recording run, no span is exported (for information: what emitting the spans costs)
  ct-hooks-only  causaltrace's patches in place but passing every call straight through (for information: what the
                 wrapping of AutoGen's methods costs by itself, before any step is built)

Every instrumented mode exports to its own SDK TracerProvider with a SimpleSpanProcessor and a discarding exporter;
no global provider is set, so AutoGen's own spans are no-ops in every mode. Times are CPU time of the process
(``time.process_time``: all threads, so the store's writer thread counts) and wall time; within a round a mode's
figure is the LOWER QUARTILE of its runs (other processes' load only ever adds time), and the time it adds is the
median over rounds of its figure minus the baseline's in the same round (the machine drifts between rounds; the
modes take turns in a rotating order; see ``benchmarks/_overhead_stats.py``). "Per event" divides the added time
by the framework events of one run, counted the same way in every mode: the messages and events of the TaskResult
(the task included), the model calls (the scripted clients' call counters) and the tool calls (the results in the
TaskResult's ToolCallExecutionEvents). The spans each mode exports are counted too, and the time it adds is also
printed per exported span: what it costs for what it produces.

Two model clients, the same team and the same answers (``--client``, default both):
  scripted  the reactive ScriptedChatCompletionClient of ``causaltrace.testing.autogen``, a custom client:
            OpenInference traces no model call of it (it instruments only AutoGen's OpenAI clients), causaltrace
            records an llm_response step and a Recording entry for each — the two do unequal work;
  openai    AutoGen's real OpenAIChatCompletionClient (openai SDK, httpx) on an in-process scripted endpoint
            (``causaltrace.testing.openai_wire``, the same policies): both instrumentations trace every model call,
            as they do for a team on an OpenAI-compatible model — the like-for-like comparison.

Run:  python benchmarks/bench_autogen_overhead.py [--client both] [--batch 10] [--batches 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _overhead_stats import (  # noqa: E402
    CountingExporter,
    counting_provider,
    lower_quartile,
    paired_added,
    ratio_spread,
    rotated,
)

MODES = ("baseline", "openinference", "ct-store-off", "ct-store-on", "ct-no-record", "ct-no-spans", "ct-hooks-only")
CLIENTS = ("scripted", "openai")

#: A fresh team and a function counting the model calls it has made so far.
TeamFactory = Callable[[], tuple[Any, Callable[[], int]]]


def _team_factory(client: str) -> TeamFactory:
    """How each run's team is built: the example's own build() on the scripted clients, or the same team on real
    OpenAI clients talking to scripted endpoints."""
    sys.path.insert(0, str(ROOT / "examples"))
    example = importlib.import_module("autogen_team")
    if client == "scripted":

        def scripted() -> tuple[Any, Callable[[], int]]:
            team = example.build()
            return team, lambda: sum(agent._model_client.calls for agent in team._participants)

        return scripted
    from causaltrace.testing.openai_wire import arithmetic_team_endpoints

    # the clients are made once, as an application makes them (each holds an httpx client); the team is fresh
    endpoints = arithmetic_team_endpoints()
    clients = tuple(endpoint.autogen_client() for endpoint in endpoints)

    def openai() -> tuple[Any, Callable[[], int]]:
        before = sum(endpoint.calls for endpoint in endpoints)
        return example.build_with(clients), lambda: sum(endpoint.calls for endpoint in endpoints) - before

    return openai


class _Modes:
    """Switches the instrumentation of each mode on and off."""

    def __init__(self) -> None:
        from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

        from causaltrace.config import TraceConfig

        self.openinference = AutogenAgentChatInstrumentor()
        #: Per mode: the spans its exporter was given, and the runs made (warm-up included).
        self.exporters = {mode: CountingExporter() for mode in MODES}
        self.runs = dict.fromkeys(MODES, 0)
        self.configs = {
            "ct-store-off": TraceConfig(store=False),
            "ct-store-on": TraceConfig(store=True),
            "ct-no-record": TraceConfig(store=False, record=False),
            "ct-no-spans": TraceConfig(store=False),
            "ct-hooks-only": TraceConfig(store=False),
        }

    def on(self, mode: str) -> None:
        # a fresh provider each time: causaltrace adds its collector to the provider it is configured with
        if mode == "openinference":
            self.openinference.instrument(tracer_provider=counting_provider(self.exporters[mode]))
        elif mode in self.configs:
            from causaltrace.instrumentation.autogen import instrument_autogen

            provider = counting_provider(self.exporters[mode], sampled=mode != "ct-no-spans")
            instrument_autogen(provider, self.configs[mode])
            if mode == "ct-hooks-only":
                from causaltrace.instrumentation.autogen._patches import disable

                disable()  # the patches stay; every wrapper passes the call straight through

    def off(self, mode: str) -> None:
        if mode == "openinference":
            self.openinference.uninstrument()
        elif mode in self.configs:
            from causaltrace.instrumentation.autogen import uninstrument_autogen
            from causaltrace.instrumentation.tracing import get_tracing, reset_tracing

            uninstrument_autogen()
            get_tracing().shutdown()  # the store's pending writes belong to this mode's batch
            reset_tracing()


async def _measure(client: str, batch: int, batches: int, warmup: int) -> dict[str, dict[str, Any]]:
    from autogen_agentchat.messages import ToolCallExecutionEvent

    build = _team_factory(client)
    task = importlib.import_module("autogen_team").TASK

    modes = _Modes()
    cpu: dict[str, list[list[float]]] = {m: [] for m in MODES}  # per round, the per-run times
    wall: dict[str, list[list[float]]] = {m: [] for m in MODES}
    events: dict[str, set[int]] = {m: set() for m in MODES}
    for round_no in range(batches + 1):  # round 0 is the warm-up
        for mode in rotated(MODES, round_no):
            modes.on(mode)
            if round_no:
                cpu[mode].append([])
                wall[mode].append([])
            try:
                for _ in range(warmup if round_no == 0 else batch):
                    team, model_calls = build()
                    start_cpu, start_wall = time.process_time(), time.perf_counter()
                    result = await team.run(task=task)
                    stop_cpu, stop_wall = time.process_time(), time.perf_counter()
                    modes.runs[mode] += 1
                    if round_no == 0:
                        continue
                    cpu[mode][-1].append(stop_cpu - start_cpu)
                    wall[mode][-1].append(stop_wall - start_wall)
                    tools = sum(len(m.content) for m in result.messages if isinstance(m, ToolCallExecutionEvent))
                    events[mode].add(len(result.messages) + model_calls() + tools)
            finally:
                start_cpu = time.process_time()
                modes.off(mode)
                if round_no and mode == "ct-store-on":  # the writes flushed at the end of the batch count
                    flush = (time.process_time() - start_cpu) / batch
                    cpu[mode][-1] = [t + flush for t in cpu[mode][-1]]

    results: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        all_cpu = [t for batch_times in cpu[mode] for t in batch_times]
        all_wall = [t for batch_times in wall[mode] for t in batch_times]
        results[mode] = {
            "cpu_us": lower_quartile(all_cpu) * 1e6,
            "wall_us": lower_quartile(all_wall) * 1e6,
            "cpu_median_us": statistics.median(all_cpu) * 1e6,
            "wall_median_us": statistics.median(all_wall) * 1e6,
            "events": float(next(iter(events[mode]))) if len(events[mode]) == 1 else float("nan"),
            "runs": float(len(all_cpu)),
            "added_cpu_us": paired_added(cpu, mode=mode, baseline="baseline") * 1e6,
            "added_wall_us": paired_added(wall, mode=mode, baseline="baseline") * 1e6,
            "spans_per_run": modes.exporters[mode].spans / modes.runs[mode],
        }
    for mode in ("ct-store-off", "ct-store-on"):
        spread = ratio_spread(cpu, mode=mode, reference="openinference", baseline="baseline")
        results[mode]["ratio_cpu_per_round_q1_median_q3"] = list(spread) if spread else None
    return results


def _report(client: str, results: dict[str, dict[str, Any]], *, batch: int, batches: int) -> None:
    """Print one client's table, ratios and span counts; adds the per-event figures and ratios to ``results``."""
    events = results["baseline"]["events"]
    if any(r["events"] != events for r in results.values()):
        raise SystemExit(f"the modes saw different framework events: {results}")
    label = {"scripted": "scripted clients", "openai": "OpenAI clients on a scripted endpoint"}[client]
    print(
        f"AutoGen team on {label}: {batches} x {batch} runs per mode (interleaved), {events:.0f} framework "
        "events per run (8 messages/events + 5 model calls + 2 tool calls)"
    )
    print("lower quartile of the per-run times; time added = median over rounds of (mode - baseline of the same round):")
    print(f"{'mode':15} {'CPU µs/run':>11} {'wall µs/run':>12} {'added CPU µs/event':>19} {'added wall µs/event':>20}")
    for mode in MODES:
        r = results[mode]
        r["added_cpu_us_per_event"] = r["added_cpu_us"] / events
        r["added_wall_us_per_event"] = r["added_wall_us"] / events
        print(
            f"{mode:15} {r['cpu_us']:11.0f} {r['wall_us']:12.0f} {r['added_cpu_us_per_event']:19.1f}"
            f" {r['added_wall_us_per_event']:20.1f}"
        )
    oi = results["openinference"]
    for mode in ("ct-store-off", "ct-store-on"):
        for kind in ("cpu", "wall"):
            ref = oi[f"added_{kind}_us_per_event"]
            ratio = results[mode][f"added_{kind}_us_per_event"] / ref if ref > 0 else float("inf")
            results[mode][f"ratio_{kind}_to_openinference"] = ratio
        spread = results[mode]["ratio_cpu_per_round_q1_median_q3"]
        print(
            f"ratio {mode} / openinference: {results[mode]['ratio_cpu_to_openinference']:.2f} (CPU), "
            f"{results[mode]['ratio_wall_to_openinference']:.2f} (wall)"
            + (f"; per round (CPU) median {spread[1]:.2f}, quartiles {spread[0]:.2f}-{spread[2]:.2f}" if spread else "")
        )
    spans = {mode: results[mode]["spans_per_run"] for mode in ("openinference", "ct-store-off")}
    print(
        "spans exported per run: "
        + ", ".join(f"{mode} {n:.0f}" for mode, n in spans.items())
        + "; added CPU µs per exported span: "
        + ", ".join(f"{mode} {results[mode]['added_cpu_us'] / n:.0f}" for mode, n in spans.items() if n)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=(*CLIENTS, "both"), default="both", help="the model clients (see above)")
    parser.add_argument("--batch", type=int, default=10, help="runs per mode before switching to the next mode")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json", help="also write the results as JSON to this file, per client")
    args = parser.parse_args()
    clients = CLIENTS if args.client == "both" else (args.client,)
    everything: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAUSALTRACE_HOME"] = home
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        for n, client in enumerate(clients):
            results = asyncio.run(_measure(client, args.batch, args.batches, args.warmup))
            if n:
                print()
            _report(client, results, batch=args.batch, batches=args.batches)
            everything[client] = results
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
