"""Which shape a span file is in, and its spans as one list (issue 34 item 1: ``import --format spans``).

Usage::

    runs = load_spans(Path("otel_traces.jsonl"))      # any shape below; one run per trace
    sniffed = looks_like_spans(first_64_kib)           # what ``--format auto`` asks before trying a chat log

Every document of a file (a JSON line, or the whole file) is one of:

==================  ==========================================================================================
``otlp``            OTLP/JSON requests (``resourceSpans``), Jaeger ``/api/v3`` answers (:mod:`.otlp_decode`)
``clickhouse``      the OpenTelemetry Collector ClickHouse exporter's ``otel_traces`` rows (``TraceId``,
                    ``SpanId``…), one per line (``FORMAT JSONEachRow``), a list, or ``FORMAT JSON``'s
                    ``{"meta": …, "data": [rows]}``
``records``         a generic per-span or per-trace export in snake_case (``trace_id``, ``span_id``…),
                    children nested or not (:mod:`.span_records`)
``phoenix-spans``   Phoenix's REST answer of ``/v1/projects/{p}/spans`` (``{"data": [span], "next_cursor"}``)
``phoenix-otlpv1``  Phoenix's REST answer of ``/v1/projects/{p}/spans/otlpv1`` (OTLP spans in snake_case)
``phoenix-frame``   ``get_spans_dataframe(...).to_json(orient="records")``, with or without ``lines=True``
==================  ==========================================================================================

All of them become :class:`~causaltrace.collector.otlp_decode.DecodedSpan` s, grouped by trace and handed to the
same run assembly as OTLP (:func:`causaltrace.collector.otlp.runs_from_spans`): causaltrace's own spans, then the
OpenInference and GenAI readers. Phoenix's answers also get their parsed JSON attributes folded back
(:func:`~causaltrace.collector.span_records.fold_json_attributes`). JSON lines are read one line at a time, so
a large file is never held whole. A document that holds spans in no known shape — a record with span-like fields
but not those of one shape — is an :class:`~causaltrace.exceptions.InvalidInputError` naming the closest shape and
what it lacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from causaltrace.collector.otlp_decode import (
    NESTED_TOO_DEEPLY,
    DecodedSpan,
    decode_span,
    documents_of_file,
    spans_of_document,
)
from causaltrace.collector.span_records import fold_json_attributes, normal, spans_of_record
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Run

__all__ = ["SHAPES", "iter_span_runs", "load_spans", "looks_like_spans", "shape_of", "spans_of_documents",
           "spans_of_file"]

#: the shapes, as the messages name them
SHAPES = {
    "otlp": "OTLP JSON (resourceSpans)",
    "clickhouse": "ClickHouse otel_traces rows (TraceId, SpanId, SpanName, Timestamp, Duration)",
    "records": "span records in snake_case (trace_id, span_id, span_name, start_time, duration)",
    "phoenix-spans": "Phoenix REST spans (data: [{context: {trace_id, span_id}, …}])",
    "phoenix-otlpv1": "Phoenix REST spans/otlpv1 (data: [{trace_id, span_id, start_time_unix_nano, …}])",
    "phoenix-frame": "Phoenix spans dataframe records (context.trace_id, context.span_id, attributes.*)",
}
#: the fields that identify a shape (normalised names, :func:`~causaltrace.collector.span_records.normal`) and the
#: others it usually has: the closest shape of a refused record is the one it shares most fields with
_REQUIRED = {
    "clickhouse": {"traceid", "spanid"},
    "records": {"traceid", "spanid"},
    "phoenix-frame": {"contexttraceid", "contextspanid"},
    "phoenix-spans": {"context"},
    "phoenix-otlpv1": {"traceid", "spanid", "starttimeunixnano"},
}
_USUAL = {
    "clickhouse": {"timestamp", "parentspanid", "spanname", "spankind", "servicename", "spanattributes",
                   "resourceattributes", "duration", "statuscode", "statusmessage"},
    "records": {"parentspanid", "parentid", "spanname", "name", "spankind", "spanattributes", "attributes",
                "resourceattributes", "starttime", "endtime", "duration", "statuscode", "statusmessage", "children"},
    "phoenix-frame": {"name", "spankind", "parentid", "starttime", "endtime", "statuscode", "statusmessage", "events"},
    "phoenix-spans": {"name", "spankind", "parentid", "starttime", "endtime", "statuscode", "attributes", "events"},
    "phoenix-otlpv1": {"name", "kind", "parentspanid", "endtimeunixnano", "attributes", "status", "events"},
}
_SNIFF = re.compile(r'"(TraceId|trace_id|traceId|context\.trace_id|SpanId|span_id|spanId|context\.span_id)"\s*:')


def looks_like_spans(head: str) -> bool:
    """Whether the start of a file names span fields (what ``--format auto`` reads as spans, not a chat log)."""
    return _SNIFF.search(head) is not None


def _fields(record: Mapping[str, Any]) -> set[str]:
    names = {normal(str(k)) for k in record}
    if "attributes" in names and isinstance(record.get("attributes"), list):
        names.add("otlpattributes")
    return names


def _record_shape(record: Mapping[str, Any]) -> str | None:
    names = _fields(record)
    if "contexttraceid" in names or "contextspanid" in names:
        return "phoenix-frame"
    if "context" in names and isinstance(record.get("context"), Mapping):
        return "phoenix-spans"
    if "traceid" in names or "spanid" in names or "children" in names:
        if "spanid" not in names and not isinstance(record.get("spans"), list):
            return None  # a span without its id, not a per-trace object: refused, naming the closest shape
        if "starttimeunixnano" in names and "SpanId" not in record:
            return "phoenix-otlpv1"
        return "clickhouse" if "SpanId" in record or "TraceId" in record else "records"
    return None


def shape_of(doc: Any) -> str | None:
    """The shape of one JSON document (module docstring), or None when it holds no spans in a known shape."""
    if isinstance(doc, list):
        return next((shape for item in doc[:1] if (shape := shape_of(item))), None) if doc else "records"
    if not isinstance(doc, Mapping):
        return None
    if {"resourceSpans", "resource_spans", "result"} & doc.keys() or (doc.keys() == {"error"}):
        return "otlp"
    data = doc.get("data")
    if isinstance(data, list) and "data" in doc and ({"next_cursor", "meta", "rows"} & doc.keys() or len(doc) == 1):
        first = next((item for item in data if isinstance(item, Mapping)), None)
        return _record_shape(first) if first is not None else "phoenix-spans"
    return _record_shape(doc)


def _closest(doc: Any) -> tuple[str, set[str]] | None:
    """The shape a span-like record that no shape reads is closest to, and the fields it lacks; None when the
    record has fewer than two span fields (not spans at all)."""
    record = doc[0] if isinstance(doc, list) and doc else doc
    if isinstance(record, Mapping) and isinstance(record.get("data"), list) and record["data"]:
        record = record["data"][0]
    if not isinstance(record, Mapping):
        return None
    names = _fields(record)
    pascal = any(str(k)[:1].isupper() for k in record)  # ClickHouse's columns; a tie goes by the spelling
    scored = [(len(names & (_REQUIRED[s] | _USUAL[s])), (s == "clickhouse") == pascal, s) for s in _REQUIRED]
    score, _, shape = max(scored)
    return (shape, _REQUIRED[shape] - names) if score >= 2 else None


def _refused(doc: Any, where: str) -> InvalidInputError:
    closest = _closest(doc)
    if closest is None:
        keys = sorted(doc)[:6] if isinstance(doc, Mapping) else type(doc).__name__
        return InvalidInputError(f"{where}: not spans in a known shape (found {keys}); the shapes read are "
                                 f"{', '.join(SHAPES)}")
    shape, missing = closest
    lacks = f": it lacks {', '.join(sorted(missing))}" if missing else ""
    return InvalidInputError(f"{where}: spans in no known shape; the closest is {SHAPES[shape]}{lacks}")


def _without_nulls(value: Any) -> Any:
    """Phoenix's otlpv1 answer writes every unset field as ``null``: dropped, as protobuf's JSON leaves them out."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _phoenix(span: DecodedSpan) -> DecodedSpan:
    span.attrs = fold_json_attributes(span.attrs)
    return span


