"""OpenInference attributes beside the GenAI ones (issue 22 item 1): the names match the OpenInference package,
every step kind has a span kind other than UNKNOWN, exported spans carry inputs / outputs / model / tokens / tool /
session under the payload policy, the resource names the Phoenix project, and the importers still read the spans."""

from __future__ import annotations

import json

import pytest
from openinference.semconv.resource import ResourceAttributes
from openinference.semconv.trace import (
    MessageAttributes,
    OpenInferenceMimeTypeValues,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)

import causaltrace
from _builders import capture_spans
from causaltrace import semconv
from causaltrace.collector.otlp import run_to_otlp, runs_from_otlp
from causaltrace.config import TraceConfig
from causaltrace.instrumentation._export import default_resource
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.steps import Dep
from causaltrace.instrumentation.tracing import configure, reset_tracing
from causaltrace.schema import STEP_KINDS

MESSAGES = [{"role": "system", "content": "You add."}, {"role": "user", "content": "add 2 and 3"}]


def _capture(config: TraceConfig):
    provider, exp = capture_spans()
    configure(provider, config)
    return exp


@pytest.fixture
def spans_of():
    """Run the small team under a payload policy; returns {step kind or "root": span}."""

    def run(**policy):
        exp = _capture(TraceConfig(store=False, **policy))
        with causaltrace.run(task="add 2 and 3", verify="5") as handle:
            _team()
        out = {}
        for span in exp.get_finished_spans():
            out[span.attributes.get(semconv.STEP_KIND, "root")] = span
            if semconv.RESULT_KIND in span.attributes:  # a tool call's span carries its result too
                out[span.attributes[semconv.RESULT_KIND]] = span
        return handle, out

    yield run
    reset_tracing()


def _team() -> None:
    ctx = current_run()
    task = ctx.add_step("task", agent="user", content="add 2 and 3")
    turn = ctx.start_step("agent_turn", agent="solver", depends_on=[Dep(task.step_id, "saw")])
    with turn.activate():
        llm = ctx.start_step("llm_response", agent="solver", model="gpt-4o-mini", inputs={"messages": MESSAGES},
                             depends_on=[Dep(task.step_id, "saw")])
        llm.end(content="call add SECRET", usage=(12, 3))
        call = ctx.add_step("tool_call", agent="solver", tool_name="add", arguments={"a": 2, "b": 3}, call_id="c1",
                            depends_on=[Dep(llm.step_id, "produced_by")])
        resp = ctx.start_step("tool_response", agent="solver", tool_name="add", call_id="c1",
                              depends_on=[Dep(call.step_id, "tool_result_of")])
        resp.end(outputs={"result": 5})
        final = ctx.start_step("final_answer", agent="solver", depends_on=[Dep(llm.step_id, "produced_by")])
        final.end(content="5")
    turn.end()
    ctx.report_end(final_answer="5")


def test_the_names_are_openinference_names():
    assert semconv.OI_SPAN_KIND == SpanAttributes.OPENINFERENCE_SPAN_KIND
    assert semconv.OI_INPUT_VALUE == SpanAttributes.INPUT_VALUE
    assert semconv.OI_INPUT_MIME_TYPE == SpanAttributes.INPUT_MIME_TYPE
    assert semconv.OI_OUTPUT_VALUE == SpanAttributes.OUTPUT_VALUE
    assert semconv.OI_OUTPUT_MIME_TYPE == SpanAttributes.OUTPUT_MIME_TYPE
    assert semconv.OI_LLM_MODEL_NAME == SpanAttributes.LLM_MODEL_NAME
    assert semconv.OI_LLM_TOKEN_COUNT_PROMPT == SpanAttributes.LLM_TOKEN_COUNT_PROMPT
    assert semconv.OI_LLM_TOKEN_COUNT_COMPLETION == SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
    assert semconv.OI_LLM_TOKEN_COUNT_TOTAL == SpanAttributes.LLM_TOKEN_COUNT_TOTAL
    assert semconv.OI_LLM_INPUT_MESSAGES == SpanAttributes.LLM_INPUT_MESSAGES
    assert semconv.OI_LLM_OUTPUT_MESSAGES == SpanAttributes.LLM_OUTPUT_MESSAGES
    assert semconv.OI_MESSAGE_ROLE == MessageAttributes.MESSAGE_ROLE
    assert semconv.OI_MESSAGE_CONTENT == MessageAttributes.MESSAGE_CONTENT
    assert semconv.OI_TOOL_NAME == SpanAttributes.TOOL_NAME
    assert semconv.OI_TOOL_PARAMETERS == SpanAttributes.TOOL_PARAMETERS
    assert semconv.OI_SESSION_ID == SpanAttributes.SESSION_ID
    assert semconv.PROJECT_NAME == ResourceAttributes.PROJECT_NAME
    assert {semconv.MIME_TEXT, semconv.MIME_JSON} == {m.value for m in OpenInferenceMimeTypeValues}
    assert semconv.OI_LLM_INVOCATION_PARAMETERS == SpanAttributes.LLM_INVOCATION_PARAMETERS
    assert semconv.OI_LLM_PROVIDER == SpanAttributes.LLM_PROVIDER
    assert semconv.OI_LLM_SYSTEM == SpanAttributes.LLM_SYSTEM
    assert semconv.OI_TOOL_DESCRIPTION == SpanAttributes.TOOL_DESCRIPTION
    assert semconv.OI_GRAPH_NODE_ID == SpanAttributes.GRAPH_NODE_ID
    assert semconv.OI_GRAPH_NODE_PARENT_ID == SpanAttributes.GRAPH_NODE_PARENT_ID


