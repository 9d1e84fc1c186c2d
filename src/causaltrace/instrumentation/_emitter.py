"""Step → span: one trace per run, one span per step, dependencies as links AND attributes; never raises.

Every adapter goes through this module (ARCHITECTURE decisions 1–4):

* the run's root span (``causaltrace.run``) is opened before the framework starts, so the framework's own spans
  land in the same trace; each step span is a child of its parent step's span (its ``agent_turn``) or of the root;
* each dependency is an OTel Link to the producer step's span with a ``causaltrace.dependency.kind`` link
  attribute, and is repeated in ``causaltrace.depends_on.step_ids`` / ``.kinds`` span attributes;
* a span's status is set once, when the step ends and its outcome is known (OK is final in the Python SDK);
* the payload policy of :class:`~causaltrace.config.TraceConfig` (truncation with a marker, hidden inputs /
  outputs, a redaction callback) applies to exported attributes only — the collector gets the full Step;
* the OpenInference attributes Phoenix reads (``openinference.span.kind``, ``input.value`` …) are derived from the
  policied ``causaltrace.*`` attributes between hiding / redaction and truncation
  (:func:`causaltrace.semconv.openinference_attributes`), so they show exactly what the policy lets through.

Nothing here raises into user code: every entry point is wrapped by :func:`never_raise`, which logs our own failure
and returns a neutral value (or, called on every step, catches it in its own body: :func:`internal_error`).
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SynchronousMultiSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import DEFAULT_TRACE_STATE

from causaltrace import semconv
from causaltrace.collector import tool_spans
from causaltrace.collector.recording_otlp import RecordingExport, recording_attributes
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import count_payload_cuts, exporting, set_span_attributes, start_span
from causaltrace.recording.long_texts import CutText, forget_long_texts
from causaltrace.schema import Recording, Step, utf8_safe

__all__ = ["Emitter", "StepSpan", "apply_payload_policy", "internal_error", "never_raise"]

logger = logging.getLogger("causaltrace")

P = ParamSpec("P")
R = TypeVar("R")

#: Attributes holding step inputs / outputs, which the hide switches drop and the redaction callback sees.
_INPUT_KEYS = frozenset({semconv.STEP_INPUTS, semconv.STEP_ARGUMENTS, semconv.RUN_TASK, semconv.RESULT_INPUTS,
                         semconv.RESULT_ARGUMENTS})
_OUTPUT_KEYS = frozenset({semconv.STEP_OUTPUTS, semconv.STEP_CONTENT, semconv.STEP_ERROR_MESSAGE,
                          semconv.RESULT_OUTPUTS, semconv.RESULT_CONTENT, semconv.RESULT_ERROR_MESSAGE})
_PAYLOAD_KEYS = _INPUT_KEYS | _OUTPUT_KEYS | {semconv.STEP_METADATA, semconv.RESULT_METADATA, semconv.RUN_OUTCOME}


def never_raise(default: Any = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate an instrumentation entry point: our own exception is logged and ``default`` returned instead.

    A call that does not fit the entry point's signature (a misspelled keyword) still raises its ``TypeError``: that
    is the adapter's bug, for its own tests to catch, not a failure to hide. It is told apart by its traceback, which
    ends in this wrapper (the call never entered ``fn``).
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except TypeError as exc:
                if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                    raise  # the arguments do not fit fn's signature
                internal_error(fn.__qualname__)
                return default
            except Exception:
                internal_error(fn.__qualname__)
                return default

        return wrapper

    return decorate


def internal_error(where: str) -> None:
    """Log our own failure in ``where`` (the run continues), as :func:`never_raise` does. The entry points called on
    every step catch it in their own body with this instead of wearing the decorator, whose wrapper is one more
    Python call per step (issue 35); a call that does not fit their signature raises before entering them, as
    with the decorator."""
    logger.warning("causaltrace: internal error in %s (the run continues)", where, exc_info=True)


def _truncate(value: str, limit: int) -> tuple[str, bool]:
    if len(value) <= limit:
        return value, False
    marker = semconv.TRUNCATION_MARKER.format(n=len(value) - limit)
    return value[:limit] + marker, True


def apply_payload_policy(attrs: Mapping[str, Any], config: TraceConfig, *, messages: Any = None,
                         final_answer: Any = semconv.PARSE_OUTCOME) -> dict[str, Any]:
    """The attributes to export under ``config``: hidden payloads dropped, redacted, the OpenInference attributes
    derived from what is left, long texts cut with a marker.

    ``messages`` are a model call's request messages for ``llm.input_messages.*``: written only when inputs are
    neither hidden nor redacted (a redaction callback sees whole attributes, not single messages). A step whose
    payload was cut gets ``causaltrace.step.truncated = True`` so an importer can tell. ``final_answer``: a run
    root's, known to the caller (its outcome's JSON is then not parsed back, unless the policy may have changed it).
    """
    if config.hide_inputs or config.hide_outputs or config.redact is not None:
        out = _hide_and_redact(attrs, config.hide_inputs, config.hide_outputs, config.redact)
        messages, final_answer = None, semconv.PARSE_OUTCOME
    else:
        out = dict(attrs)
    semconv.openinference_attributes(
        out, messages=messages, inputs_hidden=config.hide_inputs, outputs_hidden=config.hide_outputs,
        final_answer=final_answer, content=config.oi_content,
    )
    if not config.oi_content:
        _drop_oi_content(out)  # what ``attrs`` brought (a stored run's span exported again)
    _cut_long_texts(out, config.max_attribute_chars)
    return out


def _cut_long_texts(attrs: dict[str, Any], limit: int) -> None:
    """Cut texts (and texts in lists) longer than ``limit`` in place, with a marker; tuples become lists; a text
    that is not valid UTF-8 gets U+FFFD for its lone surrogates (:func:`~causaltrace.schema.utf8_safe`: OTLP's
    protobuf strings cannot carry them, and one used to fail the whole export batch). Both are counted in
    :func:`~causaltrace.instrumentation._export.export_stats`. Runs once per step on the agent's thread, so only
    texts and lists are looked at, and non-ASCII texts only are searched for surrogates (a plain loop: faster here
    than filter / map over the values, measured on real spans' 15-40 attributes: 2.4 µs against 5.2 µs for 30
    attributes, though it makes a len and an isascii call per text where those make a few in all)."""
    truncated = replaced = False
    cut: list[str] = []
    for key, value in attrs.items():
        cls = type(value)
        if cls is str or cls is CutText:
            if cls is not str:  # cut before its JSON was written whole (semconv.step_attributes(cut_at=...))
                attrs[key] = value = str(value)
                truncated = True
                cut.append(key)
            elif len(value) > limit:
                value, truncated = _truncate(value, limit)[0], True
                attrs[key] = value
                cut.append(key)
            if not value.isascii():
                safe = utf8_safe(value)
                if safe is not value:
                    attrs[key], replaced = safe, True
        elif cls is list or cls is tuple:
            long = False
            for item in value:
                if type(item) is str and len(item) > limit:
                    long = True
                    break
            if long:
                value, truncated = [_truncate(i, limit)[0] if isinstance(i, str) else i for i in value], True
                attrs[key] = value
                cut.append(key)
            elif cls is tuple:
                attrs[key] = value = list(value)
            for i, item in enumerate(value):
                if type(item) is str and not item.isascii():
                    safe = utf8_safe(item)
                    if safe is not item:
                        value[i], replaced = safe, True
    if truncated and semconv.STEP_ID in attrs:
        _mark_truncated(attrs, cut)
    if truncated or replaced:
        count_payload_cuts(truncated=truncated, text_replaced=replaced)


def _mark_truncated(attrs: dict[str, Any], cut: list[str]) -> None:
    """Flag the step whose payload was cut; on a tool call's span that carries its result, the half that lost
    text (the span's output is the result's)."""
    if semconv.RESULT_ID not in attrs:
        attrs[semconv.STEP_TRUNCATED] = True
        return
    for key in cut:
        if key.startswith(semconv.RESULT_PREFIX) or key == semconv.OI_OUTPUT_VALUE:
            attrs[semconv.RESULT_TRUNCATED] = True
        else:
            attrs[semconv.STEP_TRUNCATED] = True


def _hide_and_redact(
    attrs: Mapping[str, Any], hide_in: bool, hide_out: bool, redact: Callable[[str, Any], Any] | None
) -> dict[str, Any]:
    """Drop hidden inputs / outputs and pass payload attributes through the redaction callback (None drops one)."""
    out: dict[str, Any] = {}
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
        out[key] = value
    return out


#: Span-only attributes that show a step's input / output content (the rest — tool schemas, parameters,
#: descriptions, graph ids — is not content).
_INPUT_MESSAGE_ROLE = "llm.input_messages.0.message.role"
_OUTPUT_MESSAGE_ROLE = "llm.output_messages.0.message.role"
_OI_INPUT_CONTENT = ("llm.input_messages.", semconv.OI_INPUT_VALUE, semconv.OI_INPUT_MIME_TYPE,
                     semconv.OI_TOOL_PARAMETERS)
_OI_OUTPUT_CONTENT = ("llm.output_messages.", semconv.OI_OUTPUT_VALUE, semconv.OI_OUTPUT_MIME_TYPE)


_GENAI_INPUT_CONTENT = (semconv.GEN_AI_INPUT_MESSAGES, semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
                        semconv.GEN_AI_TOOL_DEFINITIONS, semconv.GEN_AI_TOOL_CALL_ARGUMENTS)
_GENAI_OUTPUT_CONTENT = (semconv.GEN_AI_OUTPUT_MESSAGES, semconv.GEN_AI_TOOL_CALL_RESULT)


def allowed_extras(extras: Mapping[str, Any], config: TraceConfig) -> dict[str, Any]:
    """The span-only attributes ``config`` lets through: OpenInference input content only when inputs are neither
    hidden nor redacted (a redaction callback sees whole attributes, not single messages) and OpenInference content
    is on, GenAI input content only when GenAI content is on (opt-in); output content likewise."""
    return _unblocked(extras, _blocked_prefixes(config))


def _unblocked(extras: Mapping[str, Any], blocked: tuple[str, ...]) -> dict[str, Any]:
    """``extras`` without the keys that start with one of ``blocked`` (checked in C first: usually none does)."""
    if not blocked or not any(map(str.startswith, extras, repeat(blocked))):
        return dict(extras)
    return {key: value for key, value in extras.items() if not key.startswith(blocked)}


def _blocked_prefixes(config: TraceConfig) -> tuple[str, ...]:
    """The span-only attribute prefixes :func:`allowed_extras` keeps out under ``config``."""
    shown_in = not config.hide_inputs and config.redact is None
    shown_out = not config.hide_outputs and config.redact is None
    blocked: tuple[str, ...] = ()
    if not (config.oi_content and shown_in):
        blocked += _OI_INPUT_CONTENT
    if not (config.oi_content and shown_out):
        blocked += _OI_OUTPUT_CONTENT
    if not (config.genai_content_on and shown_in):
        blocked += _GENAI_INPUT_CONTENT
    if not (config.genai_content_on and shown_out):
        blocked += _GENAI_OUTPUT_CONTENT
    return blocked


def _genai_tool_content(attrs: dict[str, Any]) -> None:
    """``gen_ai.tool.call.arguments`` / ``.result`` of a tool call's span (GenAI content on), from what the payload
    policy left of the call's arguments and its result."""
    arguments = attrs.get(semconv.STEP_ARGUMENTS)
    if arguments is not None:
        attrs[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = arguments
    result = attrs.get(semconv.RESULT_CONTENT) or attrs.get(semconv.RESULT_OUTPUTS)
    if result:
        attrs[semconv.GEN_AI_TOOL_CALL_RESULT] = result


def _write_policied(attrs: dict[str, Any], full: Mapping[str, Any], extras: Mapping[str, Any] | None,
                    config: TraceConfig) -> None:
    """A step span's attributes under a payload policy that hides or redacts (:meth:`Emitter._write`): the Step's
    through the policy, then the adapter's extras it lets through, cut, replacing the messages they give."""
    attrs.update(apply_payload_policy(full, config))
    if extras:
        extras = allowed_extras(extras, config)
        _cut_long_texts(extras, config.max_attribute_chars)
        _merge_extras(attrs, extras)


def _merge_extras(attrs: dict[str, Any], extras: Mapping[str, Any]) -> None:
    """Add an adapter's span-only attributes; messages it gives replace those derived from the Step's text."""
    for prefix in ("llm.input_messages.", "llm.output_messages."):
        if prefix + "0.message.role" in extras:
            for key in [k for k in attrs if k.startswith(prefix)]:
                del attrs[key]
    attrs.update(extras)


def _drop_oi_content(attrs: dict[str, Any]) -> None:
    """OpenInference content off (``CAUSALTRACE_CAPTURE_CONTENT=off``): no input / output values or messages."""
    for key in [k for k in attrs if k.startswith(_OI_INPUT_CONTENT) or k.startswith(_OI_OUTPUT_CONTENT)]:
        del attrs[key]


@dataclass(slots=True)
class StepSpan:
    """A step's span while the step runs: identity, parent, start and links. Emitted whole when the step ends.

    Step spans are written as finished ``ReadableSpan`` objects straight to the provider's span processors instead
    of going through ``Tracer.start_span`` / ``Span.end``: same OTLP output, a fraction of the cost per step (the
    SDK's per-span locking, attribute cleaning and processor fan-out on start are skipped — see
    ``benchmarks/bench_emit.py``). Sampling is decided once per run, by the root span. Its name is the ended Step's
    (:func:`causaltrace.semconv.span_name`: the model or tool is often known only then), made when it is written.
    """

    context: SpanContext
    parent: SpanContext
    start_ns: int
    attributes: dict[str, Any]
    links: list[Link] = field(default_factory=list)
    current: NonRecordingSpan | None = None
    #: A result's span: the step id of the tool call whose span (same context) it shares.
    joins: str | None = None
    #: Span-only attributes an adapter read from the framework (OpenInference messages, tools, descriptions…):
    #: exported under the payload policy and the content switches, never part of the Step.
    extras: dict[str, Any] | None = None
    #: ``context.trace_id``, kept: its children read it (the property is a Python call each time).
    trace_id: int = 0
    #: ``context.span_id``, kept: the ended step reads it (the property is a Python call each time).
    span_id: int = 0

    def get_span_context(self) -> SpanContext:
        return self.context

    def as_current(self) -> NonRecordingSpan:
        """A span object to make current, so the framework's own spans nest under this step."""
        if self.current is None:
            if _NON_RECORDING_BY_FIELD:  # NonRecordingSpan(context) without its __init__ frame
                self.current = _new_object(NonRecordingSpan)
                self.current._context = self.context
            else:
                self.current = NonRecordingSpan(self.context)
        return self.current


def _sdk_parts(tracer: trace.Tracer) -> tuple[Any, Any, Any, Any] | None:
    """(span processor, resource, instrumentation scope, id generator) of an SDK tracer — one accessor for the
    SDK attributes the direct emit path needs (opentelemetry-sdk >= 1.30); None for a non-SDK tracer."""
    processor = getattr(tracer, "span_processor", None) or getattr(tracer, "_span_processor", None)
    resource = getattr(tracer, "resource", None)
    scope = getattr(tracer, "_instrumentation_scope", None) or getattr(tracer, "instrumentation_scope", None)
    ids = getattr(tracer, "id_generator", None)
    if processor is None or resource is None or ids is None:
        return None
    return processor, resource, scope, ids


class Emitter:
    """Turns Steps into spans on one tracer under one payload policy."""

    def __init__(self, tracer: trace.Tracer, config: TraceConfig) -> None:
        self.tracer = tracer
        self.config = config
        self._sdk = _sdk_parts(tracer)
        #: Whether (and up to what size) a run's Recording goes out on its root span (CAUSALTRACE_EXPORT_RECORDING*).
        self.recording_export = RecordingExport.from_env()
        #: tool_call step id → its span while the call or its result runs (:meth:`start_step_span`).
        self._pairs: dict[str, _Pair] = {}
        self._pair_lock = threading.Lock()
        #: agent_turn step id → the ``gen_ai.provider.name`` of a model call inside it (an ``invoke_agent`` span
        #: names its provider; the turn ends after its calls). Popped when the turn is exported.
        self._turn_providers: dict[str, str] = {}
        #: The config's content switches (:meth:`_content_switches`) and the config they were read from.
        self._switches = (config.oi_content, config.genai_content_on, _blocked_prefixes(config))
        self._switches_of = config
        #: The last parent that was not a step span (a step's span context, or a run's root span by a weak
        #: reference: consecutive steps start under one), its context, valid and sampled, and its trace id.
        self._parent_seen: tuple[Any, Any, int] = (None, None, 0)

    @never_raise()
    def start_root(self, attributes: Mapping[str, Any], *, start_time_ns: int) -> Span | None:
        """Open a run's root span (a real SDK span, a child of the caller's active span, if any); inside
        :func:`~causaltrace.instrumentation._export.unexported` (a replay) an unsampled one, whatever the sampler."""
        if not exporting():
            parent = trace.get_current_span().get_span_context()
            ids = RandomIdGenerator()
            trace_id = parent.trace_id if parent.is_valid else ids.generate_trace_id()
            return NonRecordingSpan(SpanContext(trace_id, ids.generate_span_id(), is_remote=False,
                                                trace_flags=TraceFlags(TraceFlags.DEFAULT)))
        return start_span(self.tracer, utf8_safe(semconv.root_span_name(attributes.get(semconv.RUN_NAME))),
                          apply_payload_policy(attributes, self.config), start_time_ns)

    def start_step_span(
        self,
        attributes: dict[str, Any],
        *,
        parent: Span | SpanContext | StepSpan | None,
        links: Iterable[tuple[SpanContext, str, str]] = (),
        start_time_ns: int,
        joins: str | None = None,
    ) -> StepSpan | None:
        """Open a step's span under ``parent``; ``links`` are (producer span context, dependency kind, producer id);
        ``attributes`` (a fresh dict: the span keeps it, no copy per step) are the span's first. A ``tool_call``'s
        span waits for its result: a step started with ``joins`` (the call's step id; a ``tool_response`` or a
        ``code_execution``, :func:`tool_spans.call_result_pairs`) shares it — same span id — and the one span is
        written when both have ended (issue 33 item 3). Returns None when the run is not sampled (its root span does
        not record): the Step still reaches the collector, no span is exported."""
        try:
            if self._sdk is None or parent is None:
                return None
            seen = self._parent_seen
            if type(parent) is StepSpan:  # a step span exists only in a sampled trace: valid and sampled
                parent_ctx, trace_id = parent.context, parent.trace_id
            elif seen[0] is parent or (type(seen[0]) is weakref.ref and seen[0]() is parent):
                _, parent_ctx, trace_id = seen  # the same parent again: its context was read and checked
            else:
                is_context = isinstance(parent, SpanContext)
                parent_ctx = parent if is_context else parent.get_span_context()
                if _CONTEXT_BY_TUPLE and type(parent_ctx) is SpanContext:  # its fields, without the properties
                    if not parent_ctx[_IS_VALID] or not parent_ctx[_TRACE_FLAGS] & TraceFlags.SAMPLED:
                        return None
                    trace_id = parent_ctx[0]
                elif not parent_ctx.is_valid or not parent_ctx.trace_flags.sampled:
                    return None
                else:
                    trace_id = parent_ctx.trace_id
                try:  # a span's context never changes; a span (a run's root) by a weak reference: not held after
                    self._parent_seen = (parent if is_context else weakref.ref(parent), parent_ctx, trace_id)
                except TypeError:  # a span that takes no weak reference is read each time
                    pass
            if joins is not None:
                with self._pair_lock:
                    pair = self._pairs.get(joins)
                    if pair is not None and pair.result_span is None:
                        call = pair.call_span  # the result's span shares it (StepSpan(...) without __init__)
                        span = pair.result_span = _new_object(StepSpan)
                        span.context, span.parent, span.start_ns, span.joins = call.context, call.parent, start_time_ns, joins
                        span.attributes, span.links, span.current, span.extras = attributes, _links(links, call), None, None
                        span.trace_id, span.span_id = trace_id, call.span_id
                        return span
            ids = self._sdk[3]
            span_id = _random_bits(64) if type(ids) is RandomIdGenerator else 0  # generate_span_id, inline
            if span_id and _CONTEXT_BY_TUPLE:  # SpanContext(...) without its __new__ frame: both ids are valid
                context = _new_tuple(SpanContext, (trace_id, span_id, False, _SAMPLED, DEFAULT_TRACE_STATE, True))
            else:
                span_id = span_id or ids.generate_span_id()
                context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)
            otel_links: list[Link] = []
            for ctx, kind, step_id in links:  # _links, inline: every step has a few
                if ctx[_IS_VALID] if _CONTEXT_BY_TUPLE else ctx.is_valid:  # its is_valid, without the property
                    link_attributes = {semconv.DEPENDENCY_KIND: kind, semconv.DEPENDENCY_STEP_ID: step_id}
                    if not _LINKS_BY_FIELDS:
                        otel_links.append(Link(ctx, link_attributes))
                    else:
                        link = _new_object(Link)  # Link(ctx, link_attributes), without its two frames
                        link._context, link._attributes = ctx, link_attributes
                        otel_links.append(link)
            span = _new_object(StepSpan)  # StepSpan(...) without its __init__ frame: every field set here
            span.context, span.parent, span.start_ns, span.attributes = context, parent_ctx, start_time_ns, attributes
            span.links, span.current, span.joins, span.extras = otel_links, None, None, None
            span.trace_id, span.span_id = trace_id, span_id
            if semconv.STEP_KIND in attributes and attributes[semconv.STEP_KIND] == "tool_call":
                pair = _new_object(_Pair)  # _Pair(span) without its dataclass __init__: every field set
                pair.call_span, pair.call, pair.call_end, pair.result_span, pair.result, pair.result_end = (
                    span, None, 0, None, None, 0)
                with self._pair_lock:
                    self._pairs[attributes[semconv.STEP_ID]] = pair
            return span
        except Exception:
            internal_error("Emitter.start_step_span")
            return None

    @never_raise()
    def add_links(self, span: StepSpan | None, links: Iterable[tuple[SpanContext, str, str]]) -> None:
        """Add dependency links discovered after the span started."""
        if span is not None:
            span.links += _links(links)

    def export_step(self, span: StepSpan | None, step: Step, *, end_time_ns: int) -> None:
        """Write the ended step's span (final attributes, status, links) to the provider's span processors.

        The Step itself goes to the collector beside this call (:meth:`StepHandle.end`), not through the span: the
        span is what exporters see, under the payload policy. Nothing is written when no span was started.
        (:meth:`StepHandle.end` takes the last line's path itself for a span of one step.)
        """
        try:
            if span is None or self._sdk is None:
                return
            joins = span.joins
            if joins is not None or step.kind == "tool_call":  # a tool call or its result ended: the one span of
                # both is written once both have (a call waits for its result until the run ends: flush_pending)
                call_id = joins if joins is not None else step.step_id
                with self._pair_lock:
                    pair = self._pairs.get(call_id)
                    if pair is not None:
                        if joins is None:
                            pair.call, pair.call_end = step, end_time_ns
                        else:
                            pair.result, pair.result_end = step, end_time_ns
                        if pair.call is None or pair.result is None:
                            return  # the other half of the span has not ended yet
                        del self._pairs[call_id]
                if pair is None:  # a call not registered; a result after its run flushed its call (span written)
                    if joins is None:
                        self._write(span, step, None, (), end_time_ns)
                    return
                result_span = pair.result_span  # its links are the result's (the result has ended)
                self._write(pair.call_span, pair.call, pair.result, result_span.links if result_span is not None
                            else [], max(pair.result_end, pair.call_end))
                return
            self._write(span, step, None, (), end_time_ns)
        except Exception:
            internal_error("Emitter.export_step")
            return None

    @never_raise()
    def flush_pending(self, run_id: str) -> None:
        """Write the spans of ``run_id``'s tool calls still waiting for a result (the run ended without one)."""
        with self._pair_lock:
            ended = [(key, pair) for key, pair in self._pairs.items()
                     if pair.call_span.attributes.get(semconv.RUN_ID) == run_id]
            for key, _ in ended:
                del self._pairs[key]
        for _, pair in ended:
            if pair.call is not None:
                links = pair.result_span.links if pair.result_span is not None and pair.result is not None else []
                self._write(pair.call_span, pair.call, pair.result, links, max(pair.result_end, pair.call_end))

    def _write(self, span: StepSpan, step: Step, result: Step | None, result_links: Iterable[Link],
               end_time_ns: int) -> None:
        """Write one step's span (with ``result``: the one span of a tool call and its result, whose links are
        added to the call's)."""
        processor, resource, scope, _ = self._sdk  # type: ignore[misc]
        attrs = span.attributes
        config = self.config
        messages = step.inputs.get("messages") if step.kind == "llm_response" and step.inputs else None
        # hidden or redacted payloads go through the policy whole (its callback sees whole attributes); else a long
        # JSON attribute comes already cut (issue 35 "Bad input": never written whole only to be cut)
        policied = config.hide_inputs or config.hide_outputs or config.redact is not None
        cut_at = None if policied else config.max_attribute_chars
        if result is None:  # without a payload policy, straight into the span's own dict
            full = semconv.step_attributes(step, None if policied else attrs, cut_at=cut_at)
        else:
            full = tool_spans.merged_step_attributes(step, result, cut_at=cut_at)
            if result.span_id == step.span_id:
                full.pop(semconv.RESULT_SPAN_ID, None)
        if step.kind == "llm_response":  # a model call's provider goes up to its agent turn (the first named one)
            if step.parent_step_id is not None:
                providers = self._turn_providers
                if len(providers) > 4096:  # parents that were not turns: never popped
                    providers.clear()
                if providers.get(step.parent_step_id, semconv.PROVIDER_UNKNOWN) == semconv.PROVIDER_UNKNOWN:
                    providers[step.parent_step_id] = full[semconv.GEN_AI_PROVIDER_NAME]
        elif step.kind == "agent_turn":  # an ending turn takes the provider noted for it
            provider = self._turn_providers.pop(step.step_id, None)
            if provider is not None:
                full[semconv.GEN_AI_PROVIDER_NAME] = provider
        extras = span.extras
        if extras is not None and _INPUT_MESSAGE_ROLE in extras:
            messages = None  # the adapter gave the request's messages as the framework holds them
        if policied:
            _write_policied(attrs, full, extras, config)
        else:  # the common case: the full attributes, long texts cut in place
            if self._switches_of is not config:  # _content_switches, inline: read once per config
                self._content_switches()
            oi_content, genai_content, blocked = self._switches
            if full is not attrs:
                attrs.update(full)
            # the adapter's own answer messages stand for the ones the Step's text would give: not built at all;
            # with OpenInference content off no content attribute is built (nor dropped after)
            semconv.openinference_attributes(attrs, messages=messages, content=oi_content,
                                             output_messages=extras is None or _OUTPUT_MESSAGE_ROLE not in extras)
            if extras:
                # nothing to replace: this span's own messages were not built (above), so the extras are added as
                # they are (_merge_extras' replacement is for the payload-policy path)
                if blocked and any(map(str.startswith, extras, repeat(blocked))):  # rare: usually none is
                    extras = _unblocked(extras, blocked)
                attrs.update(extras)  # no copy of the extras on the way (content the switches block is kept out)
            _cut_long_texts(attrs, config.max_attribute_chars)
        if step.kind == "tool_call" and (self._switches if self._switches_of is config else self._content_switches())[1]:
            _genai_tool_content(attrs)
        status = _STATUS_OF[step.status] if step.status in _STATUS_OF else _status(step, config.max_attribute_chars)
        if result is not None and (status is _OK or result.status == "error"):
            status = _STATUS_OF.get(result.status) or _status(result, config.max_attribute_chars)
        name = _SPAN_NAMES.get((step.kind, step.model, step.tool_name, step.agent))  # what semconv.span_name reads
        if name is None:
            name = _span_name(step)
        kind = SpanKind.CLIENT if step.kind in semconv.CLIENT_STEP_KINDS else SpanKind.INTERNAL
        if _READABLE_BY_FIELDS:  # ReadableSpan(...) without its __init__ frame: the same fields (checked at import)
            readable = _new_object(ReadableSpan)
            readable.__dict__ = {
                "_name": name, "_context": span.context, "_kind": kind, "_instrumentation_info": None,
                "_instrumentation_scope": scope, "_parent": span.parent, "_start_time": span.start_ns,
                "_end_time": end_time_ns, "_attributes": attrs, "_events": (), "_links": (*span.links, *result_links),
                "_resource": resource, "_status": status,
            }
        else:
            readable = ReadableSpan(name=name, context=span.context, parent=span.parent, resource=resource,
                                    attributes=attrs, links=(*span.links, *result_links), kind=kind, status=status,
                                    start_time=span.start_ns, end_time=end_time_ns, instrumentation_scope=scope)
        if type(processor) is SynchronousMultiSpanProcessor and _FAN_OUT_BY_FIELD:
            for each in processor._span_processors:  # its on_end's loop, without its frame
                each.on_end(readable)
        else:
            processor.on_end(readable)
        # written: the span object lives on with its step handle (for its context) but its attributes are the
        # ReadableSpan's now — dropped here, so a run's many ended steps hold less for the garbage collector
        span.attributes, span.extras = {}, None

    def cut_at(self) -> int | None:
        """The attribute limit a long JSON attribute may be cut to before it is written whole (issue 35 "Bad input";
        ``semconv.step_attributes(cut_at=...)``): None when the payload policy hides or redacts, whose callback
        sees whole attributes."""
        config = self.config
        if config.hide_inputs or config.hide_outputs or config.redact is not None:
            return None
        return config.max_attribute_chars

    def _content_switches(self) -> tuple[bool, bool, tuple[str, ...]]:
        """(OpenInference content on, GenAI content on, the extras' blocked prefixes) of this emitter's config, read
        once per config."""
        config = self.config
        if self._switches_of is not config:
            self._switches = (config.oi_content, config.genai_content_on, _blocked_prefixes(config))
            self._switches_of = config
        return self._switches

    @never_raise()
    def end_root(
        self,
        span: Span | None,
        attributes: Mapping[str, Any],
        *,
        error: str | None,
        end_time_ns: int | None,
        recording: Recording | None = None,
        final_answer: Any = semconv.PARSE_OUTCOME,
    ) -> None:
        """Write the run's final attributes and status (ERROR with the reason on failure) and end the root span.

        ``recording`` (the run's recorded calls, when recording is on) travels as the root span's
        ``causaltrace.run.recording`` event under the payload policy (:mod:`causaltrace.collector.recording_otlp`),
        so the exported run can be replayed. ``final_answer``: the outcome's, which the root shows as its output
        (else read back from the outcome's JSON)."""
        if span is None or not span.is_recording():
            forget_long_texts()  # a run sampled out measured its recorded texts all the same
            return
        set_span_attributes(span, apply_payload_policy(attributes, self.config, final_answer=final_answer))
        config = self.config
        carried = recording_attributes(
            recording, settings=self.recording_export, chunk_chars=config.max_attribute_chars,
            hide_inputs=config.hide_inputs, hide_outputs=config.hide_outputs, redact=config.redact, for_store=config.store,
        )
        forget_long_texts()  # the run's long texts are written: their measures need not hold them any longer
        if semconv.RECORDING_CHUNKS in carried:  # an event: the root's own tags stay the run's (issue 33 item 4)
            span.add_event(semconv.RECORDING_EVENT, attributes=carried, timestamp=end_time_ns)
        elif carried:
            span.set_attributes(carried)  # why it was not exported
        name = attributes.get(semconv.RUN_NAME)
        if name:  # named after the start (an adapter joining a user's run): the root takes the workflow's name
            span.update_name(utf8_safe(semconv.root_span_name(name)))
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, utf8_safe(error[: self.config.max_attribute_chars])))
        else:
            span.set_status(_OK)
        if end_time_ns is not None:
            span.end(end_time=end_time_ns)


