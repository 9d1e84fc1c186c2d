"""Step → span: one trace per run, one span per step, dependencies as links AND attributes; never raises.

Every adapter goes through this module (ARCHITECTURE decisions 1–4):

* the run's root span (``causaltrace.run``) is opened before the framework starts, so the framework's own spans
  land in the same trace; each step span is a child of its parent step's span (its ``agent_turn``) or of the root;
* each dependency is an OTel Link to the producer step's span with a ``causaltrace.dependency.kind`` link
  attribute, and is repeated in ``causaltrace.depends_on.step_ids`` / ``.kinds`` span attributes;
* a span's status is set once, when the step ends and its outcome is known (OK is final in the Python SDK);
* the payload policy of :class:`~causaltrace.config.TraceConfig` (truncation with a marker, hidden inputs /
  outputs, a redaction callback) applies to exported attributes only — the collector gets the full Step.

Nothing here raises into user code: every entry point is wrapped by :func:`never_raise`, which logs our own failure
and returns a neutral value.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode

from causaltrace import semconv
from causaltrace.collector.live import RunCollector
from causaltrace.config import TraceConfig
from causaltrace.schema import Step

__all__ = ["Emitter", "apply_payload_policy", "never_raise"]

logger = logging.getLogger("causaltrace")

P = ParamSpec("P")
R = TypeVar("R")

#: Attributes holding step inputs / outputs, which the hide switches drop and the redaction callback sees.
_INPUT_KEYS = frozenset({semconv.STEP_INPUTS, semconv.STEP_ARGUMENTS, semconv.RUN_TASK})
_OUTPUT_KEYS = frozenset({semconv.STEP_OUTPUTS, semconv.STEP_CONTENT, semconv.STEP_ERROR_MESSAGE})
_PAYLOAD_KEYS = _INPUT_KEYS | _OUTPUT_KEYS | {semconv.STEP_METADATA, semconv.RUN_OUTCOME}
#: Attributes a step span gets when it starts (identity); not sent again when it ends.
_SET_AT_START = (semconv.STEP_ID, semconv.STEP_KIND, semconv.STEP_INDEX, semconv.RUN_ID)


def never_raise(default: Any = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate an instrumentation entry point: our own exception is logged and ``default`` returned instead."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except Exception:
                logger.warning("causaltrace: internal error in %s (the run continues)", fn.__qualname__, exc_info=True)
                return default

        return wrapper

    return decorate


def _truncate(value: str, limit: int) -> tuple[str, bool]:
    if len(value) <= limit:
        return value, False
    marker = semconv.TRUNCATION_MARKER.format(n=len(value) - limit)
    return value[:limit] + marker, True


def apply_payload_policy(attrs: Mapping[str, Any], config: TraceConfig) -> dict[str, Any]:
    """The attributes to export under ``config``: hidden payloads dropped, redacted, long texts cut with a marker.

    A step whose payload was cut gets ``causaltrace.step.truncated = True`` so an importer can tell.
    """
    limit = config.max_attribute_chars
    hide_in, hide_out, redact = config.hide_inputs, config.hide_outputs, config.redact
    out: dict[str, Any] = {}
    truncated = False
    for key, value in attrs.items():
        if key in _PAYLOAD_KEYS:
            if (hide_in and key in _INPUT_KEYS) or (hide_out and key in _OUTPUT_KEYS):
                continue
            if redact is not None:
                try:
                    value = redact(key, value)
                except Exception:
                    logger.warning("causaltrace: redaction callback failed on %s; attribute dropped", key, exc_info=True)
                    continue
                if value is None:
                    continue
        if type(value) is str:
            if len(value) > limit:
                value, truncated = _truncate(value, limit)[0], True
        elif isinstance(value, (list, tuple)):
            items = []
            for item in value:
                if isinstance(item, str) and len(item) > limit:
                    item, truncated = _truncate(item, limit)[0], True
                items.append(item)
            value = items
        out[key] = value
    if truncated and semconv.STEP_ID in out:
        out[semconv.STEP_TRUNCATED] = True
    return out


class Emitter:
    """Turns Steps into spans on one tracer under one payload policy."""

    def __init__(self, tracer: trace.Tracer, config: TraceConfig) -> None:
        self.tracer = tracer
        self.config = config

    @never_raise()
    def start_root(self, attributes: Mapping[str, Any], *, start_time_ns: int) -> Span | None:
        """Open a run's root span (a child of the caller's active span, if any)."""
        return self.tracer.start_span(
            semconv.ROOT_SPAN_NAME,
            kind=SpanKind.INTERNAL,
            attributes=apply_payload_policy(attributes, self.config),
            start_time=start_time_ns,
        )

    @never_raise()
    def start_step_span(
        self,
        name: str,
        attributes: Mapping[str, Any],
        *,
        parent: Span | SpanContext | None,
        links: Iterable[tuple[SpanContext, str, str]] = (),
        start_time_ns: int,
    ) -> Span | None:
        """Open a step's span under ``parent``; ``links`` are (producer span context, dependency kind, producer id)."""
        if isinstance(parent, SpanContext):
            parent = NonRecordingSpan(parent)
        ctx = trace.set_span_in_context(parent, otel_context.Context()) if parent is not None else None
        otel_links = [_link(span, kind, step_id) for span, kind, step_id in links]
        return self.tracer.start_span(
            name,
            context=ctx,
            kind=SpanKind.INTERNAL,
            links=[link for link in otel_links if link is not None],
            start_time=start_time_ns,
            attributes=attributes,
        )

    @never_raise()
    def add_links(self, span: Span | None, links: Iterable[tuple[SpanContext, str, str]]) -> None:
        """Add dependency links discovered after the span started."""
        if span is None or not span.is_recording():
            return
        for producer, kind, step_id in links:
            link = _link(producer, kind, step_id)
            if link is not None:
                span.add_link(link.context, link.attributes)

    def end_step_span(self, span: Span | None, step: Step, *, end_time_ns: int, collector: RunCollector) -> None:
        """Write the final attributes and status, hand the full Step to the collector, end the span.

        Never raises. The collector takes the staged Step in its ``on_end``; if the span was not recorded or could
        not be ended, the Step is handed over directly, so nothing is lost.
        """
        collector.stage(step)
        try:
            if span is not None and span.is_recording():
                span.update_name(semconv.span_name(step))
                attrs = apply_payload_policy(semconv.step_attributes(step), self.config)
                for key in _SET_AT_START:
                    attrs.pop(key, None)
                span.set_attributes(attrs)
                if step.status == "error":
                    message = f"{step.error.type}: {step.error.message}" if step.error else "error"
                    span.set_status(Status(StatusCode.ERROR, message[: self.config.max_attribute_chars]))
                elif step.status == "ok":
                    span.set_status(Status(StatusCode.OK))
                span.end(end_time=end_time_ns)
        except Exception:
            logger.warning("causaltrace: could not end the span of step %s", step.step_id, exc_info=True)
        finally:
            collector.claim_staged(step.step_id)

    @never_raise()
    def end_root(
        self,
        span: Span | None,
        attributes: Mapping[str, Any],
        *,
        error: str | None,
        end_time_ns: int | None,
    ) -> None:
        """Write the run's final attributes and status (ERROR with the reason on failure) and end the root span."""
        if span is None or not span.is_recording():
            return
        span.set_attributes(apply_payload_policy(attributes, self.config))
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error[: self.config.max_attribute_chars]))
        else:
            span.set_status(Status(StatusCode.OK))
        if end_time_ns is not None:
            span.end(end_time=end_time_ns)


def _link(producer: SpanContext, kind: str, step_id: str) -> Link | None:
    ctx = producer
    if not ctx.is_valid:
        return None
    return Link(ctx, {semconv.DEPENDENCY_KIND: kind, semconv.DEPENDENCY_STEP_ID: step_id})
