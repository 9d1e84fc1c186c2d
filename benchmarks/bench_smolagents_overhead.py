"""Overhead of tracing smolagents: uninstrumented vs OpenInference vs causaltrace (store off / store on).

The scripted agents of ``examples/smolagents_agents.py`` run many times in one process under each variant:

* ``example`` — the manager CodeAgent with its managed ToolCallingAgent (one run = 4 model calls, 4 action steps,
  6 tool calls incl. the two code executions);
* ``parallel`` — the manager ToolCallingAgent with two managed agents running in parallel threads.

"Framework events" are counted the same way for every variant, on an uninstrumented calibration run: action steps
(``ActionStep`` in every agent's memory) + model calls + tool calls (tools, managed agents, code executions and
``final_answer``, counted with plain counters). The added cost of a variant is its time per run minus the
uninstrumented time per run, divided by the events of one run. "store off" is causaltrace with the SQLite writes off
(``TraceConfig(store=False)``), everything else on — steps, spans, links, the live collector, the recording;
"store on" adds the SQLite writes (done by the collector's background writer). Every variant exports to the same
do-nothing exporter through a ``SimpleSpanProcessor`` on its own ``TracerProvider``. Each top-level ``agent.run``
is a run of its own (no ``causaltrace.run`` block): causaltrace's time includes finishing the Run. The variants take
turns within each round and both wall time and process CPU time are reported; on a loaded machine the CPU time is
the steadier of the two (the store writer's CPU time, on its background thread, is included in "store on"). Each
run is timed on its own; within a round a variant's figure is the LOWER QUARTILE of its runs (a shared machine's load
only ever adds time); the time it adds is the median over rounds of its figure minus the uninstrumented one of the
same round (the machine drifts between rounds; the variants take turns in a rotating order), and the ratio's spread
over the rounds is printed beside it (``benchmarks/_overhead_stats.py``). The spans each variant exports are
counted, and the time it adds is also printed per exported span. Two more variants are for information:
"no record" is store off with the recording off too (what recording the model and tool calls costs), "no spans" is
store off on a provider whose sampler drops every trace (steps, collector and recording run, no span is exported:
what emitting the spans costs).

Two kinds of model, the same agents and the same answers (``--client``, default both):

* ``scripted`` — the ScriptedModel of ``causaltrace.testing.smolagents``, a custom ``Model`` subclass overriding
  ``generate``: OpenInference traces no model call of it (it wraps the ``generate`` of smolagents' own model
  classes), causaltrace records an llm_response step and a Recording entry for each — the two do unequal work;
* ``openai`` — smolagents' real ``OpenAIServerModel`` (openai SDK, httpx) on an in-process scripted endpoint
  (``causaltrace.testing.openai_wire``, the same policies): both instrumentations trace every model call, as they do
  for agents on an OpenAI-compatible model — the like-for-like comparison. Its scenarios are named ``…/openai``.

Target (issue 4): causaltrace store off / OpenInference <= 1.0.

Usage: python benchmarks/bench_smolagents_overhead.py [--client both] [--runs 5] [--rounds 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
import weakref
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


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("smolagents_agents", ROOT / "examples" / "smolagents_agents.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: The scripted endpoint behind each OpenAIServerModel the ``openai`` client made (it counts the model calls).
_ENDPOINTS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _scenarios(example: Any, client: str) -> dict[str, tuple[Callable[[], Any], str]]:
    """Scenario name -> (agent factory, task) for one kind of model client."""
    if client == "scripted":
        factory = None
        suffix = ""
    else:
        from causaltrace.testing.openai_wire import smolagents_endpoint

        def factory(policy: Any) -> Any:
            endpoint = smolagents_endpoint(policy, model="scripted")
            model = endpoint.smolagents_model()
            _ENDPOINTS[model] = endpoint
            return model

        suffix = "/openai"
    return {
        f"example{suffix}": (lambda: example.build(factory), example.TASK),
        f"parallel{suffix}": (lambda: example.build_parallel(factory), example.TASK_PARALLEL),
    }


def _model_calls(model: Any) -> int:
    endpoint = _ENDPOINTS.get(model)
    return endpoint.calls if endpoint is not None else model.calls


def count_events(build: Callable[[], Any], task: str) -> dict[str, int]:
    """Action steps, model calls and tool calls of one uninstrumented run (plain counters, no tracing)."""
    from smolagents import CodeAgent, MultiStepAgent, Tool
    from smolagents.memory import ActionStep

    counts = {"steps": 0, "model_calls": 0, "tool_calls": 0}
    tool_call, agent_call = Tool.__call__, MultiStepAgent.__call__

    def counting_tool(self: Any, *a: Any, **k: Any) -> Any:
        counts["tool_calls"] += 1
        return tool_call(self, *a, **k)

    def counting_agent(self: Any, *a: Any, **k: Any) -> Any:
        counts["tool_calls"] += 1
        return agent_call(self, *a, **k)

    agent = build()
    Tool.__call__, MultiStepAgent.__call__ = counting_tool, counting_agent
    try:
        agent.run(task)
    finally:
        Tool.__call__, MultiStepAgent.__call__ = tool_call, agent_call
    agents = [agent, *agent.managed_agents.values()]
    for a in agents:
        actions = [s for s in a.memory.steps if isinstance(s, ActionStep)]
        counts["steps"] += len(actions)
        counts["model_calls"] += _model_calls(a.model)
        if isinstance(a, CodeAgent):
            counts["tool_calls"] += sum(1 for s in actions if s.code_action)  # the code executions
    counts["events"] = counts["steps"] + counts["model_calls"] + counts["tool_calls"]
    return counts


class _Variant:
    """One way of running the agents: ``setup`` instruments, ``teardown`` undoes it."""

    def __init__(self, name: str, setup: Callable[[], Any], teardown: Callable[[Any], None]) -> None:
        self.name, self.setup, self.teardown = name, setup, teardown


def _variants(tmp: Path, exporters: dict[str, CountingExporter] | None = None) -> list[_Variant]:
    """The variants; ``exporters`` (variant name → its span counter) collects what each one exports."""
    exporters = {} if exporters is None else exporters

    def exporter(name: str) -> CountingExporter:
        return exporters.setdefault(name, CountingExporter())

    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents
    from causaltrace.instrumentation.tracing import get_tracing, reset_tracing

    def oi_setup() -> Any:
        instrumentor = SmolagentsInstrumentor()
        instrumentor.instrument(tracer_provider=counting_provider(exporter("openinference")))
        return instrumentor

    def ct_setup(name: str, *, store: bool, record: bool = True, sampled: bool = True) -> Callable[[], Any]:
        def setup() -> Any:
            config = TraceConfig(store=store, record=record, db_path=tmp / "bench.db")
            instrument_smolagents(counting_provider(exporter(name), sampled=sampled), config)

        return setup

    def ct_teardown(_: Any) -> None:
        get_tracing().collector.flush()
        uninstrument_smolagents()
        reset_tracing()

    return [
        _Variant("uninstrumented", lambda: None, lambda _: None),
        _Variant("openinference", oi_setup, lambda instrumentor: instrumentor.uninstrument()),
        _Variant("causaltrace_store_off", ct_setup("causaltrace_store_off", store=False), ct_teardown),
        _Variant("causaltrace_store_on", ct_setup("causaltrace_store_on", store=True), ct_teardown),
        # for information: what the recording costs, and what emitting the spans costs
        _Variant("causaltrace_no_record", ct_setup("causaltrace_no_record", store=False, record=False), ct_teardown),
        _Variant("causaltrace_no_spans", ct_setup("causaltrace_no_spans", store=False, sampled=False), ct_teardown),
    ]


def measure(
    build: Callable[[], Any], task: str, runs: int, rounds: int
) -> tuple[dict[str, dict[str, list[list[float]]]], dict[str, float]]:
    """Seconds of each ``agent.run``, per clock, variant and round: the variants take turns, ``runs`` runs each per
    round (so a change in the machine's load hits them all alike); wall time and the process's CPU time (all
    threads: what the tracing itself costs, whatever else the machine is doing). Also the spans each variant
    exported per run."""
    agent = build()
    for _ in range(5):
        agent.run(task)
    times: dict[str, dict[str, list[list[float]]]] = {"wall": {}, "cpu": {}}
    exporters: dict[str, CountingExporter] = {}
    with tempfile.TemporaryDirectory() as tmp:
        variants = _variants(Path(tmp), exporters)
        for round_no in range(rounds):
            for variant in rotated(variants, round_no):
                handle = variant.setup()
                wall = times["wall"].setdefault(variant.name, [])
                cpu = times["cpu"].setdefault(variant.name, [])
                wall.append([])
                cpu.append([])
                try:
                    agent.run(task)  # warm: patches model / tool classes at run start
                    for _ in range(runs):
                        w0, c0 = time.perf_counter(), time.process_time()
                        agent.run(task)
                        wall[-1].append(time.perf_counter() - w0)
                        cpu[-1].append(time.process_time() - c0)
                finally:
                    variant.teardown(handle)
    spans = {name: exporter.spans / (rounds * (runs + 1)) for name, exporter in exporters.items()}
    return times, spans


def _rounded(values: tuple[float, ...] | None) -> list[float] | None:
    return [round(v, 2) for v in values] if values is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per variant per round")
    parser.add_argument("--rounds", type=int, default=30, help="rounds (the variants take turns in each)")
    parser.add_argument("--client", choices=("scripted", "openai", "both"), default="both",
                        help="the models: ScriptedModel, OpenAIServerModel on a scripted endpoint, or both")
    parser.add_argument("--json", help="write the results to this file ('-' = stdout)")
    args = parser.parse_args(argv)

    import logging

    logging.getLogger("causaltrace").setLevel(logging.ERROR)
    example = _example()
    scenarios: dict[str, tuple[Callable[[], Any], str]] = {}
    for client in ("scripted", "openai") if args.client == "both" else (args.client,):
        scenarios.update(_scenarios(example, client))
    results: dict[str, Any] = {}
    for name, (build, task) in scenarios.items():
        events = count_events(build, task)
        seconds, spans = measure(build, task, args.runs, args.rounds)
        result: dict[str, Any] = {"events_per_run": events, "spans_per_run": spans}
        print(f"{name}: {events['events']} events/run ({events['steps']} steps, {events['model_calls']} model calls, "
              f"{events['tool_calls']} tool calls)")
        for clock in ("cpu", "wall"):
            per_round = seconds[clock]
            times = {k: lower_quartile([t for r in v for t in r]) for k, v in per_round.items()}
            added = {
                k: paired_added(per_round, mode=k, baseline="uninstrumented") * 1e6 / events["events"]
                for k in per_round
                if k != "uninstrumented"
            }
            oi = added["openinference"]
            result[clock] = {
                "us_per_run": {k: round(v * 1e6, 1) for k, v in times.items()},
                "added_us_per_event": {k: round(v, 1) for k, v in added.items()},
                "ratio_store_off_to_openinference": round(added["causaltrace_store_off"] / oi, 2) if oi > 0 else None,
                "ratio_store_on_to_openinference": round(added["causaltrace_store_on"] / oi, 2) if oi > 0 else None,
                "ratio_store_off_per_round_q1_median_q3": _rounded(
                    ratio_spread(per_round, mode="causaltrace_store_off", reference="openinference",
                                 baseline="uninstrumented")
                ),
                "ratio_store_on_per_round_q1_median_q3": _rounded(
                    ratio_spread(per_round, mode="causaltrace_store_on", reference="openinference",
                                 baseline="uninstrumented")
                ),
            }
            r = result[clock]
            print(f"  [{clock} time: lower quartile of the per-run times; added = median over rounds of (variant - "
                  "uninstrumented in the same round)]")
            for variant, us in r["us_per_run"].items():
                extra = r["added_us_per_event"].get(variant)
                print(f"    {variant:24} {us:10.1f} us/run" + ("" if extra is None else f"   +{extra:7.1f} us/event"))
            spread = r["ratio_store_off_per_round_q1_median_q3"]
            print(f"    ratio causaltrace/OpenInference: store off {r['ratio_store_off_to_openinference']}, "
                  f"store on {r['ratio_store_on_to_openinference']}"
                  + (f"; store off per round: median {spread[1]}, quartiles {spread[0]}-{spread[2]}" if spread else ""))
        cpu_added = result["cpu"]["added_us_per_event"]
        shown = ("openinference", "causaltrace_store_off")
        print("  spans exported per run: " + ", ".join(f"{v} {spans[v]:.0f}" for v in shown)
              + "; added CPU us per exported span: "
              + ", ".join(f"{v} {cpu_added[v] * events['events'] / spans[v]:.0f}" for v in shown if spans[v]))
        results[name] = result
    if args.json:
        text = json.dumps(results, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
