"""Pull runs from an Arize Phoenix server through its REST API (issue 23 item 1: ``pull --phoenix URL --project P``).

Usage::

    from causaltrace.collector.phoenix import pull_from_phoenix

    pulled = pull_from_phoenix("http://127.0.0.1:6006", "my-project", since=datetime.now(UTC) - timedelta(hours=6))
    pulled.runs        # one Run per trace: causaltrace's own spans, OpenInference or GenAI spans
    pulled.skipped     # the traces that gave no run, each with its reason

How: the project's trace list (``GET /v1/projects/{project}/traces``, newest first, every page of its cursor) names
the traces that started in the range (``since`` inclusive, ``until`` exclusive), cut at the newest ``limit``. With
``failed`` the traces are named by their root spans instead (``GET /v1/projects/{project}/spans?parent_id=null&
status_code=ERROR``, sorted by start time, newest first), as the root's status is the run's: a trace whose root span
never reached Phoenix (its spans' parent is in another service, or was lost) has no status to select by and is not
pulled with ``failed`` — without it, such a trace is pulled like any other (its spans import as a run without a
root). A Phoenix without the trace list (older than the REST API's ``/traces``) is asked for root spans in both
cases. Then the spans of those traces are fetched (``trace_id=…`` filters, 25 traces a request, every page), turned
back into OTLP/JSON spans and imported trace by trace (:func:`causaltrace.collector.pulled.runs_of_traces`: native,
OpenInference and GenAI spans alike; a trace that gives no run is skipped with its reason). Runs come back oldest
first. Re-pulling gives the same run ids (the importers derive them from the trace), so storing them again changes
nothing.

What Phoenix changes on the way, and how it is undone (FACTS.md "Arize Phoenix"):

* It keeps ``openinference.span.kind`` out of the attributes (the answer's ``span_kind``): put back, except on a span
  with ``gen_ai.operation.name`` — Phoenix derived the kind from that, and the GenAI reader reads the original.
* It parses the JSON of attributes whose name ends in ``metadata``, ``tool.parameters``,
  ``llm.prompt_template.variables`` or ``document.metadata`` (``causaltrace.run.metadata`` too) and answers them
  flattened (``tool.parameters.city``): folded back into one JSON string (an all-digits level is a list). A key
  inside such an object that itself holds a dot cannot be told from nesting and comes back nested.
* It drops span links (causaltrace's dependencies travel as attributes as well) and answers times as ISO text
  (read back to the microsecond); span events (a failed span's ``exception``) come back with their attributes.

Errors (one line, exit 2 on the CLI): an invalid URL, an unreachable server (``cannot reach Phoenix at URL: …``,
or ``no answer within N s``), an unknown project (HTTP 404), another HTTP error (its status and the start of its
body), or an answer that is not Phoenix's JSON are :class:`~causaltrace.exceptions.UserError`; a project (or time
range) without (failed) traces is an :class:`~causaltrace.exceptions.InvalidInputError` saying so, and traces none of
which forms a run one saying how many spans and traces were read and which conventions were looked for.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from causaltrace.collector.pulled import Pulled, runs_of_traces
from causaltrace.collector.safe_input import max_answer_bytes, read_bounded, within
from causaltrace.collector.span_records import JSON_ATTRIBUTE_SUFFIXES, fold_json_attributes
from causaltrace.exceptions import InvalidInputError, UserError

__all__ = ["JSON_ATTRIBUTE_SUFFIXES", "pull_from_phoenix", "span_to_otlp"]

_KIND = "openinference.span.kind"
_GENAI_OPERATION = "gen_ai.operation.name"
_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}
_PAGE = 1000
_TRACES_PER_REQUEST = 25
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _base(base_url: str) -> str:
    base = base_url.strip().rstrip("/")
    parsed = urllib.parse.urlparse(base)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"invalid Phoenix URL {base_url!r}: expected http(s)://host:port")
    return base


def _get_json(url: str, base: str, project: str, timeout_s: float) -> Any:
    """GET ``url`` and decode its JSON; every failure is one UserError line."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    deadline = time.monotonic() + timeout_s

    def answer() -> bytes:  # the whole answer within timeout_s and max_answer_bytes (issue 36 item 6)
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return read_bounded(lambda: response.read(1 << 16), f"Phoenix at {base}", deadline, max_answer_bytes())

    try:
        body = within(timeout_s, answer, f"cannot reach Phoenix at {base}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UserError(f"project {project!r} not found in Phoenix at {base}") from exc
        try:
            detail = " ".join(exc.read().decode("utf-8", errors="replace").split())[:200]
        except OSError:
            detail = ""
        reason = str(exc.reason).splitlines()[0]  # urllib's redirect-loop reason spans lines
        raise UserError(f"Phoenix at {base} answered HTTP {exc.code} {reason}" + (f": {detail}" if detail else "")
                        ) from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = (f"no answer within {timeout_s:g} s" if isinstance(reason, TimeoutError)
               else reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason))
        raise UserError(f"cannot reach Phoenix at {base}: {why}") from exc
    except TimeoutError as exc:
        raise UserError(f"cannot reach Phoenix at {base}: no answer within {timeout_s:g} s") from exc
    except OSError as exc:
        raise UserError(f"cannot reach Phoenix at {base}: {exc.strerror or exc}") from exc
    try:
        answer = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"Phoenix at {base} answered {url} with something that is not JSON") from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
        raise UserError(f"Phoenix at {base} answered {url} without a 'data' list: is this a Phoenix server?")
    return answer


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()  # a naive datetime is local time (Python's rule)


