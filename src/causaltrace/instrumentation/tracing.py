"""Tracing set-up: the tracer provider, emitter, live collector and config causaltrace emits with in this process.

:func:`configure` is what every ``instrument_*`` function calls (and ``causaltrace.configure`` is); the first run
that needs a set-up without one gets the default (env config, OTLP from ``OTEL_*``) from :func:`get_tracing`.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from opentelemetry import trace

from causaltrace import semconv
from causaltrace.collector.live import RunCollector
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._emitter import Emitter
from causaltrace.instrumentation._export import resolve_provider

__all__ = ["EPOCH", "Tracing", "configure", "get_tracing", "now_ns", "reset_tracing"]

#: The epoch as an aware UTC datetime: ``EPOCH + timedelta(microseconds=ns // 1000)`` is
#: ``collector.live.ns_to_datetime(ns)``, which the step hot path computes inline.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Tracing:
    """The tracer, emitter, collector and config in force for this process."""

    def __init__(self, tracer_provider: trace.TracerProvider | None, config: TraceConfig) -> None:
        self.config = config
        self.provider = resolve_provider(tracer_provider, max_queue_size=config.max_queue_size)
        self.collector = RunCollector(config)  # steps are handed to it directly, never through the provider
        self.tracer = self.provider.get_tracer(semconv.INSTRUMENTATION_NAME)
        self.emitter = Emitter(self.tracer, config)

    def shutdown(self) -> None:
        """The set-up is being replaced or forgotten: its collector writes what it was handed (waiting as a flush
        does) and ends its store writer thread (``RunCollector.shutdown``; a run still going under this set-up
        starts it again until that run is written)."""
        self.collector.shutdown()


_TRACING: Tracing | None = None
_TRACING_LOCK = threading.Lock()


def configure(tracer_provider: trace.TracerProvider | None = None, config: TraceConfig | None = None) -> Tracing:
    """Set (or replace) the tracer provider and config causaltrace emits with; returns the active set-up.

    Called by every ``instrument_*`` function; calling it again with the same arguments keeps the current set-up.
    """
    global _TRACING
    with _TRACING_LOCK:
        current = _TRACING
        if current is not None and (tracer_provider is None or tracer_provider is current.provider):
            if config is None or config == current.config:
                return current
        if current is not None:
            current.shutdown()
        _TRACING = Tracing(tracer_provider, config or TraceConfig.from_env())
        return _TRACING


def get_tracing() -> Tracing:
    """The active set-up, creating the default one (env config, OTLP from ``OTEL_*``) on first use."""
    return _TRACING if _TRACING is not None else configure()


def reset_tracing() -> None:
    """Forget the active set-up (tests)."""
    global _TRACING
    with _TRACING_LOCK:
        if _TRACING is not None:
            _TRACING.shutdown()
        _TRACING = None


def now_ns() -> int:
    """The time now in nanoseconds since the epoch, cut to microseconds (what a Step's datetime keeps)."""
    return time.time_ns() // 1000 * 1000
