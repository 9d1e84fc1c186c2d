"""OTLP/JSON text to decoded spans: the import half of :mod:`causaltrace.collector.otlp` below the run assembly.

The structure of a span — its fields, attributes and AnyValues, links, status, camelCase or snake_case keys,
integers as numbers or strings, enum names or integers — is opentelemetry-proto's ``Span`` message, parsed by
``google.protobuf.json_format.ParseDict``. On top come what protobuf's JSON mapping does not do for OTLP/JSON, and
what the inputs we accept need:

* trace and span ids are hex in OTLP/JSON, base64 in protobuf's JSON mapping (the gRPC-gateway answers of Jaeger's
  ``/api/v3``): both are read, here, before the message is parsed (32 / 16 hex digits are hex, anything else is
  decoded as base64); an all-zero id is no id;
* status codes also as the short names ``OK`` / ``ERROR`` / ``UNSET``; an enum name that neither protobuf nor
  that list knows (span kind, status code) is an error, not the 0 that ``ignore_unknown_fields`` would read (an
  integer is read as protobuf reads it: proto3 enums are open); the pre-1.0 ``instrumentationLibrarySpans`` is
  read as ``scopeSpans``;
* the envelopes around requests: JSON lines (the OTel Collector ``file`` exporter), concatenated documents, lists,
  Jaeger's ``{"result": …}`` chunks and its ``{"error": …}`` answers;
* an AnyValue with no known value type, or an attribute without a key, is an error (protobuf would read both as
  empty); an empty AnyValue (``{}``) is an empty string, as encoders omit a default ``stringValue``; a
  ``bytesValue`` is given back as its base64 text;
* JSON lines are split at ``\n`` only (``str.splitlines`` would also split inside a string holding U+2028, which
  ``json.dumps(ensure_ascii=False)`` writes raw); a file's lines are read one at a time
  (:func:`documents_of_file`), so a large file is never held whole as text, nor all its documents at once.

Speed (issue 24 "Measured"): ``json_format`` walks messages in Python, one call per message, and a span's
attributes are ~95 % of its messages (a KeyValue and an AnyValue each). So the span itself — names, kind, times,
status, links, events — goes through ``ParseDict`` with its attribute lists taken out, and each attribute then
takes :func:`_fast_value` when its value is the one shape every encoder writes for common values: an object of
exactly one ``stringValue`` / ``boolValue`` / ``intValue`` / ``doubleValue`` of the exact JSON type (or an
``arrayValue`` of those). Anything else — bytes, key-value lists, an integer as a float, NaN, a value out of
range, an unknown or a second key, snake_case — goes to ``ParseDict`` as a ``KeyValue``, so the library still
decides every case that needs deciding; a property test checks that the fast path gives what ``ParseDict`` gives.

Every error is an :class:`~causaltrace.exceptions.InvalidInputError` naming the line (or document) and the span.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from causaltrace.exceptions import InvalidInputError

__all__ = ["NESTED_TOO_DEEPLY", "STATUS_ERROR", "STATUS_OK", "STATUS_UNSET", "DecodedEvent", "DecodedLink",
           "DecodedSpan", "attributes_of", "decode_id", "decode_span", "documents_of_file", "is_hex", "parse_documents",
           "spans_of_document"]

STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
#: Why a document fails when its arrays / objects nest deeper than the JSON decoder (or a decoding walk) can go.
NESTED_TOO_DEEPLY = "JSON nested too deeply (beyond the recursion limit); not a trace"
_STEP_PREFIX = "causaltrace.step."
_SHORT_STATUS = {"UNSET": "STATUS_CODE_UNSET", "OK": "STATUS_CODE_OK", "ERROR": "STATUS_CODE_ERROR"}
_SPAN_KINDS = list(Span.SpanKind.keys())
_STATUS_CODES = [*Status.StatusCode.keys(), *_SHORT_STATUS]
#: what ParseDict is not given: the ids (read here, hex or base64) and the attribute lists (see "Speed")
_NOT_PARSED_KEYS = frozenset({"traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id",
                              "attributes"})
_SCOPE_KEYS = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans")
_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field: ")
#: json_format counts one level per message: an attribute nested n deep is about 3n messages
_MAX_DEPTH = 600
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DIGITS = re.compile(r"-?[0-9]{1,20}")
_STRING_KEYS = frozenset({"stringValue", "string_value"})
_BOOL_KEYS = frozenset({"boolValue", "bool_value"})
_INT_KEYS = frozenset({"intValue", "int_value"})
_DOUBLE_KEYS = frozenset({"doubleValue", "double_value"})
_ARRAY_KEYS = frozenset({"arrayValue", "array_value"})
#: what :func:`_fast_value` answers when ``json_format`` has to decide
NOT_FAST: Any = object()


@dataclass(kw_only=True)
class DecodedLink:
    trace_id: str | None
    span_id: str | None
    attrs: dict[str, Any]


@dataclass(kw_only=True)
class DecodedEvent:
    """A span event (``exception`` events carry ``exception.type`` / ``exception.message``)."""

    name: str
    time: int
    attrs: dict[str, Any]


@dataclass(kw_only=True)
class DecodedSpan:
    """One span as the run assembly (and :mod:`~causaltrace.collector.foreign_spans`) reads it: ids hex, times
    integer nanoseconds, attributes as Python values."""

    where: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    links: list[DecodedLink] = field(default_factory=list)
    events: list[DecodedEvent] = field(default_factory=list)
    status_code: int = STATUS_UNSET
    status_message: str = ""

    @property
    def label(self) -> str:
        return f"{self.where}: span {self.span_id} ({self.name!r})"

    @property
    def is_step(self) -> bool:
        return any(key.startswith(_STEP_PREFIX) for key in self.attrs)


_HEX = re.compile(r"[0-9a-fA-F]+")
_SPACE = re.compile(r"\s*")


def is_hex(text: str, length: int) -> bool:
    """Whether ``text`` is exactly ``length`` hex digits."""
    return len(text) == length and _HEX.fullmatch(text) is not None


# ----------------------------------------------------------------------------------------------- documents


def parse_documents(text: str) -> list[tuple[str, Any]]:
    """``(where, document)`` pairs: JSON lines (each line a document), or one or more concatenated documents.

    ``where`` is ``"line N"`` (the line the document starts on), so errors can name it.
    """
    lines = text.split("\n")  # not splitlines(): U+2028 / U+0085 may stand raw inside a JSON string
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return []
    try:
        json.loads(lines[first])
        jsonl = True
    except json.JSONDecodeError:
        jsonl = False
    except RecursionError:
        raise InvalidInputError(f"line {first + 1}: {NESTED_TOO_DEEPLY}") from None
    if jsonl:
        return list(_json_lines(lines))
    docs: list[tuple[str, Any]] = []
    decoder = json.JSONDecoder()
    pos = counted = 0
    line = 1
    while True:
        space = _SPACE.match(text, pos)  # \s* always matches
        pos = space.end() if space else pos
        if pos >= len(text):
            return docs
        line += text.count("\n", counted, pos)  # from the last document on: many documents stay linear
        counted = pos
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"line {exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
        except RecursionError:
            raise InvalidInputError(f"line {line}: {NESTED_TOO_DEEPLY}") from None
        docs.append((f"line {line}", doc))


def _json_lines(lines: Iterable[str], start: int = 1) -> Iterator[tuple[str, Any]]:
    for i, line in enumerate(lines, start=start):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"line {i}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
        except RecursionError:
            raise InvalidInputError(f"line {i}: {NESTED_TOO_DEEPLY}") from None
        yield f"line {i}", doc


def documents_of_file(path: Path) -> Iterator[tuple[str, Any]]:
    """The ``(where, document)`` pairs of a file, as :func:`parse_documents` gives them, read lazily: JSON lines one
    line at a time (each document is dropped once its spans are decoded); a file whose first line is not a whole
    JSON document (pretty-printed, or not JSON) is read whole and given to :func:`parse_documents`.

    Raises ``OSError`` / ``UnicodeDecodeError`` while iterating, for the caller to name the file.
    """
    with path.open(encoding="utf-8") as handle:  # universal newlines: \n, \r, \r\n; never inside a JSON string
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                first = json.loads(line)
            except json.JSONDecodeError:
                handle.seek(0)
                yield from parse_documents(handle.read())
                return
            except RecursionError:
                raise InvalidInputError(f"line {number}: {NESTED_TOO_DEEPLY}") from None
            yield f"line {number}", first
            yield from _json_lines(handle, start=number + 1)
            return


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


def spans_of_document(doc: Any, where: str) -> Iterator[DecodedSpan]:
    """The spans of one JSON document: a request, a Jaeger ``{"result": ...}`` answer, or a list of either."""
    if isinstance(doc, list):
        for item in doc:
            yield from spans_of_document(item, where)
        return
    if not isinstance(doc, Mapping):
        raise InvalidInputError(f"{where}: expected a JSON object with 'resourceSpans', got {type(doc).__name__}")
    if "result" in doc:
        yield from spans_of_document(doc["result"], where)
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
        for s, scope_spans in enumerate(_list_of(resource_spans, _SCOPE_KEYS, where)):
            if not isinstance(scope_spans, Mapping):
                raise InvalidInputError(f"{where}: resourceSpans[{r}].scopeSpans[{s}] must be an object")
            for span in _list_of(scope_spans, ("spans",), where):
                yield decode_span(span, where)


# ---------------------------------------------------------------------------------------------------- spans


def decode_id(raw: Any, nbytes: int, what: str, where: str) -> str | None:
    """Hex (2·nbytes hex digits) or base64 (protojson bytes) → lowercase hex; empty or all-zero → None."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise InvalidInputError(f"{where}: {what} must be a string, got {type(raw).__name__}")
    if is_hex(raw, 2 * nbytes):
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


