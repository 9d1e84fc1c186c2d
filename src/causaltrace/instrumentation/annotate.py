"""The verdict reaches the trace (issue 33 item 5): ``diagnose``, ``repair`` and ``watch`` annotate the run's own
trace in the user's backend, so Jaeger and Phoenix show which step was decisive.

Two marks, both from the run's verdict (``Store.verdict``, worded by :mod:`causaltrace.collector.verdict_text`):

* **a span** ``decisive: #6 tool_call by solver`` (``uncertain: #9 message by reviewer`` when the verdict is
  uncertain — never "decisive" then) in the run's trace: a child of the run's root span (its id is kept in
  ``Run.metadata[semconv.RUN_ROOT_SPAN_ID]``; a run recorded before that hangs it under the decisive step's
  outermost ancestor instead), LINKED to the decisive step's span (Jaeger shows the link as a reference; Phoenix
  drops links, so the step's span id is an attribute too), carrying the verdict, its level and basis, how it was
  verified, its method, confidence and evidence (``causaltrace.verdict.*``), ``openinference.span.kind`` EVALUATOR
  and ``output.value`` (what Phoenix shows). It is timed at the run's end, so the trace keeps the run's duration.
  It goes to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (protocol as the run's spans) — else, with only
  ``CAUSALTRACE_PHOENIX_URL`` set, to Phoenix's ``/v1/traces`` — with the resource the run's spans have (service,
  Phoenix project), so it lands in the same project.
* **a Phoenix span annotation** on the decisive step (``POST /v1/span_annotations?sync=true``, name
  ``causaltrace verdict``, label ``decisive error`` / ``tool / data fault`` / ``uncertain``, score the confidence,
  the source and evidence as explanation; identifier ``causaltrace`` so a later verdict replaces it), retried while
  Phoenix answers 404 (a span not ingested yet) for up to :data:`RETRY_S` seconds; ``PHOENIX_API_KEY`` is sent as a
  bearer token.

Nothing here raises for a backend that does not answer: :func:`annotate_verdict` returns an :class:`Annotation`
whose ``problems`` the callers print as ONE warning line (never an error exit).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from causaltrace import semconv
from causaltrace.collector.verdict_text import VerdictView, evidence_lines, verdict_view
from causaltrace.config import BackendSettings
from causaltrace.schema import Diagnosis, Run, Step

__all__ = ["ANNOTATION_NAME", "RETRY_S", "Annotation", "annotate_verdict", "backend_configured", "diagnosis_attributes",
           "verdict_attributes"]

#: the Phoenix annotation's name (and its identifier: one per span, replaced by a later verdict)
ANNOTATION_NAME = "causaltrace verdict"
#: how long a 404 (span not ingested yet) is retried
RETRY_S = 10.0
_HTTP_TIMEOUT_S = 5.0


@dataclass
class Annotation:
    """What :func:`annotate_verdict` did: the span it sent (ids as hex), whether Phoenix took the annotation, and the
    problems met (empty when everything went through)."""

    trace_id: str | None = None
    span_id: str | None = None
    span_name: str | None = None
    annotated_span_id: str | None = None
    phoenix_annotation: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def warning(self) -> str | None:
        """One line for the user when something failed, else None."""
        return "could not annotate the trace: " + "; ".join(self.problems) if self.problems else None


def backend_configured(settings: BackendSettings | None = None) -> bool:
    """Whether a backend is configured to annotate (``--annotate`` is on by default then)."""
    s = settings or BackendSettings.from_env()
    return bool(s.otlp_endpoint or s.phoenix_url or _traces_endpoint_env())


def _traces_endpoint_env() -> str | None:
    import os

    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None


def _span_of(step: Step | None) -> str | None:
    """The span id a step's span has in the user's backend (a native step's own, an imported step's source)."""
    if step is None:
        return None
    if step.span_id:
        return step.span_id
    return step.source.span_id if step.source is not None else None


def _trace_of(run: Run, step: Step | None) -> str | None:
    if run.trace_id:
        return run.trace_id
    return step.source.trace_id if step is not None and step.source is not None else None


def _parent_span(run: Run, step: Step | None) -> str | None:
    """The run's root span, else the outermost ancestor of the step that has a span (module docstring)."""
    root = run.metadata.get(semconv.RUN_ROOT_SPAN_ID)
    if isinstance(root, str) and len(root) == 16:
        return root
    by_id = {s.step_id: s for s in run.steps}
    best = _span_of(step)
    while step is not None and step.parent_step_id in by_id:
        step = by_id[step.parent_step_id]
        best = _span_of(step) or best
    return best


def _target(run: Run, view: VerdictView) -> Step | None:
    """The step the verdict points at: its decisive step, or an uncertain verdict's first candidate."""
    if view.step is not None:
        return view.step
    d = view.diagnosis
    if d.candidates:
        return next((s for s in run.steps if s.step_id == d.candidates[0].step_id), None)
    return None


