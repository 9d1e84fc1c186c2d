"""Spans exported as records, one object per span, to the span model the readers share (issue 34 item 1).

Usage (through :mod:`causaltrace.collector.span_shapes`, which picks the shape of each document)::

    for span in spans_of_record(row, "line 3"):     # a span and, nested under ``children``, its descendants
        ...                                          # otlp_decode.DecodedSpan: ids hex, times ns, attrs flat

One reader covers the record shapes, as their fields differ only in spelling; a field's name is compared without
case, ``_`` and ``.`` (``TraceId`` = ``trace_id`` = ``context.trace_id``):

* the OpenTelemetry Collector ClickHouse exporter's ``otel_traces`` rows: ``Timestamp`` (``2024-05-01
  12:00:00.123456789``), ``TraceId``, ``SpanId``, ``ParentSpanId``, ``SpanName``, ``SpanKind``, ``ServiceName``,
  ``SpanAttributes`` / ``ResourceAttributes`` (a Map of strings, or a JSON column answered as nested objects),
  ``Duration`` (ns, a number or a quoted UInt64), ``StatusCode`` (``Error`` / ``STATUS_CODE_ERROR``),
  ``StatusMessage``, ``Events.Timestamp`` / ``Events.Name`` / ``Events.Attributes`` and ``Links.*`` as parallel
  arrays (or, with ``flatten_nested = 0``, ``Events`` / ``Links`` as lists of objects);
* a generic per-span export in snake_case (``trace_id``, ``span_id``, ``parent_span_id`` or ``parent_id``,
  ``span_name`` or ``name``, ``span_kind``, ``span_attributes`` or ``attributes``, ``resource_attributes``,
  ``status_code``, ``status_message``, ``start_time``, ``end_time``, ``duration`` in ns or ISO-8601 such as
  ``PT1.25S``, ``events``, ``links``), each span optionally holding its children under ``children``; a per-trace
  object gives its ``trace_id`` (and a root its id as the parent) to the spans under it;
* Phoenix's REST answer of ``/v1/projects/{p}/spans`` (``context.trace_id`` / ``span_id``, ``parent_id``,
  ``span_kind``, ISO times, attributes and events) and ``get_spans_dataframe(...).to_json(orient="records")``
  (columns ``context.span_id``, ``attributes.<name>``…, times in epoch milliseconds).

Values: times are ISO text (naive = UTC; more than six fractional digits kept to the nanosecond) or epoch numbers
whose unit follows from their size (s, ms, µs or ns); attributes given as nested objects are flattened to the dotted
names the conventions use (``llm.input_messages.0.message.role``; a list of objects by index, a list of scalars kept),
except values that are JSON payloads by name (``input.value``, ``*.metadata``, ``tool.parameters``, ``gen_ai.*``…),
which become JSON text again as the instrumentor wrote them; a ``span_kind`` that is an OpenInference kind (Phoenix's
column) is put back as ``openinference.span.kind``; columns no shape knows are kept as attributes under their own
name. A record that cannot be read is an :class:`~causaltrace.exceptions.InvalidInputError` naming where it is and
the span.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from causaltrace.collector.otlp_decode import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    DecodedEvent,
    DecodedLink,
    DecodedSpan,
    attributes_of,
    decode_id,
)
from causaltrace.exceptions import InvalidInputError

__all__ = ["JSON_ATTRIBUTE_SUFFIXES", "OPENINFERENCE_KINDS", "flat_attributes", "fold_json_attributes", "nanos",
           "normal", "spans_of_record"]

#: Phoenix answers ``openinference.span.kind`` as the span's kind (FACTS.md "Arize Phoenix")
OPENINFERENCE_KINDS = frozenset({"LLM", "AGENT", "CHAIN", "TOOL", "RETRIEVER", "EMBEDDING", "RERANKER", "GUARDRAIL",
                                 "EVALUATOR", "PROMPT"})
_KIND = "openinference.span.kind"
_STATUS = {"unset": STATUS_UNSET, "ok": STATUS_OK, "error": STATUS_ERROR, "": STATUS_UNSET}
#: attribute names whose value is a JSON payload: an object or list given there is written back as JSON text
_JSON_SUFFIXES = (".value", "metadata", "tool.parameters", "llm.invocation_parameters",
                  "llm.prompt_template.variables", ".arguments", ".result", "json_schema")
#: attribute names whose JSON text Phoenix parses on ingestion (``phoenix.trace.attributes.JSON_STRING_ATTRIBUTES``)
JSON_ATTRIBUTE_SUFFIXES = ("document.metadata", "llm.prompt_template.variables", "metadata", "tool.parameters")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_NANOS = 2**64  # OTLP's fixed64 times: 1970 to 2554
_FRACTION = re.compile(r"(\d{2}:\d{2}:\d{2})[.,](\d+)")
_ISO_DURATION = re.compile(r"-?P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")

# normalised field names (see :func:`normal`) -> the span field they give
_FIELDS: dict[str, str] = {
    "traceid": "trace_id", "contexttraceid": "trace_id",
    "spanid": "span_id", "contextspanid": "span_id",
    "parentspanid": "parent", "parentid": "parent",
    "spanname": "name", "name": "name",
    "spankind": "kind", "kind": "kind",
    "spanattributes": "attributes", "attributes": "attributes",
    "resourceattributes": "resource", "resource": "resource",
    "statuscode": "status_code", "statusmessage": "status_message", "status": "status",
    "starttime": "start", "starttimeunixnano": "start", "timestamp": "start", "start": "start",
    "endtime": "end", "endtimeunixnano": "end", "end": "end",
    "duration": "duration", "durationns": "duration", "durationnano": "duration", "latencyms": "latency_ms",
    "events": "events", "links": "links", "children": "children",
    "servicename": "service",
}
#: fields read and dropped: bookkeeping of the stores, not of the span
_IGNORED = frozenset({"tracestate", "scopename", "scopeversion", "scopeattributes", "id", "timestamptime",
                      "flags", "droppedattributescount", "droppedeventscount", "droppedlinkscount", "context",
                      "traceid", "spans", "cumulativetokencountprompt", "cumulativetokencountcompletion",
                      "cumulativetokencounttotal", "cumulativeerrorcount", "spankindname"})


def normal(name: str) -> str:
    """A field name compared without case, ``_``, ``.`` or ``-``: ``TraceId``, ``trace_id``, ``context.trace_id``
    and ``traceId`` differ only in what the export's language prefers."""
    return name.replace("_", "").replace(".", "").replace("-", "").lower()


