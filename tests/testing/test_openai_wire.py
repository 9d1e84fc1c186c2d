"""The scripted chat-completions endpoint behind real OpenAI clients (causaltrace.testing.openai_wire).

The teams on it are tested in the adapter suites (same steps as on the scripted clients); here: what goes over the
wire and back, and the errors the endpoint gives for what it does not script.
"""

from __future__ import annotations

import pytest

pytest.importorskip("openai")
pytest.importorskip("autogen_core")

import openai
from autogen_core import FunctionCall
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResultMessage,
    SystemMessage,
    UserMessage,
)

from causaltrace.testing.autogen import call
from causaltrace.testing.openai_wire import (
    BASE_URL,
    ScriptedOpenAIEndpoint,
    autogen_endpoint,
    autogen_messages,
    smolagents_request,
)


def sdk_client(endpoint: ScriptedOpenAIEndpoint) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="x", base_url=BASE_URL, http_client=endpoint.async_http_client(), max_retries=0)


def test_wire_messages_become_autogen_messages():
    messages = autogen_messages([
        {"role": "system", "content": "be brief"},
        {"role": "user", "name": "user", "content": [{"type": "text", "text": "add "}, {"type": "text", "text": "1 2"}]},
        {"role": "assistant", "name": "solver", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
            {"id": "c2", "type": "function", "function": {"name": "neg", "arguments": '{"a": 3}'}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c2", "content": "-3"},
        {"role": "user", "name": "planner", "content": "next"},
    ])
    assert [type(m) for m in messages] == [
        SystemMessage, UserMessage, AssistantMessage, FunctionExecutionResultMessage, UserMessage]
    assert messages[1].content == "add 1 2" and messages[1].source == "user"
    assert messages[2].content == [FunctionCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'),
                                   FunctionCall(id="c2", name="neg", arguments='{"a": 3}')]
    results = messages[3].content  # consecutive tool messages: one result message, each named after its call
    assert [(r.call_id, r.name, r.content) for r in results] == [("c1", "add", "3"), ("c2", "neg", "-3")]
    assert messages[4].source == "planner"
    with pytest.raises(ValueError, match="unknown chat message role 'robot'"):
        autogen_messages([{"role": "robot", "content": "x"}])


async def test_policy_answers_come_back_through_the_sdk():
    def policy(request):
        if request.tool_rounds() == 0:
            return [call("add", a=1, b=2), call("add", a=3, b=4)]
        return f"sum {request.last_user_text()}"

    endpoint = autogen_endpoint(policy, model="m")
    client = sdk_client(endpoint)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    first = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "name": "user", "content": "go"}], tools=tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        ("m-0-0", "add", '{"a": 1, "b": 2}'), ("m-0-1", "add", '{"a": 3, "b": 4}')]
    assert first.usage.prompt_tokens == 1 and first.usage.completion_tokens > 0  # word counts, as the scripted client
    second = await client.chat.completions.create(model="m", messages=[
        {"role": "user", "name": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in choice.message.tool_calls]},
        {"role": "tool", "tool_call_id": "m-0-0", "content": "3"},
        {"role": "tool", "tool_call_id": "m-0-1", "content": "7"},
    ])
    assert second.choices[0].finish_reason == "stop" and second.choices[0].message.content == "sum go"
    assert endpoint.calls == 2 and (first.id, second.id) == ("chatcmpl-m-1", "chatcmpl-m-2")


async def test_what_is_not_scripted_is_an_http_error_the_sdk_raises():
    endpoint = autogen_endpoint(lambda request: "hi")
    client = sdk_client(endpoint)
    with pytest.raises(openai.BadRequestError, match="streaming is not scripted"):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    with pytest.raises(openai.NotFoundError, match="not scripted: GET /v1/models"):
        await client.models.list()
    assert endpoint.calls == 0


async def test_a_policy_that_raises_is_a_server_error():
    def broken(request):
        raise ConnectionError("model endpoint down")

    with pytest.raises(openai.InternalServerError, match="ConnectionError: model endpoint down"):
        await sdk_client(autogen_endpoint(broken)).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}])


def test_smolagents_wire_messages_read_back_with_their_roles():
    request = smolagents_request({
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "You are an agent."}]},
            {"role": "user", "content": [{"type": "text", "text": "New task:\nsum 1 to 3"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "\nCalling tools:\n[...]"}]},
            {"role": "user", "content": [{"type": "text", "text": "Observation:\n6"}]},
            {"role": "assistant", "content": "thinking"},
            {"role": "user", "content": "Call id: call_1_0\nError:\nboom"},
        ],
        "stop": "Observation:",
        "tools": [{"type": "function", "function": {"name": "final_answer"}}],
    })
    assert [role for role, _ in request.messages] == [
        "system", "user", "assistant", "tool-response", "assistant", "tool-response"]
    assert request.task == "sum 1 to 3" and request.turn == 2
    assert request.observations == ["Observation:\n6", "Call id: call_1_0\nError:\nboom"]
    assert request.stop_sequences == ("Observation:",) and request.tool_names == ("final_answer",)
