"""OTLP/JSON codec throughput (issue 24 "Measured"): export and import of one 10,000-step run.

The run is built deterministically (seeded): agent turns of 20 steps, each step depending on the one or two before
it, LLM steps with message inputs and token usage, tool calls with arguments, every 50th step an error. Export is
``run_to_otlp`` plus ``json.dumps`` (what ``causaltrace export`` does); import is ``load_otlp_json`` on that text
(what ``causaltrace import --format otlp-json`` does). The import is checked to give the same Run back. Each phase
runs ``--repeat`` times and the median is reported, with steps per second and the document's size.

Usage: python benchmarks/bench_otlp.py [--steps 10000] [--repeat 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from causaltrace.collector.otlp import load_otlp_json, run_to_otlp
from causaltrace.schema import Dependency, Run, Step, StepError, TokenUsage


def make_run(n: int, run_id: str = "bench-otlp") -> Run:
    """A run of ``n`` steps of every common kind (see the module docstring)."""
    rng = random.Random(24)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    steps: list[Step] = []
    turn = None
    for i in range(n):
        fields: dict = {}
        if i % 20 == 0:
            kind, parent, deps = "agent_turn", None, []
            turn = f"{run_id}/{i}"
        else:
            kind = rng.choice(["llm_response", "tool_call", "tool_response", "message"])
            parent = turn
            deps = [Dependency(step_id=f"{run_id}/{i - 1}", kind="saw")]
            if i > 2 and i % 20 > 1:
                deps.append(Dependency(step_id=f"{run_id}/{i - 2}", kind="continues"))
        if kind == "llm_response":
            fields = {"inputs": {"messages": [{"role": "user", "content": f"question {i} " + "q" * 80}]},
                      "usage": TokenUsage(input_tokens=120 + i % 50, output_tokens=17), "model": "gpt-4o-mini"}
        elif kind == "tool_call":
            fields = {"tool_name": "lookup", "inputs": {"arguments": {"q": f"term {i}", "limit": 5, "exact": True}}}
        status = "ok"
        if i % 50 == 49:
            status, fields["error"] = "error", StepError(type="ValueError", message=f"bad value at {i}")
        steps.append(Step(step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind=kind, agent=f"agent{i % 4}",
                          parent_step_id=parent, depends_on=tuple(deps), content=f"step {i} " + "x" * 200,
                          outputs={"text": f"out {i}", "score": i / 7}, started_at=t0 + timedelta(milliseconds=i),
                          ended_at=t0 + timedelta(milliseconds=i + 1), status=status, **fields))
    return Run(run_id=run_id, framework="synthetic", task="a long run", steps=tuple(steps),
               started_at=t0, ended_at=t0 + timedelta(seconds=n / 1000 + 1))


def _median_seconds(fn, repeat: int) -> tuple[float, float, object]:
    """The median wall and CPU seconds of ``repeat`` calls, and the last call's value (CPU time is reported too:
    on a shared machine it moves less with the load)."""
    wall, cpu, value = [], [], None
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        value = fn()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    run = make_run(args.steps)
    export_s, export_cpu, text = _median_seconds(lambda: json.dumps(run_to_otlp(run), ensure_ascii=False) + "\n",
                                                 args.repeat)
    import_s, import_cpu, runs = _median_seconds(lambda: load_otlp_json(text), args.repeat)
    assert runs == [run], "the import did not give the exported run back"
    results = {
        "steps": args.steps,
        "repeat": args.repeat,
        "document_mb": round(len(text.encode()) / 1e6, 2),
        "export_s": round(export_s, 3),
        "export_cpu_s": round(export_cpu, 3),
        "export_steps_per_cpu_s": round(args.steps / export_cpu),
        "import_s": round(import_s, 3),
        "import_cpu_s": round(import_cpu, 3),
        "import_steps_per_cpu_s": round(args.steps / import_cpu),
    }
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
