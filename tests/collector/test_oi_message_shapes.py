"""collector.oi_messages on the message shapes the adapters' common path does not show: content parts of every
kind, tool calls whose arguments are missing or structured, tool schemas as text or dicts, stop sequences of
texts or not, invocation parameters shared between calls or not (issue 35 item 2 inlined these loops: the
attributes must stay exactly what OpenInference's names and JSON make of them)."""

from __future__ import annotations

import json

from causaltrace import semconv
from causaltrace.collector import oi_messages as m


class _Name(str):
    """A text of a str subclass (an enum's value, a framework's name type): kept as the text, never re-quoted."""


def test_every_kind_of_content_part_and_tool_call():
    messages = [
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "url": "https://x/cat.png"},
            {"type": "image"},
            {"type": "text", "text": {"nested": [1, "é"]}},
            "a bare part",
            7,
        ], "name": "alice"},
        {"role": "assistant", "tool_calls": [
            {"id": "call_1", "name": "add", "arguments": {"a": 1}},
            {"name": None, "arguments": None},
            {"id": 0, "name": "say", "arguments": _Name('{"x": 1}')},
        ], "thought": "adding"},
        {"role": "tool", "content": {"sum": 2}, "tool_call_id": "call_1"},
        {"role": None, "content": _Name("plain")},
    ]
    attrs = m.message_attributes(m.INPUT_MESSAGES, messages)
    parts = "llm.input_messages.0.message.contents"
    calls = "llm.input_messages.1.message.tool_calls"
    assert attrs == {
        "llm.input_messages.0.message.role": "user",
        f"{parts}.0.message_content.type": "text",
        f"{parts}.0.message_content.text": "look",
        f"{parts}.1.message_content.type": "image",
        f"{parts}.1.message_content.image.image.url": "https://x/cat.png",
        f"{parts}.2.message_content.type": "image",
        f"{parts}.3.message_content.type": "text",
        f"{parts}.3.message_content.text": '{"nested": [1, "é"]}',
        f"{parts}.4.message_content.type": "text",
        f"{parts}.4.message_content.text": "a bare part",
        f"{parts}.5.message_content.type": "text",
        f"{parts}.5.message_content.text": "7",
        "llm.input_messages.0.message.name": "alice",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.thought": "adding",
        f"{calls}.0.tool_call.id": "call_1",
        f"{calls}.0.tool_call.function.name": "add",
        f"{calls}.0.tool_call.function.arguments": '{"a": 1}',
        f"{calls}.1.tool_call.function.name": "",
        f"{calls}.1.tool_call.function.arguments": "{}",
        f"{calls}.2.tool_call.id": "0",
        f"{calls}.2.tool_call.function.name": "say",
        f"{calls}.2.tool_call.function.arguments": '{"x": 1}',
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.content": '{"sum": 2}',
        "llm.input_messages.2.message.tool_call_id": "call_1",
        "llm.input_messages.3.message.role": "",
        "llm.input_messages.3.message.content": "plain",
    }


def test_tool_schemas_are_written_as_json_text_into_the_given_attributes():
    into = {"kept": 1}
    out = m.tool_attributes([{"name": "add", "parameters": {"a": "int"}}, _Name('{"name": "say"}')], into=into)
    assert out is into
    assert into == {"kept": 1, "llm.tools.0.tool.json_schema": '{"name": "add", "parameters": {"a": "int"}}',
                    "llm.tools.1.tool.json_schema": '{"name": "say"}'}
    assert m.tool_attributes(()) == {}


def test_stop_sequences_are_a_list_of_texts_or_left_out():
    assert m.request_parameter_attributes({"stop": ["a", _Name("b")], "temperature": 0.5, "seed": True}) == {
        semconv.GEN_AI_REQUEST_STOP_SEQUENCES: ["a", "b"], semconv.GEN_AI_REQUEST_TEMPERATURE: 0.5}
    assert m.request_parameter_attributes({"stop": "END"}) == {semconv.GEN_AI_REQUEST_STOP_SEQUENCES: ["END"]}
    assert m.request_parameter_attributes({"stop_sequences": ("a", 1), "max_tokens": 9}) == {
        semconv.GEN_AI_REQUEST_MAX_TOKENS: 9}


def test_scalar_parameters_are_made_once_other_parameters_every_call():
    scalars = {"temperature": 0.25, "max_tokens": 77, "user": "bench"}
    first = m._parameter_attributes(scalars)
    assert m._parameter_attributes(dict(scalars)) is first  # the same scalars: the attributes made once
    assert json.loads(first[semconv.OI_LLM_INVOCATION_PARAMETERS]) == scalars
    assert first[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 77
    # 1 and True are equal keys, not equal parameters
    assert m._parameter_attributes({"temperature": 0.25, "max_tokens": 77, "user": "bench", "n": 1}) is not \
        m._parameter_attributes({"temperature": 0.25, "max_tokens": 77, "user": "bench", "n": True})
    listed = {"stop": ["x"], "temperature": 0.25}
    made = m._parameter_attributes(listed)
    assert made[semconv.GEN_AI_REQUEST_STOP_SEQUENCES] == ["x"]
    assert m._parameter_attributes(listed) is not made  # a list may be edited: never shared
