"""Runs to and from OTLP/JSON (ARCHITECTURE "The flow of data", "Payload policy", and semconv.py's mapping).

Usage::

    from causaltrace.collector.otlp import load_otlp_json, run_to_otlp, runs_from_otlp

    request = run_to_otlp(run)                     # one ExportTraceServiceRequest (a dict, OTLP/JSON encoding)
    assert runs_from_otlp(request) == [run]        # the export is complete: importing it gives the same Run
    runs = load_otlp_json(Path("traces.jsonl"))    # OTel Collector `file` exporter output, or a Jaeger answer

Export (:func:`run_to_otlp`): one trace per run, with a root span named ``invoke_workflow {name}`` carrying every
Run-level field (``semconv.run_attributes``, annotations included; the Recording as the root's
``causaltrace.run.recording`` event, chunked as a live run's: ``collector.recording_otlp``) and one span per step
(``semconv.step_attributes``) whose parent is its parent step's span, or the root span. Each dependency is also an
OTel link to the producer's span, with ``causaltrace.dependency.kind`` and ``causaltrace.dependency.step_id`` as
link attributes. Span ids are the step's ``span_id`` when it has one, else the first 16 hex digits of
``sha256(run_id + step_id)``; the trace id is the run's ``trace_id``, else the first 32 hex digits of
``sha256(run_id)``. Times are integer nanoseconds since the epoch; a missing time is ``"0"``.

The structure is opentelemetry-proto's messages (``ExportTraceServiceRequest`` down to ``AnyValue``), written by
``google.protobuf.json_format``; on top come OTLP/JSON's own rules that protobuf's JSON mapping does not apply
(hex ids instead of base64, integer enums, times always written). Decoding is in
:mod:`causaltrace.collector.otlp_decode` (``json_format.ParseDict`` per span, the same rules read back).

Speed (issue 24 "Measured"; the decoder does the same, see its "Speed"): ``json_format`` writes a message in
Python, one call per message, and a span's attributes are ~95 % of its messages. So each span is a ``Span``
message written by ``MessageToDict`` without its attribute lists, and an attribute value that is a ``str``,
``bool``, an ``int`` in int64, a finite ``float``, or a non-empty list of those is written by
:func:`_value_json` in the one form ``MessageToDict`` gives it (``{"intValue": "7"}``…); any other value is an
``AnyValue`` message written by ``MessageToDict``. A test checks both forms agree, and that the whole export is
what ``json_format`` prints for the request it parses back to. The ids are written as hex from the start (never
as base64 first).

Import (:func:`runs_from_otlp`, :func:`load_otlp_json`) accepts:

* OTLP/JSON lines as the OTel Collector ``file`` exporter writes them (one ExportTraceServiceRequest per line);
  one trace may be spread over several lines;
* a single JSON document (pretty-printed or not), or several concatenated;
* Jaeger ``/api/v3`` answers, ``{"result": {...}}`` (one or several chunks);
* camelCase (OTLP/JSON) or snake_case (protobuf field names) keys; ids as hex or base64 (the protojson encoding of
  bytes: a 32/16-character hex string is hex, anything else is decoded as base64); integers as JSON numbers or
  strings; enums (span kind, status code) as integers or names.

Spans are grouped by trace, then by ``causaltrace.run.id``. Spans with ``causaltrace.step.*`` attributes are steps
(``semconv.step_from_attributes``; times from the span; the span id kept); the root span (named
``causaltrace.run``, or without one the span carrying ``causaltrace.run.id`` and no step attributes) gives the Run
fields (``semconv.run_fields_from_attributes``). Every other span (AutoGen's own, HTTP spans…) is ignored; a trace
without causaltrace spans goes to :mod:`causaltrace.collector.foreign_spans` (OpenInference, GenAI), and an input
whose spans give no run at all is an InvalidInputError saying how many spans were read. A trace
with step spans but no root span still gives a Run (framework ``"unknown"``). Dependencies come from the
``causaltrace.depends_on.*`` attributes, else from links carrying ``causaltrace.dependency.kind``.

Decisions where the architecture is silent:

* A derived id maps back to ``None``: a span id equal to ``sha256(run_id + step_id)[:16]`` gives
  ``step.span_id=None`` and a trace id equal to ``sha256(run_id)[:32]`` gives ``run.trace_id=None``, so exporting a
  Run and importing it back gives an equal Run whether or not the ids were set.
* Times: datetimes are exported exactly (integer microseconds × 1000) and imported as UTC-aware datetimes
  (nanoseconds below a microsecond are dropped); a naive datetime is taken as UTC. Time 0 means "no time", so the
  epoch itself cannot be represented; OTLP's fixed64 times end in 2554 and start in 1970, so a step time outside
  them is an InvalidInputError on export (a run's own times, which travel as attributes too, leave the root span's
  time at 0). Run times travel as ISO attributes; the root span's own times are used only
  when those attributes are absent.
* The root span's status is ERROR (with the outcome's reason, else the verdict's) for a failed or incomplete run, OK for a success,
  unset otherwise; a step span's status is its step's (ERROR carries ``step.error.message``). On import, a step
  span without a ``causaltrace.step.status`` attribute takes its status from the span status.
* Backends that store OTLP in Jaeger's own model turn array attributes into JSON text; list-valued attributes
  (``depends_on.*``, ``run.agents``) given as a JSON string are decoded back to lists.
* A root-span JSON attribute (``run.outcome``, ``.metadata``, ``.annotations``, ``.recording``) cut by the live
  payload policy cannot be parsed: it is dropped (the outcome falls back to ``causaltrace.run.status``) and its
  name listed in ``run.metadata["causaltrace.truncated_attributes"]``, rather than failing the whole import.
* Spans repeated with the same (trace id, span id) are read once (the first is kept).
* Runs come back in order of first appearance of their trace, and within a trace in order of their root span
  (runs without one last).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status
from pydantic import ValidationError

from causaltrace import semconv
from causaltrace.collector import recording_otlp, tool_spans
from causaltrace.collector.otlp_decode import (
    NESTED_TOO_DEEPLY,
    STATUS_ERROR,
    STATUS_OK,
    DecodedSpan,
    documents_of_file,
    is_hex,
    parse_documents,
    spans_of_document,
)
from causaltrace.exceptions import InvalidInputError, TraceAssemblyError
from causaltrace.schema import Outcome, Run, Step

__all__ = [
    "SERVICE_NAME",
    "TRUNCATED_RUN_ATTRIBUTES_KEY",
    "datetime_to_nanos",
    "derived_span_id",
    "derived_trace_id",
    "load_otlp_json",
    "nanos_to_datetime",
    "parse_documents",
    "run_to_otlp",
    "runs_from_documents",
    "runs_from_otlp",
    "runs_from_spans",
    "iter_runs_from_spans",
]

SERVICE_NAME = "causaltrace"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)
_LIST_ATTRIBUTES = (semconv.DEPENDS_ON_STEP_IDS, semconv.DEPENDS_ON_KINDS, semconv.RUN_AGENTS)
_ROOT_SALT = "\x00causaltrace.run"
_TRUNCATION_TEXT = "causaltrace: truncated"  # what semconv.TRUNCATION_MARKER always contains
_RUN_JSON_ATTRIBUTES = (semconv.RUN_OUTCOME, semconv.RUN_METADATA, semconv.RUN_ANNOTATIONS, semconv.RUN_RECORDING)
#: A stored run's Recording is exported whole, whatever its size (the live ceiling is for a live export batch).
_EXPORT_RECORDING = recording_otlp.RecordingExport(enabled=True, max_bytes=2**62)
#: Dependencies on a tool call itself, not on its result (which shares its span): a link without a step id of
#: one of these kinds to a merged span is the call's.
_CALL_DEPENDENCY_KINDS = frozenset({"tool_result_of", "executes", "delegated_by"})
#: Run metadata key listing the root-span attributes dropped on import because a payload limit cut them.
TRUNCATED_RUN_ATTRIBUTES_KEY = "causaltrace.truncated_attributes"


# ---------------------------------------------------------------------------------------------------- ids, time


def derived_trace_id(run_id: str) -> str:
    """The trace id of a run that has none: the first 32 hex digits of ``sha256(run_id)``."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def derived_span_id(run_id: str, step_id: str) -> str:
    """The span id of a step that has none: the first 16 hex digits of ``sha256(run_id + step_id)``."""
    return hashlib.sha256((run_id + step_id).encode()).hexdigest()[:16]


