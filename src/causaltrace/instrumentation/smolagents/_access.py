"""Everything the smolagents adapter reads from smolagents, in one place (STYLE.md: "where private attributes are
unavoidable, keep them in one accessor function").

Every private smolagents name the wing uses is here: the patch targets ``MultiStepAgent._run_stream``,
``MultiStepAgent._generate_planning_step`` and ``*Agent._step_stream`` (:data:`PRIVATE_TARGETS`, wrapped by the
facade's patch table) and the one private attribute read, :func:`uses_structured_outputs` (playback). Checked
against smolagents 1.26. The hook modules read only public attributes of smolagents' agents, steps and messages
(``agent.tools``, ``memory_step.error``…) directly.

It also builds the canonical request of a model call (ARCHITECTURE "Recording"): messages as plain dicts
(``role``, ``content``, ``tool_calls``; raw API payloads and token usage dropped; images replaced by a digest),
``stop_sequences``, ``response_format``, ``tools_to_call_from`` as tool SCHEMAS (never Tool objects) and any extra
arguments. Tool-call ids are aliased later by :func:`causaltrace.recording.canonicalize_request`, with a pattern
(:func:`call_id_pattern`) that also finds them inside message text, where smolagents writes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from functools import cache
from types import SimpleNamespace
from typing import Any

from causaltrace.instrumentation._json_text import SCAN, WHITESPACE
from causaltrace.instrumentation.smolagents import _oi as oi

__all__ = [
    "PRIVATE_TARGETS",
    "agent_name",
    "call_arguments",
    "CallIdPattern",
    "call_id_pattern",
    "canonical_messages",
    "chat_message_copy",
    "code_logs",
    "is_code_agent",
    "is_tool_calling_agent",
    "jsonable",
    "llm_request",
    "message_text",
    "message_tool_calls",
    "model_name",
    "model_settings",
    "reasoning_text",
    "smol",
    "tool_arguments_from_call",
    "uses_structured_outputs",
]

#: The private smolagents methods the adapter wraps (the only private names it depends on).
PRIVATE_TARGETS = (
    "MultiStepAgent._run_stream",
    "MultiStepAgent._generate_planning_step",
    "ToolCallingAgent._step_stream",
    "CodeAgent._step_stream",
)


@cache
def smol() -> SimpleNamespace:
    """The smolagents classes the adapter checks against (imported on first use)."""
    from smolagents import agents, local_python_executor, memory, models, tools, utils

    return SimpleNamespace(
        MultiStepAgent=agents.MultiStepAgent,
        CodeAgent=agents.CodeAgent,
        ToolCallingAgent=agents.ToolCallingAgent,
        ActionOutput=agents.ActionOutput,
        ToolOutput=agents.ToolOutput,
        ToolCall=memory.ToolCall,
        ActionStep=memory.ActionStep,
        PlanningStep=memory.PlanningStep,
        FinalAnswerStep=memory.FinalAnswerStep,
        ChatMessage=models.ChatMessage,
        ChatMessageStreamDelta=models.ChatMessageStreamDelta,
        agglomerate_stream_deltas=models.agglomerate_stream_deltas,
        get_tool_json_schema=models.get_tool_json_schema,
        Tool=tools.Tool,
        BaseTool=tools.BaseTool,
        CodeOutput=local_python_executor.CodeOutput,
        AgentError=utils.AgentError,
        AgentMaxStepsError=utils.AgentMaxStepsError,
        AgentGenerationError=utils.AgentGenerationError,
    )


# --------------------------------------------------------------------------------------------------- agents


def agent_name(agent: Any) -> str:
    """The name a step carries: the agent's ``name`` (managed agents must have one), else its class name."""
    return getattr(agent, "name", None) or type(agent).__name__


def is_code_agent(agent: Any) -> bool:
    return isinstance(agent, smol().CodeAgent)


def is_tool_calling_agent(agent: Any) -> bool:
    return isinstance(agent, smol().ToolCallingAgent)


def code_open_tag(agent: Any) -> str:
    tags = getattr(agent, "code_block_tags", None)
    return tags[0] if isinstance(tags, (tuple, list)) and tags else "<code>"


def uses_structured_outputs(agent: Any) -> bool:
    """Whether a CodeAgent asks its model for structured (JSON) output (smolagents' private
    ``_use_structured_outputs_internally``; its code then travels as the ``code`` field of a JSON answer)."""
    return bool(getattr(agent, "_use_structured_outputs_internally", False))


def code_logs(memory_step: Any) -> str:
    """The print output of a CodeAgent step, read off ``ActionStep.observations`` (works for any executor)."""
    text = getattr(memory_step, "observations", None) or ""
    if text.startswith("Execution logs:\n"):
        text = text[len("Execution logs:\n") :]
    return text.split("Last output from code snippet:\n", 1)[0]


