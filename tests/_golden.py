"""The golden-span normaliser (issue 35 item 5): exported spans as a JSON document that is identical run after run,
and the first difference between two such documents in words.

Only what varies from run to run by nature is replaced, and nothing else (so a real change of the output shows):

* timing: span start / end times and event timestamps are left out; an attribute whose KEY names a time or a
  duration (``…_at``, ``…time``, ``…timestamp``, ``…duration…``, ``…_ms`` / ``…_ns``) becomes ``"<time>"``; an ISO-8601
  date-time inside any string (AutoGen's ``created_at`` in an OpenInference ``input.value``) becomes ``<time>``, and
  a JSON ``"…_at"`` / ``"…time"`` / ``"…duration"`` key's NUMBER inside a string becomes ``<time>``;
* random ids: the trace and span ids of the exported spans, the runs' ids (``causaltrace.run.id``) and every
  RFC 4122 UUID become ``<trace-N>`` / ``<span-N>`` / ``<run-N>`` / ``<uuid-N>``, numbered by first appearance,
  WHEREVER they occur (a parent, a link, an attribute value, a JSON text, a step id ``<run-1>/3``); one mapping per
  document, so the same id is the same placeholder throughout. Other hexadecimal text (request hashes) is kept.
* the run's Recording event (``causaltrace.run.recording``): its chunks are joined and normalised as one text (an id
  may straddle a chunk boundary), the chunk count is kept; its ``sha256`` is CHECKED against the raw joined chunks and
  then written as ``"<sha256 of the chunks: matches>"`` (it hashes the run id), so a wrong hash still fails.

Everything else is kept verbatim, JSON texts included (a changed serialisation — spacing, key order — is a change of
the exported output). The resource is left out: these tests use their own provider, whose resource is the SDK's
default, not causaltrace's output.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["first_difference", "normalise_spans"]

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
_TIME_KEY = re.compile(r"(?:_at|time|timestamp|duration|duration_\w+|_ms|_ns)$", re.IGNORECASE)
_JSON_TIME_NUMBER = re.compile(
    r'("(?:[\w.]*(?:_at|time|timestamp|duration|_ms|_ns))"\s*:\s*)-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?', re.IGNORECASE
)
_RECORDING_EVENT = "causaltrace.run.recording"
_RECORDING_SHA = "causaltrace.run.recording.sha256"
_RECORDING_CHUNKS = "causaltrace.run.recording.chunks"


class _Ids:
    """Random id → ``<kind-N>`` placeholder, numbered per kind by first appearance in the document."""

    def __init__(self, kinds: dict[str, str]) -> None:
        #: the raw ids known before the walk (trace / span / run ids as hex text) and their kind
        self.kinds = kinds
        self.known: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.pattern = re.compile("|".join(sorted(map(re.escape, kinds), key=len, reverse=True))) if kinds else None

    def name(self, raw: str, kind: str) -> str:
        if raw not in self.known:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.known[raw] = f"<{kind}-{self.counts[kind]}>"
        return self.known[raw]

    def text(self, value: str) -> str:
        """``value`` with every known id and every UUID replaced, and its date-times and JSON time numbers."""
        value = _UUID.sub(lambda m: self.name(m.group(0).lower(), "uuid"), value)
        if self.pattern is not None:
            value = self.pattern.sub(lambda m: self.name(m.group(0), self.kinds[m.group(0)]), value)
        value = _ISO_TIME.sub("<time>", value)
        return _JSON_TIME_NUMBER.sub(r"\1<time>", value)


def _new_ids(spans: Sequence[Any]) -> _Ids:
    """The id table of a document: the spans' trace and span ids and the runs' ids (hex, as attributes show them)."""
    kinds: dict[str, str] = {}
    for span in spans:
        kinds.setdefault(format(span.context.trace_id, "032x"), "trace")
        kinds.setdefault(format(span.context.span_id, "016x"), "span")
        run_id = (span.attributes or {}).get("causaltrace.run.id")
        if isinstance(run_id, str) and run_id:
            kinds.setdefault(run_id, "run")
    return _Ids(kinds)


def _value(key: str, value: Any, ids: _Ids) -> Any:
    if _TIME_KEY.search(key) and isinstance(value, int | float) and not isinstance(value, bool):
        return "<time>"
    if isinstance(value, str):
        return ids.text(value)
    if isinstance(value, tuple | list):
        return [_value(key, v, ids) for v in value]
    return value


def _attributes(attributes: Any, ids: _Ids) -> dict[str, Any]:
    # keys sorted: the order attributes are set in is no part of the output (backends index them by key)
    return {key: _value(key, attributes[key], ids) for key in sorted(attributes or {})}


def _event(event: Any, ids: _Ids) -> dict[str, Any]:
    attributes = dict(event.attributes or {})
    if event.name == _RECORDING_EVENT and _RECORDING_CHUNKS in attributes:
        chunks = attributes.pop(_RECORDING_CHUNKS)
        joined = "".join(chunks)
        sha = attributes.pop(_RECORDING_SHA, None)
        attributes[_RECORDING_SHA] = (
            "<sha256 of the chunks: matches>"
            if sha == hashlib.sha256(joined.encode()).hexdigest()
            else f"<sha256 {sha!r} does NOT match the chunks>"
        )
        normalised = _attributes(attributes, ids)
        normalised[_RECORDING_CHUNKS] = {"count": len(chunks), "joined": ids.text(joined)}
        return {"name": event.name, "attributes": normalised}
    return {"name": event.name, "attributes": _attributes(attributes, ids)}


def normalise_spans(spans: Iterable[Any]) -> list[dict[str, Any]]:
    """Exported ``ReadableSpan``s (in export order) as the golden document: one dict per span (module docstring)."""
    spans = list(spans)
    ids = _new_ids(spans)
    position = {span.context.span_id: n for n, span in enumerate(spans)}
    document = []
    for n, span in enumerate(spans):
        parent = span.parent
        document.append(
            {
                "#": n,
                "name": ids.text(span.name),
                "kind": span.kind.name,
                "status": {"code": span.status.status_code.name, "description": span.status.description},
                "span": ids.name(format(span.context.span_id, "016x"), "span"),
                "trace": ids.name(format(span.context.trace_id, "032x"), "trace"),
                "parent": None
                if parent is None
                else {"#": position.get(parent.span_id), "span": ids.name(format(parent.span_id, "016x"), "span")},
                "links": [
                    {
                        "#": position.get(link.context.span_id),
                        "span": ids.name(format(link.context.span_id, "016x"), "span"),
                        "attributes": _attributes(link.attributes, ids),
                    }
                    for link in span.links
                ],
                "attributes": _attributes(span.attributes, ids),
                "events": [_event(event, ids) for event in span.events],
            }
        )
    return document


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 600 else text[:600] + f"… ({len(text)} chars)"


def _dict_difference(where: str, expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    for key in sorted(set(expected) | set(actual), key=lambda k: (k not in expected, k)):
        if key not in actual:
            return f"{where}: key {key!r} is missing (expected {_short(expected[key])})"
        if key not in expected:
            return f"{where}: key {key!r} is new (value {_short(actual[key])})"
        if expected[key] != actual[key]:
            left, right = expected[key], actual[key]
            if isinstance(left, dict) and isinstance(right, dict):
                return _dict_difference(f"{where}.{key}", left, right)
            if isinstance(left, list) and isinstance(right, list):
                return _list_difference(f"{where}.{key}", left, right)
            return f"{where}: {key!r} differs\n  expected: {_short(left)}\n  actual:   {_short(right)}"
    return None


def _list_difference(where: str, expected: list[Any], actual: list[Any]) -> str | None:
    for n, (left, right) in enumerate(zip(expected, actual, strict=False)):
        if left != right:
            if isinstance(left, dict) and isinstance(right, dict):
                return _dict_difference(f"{where}[{n}]", left, right)
            return f"{where}[{n}] differs\n  expected: {_short(left)}\n  actual:   {_short(right)}"
    if len(expected) != len(actual):
        return f"{where}: {len(expected)} items expected, {len(actual)} found"
    return None


def first_difference(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> str | None:
    """None when the two documents are equal; else the first differing span and key, in words."""
    if expected == actual:
        return None
    for n, (left, right) in enumerate(zip(expected, actual, strict=False)):
        if left != right:
            renamed = "" if left.get("name") == right.get("name") else f" (exported as {right.get('name')!r})"
            return _dict_difference(f"span #{n} {left.get('name')!r}{renamed}", left, right)
    names = lambda doc: [span.get("name") for span in doc]  # noqa: E731
    return f"{len(expected)} spans expected, {len(actual)} exported\n  expected: {names(expected)}\n  actual:   {names(actual)}"
