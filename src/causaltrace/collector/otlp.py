"""Runs to and from OTLP/JSON (ARCHITECTURE "The flow of data", "Payload policy", and semconv.py's mapping).

Usage::

    from causaltrace.collector.otlp import load_otlp_json, run_to_otlp, runs_from_otlp

    request = run_to_otlp(run)                     # one ExportTraceServiceRequest (a dict, OTLP/JSON encoding)
    assert runs_from_otlp(request) == [run]        # the export is complete: importing it gives the same Run
    runs = load_otlp_json(Path("traces.jsonl"))    # OTel Collector `file` exporter output, or a Jaeger answer

Export (:func:`run_to_otlp`): one trace per run, with a root span named ``causaltrace.run`` carrying every
Run-level field (``semconv.run_attributes``, recording and annotations included) and one span per step
(``semconv.step_attributes``) whose parent is its parent step's span, or the root span. Each dependency is also an
OTel link to the producer's span, with ``causaltrace.dependency.kind`` and ``causaltrace.dependency.step_id`` as
link attributes. Span ids are the step's ``span_id`` when it has one, else the first 16 hex digits of
``sha256(run_id + step_id)``; the trace id is the run's ``trace_id``, else the first 32 hex digits of
``sha256(run_id)``. Times are integer nanoseconds since the epoch; a missing time is ``"0"``.

Import (:func:`runs_from_otlp`, :func:`load_otlp_json`) accepts:

* OTLP/JSON lines as the OTel Collector ``file`` exporter writes them (one ExportTraceServiceRequest per line);
  one trace may be spread over several lines;
* a single JSON document (pretty-printed or not), or several concatenated;
* Jaeger ``/api/v3`` answers, ``{"result": {...}}`` (one or several chunks);
* camelCase (OTLP/JSON) or snake_case (protobuf field names) keys; ids as hex or base64 (the protojson encoding of
  bytes: a 32/16-character hex string is hex, anything else is decoded as base64); integers as JSON numbers or
  strings; status codes as numbers or enum names.

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
  epoch itself cannot be represented. Run times travel as ISO attributes; the root span's own times are used only
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

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from causaltrace import semconv
from causaltrace.collector import recording_otlp
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
    "run_to_otlp",
    "runs_from_otlp",
]

SERVICE_NAME = "causaltrace"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)
_SPAN_KIND_INTERNAL = 1
_SPAN_KIND_CLIENT = 3
_STATUS_UNSET, _STATUS_OK, _STATUS_ERROR = 0, 1, 2
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2, "UNSET": 0, "OK": 1, "ERROR": 2}
_STEP_PREFIX = "causaltrace.step."
_LIST_ATTRIBUTES = (semconv.DEPENDS_ON_STEP_IDS, semconv.DEPENDS_ON_KINDS, semconv.RUN_AGENTS)
_ROOT_SALT = "\x00causaltrace.run"
_TRUNCATION_TEXT = "causaltrace: truncated"  # what semconv.TRUNCATION_MARKER always contains
_RUN_JSON_ATTRIBUTES = (semconv.RUN_OUTCOME, semconv.RUN_METADATA, semconv.RUN_ANNOTATIONS, semconv.RUN_RECORDING)
#: Run metadata key listing the root-span attributes dropped on import because a payload limit cut them.
TRUNCATED_RUN_ATTRIBUTES_KEY = "causaltrace.truncated_attributes"
#: Why a document fails when its arrays / objects nest deeper than the JSON decoder (or a decoding walk) can go.
_NESTED_TOO_DEEPLY = "JSON nested too deeply (beyond the recursion limit); not a trace"


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


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in "0123456789abcdefABCDEF" for c in text)


# ---------------------------------------------------------------------------------------------------------- export


def _encode_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_encode_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": _encode_attributes(value)}}
    return {"stringValue": str(value)}


def _encode_attributes(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _encode_value(value)} for key, value in attrs.items() if value is not None]


def _checked_id(value: str | None, length: int, what: str) -> str | None:
    if value is None:
        return None
    if not _is_hex(value, length):
        raise InvalidInputError(f"{what} {value!r} is not {length} hex digits")
    return value.lower()


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
    span_ids: dict[str, str] = {}
    for step in run.steps:
        span_id = _checked_id(step.span_id, 16, f"step {step.step_id!r}: span_id")
        span_id = span_id or derived_span_id(run.run_id, step.step_id)
        if span_id in span_ids.values():
            raise InvalidInputError(f"step {step.step_id!r}: span id {span_id} is used by another step")
        span_ids[step.step_id] = span_id
    root_id = _root_span_id(run.run_id, set(span_ids.values()))
    policy = attribute_policy or (lambda attrs: semconv.openinference_attributes(dict(attrs)))

    root_attrs = semconv.run_attributes(
        run_id=run.run_id,
        framework=run.framework,
        name=run.name,
        task=run.task,
        agents=run.agents,
        outcome=run.outcome,
        metadata=run.metadata,
        annotations=run.annotations,
        recording=run.recording,
        started_at=run.started_at,
        ended_at=run.ended_at,
    )
    root: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": root_id,
        "name": semconv.root_span_name(run.name),
        "kind": _SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(datetime_to_nanos(run.started_at)),
        "endTimeUnixNano": str(datetime_to_nanos(run.ended_at)),
        "attributes": _encode_attributes(policy(root_attrs)),
    }
    if run.outcome.status in ("failure", "incomplete"):
        verdict_reason = run.outcome.verdict.reason if run.outcome.verdict is not None else ""
        root["status"] = {"code": _STATUS_ERROR, "message": run.outcome.reason or verdict_reason}
    elif run.outcome.status == "success":
        root["status"] = {"code": _STATUS_OK}
    spans = [root]
    for step in run.steps:
        span: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": span_ids[step.step_id],
            "parentSpanId": span_ids[step.parent_step_id] if step.parent_step_id else root_id,
            "name": semconv.span_name(step),
            "kind": _SPAN_KIND_CLIENT if semconv.is_client_span(step.kind) else _SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(datetime_to_nanos(step.started_at)),
            "endTimeUnixNano": str(datetime_to_nanos(step.ended_at)),
            "attributes": _encode_attributes(policy(semconv.step_attributes(step))),
        }
        if step.depends_on:
            span["links"] = [
                {
                    "traceId": trace_id,
                    "spanId": span_ids[dep.step_id],
                    "attributes": _encode_attributes(
                        {semconv.DEPENDENCY_KIND: dep.kind, semconv.DEPENDENCY_STEP_ID: dep.step_id}
                    ),
                }
                for dep in step.depends_on
            ]
        if step.status == "ok":
            span["status"] = {"code": _STATUS_OK}
        elif step.status == "error":
            message = step.error.message if step.error is not None else ""
            span["status"] = {"code": _STATUS_ERROR, "message": message}
        spans.append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _encode_attributes({"service.name": SERVICE_NAME})},
                "scopeSpans": [{"scope": {"name": semconv.INSTRUMENTATION_NAME}, "spans": spans}],
            }
        ]
    }


# ---------------------------------------------------------------------------------------------------------- import


@dataclass(kw_only=True)
class _Link:
    trace_id: str | None
    span_id: str | None
    attrs: dict[str, Any]


@dataclass(kw_only=True)
class _Span:
    where: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    links: list[_Link] = field(default_factory=list)
    status_code: int = _STATUS_UNSET
    status_message: str = ""

    @property
    def label(self) -> str:
        return f"{self.where}: span {self.span_id} ({self.name!r})"

    @property
    def is_step(self) -> bool:
        return any(key.startswith(_STEP_PREFIX) for key in self.attrs)


def _get(obj: Mapping[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    if camel in obj:
        return obj[camel]
    return obj.get(snake, default)


def _decode_id(raw: Any, nbytes: int, what: str, where: str) -> str | None:
    """Hex (2·nbytes hex digits) or base64 (protojson bytes) → lowercase hex; empty or all-zero → None."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise InvalidInputError(f"{where}: {what} must be a string, got {type(raw).__name__}")
    if _is_hex(raw, 2 * nbytes):
        value = raw.lower()
    else:
        padded = raw + "=" * (-len(raw) % 4)
        try:
            data = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if len(data) != nbytes:
            raise InvalidInputError(
                f"{where}: {what} {raw!r} is neither {2 * nbytes} hex digits nor base64 of {nbytes} bytes"
            )
        value = data.hex()
    return None if value.strip("0") == "" else value