def _root_span_id(run_id: str, taken: set[str]) -> str:
    salt = _ROOT_SALT
    while True:
        span_id = hashlib.sha256((run_id + salt).encode()).hexdigest()[:16]
        if span_id not in taken:
            return span_id
        salt += "\x00"  # pragma: no cover - a 64-bit collision with a step's span id


def datetime_to_nanos(value: datetime | None) -> int:
    """Integer nanoseconds since the epoch (exact; a naive datetime is taken as UTC); ``None`` → 0."""
    if value is None:
        return 0
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return ((value - _EPOCH) // _ONE_MICROSECOND) * 1000


def nanos_to_datetime(nanos: int) -> datetime | None:
    """A UTC-aware datetime from integer nanoseconds (below a microsecond dropped); 0 → ``None``."""
    if nanos == 0:
        return None
    return _EPOCH + timedelta(microseconds=nanos // 1000)


# ---------------------------------------------------------------------------------------------------------- export


def _any_value(value: Any) -> AnyValue:
    """A Python value as an OTLP AnyValue: bool, int, float, str, lists and mappings; anything else as its str."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[_any_value(v) for v in value]))
    if isinstance(value, Mapping):
        return AnyValue(kvlist_value=KeyValueList(values=_key_values(value)))
    return AnyValue(string_value=str(value))


def _key_values(attrs: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=_any_value(value)) for key, value in attrs.items() if value is not None]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _scalar_json(value: Any) -> dict[str, Any] | None:
    kind = type(value)
    if kind is str:
        return {"stringValue": value}
    if kind is bool:
        return {"boolValue": value}
    if kind is int and _INT64_MIN <= value <= _INT64_MAX:
        return {"intValue": str(value)}
    if kind is float and math.isfinite(value):
        return {"doubleValue": value}
    return None


def _value_json(value: Any) -> dict[str, Any]:
    """A Python value as OTLP/JSON AnyValue: the common forms directly (see "Speed"), the rest by ``json_format``
    from :func:`_any_value`'s message."""
    scalar = _scalar_json(value)
    if scalar is not None:
        return scalar
    if type(value) in (list, tuple) and value:
        items = [_scalar_json(item) for item in value]
        if None not in items:
            return {"arrayValue": {"values": items}}
    return json_format.MessageToDict(_any_value(value), use_integers_for_enums=True)


def _attributes_json(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in attrs.items():
        if type(value) is str:  # most attributes: inlined, as this runs ~30 times per span
            out.append({"key": key, "value": {"stringValue": value}})
        elif value is not None:
            out.append({"key": key, "value": _value_json(value)})
    return out


def _checked_id(value: str | None, length: int, what: str) -> str | None:
    if value is None:
        return None
    if not is_hex(value, length):
        raise InvalidInputError(f"{what} {value!r} is not {length} hex digits")
    return value.lower()


def _span_ids(run: Run, call_of: Mapping[str, str]) -> dict[str, str]:
    """Each step's span id (its own, checked, or derived; a call's result has its call's, ``call_of``: result step
    id → call step id); InvalidInputError when two other steps share one."""
    span_ids: dict[str, str] = {}
    taken: set[str] = set()
    for step in run.steps:
        span_id = _checked_id(step.span_id, 16, f"step {step.step_id!r}: span_id")
        call = call_of.get(step.step_id)
        if call is not None:  # on its call's span (its own span id, if any, travels as an attribute)
            span_ids[step.step_id] = span_ids[call]
            continue
        span_id = span_id or derived_span_id(run.run_id, step.step_id)
        if span_id in taken:
            raise InvalidInputError(f"step {step.step_id!r}: span id {span_id} is used by another step")
        span_ids[step.step_id] = span_id
        taken.add(span_id)
    return span_ids


_MAX_NANOS = 2**64 - 1  # fixed64: OTLP times run from 1970 to 2554


def _span_nanos(value: datetime | None, what: str | None) -> int:
    """A span time; out of OTLP's range it is 0 for the root (the run's times travel as attributes too) and an
    error for a step (``what`` names it)."""
    nanos = datetime_to_nanos(value)
    if 0 <= nanos <= _MAX_NANOS:
        return nanos
    if what is None:
        return 0
    raise InvalidInputError(f"{what}: {value} is outside the times OTLP can carry (1970 to 2554)")


def _span_json(span: Span, trace_id: str, span_id: str, parent: str | None, attrs: Mapping[str, Any],
               links: list[tuple[str, Mapping[str, Any]]] = (),
               events: list[tuple[str, int, Mapping[str, Any]]] = ()) -> dict[str, Any]:
    """A span (its message without ids, attributes and links) as OTLP/JSON, with them added: hex ids, the times
    always written ("0" for none, which protobuf leaves out as a default), attributes before links and status."""
    body = json_format.MessageToDict(span, use_integers_for_enums=True)
    status = body.pop("status", None)
    out: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if parent is not None:
        out["parentSpanId"] = parent
    out.update(body)
    out.setdefault("startTimeUnixNano", "0")
    out.setdefault("endTimeUnixNano", "0")
    out["attributes"] = _attributes_json(attrs)
    if events:  # (name, time in ns, attributes); a time of 0 is left out, as protobuf's JSON leaves out defaults
        out["events"] = [{**({"timeUnixNano": str(time)} if time else {}), "name": name,
                          "attributes": _attributes_json(event_attrs)} for name, time, event_attrs in events]
    if links:
        out["links"] = [{"traceId": trace_id, "spanId": target, "attributes": _attributes_json(link_attrs)}
                        for target, link_attrs in links]
    if status is not None:
        out["status"] = status
    return out


def _root_span(run: Run, trace_id: str, root_id: str, policy: Callable[[Mapping[str, Any]], Mapping[str, Any]]
               ) -> dict[str, Any]:
    root_attrs = semconv.run_attributes(
        run_id=run.run_id, framework=run.framework, name=run.name, task=run.task, agents=run.agents,
        outcome=run.outcome, metadata=run.metadata, annotations=run.annotations,
        started_at=run.started_at, ended_at=run.ended_at,
    )
    root = Span(name=semconv.root_span_name(run.name), kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=_span_nanos(run.started_at, None),
                end_time_unix_nano=_span_nanos(run.ended_at, None))
    if run.outcome.status in ("failure", "incomplete"):
        verdict_reason = run.outcome.verdict.reason if run.outcome.verdict is not None else ""
        root.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=run.outcome.reason or verdict_reason))
    elif run.outcome.status == "success":
        root.status.code = Status.STATUS_CODE_OK
    events = []
    if run.recording is not None:  # the root span's Recording event, as a live run carries it (issue 33 item 4)
        carried = recording_otlp.recording_attributes(
            run.recording, settings=_EXPORT_RECORDING, chunk_chars=recording_otlp.EXPORT_CHUNK_CHARS)
        events.append((semconv.RECORDING_EVENT, root.end_time_unix_nano, policy(carried)))
    return _span_json(root, trace_id, root_id, None, policy(root_attrs), events=events)


def _step_status(span: Span, steps: Iterable[Step]) -> None:
    """The span's status: ERROR when a step of it failed (that step's message), OK when all are ok, else unset."""
    steps = list(steps)
    failed = next((s for s in reversed(steps) if s.status == "error"), None)
    if failed is not None:
        span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR,
                                    message=failed.error.message if failed.error is not None else ""))
    elif all(s.status == "ok" for s in steps):
        span.status.code = Status.STATUS_CODE_OK