@dataclass(slots=True)
class _Pair:
    """A tool call's span while its call or its result runs: written when both have ended (or the run has)."""

    call_span: StepSpan
    call: Step | None = None
    call_end: int = 0
    result_span: StepSpan | None = None
    result: Step | None = None
    result_end: int = 0


#: (kind, model, tool name, agent) → that step's span name (semconv.span_name, UTF-8-safe), made once each.
_SPAN_NAMES: dict[tuple[str, str | None, str | None, str], str] = {}


def _span_name(step: Step) -> str:
    name = semconv.span_name(step)
    name = name if name.isascii() else utf8_safe(name)
    if len(_SPAN_NAMES) < 4096:  # a run's steps have a handful
        _SPAN_NAMES[(step.kind, step.model, step.tool_name, step.agent)] = name
    return name


def _status(step: Step, limit: int) -> Status:
    """A step span's status: ERROR with the step's error, OK, or unset."""
    if step.status == "error":
        message = f"{step.error.type}: {step.error.message}" if step.error else "error"
        return Status(StatusCode.ERROR, utf8_safe(message[:limit]))
    return _OK if step.status == "ok" else _UNSET


_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
#: What RandomIdGenerator.generate_span_id draws a span id from (0, which is invalid, is drawn again by it).
_random_bits = random.getrandbits
_OK = Status(StatusCode.OK)
_UNSET = Status(StatusCode.UNSET)
#: A step status → its span status, for the statuses that carry no error (:func:`_status`'s answer, looked up
#: inline: every step asks).
_STATUS_OF = {"ok": _OK, "unset": _UNSET}