def _spans(doc: Any, where: str, shape: str) -> Iterator[DecodedSpan]:
    if shape == "otlp":
        yield from spans_of_document(doc, where)
        return
    if isinstance(doc, Mapping) and isinstance(doc.get("data"), list) and "data" in doc and shape != "records":
        doc = doc["data"]
    items = doc if isinstance(doc, list) else [doc]
    for item in items:
        if shape == "phoenix-otlpv1":
            yield _phoenix(decode_span(_without_nulls(item), where))
        elif shape in ("phoenix-spans", "phoenix-frame"):
            yield from (_phoenix(s) for s in spans_of_record(item, where))
        elif isinstance(item, Mapping) and isinstance(item.get("spans"), list) and "spanid" not in _fields(item):
            # a per-trace object: its trace id for the spans listed under it
            trace = item.get("trace_id", item.get("TraceId", item.get("traceId")))
            for child in item["spans"]:
                yield from spans_of_record(child, where, trace_id=str(trace) if trace else None)
        else:
            yield from spans_of_record(item, where)


def spans_of_documents(docs: Iterable[tuple[str, Any]]) -> Iterator[DecodedSpan]:
    """The spans of ``(where, document)`` pairs, each document in its own shape (module docstring)."""
    for where, doc in docs:
        shape = shape_of(doc)
        if shape is None:
            raise _refused(doc, where)
        yield from _spans(doc, where, shape)


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Errors reading a span file as one InvalidInputError naming it (and the line, the span)."""
    try:
        yield
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc.message}") from exc
    except RecursionError:
        raise InvalidInputError(f"{path}: {NESTED_TOO_DEEPLY}") from None
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the span file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not UTF-8 text: {exc}") from exc


def spans_of_file(path: Path) -> list[DecodedSpan]:
    """The decoded spans of a span file in any shape (a folder import groups them by trace across its files);
    errors as for :func:`load_spans`."""
    with _naming(path):
        return list(spans_of_documents(documents_of_file(path)))


def load_spans(path: Path) -> list[Run]:
    """The runs of a span file in any shape of the module docstring; errors name the file (and line, span)."""
    return list(iter_span_runs(path))


def iter_span_runs(path: Path) -> Iterator[Run]:
    """The runs of a span file one trace at a time (:func:`causaltrace.collector.otlp.iter_runs_from_spans`), for
    a caller that stores each as it comes; errors as for :func:`load_spans`."""
    from causaltrace.collector.otlp import iter_runs_from_spans

    with _naming(path):
        yield from iter_runs_from_spans(spans_of_documents(documents_of_file(path)))