def _pages(base: str, project: str, query: list[tuple[str, str]], timeout_s: float) -> Iterator[dict[str, Any]]:
    """Every span the project's span search answers for ``query``, following its cursor."""
    path = f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    cursor: str | None = None
    while True:
        params = [*query, ("limit", str(_PAGE)), *([("cursor", cursor)] if cursor else [])]
        answer = _get_json(f"{path}?{urllib.parse.urlencode(params)}", base, project, timeout_s)
        for span in answer["data"]:
            if isinstance(span, dict):
                yield span
        cursor = answer.get("next_cursor")
        if not cursor:
            return


def _trace_id(span: Mapping[str, Any]) -> str:
    context = span.get("context")
    return str(context.get("trace_id", "")) if isinstance(context, Mapping) else ""


def _root_traces(base: str, project: str, query: list[tuple[str, str]], limit: int | None,
                 timeout_s: float) -> list[str]:
    """The ids of the traces whose root spans match, oldest first (the newest ``limit`` of them)."""
    roots: dict[str, None] = {}
    search = [("parent_id", "null"), ("sort", "start_time"), ("order", "desc"), *query]
    for span in _pages(base, project, search, timeout_s):
        trace_id = _trace_id(span)
        if trace_id:
            roots.setdefault(trace_id)
        if limit is not None and len(roots) >= limit:
            break
    return list(reversed(roots))


def _listed_traces(base: str, project: str, query: list[tuple[str, str]], limit: int | None,
                   timeout_s: float) -> list[str] | None:
    """The ids of the project's traces that started in the range (``GET /v1/projects/{project}/traces``, newest
    first, every page), oldest first — a trace whose root span never reached Phoenix included. None when the
    server has no such endpoint (an older Phoenix): the caller then picks traces by their root spans."""
    path = f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}/traces"
    found: dict[str, None] = {}
    cursor: str | None = None
    while limit is None or len(found) < limit:
        params = [*query, ("sort", "start_time"), ("order", "desc"), ("limit", str(_PAGE)),
                  *([("cursor", cursor)] if cursor else [])]
        try:
            answer = _get_json(f"{path}?{urllib.parse.urlencode(params)}", base, project, timeout_s)
        except UserError as exc:
            if isinstance(exc.__cause__, urllib.error.HTTPError) and exc.__cause__.code in (404, 405, 422):
                return None
            raise
        for trace in answer["data"]:
            if isinstance(trace, dict) and trace.get("trace_id"):
                found.setdefault(str(trace["trace_id"]))
        cursor = answer.get("next_cursor")
        if not cursor:
            break
    return list(reversed(list(found)[:limit] if limit is not None else list(found)))