def diagnosis_attributes(diagnosis: Diagnosis) -> dict[str, Any]:
    """The ``causaltrace.diagnosis.*`` attributes of a diagnosis: how it was verified, its step, agent and category
    (on the root span under ``watch``, and on the annotation span)."""
    attrs: dict[str, Any] = {semconv.DIAGNOSIS_VERIFIED_BY: diagnosis.verified_by}
    if diagnosis.decisive_step_id is not None:
        attrs[semconv.DIAGNOSIS_STEP_ID] = diagnosis.decisive_step_id
    if diagnosis.decisive_step_index is not None:
        attrs[semconv.DIAGNOSIS_STEP_INDEX] = diagnosis.decisive_step_index
    if diagnosis.agent is not None:
        attrs[semconv.DIAGNOSIS_AGENT] = diagnosis.agent
    if diagnosis.category is not None:
        attrs[semconv.DIAGNOSIS_CATEGORY] = diagnosis.category
    return attrs


def verdict_attributes(run: Run, view: VerdictView, evidence: Sequence[str]) -> dict[str, Any]:
    """The annotation span's attributes (module docstring)."""
    d = view.diagnosis
    attrs: dict[str, Any] = {
        semconv.OI_SPAN_KIND: "EVALUATOR",
        semconv.RUN_ID: run.run_id,
        "causaltrace.verdict.headline": view.headline,
        "causaltrace.verdict.level": view.level,
        "causaltrace.verdict.level_name": view.level_name,
        "causaltrace.verdict.uncertain": view.uncertain,
        "causaltrace.verdict.basis": d.basis or "not recorded",
        "causaltrace.verdict.method": d.method,
        "causaltrace.verdict.source": view.source,
        "causaltrace.verdict.annotated_at": datetime.now(UTC).isoformat(),
        "output.value": "\n".join([view.headline, view.source, *evidence]),
        "output.mime_type": "text/plain",
    }
    if d.confidence is not None:
        attrs["causaltrace.verdict.confidence"] = round(d.confidence, 4)
    if evidence:
        attrs["causaltrace.verdict.evidence"] = list(evidence)
    if view.uncertain:
        attrs["causaltrace.verdict.top"] = view.top(3)
    attrs.update(diagnosis_attributes(d))
    if d.model:
        attrs["causaltrace.verdict.model"] = d.model
    return attrs


def _exporter(settings: BackendSettings) -> object | None:
    """An OTLP exporter to ``settings.otlp_endpoint`` (protocol as the run's spans: ``OTEL_EXPORTER_OTLP_PROTOCOL``),
    else the one ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` asks for, else one to Phoenix's ``/v1/traces``."""
    import os

    from causaltrace.instrumentation._export import export_timeouts, otlp_exporter_from_env

    timeout = export_timeouts()[0]
    if settings.otlp_endpoint:
        protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                    or "http/protobuf").strip().lower()
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

            return GrpcExporter(endpoint=settings.otlp_endpoint, timeout=timeout)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=settings.otlp_endpoint.rstrip("/") + "/v1/traces", timeout=timeout)
    if _traces_endpoint_env():
        return otlp_exporter_from_env()
    if settings.phoenix_url:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        headers = {"authorization": f"Bearer {settings.phoenix_api_key}"} if settings.phoenix_api_key else None
        return OTLPSpanExporter(endpoint=settings.phoenix_url.rstrip("/") + "/v1/traces", headers=headers,
                                timeout=timeout)
    return None


@contextlib.contextmanager
def _quiet_exporter_logs() -> Iterator[None]:
    """The OTLP exporters log each retry and the final failure; an annotation says its outcome in one line."""
    from causaltrace.instrumentation._export import _SDK_EXPORT_LOGGERS

    loggers = [logging.getLogger(name) for name in _SDK_EXPORT_LOGGERS]
    saved = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, saved, strict=True):
            lg.disabled = was


def _ns(moment: datetime | None) -> int:
    moment = moment or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1e9)


