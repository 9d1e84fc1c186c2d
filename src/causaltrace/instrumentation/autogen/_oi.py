"""OpenInference attributes of an AutoGen model call (issue 33 item 2): its request's messages with their roles,
source agents and real tool-call ids, the tools offered, the invocation parameters, and its answer — read from the
framework's own objects when the call starts and ends (the Step keeps the recording's reference instead).

AutoGen's ``LLMMessage`` kinds map to OpenAI roles as its OpenAI client sends them: ``SystemMessage`` → system,
``UserMessage`` → user (its ``source`` agent as ``message.name``), ``AssistantMessage`` → assistant (its
``FunctionCall`` list as ``tool_calls``, its ``thought``), ``FunctionExecutionResultMessage`` → one ``tool`` message
per result (``tool_call_id``, the tool's name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from causaltrace import semconv
from causaltrace.collector.oi_messages import (
    OUTPUT_MESSAGES,
    genai_output_attributes,
    json_text,
    llm_request_attributes,
    message_attributes,
)

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
    out = []  # a loop, not a comprehension: one Python frame per call (every tool-calling answer and request)
    for c in items:
        out.append({"id": getattr(c, "id", None), "name": getattr(c, "name", "?"),
                    "arguments": getattr(c, "arguments", "")})
    return out


#: The attributes :func:`messages_of` reads of a message or a function result.
_READ = ("type", "content", "source", "thought", "call_id", "name")
#: Per class: whether its instances' attributes read here are exactly their ``__dict__`` (a pydantic model whose
#: class defines none of them otherwise). ``getattr(message, "thought", None)`` on a SystemMessage goes through
#: pydantic's ``__getattr__`` and an AttributeError each time — most of what reading a request's messages cost.
_PLAIN_FIELDS: dict[type, bool] = {}


def _plain(cls: type) -> bool:
    """Whether ``cls`` is such a pydantic model (decided once per class)."""
    fields = getattr(cls, "model_fields", None)
    config = getattr(cls, "model_config", None)
    plain = (isinstance(fields, Mapping) and isinstance(config, Mapping) and config.get("extra") != "allow"
             and not any(name not in fields and hasattr(cls, name) for name in _READ))
    if len(_PLAIN_FIELDS) < 1024:
        _PLAIN_FIELDS[cls] = plain
    return plain


def _fields(obj: Any) -> dict[str, Any] | None:
    """The attribute values of such a pydantic model, as its ``__dict__`` (a missing one reads as absent); None for
    any other object (read with ``getattr``). The class check is inline: this runs per message of every call."""
    plain = _PLAIN_FIELDS.get(type(obj))
    if plain is None:
        plain = _plain(type(obj))
    values = obj.__dict__ if plain else None
    return values if type(values) is dict else None


def messages_of(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Plain message dicts (collector.oi_messages) of AutoGen's ``LLMMessage`` objects."""
    out: list[dict[str, Any]] = []
    for message in messages:
        plain = _PLAIN_FIELDS.get(type(message))
        if plain is None:
            plain = _plain(type(message))
        values = message.__dict__ if plain else None
        if type(values) is not dict:
            kind = getattr(message, "type", type(message).__name__)
            content, source, thought = (getattr(message, "content", None), getattr(message, "source", None),
                                        getattr(message, "thought", None))
        else:
            kind = values["type"] if "type" in values else type(message).__name__
            content, source, thought = values.get("content"), values.get("source"), values.get("thought")
        if kind == "FunctionExecutionResultMessage":
            for result in content or ():
                found = _fields(result)
                if found is None:
                    out.append({"role": "tool", "content": str(getattr(result, "content", "")),
                                "tool_call_id": getattr(result, "call_id", None), "name": getattr(result, "name", None)})
                else:
                    out.append({"role": "tool", "content": str(found.get("content", "")),
                                "tool_call_id": found.get("call_id"), "name": found.get("name")})
            continue
        item: dict[str, Any] = {"role": _ROLES.get(kind, "user")}
        if kind == "AssistantMessage" and isinstance(content, list):
            item["tool_calls"] = _calls(content)
        else:
            item["content"] = content if type(content) is str or content is None else _content(content)
        if source:
            item["name"] = source
        if thought:
            item["thought"] = thought
        out.append(item)
    return out


def _schema(tool: Any) -> Any:
    schema = getattr(tool, "schema", tool)
    return dict(schema) if isinstance(schema, Mapping) else str(schema)


def request_attributes(client: Any, messages: Iterable[Any], kwargs: Mapping[str, Any], *,
                       genai: bool, content: bool = True) -> dict[str, Any]:
    """The span attributes of a model call's request: ``llm.input_messages.*``, ``input.value`` (the messages as
    JSON), ``llm.tools.*``, ``llm.invocation_parameters``, ``llm.provider`` / ``llm.system``, the recommended
    ``gen_ai.request.*`` and ``server.*``; with ``genai`` the GenAI content attributes too. ``content`` off
    (OpenInference content off): no messages are read or written (the span would not carry them)."""
    schemas = []
    for tool in kwargs.get("tools") or ():  # a loop: AutoGen's ToolSchema dict is its own schema (no ABC check)
        schemas.append(dict(tool) if type(tool) is dict else _schema(tool))
    create_args = getattr(client, "_create_args", None)  # client_create_args, inline (every model call)
    parameters = dict(create_args) if type(create_args) is dict or isinstance(create_args, Mapping) else {}
    parameters.pop("model", None)
    extra = kwargs.get("extra_create_args")
    if extra is not None and (type(extra) is dict or isinstance(extra, Mapping)):  # the usual None: no ABC check
        parameters.update(extra)
    plain = messages_of(messages) if content or genai else []
    return llm_request_attributes(client, plain, schemas, parameters, genai=genai, content=content)


def response_attributes(result: Any, *, genai: bool, content: bool = True) -> dict[str, Any]:
    """``llm.output_messages.0.*`` of a ``CreateResult``: the assistant's text, or its tool calls (with ``genai``
    also ``gen_ai.output.messages``); ``content`` off: nothing of it (with ``genai`` off too, it is not read)."""
    if not content and not genai:
        return {}
    shown = content
    content = getattr(result, "content", None)
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(content, str):
        message["content"] = content
    else:
        message["tool_calls"] = _calls(content or ())
    attrs = message_attributes(OUTPUT_MESSAGES, [message]) if shown else {}
    if genai:
        finish = getattr(result, "finish_reason", None)
        attrs.update(genai_output_attributes(message, str(finish) if finish else None))
    return attrs


def turn_attributes(agent: Any, name: str, messages: Iterable[Any], *, content: bool = True) -> dict[str, Any]:
    """An agent turn's span attributes: the messages delivered to it (``input.value``; not with ``content`` off:
    OpenInference content off), its graph node (its name; the parent: the last message's source, ``start`` for
    the user, as OpenInference's instrumentor names them) and ``gen_ai.agent.description``."""
    delivered = list(messages)
    attrs: dict[str, Any] = {
        semconv.OI_INPUT_VALUE: json_text({"messages": list(map(_chat_message, delivered))}),
        semconv.OI_INPUT_MIME_TYPE: semconv.MIME_JSON,
        semconv.OI_GRAPH_NODE_ID: name,
    } if content else {semconv.OI_GRAPH_NODE_ID: name}
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
