"""OpenInference attributes of an AutoGen model call (issue 33 item 2): its request's messages with their roles,
source agents and real tool-call ids, the tools offered, the invocation parameters, and its answer — read from the
framework's own objects when the call starts and ends (the Step keeps the recording's reference instead).

AutoGen's ``LLMMessage`` kinds map to OpenAI roles as its OpenAI client sends them: ``SystemMessage`` → system,
``UserMessage`` → user (its ``source`` agent as ``message.name``), ``AssistantMessage`` → assistant (its
``FunctionCall`` list as ``tool_calls``, its ``thought``), ``FunctionExecutionResultMessage`` → one ``tool`` message
per result (``tool_call_id``, the tool's name).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from causaltrace import semconv
from causaltrace.collector.oi_messages import (
    OUTPUT_MESSAGES,
    genai_output_attributes,
    llm_request_attributes,
    message_attributes,
)
from causaltrace.instrumentation.autogen._access import client_create_args

__all__ = ["request_attributes", "response_attributes", "team_attributes", "turn_attributes"]

_ROLES = {"SystemMessage": "system", "UserMessage": "user", "AssistantMessage": "assistant"}


def _content(value: Any) -> Any:
    """A message's content: text, or a list of text / image parts."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, list):
        return [item if isinstance(item, str) else {"type": "image"} if type(item).__name__ == "Image"
                else {"type": "text", "text": str(item)} for item in value]
    return str(value)


def _calls(items: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"id": getattr(c, "id", None), "name": getattr(c, "name", "?"), "arguments": getattr(c, "arguments", "")}
            for c in items]


def messages_of(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Plain message dicts (collector.oi_messages) of AutoGen's ``LLMMessage`` objects."""
    out: list[dict[str, Any]] = []
    for message in messages:
        kind = getattr(message, "type", type(message).__name__)
        if kind == "FunctionExecutionResultMessage":
            for result in getattr(message, "content", None) or ():
                out.append({"role": "tool", "content": str(getattr(result, "content", "")),
                            "tool_call_id": getattr(result, "call_id", None), "name": getattr(result, "name", None)})
            continue
        item: dict[str, Any] = {"role": _ROLES.get(kind, "user")}
        content = getattr(message, "content", None)
        if kind == "AssistantMessage" and isinstance(content, list):
            item["tool_calls"] = _calls(content)
        else:
            item["content"] = _content(content)
        source = getattr(message, "source", None)
        if source:
            item["name"] = source
        thought = getattr(message, "thought", None)
        if thought:
            item["thought"] = thought
        out.append(item)
    return out


def _schema(tool: Any) -> Any:
    schema = getattr(tool, "schema", tool)
    return dict(schema) if isinstance(schema, Mapping) else str(schema)


def request_attributes(client: Any, messages: Iterable[Any], kwargs: Mapping[str, Any], *,
                       genai: bool) -> dict[str, Any]:
    """The span attributes of a model call's request: ``llm.input_messages.*``, ``input.value`` (the messages as
    JSON), ``llm.tools.*``, ``llm.invocation_parameters``, ``llm.provider`` / ``llm.system``, the recommended
    ``gen_ai.request.*`` and ``server.*``; with ``genai`` the GenAI content attributes too."""
    schemas = [_schema(tool) for tool in kwargs.get("tools") or ()]
    parameters = {k: v for k, v in client_create_args(client).items() if k != "model"}
    extra = kwargs.get("extra_create_args")
    if isinstance(extra, Mapping):
        parameters.update(extra)
    return llm_request_attributes(client, messages_of(messages), schemas, parameters, genai=genai)


def response_attributes(result: Any, *, genai: bool) -> dict[str, Any]:
    """``llm.output_messages.0.*`` of a ``CreateResult``: the assistant's text, or its tool calls (with ``genai``
    also ``gen_ai.output.messages``)."""
    content = getattr(result, "content", None)
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(content, str):
        message["content"] = content
    else:
        message["tool_calls"] = _calls(content or ())
    attrs = message_attributes(OUTPUT_MESSAGES, [message])
    if genai:
        finish = getattr(result, "finish_reason", None)
        attrs.update(genai_output_attributes(message, str(finish) if finish else None))
    return attrs


def turn_attributes(agent: Any, name: str, messages: Iterable[Any]) -> dict[str, Any]:
    """An agent turn's span attributes: the messages delivered to it (``input.value``), its graph node (its name;
    the parent: the last message's source, ``start`` for the user, as OpenInference's instrumentor names them) and
    ``gen_ai.agent.description``."""
    delivered = list(messages)
    attrs: dict[str, Any] = {
        semconv.OI_INPUT_VALUE: json.dumps({"messages": [_chat_message(m) for m in delivered]},
                                           ensure_ascii=False, default=str),
        semconv.OI_INPUT_MIME_TYPE: semconv.MIME_JSON,
        semconv.OI_GRAPH_NODE_ID: name,
    }
    if delivered:
        source = getattr(delivered[-1], "source", None)
        if source:
            attrs[semconv.OI_GRAPH_NODE_PARENT_ID] = "start" if source == "user" else str(source)
    description = getattr(agent, "description", None)
    if isinstance(description, str) and description:
        attrs[semconv.GEN_AI_AGENT_DESCRIPTION] = description
    return attrs


def _chat_message(message: Any) -> dict[str, Any]:
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:  # a message model that cannot dump itself: its text
            pass
    return {"source": getattr(message, "source", None), "content": str(getattr(message, "content", ""))}


def team_attributes(team: Any) -> dict[str, Any]:
    """A team run's attributes on the run's root span: its id (``team_id``, and ``gen_ai.agent.id``), participants'
    names and descriptions, as OpenInference's instrumentor writes them on a team's CHAIN span."""
    attrs: dict[str, Any] = {}
    team_id = getattr(team, "_team_id", None)
    if team_id:
        attrs["team_id"] = attrs[semconv.GEN_AI_AGENT_ID] = str(team_id)
    for key, attr in (("participant_names", "_participant_names"),
                      ("participant_descriptions", "_participant_descriptions")):
        value = getattr(team, attr, None)
        if isinstance(value, (list, tuple)) and value:
            attrs[key] = [str(v) for v in value]
    return attrs