def test_the_message_names_are_openinference_names():
    """collector.oi_messages writes messages, content parts, tool calls and tools under OpenInference's names."""
    from openinference.semconv.trace import (
        ImageAttributes,
        MessageContentAttributes,
        ToolAttributes,
        ToolCallAttributes,
    )

    from causaltrace.collector import oi_messages as m

    assert (m.INPUT_MESSAGES, m.OUTPUT_MESSAGES, m.LLM_TOOLS) == (
        SpanAttributes.LLM_INPUT_MESSAGES, SpanAttributes.LLM_OUTPUT_MESSAGES, SpanAttributes.LLM_TOOLS)
    assert (m._ROLE, m._CONTENT, m._CONTENTS, m._NAME, m._TOOL_CALL_ID, m._TOOL_CALLS) == (
        MessageAttributes.MESSAGE_ROLE, MessageAttributes.MESSAGE_CONTENT, MessageAttributes.MESSAGE_CONTENTS,
        MessageAttributes.MESSAGE_NAME, MessageAttributes.MESSAGE_TOOL_CALL_ID, MessageAttributes.MESSAGE_TOOL_CALLS)
    assert (m._PART_TYPE, m._PART_TEXT) == (MessageContentAttributes.MESSAGE_CONTENT_TYPE,
                                            MessageContentAttributes.MESSAGE_CONTENT_TEXT)
    assert m._PART_IMAGE == f"{MessageContentAttributes.MESSAGE_CONTENT_IMAGE}.{ImageAttributes.IMAGE_URL}"
    assert (m._CALL_ID, m._CALL_NAME, m._CALL_ARGUMENTS) == (
        ToolCallAttributes.TOOL_CALL_ID, ToolCallAttributes.TOOL_CALL_FUNCTION_NAME,
        ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON)
    assert m._SCHEMA == ToolAttributes.TOOL_JSON_SCHEMA


def test_every_step_kind_has_a_known_span_kind():
    known = {k.value for k in OpenInferenceSpanKindValues} - {"UNKNOWN"}
    assert set(semconv.OPENINFERENCE_SPAN_KIND_BY_STEP) == set(STEP_KINDS)
    assert set(semconv.OPENINFERENCE_SPAN_KIND_BY_STEP.values()) <= known
    assert semconv.OPENINFERENCE_SPAN_KIND_ROOT in known
    table = semconv.OPENINFERENCE_SPAN_KIND_BY_STEP
    assert (table["llm_response"], table["agent_turn"], table["tool_call"], table["code_execution"]) == (
        "LLM", "AGENT", "TOOL", "TOOL")


