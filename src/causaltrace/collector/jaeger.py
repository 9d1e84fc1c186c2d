"""Pull runs back from Jaeger's query API (ARCHITECTURE decision 10; FACTS.md "Jaeger").

Usage::

    from causaltrace.collector.jaeger import pull_from_jaeger, query_jaeger_traces

    runs = pull_from_jaeger("4bf92f3577b34da6a3ce929d0e0e4736", "http://127.0.0.1:16686")
    answer = query_jaeger_traces("http://127.0.0.1:16686", "causaltrace", start, end)
    runs = runs_from_otlp(answer)

Both use ``httpx`` (a timeout per request and a bounded retry, see :func:`_get`) and Jaeger's ``/api/v3`` endpoints, whose answers are OTLP/JSON
wrapped in ``{"result": ...}`` (possibly streamed as several such chunks); :mod:`causaltrace.collector.otlp`
reads them.

Errors are :class:`~causaltrace.exceptions.UserError` with one clear line: ``cannot reach Jaeger at URL: …``
(connection refused, DNS, timeout; after the retries), ``trace X not found in Jaeger at URL`` (HTTP 404),
``Jaeger at URL answered HTTP N …`` (other HTTP errors, 5xx after the retries); an answer that is not OTLP JSON is an
:class:`~causaltrace.exceptions.InvalidInputError`.

Decisions where the architecture is silent:

* A trace that exists but holds no causaltrace spans raises ``InvalidInputError`` (``pull`` promises runs).
* ``query_jaeger_traces`` returns one ``{"result": {"resourceSpans": [...]}}`` dict (streamed chunks merged); when
  Jaeger answers 404 "no traces found" it returns that dict with an empty list, so callers can poll. Naive
  ``start`` / ``end`` datetimes are local time (Python's convention), sent as RFC 3339 in UTC.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from datetime import UTC, datetime
from typing import Any

import httpx

from causaltrace.collector.otlp import parse_documents, runs_from_documents
from causaltrace.collector.safe_input import fetch
from causaltrace.exceptions import InvalidInputError, UserError
from causaltrace.schema import Run

__all__ = ["DEFAULT_RETRIES", "pull_from_jaeger", "query_jaeger_traces"]

_TRACE_ID = re.compile(r"^[0-9a-f]{1,32}$")
_ERRNO = re.compile(r"^\[Errno -?\d+\] ")
#: tries after the first for a refused / reset connection or an HTTP status of _RETRY_STATUS
DEFAULT_RETRIES = 2
_RETRY_STATUS = frozenset({500, 502, 503, 504})
_BACKOFF_S = 0.25


class _NotFound(Exception):
    def __init__(self, body: str) -> None:
        super().__init__(body)
        self.body = body


def _base(base_url: str) -> str:
    base = base_url.strip().rstrip("/")
    parsed = urllib.parse.urlparse(base)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"invalid Jaeger URL {base_url!r}: expected http(s)://host:port")
    return base


def _why(exc: httpx.TransportError, timeout_s: float) -> str:
    """The reason of a failed request in a few words: "no answer within 10 s", "Connection refused", …"""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout_s:g} s"
    return _ERRNO.sub("", str(exc)) or type(exc).__name__


def _get(url: str, base: str, timeout_s: float, retries: int = DEFAULT_RETRIES) -> str:
    """GET ``url`` and return the body; raises UserError (or _NotFound on HTTP 404).

    A bounded retry: a refused or reset connection and HTTP 500 / 502 / 503 / 504 are tried again up to
    ``retries`` times, after 0.25 s, 0.5 s, …; a timeout is not (a Jaeger that accepts and never answers would
    only multiply the wait), so the longest a call can take is about ``timeout_s`` per attempt."""
    last: UserError | None = None
    with httpx.Client(timeout=timeout_s, headers={"Accept": "application/json"}, follow_redirects=True) as client:
        for attempt in range(max(retries, 0) + 1):
            if attempt:
                time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
            try:  # the whole answer within timeout_s and max_answer_bytes (issue 36 item 6)
                response = fetch(client, url, source=f"Jaeger at {base}", timeout_s=timeout_s)
            except httpx.TimeoutException as exc:
                raise UserError(f"cannot reach Jaeger at {base}: {_why(exc, timeout_s)}") from exc
            except httpx.TransportError as exc:  # refused, DNS, reset mid-answer: worth another try
                last = UserError(f"cannot reach Jaeger at {base}: {_why(exc, timeout_s)}")
                continue
            if response.status_code == 404:
                raise _NotFound(response.text)
            if response.is_success:
                return response.text
            detail = " ".join(response.text.split())[:200]
            last = UserError(f"Jaeger at {base} answered HTTP {response.status_code} {response.reason_phrase} for "
                             f"{url}" + (f": {detail}" if detail else ""))
            if response.status_code not in _RETRY_STATUS:
                raise last
    assert last is not None
    raise last


def _error_of(docs: list[tuple[str, Any]]) -> dict[str, Any] | None:
    for _, doc in docs:
        if isinstance(doc, dict) and "error" in doc and "result" not in doc:
            error = doc["error"]
            return error if isinstance(error, dict) else {"message": str(error)}
    return None


def _is_not_found(error: dict[str, Any]) -> bool:
    code = error.get("httpCode", error.get("http_code"))
    return str(code) == "404" or "not found" in str(error.get("message", "")).lower()


def pull_from_jaeger(trace_id: str, base_url: str, *, timeout_s: float = 10.0,
                     retries: int = DEFAULT_RETRIES) -> list[Run]:
    """The runs in one trace, fetched from ``{base_url}/api/v3/traces/{trace_id}``.

    Raises :class:`UserError` when Jaeger cannot be reached or does not have the trace, and
    :class:`InvalidInputError` when its answer is not OTLP JSON or holds no causaltrace run.
    """
    base = _base(base_url)
    tid = trace_id.strip().lower()
    if not _TRACE_ID.match(tid):
        raise UserError(f"invalid trace id {trace_id!r}: expected up to 32 hex digits")
    url = f"{base}/api/v3/traces/{tid}"
    not_found = f"trace {tid} not found in Jaeger at {base}"
    try:
        body = _get(url, base, timeout_s, retries)
    except _NotFound:
        raise UserError(not_found) from None
    try:
        docs = parse_documents(body)
    except InvalidInputError as exc:
        raise InvalidInputError(f"Jaeger at {base} answered {url} with invalid JSON: {exc.message}") from exc
    error = _error_of(docs)
    if error is not None:
        if _is_not_found(error):
            raise UserError(not_found)
        raise UserError(f"Jaeger at {base} answered an error for {url}: {error.get('message', error)}")
    try:
        runs = runs_from_documents(docs)
    except InvalidInputError as exc:
        raise InvalidInputError(f"Jaeger answer for trace {tid}: {exc.message}") from exc
    if not runs:
        raise InvalidInputError(f"trace {tid} in Jaeger at {base} holds no causaltrace run (no causaltrace spans)")
    return runs


def _rfc3339(value: datetime | str) -> str:
    if isinstance(value, str):
        return value
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def query_jaeger_traces(
    base_url: str,
    service: str,
    start: datetime | str,
    end: datetime | str,
    *,
    limit: int = 100,
    timeout_s: float = 10.0,
    retries: int = DEFAULT_RETRIES,
) -> dict[str, Any]:
    """Jaeger's answer to ``/api/v3/traces?query.service_name=…&query.start_time_min=…&query.start_time_max=…``.

    ``limit`` is sent as ``query.num_traces`` (Jaeger answers HTTP 500 "search depth must be greater than 0"
    without it).

    Returns ``{"result": {"resourceSpans": [...]}}`` (empty when Jaeger found no trace); feed it to
    :func:`~causaltrace.collector.otlp.runs_from_otlp`. Raises :class:`UserError` when Jaeger cannot be reached.
    """
    base = _base(base_url)
    query = urllib.parse.urlencode(
        {
            "query.service_name": service,
            "query.start_time_min": _rfc3339(start),
            "query.start_time_max": _rfc3339(end),
            "query.num_traces": str(limit),
        }
    )
    url = f"{base}/api/v3/traces?{query}"
    empty: dict[str, Any] = {"result": {"resourceSpans": []}}
    try:
        body = _get(url, base, timeout_s, retries)
    except _NotFound as exc:
        try:
            answer = json.loads(exc.body)
        except json.JSONDecodeError:
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict) and _is_not_found(answer["error"]):
            return empty
        raise UserError(f"Jaeger at {base} has no /api/v3/traces endpoint (HTTP 404 for {url})") from None
    try:
        docs = parse_documents(body)
    except InvalidInputError as exc:
        raise InvalidInputError(f"Jaeger at {base} answered {url} with invalid JSON: {exc.message}") from exc
    error = _error_of(docs)
    if error is not None:
        if _is_not_found(error):
            return empty
        raise UserError(f"Jaeger at {base} answered an error for {url}: {error.get('message', error)}")
    resource_spans: list[Any] = []
    for _, doc in docs:
        for chunk in doc if isinstance(doc, list) else [doc]:
            result = chunk.get("result", chunk) if isinstance(chunk, dict) else None
            if not isinstance(result, dict):
                raise InvalidInputError(f"Jaeger at {base} answered {url} with something that is not OTLP JSON")
            spans = result.get("resourceSpans", result.get("resource_spans")) or []
            resource_spans.extend(spans if isinstance(spans, list) else [])
    return {"result": {"resourceSpans": resource_spans}}