def _id(raw: Mapping[str, Any], camel: str, snake: str, nbytes: int, label: str, what: str = "") -> str | None:
    return decode_id(raw[camel] if camel in raw else raw.get(snake), nbytes, what or camel, label)


def _parsed_part(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in raw.items() if key not in _NOT_PARSED_KEYS}


def _parse_error(label: str, exc: json_format.ParseError, prefix: str = "") -> InvalidInputError:
    """json_format's chain "Failed to parse a field: Failed to parse b field: reason" as ``label: a.b …``
    (``prefix`` first: where the parsed message sits in the span)."""
    text = str(exc)
    path = ([prefix] if prefix else []) + _FAILED_FIELD.findall(text)
    reason = _FAILED_FIELD.sub("", text).rstrip(".")
    if "Message too deep" in reason:
        return InvalidInputError(f"{label}: {NESTED_TOO_DEEPLY}")
    where = ".".join(path) or "the span"
    if re.search(r"int\(\)|integer", reason):
        return InvalidInputError(f"{label}: {where} must be an integer ({reason})")
    return InvalidInputError(f"{label}: {where}: {reason}")


def _check_enum_name(value: Any, names: list[str], what: str, label: str) -> None:
    """An enum given by a name the library does not know is an error (``ignore_unknown_fields`` would read it as
    0: a failed span as unset); an integer is read as the library reads it (proto3 enums are open)."""
    if isinstance(value, str) and value not in names:
        raise InvalidInputError(f"{label}: {what} {value!r} is not one of {', '.join(names)} (or an integer)")


