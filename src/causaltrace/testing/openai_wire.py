"""Reactive scripted models behind the REAL OpenAI client classes: the chat-completions wire, answered in-process.

Most teams reach their models through an OpenAI-compatible client (AutoGen's ``OpenAIChatCompletionClient``,
smolagents' ``OpenAIServerModel``), and other instrumentations (OpenInference) trace only those client classes, not
a custom client. A :class:`ScriptedOpenAIEndpoint` lets tests and benchmarks drive the real client classes offline:
its httpx transport answers ``POST …/chat/completions`` with ``answer(request body) -> chat.completion body`` — no
server, no socket. The real SDK code runs on both sides of the wire: request building, HTTP, response parsing.

:func:`autogen_endpoint` turns the wire messages back into AutoGen ``LLMMessage`` objects and answers with a policy of
:mod:`causaltrace.testing.autogen` (the same deterministic answers, tool-call ids and word-count usage as its
``ScriptedChatCompletionClient``). :func:`smolagents_endpoint` does the same for the policies of
:mod:`causaltrace.testing.smolagents` behind smolagents' ``OpenAIServerModel``. Streaming requests are refused with
an HTTP 400 that says so.

Usage:
    >>> from causaltrace.testing.autogen import solver_policy
    >>> endpoint = autogen_endpoint(solver_policy(), model="scripted-solver")
    >>> client = endpoint.autogen_client()            # an autogen_ext OpenAIChatCompletionClient
    >>> endpoint.calls                                # requests answered so far
    0
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "ScriptedOpenAIEndpoint",
    "arithmetic_team_endpoints",
    "autogen_endpoint",
    "autogen_messages",
    "completion_body",
    "smolagents_endpoint",
    "smolagents_request",
]

#: The base URL the scripted clients are given; the transport never opens it (``.invalid`` cannot resolve).
BASE_URL = "http://scripted.invalid/v1"

Answer = Callable[[Mapping[str, Any]], Mapping[str, Any]]


class ScriptedOpenAIEndpoint:
    """An OpenAI-compatible chat-completions endpoint living in an httpx transport.

    ``answer`` maps a request body (the JSON the SDK sent) to a ``chat.completion`` body. ``calls`` counts the
    requests answered. Any other path, or a streaming request, gets an HTTP error the SDK raises as an APIError; an
    ``answer`` that raises is a server error (HTTP 500 naming the exception), as a failing model server gives.
    """

    def __init__(self, answer: Answer, *, model: str = "scripted") -> None:
        self.answer = answer
        self.model = model
        self.calls = 0

    def _handle(self, request: Any) -> Any:
        import httpx

        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": f"not scripted: {request.method} {request.url.path}"}})
        body = json.loads(request.content)
        if body.get("stream"):
            return httpx.Response(400, json={"error": {"message": "streaming is not scripted by this endpoint"}})
        self.calls += 1
        try:
            completion = dict(self.answer(body))
        except Exception as exc:
            return httpx.Response(500, json={"error": {"message": f"{type(exc).__name__}: {exc}"}})
        return httpx.Response(200, json=completion)

    def transport(self) -> Any:
        """An ``httpx.MockTransport`` serving this endpoint (works for sync and async httpx clients)."""
        import httpx

        return httpx.MockTransport(self._handle)

    def async_http_client(self) -> Any:
        """An ``httpx.AsyncClient`` on this endpoint's transport (what ``openai.AsyncOpenAI`` takes)."""
        import httpx

        return httpx.AsyncClient(transport=self.transport(), base_url=BASE_URL)

    def http_client(self) -> Any:
        """An ``httpx.Client`` on this endpoint's transport (what ``openai.OpenAI`` takes)."""
        import httpx

        return httpx.Client(transport=self.transport(), base_url=BASE_URL)

    def autogen_client(self) -> Any:
        """A real autogen_ext ``OpenAIChatCompletionClient`` talking to this endpoint."""
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        from causaltrace.testing.autogen import scripted_model_info

        return OpenAIChatCompletionClient(
            model=self.model,
            api_key="scripted",
            base_url=BASE_URL,
            http_client=self.async_http_client(),  # type: ignore[typeddict-unknown-key]
            temperature=0,
            max_retries=0,
            model_info=scripted_model_info(),
        )

    def smolagents_model(self) -> Any:
        """A real smolagents ``OpenAIServerModel`` talking to this endpoint."""
        from smolagents import OpenAIServerModel

        return OpenAIServerModel(
            model_id=self.model,
            api_base=BASE_URL,
            api_key="scripted",
            client_kwargs={"http_client": self.http_client(), "max_retries": 0},
        )