def _nested(record: Mapping[str, Any], prefix: str) -> dict[str, list[Any]]:
    """ClickHouse's Nested columns, ``Events.Name`` …: parallel arrays by their normalised sub-name."""
    out: dict[str, list[Any]] = {}
    for key, value in record.items():
        head, dot, rest = key.partition(".")
        if dot and head.lower() == prefix and isinstance(value, list):
            out[normal(rest)] = value
    return out


def _rows(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
    n = max((len(v) for v in columns.values()), default=0)
    return [{k: (v[i] if i < len(v) else None) for k, v in columns.items()} for i in range(n)]


def nanos(value: Any, what: str, label: str) -> int:
    """A point in time as integer nanoseconds since the epoch: ISO text, or an epoch number (its unit by its size:
    below 1e11 seconds, 1e14 milliseconds, 1e17 microseconds, else nanoseconds); ``None`` / ``""`` / 0 → 0."""
    if value is None or value == "" or value == 0:
        return 0
    if isinstance(value, str) and re.fullmatch(r"\d{1,25}(\.\d{1,25})?", value.strip()):
        value = float(value) if "." in value else int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidInputError(f"{label}: {what} must be a time (ISO text or an epoch number), got "
                                f"{type(value).__name__}")
    if isinstance(value, (int, float)):
        size = abs(value)
        if not size < _MAX_NANOS or value < 0:  # NaN and infinities fail the first test
            raise InvalidInputError(f"{label}: {what} {value!r} is not a time (an epoch number from 1970 to 2554)")
        scale = 10**9 if size < 1e11 else 10**6 if size < 1e14 else 10**3 if size < 1e17 else 1
        return int(value * scale) if isinstance(value, float) else value * scale
    text = value.strip().replace(" ", "T", 1) if "T" not in value else value.strip()
    extra = 0
    match = _FRACTION.search(text)
    if match and len(match.group(2)) > 6:  # datetime keeps microseconds: the rest is added back as nanoseconds
        digits = match.group(2)[:9].ljust(9, "0")
        extra = int(digits[6:])
        text = text[:match.start(2)] + digits[:6] + text[match.end(2):]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(f"{label}: {what} {value!r} is not an ISO time or an epoch number") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000 + extra


def _duration(value: Any, label: str) -> int:
    """A duration in nanoseconds: a number (ns), numeric text, or ISO-8601 (``PT1.5S``, ``P0DT0H0M2S``)."""
    if isinstance(value, bool):
        raise InvalidInputError(f"{label}: duration must be nanoseconds or ISO-8601, got a boolean")
    if isinstance(value, (int, float)) and 0 <= value < _MAX_NANOS:
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d{1,20}", text) and int(text) < _MAX_NANOS:
            return int(text)
        match = _ISO_DURATION.fullmatch(text)
        if match and text not in ("P", "PT", "-P", "-PT"):
            days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
            total = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1e9
            if total < _MAX_NANOS and not text.startswith("-"):
                return round(total)
    raise InvalidInputError(f"{label}: duration {value!r} is neither nanoseconds nor ISO-8601 (like PT1.5S), "
                            "from 0 to 2^64 ns")


def _status_code(value: Any, label: str) -> int:
    if value is None:
        return STATUS_UNSET
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
        return value
    if isinstance(value, str):
        key = value.strip().lower().removeprefix("status_code_")
        if key.isdigit() and int(key) in (0, 1, 2):
            return int(key)
        if key in _STATUS:
            return _STATUS[key]
    raise InvalidInputError(f"{label}: status code {value!r} is not one of UNSET, OK, ERROR (or 0, 1, 2)")


def _is_json_payload(key: str) -> bool:
    return key.startswith("gen_ai.") or key.endswith(_JSON_SUFFIXES)


def flat_attributes(raw: Any, label: str, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Attributes as the flat dotted names the conventions read (module docstring): a dict of values or nested
    objects, an OTLP list of ``{key, value}``, or JSON text of either; ``None`` values are dropped."""
    out = {} if out is None else out
    if isinstance(raw, str) and not prefix:
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            raise InvalidInputError(f"{label}: attributes are text that is not a JSON object") from None
    if isinstance(raw, list) and not prefix and all(isinstance(i, Mapping) and "key" in i for i in raw):
        out.update(attributes_of(raw, "attributes", label))
        return out
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{label}: attributes must be an object, got {type(raw).__name__}")
    for key, value in raw.items():
        _flatten(f"{prefix}{key}", value, out)
    return out


def _flatten(key: str, value: Any, out: dict[str, Any]) -> None:
    if value is None:
        return
    if isinstance(value, Mapping) or (isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value)):
        if _is_json_payload(key):
            out[key] = json.dumps(value, ensure_ascii=False)
            return
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for sub, item in items:
            _flatten(f"{key}.{sub}", item, out)
        return
    out[key] = value


def _entries(record: Mapping[str, Any], raw: Any, what: str, label: str) -> list[dict[str, Any]]:
    """A span's events or links as dicts of normalised field names: a list of objects, else ClickHouse's Nested
    columns (``Events.Name`` …) as parallel arrays."""
    items = raw if isinstance(raw, list) else _rows(_nested(record, what))
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidInputError(f"{label}: {what}[{i}] must be an object")
    return [{normal(str(k)): v for k, v in item.items()} for item in items]


def _events(record: Mapping[str, Any], raw: Any, label: str) -> list[DecodedEvent]:
    return [DecodedEvent(name=str(e.get("name") or ""),
                         time=nanos(next((e[k] for k in ("timestamp", "time", "timeunixnano") if k in e), None),
                                    f"events[{i}] time", label),
                         attrs=flat_attributes(e.get("attributes"), label))
            for i, e in enumerate(_entries(record, raw, "events", label))]


def _links(record: Mapping[str, Any], raw: Any, label: str) -> list[DecodedLink]:
    return [DecodedLink(trace_id=decode_id(e.get("traceid"), 16, f"links[{i}].trace_id", label),
                        span_id=decode_id(e.get("spanid"), 8, f"links[{i}].span_id", label),
                        attrs=flat_attributes(e.get("attributes"), label))
            for i, e in enumerate(_entries(record, raw, "links", label))]


def spans_of_record(record: Any, where: str, *, trace_id: str | None = None, parent: str | None = None
                    ) -> Iterator[DecodedSpan]:
    """The span of one record and those nested under its ``children`` (module docstring); ``trace_id`` / ``parent``
    come from an enclosing trace or span when the record does not name its own."""
    if not isinstance(record, Mapping):
        raise InvalidInputError(f"{where}: a span record must be an object, got {type(record).__name__}")
    fields: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in record.items():
        key = str(key)
        if key.startswith("attributes."):  # Phoenix's dataframe: one column per attribute
            _flatten(key[len("attributes."):], value, attrs)
            continue
        name = normal(key)
        if name in _FIELDS:
            fields.setdefault(_FIELDS[name], value)
        elif name.startswith(("events", "links")) and "." in key:
            continue  # ClickHouse's Nested columns, read with the events / links
        elif name not in _IGNORED:
            extra[key] = value
        if name == "context" and isinstance(value, Mapping):
            for sub, sub_value in value.items():
                fields.setdefault(_FIELDS.get("context" + normal(str(sub)), "_"), sub_value)
    name_text = fields.get("name")
    name_text = name_text if isinstance(name_text, str) else "" if name_text is None else str(name_text)
    raw_span = fields.get("span_id")
    label = f"{where}: span {raw_span if isinstance(raw_span, str) else '?'} ({name_text!r})"
    trace = decode_id(fields.get("trace_id"), 16, "trace id", label) or trace_id
    span_id = decode_id(raw_span, 8, "span id", label)
    if trace is None or span_id is None:
        raise InvalidInputError(f"{label}: {'the trace id' if trace is None else 'the span id'} is missing")
    label = f"{where}: span {span_id} ({name_text!r})"
    parent_id = decode_id(fields.get("parent"), 8, "parent span id", label) if fields.get("parent") else parent
    attrs = {**flat_attributes(fields.get("attributes"), label), **attrs}
    for key, value in extra.items():  # columns no shape knows: kept, under their own name
        if key not in attrs:
            _flatten(key, value, attrs)
    if fields.get("service") and "service.name" not in attrs:
        attrs["service.name"] = str(fields["service"])
    kind = fields.get("kind")
    if isinstance(kind, str) and kind.upper() in OPENINFERENCE_KINDS and "gen_ai.operation.name" not in attrs:
        attrs.setdefault(_KIND, kind.upper())
    status = fields.get("status")
    code, message = fields.get("status_code"), fields.get("status_message")
    if isinstance(status, Mapping):
        code, message = status.get("code", code), status.get("message", message)
    elif status is not None and code is None:
        code = status
    start = nanos(fields.get("start"), "start time", label)
    end = nanos(fields.get("end"), "end time", label)
    duration = _duration(fields["duration"], label) if fields.get("duration") not in (None, "") else None
    if not end and start and duration is not None:
        end = start + duration
    elif not end and start and isinstance(fields.get("latency_ms"), (int, float)):
        end = start + int(fields["latency_ms"] * 1e6)
    yield DecodedSpan(where=where, trace_id=trace, span_id=span_id, parent_span_id=parent_id, name=name_text,
                      start=start, end=end, attrs=attrs, links=_links(record, fields.get("links"), label),
                      events=_events(record, fields.get("events"), label), status_code=_status_code(code, label),
                      status_message="" if message is None else str(message))
    children = fields.get("children")
    if children is not None and not isinstance(children, list):
        raise InvalidInputError(f"{label}: children must be a list")
    for child in children or ():
        yield from spans_of_record(child, where, trace_id=trace, parent=span_id)


def _nest(flat: Mapping[str, Any]) -> Any:
    """``{"a.b": 1, "c.0.d": 2}`` → ``{"a": {"b": 1}, "c": [{"d": 2}]}`` (levels whose keys are 0..n-1 are lists)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *path, leaf = key.split(".")
        for part in path:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = value

    def lists(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        items = {k: lists(v) for k, v in node.items()}
        if items and sorted(items) == sorted(str(i) for i in range(len(items))):
            return [items[str(i)] for i in range(len(items))]
        return items

    return lists(tree)


def _json_prefix(key: str) -> str | None:
    """The shortest dotted prefix of ``key`` (itself included) whose name Phoenix parses as JSON, or None."""
    parts = key.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if prefix.endswith(JSON_ATTRIBUTE_SUFFIXES):
            return prefix
    return None


def fold_json_attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Phoenix's parsed JSON attributes as the JSON text they were sent as: Phoenix parses ``metadata``,
    ``tool.parameters``, ``llm.prompt_template.variables`` and ``document.metadata`` and answers them flattened
    (``tool.parameters.city``), so those keys are folded back into one JSON string (an all-digits level is a list).
    A key inside such an object that itself holds a dot cannot be told from nesting and comes back nested."""
    out: dict[str, Any] = {}
    folded: dict[str, dict[str, Any]] = {}
    for key, value in attrs.items():
        prefix = _json_prefix(key)
        if prefix is None:
            out[key] = value
        elif prefix == key:
            out[prefix] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        else:
            folded.setdefault(prefix, {})[key[len(prefix) + 1:]] = value
    for prefix, flat in folded.items():
        out[prefix] = json.dumps(_nest(flat), ensure_ascii=False)
    return out
