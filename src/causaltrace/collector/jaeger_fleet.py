"""Pull every trace of a service from Jaeger (issue 23 item 3: ``pull --jaeger URL --service S --since 6h [--limit N]
[--failed]``).

Usage::

    from causaltrace.collector.jaeger_fleet import pull_service

    for window in pull_service("http://127.0.0.1:16686", "nightly-agents", since, until, failed=True):
        store the window's runs (window.pulled.runs); window.pulled.skipped says what was left out

How: Jaeger's ``/api/v3/traces`` search answers at most ``query.num_traces`` traces and has no page token, so the time
range is walked in windows, newest first: a window whose answer is full (``page`` traces) may hold more, and is split
in two halves that are asked again (down to one millisecond); a window with fewer is complete. Spans are grouped by
trace and each trace imported on its own (:func:`causaltrace.collector.pulled.runs_of_traces`), so one bad trace is
skipped with its reason. ``failed`` keeps the traces whose root span (no parent, or a parent outside the trace) has
status ERROR — causaltrace's root span is ERROR exactly for a failed or incomplete run. ``limit`` stops after that many
traces (the newest ones).

Resumable and idempotent: windows are yielded one at a time, so a caller that stores each window before asking for
the next keeps everything finished when interrupted; pulling the same range again gives the same run ids (they come
from the trace), which the store takes as unchanged. A trace whose spans straddle a window edge is found in the window
of its first span (Jaeger searches by a trace's spans' start times) and, when found in two, imported once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from causaltrace.collector.jaeger import query_jaeger_traces
from causaltrace.collector.pulled import Pulled, Skipped, runs_of_traces
from causaltrace.exceptions import UserError

__all__ = ["DEFAULT_PAGE", "MIN_WINDOW", "Window", "pull_service", "traces_of_answer"]

#: traces asked for per query (``query.num_traces``)
DEFAULT_PAGE = 100
#: the narrowest window: a full answer here is taken as it is, with a note in the window's skipped list
MIN_WINDOW = timedelta(milliseconds=1)
_ERROR = (2, "2", "STATUS_CODE_ERROR", "ERROR")

Query = Callable[[datetime, datetime, int], Mapping[str, Any]]


@dataclass
class Window:
    """One completed time window of a pull: its bounds and what it gave."""

    start: datetime
    end: datetime
    pulled: Pulled


def traces_of_answer(answer: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The OTLP/JSON spans of a Jaeger answer (``{"result": {"resourceSpans": …}}``) grouped by trace id, in order."""
    result = answer.get("result", answer)
    traces: dict[str, list[dict[str, Any]]] = {}
    resource_spans = result.get("resourceSpans", result.get("resource_spans")) if isinstance(result, Mapping) else None
    for resource in resource_spans or []:
        scopes = resource.get("scopeSpans", resource.get("scope_spans")) if isinstance(resource, Mapping) else None
        for scope in scopes or []:
            for span in (scope.get("spans") if isinstance(scope, Mapping) else None) or []:
                if isinstance(span, Mapping):
                    trace_id = str(span.get("traceId", span.get("trace_id", "")))
                    traces.setdefault(trace_id, []).append(dict(span))
    return traces


def _root_failed(spans: list[dict[str, Any]]) -> bool:
    """Whether the trace's root span (no parent in the trace) has status ERROR."""
    ids = {str(s.get("spanId", s.get("span_id", ""))) for s in spans}
    for span in spans:
        parent = str(span.get("parentSpanId", span.get("parent_span_id", "")) or "")
        if not parent or parent not in ids:
            status = span.get("status")
            if isinstance(status, Mapping) and status.get("code") in _ERROR:
                return True
    return False


def _windows(query: Query, start: datetime, end: datetime, page: int) -> Iterator[tuple[datetime, datetime, dict]]:
    """``(start, end, traces)`` for windows that cover [start, end), newest first, each answered below ``page``."""
    pending = [(start, end)]
    while pending:
        lo, hi = pending.pop()
        traces = traces_of_answer(query(lo, hi, page))
        if len(traces) >= page and hi - lo > MIN_WINDOW:
            middle = lo + (hi - lo) / 2
            pending.extend([(lo, middle), (middle, hi)])  # the newer half is popped first
            continue
        yield lo, hi, traces


def pull_service(
    base_url: str,
    service: str,
    since: datetime,
    until: datetime,
    *,
    failed: bool = False,
    limit: int | None = None,
    page: int = DEFAULT_PAGE,
    timeout_s: float = 10.0,
    query: Query | None = None,
) -> Iterator[Window]:
    """The service's traces in [since, until) as completed windows (module docstring). ``query`` replaces the Jaeger
    search (tests); raises :class:`UserError` for bad arguments or an unreachable Jaeger."""
    if not service or not service.strip():
        raise UserError("a Jaeger service name is needed (--service S)")
    if since >= until:
        raise UserError(f"the time range is empty: since {since.isoformat()} is not before {until.isoformat()}")
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1, got {limit}")
    if page < 2:
        raise UserError(f"the page size must be at least 2, got {page}")
    if query is None:
        def query(lo: datetime, hi: datetime, n: int) -> Mapping[str, Any]:
            return query_jaeger_traces(base_url, service, lo, hi, limit=n, timeout_s=timeout_s)

    seen: set[str] = set()
    taken = 0
    where = f"Jaeger service {service!r} at {base_url.rstrip('/')}"
    for lo, hi, traces in _windows(query, since, until, page):
        fresh = {tid: spans for tid, spans in traces.items() if tid not in seen}
        seen.update(fresh)
        if failed:
            fresh = {tid: spans for tid, spans in fresh.items() if _root_failed(spans)}
        if limit is not None:
            fresh = dict(list(fresh.items())[: limit - taken])
        taken += len(fresh)
        pulled = runs_of_traces(fresh, where, require_runs=False)
        if len(traces) >= page:
            pulled.skipped.append(Skipped("-", f"more than {page} traces start within {MIN_WINDOW} of "
                                               f"{lo.isoformat()}: some may be missing (raise the page size)"))
        yield Window(lo, hi, pulled)
        if limit is not None and taken >= limit:
            return

