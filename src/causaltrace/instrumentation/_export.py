"""Where spans go: the tracer provider causaltrace uses, the OTLP exporter from ``OTEL_*`` env vars, and counted drops.

Decisions (ARCHITECTURE decision 4, FACTS.md "OpenTelemetry"):

* A user's own SDK ``TracerProvider`` (passed explicitly or set globally) is used as is; causaltrace only adds its
  collector to it. Otherwise causaltrace builds one: resource ``service.name`` from ``OTEL_SERVICE_NAME`` (default
  ``causaltrace``) and ``openinference.project.name`` (the Phoenix project) from ``CAUSALTRACE_PROJECT``, else the
  service name (Phoenix reads only that resource attribute; without it every run lands in ``default``), an OTLP
  exporter when ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
  is set (protocol from ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf`` by default, or ``grpc``), and sets it
  as the global provider when none was set, so the framework's own spans (AutoGen's) land in the same trace.
* Export never blocks the agent: spans go through a batch processor with a large queue; a span dropped because
  the queue is full, or a batch the exporter failed to send, is COUNTED (:func:`export_stats`) and reported in a
  warning, never silent.
* One trace per user run, and nothing else by default (issue 22 item 3): what runs inside :func:`unexported` —
  a replay, and the factory building its team — is stored but not exported (its spans are not sampled: a valid,
  unsampled parent context, so causaltrace's spans and every ParentBased-sampled framework span inside are not
  recorded; causaltrace's own processor also drops any span of such a trace that another sampler recorded).
  ``CAUSALTRACE_EXPORT_REPLAYS=true`` exports replays again (each its own trace, named ``… (replay)``, its
  metadata ``replay.of`` naming the original run); the factory build stays unexported.
* AutoGen's own spans (its runtime's ``autogen publish / process / send / ack / create`` plumbing, and autogen-core's
  ``invoke_agent`` / ``execute_tool`` / ``create_agent`` spans, which would draw a second agent tree beside
  causaltrace's) are dropped by causaltrace's processor and counted in ``export_stats().framework_dropped``;
  ``CAUSALTRACE_AUTOGEN_SPANS=keep`` keeps them. With your own provider (whose processors causaltrace does not
  touch) set ``AUTOGEN_DISABLE_RUNTIME_TRACING=true`` for the runtime's share.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, SynchronousMultiSpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, StaticSampler, TraceIdRatioBased
from opentelemetry.trace import SpanContext, TraceFlags

from causaltrace import semconv

__all__ = [
    "CountingBatchSpanProcessor",
    "ExportStats",
    "count_payload_cuts",
    "default_resource",
    "export_stats",
    "exporting",
    "otlp_exporter_from_env",
    "replays_exported",
    "resolve_provider",
    "attributes_may_follow_start",
    "set_span_attributes",
    "start_span",
    "unexported",
]

logger = logging.getLogger("causaltrace")


@dataclass
class ExportStats:
    """Counts of spans handed to exporters, dropped by a full queue, and lost in failed exports."""

    queued: int = 0
    dropped: int = 0
    exported: int = 0
    failed: int = 0
    #: Export batches given up (the exporter failed or timed out; their spans are in ``failed``).
    failed_batches: int = 0
    #: Framework spans causaltrace's processor dropped (AutoGen's runtime plumbing and duplicate agent tree).
    framework_dropped: int = 0
    #: Spans of unexported traces (a replay, a factory build) that a non-ParentBased sampler recorded anyway.
    unexported_dropped: int = 0
    #: Spans whose texts the payload policy cut to ``max_attribute_chars`` (each also carries
    #: ``causaltrace.step.truncated``).
    truncated: int = 0
    #: Spans with text that was not valid UTF-8 (lone surrogates), exported with U+FFFD in its place.
    text_replaced: int = 0
    #: Spans still queued or in flight when the processor shut down within its bound (process exit): given up,
    #: also counted in ``failed``, and said in one line — whatever the exporter's own timeout is.
    given_up_at_exit: int = 0


_STATS = ExportStats()
_STATS_LOCK = threading.Lock()


def export_stats() -> ExportStats:
    """A snapshot of the export counters of this process."""
    with _STATS_LOCK:
        return ExportStats(**vars(_STATS))


def count_payload_cuts(*, truncated: bool, text_replaced: bool) -> None:
    """Count one span whose payload the policy cut and / or whose non-UTF-8 text was replaced (rare: only such
    spans take the lock)."""
    with _STATS_LOCK:
        _STATS.truncated += truncated
        _STATS.text_replaced += text_replaced


class _CountingExporter(SpanExporter):
    """Wraps an exporter to count what it sent and what it failed to send (an exception counts as a failure)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        #: Spans this exporter sent / lost (its processor tells from them what was given up at exit).
        self.settled = 0
        #: Set when its processor gave up what was left: a late result is no longer counted (it was, as given up).
        self.closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            logger.warning("causaltrace: span exporter %s raised; %d spans lost", type(self.inner).__name__, len(spans))
            result = SpanExportResult.FAILURE
        with _STATS_LOCK:
            if self.closed:
                return result
            self.settled += len(spans)
            if result is SpanExportResult.SUCCESS:
                _STATS.exported += len(spans)
            else:
                _STATS.failed += len(spans)
                _STATS.failed_batches += 1
        if result is not SpanExportResult.SUCCESS:
            _warn_export_failed(self.inner)
        return result

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:
            logger.debug("causaltrace: exporter shutdown failed", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self.inner, "force_flush", None)
        return bool(flush(timeout_millis)) if callable(flush) else True