_new_object = object.__new__


# The OTel objects of a step span are made without their constructors' frames (issue 35: several per step), each
# way checked once, at import, against the installed API / SDK: a check that fails (or raises) means the constructor.
def _holds(check: Callable[[], bool]) -> bool:
    try:
        return bool(check())
    except Exception:
        return False


def _links_by_fields() -> bool:
    """A Link made as ``object.__new__(Link)`` with ``_context`` / ``_attributes`` is ``Link(context, attributes)``
    (whose ``__init__`` calls its base's: two frames per link, and every step has a few)."""
    ctx, attrs = SpanContext(1, 1, is_remote=False), {semconv.DEPENDENCY_KIND: "saw"}
    made = _new_object(Link)
    made._context, made._attributes = ctx, attrs
    api = Link(ctx, attrs)
    return vars(made) == vars(api) and (made.context, made.attributes, made.dropped_attributes) == (
        api.context, api.attributes, api.dropped_attributes)


def _non_recording_by_field() -> bool:
    """``object.__new__(NonRecordingSpan)`` with ``_context`` set is ``NonRecordingSpan(context)`` (a step's span
    made current)."""
    ctx = SpanContext(7, 9, is_remote=False)
    made = _new_object(NonRecordingSpan)
    made._context = ctx
    return vars(made) == vars(NonRecordingSpan(ctx)) and made.get_span_context() is ctx and not made.is_recording()