def test_exported_spans_carry_inputs_outputs_model_tokens_tool_and_session(spans_of):
    handle, spans = spans_of()
    for kind, span in spans.items():
        assert span.attributes[semconv.OI_SESSION_ID] == handle.run_id, kind
        assert span.attributes[semconv.OI_SPAN_KIND] != "UNKNOWN", kind
    root = spans["root"].attributes
    assert root[semconv.OI_SPAN_KIND] == "CHAIN"
    assert (root[semconv.OI_INPUT_VALUE], root[semconv.OI_OUTPUT_VALUE]) == ("add 2 and 3", "5")
    assert spans["agent_turn"].attributes[semconv.OI_SPAN_KIND] == "AGENT"
    llm = spans["llm_response"].attributes
    assert llm[semconv.OI_SPAN_KIND] == "LLM"
    assert llm[semconv.OI_LLM_MODEL_NAME] == "gpt-4o-mini"
    assert (llm["llm.token_count.prompt"], llm["llm.token_count.completion"], llm["llm.token_count.total"]) == (
        12, 3, 15)
    assert json.loads(llm[semconv.OI_INPUT_VALUE]) == {"messages": MESSAGES}
    assert llm[semconv.OI_INPUT_MIME_TYPE] == "application/json"
    assert llm["llm.input_messages.1.message.role"] == "user"
    assert llm["llm.input_messages.1.message.content"] == "add 2 and 3"
    assert llm["llm.output_messages.0.message.content"] == "call add SECRET"
    assert (llm[semconv.OI_OUTPUT_VALUE], llm[semconv.OI_OUTPUT_MIME_TYPE]) == ("call add SECRET", "text/plain")
    tool = spans["tool_call"].attributes
    assert tool[semconv.OI_SPAN_KIND] == "TOOL" and tool[semconv.OI_TOOL_NAME] == "add"
    assert json.loads(tool[semconv.OI_TOOL_PARAMETERS]) == {"a": 2, "b": 3} == json.loads(tool[semconv.OI_INPUT_VALUE])
    result = spans["tool_response"].attributes
    assert json.loads(result[semconv.OI_OUTPUT_VALUE]) == {"result": 5}
    assert result[semconv.OI_OUTPUT_MIME_TYPE] == "application/json"
    assert spans["task"].attributes[semconv.OI_INPUT_VALUE] == "add 2 and 3"
    assert spans["final_answer"].attributes[semconv.OI_OUTPUT_VALUE] == "5"


_CONTENT_KEYS = ("llm.input_messages.", "llm.output_messages.", "input.value", "input.mime_type", "output.value",
                 "output.mime_type", "tool.parameters", "gen_ai.input.messages", "gen_ai.output.messages",
                 "gen_ai.system_instructions", "gen_ai.tool.definitions", "gen_ai.tool.call.arguments",
                 "gen_ai.tool.call.result")
#: Attributes that differ between two runs (times, the root span id), beside the run id in others (replaced by "RUN" below).
_VARYING = (semconv.RUN_STARTED_AT, semconv.RUN_ENDED_AT, semconv.STEP_ENDED_AT, semconv.RESULT_STARTED_AT,
            semconv.RUN_METADATA)


def _same_run(value, run_id):
    if isinstance(value, str):
        return value.replace(run_id, "RUN")
    return [_same_run(v, run_id) for v in value] if isinstance(value, (list, tuple)) else value


def test_content_off_writes_the_same_spans_without_their_content(spans_of):
    """Content off (CAUSALTRACE_CAPTURE_CONTENT=off) builds no content attribute (issue 35: it used to build them,
    then drop them): every span is the content-on span without them, the other keys in the same order."""
    on_run, on = spans_of(capture_content=True)
    off_run, off = spans_of(capture_content=False)
    assert set(on) == set(off)
    for kind, span in on.items():
        expected = [(k, v) for k, v in span.attributes.items() if not k.startswith(_CONTENT_KEYS)]
        got = list(off[kind].attributes.items())
        assert [k for k, _ in got] == [k for k, _ in expected], kind
        assert [_same_run(v, off_run.run_id) for k, v in got if k not in _VARYING] == [
            _same_run(v, on_run.run_id) for k, v in expected if k not in _VARYING], kind


def test_hidden_inputs_and_outputs_are_hidden_in_openinference_too(spans_of):
    _, spans = spans_of(hide_inputs=True)
    for kind, span in spans.items():
        keys = set(span.attributes)
        assert not keys & {semconv.OI_INPUT_VALUE, semconv.OI_TOOL_PARAMETERS, semconv.OI_INPUT_MIME_TYPE}, kind
        assert not any(k.startswith("llm.input_messages.") for k in keys), kind
    assert spans["llm_response"].attributes[semconv.OI_OUTPUT_VALUE] == "call add SECRET"
    reset_tracing()
    _, spans = spans_of(hide_outputs=True)
    for span in spans.values():
        keys = set(span.attributes)
        assert semconv.OI_OUTPUT_VALUE not in keys and not any(k.startswith("llm.output_messages.") for k in keys)
    assert json.loads(spans["tool_call"].attributes[semconv.OI_TOOL_PARAMETERS]) == {"a": 2, "b": 3}


