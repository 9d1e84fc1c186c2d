"""Twenty runs at once, and every span accounted for (issue 35 "Bad input"): ``export_stats()`` counts each span
causaltrace's processor did not export.

Twenty threads start together, each with its own team (AutoGen: its own event loop; smolagents: its own agent) on
the reactive scripted models of the demo teams, traced with the default config (store on). The spans go through
causaltrace's ``CountingBatchSpanProcessor`` with a TINY queue to the real OTLP/HTTP exporter, answered by a loopback
receiver that is slow and refuses every third request (HTTP 400, which the exporter does not retry) — so spans are
both dropped by the full queue and lost in refused batches. A second processor keeps a copy of every span created.

Asserted: created == exported + failed + dropped (+ the framework / unexported spans the processor drops on purpose)
from ``export_stats()`` deltas; what the receiver accepted == ``exported``; both loss paths were taken; and the
concurrent runs did not mix: 20 traces, 20 run ids, each trace's spans of one run, each run as many spans as a run
traced alone.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from _builders import capture_spans
from _http import serving
from causaltrace import semconv
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import CountingBatchSpanProcessor, export_stats
from causaltrace.instrumentation.tracing import get_tracing, reset_tracing

RUNS = 20


class _Receiver:
    """What the loopback OTLP receiver saw: spans accepted, spans refused (every third request is a 400)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.accepted = 0
        self.refused = 0

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest.FromString(body)
                spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
                time.sleep(0.02)  # a slow backend: the tiny queue fills meanwhile
                with receiver.lock:
                    receiver.requests += 1
                    refuse = receiver.requests % 3 == 0
                    if refuse:
                        receiver.refused += spans
                    else:
                        receiver.accepted += spans
                self.send_response(400 if refuse else 200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        return Handler


def _autogen() -> tuple[Callable[[], Callable[[], Any]], Callable[..., Any], Callable[[], None]]:
    """(what prepares a fresh demo team's run, instrument, uninstrument) for AutoGen: each run in its own event
    loop."""
    pytest.importorskip("autogen_agentchat")
    from causaltrace.demo import autogen_team as demo
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen

    def run_once() -> Any:
        result = asyncio.run(demo.build_fixed().run(task=demo.TASK))
        return result.messages[-1].content

    return (lambda: run_once), instrument_autogen, uninstrument_autogen


def _smolagents() -> tuple[Callable[[], Callable[[], Any]], Callable[..., Any], Callable[[], None]]:
    """The same for smolagents: each run its own agent, built on the test's thread before the runs start —
    smolagents parses a ``@tool``'s source with ``ast.parse`` when an agent is built, and CPython 3.11 before 3.11.8
    shares the AST constructor's recursion count between threads (gh-106905: "AST constructor recursion depth
    mismatch" at random when twenty threads build agents at once). The runs themselves are concurrent."""
    pytest.importorskip("smolagents")
    from causaltrace.demo import smolagents_team as demo
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents

    def prepare() -> Callable[[], Any]:
        agent = demo.build_fixed()
        return lambda: str(agent.run(demo.TASK))

    return prepare, instrument_smolagents, uninstrument_smolagents


FRAMEWORKS = {"autogen": _autogen, "smolagents": _smolagents}


def _run_together(prepare: Callable[[], Callable[[], Any]], n: int) -> list[Any]:
    """``n`` runs (each prepared on this thread) in ``n`` threads released together; their answers (an exception is
    re-raised here)."""
    barrier = threading.Barrier(n)
    answers: list[Any] = [None] * n
    runs = [prepare() for _ in range(n)]

    def worker(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = runs[i]()
        except BaseException as error:  # handed to the test's thread
            answers[i] = error

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers


def _spans_per_trace(spans: Any) -> Counter[int]:
    return Counter(span.context.trace_id for span in spans)


@pytest.mark.parametrize("framework", ["autogen", "smolagents"])
def test_twenty_concurrent_runs_every_span_exported_or_counted(framework: str) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    prepare, instrument, uninstrument = FRAMEWORKS[framework]()
    receiver = _Receiver()

    # one run traced alone first, in memory: how many spans a run has
    alone_provider, alone = capture_spans()
    instrument(alone_provider, TraceConfig())
    try:
        prepare()()
        get_tracing().collector.flush()
    finally:
        uninstrument()
        reset_tracing()
    per_run = len(alone.get_finished_spans())
    assert per_run > 5

    with serving(receiver.handler()) as url:
        processor = CountingBatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=10),
                                               max_queue_size=16)
        provider, created = capture_spans(before=[processor])
        before = export_stats()
        instrument(provider, TraceConfig())
        try:
            answers = _run_together(prepare, RUNS)
            get_tracing().collector.flush()
        finally:
            uninstrument()
            reset_tracing()
            provider.force_flush()
            provider.shutdown()
        after = export_stats()

    delta = {key: getattr(after, key) - getattr(before, key) for key in vars(after)}
    spans = created.get_finished_spans()
    # every span created is exported, lost in a refused batch, dropped by the full queue, or dropped on purpose
    assert len(spans) == (delta["exported"] + delta["failed"] + delta["dropped"] + delta["framework_dropped"]
                          + delta["unexported_dropped"]), delta
    assert delta["queued"] == delta["exported"] + delta["failed"] + delta["dropped"], delta
    assert receiver.accepted == delta["exported"]  # what the backend has is what export_stats calls exported
    assert receiver.refused > 0 and delta["failed"] >= receiver.refused and delta["failed_batches"] > 0, delta
    assert delta["dropped"] > 0, delta  # the tiny queue overflowed: the test took both loss paths
    # the concurrent runs kept apart: one trace and one run id per run, each as many spans as a run alone
    assert len(answers) == RUNS and all(answers)
    traces = _spans_per_trace(spans)
    assert len(traces) == RUNS and set(traces.values()) == {per_run}, traces
    run_ids: dict[int, set[str]] = {}
    for span in spans:
        run_ids.setdefault(span.context.trace_id, set()).add(span.attributes.get(semconv.RUN_ID))
    assert all(len(ids) == 1 for ids in run_ids.values())
    assert len(set().union(*run_ids.values())) == RUNS
