"""Everything the AutoGen adapter reads from AutoGen objects: one accessor per private attribute, the canonical
recorded requests, and small text helpers.

AutoGen 0.7.5 (FACTS.md "AutoGen AgentChat 0.7.5") keeps several things the adapter needs in private attributes.
Each private read lives in exactly one function below, so an AutoGen change breaks one place and the adapter
degrades (the accessor returns a neutral value) instead of raising into the user's run:

=================================  ============================================  ===================================
accessor                           private attribute                             used for
=================================  ============================================  ===================================
:func:`participants_of`            ``BaseGroupChat._participants``               patching participants' classes
:func:`handoff_targets`            ``AssistantAgent._handoffs``                  a handoff's candidate targets
:func:`selectable_speakers`        ``BaseGroupChatManager._participant_names``   a selection's candidates
:func:`model_client_of`            ``<agent or team>._model_client``             patching the client class;
                                                                                 the selector's client
:func:`manager_name`               ``BaseGroupChatManager._name``                the selector's agent name
:func:`team_manager_name`          ``BaseGroupChat._group_chat_manager_name``    the MagenticOne orchestrator's name
:func:`message_thread_of`          ``BaseGroupChatManager._message_thread``      what the orchestrator has read
:func:`client_create_args`         ``<OpenAI-style client>._create_args``        model name and temperature
:func:`handoffs_of`                ``AssistantAgent._handoffs``                  playback: a handoff edit's tool
:func:`workbenches_of`             ``AssistantAgent._workbench``                 playback: workbench twins
:func:`handoff_tools_of`           ``AssistantAgent._handoff_tools``             playback: handoff tool twins
:func:`code_executor_of`           ``CodeExecutorAgent._code_executor``          playback: the sandboxed executor
:func:`tools_of`                   ``StaticWorkbench._tools``                    playback: AgentTool / TeamTool
:func:`runner_of`                  ``TaskRunnerTool._task_runner``               playback: the agent behind a tool
:func:`inner_members`              ``SocietyOfMindAgent._team``,                 playback: what runs in a turn
                                   ``MessageFilterAgent._wrapped_agent``
:func:`halt_runtime`               ``BaseGroupChat._embedded_runtime`` /         playback: stopping a cancelled
                                   ``_runtime``, ``SingleThreadedAgentRuntime``  replay's team
                                   ``._message_queue`` / ``._background_tasks``
                                   / ``._run_context._run_task``
=================================  ============================================  ===================================

The canonical requests (:func:`llm_request`, :func:`tool_request`) are what the Recording hashes (ARCHITECTURE
"Recording"); the playback side of issue E must build its requests with the same two functions.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from causaltrace.instrumentation._json_text import SCAN, WHITESPACE

__all__ = [
    "client_create_args",
    "client_settings",
    "code_executor_of",
    "extract_code",
    "handoff_targets",
    "handoff_tools_of",
    "handoffs_of",
    "inner_members",
    "llm_request",
    "manager_name",
    "message_thread_of",
    "model_client_of",
    "name_of",
    "parse_arguments",
    "participants_of",
    "runner_of",
    "selectable_speakers",
    "team_manager_name",
    "text_of",
    "tool_request",
    "tools_of",
    "workbenches_of",
]

_CODE_BLOCK = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)


# ------------------------------------------------------------------------------------ private attributes (one each)


def participants_of(team: Any) -> list[Any]:
    """The participants (agents or teams) of a group-chat team (``BaseGroupChat._participants``)."""
    value = getattr(team, "_participants", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def handoff_targets(agent: Any) -> list[str]:
    """The agents an AssistantAgent may hand off to (``AssistantAgent._handoffs``: name → Handoff)."""
    handoffs = getattr(agent, "_handoffs", None)
    if not isinstance(handoffs, dict):
        return []
    return [str(getattr(h, "target", "")) for h in handoffs.values() if getattr(h, "target", None)]


def selectable_speakers(manager: Any) -> list[str]:
    """The participant names a group-chat manager chooses among (``BaseGroupChatManager._participant_names``)."""
    names = getattr(manager, "_participant_names", None)
    return [str(n) for n in names] if isinstance(names, (list, tuple)) else []


def model_client_of(obj: Any) -> Any:
    """The model client an agent or a team (SelectorGroupChat) holds (``._model_client``), or None."""
    return getattr(obj, "_model_client", None)


def manager_name(manager: Any) -> str:
    """The name a group-chat manager publishes under (``BaseGroupChatManager._name``), e.g.
    ``SelectorGroupChatManager``."""
    name = getattr(manager, "_name", None)
    return name if isinstance(name, str) and name else type(manager).__name__


def team_manager_name(team: Any) -> str:
    """The name a team's group-chat manager publishes under (``BaseGroupChat._group_chat_manager_name``), e.g.
    ``MagenticOneOrchestrator``."""
    name = getattr(team, "_group_chat_manager_name", None)
    return name if isinstance(name, str) and name else type(team).__name__ + "Manager"


def handoffs_of(agent: Any) -> dict[str, Any]:
    """An AssistantAgent's handoffs by tool name (``AssistantAgent._handoffs``: name → ``HandoffBase``)."""
    value = getattr(agent, "_handoffs", None)
    return dict(value) if isinstance(value, Mapping) else {}