_new_tuple = tuple.__new__
#: The indexes of ``SpanContext.trace_flags`` and ``.is_valid`` in the tuple a SpanContext is.
_TRACE_FLAGS, _IS_VALID = 3, 5


def _context_by_tuple() -> bool:
    """``SpanContext(trace_id, span_id, is_remote=False, trace_flags=...)`` of two valid ids is the tuple
    ``(trace_id, span_id, False, trace_flags, DEFAULT_TRACE_STATE, True)``, its validity at :data:`_IS_VALID` (so
    contexts are made with ``tuple.__new__`` and read by index rather than through their properties)."""
    made = _new_tuple(SpanContext, (7, 9, False, _SAMPLED, DEFAULT_TRACE_STATE, True))
    api = SpanContext(7, 9, is_remote=False, trace_flags=_SAMPLED)
    invalid = SpanContext(0, 0, is_remote=False)
    return (type(api) is SpanContext and tuple(made) == tuple(api) and made == api and api[_IS_VALID] is True
            and invalid[_IS_VALID] is False and api[_TRACE_FLAGS] is api.trace_flags and api[0] == api.trace_id
            and bool(api[_TRACE_FLAGS] & TraceFlags.SAMPLED) and not invalid[_TRACE_FLAGS] & TraceFlags.SAMPLED
            and (made.trace_id, made.span_id, made.is_remote, made.trace_flags,
            made.trace_state, made.is_valid) == (7, 9, False, _SAMPLED, DEFAULT_TRACE_STATE, True))


