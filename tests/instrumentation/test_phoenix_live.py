"""A real Arize Phoenix (issue 22 item 5): live AutoGen and smolagents runs exported over OTLP/HTTP land in the
project CAUSALTRACE_PROJECT names, with no causaltrace span of kind UNKNOWN, inputs and outputs shown, and LLM
spans with their model and token counts — read back through Phoenix's REST and GraphQL APIs.

Phoenix comes from scripts/install_phoenix.sh (its own venv under ~/.cache/causaltrace); without it these tests
skip, and fail under CAUSALTRACE_STRICT=1. One Phoenix serves the module (it takes ~10-70 s to start).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import causaltrace
from _builders import capture_spans
from _phoenix import phoenix_python, running_phoenix
from causaltrace import semconv
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import default_resource
from causaltrace.instrumentation.tracing import reset_tracing
from conftest import require

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    python = phoenix_python()
    require(python is not None, "Phoenix is not installed (run scripts/install_phoenix.sh)")
    with running_phoenix(python, tmp_path_factory.mktemp("phoenix")) as instance:
        yield instance


def _provider(phoenix, project: str, monkeypatch) -> tuple[TracerProvider, Any]:
    """A provider as causaltrace builds it (its resource from CAUSALTRACE_PROJECT), exporting to Phoenix over
    OTLP/HTTP; the in-memory copy says how many spans Phoenix must end up with."""
    monkeypatch.setenv("CAUSALTRACE_PROJECT", project)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    live = SimpleSpanProcessor(OTLPSpanExporter(endpoint=phoenix.otlp_http_traces_url))
    return capture_spans(resource=default_resource(), before=[live])


def _spans_in_phoenix(phoenix, project: str, expected: int, timeout: float = 60.0) -> list[dict]:
    """The project's spans once Phoenix has ingested all ``expected`` of them (it inserts in the background)."""
    deadline = time.monotonic() + timeout
    spans: list[dict] = []
    while time.monotonic() < deadline:
        try:
            spans = phoenix.spans(project)
        except OSError:  # the project does not exist yet (404) or Phoenix is busy
            spans = []
        if len(spans) >= expected:
            return spans
        time.sleep(1.0)
    raise AssertionError(f"Phoenix holds {len(spans)} of the {expected} spans exported to {project!r}")


def _assert_native_in_phoenix(phoenix, project: str, run_id: str, exported: int) -> None:
    spans = _spans_in_phoenix(phoenix, project, exported)
    ours = [s for s in spans if s["attributes"].get(semconv.RUN_ID) == run_id]
    assert ours and len(ours) == exported
    kinds = {s["span_kind"] for s in ours}
    assert "UNKNOWN" not in kinds and {"CHAIN", "AGENT", "LLM"} <= kinds, kinds
    root = next(s for s in ours if semconv.is_root_span_name(s["name"]))
    assert root["span_kind"] == "CHAIN" and root["parent_id"] is None
    assert root["attributes"][semconv.OI_INPUT_VALUE] and root["attributes"][semconv.OI_OUTPUT_VALUE]
    assert all(s["attributes"].get(semconv.OI_SESSION_ID) == run_id for s in ours)
    llm = [s for s in ours if s["span_kind"] == "LLM"]
    for span in llm:
        attrs = span["attributes"]
        assert attrs[semconv.OI_LLM_MODEL_NAME], span["name"]
        assert int(attrs[semconv.OI_LLM_TOKEN_COUNT_PROMPT]) > 0 and int(attrs[semconv.OI_LLM_TOKEN_COUNT_TOTAL]) > 0
        assert attrs[semconv.OI_INPUT_VALUE] and attrs[semconv.OI_OUTPUT_VALUE]
    tools = [s for s in ours if s["attributes"].get(semconv.STEP_KIND) == "tool_call"]
    assert tools and all(s["span_kind"] == "TOOL" and s["attributes"].get(semconv.OI_TOOL_NAME) for s in tools)
    assert all(s["attributes"].get(semconv.OI_INPUT_VALUE) for s in tools)  # the arguments
    # Phoenix parses the JSON of tool.parameters and shows it flattened: tool.parameters.<argument>
    assert all(any(k.startswith(semconv.OI_TOOL_PARAMETERS + ".") for k in s["attributes"]) for s in tools)
    with_io = sum(1 for s in ours if semconv.OI_INPUT_VALUE in s["attributes"] or semconv.OI_OUTPUT_VALUE in s["attributes"])
    assert with_io >= len(ours) - 3  # only containers (an agent_turn) may carry neither
    projects = phoenix.graphql("{ projects { edges { node { name traceCount } } } }")["data"]["projects"]["edges"]
    counts = {edge["node"]["name"]: edge["node"]["traceCount"] for edge in projects}
    assert counts.get(project) == 1, counts


def test_a_live_autogen_run_is_native_in_phoenix(phoenix, monkeypatch):
    pytest.importorskip("autogen_agentchat")
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen

    example = importlib.import_module("autogen_team")
    provider, copy = _provider(phoenix, "ct-autogen", monkeypatch)
    instrument_autogen(provider, TraceConfig(store=False))

    async def run():
        team = example.build()
        async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
            await team.run(task=example.TASK)
        return handle

    try:
        handle = asyncio.run(run())
    finally:
        uninstrument_autogen()
        reset_tracing()
    assert handle.outcome.status == "success"
    provider.force_flush()
    exported = [s for s in copy.get_finished_spans() if s.attributes.get(semconv.RUN_ID) == handle.run_id]
    _assert_native_in_phoenix(phoenix, "ct-autogen", handle.run_id, len(exported))
    provider.shutdown()


def test_a_live_smolagents_run_is_native_in_phoenix(phoenix, monkeypatch):
    pytest.importorskip("smolagents")
    from causaltrace.instrumentation.smolagents import instrument_smolagents, uninstrument_smolagents

    example = importlib.import_module("smolagents_agents")
    provider, copy = _provider(phoenix, "ct-smolagents", monkeypatch)
    instrument_smolagents(provider, TraceConfig(store=False))
    try:
        with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
            example.build().run(example.TASK)
    finally:
        uninstrument_smolagents()
        reset_tracing()
    assert handle.outcome.status == "success"
    provider.force_flush()
    exported = [s for s in copy.get_finished_spans() if s.attributes.get(semconv.RUN_ID) == handle.run_id]
    _assert_native_in_phoenix(phoenix, "ct-smolagents", handle.run_id, len(exported))
    provider.shutdown()
