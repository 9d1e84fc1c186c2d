"""Runs from the spans of other instrumentors: the dispatch ``collector.otlp`` calls for a trace without causaltrace
spans (issue 23 item 1).

Usage (inside ``collector.otlp``; users call ``load_otlp_json`` / ``causaltrace import --format otlp-json``)::

    runs = runs_of_foreign_trace(trace_id, spans, where)     # [] when the trace follows no known convention

One trace gives at most one Run. A trace with any ``openinference.span.kind`` span is read by
:mod:`causaltrace.collector.openinference` (its ``execute_tool`` children lend their call ids; a trace mixing both
conventions is read as OpenInference); else one with ``gen_ai.operation.name`` spans by
:mod:`causaltrace.collector.genai`. Each run's ``metadata`` marks the provenance (``openinference`` / ``genai``) and
that it has no Recording; its id is ``<provenance>-trace-<digest of the trace id>``, so re-importing a trace is
idempotent. When a whole input yields no run, :func:`nothing_found` words the one-line error: how many spans and
traces were read and which conventions were looked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from causaltrace.collector import genai, openinference
from causaltrace.collector.foreign_common import SpanLike, one_line
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Run

__all__ = ["CONVENTIONS", "nothing_found", "runs_of_foreign_trace"]

#: What the importers look for, as the "nothing importable" error lists it.
CONVENTIONS = (
    "causaltrace (causaltrace.step.* attributes), OpenInference (openinference.span.kind) and "
    "OpenTelemetry GenAI (gen_ai.operation.name)"
)


def runs_of_foreign_trace(trace_id: str, spans: Sequence[SpanLike], where: str) -> list[Run]:
    """The Run of one trace of foreign spans (module docstring), or ``[]``."""
    spans = list(spans)
    run: Run | None = None
    try:
        if any(openinference.KIND in s.attrs for s in spans):
            run = openinference.run_of_trace(trace_id, spans, where)
        elif any(genai.OPERATION in s.attrs for s in spans):
            run = genai.run_of_trace(trace_id, spans, where)
    except ValidationError as exc:  # the steps, each valid, do not form a valid Run
        raise InvalidInputError(f"{where}: trace {trace_id}: the spans do not form a valid run: {one_line(exc)}"
                                ) from exc
    return [run] if run is not None else []


def nothing_found(n_spans: int, n_traces: int) -> str:
    """The one-line message for an input whose spans hold no importable run."""
    return (
        f"read {n_spans} span{'s' if n_spans != 1 else ''} in {n_traces} trace{'s' if n_traces != 1 else ''}, "
        f"but none forms a run: looked for {CONVENTIONS} spans"
    )