def _readable_by_fields() -> bool:
    """A ReadableSpan made as ``object.__new__(ReadableSpan)`` with the instance dict :meth:`Emitter._write` gives
    it is the one ``ReadableSpan(...)`` makes."""
    ctx = SpanContext(7, 9, is_remote=False, trace_flags=_SAMPLED)
    values = {"_name": "n", "_context": ctx, "_kind": SpanKind.CLIENT, "_instrumentation_info": None,
              "_instrumentation_scope": None, "_parent": ctx, "_start_time": 1, "_end_time": 2,
              "_attributes": {"a": 1}, "_events": (), "_links": (), "_resource": Resource.get_empty(), "_status": _OK}
    api = ReadableSpan(name="n", context=ctx, parent=ctx, resource=values["_resource"], attributes=values[
        "_attributes"], links=(), kind=SpanKind.CLIENT, status=_OK, start_time=1, end_time=2, instrumentation_scope=None)
    made = _new_object(ReadableSpan)
    made.__dict__ = values
    return list(vars(api).items()) == list(vars(made).items()) and made.to_json() == api.to_json()


def _fan_out_by_field() -> bool:
    """SynchronousMultiSpanProcessor hands a span to each processor of its ``_span_processors`` in turn and to
    nothing else (so :meth:`Emitter._write` loops over them itself)."""
    seen: list[Any] = []
    multi, probe = SynchronousMultiSpanProcessor(), type("_Probe", (), {"on_end": lambda _, span: seen.append(span)})
    first, second, marker = probe(), probe(), object()
    multi.add_span_processor(first)
    multi.add_span_processor(second)
    multi.on_end(marker)  # type: ignore[arg-type]
    return multi._span_processors == (first, second) and seen == [marker, marker]