# --------------------------------------------------------------------------------------------------- models


def model_name(model: Any) -> str:
    return str(getattr(model, "model_id", None) or type(model).__name__)


_SETTING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "max_completion_tokens")


def model_settings(model: Any) -> dict[str, Any]:
    """Client settings stored with each recorded call (never credentials: only the listed sampling keys)."""
    model_class = f"{type(model).__module__}.{type(model).__qualname__}"
    out: dict[str, Any] = {"model": str(getattr(model, "model_id", None) or type(model).__name__),  # model_name
                           "model_class": model_class}
    kwargs = getattr(model, "kwargs", None)
    if type(kwargs) is dict or isinstance(kwargs, Mapping):
        for key in _SETTING_KEYS:
            if key in kwargs:
                value = kwargs[key]
                out[key] = value if type(value) in _SCALARS else jsonable(value)
    for key in _SETTING_KEYS:
        if key not in out and isinstance(getattr(model, key, None), (int, float)):
            out[key] = getattr(model, key)
    return out


def message_text(message: Any) -> str:
    """The text of a ChatMessage (or message dict) content."""
    content = message.get("content") if _is_mapping(message) else getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return str(content)


def message_tool_calls(message: Any) -> list[dict[str, Any]]:
    """``[{name, arguments, id}]`` of a ChatMessage's tool calls (arguments parsed when they are JSON text)."""
    out = []
    for tc in getattr(message, "tool_calls", None) or []:
        fn = getattr(tc, "function", None)
        args = getattr(fn, "arguments", None)
        if isinstance(args, str) and not args.startswith("\ufeff"):  # json.loads' work inline (.._json_text)
            try:
                value, end = SCAN(args, WHITESPACE(args, 0).end())
                if WHITESPACE(args, end).end() == len(args):
                    args = value
            except (StopIteration, ValueError):  # no JSON: the text stays
                pass
        plain = _plain_dict(args) if type(args) is dict else jsonable(args)  # jsonable's own dict case, first
        out.append({"name": getattr(fn, "name", ""), "arguments": plain, "id": getattr(tc, "id", None)})
    return out


def reasoning_text(agent: Any, message: Any, *, text: str | None = None, code_agent: bool | None = None) -> str:
    """The model's thought: the text before the code block (CodeAgent) or before a text-written action (``text``:
    the message's :func:`message_text`, ``code_agent``: :func:`is_code_agent`, when the caller has them)."""
    if text is None:
        text = message_text(message)
    if is_code_agent(agent) if code_agent is None else code_agent:
        text = text.split(code_open_tag(agent), 1)[0]
    elif getattr(message, "tool_calls", None) is None or "Action:" in text:
        text = re.split(r"Action:|\{", text, maxsplit=1)[0]
    return text.strip()


def chat_message_copy(message: Any) -> Any:
    """The ChatMessage without its raw API payload, for the Recording (which pickles it at once: that is the
    snapshot; smolagents mutates the message afterwards)."""
    try:
        return dataclasses.replace(message, raw=None)
    except Exception:
        return message


def _image_digest(image: Any) -> str:
    try:
        data = image.tobytes()
    except Exception:
        data = repr(image).encode()
    return "image:sha256:" + hashlib.sha256(data).hexdigest()[:16]


def _contents(content: Any, oi: bool) -> tuple[Any, Any]:
    """A message's content as the recording keeps it (images as a digest, parts as plain JSON) and, with ``oi``,
    as OpenInference shows it (:mod:`._oi`: a part is ``{type: image}`` or ``{type: text, text}``; a content that is
    no list stays as it is; else None), from one walk over its parts."""
    if not isinstance(content, list):
        return jsonable(content), content
    parts: list[Any] = []
    shown: list[Any] | None = [] if oi else None
    for part in content:
        if type(part) is dict or isinstance(part, Mapping):  # a dict first: no ABC check (a call) per part
            kind = part.get("type")
            if kind == "image":
                parts.append({"type": "image", "image": _image_digest(part.get("image"))})
            else:
                plain: dict[str, Any] = {}  # _plain_dict, inline (every part of every message)
                for key, item in part.items():
                    plain[key if type(key) is str else str(key)] = item if type(item) in _SCALARS else jsonable(item)
                parts.append(plain)
            if shown is not None:
                shown.append({"type": "image"} if kind in ("image", "image_url")
                             else {"type": "text", "text": str(part.get("text", ""))})
        else:
            parts.append(jsonable(part))
            if shown is not None:
                shown.append({"type": "text", "text": str(part)})
    return parts, shown