def workbenches_of(agent: Any) -> list[Any]:
    """An AssistantAgent's workbenches (``AssistantAgent._workbench``, a list)."""
    value = getattr(agent, "_workbench", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def handoff_tools_of(agent: Any) -> list[Any]:
    """The handoff tools built for an AssistantAgent (``AssistantAgent._handoff_tools``, fresh per agent)."""
    value = getattr(agent, "_handoff_tools", None)
    return list(value) if isinstance(value, list) else []


def code_executor_of(agent: Any) -> Any:
    """A CodeExecutorAgent's executor (``CodeExecutorAgent._code_executor``), or None."""
    return getattr(agent, "_code_executor", None)


def tools_of(workbench: Any) -> list[Any]:
    """The tools of a static workbench (``StaticWorkbench._tools``: to reach AgentTool / TeamTool runners)."""
    value = getattr(workbench, "_tools", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def runner_of(tool: Any) -> Any:
    """The agent or team behind an AgentTool / TeamTool (``TaskRunnerTool._task_runner``), else None."""
    return getattr(tool, "_task_runner", None)


def inner_members(agent: Any) -> list[Any]:
    """What runs inside an agent's turn: a SocietyOfMindAgent's team (``_team``), a MessageFilterAgent's wrapped
    agent (``_wrapped_agent``)."""
    return [v for v in (getattr(agent, "_team", None), getattr(agent, "_wrapped_agent", None)) if v is not None]


def halt_runtime(team: Any) -> list[Any]:
    """Stop a team's OWN runtime mid-run: its message queue is shut down at once (queued messages dropped, so
    ``run_stream``'s wait for an idle runtime can end) and its unfinished tasks — the message loop
    (``_run_context._run_task``) and the handlers in flight (``_background_tasks``) — are returned for the caller to
    cancel. [] (and nothing touched) for a runtime the factory passed in (``_embedded_runtime`` false: it is not the
    team's to stop) and for anything AutoGen no longer has."""
    if getattr(team, "_embedded_runtime", False) is not True:
        return []
    runtime = getattr(team, "_runtime", None)
    shutdown = getattr(getattr(runtime, "_message_queue", None), "shutdown", None)
    if callable(shutdown):
        try:
            shutdown(immediate=True)
        except Exception:  # an AutoGen whose queue changed: the tasks below are still cancelled
            pass
    background = getattr(runtime, "_background_tasks", None)
    tasks = list(background) if isinstance(background, (set, list)) else []
    loop_task = getattr(getattr(runtime, "_run_context", None), "_run_task", None)
    if loop_task is not None:
        tasks.append(loop_task)
    return [t for t in tasks if callable(getattr(t, "done", None)) and not t.done()]


def message_thread_of(manager: Any) -> list[Any]:
    """The messages a group-chat manager holds in its thread (``BaseGroupChatManager._message_thread``)."""
    value = getattr(manager, "_message_thread", None)
    return list(value) if isinstance(value, list) else []


def client_create_args(client: Any) -> Mapping[str, Any]:
    """The default create arguments of an OpenAI-style client (``._create_args``: model, temperature…)."""
    value = getattr(client, "_create_args", None)
    return value if type(value) is dict or isinstance(value, Mapping) else {}  # a dict: no ABC check (a call)


# --------------------------------------------------------------------------------------------------- settings


def _is_plain_scalar(value: Any) -> bool:
    """A JSON scalar needing no conversion (floats excluded: NaN is not JSON)."""
    return value is None or type(value) in (str, int, bool)


def client_settings(client: Any) -> dict[str, Any]:
    """The client settings stored with each recorded LLM call: model, temperature (when known), model_info.

    The model name comes from the client's create arguments (OpenAI-style clients), else a public ``model``
    attribute (the scripted clients of :mod:`causaltrace.testing.autogen`), else the client's class name.
    """
    create_args = client_create_args(client)
    model = create_args.get("model") or getattr(client, "model", None)
    settings: dict[str, Any] = {"model": str(model) if model else type(client).__name__}
    temperature = create_args.get("temperature", getattr(client, "temperature", None))
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        settings["temperature"] = temperature
    try:
        info = client.model_info
        info = dict(info)
        # model_info is a TypedDict of plain values: copied as is, or made JSON-safe when it holds anything else
        plain = all(_is_plain_scalar(v) for v in info.values())
        settings["model_info"] = info if plain else json.loads(json.dumps(info, default=str))
    except Exception:  # a client without model_info: record what we have
        pass
    return settings


# --------------------------------------------------------------------------------------------- canonical requests


_SCHEMAS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _tool_schema(tool: Any) -> Any:
    """A tool's schema (cached per tool object: AutoGen's ``FunctionTool.schema`` rebuilds a pydantic JSON schema on
    every access, which was the largest single cost of recording a model call)."""
    if type(tool) is dict:
        return tool
    try:
        cached = _SCHEMAS.get(tool)  # before the Mapping check: a Tool is no Mapping (an ABC check costs a call)
    except TypeError:  # not weakly referenceable
        cached = None
    if cached is not None:
        return dict(cached)
    if isinstance(tool, Mapping):
        return tool
    schema = getattr(tool, "schema", None)
    if schema is None:
        return tool
    value = dict(schema)
    try:
        _SCHEMAS[tool] = value
    except TypeError:
        pass
    return dict(value)


def _json_output(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    schema = getattr(value, "model_json_schema", None)
    if callable(schema):
        return {"name": getattr(value, "__name__", type(value).__name__), "schema": schema()}
    return repr(value)


def llm_request(
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] = (),
    tool_choice: Any = "auto",
    json_output: Any = None,
    extra_create_args: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request of one ``ChatCompletionClient.create`` / ``create_stream`` call, as the Recording hashes it.

    Messages stay pydantic objects here: :func:`causaltrace.recording.canonicalize_request` dumps them (``model_dump``),
    drops ``created_at`` and aliases tool-call ids; tools become their SCHEMAS, never Tool objects.
    """
    return create_request(messages, {"tools": tools, "tool_choice": tool_choice, "json_output": json_output,
                                     "extra_create_args": extra_create_args})


def create_request(messages: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`llm_request` of a ``create`` / ``create_stream`` call from its keyword arguments — the one reading the
    recording (its canonical request) and the playback (the request it looks the recorded answer up by) share, so
    the two can never hash a call differently. (It builds the request itself: one call less per model call.)"""
    tool_choice = kwargs.get("tool_choice", "auto")
    choice = tool_choice if isinstance(tool_choice, str) or tool_choice is None else getattr(tool_choice, "name", "?")
    schemas = []
    for tool in kwargs.get("tools") or ():  # a loop, not a comprehension: no frame; a dict is its own schema
        schemas.append(tool if type(tool) is dict else _tool_schema(tool))
    json_output = kwargs.get("json_output")
    return {
        "messages": list(messages),
        "tools": schemas,
        "tool_choice": choice,
        "json_output": None if json_output is None else _json_output(json_output),  # the usual None: no call
        "extra_create_args": dict(kwargs.get("extra_create_args") or {}),
    }


def tool_request(name: str, arguments: Any) -> dict[str, Any]:
    """The request of one tool call: its name and parsed arguments (the call id is not part of it)."""
    return {"name": name, "arguments": arguments}


# ------------------------------------------------------------------------------------------------------- text


def parse_arguments(raw: Any) -> dict[str, Any]:
    """A FunctionCall's ``arguments`` (a JSON string) as a JSON object: ``{"raw": text}`` when it is not JSON,
    ``{"value": v}`` when it is JSON but not an object."""
    if type(raw) is not str and isinstance(raw, Mapping):  # the usual JSON text: no ABC check (a call)
        return dict(raw)
    if type(raw) is str and not raw.startswith("\ufeff"):  # json.loads' work inline (.._json_text; every tool call)
        try:
            value, end = SCAN(raw, WHITESPACE(raw, 0).end())
        except (StopIteration, ValueError):
            return {"raw": raw}
        if WHITESPACE(raw, end).end() != len(raw):
            return {"raw": raw}
    else:
        try:
            value = json.loads(raw)
        except (TypeError, ValueError):
            return {"raw": str(raw)}
    return value if isinstance(value, dict) else {"value": value}


def name_of(obj: Any, default: str) -> str:
    """The ``name`` of an agent or team (a non-empty str), else ``default``."""
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else default


def text_of(message: Any) -> str:
    """The human-readable text of an AutoGen message or event (``to_text()``, else ``content``)."""
    to_text = getattr(message, "to_text", None)
    if callable(to_text):
        try:
            return str(to_text())
        except Exception:
            pass
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else str(content)


def extract_code(text: str) -> dict[str, str] | None:
    """``{code, language}`` of the Markdown code blocks in ``text`` (joined), or None when there is none."""
    if not text or "`" not in text:  # one character is found 4x faster than the pattern (a 50 MB message: 4 ms)
        return None
    blocks = _CODE_BLOCK.findall(text)
    if not blocks:
        return None
    return {"code": "\n\n".join(code for _, code in blocks), "language": blocks[0][0] or ""}