def _parse_span(body: dict[str, Any], label: str) -> Any:
    status = body.get("status")
    if isinstance(status, Mapping) and status.get("code") in _SHORT_STATUS:
        body["status"] = status = {**status, "code": _SHORT_STATUS[status["code"]]}
    _check_enum_name(body.get("kind"), _SPAN_KINDS, "kind", label)
    if isinstance(status, Mapping):
        _check_enum_name(status.get("code"), _STATUS_CODES, "status.code", label)
    try:
        return json_format.ParseDict(body, Span(), ignore_unknown_fields=True, max_recursion_depth=_MAX_DEPTH)
    except json_format.ParseError as exc:
        raise _parse_error(label, exc) from None
    except RecursionError:
        raise InvalidInputError(f"{label}: {NESTED_TOO_DEEPLY}") from None


def decode_span(raw: Any, where: str) -> DecodedSpan:
    """One OTLP/JSON span object, decoded (see the module docstring)."""
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: a span must be an object")
    name = raw.get("name", "")
    name = name if isinstance(name, str) else str(name)
    trace_id = _id(raw, "traceId", "trace_id", 16, f"{where}: span {name!r}")
    span_id = _id(raw, "spanId", "span_id", 8, f"{where}: span {name!r}")
    if trace_id is None or span_id is None:
        raise InvalidInputError(f"{where}: span {name!r}: {'traceId' if trace_id is None else 'spanId'} is missing")
    label = f"{where}: span {span_id} ({name!r})"
    parent = _id(raw, "parentSpanId", "parent_span_id", 8, label)
    raw_links = raw.get("links") or []
    if not isinstance(raw_links, list):
        raise InvalidInputError(f"{label}: links must be a list")
    for i, link in enumerate(raw_links):
        if not isinstance(link, Mapping):
            raise InvalidInputError(f"{label}: links[{i}] must be an object")
    # a link of ids and attributes only (every link causaltrace writes) leaves nothing for ParseDict to check
    body = {**_parsed_part(raw), "name": name, "links": [part for link in raw_links if (part := _parsed_part(link))]}
    message = _parse_span(body, label)
    links = [
        DecodedLink(trace_id=_id(link, "traceId", "trace_id", 16, f"links[{i}].traceId", label),
                    span_id=_id(link, "spanId", "span_id", 8, f"links[{i}].spanId", label),
                    attrs=attributes_of(link.get("attributes"), f"links[{i}].attributes", label))
        for i, link in enumerate(raw_links)
    ]
    return DecodedSpan(where=where, trace_id=trace_id, span_id=span_id, parent_span_id=parent, name=name,
                       start=message.start_time_unix_nano, end=message.end_time_unix_nano,
                       attrs=attributes_of(raw.get("attributes"), "attributes", label),
                       links=links, events=[_event(e) for e in message.events], status_code=message.status.code,
                       status_message=message.status.message)