def completion_body(
    *,
    model: str,
    ordinal: int,
    content: str | None,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    usage: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """A ``chat.completion`` body: text ``content`` or ``(id, name, arguments JSON)`` tool calls, with usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in tool_calls
        ]
    return {
        "id": f"chatcmpl-{model}-{ordinal}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]},
    }


def _wire_text(content: Any) -> str:
    """The text of a wire message's content: a string, or the text parts of a content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))


def autogen_messages(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The AutoGen ``LLMMessage`` objects a chat-completions ``messages`` list was written from.

    Sources come back from the ``name`` fields AutoGen's client writes; consecutive ``tool`` messages become one
    ``FunctionExecutionResultMessage``, each result named after the tool call it answers.
    """
    from autogen_core import FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResult,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )

    out: list[Any] = []
    tool_names: dict[str, str] = {}
    for message in messages:
        role, text = message.get("role"), _wire_text(message.get("content"))
        if role in ("system", "developer"):
            out.append(SystemMessage(content=text))
        elif role == "user":
            out.append(UserMessage(content=text, source=message.get("name") or "user"))
        elif role == "assistant" and message.get("tool_calls"):
            calls = [
                FunctionCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                for c in message["tool_calls"]
            ]
            tool_names.update((c.id, c.name) for c in calls)
            out.append(AssistantMessage(content=calls, source=message.get("name") or "assistant", thought=text or None))
        elif role == "assistant":
            out.append(AssistantMessage(content=text, source=message.get("name") or "assistant"))
        elif role == "tool":
            call_id = message.get("tool_call_id", "")
            result = FunctionExecutionResult(call_id=call_id, content=text, name=tool_names.get(call_id, ""))
            if out and isinstance(out[-1], FunctionExecutionResultMessage):
                out[-1].content.append(result)
            else:
                out.append(FunctionExecutionResultMessage(content=[result]))
        else:
            raise ValueError(f"unknown chat message role {role!r}")
    return out


def autogen_endpoint(policy: Any, *, model: str = "scripted") -> ScriptedOpenAIEndpoint:
    """An endpoint answering with ``policy`` (a :mod:`causaltrace.testing.autogen` policy) as its scripted client
    would: the same text, tool calls, call ids and usage for the same conversation."""
    from causaltrace.testing.autogen import ScriptedChatCompletionClient

    scripted = ScriptedChatCompletionClient(policy, model=model)

    def answer(body: Mapping[str, Any]) -> dict[str, Any]:
        tools = [t.get("function", t) for t in body.get("tools") or ()]
        result = scripted._answer(autogen_messages(body["messages"]), tools, body.get("tool_choice", "auto"), None)
        usage = (result.usage.prompt_tokens, result.usage.completion_tokens)
        if isinstance(result.content, str):
            return completion_body(model=model, ordinal=scripted.calls, content=result.content, usage=usage)
        calls = [(c.id, c.name, c.arguments) for c in result.content]
        return completion_body(model=model, ordinal=scripted.calls, content=None, tool_calls=calls, usage=usage)

    return ScriptedOpenAIEndpoint(answer, model=model)


def arithmetic_team_endpoints(*, off_by_one: bool = False) -> tuple[ScriptedOpenAIEndpoint, ...]:
    """The (planner, solver, reviewer) endpoints of the demo arithmetic team: the policies and model names of
    ``planner_client`` / ``solver_client`` / ``reviewer_client``, over the wire."""
    from causaltrace.testing.autogen import planner_policy, reviewer_policy, solver_policy

    return (
        autogen_endpoint(planner_policy, model="scripted-planner"),
        autogen_endpoint(solver_policy(off_by_one=off_by_one), model="scripted-solver"),
        autogen_endpoint(reviewer_policy, model="scripted-reviewer"),
    )


#: How smolagents' memory writes the messages OpenAIServerModel sends as ``user`` / ``assistant`` (its
#: ``tool_role_conversions``): an observation or a tool error is a tool response, a task starts with "New task:".
_TOOL_RESPONSE_PREFIXES = ("Observation:", "Call id:", "Error:")


def smolagents_request(body: Mapping[str, Any]) -> Any:
    """The :class:`causaltrace.testing.smolagents.ScriptedRequest` a chat-completions body was written from.

    smolagents sends tool calls as ``assistant`` and tool responses as ``user`` text, merging consecutive messages of
    one role; a ``user`` text that starts as an observation or a tool error is read back as a ``tool-response``.
    """
    from causaltrace.testing.smolagents import ScriptedRequest

    messages = []
    for message in body["messages"]:
        role, text = message.get("role", ""), _wire_text(message.get("content"))
        if role == "user" and text.startswith(_TOOL_RESPONSE_PREFIXES):
            role = "tool-response"
        messages.append((role, text))
    stop = body.get("stop") or ()
    tools = tuple(t.get("function", t).get("name", "") for t in body.get("tools") or ())
    return ScriptedRequest(messages=tuple(messages), stop_sequences=tuple([stop] if isinstance(stop, str) else stop),
                           tool_names=tools)


def smolagents_endpoint(policy: Any, *, model: str = "scripted") -> ScriptedOpenAIEndpoint:
    """An endpoint answering with ``policy`` (a :mod:`causaltrace.testing.smolagents` policy) as a ScriptedModel
    would: the same text or tool calls (ids ``call_<turn>_<i>``), usage counted as characters / 4."""

    def answer(body: Mapping[str, Any]) -> dict[str, Any]:
        request = smolagents_request(body)
        reply = policy(request)
        in_tokens = sum(len(text) for _, text in request.messages) // 4
        ordinal = endpoint.calls
        if isinstance(reply, str):
            usage = (in_tokens, max(1, len(reply) // 4))
            return completion_body(model=model, ordinal=ordinal, content=reply, usage=usage)
        calls = [(f"call_{request.turn}_{i}", c.name, json.dumps(dict(c.arguments))) for i, c in enumerate(reply)]
        usage = (in_tokens, max(1, len(json.dumps([[c.name, c.arguments] for c in reply], default=str)) // 4))
        return completion_body(model=model, ordinal=ordinal, content=None, tool_calls=calls, usage=usage)

    endpoint = ScriptedOpenAIEndpoint(answer, model=model)
    return endpoint