def _decode_int(raw: Any, what: str, where: str) -> int:
    if raw is None or raw == "":
        return 0
    if isinstance(raw, bool):
        raise InvalidInputError(f"{where}: {what} must be an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            pass
    raise InvalidInputError(f"{where}: {what} must be an integer, got {raw!r}")


_VALUE_KEYS = {
    "stringValue": "string",
    "string_value": "string",
    "boolValue": "bool",
    "bool_value": "bool",
    "intValue": "int",
    "int_value": "int",
    "doubleValue": "double",
    "double_value": "double",
    "arrayValue": "array",
    "array_value": "array",
    "kvlistValue": "kvlist",
    "kvlist_value": "kvlist",
    "bytesValue": "bytes",
    "bytes_value": "bytes",
}


def _decode_value(raw: Any, what: str, where: str) -> Any:
    """An OTLP AnyValue. An empty one (``{}``) is an empty string: encoders omit default-valued ``stringValue``."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: {what} must be an AnyValue object, got {raw!r}")
    for key, value in raw.items():
        kind = _VALUE_KEYS.get(key)
        if kind is None:
            continue
        if kind == "string" or kind == "bytes":
            if not isinstance(value, str):
                raise InvalidInputError(f"{where}: {what}.{key} must be a string")
            return value
        if kind == "bool":
            if isinstance(value, str) and value in ("true", "false"):
                return value == "true"
            if not isinstance(value, bool):
                raise InvalidInputError(f"{where}: {what}.{key} must be a boolean")
            return value
        if kind == "int":
            return _decode_int(value, f"{what}.{key}", where)
        if kind == "double":
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str):
                try:
                    return float(value)  # protojson writes "NaN", "Infinity", "-Infinity" as strings
                except ValueError:
                    pass
            raise InvalidInputError(f"{where}: {what}.{key} must be a number")
        values = value.get("values", []) if isinstance(value, Mapping) else None
        if not isinstance(values, list):
            raise InvalidInputError(f"{where}: {what}.{key}.values must be a list")
        if kind == "array":
            return [_decode_value(v, f"{what}[{i}]", where) for i, v in enumerate(values)]
        return _decode_attributes(values, what, where)
    if not raw:
        return ""
    raise InvalidInputError(f"{where}: {what} has no known value type (keys: {sorted(raw)})")


def _decode_attributes(raw: Any, what: str, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InvalidInputError(f"{where}: {what} must be a list of key/value objects")
    attrs: dict[str, Any] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise InvalidInputError(f"{where}: {what}[{i}] must be an object with a string 'key'")
        key = item["key"]
        attrs[key] = _decode_value(item.get("value", {}), f"attribute {key!r}", where)
    return attrs


def _decode_status(raw: Any, where: str) -> tuple[int, str]:
    if raw is None:
        return _STATUS_UNSET, ""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: status must be an object")
    code = raw.get("code", 0)
    if isinstance(code, str) and code in _STATUS_NAMES:
        code = _STATUS_NAMES[code]
    code = _decode_int(code, "status.code", where)
    message = raw.get("message", "")
    return code, message if isinstance(message, str) else str(message)


def _decode_span(raw: Any, where: str) -> _Span:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: a span must be an object")
    name = raw.get("name", "")
    name = name if isinstance(name, str) else str(name)
    trace_id = _decode_id(_get(raw, "traceId", "trace_id"), 16, "traceId", f"{where}: span {name!r}")
    span_id = _decode_id(_get(raw, "spanId", "span_id"), 8, "spanId", f"{where}: span {name!r}")
    if trace_id is None or span_id is None:
        missing = "traceId" if trace_id is None else "spanId"
        raise InvalidInputError(f"{where}: span {name!r}: {missing} is missing")
    label = f"{where}: span {span_id} ({name!r})"
    parent = _decode_id(_get(raw, "parentSpanId", "parent_span_id"), 8, "parentSpanId", label)
    links = []
    raw_links = raw.get("links") or []
    if not isinstance(raw_links, list):
        raise InvalidInputError(f"{label}: links must be a list")
    for i, link in enumerate(raw_links):
        if not isinstance(link, Mapping):
            raise InvalidInputError(f"{label}: links[{i}] must be an object")
        links.append(
            _Link(
                trace_id=_decode_id(_get(link, "traceId", "trace_id"), 16, f"links[{i}].traceId", label),
                span_id=_decode_id(_get(link, "spanId", "span_id"), 8, f"links[{i}].spanId", label),
                attrs=_decode_attributes(link.get("attributes"), f"links[{i}].attributes", label),
            )
        )
    status_code, status_message = _decode_status(raw.get("status"), label)
    return _Span(
        where=where,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start=_decode_int(_get(raw, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", label),
        end=_decode_int(_get(raw, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", label),
        attrs=_decode_attributes(raw.get("attributes"), "attributes", label),
        links=links,
        status_code=status_code,
        status_message=status_message,
    )


def _list_of(obj: Mapping[str, Any], keys: tuple[str, ...], where: str) -> list[Any]:
    for key in keys:
        if key in obj:
            value = obj[key]
            if value is None:
                return []
            if not isinstance(value, list):
                raise InvalidInputError(f"{where}: {key!r} must be a list")
            return value
    return []


def _spans_of_document(doc: Any, where: str) -> Iterator[_Span]:
    """The spans of one JSON document: a request, a Jaeger ``{"result": ...}`` answer, or a list of either."""
    if isinstance(doc, list):
        for item in doc:
            yield from _spans_of_document(item, where)
        return
    if not isinstance(doc, Mapping):
        raise InvalidInputError(f"{where}: expected a JSON object with 'resourceSpans', got {type(doc).__name__}")
    if "result" in doc:
        yield from _spans_of_document(doc["result"], where)
        return
    if "error" in doc and not ("resourceSpans" in doc or "resource_spans" in doc):
        error = doc["error"]
        message = error.get("message", error) if isinstance(error, Mapping) else error
        raise InvalidInputError(f"{where}: the answer is an error, not traces: {message}")
    if doc and not ("resourceSpans" in doc or "resource_spans" in doc):
        raise InvalidInputError(f"{where}: field 'resourceSpans' is missing (keys: {sorted(doc)[:5]})")
    for r, resource_spans in enumerate(_list_of(doc, ("resourceSpans", "resource_spans"), where)):
        if not isinstance(resource_spans, Mapping):
            raise InvalidInputError(f"{where}: resourceSpans[{r}] must be an object")
        scope_keys = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans")
        for s, scope_spans in enumerate(_list_of(resource_spans, scope_keys, where)):
            if not isinstance(scope_spans, Mapping):
                raise InvalidInputError(f"{where}: resourceSpans[{r}].scopeSpans[{s}] must be an object")
            for span in _list_of(scope_spans, ("spans",), where):
                yield _decode_span(span, where)


def _parse_documents(text: str) -> list[tuple[str, Any]]:
    """``(where, document)`` pairs: JSON lines (each line a document), or one or more concatenated documents.

    ``where`` is ``"line N"`` (the line the document starts on), so errors can name it.
    """
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return []
    try:
        json.loads(lines[first])
        jsonl = True
    except json.JSONDecodeError:
        jsonl = False
    except RecursionError:
        raise InvalidInputError(f"line {first + 1}: {_NESTED_TOO_DEEPLY}") from None
    docs: list[tuple[str, Any]] = []
    if jsonl:
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                docs.append((f"line {i}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"line {i}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
            except RecursionError:
                raise InvalidInputError(f"line {i}: {_NESTED_TOO_DEEPLY}") from None
        return docs
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return docs
        line = text.count("\n", 0, pos) + 1
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"line {exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
        except RecursionError:
            raise InvalidInputError(f"line {line}: {_NESTED_TOO_DEEPLY}") from None
        docs.append((f"line {line}", doc))


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


def _wrap(label: str, exc: Exception) -> InvalidInputError:
    text = exc.message if isinstance(exc, InvalidInputError) else str(exc)
    return InvalidInputError(f"{label}: {text}")


def _build_step(span: _Span, run_id: str, by_span_id: Mapping[str, _Span]) -> Step:
    attrs = _normalised_attrs(span.attrs)
    if semconv.STEP_STATUS not in attrs:
        if span.status_code == _STATUS_ERROR:
            attrs[semconv.STEP_STATUS] = "error"
            attrs.setdefault(semconv.STEP_ERROR_TYPE, "error")
            attrs.setdefault(semconv.STEP_ERROR_MESSAGE, span.status_message)
        elif span.status_code == _STATUS_OK:
            attrs[semconv.STEP_STATUS] = "ok"
    if semconv.DEPENDS_ON_STEP_IDS not in attrs and semconv.DEPENDS_ON_KINDS not in attrs:
        ids, kinds = [], []
        for i, link in enumerate(span.links):
            kind = link.attrs.get(semconv.DEPENDENCY_KIND)
            if kind is None:
                continue
            target = link.attrs.get(semconv.DEPENDENCY_STEP_ID)
            if target is None and link.span_id is not None and link.span_id in by_span_id:
                target = by_span_id[link.span_id].attrs.get(semconv.STEP_ID)
            if target is None:
                raise InvalidInputError(
                    f"{span.label}: links[{i}] ({semconv.DEPENDENCY_KIND}={kind!r}) points to no step of the trace"
                )
            ids.append(str(target))
            kinds.append(kind)
        if ids:
            attrs[semconv.DEPENDS_ON_STEP_IDS] = ids
            attrs[semconv.DEPENDS_ON_KINDS] = kinds
    step_id = attrs.get(semconv.STEP_ID)
    kept_span_id = (
        None if step_id is not None and span.span_id == derived_span_id(run_id, str(step_id)) else span.span_id
    )
    try:
        return semconv.step_from_attributes(
            attrs,
            started_at=nanos_to_datetime(span.start),
            ended_at=nanos_to_datetime(span.end),
            span_id=kept_span_id,
        )
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        raise _wrap(span.label, exc) from exc


def _run_fields(root: _Span) -> dict[str, Any]:
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
    fields = recording_otlp.apply_to_run_fields(semconv.run_fields_from_attributes(attrs), attrs)
    if semconv.RUN_OUTCOME in dropped and isinstance(attrs.get(semconv.RUN_STATUS), str):
        fields["outcome"] = Outcome(status=attrs[semconv.RUN_STATUS])
    if dropped:
        fields["metadata"] = {**(fields.get("metadata") or {}), TRUNCATED_RUN_ATTRIBUTES_KEY: dropped}
    return fields


def _pick_root(candidates: list[_Span]) -> _Span:
    for span in candidates:
        if semconv.is_root_span_name(span.name):
            return span
    for span in candidates:
        if semconv.RUN_FRAMEWORK in span.attrs:
            return span
    return candidates[0]


def _runs_of_trace(trace_id: str, spans: list[_Span]) -> list[Run]:
    by_span_id = {s.span_id: s for s in spans}
    roots: dict[str, list[_Span]] = {}
    steps: dict[str, list[_Span]] = {}
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
        run_steps = [_build_step(span, run_id, by_span_id) for span in steps.get(run_id, [])]
        try:
            runs.append(Run(**fields, steps=tuple(run_steps)))
        except ValidationError as exc:
            raise InvalidInputError(f"{label}: the spans do not form a valid run: {exc}") from exc
        except TraceAssemblyError as exc:
            raise type(exc)(f"{label}: {exc.message}") from exc
    return runs


def _runs_from_documents(docs: Iterable[tuple[str, Any]]) -> list[Run]:
    """The runs of parsed documents; a structure nested beyond Python's recursion limit (a document, or a JSON
    attribute value decoded on the way) is an InvalidInputError, never a RecursionError."""
    try:
        return _runs_from_parsed(docs)
    except RecursionError:
        raise InvalidInputError(f"a span or attribute value: {_NESTED_TOO_DEEPLY}") from None


def _runs_from_parsed(docs: Iterable[tuple[str, Any]]) -> list[Run]:
    traces: dict[str, dict[str, _Span]] = {}
    for where, doc in docs:
        for span in _spans_of_document(doc, where):
            traces.setdefault(span.trace_id, {}).setdefault(span.span_id, span)
    runs: list[Run] = []
    for trace_id, spans in traces.items():
        runs.extend(_runs_of_trace(trace_id, list(spans.values())))
    if traces and not runs:
        from causaltrace.collector.foreign_spans import nothing_found

        raise InvalidInputError(nothing_found(sum(len(s) for s in traces.values()), len(traces)))
    return runs


def runs_from_otlp(data: dict[str, Any] | list[Any]) -> list[Run]:
    """The Runs in already-parsed OTLP/JSON: one request or Jaeger answer (a dict), or a list of them.

    Raises :class:`InvalidInputError` naming the document (or line, via :func:`load_otlp_json`), span and field
    when the input is malformed; :class:`~causaltrace.exceptions.TraceAssemblyError` when the steps do not form a
    valid graph.
    """
    if isinstance(data, list):
        return _runs_from_documents((f"document {i}", doc) for i, doc in enumerate(data, start=1))
    return _runs_from_documents([("document 1", data)])


def load_otlp_json(path_or_text: str | Path | bytes) -> list[Run]:
    """The Runs in an OTLP/JSON file or text (JSON lines, one or more documents, or a Jaeger answer).

    A :class:`~pathlib.Path` is read; a ``str`` that is empty or starts with ``{`` or ``[`` (after whitespace) is
    the text itself, any other ``str`` a path. Errors name the file and line.
    """
    source = ""
    if isinstance(path_or_text, bytes):
        try:
            text = path_or_text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"OTLP JSON is not UTF-8 text: {exc}") from exc
    elif isinstance(path_or_text, str) and path_or_text.lstrip()[:1] in ("{", "[", ""):
        text = path_or_text
    else:
        path = Path(path_or_text)
        source = f"{path}: "
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(f"{path}: cannot read the OTLP file: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise InvalidInputError(f"{path}: not UTF-8 text: {exc}") from exc
    try:
        return _runs_from_documents(_parse_documents(text))
    except InvalidInputError as exc:
        if source:
            raise InvalidInputError(source + exc.message) from exc
        raise
