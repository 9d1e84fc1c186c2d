"""What a pull from a trace backend (Phoenix, a Jaeger fleet query) hands back: the runs, and the traces it skipped
and why (issue 23 "Bad input": "a partial import that says what it skipped").

Usage (inside :mod:`causaltrace.collector.phoenix` and :mod:`causaltrace.collector.jaeger_fleet`)::

    pulled = runs_of_traces({trace_id: [otlp_json_span, ...], ...}, where="Phoenix project 'p' at http://…")
    pulled.runs, pulled.skipped            # [Run], [Skipped(trace_id, reason)]

Each trace is imported on its own (:func:`causaltrace.collector.otlp.runs_from_otlp` on a one-trace request), so a
trace that is malformed, whose steps do not form a graph, or that follows no known convention is skipped with its
reason instead of failing the whole pull; the others still import. Only when no trace gives a run is that an
:class:`~causaltrace.exceptions.InvalidInputError`, worded like the file importer's "nothing importable" line (how
many spans and traces were read, which conventions were looked for) and naming the first skip's reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from causaltrace.collector.foreign_spans import nothing_found
from causaltrace.collector.otlp import runs_from_otlp
from causaltrace.exceptions import InvalidInputError, TraceAssemblyError
from causaltrace.schema import Run

__all__ = ["Pulled", "Skipped", "otlp_request", "runs_of_traces", "skipped_lines"]


@dataclass(frozen=True)
class Skipped:
    """A trace a pull did not import, and why (one line)."""

    trace_id: str
    reason: str


@dataclass
class Pulled:
    """The outcome of a pull: runs in order of their traces, the traces skipped, and how much was read."""

    runs: list[Run] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    traces_read: int = 0
    spans_read: int = 0

    def extend(self, other: Pulled) -> None:
        """Add another pull's results (a later time window) to this one."""
        self.runs.extend(other.runs)
        self.skipped.extend(other.skipped)
        self.traces_read += other.traces_read
        self.spans_read += other.spans_read


def otlp_request(spans: Sequence[Mapping[str, Any]], resource: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One OTLP/JSON ExportTraceServiceRequest holding ``spans`` (OTLP/JSON span objects) under one resource."""
    return {"resourceSpans": [{"resource": {"attributes": list(resource)}, "scopeSpans": [{"spans": list(spans)}]}]}


def runs_of_traces(traces: Mapping[str, Sequence[Mapping[str, Any]]], where: str, *, require_runs: bool = True
                   ) -> Pulled:
    """The runs of each trace's OTLP/JSON spans (module docstring); raises InvalidInputError when none gives one,
    unless ``require_runs`` is False (one window of many: its traces are then all in ``skipped``)."""
    pulled = Pulled(traces_read=len(traces), spans_read=sum(len(s) for s in traces.values()))
    for trace_id, spans in traces.items():
        try:
            runs = runs_from_otlp(otlp_request(spans))
        except (InvalidInputError, TraceAssemblyError) as exc:
            pulled.skipped.append(Skipped(trace_id, exc.message))
            continue
        pulled.runs.extend(runs)
    if require_runs and traces and not pulled.runs:
        first = f"; trace {pulled.skipped[0].trace_id}: {pulled.skipped[0].reason}" if pulled.skipped else ""
        raise InvalidInputError(f"{where}: {nothing_found(pulled.spans_read, pulled.traces_read)}{first}")
    return pulled


def skipped_lines(skipped: Iterable[Skipped]) -> list[str]:
    """One line per skipped trace, as the CLI prints them on stderr."""
    return [f"skipped trace {s.trace_id}: {s.reason}" for s in skipped]