def _plain_dict(value: Mapping[Any, Any]) -> dict[str, Any]:
    """``jsonable`` of a mapping: its keys as str, its values as JSON (a loop: no comprehension frame, no call for
    a text value)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        out[key if type(key) is str else str(key)] = item if type(item) in _SCALARS else jsonable(item)
    return out


#: The types :func:`jsonable` keeps as they are, checked by exact type (a subclass — AgentText… — is converted).
_SCALARS = frozenset({str, int, float, bool, type(None)})

#: Per class of message: whether it is a Mapping (an ``isinstance(m, Mapping)`` is an ABC check, a Python call, on
#: every message of every request).
_IS_MAPPING: dict[type, bool] = {}


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, remembered per class."""
    cls = type(value)
    is_mapping = _IS_MAPPING.get(cls)
    if is_mapping is None:
        is_mapping = isinstance(value, Mapping)
        if len(_IS_MAPPING) < 256:
            _IS_MAPPING[cls] = is_mapping
    return is_mapping


def canonical_messages(messages: Iterable[Any], plain: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Messages as plain dicts: role, content, tool_calls (no raw payloads, token usage or timestamps). With
    ``plain``, each message's OpenInference form is appended to it too (:mod:`._oi`: OpenAI's roles, ``tool-call``
    an assistant message with its calls, ``tool-response`` a ``tool`` message for its call id), from the same read
    of the message: a model call's messages are read once for its recorded request and its span."""
    out = []
    last_calls: list[dict[str, Any]] = []  # the calls of the last tool-call message (plain's tool-call ids)
    for m in messages:
        cls = type(m)  # _is_mapping, inline (every message of every request)
        is_mapping = _IS_MAPPING.get(cls)
        if is_mapping is None:
            is_mapping = isinstance(m, Mapping)
            if len(_IS_MAPPING) < 256:
                _IS_MAPPING[cls] = is_mapping
        if is_mapping:
            given, content, tool_calls = m.get("role"), m.get("content"), m.get("tool_calls")
        else:
            given, content = getattr(m, "role", None), getattr(m, "content", None)
            tool_calls = getattr(m, "tool_calls", None)
        role = given
        if type(role) is not str:  # an Enum's ``value`` is a property (two calls): its _value_ is what it returns
            role = role._value_ if isinstance(role, Enum) else getattr(role, "value", role)
        if type(content) is str:  # text: the same in both forms, no call
            kept = shown = content
        elif (type(content) is list and len(content) == 1 and type(part := content[0]) is dict and len(part) == 2
              and part.get("type") == "text" and type(text := part.get("text")) is str):
            # one text part (smolagents' usual message: system, task, model output, observation): _contents'
            # result, inline (every message of every request: the requests carry the run's whole memory)
            kept = [{**part}]
            shown = [{"type": "text", "text": text}] if plain is not None else None
        else:
            kept, shown = _contents(content, plain is not None)
        item: dict[str, Any] = {"role": role if type(role) is str else str(role), "content": kept}
        if tool_calls:
            item["tool_calls"] = [
                {
                    "id": getattr(tc, "id", None) if not isinstance(tc, Mapping) else tc.get("id"),
                    "type": "function",
                    "function": {
                        "name": getattr(getattr(tc, "function", None), "name", None)
                        if not isinstance(tc, Mapping)
                        else (tc.get("function") or {}).get("name"),
                        "arguments": jsonable(
                            getattr(getattr(tc, "function", None), "arguments", None)
                            if not isinstance(tc, Mapping)
                            else (tc.get("function") or {}).get("arguments")
                        ),
                    },
                }
                for tc in tool_calls
            ]
        out.append(item)
        if plain is not None:  # the OpenInference form (an Enum member's value: its ``_value_``)
            oi_role = given._value_ if isinstance(given, Enum) else str(given or "")
            oi_item: dict[str, Any] = {"role": oi_role, "content": shown}
            if oi_role == "tool-call" or (oi_role == "assistant" and tool_calls):
                last_calls = oi.calls_of(tool_calls, shown)
                oi_item["role"], oi_item["tool_calls"] = "assistant", last_calls
            elif oi_role == "tool-response":
                oi_item["role"], oi_item["tool_call_id"] = "tool", oi.tool_call_id(shown, last_calls)
            plain.append(oi_item)
    return out


def tool_schemas(tools: Sequence[Any] | None) -> list[Any]:
    """smolagents' JSON schema of each tool offered to the model, None for a tool it cannot describe: built once
    per model call, for the recorded request and the span's ``llm.tools.*`` both (each names a failed one its way)."""
    if not tools:
        return []
    get_schema = smol().get_tool_json_schema
    out: list[Any] = []
    for tool in tools:
        try:
            out.append(get_schema(tool))
        except Exception:  # a tool smolagents cannot describe
            out.append(None)
    return out


