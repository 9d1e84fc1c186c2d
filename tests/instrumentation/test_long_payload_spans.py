"""Issue 35, "Bad input": a long tool result is cut to the attribute limit before its JSON is written whole, and the
exported spans are the very ones the whole-then-cut way gives. The reference is the same run traced under a
redaction callback that changes nothing: the payload policy then hands whole attributes to the callback and cuts
them afterwards (the way every span was made before). The Recording keeps the result whole."""

from __future__ import annotations

import json
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import FunctionExecutionResult
from autogen_core.tools import FunctionTool

from causaltrace import semconv
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import export_stats
from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
from causaltrace.instrumentation.tracing import reset_tracing
from causaltrace.recording import long_texts
from causaltrace.testing.autogen import ScriptedChatCompletionClient, call

#: Every kind of character JSON treats apart, 300 K characters of it: above the span limit and the recording's
#: threshold for long texts.
PAYLOAD = 'a"b\\c\nd\te\x01f\x7fg é ☃ 𝄞 ' * 12_000
#: The attributes that carry the payload (or say it was cut): compared between the two ways.
PAYLOAD_KEYS = (semconv.STEP_CONTENT, semconv.STEP_OUTPUTS, semconv.RESULT_CONTENT, semconv.RESULT_OUTPUTS,
                semconv.OI_OUTPUT_VALUE, semconv.STEP_TRUNCATED, semconv.RESULT_TRUNCATED,
                semconv.RUN_OUTCOME, semconv.RECORDING_OMITTED, semconv.GEN_AI_TOOL_CALL_RESULT)


def _run(span_capture: Any, config: TraceConfig) -> tuple[dict[str, dict[str, Any]], Any]:
    """The reader agent of bench_tracing_bad_input.py returning PAYLOAD: (the payload attributes of each exported
    span by step kind — "run" for the root — and the run's stored Recording)."""
    import asyncio

    from causaltrace.collector.store import Store

    provider, exporter = span_capture
    exporter.clear()

    async def fetch() -> str:
        """Fetch the document."""
        return PAYLOAD

    client = ScriptedChatCompletionClient(lambda request: call("fetch") if not request.tool_rounds() else "done")
    agent = AssistantAgent("reader", model_client=client, tools=[FunctionTool(fetch, description="Fetch.")],
                           reflect_on_tool_use=False)
    instrument_autogen(provider, config)
    try:
        asyncio.run(agent.run(task="Read the document."))
    finally:
        uninstrument_autogen()
        reset_tracing()
    spans: dict[str, dict[str, Any]] = {}
    for span in exporter.get_finished_spans():
        attrs = {**(span.attributes or {})}
        for event in span.events:
            attrs.update(event.attributes or {})
        kind = attrs.get(semconv.STEP_KIND, "run")
        spans[kind] = {k: attrs[k] for k in PAYLOAD_KEYS if k in attrs}
    if not config.store:
        return spans, None
    (summary,) = Store().list_runs()
    return spans, Store().get_run(summary["run_id"]).recording


def test_a_long_tool_result_is_exported_as_the_whole_then_cut_way_exports_it(span_capture, causaltrace_home,
                                                                           monkeypatch):
    monkeypatch.setenv("CAUSALTRACE_EXPORT_RECORDING_MAX_BYTES", "100000")  # measured, not sent: the size compared
    before = export_stats()
    spans, recording = _run(span_capture, TraceConfig(store=True))
    middle = export_stats()
    reference, _ = _run(span_capture, TraceConfig(store=False, redact=lambda key, value: value))
    # the spans that carry the result (a model call's or a turn's input shows the adapter's messages only when
    # nothing is redacted: not compared)
    carriers = ("tool_call", "message", "run")
    assert {k: spans[k] for k in carriers} == {k: reference[k] for k in carriers}
    assert middle.truncated - before.truncated == export_stats().truncated - middle.truncated > 0  # counted alike
    limit = TraceConfig().max_attribute_chars
    tool = spans["tool_call"]
    whole = json.dumps({"result": PAYLOAD, "is_error": False}, ensure_ascii=False, separators=(",", ":"))
    assert tool[semconv.RESULT_OUTPUTS] == whole[:limit] + semconv.TRUNCATION_MARKER.format(n=len(whole) - limit)
    assert tool[semconv.RESULT_TRUNCATED] is True and spans["run"][semconv.RECORDING_OMITTED].startswith("too large")
    assert all(type(v) is str for attrs in spans.values() for v in attrs.values() if isinstance(v, str))
    assert not long_texts._literals  # the run's end let its texts go (the sizes measured hold them)
    # the Recording keeps the whole result, written as the model's own JSON
    (tool_call,) = [c for c in recording.calls if c.kind == "tool"]
    result = FunctionExecutionResult.model_validate_json(tool_call.response["json"])
    assert result.content == PAYLOAD and tool_call.response["json"] == result.model_dump_json()


def test_a_run_sampled_out_lets_its_long_texts_go(causaltrace_home):
    """The recording measures a long result whether or not the run's spans are sampled: its end forgets them too."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from _builders import capture_spans

    spans, _ = _run(capture_spans(sampler=ALWAYS_OFF), TraceConfig(store=False))
    assert spans == {} and not long_texts._literals
