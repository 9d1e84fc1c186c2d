"""What the tracing benchmarks of issue 35 share (bench_tracing_bad_input.py, bench_knobs.py): a framework traced by
causaltrace on a fresh provider, the store flushed, framework events counted as the overhead benchmarks count them.
(The teams themselves come from ``_call_counter.team``, built by the overhead benchmarks' own builders.)"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _overhead_stats import CountingExporter

__all__ = ["ByteCountingExporter", "flush", "framework_events", "keep_results_unrepresented", "timed_run", "traced"]


class ByteCountingExporter(CountingExporter):
    """Counts spans and the bytes of their attribute and event-attribute values (the content a backend receives)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def export(self, spans: Sequence[Any]) -> Any:
        for span in spans:
            self.bytes += _value_bytes(span.attributes)
            for event in span.events:
                self.bytes += _value_bytes(event.attributes)
        return super().export(spans)


def _value_bytes(attributes: Any) -> int:
    total = 0
    for value in (attributes or {}).values():
        if isinstance(value, str):
            total += len(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, (list, tuple)):
            total += sum(len(str(v)) for v in value)
        else:
            total += len(str(value))
    return total


@contextlib.contextmanager
def traced(config: Any, processors: Sequence[Any] = (), *, framework: str = "autogen") -> Iterator[Any]:
    """``framework`` (``autogen`` / ``smolagents``) instrumented by causaltrace with ``config`` on a fresh provider
    (SimpleSpanProcessor, no global provider set: AutoGen's own spans are no-ops): yields the byte-counting exporter
    (or None when ``processors`` — span processors of the caller's — are used instead); uninstrumented, the set-up
    forgotten (the store flushed) and the provider shut down (its processors flushed) at the end."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from causaltrace.instrumentation.tracing import reset_tracing

    if framework == "autogen":
        from causaltrace.instrumentation.autogen import instrument_autogen as instrument
        from causaltrace.instrumentation.autogen import uninstrument_autogen as uninstrument
    else:
        from causaltrace.instrumentation.smolagents import instrument_smolagents as instrument
        from causaltrace.instrumentation.smolagents import uninstrument_smolagents as uninstrument

    provider = TracerProvider()
    exporter = None
    if not processors:
        exporter = ByteCountingExporter()
        processors = [SimpleSpanProcessor(exporter)]
    for processor in processors:
        provider.add_span_processor(processor)
    instrument(provider, config)
    try:
        yield exporter
    finally:
        uninstrument()
        reset_tracing()
        provider.shutdown()


def flush() -> None:
    """The collector's pending store writes, done (a no-op when nothing is instrumented)."""
    from causaltrace.instrumentation import tracing

    if tracing._TRACING is not None:
        tracing._TRACING.collector.flush()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def keep_results_unrepresented() -> None:
    """Install a SIGINT handler of our own, so ``asyncio.run`` leaves SIGINT alone. Otherwise, on the main thread,
    Python 3.11's Runner checks ``signal.getsignal(SIGINT)`` after each run, which fails to make an enum of its own
    handler and formats the error message with the repr of the main task — a repr that walks the whole result: a
    50 MB TaskResult's pydantic repr costs 0.1-0.2 s a run, traced or not (noise the measure would carry)."""
    signal.signal(signal.SIGINT, _interrupt)


def timed_run(make: Callable[[], Any], task: str) -> tuple[float, Any]:
    """CPU seconds of one ``team.run`` in a fresh event loop (the team built before the clock starts), store flush
    included; and the TaskResult."""
    team = make()
    start = time.process_time()
    result = asyncio.run(team.run(task=task))
    flush()
    return time.process_time() - start, result


def framework_events(result: Any, model_calls: int) -> int:
    """Framework events as bench_autogen_overhead.py counts them: messages and events of the TaskResult (the task
    included), model calls, tool calls."""
    from autogen_agentchat.messages import ToolCallExecutionEvent

    tools = sum(len(m.content) for m in result.messages if isinstance(m, ToolCallExecutionEvent))
    return len(result.messages) + model_calls + tools