def test_redaction_and_truncation_reach_the_openinference_values(spans_of):
    def redact(key, value):
        return value.replace("SECRET", "***").replace("add 2", "add N") if isinstance(value, str) else value

    _, spans = spans_of(redact=redact)
    llm = spans["llm_response"].attributes
    assert llm[semconv.OI_OUTPUT_VALUE] == "call add ***" == llm["llm.output_messages.0.message.content"]
    assert "add N and 3" in llm[semconv.OI_INPUT_VALUE] and "add 2" not in llm[semconv.OI_INPUT_VALUE]
    assert not any(k.startswith("llm.input_messages.") for k in llm)  # a redactor sees whole attributes only
    assert spans["root"].attributes[semconv.OI_INPUT_VALUE] == "add N and 3"
    reset_tracing()
    exp = _capture(TraceConfig(store=False, max_attribute_chars=64))
    with causaltrace.run(task="t"):
        current_run().add_step("message", agent="a", content="x" * 500, inputs={"long": "y" * 500})
    span = next(s for s in exp.get_finished_spans() if s.attributes.get(semconv.STEP_KIND) == "message")
    assert span.attributes[semconv.OI_OUTPUT_VALUE] == "x" * 64 + semconv.TRUNCATION_MARKER.format(n=436)
    assert "causaltrace: truncated" in span.attributes[semconv.OI_INPUT_VALUE]
    assert span.attributes[semconv.STEP_TRUNCATED] is True


def test_the_resource_names_the_phoenix_project(monkeypatch):
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    monkeypatch.delenv("CAUSALTRACE_PROJECT", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    assert default_resource().attributes[semconv.PROJECT_NAME] == "causaltrace"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-team")
    attrs = default_resource().attributes
    assert (attrs["service.name"], attrs[semconv.PROJECT_NAME]) == ("my-team", "my-team")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{semconv.PROJECT_NAME}=from-resource-env")
    assert default_resource().attributes[semconv.PROJECT_NAME] == "from-resource-env"
    monkeypatch.setenv("CAUSALTRACE_PROJECT", "evals")
    attrs = default_resource().attributes
    assert (attrs["service.name"], attrs[semconv.PROJECT_NAME]) == ("my-team", "evals")


def test_a_stored_run_exports_openinference_and_imports_back_unchanged(spans_of):
    handle, _ = spans_of()
    doc = run_to_otlp(handle.run)
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    kinds = {a["value"].get("stringValue") for s in spans for a in s["attributes"] if a["key"] == semconv.OI_SPAN_KIND}
    assert kinds == {"CHAIN", "AGENT", "LLM", "TOOL"}
    (back,) = runs_from_otlp(doc)
    assert [s.model_dump() for s in back.steps] == [s.model_dump() for s in handle.run.steps]


def test_a_model_call_request_without_content_is_the_request_without_its_messages():
    from causaltrace.collector.oi_messages import llm_request_attributes

    messages = [{"role": "user", "content": "add 2 and 3", "name": "user"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "name": "add", "arguments": "{}"}]}]
    full = llm_request_attributes(object(), messages, [{"name": "add"}], {"temperature": 0.5}, genai=False)
    bare = llm_request_attributes(object(), messages, [{"name": "add"}], {"temperature": 0.5}, genai=False,
                                  content=False)
    assert list(bare.items()) == [(k, v) for k, v in full.items() if not k.startswith(_CONTENT_KEYS)]
    assert "llm.tools.0.tool.json_schema" in bare and "llm.input_messages.0.message.role" in full


@pytest.mark.parametrize("text", ["plain " * 400, 'a"b\\c\nd\te\x01f\x1fg\x7fh é ☃ 𝄞 \u2028' * 200, "lone \ud800 surrogate " * 100])
def test_json_text_writes_long_texts_as_the_standard_library_does(text):
    """json_text(long_texts=True) writes the long texts of a value by orjson (issue 35): the same text as
    json.dumps(ensure_ascii=False, default=str), a lone surrogate included (left to the standard library)."""
    from causaltrace.collector.oi_messages import json_text

    value = {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}, {"role": "tool", "content": text,
                          "n": 1.5, "x": None, "t": (1, "a")}], "other": object.__name__}
    assert json_text(value, long_texts=True) == json.dumps(value, ensure_ascii=False, default=str) == json_text(value)


def test_orjson_escapes_every_code_point_as_the_json_module_does():
    """What json_text's long-text path stands on: orjson writes every character (but a lone surrogate, which it
    refuses) as json.dumps(ensure_ascii=False) does."""
    import orjson

    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert orjson.dumps(every).decode() == json.encoder.encode_basestring(every)
