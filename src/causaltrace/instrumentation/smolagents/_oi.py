"""OpenInference attributes of a smolagents model call (issue 33 item 2): its request's messages with their roles
and real tool-call ids, the tools offered, the invocation parameters, and its answer — read from smolagents' own
``ChatMessage`` objects when the call starts and ends (the Step keeps the recording's reference instead).

smolagents' roles map as its OpenAI-style models send them, with the tool turns kept apart: ``system`` / ``user`` /
``assistant`` stay; ``tool-call`` is an assistant message whose ``tool_calls`` are read from the message (or from
its ``Calling tools: [...]`` text, which is all smolagents keeps in memory); ``tool-response`` is a ``tool`` message
for its call (``Call id: …`` in the text, else the calls of the ``tool-call`` before it). Content lists stay lists
(``message.contents.*``), as OpenInference's own smolagents instrumentor writes them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from causaltrace import semconv
from causaltrace.collector.oi_messages import (
    LONG_TEXT,
    OUTPUT_MESSAGES,
    genai_output_attributes,
    json_text,
    llm_request_attributes,
    message_attributes,
)

__all__ = ["agent_attributes", "calls_of", "request_attributes", "response_attributes", "token_attributes",
           "tool_call_id"]

_CALLING = "Calling tools:"
_CALL_ID = re.compile(r"Call id:\s*(\S+)")


# A dict is told from another Mapping by its exact type first, and any other class's answer is remembered
# (:data:`_MAPPING`): ``isinstance(x, Mapping)`` is a Python call of the ABC's instance check each time, and these
# run for every message (and part) of every model request.

#: Class → whether its instances are Mappings (smolagents' ChatMessage, its tool calls… are not).
_MAPPING: dict[type, bool] = {dict: True}


def _is_mapping(cls: type) -> bool:
    found = _MAPPING[cls] = issubclass(cls, Mapping)
    if len(_MAPPING) > 256:
        _MAPPING.clear()
    return found


def _field(message: Any, name: str) -> Any:
    cls = type(message)
    if _MAPPING[cls] if cls in _MAPPING else _is_mapping(cls):
        return message.get(name)
    return getattr(message, name, None)


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        texts = []  # a loop, not a comprehension: no frame of its own
        for p in content:
            if type(p) is dict or isinstance(p, Mapping):
                texts.append(str(p.get("text", "")))
        return "\n".join(texts)
    return content if isinstance(content, str) else ""


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def calls_of(tool_calls: Any, content: Any) -> list[dict[str, Any]]:
    """A tool-call message's calls: its ``tool_calls`` (as read off the message), else parsed from its ``Calling
    tools: [...]`` text (``content``: its OpenInference content)."""
    calls = []
    for call in tool_calls or ():  # _field, inline: every call of every tool-call message of every request
        cls = type(call)
        if _MAPPING[cls] if cls in _MAPPING else _is_mapping(cls):
            call_id, function = call.get("id"), call.get("function")
        else:
            call_id, function = getattr(call, "id", None), getattr(call, "function", None)
        cls = type(function)
        if _MAPPING[cls] if cls in _MAPPING else _is_mapping(cls):
            name, arguments = function.get("name"), function.get("arguments")
        else:
            name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        calls.append({"id": call_id, "name": name,
                      "arguments": arguments if isinstance(arguments, str) else json_text(arguments)})
    if calls:
        return calls
    text = _text_of(content)
    if _CALLING not in text:
        return []
    parsed = _PARSED_CALLS.get(text)
    if parsed is None:
        parsed = _parsed_calls(text)
    return list(map(dict, parsed))  # fresh dicts: the caller's to keep


def tool_call_id(content: Any, last_calls: list[dict[str, Any]]) -> Any:
    """The call a ``tool-response`` message answers: the ``Call id: …`` in its text, else the first call of the
    tool-call message before it (``last_calls``)."""
    found = _CALL_ID.search(_text_of(content))
    return found.group(1) if found else (last_calls[0]["id"] if last_calls else None)


#: A ``Calling tools: [...]`` text → its calls: a model request carries every earlier tool-call message, so the same
#: text was parsed (``ast.literal_eval``) again on every later request of the run. A few hundred texts are kept.
_PARSED_CALLS: dict[str, tuple[dict[str, Any], ...]] = {}


def _literal(text: str, tries: int = 3) -> tuple[Any, bool]:
    """``(ast.literal_eval(text), True)``; ``(None, True)`` for a text that is no literal; ``(None, False)`` when
    CPython could not say. CPython 3.11 before 3.11.8 shares the AST constructor's recursion-depth count between
    threads, so two agents parsing at once (smolagents' managed agents in parallel, its own executor's ``ast.parse``)
    can make a valid literal raise ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905). A
    hook that let it escape lost the model call's recording (a parallel replay's recording missed a call, the cold CI
    run of this session); it is retried instead, and never remembered as "no calls"."""
    for _ in range(tries):
        try:
            return ast.literal_eval(text), True
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            return None, True
        except SystemError:
            continue
    return None, False


def _parsed_calls(text: str) -> tuple[dict[str, Any], ...]:
    """The calls a ``Calling tools: [...]`` text names (none when it does not parse), remembered per text."""
    calls: list[dict[str, Any]] = []
    parsed, settled = _literal(text.split(_CALLING, 1)[1].strip())
    for call in parsed if isinstance(parsed, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append({"id": call.get("id"), "name": function.get("name"),
                          "arguments": _arguments(function.get("arguments"))})
    found = tuple(calls)
    if settled and len(text) <= 65_536:  # a long text (a tool call's long arguments) is not held for later requests
        if len(_PARSED_CALLS) >= 512:
            _PARSED_CALLS.clear()
        _PARSED_CALLS[text] = found
    return found


def request_attributes(model: Any, plain: list[dict[str, Any]], tools: Any, stop: Any, extra: Mapping[str, Any], *,
                       genai: bool, schemas: list[Any], content: bool = True) -> dict[str, Any]:
    """The span attributes of a model call's request: ``llm.input_messages.*``, ``input.value`` (the messages as
    JSON), ``llm.tools.*``, ``llm.invocation_parameters``, ``llm.provider`` / ``llm.system``, the recommended
    ``gen_ai.request.*`` and ``server.*``; with ``genai`` the GenAI content attributes too. ``plain``: the request's
    messages in their OpenInference form, read with its canonical request (``_access.canonical_messages``); empty
    with ``content`` and ``genai`` off (OpenInference content off: the span would not carry them)."""
    kwargs = getattr(model, "kwargs", None)
    parameters = dict(kwargs) if isinstance(kwargs, dict) else {}
    for key, value in extra.items():  # loops, not comprehensions: no frame each (every model call)
        if not key.startswith("arg"):
            parameters[key] = value
    if stop:
        parameters["stop_sequences"] = stop
    shown = []  # the span's tool schemas: smolagents' (``schemas``), a name for a tool it cannot describe
    for tool, schema in zip(tools or (), schemas, strict=False):
        shown.append(schema if schema is not None else {"name": str(getattr(tool, "name", tool))})
    return llm_request_attributes(model, plain, shown, parameters, genai=genai, content=content)


def response_attributes(message: Any, *, genai: bool, content: bool = True) -> dict[str, Any]:
    """``llm.output_messages.0.*`` of the model's ``ChatMessage``: its text (as content parts, as smolagents'
    OpenInference spans show it) and its tool calls; ``gen_ai.response.id`` when the provider's raw answer has
    one; with ``genai`` also ``gen_ai.output.messages``. ``content`` off: the answer is not read (only its id)."""
    get = message.get if isinstance(message, Mapping) else partial(getattr, message)  # _field, without a call each
    if not content and not genai:
        return _response_id({}, get("raw", None))
    shown = content
    content = get("content", None)
    text = _text_of(content) if isinstance(content, list) else (content or "")
    item: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": text}] if text else []}
    calls = calls_of(get("tool_calls", None), None)
    if calls:
        item["tool_calls"] = calls
    attrs = _response_id(message_attributes(OUTPUT_MESSAGES, [item]) if shown else {}, get("raw", None))
    if genai:
        attrs.update(genai_output_attributes(item))
    return attrs


def _response_id(attrs: dict[str, Any], raw: Any) -> dict[str, Any]:
    """``attrs`` with ``gen_ai.response.id`` when the provider's raw answer has one."""
    response_id = _field(raw, "id") if raw is not None else None
    if isinstance(response_id, str) and response_id:
        attrs[semconv.GEN_AI_RESPONSE_ID] = response_id
    return attrs


