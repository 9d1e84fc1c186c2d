"""OpenInference attributes of a model call's messages, tools and parameters (issue 33 item 2): what Phoenix's span
view and Playground read.

The adapters turn their framework's messages into plain message dicts when the call starts (real tool-call ids, as
the framework holds them — never the recording's aliases) and hand them here::

    {"role": "system" | "user" | "assistant" | "tool",
     "content": "text" | [{"type": "text", "text": "…"}, {"type": "image", "url": "…"}],
     "name": "the agent that said it",            # AutoGen's source agent (message.name)
     "tool_calls": [{"id": "call_1", "name": "add", "arguments": "{\\"a\\": 1}"}],
     "tool_call_id": "call_1",                    # a tool result's call
     "thought": "…"}                              # AutoGen's thought, as OpenInference's own instrumentor writes it

:func:`message_attributes` writes them as ``llm.input_messages.{i}.message.*`` (or output), every message (no cap);
a content list becomes ``message.contents.{j}.message_content.*``, as OpenInference writes smolagents' messages.
:func:`tool_attributes` writes ``llm.tools.{i}.tool.json_schema``. Names are OpenInference's semantic conventions
(openinference-semantic-conventions; tests/test_semconv_openinference.py checks them against that package).

The same message dicts give the GenAI conventions' content attributes (:func:`genai_input_attributes`,
:func:`genai_output_attributes`: ``gen_ai.input.messages``, ``.output.messages``, ``.system_instructions``,
``.tool.definitions`` as JSON in the conventions' message schema), which are opt-in
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``); and the recommended request attributes
(:func:`request_parameter_attributes`, :func:`server_attributes`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any
from urllib.parse import urlsplit

from causaltrace import semconv
from causaltrace.recording.long_texts import json_pieces, json_pieces_text

__all__ = [
    "INPUT_MESSAGES",
    "LONG_TEXT",
    "OUTPUT_MESSAGES",
    "genai_input_attributes",
    "genai_output_attributes",
    "json_text",
    "llm_request_attributes",
    "message_attributes",
    "request_parameter_attributes",
    "server_attributes",
    "tool_attributes",
]

INPUT_MESSAGES = "llm.input_messages"
OUTPUT_MESSAGES = "llm.output_messages"
LLM_TOOLS = "llm.tools"
_ROLE = "message.role"
_CONTENT = "message.content"
_CONTENTS = "message.contents"
_NAME = "message.name"
_TOOL_CALL_ID = "message.tool_call_id"
_TOOL_CALLS = "message.tool_calls"
_PART_TYPE = "message_content.type"
_PART_TEXT = "message_content.text"
_PART_IMAGE = "message_content.image.image.url"
_CALL_ID = "tool_call.id"
_CALL_NAME = "tool_call.function.name"
_CALL_ARGUMENTS = "tool_call.function.arguments"
_SCHEMA = "tool.json_schema"


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_TEXT = json.encoder.encode_basestring


def json_text(value: Any, *, long_texts: bool = False) -> str:
    """``json.dumps(value, ensure_ascii=False, default=str)``, the same text: every structured OpenInference
    attribute of every model call goes through it, so the standard library's C encoder is called directly (what
    ``JSONEncoder.encode`` ends in, without its two Python frames; a fresh one per call, as the library makes it:
    its circular-reference markers are per call). ``long_texts``: the value may hold long texts (a request's
    ``input.value`` holds every message so far: a system prompt, a tool result) — those of :data:`LONG_TEXT`
    characters or more are then written by orjson (:func:`~causaltrace.recording.long_texts.json_pieces`), which
    escapes every character as this encoder does (a test checks every code point), about ten times faster; the
    look for them costs about a microsecond, so it is asked for only where they are likely."""
    if _C_ENCODER is None or isinstance(value, str):
        return _ENCODER.encode(value)
    if long_texts and (type(value) is dict or type(value) is list):
        pieces = json_pieces(value, _c_json, LONG_TEXT)
        if pieces is not None:
            return json_pieces_text(pieces)
    return "".join(_C_ENCODER({}, str, _ENCODE_TEXT, None, ": ", ", ", False, False, True)(value, 0))  # _c_json


#: From how many characters a text inside a structured attribute is written by orjson rather than by the standard
#: library's encoder (2.6 ns a character against about 0.3, and a microsecond to cut it out and put it back).
LONG_TEXT = 1024


def _c_json(value: Any) -> str:
    return "".join(_C_ENCODER({}, str, _ENCODE_TEXT, None, ": ", ", ", False, False, True)(value, 0))  # type: ignore[misc]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def message_attributes(prefix: str, messages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{prefix}.{i}.message.*`` for each message (``prefix``: :data:`INPUT_MESSAGES` or :data:`OUTPUT_MESSAGES`)."""
    out: dict[str, Any] = {}
    # every message of every model call comes here: keys are looked up with ``in`` and ``[]`` (no method call each;
    # the optional ones are usually absent), a dict is told from another Mapping by its exact type first
    for i, message in enumerate(messages):
        head = f"{prefix}.{i}."
        role = message["role"] if "role" in message else None
        out[head + _ROLE] = role if type(role) is str else str(role or "")
        content = message["content"] if "content" in message else None
        if type(content) is str:
            out[head + _CONTENT] = content
        elif isinstance(content, list):
            for j, part in enumerate(content):  # message.contents.{j}.*, inline: every part of every message
                part_head = f"{head}{_CONTENTS}.{j}."
                if type(part) is not dict and not isinstance(part, Mapping):
                    out[part_head + _PART_TYPE], out[part_head + _PART_TEXT] = "text", _text(part)
                elif "type" in part and part["type"] == "image":
                    out[part_head + _PART_TYPE] = "image"
                    if "url" in part and part["url"]:
                        out[part_head + _PART_IMAGE] = str(part["url"])
                else:
                    text = part["text"] if "text" in part else ""
                    out[part_head + _PART_TYPE] = "text"
                    out[part_head + _PART_TEXT] = text if type(text) is str or isinstance(text, str) else json_text(text)
        elif content is not None:
            out[head + _CONTENT] = _text(content)
        # the optional keys, unrolled
        if "name" in message and message["name"]:
            out[head + _NAME] = str(message["name"])
        if "tool_call_id" in message and message["tool_call_id"]:
            out[head + _TOOL_CALL_ID] = str(message["tool_call_id"])
        if "thought" in message and message["thought"]:
            out[head + "thought"] = str(message["thought"])
        if "tool_calls" not in message:
            continue
        for k, call in enumerate(message["tool_calls"] or ()):
            call_head = f"{head}{_TOOL_CALLS}.{k}."
            if call.get("id") is not None:
                out[call_head + _CALL_ID] = str(call["id"])
            out[call_head + _CALL_NAME] = str(call.get("name") or "")
            arguments = call.get("arguments")
            out[call_head + _CALL_ARGUMENTS] = arguments if isinstance(arguments, str) else json_text(
                arguments if arguments is not None else {})
    return out


