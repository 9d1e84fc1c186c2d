"""A fleet night: 1,000 imported runs diagnosed with ``graph`` — runs per second at ``--jobs 1`` and ``--jobs 2``
(issue 23 item 3), plus the import and ``stats`` times on the way.

The runs are what a fleet sends: the failing example team (examples/autogen_team.py on AutoGen's real OpenAI client,
answered by causaltrace.testing.openai_wire) traced once by the real OpenInference AgentChat instrumentor and once by
autogen-core's own GenAI spans; each of the N traces is one of the two with its own trace id (alternating), imported
by the OTLP importer (``runs_from_otlp``) into a fresh SQLite store in one transaction. Each ``--jobs`` value then
diagnoses all N runs of its own copy of that store with :func:`causaltrace.attribution.fleet.diagnose_all` (graph,
no model: deterministic), timed end to end (worker start-up included); finally ``fleet_stats`` aggregates the N
diagnoses. One measurement per setting: run it on a quiet machine and say how loaded it was.

Usage: python benchmarks/bench_fleet.py [--runs 1000] [--jobs 1,2] [--json OUT]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--jobs", default="1,2", help="comma-separated --jobs values (default 1,2)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

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
            result = diagnose_all(str(db), ids, method="graph", jobs=jobs)
            assert result.diagnosed == args.runs and not result.errors, result.errors[:3]
            results["diagnose"][f"jobs_{jobs}"] = {"seconds": round(result.seconds, 2),
                                                   "runs_per_second": round(result.runs_per_second, 1)}
            print(f"jobs={jobs}: {args.runs} runs in {result.seconds:.1f} s = {result.runs_per_second:.1f} runs/s",
                  file=sys.stderr)
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
