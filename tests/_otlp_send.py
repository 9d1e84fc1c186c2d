"""Test helper: send OTLP to a real backend (Phoenix, Jaeger) over OTLP/HTTP, as an exporter or a collector does.

    from _otlp_send import post_otlp, request_of

    post_otlp(phoenix.otlp_http_traces_url, request_of(run_to_otlp(run)), {"openinference.project.name": "p"})
    post_otlp(jaeger.otlp_http_traces_url, encode_spans(spans), {"service.name": "nightly"})

``request_of`` turns an OTLP/JSON document (hex ids, as ``run_to_otlp`` and the Collector's file exporter write it)
into the protobuf request; ``post_otlp`` sets (or adds) the given resource attributes on every resource and POSTs the
protobuf body. Only the OTel proto package and the standard library are used.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.request
from collections.abc import Mapping
from typing import Any

from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["post_otlp", "request_of"]


def _b64(value: str) -> str:
    return base64.b64encode(bytes.fromhex(value)).decode() if re.fullmatch("[0-9a-fA-F]+", value) else value


def request_of(document: Mapping[str, Any]) -> ExportTraceServiceRequest:
    """An OTLP/JSON document (hex ids) as the protobuf ExportTraceServiceRequest (protobuf-JSON wants base64 ids)."""
    doc = json.loads(json.dumps(document))
    for resource_spans in doc.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = _b64(span[key])
                for link in span.get("links", []):
                    link.update({k: _b64(link[k]) for k in ("traceId", "spanId") if link.get(k)})
    return ParseDict(doc, ExportTraceServiceRequest())


def post_otlp(url: str, request: ExportTraceServiceRequest, resource: Mapping[str, str] = ()) -> None:
    """POST ``request`` to an OTLP/HTTP traces URL with ``resource`` attributes set on each of its resources."""
    for resource_spans in request.resource_spans:
        attributes = resource_spans.resource.attributes
        for key, value in dict(resource).items():
            existing = next((a for a in attributes if a.key == key), None)
            attribute = existing if existing is not None else attributes.add()
            attribute.key = key
            attribute.value.string_value = value
    http = urllib.request.Request(url, data=request.SerializeToString(),
                                  headers={"content-type": "application/x-protobuf"})
    with urllib.request.urlopen(http, timeout=30) as answer:
        assert answer.status == 200, answer.status