def tool_attributes(schemas: Iterable[Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
    """``llm.tools.{i}.tool.json_schema`` for each tool schema offered to the model (a dict or JSON text), written
    into ``into`` when given (a model call's attributes: no second dict to build and merge per call)."""
    out: dict[str, Any] = {} if into is None else into
    for i, schema in enumerate(schemas):
        out[f"{LLM_TOOLS}.{i}.{_SCHEMA}"] = schema if isinstance(schema, str) else json_text(schema)
    return out


def _genai_arguments(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _genai_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A message's parts in the GenAI conventions' message schema (text, tool_call, tool_call_response)."""
    content = message.get("content")
    if message.get("role") == "tool":
        return [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                 "response": content if isinstance(content, str) else _text(content)}]
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        parts += [{"type": "text", "content": str(p.get("text", ""))} if isinstance(p, Mapping) and p.get("type") != "image"
                  else {"type": "blob", "modality": "image"} for p in content]
    elif content:
        parts.append({"type": "text", "content": _text(content)})
    parts += [{"type": "tool_call", "id": c.get("id"), "name": c.get("name"),
               "arguments": _genai_arguments(c.get("arguments"))} for c in message.get("tool_calls") or ()]
    return parts


def _genai_tool(schema: Any) -> dict[str, Any]:
    """A tool definition as the conventions write it: ``{"type": "function", "name", "description", "parameters"}``
    (an OpenAI-style ``{"type": "function", "function": {...}}`` schema is unwrapped)."""
    if not isinstance(schema, Mapping):
        return {"type": "function", "name": str(schema)}
    inner = schema.get("function") if isinstance(schema.get("function"), Mapping) else schema
    out = {"type": "function", "name": inner.get("name")}
    out.update({k: inner[k] for k in ("description", "parameters") if k in inner})
    return out


def genai_input_attributes(messages: Iterable[Mapping[str, Any]], tools: Iterable[Any] = ()) -> dict[str, Any]:
    """``gen_ai.input.messages`` (every message but the system ones), ``gen_ai.system_instructions`` (those) and
    ``gen_ai.tool.definitions`` of a model call, as JSON."""
    chat, system = [], []
    for m in messages:
        if m.get("role") == "system":
            system += [p for p in _genai_parts(m) if p.get("type") == "text"]
        else:
            item = {"role": m.get("role"), "parts": _genai_parts(m)}
            if m.get("name"):
                item["name"] = m["name"]
            chat.append(item)
    attrs = {semconv.GEN_AI_INPUT_MESSAGES: json_text(chat, long_texts=True)}
    if system:
        attrs[semconv.GEN_AI_SYSTEM_INSTRUCTIONS] = json_text(system)
    definitions = [_genai_tool(t) for t in tools]
    if definitions:
        attrs[semconv.GEN_AI_TOOL_DEFINITIONS] = json_text(definitions)
    return attrs


def genai_output_attributes(message: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """``gen_ai.output.messages`` of a model call's answer (one assistant message), as JSON."""
    item: dict[str, Any] = {"role": "assistant", "parts": _genai_parts(message)}
    if finish_reason:
        item["finish_reason"] = finish_reason
    return {semconv.GEN_AI_OUTPUT_MESSAGES: json_text([item])}


#: Invocation parameter → the GenAI request attribute it is (recommended where the client gives it).
_REQUEST_PARAMETERS = {
    "temperature": semconv.GEN_AI_REQUEST_TEMPERATURE,
    "max_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
    "top_p": semconv.GEN_AI_REQUEST_TOP_P,
    "seed": semconv.GEN_AI_REQUEST_SEED,
    "frequency_penalty": semconv.GEN_AI_REQUEST_FREQUENCY_PENALTY,
    "presence_penalty": semconv.GEN_AI_REQUEST_PRESENCE_PENALTY,
    "stop": semconv.GEN_AI_REQUEST_STOP_SEQUENCES,
    "stop_sequences": semconv.GEN_AI_REQUEST_STOP_SEQUENCES,
}


def request_parameter_attributes(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gen_ai.request.*`` attributes of a call's invocation parameters (numbers as numbers, stop sequences as a
    list of texts); parameters of other types are left out."""
    out: dict[str, Any] = {}
    for name, value in parameters.items():
        key = _REQUEST_PARAMETERS.get(name)
        if key is None or value is None or isinstance(value, bool):
            continue
        if key == semconv.GEN_AI_REQUEST_STOP_SEQUENCES:
            stops = [value] if isinstance(value, str) else value
            if isinstance(stops, (list, tuple)) and all(map(isinstance, stops, repeat(str))):
                out[key] = list(stops)
        elif isinstance(value, (int, float)):
            out[key] = value
    return out


#: Invocation parameters of plain scalars (a client's temperature, max_tokens…) → their attributes: a client sends
#: the same ones on every call. The key holds each value's type (0, 0.0 and False are equal keys, not equal JSON).
_PARAMETERS: dict[tuple[Any, ...], dict[str, Any]] = {}
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _parameter_attributes(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``llm.invocation_parameters`` (JSON) and the ``gen_ai.request.*`` attributes of a call's parameters, made
    once per distinct set of scalar parameters (the caller copies them)."""
    key: tuple[Any, ...] | None = None
    if _SCALARS.issuperset(map(type, parameters.values())):
        values = parameters.values()
        key = tuple(zip(parameters, map(type, values), values, strict=True))  # (name, type, value) each, in C
        cached = _PARAMETERS.get(key)
        if cached is not None:
            return cached
    attrs = {semconv.OI_LLM_INVOCATION_PARAMETERS: json_text(parameters)}
    attrs.update(request_parameter_attributes(parameters))
    if key is not None and len(_PARAMETERS) < 256 and list not in set(map(type, attrs.values())):
        _PARAMETERS[key] = attrs  # shared by the calls' spans: lists (stop sequences) are not, they could be edited
    return attrs


_DEFAULT_PORTS = {"http": 80, "https": 443}


def server_attributes(client: Any) -> dict[str, Any]:
    """``server.address`` / ``server.port`` of a model client that speaks HTTP: its ``base_url`` (or that of the SDK
    client it wraps: ``_client`` in AutoGen's OpenAI client, ``client`` in smolagents' OpenAIServerModel)."""
    for holder in (client, getattr(client, "_client", None), getattr(client, "client", None)):
        url = getattr(holder, "base_url", None) if holder is not None else None
        if url:
            if type(url) is str:
                found = _server_of(url)
            else:  # an httpx URL (immutable) is written as text once, not per call: five Python calls (issue 35)
                held = _URL_OBJECTS.get(id(url))
                if held is not None and held[0] is url:
                    found = held[1]
                else:
                    found = _server_of(str(url))
                    if len(_URL_OBJECTS) < 256 and type(url).__module__.startswith(_IMMUTABLE_URL_MODULES):
                        _URL_OBJECTS[id(url)] = (url, found)  # the URL held: its id is not reused meanwhile
            if found is not None:
                return dict(found)
    return {}


_CLIENT_PROVIDERS = semconv._CLIENT_PROVIDERS
_UNSEEN = object()
#: base URL → its ``server.*`` attributes (None: no host in it); a client's URL is parsed once, not per call.
_SERVERS: dict[str, dict[str, Any] | None] = {}
#: id of a client's URL object (of :data:`_IMMUTABLE_URL_MODULES`) → (it, its ``server.*`` attributes).
_URL_OBJECTS: dict[int, tuple[Any, dict[str, Any] | None]] = {}
#: The packages whose URL objects never change (httpx's, and the copy of it some SDKs bundle).
_IMMUTABLE_URL_MODULES = ("httpx",)


def _server_of(url: str) -> dict[str, Any] | None:
    try:
        return _SERVERS[url]
    except KeyError:
        pass
    out: dict[str, Any] | None = None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts = None
    if parts is not None and parts.hostname:
        out = {semconv.SERVER_ADDRESS: parts.hostname}
        port = port if port is not None else _DEFAULT_PORTS.get(parts.scheme)
        if port is not None:  # conditionally required with server.address
            out[semconv.SERVER_PORT] = port
    if len(_SERVERS) < 256:
        _SERVERS[url] = out
    return out


def llm_request_attributes(client: Any, messages: list[dict[str, Any]], schemas: list[Any],
                           parameters: Mapping[str, Any], *, genai: bool, content: bool = True) -> dict[str, Any]:
    """A model call's request attributes, from an adapter's plain messages, the tool schemas offered and the
    invocation parameters: ``llm.input_messages.*``, ``input.value`` (the messages as JSON), ``llm.tools.*``,
    ``llm.invocation_parameters``, ``llm.provider`` / ``llm.system`` (the API ``client`` speaks), the recommended
    ``gen_ai.request.*`` and ``server.*``; with ``genai`` the GenAI content attributes too; with ``content`` off
    (OpenInference content off) no messages and no ``input.value``: not built, rather than built and dropped."""
    if content:
        attrs = message_attributes(INPUT_MESSAGES, messages)  # texts only: their longest says if a text is long
        attrs[semconv.OI_INPUT_VALUE] = json_text(
            {"messages": messages}, long_texts=max(map(len, attrs.values()), default=0) >= LONG_TEXT)
        attrs[semconv.OI_INPUT_MIME_TYPE] = semconv.MIME_JSON
    else:
        attrs = {}
    if schemas:  # none offered (most calls of a team's agents without tools): no call
        tool_attributes(schemas, into=attrs)
    attrs.update(_parameter_attributes(parameters))
    attrs.update(server_attributes(client))
    provider = _CLIENT_PROVIDERS.get(type(client), _UNSEEN)  # semconv.client_provider's cache, read inline
    if provider is _UNSEEN:
        provider = semconv.client_provider(client)
    if provider is not None:
        attrs[semconv.OI_LLM_PROVIDER] = attrs[semconv.OI_LLM_SYSTEM] = provider
    if genai:
        attrs.update(genai_input_attributes(messages, schemas))
    return attrs
