"""A fleet night: 1,000 imported runs diagnosed with ``graph`` — runs per second at ``--jobs 1`` and ``--jobs 2``
(issue 23 item 3), plus the import and ``stats`` times on the way.

The runs are what a fleet sends: the failing example team (examples/autogen_team.py on AutoGen's real OpenAI client,
answered by causaltrace.testing.openai_wire) traced once by the real OpenInference AgentChat instrumentor and once by
autogen-core's own GenAI spans; each of the N traces is one of the two with its own trace id (alternating), imported
by the OTLP importer (``runs_from_otlp``) into a fresh SQLite store in one transaction. Each ``--jobs`` value then
diagnoses all N runs of its own copy of that store with :func:`causaltrace.attribution.fleet.diagnose_all` (graph,
no model: deterministic), timed end to end (worker start-up included; ``first_result_seconds`` is the time to the
first stored diagnosis, ``by_workers`` how many runs the worker processes did — the rest were done in the calling
process while they started); finally ``fleet_stats`` aggregates the N diagnoses. One measurement per setting: run it
on a quiet machine and say how loaded it was (``load_average_at_start`` / ``_at_end``).

``--big-trace N`` instead times ``causaltrace import`` of one OTLP/JSON file of an N-span OpenInference trace (issue
23's "a 100k-span file": agent, LLM and tool spans under one root; seconds and the peak memory of the importing
process).

Usage: python benchmarks/bench_fleet.py [--runs 1000] [--jobs 1,2] [--json OUT] | --big-trace 100000
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))


def _team_request(openinference: bool) -> dict[str, Any]:
    """One traced run of the failing example team as an OTLP/JSON request (protobuf-JSON: base64 ids)."""
    from google.protobuf.json_format import MessageToDict
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from causaltrace.testing.openai_wire import arithmetic_team_endpoints

    example = importlib.import_module("autogen_team")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace._TRACER_PROVIDER = provider  # the global provider, as the instrumentors and autogen-core use it
    instrumentor = AutogenAgentChatInstrumentor()
    if openinference:
        instrumentor.instrument(tracer_provider=provider)
    try:
        team = example.build_with(tuple(e.autogen_client() for e in arithmetic_team_endpoints(off_by_one=True)))
        exporter.clear()
        if openinference:
            asyncio.run(team.run(task=example.TASK))
        else:
            with provider.get_tracer("nightly").start_as_current_span("nightly-batch.run"):
                asyncio.run(team.run(task=example.TASK))
    finally:
        if openinference:
            instrumentor.uninstrument()
    return MessageToDict(encode_spans(exporter.get_finished_spans()))


def _with_trace_id(request: dict[str, Any], k: int) -> dict[str, Any]:
    """The request with every span moved to trace number ``k`` (a fresh trace id), as another night's run."""
    new_id = base64.b64encode(hashlib.sha256(f"fleet-{k}".encode()).digest()[:16]).decode()
    out = json.loads(json.dumps(request))
    for resource in out["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["traceId"] = new_id
    return out


def _import(db: Path, requests: list[dict[str, Any]], n: int) -> tuple[list[str], float]:
    from causaltrace.collector.otlp import runs_from_otlp
    from causaltrace.collector.store import Store

    started = time.perf_counter()
    ids: list[str] = []
    with Store(str(db)) as store, store.transaction():
        for k in range(n):
            (run,) = runs_from_otlp(_with_trace_id(requests[k % len(requests)], k))
            store.import_run(run)
            ids.append(run.run_id)
    return ids, time.perf_counter() - started


def _finish_times() -> tuple[list[float], Any]:
    """A progress callback that notes when each diagnosis was stored (seconds from now), and that list."""
    began, finished = time.perf_counter(), []

    def tick(done: int, total: int, diagnosis: Any) -> None:
        finished.append(time.perf_counter() - began)

    return finished, tick


def _big_trace_file(path: Path, n_spans: int) -> None:
    """One OpenInference trace of ``n_spans`` spans: a CHAIN root, then AGENT, LLM (quoting the previous answer,
    calling a tool) and TOOL spans in turn, written as OTLP/JSON lines of 2,000 spans each."""
    def attrs(values: dict[str, str]) -> list[dict[str, Any]]:
        return [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]

    trace_id, previous, batch = "e" * 32, "the task", []
    with path.open("w") as out:
        for i in range(1, n_spans + 1):
            if i == 1:
                values = {"openinference.span.kind": "CHAIN", "input.value": previous}
            elif i % 3 == 0:
                values = {"openinference.span.kind": "AGENT", "graph.node.id": f"agent{i % 5}"}
            elif i % 3 == 1:
                values = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
                          "llm.input_messages.0.message.content": previous,
                          "llm.output_messages.0.message.content": f"answer {i}",
                          "llm.output_messages.0.message.tool_calls.0.tool_call.id": f"c{i}",
                          "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "add",
                          "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"a": 1}'}
                previous = f"answer {i}"
            else:
                values = {"openinference.span.kind": "TOOL", "tool.name": "add", "output.value": str(i)}
            batch.append({"traceId": trace_id, "spanId": f"{i:016x}", "name": "span", "attributes": attrs(values),
                          "startTimeUnixNano": str(i * 1000), "endTimeUnixNano": str(i * 1000 + 500),
                          **({"parentSpanId": f"{1:016x}"} if i > 1 else {})})
            if len(batch) == 2000 or i == n_spans:
                out.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")
                batch = []


def _big_trace(n_spans: int, work: Path) -> dict[str, Any]:
    """``causaltrace import`` of one ``n_spans``-span trace file in a child process: seconds, peak memory."""
    import resource
    import subprocess

    path = work / "big-trace.jsonl"
    _big_trace_file(path, n_spans)
    env = {**os.environ, "CAUSALTRACE_HOME": str(work / "big-home")}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "causaltrace.cli", "import", str(path), "--format", "otlp-json"],
                          env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"spans": n_spans, "file_mb": round(path.stat().st_size / 2**20, 1), "seconds": round(seconds, 1),
            "peak_rss_mb": round(peak_mb), "runs": len(done.stdout.split())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--jobs", default="1,2", help="comma-separated --jobs values (default 1,2)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--big-trace", type=int, default=None, metavar="N",
                        help="instead: time the import of one N-span OpenInference trace file")
    args = parser.parse_args()
    if args.big_trace:
        work = Path(tempfile.mkdtemp(prefix="bench-fleet-big-"))
        try:
            big = {"load_average_at_start": os.getloadavg(), **_big_trace(args.big_trace, work),
                   "load_average_at_end": os.getloadavg()}
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(big, indent=2))
        return

    from causaltrace.attribution.fleet import diagnose_all
    from causaltrace.collector.fleet_stats import fleet_stats
    from causaltrace.collector.store import Store

    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    os.environ["CAUSALTRACE_HOME"] = str(work / "home")
    try:
        requests = [_team_request(openinference=True), _team_request(openinference=False)]
        base = work / "imported.db"
        ids, import_s = _import(base, requests, args.runs)
        results: dict[str, Any] = {
            "runs": args.runs, "cpus": os.cpu_count(), "load_average_at_start": os.getloadavg(),
            "import": {"seconds": round(import_s, 2), "runs_per_second": round(args.runs / import_s, 1)},
            "diagnose": {},
        }
        for jobs in (int(j) for j in args.jobs.split(",")):
            db = work / f"jobs{jobs}.db"
            shutil.copy(base, db)
            finished, tick = _finish_times()
            result = diagnose_all(str(db), ids, method="graph", jobs=jobs, progress=tick)
            assert result.diagnosed == args.runs and not result.errors, result.errors[:3]
            results["diagnose"][f"jobs_{jobs}"] = {
                "seconds": round(result.seconds, 2), "runs_per_second": round(result.runs_per_second, 1),
                "first_result_seconds": round(finished[0], 2),  # the fixed cost: imports, store, workers' start
                "by_workers": getattr(result, "by_workers", None),  # None: a commit before it was counted
            }
            print(f"jobs={jobs}: {args.runs} runs in {result.seconds:.1f} s = {result.runs_per_second:.1f} runs/s "
                  f"(first after {finished[0]:.2f} s, {getattr(result, 'by_workers', '?')} by the workers)", file=sys.stderr)
            last_db = db
        started = time.perf_counter()
        with Store(str(last_db), readonly=True) as store:
            stats = fleet_stats(store)
        results["stats"] = {"seconds": round(time.perf_counter() - started, 2), "diagnosed": stats.diagnosed,
                            "top_agent": stats.by_agent[0].key if stats.by_agent else None,
                            "top_step_kind": stats.by_step_kind[0].key if stats.by_step_kind else None}
        results["load_average_at_end"] = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