_LINKS_BY_FIELDS, _NON_RECORDING_BY_FIELD, _CONTEXT_BY_TUPLE, _READABLE_BY_FIELDS, _FAN_OUT_BY_FIELD = map(
    _holds, (_links_by_fields, _non_recording_by_field, _context_by_tuple, _readable_by_fields, _fan_out_by_field))


def _links(links: Iterable[tuple[SpanContext, str, str]], but: StepSpan | None = None) -> list[Link]:
    """The OTel Links of ``links`` (producer span context, kind, producer id) whose producer's context is valid,
    but none to ``but``'s (a tool call's span, which its result's links leave out); contexts read by index."""
    out: list[Link] = []
    skip, same = (but.span_id, but.context) if but is not None else (None, None)
    for ctx, kind, step_id in links:
        if not (ctx[_IS_VALID] if _CONTEXT_BY_TUPLE else ctx.is_valid):
            continue
        if skip is None or (ctx is not same and (ctx[1] if _CONTEXT_BY_TUPLE else ctx.span_id) != skip):
            attributes = {semconv.DEPENDENCY_KIND: kind, semconv.DEPENDENCY_STEP_ID: step_id}
            if not _LINKS_BY_FIELDS:
                out.append(Link(ctx, attributes))
            else:
                link = _new_object(Link)
                link._context, link._attributes = ctx, attributes
                out.append(link)
    return out