def tool_schema(tool: Any, schema: Any = None) -> Any:
    """A tool's schema in the recorded request (``schema``: from :func:`tool_schemas`; None: its name only)."""
    return schema if schema is not None else {"name": getattr(tool, "name", repr(type(tool).__name__))}


def llm_request(
    messages: Sequence[Any],
    stop_sequences: Any = None,
    response_format: Any = None,
    tools_to_call_from: Sequence[Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    schemas: Sequence[Any] | None = None,
    plain: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The canonical request of one ``Model.generate`` call (before id aliasing); ``schemas``: the tools' schemas
    from :func:`tool_schemas`, when the caller made them already; ``plain``: a list the messages' OpenInference
    form is appended to (:func:`canonical_messages`)."""
    tools = None
    if tools_to_call_from:
        made = tool_schemas(tools_to_call_from) if schemas is None else schemas
        tools = []
        for i, tool in enumerate(tools_to_call_from):  # tool_schema, inline (every tool of every model call)
            schema = made[i]
            tools.append(schema if schema is not None else {"name": getattr(tool, "name", repr(type(tool).__name__))})
    extras: dict[str, Any] = {}
    if extra:  # usually none: no comprehension frame
        for key, value in sorted(extra.items()):
            extras[str(key)] = jsonable(value)
    return {
        "messages": canonical_messages(messages, plain),
        "stop_sequences": list(stop_sequences) if stop_sequences is not None else None,
        "response_format": response_format if type(response_format) in _SCALARS else jsonable(response_format),
        "tools_to_call_from": tools,
        "extra": extras,
    }


class CallIdPattern:
    """Finds the given tool-call ids as whole tokens (``sub`` is all :func:`canonicalize_request` uses).

    A plain-substring check comes first: the regex only runs on the few strings that contain an id, which keeps
    canonicalising a 10k-character prompt cheap (the regex over every string cost ~0.8 ms per request)."""

    def __init__(self, ids: Iterable[str]) -> None:
        self.ids = tuple(sorted(set(filter(None, ids)), key=len, reverse=True))  # no comprehension frames
        escaped = []  # re.escape leaves an identifier (letters, digits, _: a model's call_… id) as it is: no call
        for i in self.ids:
            escaped.append(i if i.isidentifier() else re.escape(i))
        self.regex = re.compile(r"(?<![\w-])(?:" + "|".join(escaped) + r")(?![\w-])")

    def sub(self, repl: Any, string: str) -> str:
        if not any(i in string for i in self.ids):
            return string
        return self.regex.sub(repl, string)


def call_id_pattern(known_ids: Iterable[str]) -> CallIdPattern | None:
    """A matcher of the tool-call ids seen so far in an agent run, for aliasing them inside message text too.

    Every id smolagents writes into a request came from an earlier response of the same agent run (the model's ids,
    the uuid4 ids smolagents gives tool calls it parses out of text, CodeAgent's ``call_N``), so the known ids are
    enough; None when there are none yet."""
    ids = list(filter(None, known_ids))  # no comprehension frame
    return CallIdPattern(ids) if ids else None


# ---------------------------------------------------------------------------------------------------- tools


def call_arguments(tool: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a tool called as a Python function (CodeAgent code) as one JSON object, keyed by the
    tool's input names (positional arguments mapped in ``tool.inputs`` order; smolagents' single-dict form kept)."""
    kwargs = {k: v for k, v in kwargs.items() if k != "sanitize_inputs_outputs"}
    inputs = list(getattr(tool, "inputs", None) or {})
    if len(args) == 1 and not kwargs and isinstance(args[0], Mapping) and all(k in inputs for k in args[0]):
        return {str(k): jsonable(v) for k, v in args[0].items()}
    out: dict[str, Any] = {}
    for i, value in enumerate(args):
        out[inputs[i] if i < len(inputs) else f"arg{i}"] = jsonable(value)
    for key, value in kwargs.items():
        out[str(key)] = jsonable(value)
    return out


def tool_arguments_from_call(arguments: Any) -> dict[str, Any]:
    """A ToolCallingAgent call's arguments as a JSON object (a plain-string argument becomes ``{"input": …}``)."""
    if type(arguments) is dict:
        return _plain_dict(arguments)
    if isinstance(arguments, Mapping):
        return {str(k): jsonable(v) for k, v in arguments.items()}
    if arguments is None:
        return {}
    return {"input": jsonable(arguments)}


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: plain values kept, containers walked, anything else by ``str``."""
    if type(value) in _SCALARS:
        return value  # the common cases first, by exact type (no ABC check)
    cls = type(value)
    if cls is dict:
        return _plain_dict(value)
    if cls is list:
        return [item if type(item) in _SCALARS else jsonable(item) for item in value]
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)  # AgentText and other str subclasses become plain str
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        except Exception:
            return str(value)
    return str(value)