def agent_attributes(agent: Any, task: Any, *, content: bool = True) -> dict[str, Any]:
    """An agent run's span attributes, as OpenInference's smolagents instrumentor writes them on its AGENT span:
    the task (``input.value``, not with ``content`` off: OpenInference content off; ``smolagents.task``),
    ``smolagents.max_steps``, ``.tools_names``, the managed agents' names and descriptions; and
    ``gen_ai.agent.description``."""
    text = str(task)
    attrs: dict[str, Any] = {
        semconv.OI_INPUT_VALUE: json_text({"task": task}, long_texts=len(text) >= LONG_TEXT),
        semconv.OI_INPUT_MIME_TYPE: semconv.MIME_JSON,
    } if content else {}
    attrs["smolagents.task"] = text
    attrs["smolagents.tools_names"] = [str(name) for name in (getattr(agent, "tools", None) or {})]
    max_steps = getattr(agent, "max_steps", None)
    if isinstance(max_steps, int):
        attrs["smolagents.max_steps"] = max_steps
    for i, managed in enumerate((getattr(agent, "managed_agents", None) or {}).values()):
        attrs[f"smolagents.managed_agents.{i}.name"] = str(getattr(managed, "name", ""))
        attrs[f"smolagents.managed_agents.{i}.description"] = str(getattr(managed, "description", ""))
    description = getattr(agent, "description", None)
    if isinstance(description, str) and description:
        attrs[semconv.GEN_AI_AGENT_DESCRIPTION] = description
    return attrs


def token_attributes(agent: Any) -> dict[str, Any]:
    """The agent run's token counts so far (``agent.monitor``), as OpenInference puts them on the AGENT span."""
    monitor = getattr(agent, "monitor", None)
    prompt = getattr(monitor, "total_input_token_count", None)
    completion = getattr(monitor, "total_output_token_count", None)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return {}
    return {semconv.OI_LLM_TOKEN_COUNT_PROMPT: prompt, semconv.OI_LLM_TOKEN_COUNT_COMPLETION: completion,
            semconv.OI_LLM_TOKEN_COUNT_TOTAL: prompt + completion}