def _event(event: Any) -> DecodedEvent:
    """A parsed span event (its attributes went through ``ParseDict`` with the span: events are few)."""
    return DecodedEvent(name=event.name, time=event.time_unix_nano,
                        attrs={kv.key: _value(kv.value) for kv in event.attributes})


def attributes_of(raw: Any, what: str, label: str) -> dict[str, Any]:
    """A JSON list of KeyValues as a dict: each value by :func:`_fast_value`, else by ``json_format``."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InvalidInputError(f"{label}: {what} must be a list")
    attrs: dict[str, Any] = {}
    for i, item in enumerate(raw):
        if not (type(item) is dict or isinstance(item, Mapping)) or type(key := item.get("key")) is not str:
            raise InvalidInputError(f"{label}: {what}[{i}] must be an object with a string 'key'")
        raw_value = item.get("value")
        if type(raw_value) is dict and len(raw_value) == 1 and type(text := raw_value.get("stringValue")) is str:
            attrs[key] = text  # most attributes: inlined, as this runs ~30 times per span
            continue
        value = _fast_value(raw_value)
        attrs[key] = _parsed_value(item, f"{what}[{i}]", label) if value is NOT_FAST else value
    return attrs


def _fast_scalar(kind: str, value: Any) -> Any:
    kind_of = type(value)
    if kind in _STRING_KEYS:
        return value if kind_of is str else NOT_FAST
    if kind in _BOOL_KEYS:
        return value if kind_of is bool else NOT_FAST
    if kind in _INT_KEYS:
        if kind_of is str and _DIGITS.fullmatch(value):
            value, kind_of = int(value), int
        return value if kind_of is int and _INT64_MIN <= value <= _INT64_MAX else NOT_FAST
    if kind in _DOUBLE_KEYS:
        return value if kind_of is float and math.isfinite(value) else NOT_FAST
    return NOT_FAST


def _fast_value(raw: Any) -> Any:
    """The Python value of an OTLP/JSON AnyValue in the shape encoders write for common values (see "Speed"), or
    :data:`NOT_FAST` when ``json_format`` has to decide; never an error of its own."""
    if type(raw) is not dict or len(raw) != 1:
        return NOT_FAST
    ((kind, value),) = raw.items()
    if kind not in _ARRAY_KEYS:
        return _fast_scalar(kind, value)
    items = value.get("values") if type(value) is dict and len(value) == 1 else None
    if type(items) is not list or not items:
        return NOT_FAST
    out = []
    for item in items:
        if type(item) is not dict or len(item) != 1:
            return NOT_FAST
        ((item_kind, item_value),) = item.items()
        scalar = _fast_scalar(item_kind, item_value)
        if scalar is NOT_FAST:
            return NOT_FAST
        out.append(scalar)
    return out


def _parsed_value(item: Mapping[str, Any], what: str, label: str) -> Any:
    """One KeyValue's value by ``json_format.ParseDict``: the library's checks and errors, and ours on top (no
    known value type)."""
    try:
        parsed = json_format.ParseDict(item, KeyValue(), ignore_unknown_fields=True, max_recursion_depth=_MAX_DEPTH)
    except json_format.ParseError as exc:
        raise _parse_error(label, exc, what) from None
    except RecursionError:
        raise InvalidInputError(f"{label}: {NESTED_TOO_DEEPLY}") from None
    source = item.get("value")
    if parsed.value.WhichOneof("value") is None and source:
        known = sorted(source) if isinstance(source, Mapping) else source
        raise InvalidInputError(f"{label}: attribute {parsed.key!r} has no known value type (keys: {known})")
    return _value(parsed.value)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)
