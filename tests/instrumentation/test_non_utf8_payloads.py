"""Issue 22, "Bad input": text that is not valid UTF-8 (lone surrogates: a file read with ``surrogateescape``, a
bytes file name, a broken tool output) and a 50 MB payload. Before the fix one such character in a tool result lost
the whole run from the store and failed the OTLP export of the span batch; now the run is stored, every span
encodes as OTLP protobuf, the character becomes U+FFFD, and what was cut or replaced is counted."""

from __future__ import annotations

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.tools import FunctionTool
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import causaltrace
from causaltrace import semconv
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import export_stats
from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.tracing import configure, reset_tracing
from causaltrace.schema import utf8_safe
from causaltrace.testing.autogen import ScriptedChatCompletionClient, ScriptedRequest, call

BROKEN = "caf\udce9 \ud800"  # what b"caf\xe9" decoded with surrogateescape looks like, plus a lone high surrogate


def test_utf8_safe_replaces_only_lone_surrogates():
    assert utf8_safe("plain") == "plain" and utf8_safe("café ✓") == "café ✓"
    assert utf8_safe(BROKEN) == "caf\ufffd \ufffd"
    assert utf8_safe("\ud83d\ude00") == "\U0001F600"  # a proper pair becomes the character it encodes
    utf8_safe(BROKEN).encode("utf-8")


def test_a_run_with_broken_text_and_a_50_mb_payload_is_stored_and_exported(span_capture, causaltrace_home):
    provider, exporter = span_capture
    configure(provider, TraceConfig(store=True))
    before = export_stats()
    big = ("x" * 999 + "\udcff") * 50_000  # 50 MB of text, a lone surrogate in every kilobyte
    try:
        with causaltrace.run(task=f"task {BROKEN}", name=f"team {BROKEN}") as handle:
            ctx = current_run()
            ctx.add_step("message", agent=f"agent {BROKEN}", content=big)
            ctx.add_step("tool_response", agent="a", tool_name="read", status="error",
                         error=ValueError(BROKEN), outputs={"result": BROKEN, BROKEN: [BROKEN, 1]})
            handle.report(final_answer=f"answer {BROKEN}")
    finally:
        reset_tracing()
    spans = exporter.get_finished_spans()
    assert {s.attributes.get(semconv.STEP_KIND, "run") for s in spans} == {"run", "message", "tool_response"}
    assert len(encode_spans(spans).SerializeToString()) > 0  # every span encodes: nothing lost from the batch
    message = next(s for s in spans if s.attributes.get(semconv.STEP_KIND) == "message")
    assert message.attributes[semconv.STEP_TRUNCATED] is True
    limit = TraceConfig().max_attribute_chars
    assert all(len(v) < limit + 100 for v in message.attributes.values() if isinstance(v, str))
    assert "\ufffd" in message.name and "\ufffd" in message.attributes[semconv.STEP_CONTENT]
    after = export_stats()
    assert after.truncated > before.truncated and after.text_replaced >= before.text_replaced + 2  # the message and the tool_response

    stored = Store().get_run(handle.run_id)
    assert stored is not None and [s.kind for s in stored.steps] == ["message", "tool_response"]
    assert stored.task == "task caf\ufffd \ufffd" and stored.steps[0].agent == "agent caf\ufffd \ufffd"
    assert stored.outcome.final_answer == "answer caf\ufffd \ufffd"
    assert stored.steps[1].outputs["result"] == "caf\ufffd \ufffd"


@pytest.fixture
def autogen_traced(span_capture, causaltrace_home):
    provider, exporter = span_capture
    instrument_autogen(provider, TraceConfig(store=True))
    yield exporter
    uninstrument_autogen()
    reset_tracing()


async def test_an_autogen_tool_returning_broken_text_keeps_the_run(autogen_traced):
    async def read_file(path: str) -> str:
        return f"contents of {path}: {BROKEN}"

    def policy(request: ScriptedRequest):
        return call("read_file", path="notes.txt") if request.tool_rounds() == 0 else "read it. APPROVE"

    agent = AssistantAgent("reader", ScriptedChatCompletionClient(policy),
                           tools=[FunctionTool(read_file, description="Read a file.")])
    team = RoundRobinGroupChat([agent], termination_condition=TextMentionTermination("APPROVE"))
    async with causaltrace.run(task="read notes.txt", verify=lambda outcome: True) as handle:
        await team.run(task="read notes.txt")
    stored = Store().get_run(handle.run_id)
    assert stored is not None and stored.outcome.status == "success"
    (response,) = [s for s in stored.steps if s.kind == "tool_response"]
    assert "caf\ufffd" in str(response.outputs["result"])
    spans = autogen_traced.get_finished_spans()
    assert len(encode_spans(spans).SerializeToString()) > 0
    assert any(s.attributes.get(semconv.RESULT_KIND) == "tool_response" for s in spans)  # on its call's span