def _step_span(step: Step, result: Step | None, trace_id: str, span_ids: Mapping[str, str], root_id: str,
               policy: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> dict[str, Any]:
    """A step's span; with ``result``, the one span of a tool call and its result (tool_spans.call_result_pairs)."""
    last = result if result is not None else step
    span = Span(name=semconv.span_name(step),
                kind=Span.SPAN_KIND_CLIENT if semconv.is_client_span(step.kind) else Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=_span_nanos(step.started_at, f"step {step.step_id!r}: started_at"),
                end_time_unix_nano=_span_nanos(last.ended_at, f"step {last.step_id!r}: ended_at"))
    _step_status(span, (step,) if result is None else (step, result))
    own = span_ids[step.step_id]
    links = [  # each dependency is also a link to the producer's span (never to the span itself)
        (span_ids[dep.step_id], {semconv.DEPENDENCY_KIND: dep.kind, semconv.DEPENDENCY_STEP_ID: dep.step_id})
        for s in ((step,) if result is None else (step, result))
        for dep in s.depends_on
        if span_ids[dep.step_id] != own
    ]
    parent = span_ids[step.parent_step_id] if step.parent_step_id else root_id
    if result is None:
        attrs = semconv.step_attributes(step)
    else:
        _span_nanos(step.ended_at, f"step {step.step_id!r}: ended_at")
        _span_nanos(result.started_at, f"step {result.step_id!r}: started_at")
        attrs = tool_spans.merged_step_attributes(step, result)
    return _span_json(span, trace_id, own, parent, policy(attrs), links)


def run_to_otlp(
    run: Run, *, attribute_policy: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The Run as one OTLP/JSON ExportTraceServiceRequest (complete: :func:`runs_from_otlp` gives it back).

    ``attribute_policy`` (e.g. the payload policy of ``causaltrace export --redact``) maps each span's attributes
    to the ones to write; without it the export is the full stored Run.

    Raises :class:`InvalidInputError` when the run's ``trace_id`` or a step's ``span_id`` is not hex of the right
    length, or two steps share a span id.
    """
    trace_id = _checked_id(run.trace_id, 32, f"run {run.run_id!r}: trace_id") or derived_trace_id(run.run_id)
    pairs = tool_spans.call_result_pairs(run.steps)
    call_of = {result.step_id: call for call, result in pairs.items()}
    span_ids = _span_ids(run, call_of)
    root_id = _root_span_id(run.run_id, set(span_ids.values()))
    policy = attribute_policy or (lambda attrs: semconv.openinference_attributes(dict(attrs)))
    spans = [_root_span(run, trace_id, root_id, policy)]
    spans += [_step_span(step, pairs.get(step.step_id), trace_id, span_ids, root_id, policy)
              for step in run.steps if step.step_id not in call_of]
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=_key_values({"service.name": SERVICE_NAME})),
        scope_spans=[ScopeSpans(scope=InstrumentationScope(name=semconv.INSTRUMENTATION_NAME))],
    )])
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    return document


# ---------------------------------------------------------------------------------------------------------- import


def _normalised_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    out = dict(attrs)
    for key in _LIST_ATTRIBUTES:
        value = out.get(key)
        if isinstance(value, str):
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, list):
                out[key] = decoded
    return out


def _normalised_list(value: Any) -> list[Any]:
    """A list attribute as a list (JSON text decoded); anything else: empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _wrap(label: str, exc: Exception) -> InvalidInputError:
    text = exc.message if isinstance(exc, InvalidInputError) else str(exc)
    return InvalidInputError(f"{label}: {text}")


def _build_steps(span: DecodedSpan, run_id: str, by_span_id: Mapping[str, DecodedSpan]) -> list[Step]:
    """The step of a step span, or the two of a tool call's span that also carries its result
    (``causaltrace.result.*``): the call from the span's start to its recorded end, the result from its recorded
    start to the span's end."""
    split = tool_spans.split_merged_attributes(span.attrs)
    if split is None:
        return [_build_step(span, run_id, by_span_id, span.attrs)]
    call_attrs, result_attrs = split
    ended = nanos_to_datetime(int(call_attrs.pop(semconv.STEP_ENDED_AT, 0) or 0))
    started = nanos_to_datetime(int(result_attrs.pop(semconv.RESULT_STARTED_AT, 0) or 0))
    own = result_attrs.pop(semconv.RESULT_SPAN_ID, None)
    # the span's links are both steps' dependencies: the call's are those the result's attributes do not list
    theirs = set(zip(_normalised_list(result_attrs.get(semconv.DEPENDS_ON_STEP_IDS)),
                     _normalised_list(result_attrs.get(semconv.DEPENDS_ON_KINDS)), strict=False))
    call = _build_step(span, run_id, by_span_id, call_attrs, times=(nanos_to_datetime(span.start), ended),
                       skip_links=theirs)
    result = _build_step(span, run_id, by_span_id, result_attrs, times=(started, nanos_to_datetime(span.end)),
                         span_id=(own or None) if own is not None else call.span_id, skip_links=None)
    return [call, result]


def _build_step(span: DecodedSpan, run_id: str, by_span_id: Mapping[str, DecodedSpan], raw: Mapping[str, Any],
                *, times: tuple[datetime | None, datetime | None] | None = None, span_id: Any = ...,
                skip_links: set[tuple[str, str]] | None = set()) -> Step:  # noqa: B006 - never mutated
    """One step of a span from its attributes ``raw``; without dependency attributes its dependencies come from
    the span's links, except the (step id, kind) pairs in ``skip_links`` (None: none from links)."""
    attrs = _normalised_attrs(raw)
    if semconv.STEP_STATUS not in attrs:
        if span.status_code == STATUS_ERROR:
            attrs[semconv.STEP_STATUS] = "error"
            attrs.setdefault(semconv.STEP_ERROR_TYPE, "error")
            attrs.setdefault(semconv.STEP_ERROR_MESSAGE, span.status_message)
        elif span.status_code == STATUS_OK:
            attrs[semconv.STEP_STATUS] = "ok"
    if skip_links is not None and semconv.DEPENDS_ON_STEP_IDS not in attrs and semconv.DEPENDS_ON_KINDS not in attrs:
        ids, kinds = [], []
        for i, link in enumerate(span.links):
            kind = link.attrs.get(semconv.DEPENDENCY_KIND)
            if kind is None:
                continue
            target = link.attrs.get(semconv.DEPENDENCY_STEP_ID)
            if target is None and link.span_id is not None and link.span_id in by_span_id:
                linked = by_span_id[link.span_id].attrs
                # a tool call's span carries its result too: a link of a kind that reads the result is the result's
                result = linked.get(semconv.RESULT_ID) if kind not in _CALL_DEPENDENCY_KINDS else None
                target = result if result is not None else linked.get(semconv.STEP_ID)
            if target is None:
                raise InvalidInputError(
                    f"{span.label}: links[{i}] ({semconv.DEPENDENCY_KIND}={kind!r}) points to no step of the trace"
                )
            if (str(target), kind) in skip_links:
                continue
            ids.append(str(target))
            kinds.append(kind)
        if ids:
            attrs[semconv.DEPENDS_ON_STEP_IDS] = ids
            attrs[semconv.DEPENDS_ON_KINDS] = kinds
    step_id = attrs.get(semconv.STEP_ID)
    if span_id is ...:
        span_id = (
            None if step_id is not None and span.span_id == derived_span_id(run_id, str(step_id)) else span.span_id
        )
    started, ended = times if times is not None else (nanos_to_datetime(span.start), nanos_to_datetime(span.end))
    try:
        return semconv.step_from_attributes(attrs, started_at=started, ended_at=ended, span_id=span_id)
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        raise _wrap(span.label, exc) from exc


def _run_fields(root: DecodedSpan) -> dict[str, Any]:
    """The Run fields of a root span; JSON attributes cut by the live payload policy are dropped, not fatal."""
    attrs = _normalised_attrs(root.attrs)
    dropped = []
    for key in _RUN_JSON_ATTRIBUTES:
        value = attrs.get(key)
        if isinstance(value, str) and _TRUNCATION_TEXT in value:
            try:
                json.loads(value)
            except json.JSONDecodeError:
                del attrs[key]
                dropped.append(key)
    fields = recording_otlp.apply_to_run_fields(semconv.run_fields_from_attributes(attrs), _with_recording(root, attrs))
    if semconv.RUN_OUTCOME in dropped and isinstance(attrs.get(semconv.RUN_STATUS), str):
        fields["outcome"] = Outcome(status=attrs[semconv.RUN_STATUS])
    if dropped:
        fields["metadata"] = {**(fields.get("metadata") or {}), TRUNCATED_RUN_ATTRIBUTES_KEY: dropped}
    return fields


def _with_recording(root: DecodedSpan, attrs: dict[str, Any]) -> dict[str, Any]:
    """The root's attributes with its Recording's chunk attributes: from its ``causaltrace.run.recording`` event
    (live runs since issue 33), else as they are (older traces carried them as attributes)."""
    if semconv.RECORDING_CHUNKS in attrs:
        return attrs
    for event in root.events:
        if event.name == semconv.RECORDING_EVENT and semconv.RECORDING_CHUNKS in event.attrs:
            return {**attrs, **event.attrs}
    return attrs


def _pick_root(candidates: list[DecodedSpan]) -> DecodedSpan:
    for span in candidates:
        if semconv.is_root_span_name(span.name):
            return span
    for span in candidates:
        if semconv.RUN_FRAMEWORK in span.attrs:
            return span
    return candidates[0]


def _runs_of_trace(trace_id: str, spans: list[DecodedSpan]) -> list[Run]:
    by_span_id = {s.span_id: s for s in spans}
    roots: dict[str, list[DecodedSpan]] = {}
    steps: dict[str, list[DecodedSpan]] = {}
    for span in spans:
        if span.is_step:
            run_id = span.attrs.get(semconv.RUN_ID)
            if run_id is None:
                raise InvalidInputError(f"{span.label}: span attribute {semconv.RUN_ID!r} is missing")
            steps.setdefault(str(run_id), []).append(span)
        elif semconv.RUN_ID in span.attrs:
            roots.setdefault(str(span.attrs[semconv.RUN_ID]), []).append(span)
        elif span.name == semconv.LEGACY_ROOT_SPAN_NAME or semconv.RUN_FRAMEWORK in span.attrs:
            raise InvalidInputError(f"{span.label}: root span attribute {semconv.RUN_ID!r} is missing")
    run_ids = list(roots) + [r for r in steps if r not in roots]
    if not run_ids:  # no causaltrace spans: another instrumentor's (OpenInference, GenAI) or none
        from causaltrace.collector.foreign_spans import runs_of_foreign_trace

        return runs_of_foreign_trace(trace_id, spans, spans[0].where if spans else "")
    runs = []
    for run_id in run_ids:
        root = _pick_root(roots[run_id]) if run_id in roots else None
        label = root.label if root is not None else f"trace {trace_id}, run {run_id!r}"
        if root is not None:
            try:
                fields = _run_fields(root)
            except (ValueError, TypeError) as exc:
                raise _wrap(root.label, exc) from exc
            if "started_at" not in fields and root.start:
                fields["started_at"] = nanos_to_datetime(root.start)
            if "ended_at" not in fields and root.end:
                fields["ended_at"] = nanos_to_datetime(root.end)
        else:
            fields = {"run_id": run_id, "framework": "unknown"}
        if trace_id != derived_trace_id(run_id):
            fields["trace_id"] = trace_id
        run_steps = [step for span in steps.get(run_id, []) for step in _build_steps(span, run_id, by_span_id)]
        try:
            runs.append(Run(**fields, steps=tuple(run_steps)))
        except ValidationError as exc:
            raise InvalidInputError(f"{label}: the spans do not form a valid run: {exc}") from exc
        except TraceAssemblyError as exc:
            raise type(exc)(f"{label}: {exc.message}") from exc
    return runs


def runs_from_documents(docs: Iterable[tuple[str, Any]]) -> list[Run]:
    """The runs of parsed documents; a structure nested beyond Python's recursion limit (a document, or a JSON
    attribute value decoded on the way) is an InvalidInputError, never a RecursionError."""
    try:
        return _runs_from_parsed(docs)
    except RecursionError:
        raise InvalidInputError(f"a span or attribute value: {NESTED_TOO_DEEPLY}") from None


def _runs_from_parsed(docs: Iterable[tuple[str, Any]]) -> list[Run]:
    return runs_from_spans(span for where, doc in docs for span in spans_of_document(doc, where))


def runs_from_spans(spans: Iterable[DecodedSpan]) -> list[Run]:
    """The runs of decoded spans in any order (:func:`iter_runs_from_spans`), as a list."""
    return list(iter_runs_from_spans(spans))


def iter_runs_from_spans(spans: Iterable[DecodedSpan]) -> Iterator[Run]:
    """The runs of decoded spans in any order, grouped by trace (a span repeated under its ids is read once): the
    assembly every span shape shares (issue 34: ``collector.span_shapes`` hands its spans here). Runs come one
    trace at a time and each trace's spans are let go once its runs are made, so a caller that stores each run
    as it comes holds the spans and one run, never all the runs."""
    traces: dict[str, dict[str, DecodedSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, {}).setdefault(span.span_id, span)
    n_traces, n_spans, found = len(traces), sum(len(s) for s in traces.values()), False
    while traces:
        trace_id = next(iter(traces))
        for run in _runs_of_trace(trace_id, list(traces.pop(trace_id).values())):
            found = True
            yield run
    if n_traces and not found:
        from causaltrace.collector.foreign_spans import nothing_found

        raise InvalidInputError(nothing_found(n_spans, n_traces))


def runs_from_otlp(data: dict[str, Any] | list[Any]) -> list[Run]:
    """The Runs in already-parsed OTLP/JSON: one request or Jaeger answer (a dict), or a list of them.

    Raises :class:`InvalidInputError` naming the document (or line, via :func:`load_otlp_json`), span and field
    when the input is malformed; :class:`~causaltrace.exceptions.TraceAssemblyError` when the steps do not form a
    valid graph.
    """
    if isinstance(data, list):
        return runs_from_documents((f"document {i}", doc) for i, doc in enumerate(data, start=1))
    return runs_from_documents([("document 1", data)])


def load_otlp_json(path_or_text: str | Path | bytes) -> list[Run]:
    """The Runs in an OTLP/JSON file or text (JSON lines, one or more documents, or a Jaeger answer).

    A :class:`~pathlib.Path` is read; a ``str`` that is empty or starts with ``{`` or ``[`` (after whitespace) is
    the text itself, any other ``str`` a path. A file of JSON lines is read line by line (only the decoded spans
    are kept until the runs are assembled). Errors name the file and line.
    """
    if isinstance(path_or_text, bytes):
        try:
            text = path_or_text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"OTLP JSON is not UTF-8 text: {exc}") from exc
        return runs_from_documents(parse_documents(text))
    if isinstance(path_or_text, str) and path_or_text.lstrip()[:1] in ("{", "[", ""):
        return runs_from_documents(parse_documents(path_or_text))
    path = Path(path_or_text)
    try:
        return runs_from_documents(documents_of_file(path))
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc.message}") from exc
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the OTLP file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not UTF-8 text: {exc}") from exc