_WARNED = False
#: The SDK exporters' own loggers: their per-retry warnings become causaltrace's one line (the host's stderr stays
#: readable under a dead endpoint).
_SDK_EXPORT_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)


def _warn_export_failed(exporter: SpanExporter) -> None:
    """ONE warning line per process for failed exports, naming the endpoint; later ones are only counted."""
    global _WARNED
    with _STATS_LOCK:
        first, _WARNED = not _WARNED, True
    if first:
        endpoint = getattr(exporter, "_endpoint", None) or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "?")
        logger.warning(
            "causaltrace: cannot export spans to %s; batches given up are counted in export_stats() (runs are "
            "still stored)",
            endpoint,
        )


class _QuietRetries(logging.Filter):
    """Drops the SDK exporters' retry / failure records (a failed batch is counted and warned about once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR and "encode" in record.getMessage()


def export_timeouts() -> tuple[float, int]:
    """(exporter request timeout in seconds, batch export timeout in ms): ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` /
    ``OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds, as the Python SDK reads them) and ``OTEL_BSP_EXPORT_TIMEOUT`` (ms), with
    defaults of 1 s and 1.5 s instead of the SDK's 10 s and 30 s: a dead endpoint delays a process's exit <= 2 s."""

    def number(names: tuple[str, ...], default: float) -> float:
        for name in names:
            raw = (os.environ.get(name) or "").strip()
            if raw:
                try:
                    value = float(raw)
                except ValueError:
                    logger.warning("causaltrace: %s=%r is not a number; using %s", name, raw, default)
                    return default
                return value if value > 0 else default
        return default

    request_s = number(("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"), 1.0)
    batch_ms = int(number(("OTEL_BSP_EXPORT_TIMEOUT",), 1500))
    return request_s, batch_ms


_UNEXPORTED: ContextVar[bool] = ContextVar("causaltrace_unexported", default=False)
#: Trace ids of the unexported scopes opened so far (bounded): causaltrace's processor drops their spans.
_QUIET_TRACES: set[int] = set()
_FALSE = ("0", "false", "no", "off")


def exporting() -> bool:
    """Whether spans started here are exported (False inside :func:`unexported`)."""
    return not _UNEXPORTED.get()


def replays_exported() -> bool:
    """``CAUSALTRACE_EXPORT_REPLAYS=true``: replays are exported as their own traces (default: stored only)."""
    return (os.environ.get("CAUSALTRACE_EXPORT_REPLAYS") or "").strip().lower() in ("1", "true", "yes", "on")


def _keep_framework_spans() -> bool:
    return (os.environ.get("CAUSALTRACE_AUTOGEN_SPANS") or "").strip().lower() in ("keep", "1", "true", "yes", "on")


@contextlib.contextmanager
def unexported() -> Iterator[None]:
    """Run a block whose spans are stored, not exported: a replay, the factory that builds its team.

    The block's current span becomes a valid but UNSAMPLED context, so every span a ParentBased sampler (the SDK
    default) sees inside is not recorded, causaltrace's runs inside start unsampled roots (their steps still reach
    the store), and causaltrace's processor drops the rest of that trace. Nests; never raises into the block.
    """
    ids = RandomIdGenerator()
    ctx = trace.SpanContext(ids.generate_trace_id(), ids.generate_span_id(), is_remote=False,
                            trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT))
    if len(_QUIET_TRACES) > 4096:
        _QUIET_TRACES.clear()
    _QUIET_TRACES.add(ctx.trace_id)
    flag = _UNEXPORTED.set(True)
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(ctx)))
    try:
        yield
    finally:
        try:
            otel_context.detach(token)
            _UNEXPORTED.reset(flag)
        except Exception:  # left in another context (a generator closed elsewhere): the flag ends with it
            logger.debug("causaltrace: leaving an unexported scope out of order", exc_info=True)


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor that counts the spans a full queue drops and the spans a failing exporter loses."""

    def __init__(self, exporter: SpanExporter, *, max_queue_size: int = 65536) -> None:
        super().__init__(
            _CountingExporter(exporter),
            max_queue_size=max_queue_size,
            max_export_batch_size=min(512, max_queue_size),
            schedule_delay_millis=500,
            export_timeout_millis=export_timeouts()[1],
        )
        self._max_queue = max_queue_size
        self._warned_at = 0
        self._keep_framework = _keep_framework_spans()
        self._counting = self.span_exporter if isinstance(self.span_exporter, _CountingExporter) else None
        #: Spans this processor put in its queue (a full queue's drop counted apart).
        self._accepted = 0
        self._append_lock = threading.Lock()
        global _EMIT_DIRECT
        if _EMIT_DIRECT is None:
            try:
                _EMIT_DIRECT = _emit_direct(self)
            except Exception:  # a check that raises means the SDK's own on_end
                _EMIT_DIRECT = False

    def shutdown(self) -> None:
        """Shut down within the batch export timeout (the SDK's own bound is 30 s), so exit is never held long; the
        spans still queued or in flight then are given up: counted and said in one line."""
        processor = getattr(self, "_batch_processor", None)
        bound_ms = export_timeouts()[1]
        try:
            if processor is not None:
                processor.shutdown(timeout_millis=bound_ms)
            else:
                super().shutdown()
        except Exception:
            logger.debug("causaltrace: span processor shutdown failed", exc_info=True)
        self._give_up(bound_ms)

    def _give_up(self, bound_ms: int) -> None:
        exporter = self._counting
        if exporter is None:
            return
        with _STATS_LOCK:
            if exporter.closed:
                return
            exporter.closed = True
            left = max(0, self._accepted - exporter.settled)
            _STATS.failed += left
            _STATS.given_up_at_exit += left
        if left:
            endpoint = getattr(exporter.inner, "_endpoint", None) or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "?")
            logger.warning(
                "causaltrace: at exit %d span(s) were not exported to %s within %.1f s (OTEL_BSP_EXPORT_TIMEOUT); "
                "they are given up and counted in export_stats() (runs are still stored)", left, endpoint,
                bound_ms / 1000,
            )

    def on_end(self, span: ReadableSpan) -> None:
        # every span of the provider comes here (AutoGen's own too, dropped): its context read once, by index
        # (_CONTEXT_BY_INDEX), AutoGen's spans told by their scope's name (its runtime's 'autogen <runtime>' and
        # autogen-core's), the SDK's private queue read (opentelemetry-sdk >= 1.30) and its batch processor handed
        # the span itself (BatchSpanProcessor.on_end is the sampled check, done here, and that call: _EMIT_DIRECT)
        # — 5 Python calls per exported span instead of 17, 4 per AutoGen span dropped instead of 10 (issue 35)
        context = span.context
        if not context:
            return
        if _CONTEXT_BY_INDEX:
            if not context[3] & _SAMPLED:
                return
            quiet = context[0] in _QUIET_TRACES
        else:
            if not context.trace_flags.sampled:
                return
            quiet = context.trace_id in _QUIET_TRACES
        if quiet:
            with _STATS_LOCK:
                _STATS.unexported_dropped += 1
            return
        if not self._keep_framework:
            scope = span.instrumentation_scope
            name = scope.name if scope is not None else ""
            if name == "autogen-core" or name.startswith("autogen "):
                with _STATS_LOCK:
                    _STATS.framework_dropped += 1
                return
        # The check and the append under one lock: threads ending spans at once could otherwise both see room
        # for one, and the SDK's append would evict a queued span uncounted (its deque drops the oldest when full).
        # A full queue drops the NEW span here, counted; the worker only ever shortens the queue meanwhile.
        processor = getattr(self, "_batch_processor", None)
        with self._append_lock:
            queue = getattr(processor, "_queue", None)
            full = (len(queue) if queue is not None else 0) >= self._max_queue
            with _STATS_LOCK:
                _STATS.queued += 1
                self._accepted += not full
                if full:
                    _STATS.dropped += 1
                    dropped = _STATS.dropped
            if not full:
                if _EMIT_DIRECT and processor is not None:
                    processor.emit(span)
                else:
                    super().on_end(span)
        if full and dropped >= 2 * max(self._warned_at, 1):
            self._warned_at = dropped
            logger.warning("causaltrace: export queue full, %d spans dropped so far (raise CAUSALTRACE_MAX_QUEUE)", dropped)


def _context_by_index() -> bool:
    """A SpanContext is the tuple (trace id, span id, remote, trace flags, …): ``context[3] & SAMPLED`` is
    ``context.trace_flags.sampled`` and ``context[0]`` its trace id (read without their properties' frames)."""
    for flags in (TraceFlags.DEFAULT, TraceFlags.SAMPLED):
        context = SpanContext(7, 9, is_remote=False, trace_flags=TraceFlags(flags))
        if not (isinstance(context, tuple) and context[0] == context.trace_id == 7
                and bool(context[3] & _SAMPLED) is context.trace_flags.sampled):
            return False
    return True


def _emit_direct(processor: BatchSpanProcessor) -> bool:
    """``BatchSpanProcessor.on_end`` of a sampled span is its batch processor's ``emit(span)`` and nothing else; of
    an unsampled one, nothing (checked once, on the first processor made, its ``emit`` a probe meanwhile)."""
    batch = getattr(processor, "_batch_processor", None)
    if batch is None or not callable(getattr(type(batch), "emit", None)):
        return False
    seen: list[Any] = []
    batch.emit = seen.append
    try:
        sampled = ReadableSpan(name="s", context=SpanContext(7, 9, False, TraceFlags(TraceFlags.SAMPLED)))
        unsampled = ReadableSpan(name="u", context=SpanContext(7, 9, False, TraceFlags(TraceFlags.DEFAULT)))
        BatchSpanProcessor.on_end(processor, sampled)
        BatchSpanProcessor.on_end(processor, unsampled)
        return seen == [sampled]
    finally:
        del batch.emit


_SAMPLED = TraceFlags.SAMPLED
_CONTEXT_BY_INDEX = False
try:
    _CONTEXT_BY_INDEX = _context_by_index()
except Exception:  # a check that raises means the API's own way
    pass
#: Whether :meth:`CountingBatchSpanProcessor.on_end` hands a span to the SDK's batch processor itself
#: (:func:`_emit_direct`, checked when the first processor is made; None until then).
_EMIT_DIRECT: bool | None = None


def otlp_exporter_from_env() -> SpanExporter | None:
    """The OTLP span exporter the standard ``OTEL_EXPORTER_OTLP_*`` env vars ask for, or None when none is set."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint:
        return None
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip().lower() or "http/protobuf"
    timeout_s = export_timeouts()[0]
    for name in _SDK_EXPORT_LOGGERS:
        sdk_logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietRetries) for f in sdk_logger.filters):
            sdk_logger.addFilter(_QuietRetries())
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(timeout=timeout_s)
    if protocol in ("http/protobuf", "http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter(timeout=timeout_s)
    logger.warning("causaltrace: OTEL_EXPORTER_OTLP_PROTOCOL=%r is not supported (use grpc or http/protobuf)", protocol)
    return None


def resolve_provider(explicit: trace.TracerProvider | None, *, max_queue_size: int) -> TracerProvider:
    """The SDK tracer provider causaltrace emits to (see the module docstring for the rules)."""
    if isinstance(explicit, TracerProvider):
        return explicit
    if explicit is not None:
        logger.warning("causaltrace: %s is not an SDK TracerProvider; using causaltrace's own", type(explicit).__name__)
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(resource=default_resource())
    exporter = otlp_exporter_from_env()
    if exporter is not None:
        provider.add_span_processor(CountingBatchSpanProcessor(exporter, max_queue_size=max_queue_size))
    if isinstance(current, trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    return provider


def default_resource() -> Resource:
    """The resource of the provider causaltrace builds: ``service.name`` (``OTEL_SERVICE_NAME``, default
    ``causaltrace``) and the Phoenix project ``openinference.project.name`` (``CAUSALTRACE_PROJECT``, default the
    service name, unless ``OTEL_RESOURCE_ATTRIBUTES`` — which the SDK merges in — names one)."""
    service = os.environ.get("OTEL_SERVICE_NAME") or "causaltrace"
    project = os.environ.get("CAUSALTRACE_PROJECT") or service
    resource = Resource.create({"service.name": service})
    if semconv.PROJECT_NAME in resource.attributes and not os.environ.get("CAUSALTRACE_PROJECT"):
        return resource
    return resource.merge(Resource({semconv.PROJECT_NAME: project}))


#: The attribute values the SDK's cleaning (``opentelemetry.attributes._clean_attribute_value``) keeps as they are,
#: by their exact type; and lists (or tuples) of texts, which it turns into tuples of the same texts.
_CLEAN_SCALARS = frozenset({str, bool, int, float, type(None), bytes})
_TEXTS_ONLY = frozenset({str})


def set_span_attributes(span: trace.Span, attrs: Mapping[str, Any]) -> None:
    """``span.set_attributes(attrs)``; for an SDK span (the run's root, at its end), the values written straight into
    its attribute dict as the SDK's cleaning would leave them — scalars as they are, lists of texts as tuples — in
    the SDK's order (a key written again moves to the end), without its per-value frames (~40 Python calls per run:
    the root's dozen start attributes come again, and were cleaned once already). Anything else (another value
    type, a length limit on texts, an attribute count near its limit, a span already ended) goes through
    ``set_attributes`` itself."""
    if _SETS_BY_DICT and type(span) is _SDK_SPAN:
        bounded = span._attributes  # type: ignore[attr-defined]
        if (type(bounded) is BoundedAttributes and bounded.max_value_len is None and not bounded._immutable
                and (bounded.maxlen is None or len(bounded._dict) + len(attrs) <= bounded.maxlen)):
            texts: list[str] = []
            for key, value in attrs.items():
                if type(key) is not str or not key:
                    break
                cls = type(value)
                if cls in _CLEAN_SCALARS:
                    continue
                if (cls is list or cls is tuple) and _TEXTS_ONLY.issuperset(map(type, value)):
                    texts += (key,)  # a list of texts (the run's agents): a tuple once written
                    continue
                break
            else:
                with span._lock:  # type: ignore[attr-defined]
                    if span._end_time is None:  # type: ignore[attr-defined]
                        with bounded._lock:
                            written = bounded._dict
                            for key in attrs:
                                if key in written:
                                    del written[key]
                            written.update(attrs)
                            for key in texts:
                                written[key] = tuple(written[key])
                        return
    span.set_attributes(attrs)


#: Samplers whose decision reads no attribute and which pass a sampled span's attributes through as given (the SDK's
#: own, by exact type), and the span processors whose ``on_start`` does nothing (the SDK's exporting ones).
_ATTRIBUTE_BLIND_SAMPLERS = frozenset({StaticSampler, TraceIdRatioBased})
_NOOP_ON_START = frozenset({SpanProcessor.on_start, SimpleSpanProcessor.on_start, BatchSpanProcessor.on_start})
_ON_START = operator.attrgetter("on_start")


def attributes_may_follow_start(tracer: trace.Tracer) -> bool:
    """Whether a span of ``tracer`` (an SDK tracer) may be started without its attributes and given them at once
    after (:func:`set_span_attributes`: the run's root, whose attributes the SDK would otherwise clean value by value
    as it starts — ~23 Python calls per run), nothing seeing the difference: its sampler is one of the SDK's that
    read no attribute (ALWAYS_ON / OFF, a ratio, parent-based on those) and every span processor's ``on_start`` does
    nothing. Asked at each run's start (processors may be added to a provider at any time)."""
    if not _SETS_BY_DICT:
        return False
    sampler = getattr(tracer, "sampler", None)
    samplers = (sampler,)
    if type(sampler) is ParentBased:
        samplers = (sampler._root, sampler._remote_parent_sampled, sampler._remote_parent_not_sampled,
                    sampler._local_parent_sampled, sampler._local_parent_not_sampled)
    if not _ATTRIBUTE_BLIND_SAMPLERS.issuperset(map(type, samplers)):  # in C: no generator frames
        return False
    processor = getattr(tracer, "span_processor", None)
    if type(processor) is not SynchronousMultiSpanProcessor:
        return False
    return _NOOP_ON_START.issuperset(map(_ON_START, map(type, processor._span_processors)))


def start_span(tracer: trace.Tracer, name: str, attributes: dict[str, Any], start_time_ns: int) -> trace.Span:
    """``tracer.start_span(name, kind=INTERNAL, attributes=attributes, start_time=start_time_ns)`` (a run's root);
    its attributes written just after the start where no one sees the difference (:func:`attributes_may_follow_start`:
    the SDK's cleaning frames skipped)."""
    if not attributes_may_follow_start(tracer):
        return tracer.start_span(name, kind=trace.SpanKind.INTERNAL, attributes=attributes, start_time=start_time_ns)
    span = tracer.start_span(name, kind=trace.SpanKind.INTERNAL, start_time=start_time_ns)
    set_span_attributes(span, attributes)
    return span


def _sets_by_dict() -> bool:
    """:func:`set_span_attributes` writing an SDK span's attribute dict leaves the span as ``set_attributes`` does: the
    same attributes, values (tuples for lists), order (a key written again at the end) and nothing dropped."""
    start = {"a": "x", "b": 1, "c": [1, 2], "d": True}
    later = {"e": ["p", "q"], "a": "x", "f": 2.5, "g": None, "h": b"z", "b": 3, "i": ("r",), "j": []}
    made = []
    global _SETS_BY_DICT
    for direct in (False, True):
        span = _check_tracer().start_span("check", attributes=start)
        _SETS_BY_DICT = direct
        set_span_attributes(span, later)
        span.end()
        made.append((type(span) is _SDK_SPAN, list(span.attributes.items()), span._attributes.dropped,
                     [type(v) for v in span.attributes.values()]))
    _SETS_BY_DICT = False
    return made[0] == made[1] and made[1][0]


def _check_tracer() -> trace.Tracer:
    """An SDK tracer for the checks at import (no resource detection, no exit hook)."""
    return TracerProvider(sampler=ALWAYS_ON, resource=Resource.get_empty(), shutdown_on_exit=False).get_tracer(
        "causaltrace.check")


def _sdk_span_type() -> type | None:
    try:
        return type(_check_tracer().start_span("check"))
    except Exception:
        return None


#: The SDK's span class (what an SDK tracer's ``start_span`` makes: ``_Span`` today).
_SDK_SPAN = _sdk_span_type()
_SETS_BY_DICT = False
try:
    _SETS_BY_DICT = _sets_by_dict()
except Exception:  # a check that raises means set_attributes itself
    _SETS_BY_DICT = False