def _nanos(value: Any) -> int:
    if not isinstance(value, str) or not value:
        return 0
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _attributes(span: Mapping[str, Any]) -> dict[str, Any]:
    """The span's attributes as they were sent (module docstring: the kind put back, parsed JSON folded back)."""
    raw = span.get("attributes")
    attrs = fold_json_attributes({str(k): v for k, v in raw.items()} if isinstance(raw, Mapping) else {})
    kind = span.get("span_kind")
    if isinstance(kind, str) and kind and kind != "UNKNOWN" and _GENAI_OPERATION not in attrs:
        attrs.setdefault(_KIND, kind)
    return attrs


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"stringValue": json.dumps(value, ensure_ascii=False)}
    return {"stringValue": str(value)}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def span_to_otlp(span: Mapping[str, Any]) -> dict[str, Any]:
    """One span of Phoenix's REST answer as an OTLP/JSON span (module docstring)."""
    context = span.get("context") if isinstance(span.get("context"), Mapping) else {}
    out: dict[str, Any] = {
        "traceId": str(context.get("trace_id", "")),
        "spanId": str(context.get("span_id", "")),
        "name": str(span.get("name") or ""),
        "startTimeUnixNano": str(_nanos(span.get("start_time"))),
        "endTimeUnixNano": str(_nanos(span.get("end_time"))),
        "attributes": [{"key": k, "value": _value(v)} for k, v in _attributes(span).items() if v is not None],
        "status": {"code": _STATUS.get(str(span.get("status_code") or "UNSET").upper(), 0),
                   "message": str(span.get("status_message") or "")},
    }
    if span.get("parent_id"):
        out["parentSpanId"] = str(span["parent_id"])
    events = [e for e in span.get("events") or () if isinstance(e, Mapping)]
    if events:  # an exception event carries a failed step's error (issue 34 item 4)
        out["events"] = [{"name": str(e.get("name") or ""), "timeUnixNano": str(_nanos(e.get("timestamp"))),
                          "attributes": [{"key": str(k), "value": _value(v)}
                                         for k, v in _mapping(e.get("attributes")).items() if v is not None]}
                         for e in events]
    return out


def pull_from_phoenix(
    base_url: str,
    project: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    failed: bool = False,
    limit: int | None = None,
    timeout_s: float = 10.0,
) -> Pulled:
    """The runs of a Phoenix project's traces (module docstring); ``since`` / ``until`` bound the root span's start,
    ``failed`` keeps traces whose root span has status ERROR, ``limit`` keeps the newest N traces."""
    base = _base(base_url)
    if not project or not project.strip():
        raise UserError("a Phoenix project name is needed (--project P)")
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    query: list[tuple[str, str]] = []
    if since is not None:
        query.append(("start_time", _iso(since)))
    if until is not None:
        query.append(("end_time", _iso(until)))
    where = f"Phoenix project {project!r} at {base}"
    trace_ids = None if failed else _listed_traces(base, project, query, limit, timeout_s)
    if trace_ids is None:
        trace_ids = _root_traces(base, project, [*query, *([("status_code", "ERROR")] if failed else [])], limit,
                                 timeout_s)
    if not trace_ids:
        what = "failed traces" if failed else "traces"
        raise InvalidInputError(f"{where} holds no {what}" + (" in the time range" if since or until else ""))
    traces: dict[str, list[dict[str, Any]]] = {tid: [] for tid in trace_ids}
    seen: set[tuple[str, str]] = set()
    for start in range(0, len(trace_ids), _TRACES_PER_REQUEST):
        chunk = trace_ids[start:start + _TRACES_PER_REQUEST]
        for span in _pages(base, project, [("trace_id", tid) for tid in chunk], timeout_s):
            otlp = span_to_otlp(span)
            key = (otlp["traceId"], otlp["spanId"])
            if otlp["traceId"] in traces and key not in seen:
                seen.add(key)
                traces[otlp["traceId"]].append(otlp)
    for spans in traces.values():
        spans.sort(key=lambda s: int(s["startTimeUnixNano"]))
    return runs_of_traces(traces, where)