def _send_span(run: Run, view: VerdictView, target: Step | None, trace_id: str, parent: str | None,
               settings: BackendSettings, out: Annotation) -> None:
    """Build the annotation span (module docstring) with a tracer provider of its own and export it now."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult
    from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags

    from causaltrace.instrumentation._export import default_resource

    exporter = _exporter(settings)
    if exporter is None:
        out.problems.append("no OTLP endpoint or Phoenix URL to send the span to")
        return
    ended: list[ReadableSpan] = []

    class _Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            ended.append(span)

    provider = TracerProvider(resource=default_resource())
    provider.add_span_processor(_Keep())
    sampled = TraceFlags(TraceFlags.SAMPLED)
    tid = int(trace_id, 16)
    context = None
    if parent:
        context = trace.set_span_in_context(NonRecordingSpan(SpanContext(tid, int(parent, 16), True, sampled)))
    else:  # no span of the run known: the span starts the trace's id with a parent of its own
        context = trace.set_span_in_context(NonRecordingSpan(SpanContext(tid, 1, True, sampled)))
    links = []
    target_span = _span_of(target)
    if target_span:
        links.append(Link(SpanContext(tid, int(target_span, 16), True, sampled),
                          {semconv.DEPENDENCY_KIND: "verdict"}))
    attrs = verdict_attributes(run, view, evidence_lines(view.diagnosis))
    if target_span:
        attrs["causaltrace.verdict.span_id"] = target_span
    at = _ns(run.ended_at)
    span = provider.get_tracer("causaltrace.annotate").start_span(
        view.span_name, context=context, links=links, attributes=attrs, start_time=at)  # type: ignore[arg-type]
    span.end(end_time=at + 1000)
    out.span_id = f"{span.get_span_context().span_id:016x}"
    out.trace_id = trace_id
    out.span_name = view.span_name
    try:
        with _quiet_exporter_logs():  # its retries and failure are said once, by the caller
            result = exporter.export(ended)  # type: ignore[attr-defined]
    except Exception as exc:  # an exporter that raises instead of answering FAILURE
        result = None
        out.problems.append(f"the span was not exported ({type(exc).__name__}: {exc})")
    finally:
        try:
            exporter.shutdown()  # type: ignore[attr-defined]
        except Exception:  # closing a failed exporter has nothing left to report
            pass
    if result is not None and result != SpanExportResult.SUCCESS:
        out.problems.append("the span was not accepted by the OTLP endpoint")


def _post_annotation(view: VerdictView, span_id: str, settings: BackendSettings, out: Annotation,
                     retry_s: float) -> None:
    """POST the Phoenix span annotation, retried while Phoenix answers 404 (span not ingested yet)."""
    assert settings.phoenix_url is not None
    d = view.diagnosis
    label = "uncertain" if view.uncertain else view.headline.split(":", 1)[0]
    explanation = "\n".join([view.headline, view.source, *evidence_lines(d)])
    body = {"data": [{
        "span_id": span_id, "name": ANNOTATION_NAME, "annotator_kind": "CODE", "identifier": "causaltrace",
        "result": {"label": label, "score": d.confidence, "explanation": explanation},
        "metadata": {"run_id": d.run_id, "level": view.level, "level_name": view.level_name, "basis": d.basis,
                     "verified_by": d.verified_by, "method": d.method,
                     "decisive_step_index": d.decisive_step_index},
    }]}
    headers = {"content-type": "application/json"}
    if settings.phoenix_api_key:
        headers["authorization"] = f"Bearer {settings.phoenix_api_key}"
    url = settings.phoenix_url.rstrip("/") + "/v1/span_annotations?sync=true"
    deadline = time.monotonic() + retry_s
    while True:
        request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=_HTTP_TIMEOUT_S):
                out.phoenix_annotation = True
                out.annotated_span_id = span_id
                return
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or time.monotonic() >= deadline:
                what = "not ingested" if exc.code == 404 else f"HTTP {exc.code}"
                out.problems.append(f"Phoenix refused the annotation of span {span_id} ({what})")
                return
        except (OSError, urllib.error.URLError) as exc:
            out.problems.append(f"Phoenix at {settings.phoenix_url} did not answer ({exc})")
            return
        time.sleep(0.5)


def annotate_verdict(run: Run, diagnosis: Diagnosis, settings: BackendSettings | None = None, *,
                     uncertain: bool | None = None, retry_s: float = RETRY_S) -> Annotation:
    """Annotate ``run``'s trace with its verdict ``diagnosis`` (module docstring); ``uncertain`` as
    :func:`~causaltrace.collector.verdict_text.verdict_view` takes it. Never raises for a backend that fails."""
    settings = settings or BackendSettings.from_env()
    out = Annotation()
    view = verdict_view(run, diagnosis, uncertain=uncertain)
    target = _target(run, view)
    trace_id = _trace_of(run, target)
    if not trace_id:
        out.problems.append(f"run {run.run_id} has no trace id (it was not traced to a backend)")
        return out
    try:
        _send_span(run, view, target, trace_id, _parent_span(run, target), settings, out)
    except Exception as exc:  # instrumentation never breaks the command: one warning line
        out.problems.append(f"the span could not be built ({type(exc).__name__}: {exc})")
    target_span = _span_of(target)
    if settings.phoenix_url:
        if target_span:
            _post_annotation(view, target_span, settings, out, retry_s)
        else:
            out.problems.append("the verdict's step has no span to annotate in Phoenix")
    return out
