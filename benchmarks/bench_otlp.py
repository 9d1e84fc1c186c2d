"""OTLP/JSON codec throughput (issue 24 "Measured"): export and import of a 10,000-step run, and a 100 MB file.

The run is built deterministically (seeded): agent turns of 20 steps, each step depending on the one or two before
it, LLM steps with message inputs and token usage, tool calls with arguments, every 50th step an error. Export is
``run_to_otlp`` plus ``json.dumps`` (what ``causaltrace export`` does); import is ``load_otlp_json`` on that text
(what ``causaltrace import --format otlp-json`` does). The import is checked to give the same Run back. Each phase
runs ``--repeat`` times and the median is reported (wall and CPU seconds: on a shared machine CPU time moves less
with the load), with steps per CPU second and the document's size.

``--file-runs N`` also writes N such runs (distinct run ids) as JSON lines to a temporary file — ``--file-runs 4``
is ~120 MB, issue 24's "a 100 MB OTLP file" — and imports it from its path once, reporting the time and the peak
of Python's allocations during that import (``tracemalloc``, measured in a second, separate import, as it slows
what it measures), checked to give the N runs back.

Run it on the codec to compare with ``PYTHONPATH=<worktree>/src``; f341e2e (the hand-written codec) and a4484ca
(json_format for every message) are the "before" of issue 24.

Usage: python benchmarks/bench_otlp.py [--steps 10000] [--repeat 3] [--file-runs 0] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

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


def big_file(run: Run, copies: int, folder: Path) -> tuple[Path, list[Run]]:
    """``copies`` runs like ``run`` (run ids ``-0``, ``-1``…) written as JSON lines; the path and the runs."""
    runs = [run.model_copy(update={"run_id": f"{run.run_id}-{i}", "steps": tuple(
        step.model_copy(update={"run_id": f"{run.run_id}-{i}"}) for step in run.steps)}) for i in range(copies)]
    path = folder / "big.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for one in runs:
            handle.write(json.dumps(run_to_otlp(one), ensure_ascii=False) + "\n")
    return path, runs


def file_import(run: Run, copies: int) -> dict[str, object]:
    """Import of a JSON-lines file of ``copies`` runs from its path: time once, then Python's peak allocations."""
    with tempfile.TemporaryDirectory() as folder:
        path, runs = big_file(run, copies, Path(folder))
        wall, cpu, back = _median_seconds(lambda: load_otlp_json(path), 1)
        assert back == runs, "the file did not give its runs back"
        del back
        tracemalloc.start()
        load_otlp_json(path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {"file_runs": copies, "file_mb": round(path.stat().st_size / 1e6, 1), "file_import_s": round(wall, 3),
                "file_import_cpu_s": round(cpu, 3), "file_import_peak_python_mb": round(peak / 1e6)}


def codec_phases(run: Run, repeat: int) -> dict[str, object]:
    """Export and import of ``run`` in memory: the medians of ``repeat`` rounds."""
    steps = len(run.steps)
    export_s, export_cpu, text = _median_seconds(lambda: json.dumps(run_to_otlp(run), ensure_ascii=False) + "\n",
                                                 repeat)
    import_s, import_cpu, runs = _median_seconds(lambda: load_otlp_json(text), repeat)
    assert runs == [run], "the import did not give the exported run back"
    return {
        "steps": steps,
        "repeat": repeat,
        "document_mb": round(len(text.encode()) / 1e6, 2),
        "export_s": round(export_s, 3),
        "export_cpu_s": round(export_cpu, 3),
        "export_steps_per_cpu_s": round(steps / export_cpu),
        "import_s": round(import_s, 3),
        "import_cpu_s": round(import_cpu, 3),
        "import_steps_per_cpu_s": round(steps / import_cpu),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--file-runs", type=int, default=0, help="also import a JSON-lines file of this many runs")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    run = make_run(args.steps)
    results = codec_phases(run, args.repeat)
    if args.file_runs:
        results.update(file_import(run, args.file_runs))
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
