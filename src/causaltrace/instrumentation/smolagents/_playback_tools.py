"""The tools of a smolagents playback: copies of the agents' tools whose ``forward`` serves the recording through
the injected playback core (shared tool objects are never patched), the parent-side functions that running code
calls for tools, managed agents and ``final_answer``, and the managed agent whose answer an intervention replaces.

This module imports smolagents at its top; ``_playback.py`` imports it only when a playback is assembled.
"""

from __future__ import annotations

import contextvars
import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smolagents.agents import populate_template

from causaltrace.instrumentation._playback_common import exception_of
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._playback_keys import caller_state, key_and_pattern
from causaltrace.protocols import PlaybackCore
from causaltrace.recording import canonicalize_request, request_hash
from causaltrace.schema import StepError

__all__ = ["CodeCall", "answering_class", "code_callable", "tool_twin"]


@dataclass
class CodeCall:
    """A call the running code makes, numbered by the parent-side function before it reaches the tool."""

    obj: Any
    key: str
    ordinal: int
    arguments: dict[str, Any]


#: The code call in progress in this context (read by the tool copy / managed agent the call reaches).
_CODE_CALL: contextvars.ContextVar[CodeCall | None] = contextvars.ContextVar("causaltrace_smol_code_call",
                                                                            default=None)


def tool_twin(tool: Any, core: PlaybackCore, agent: Any, key: str) -> Any:
    """A copy of ``tool`` whose ``forward`` serves the recording (the shared tool object is left alone)."""
    twin = copy.copy(tool)
    original = twin.forward  # bound to the twin (or the instance's own forward)
    name = str(getattr(tool, "name", type(tool).__name__))

    def forward(*args: Any, **kwargs: Any) -> Any:
        core.check()
        live_key, pattern = key_and_pattern(agent, key)
        code_call = _CODE_CALL.get()
        if code_call is not None and code_call.obj is twin:
            ordinal, arguments = code_call.ordinal, code_call.arguments
        else:
            ordinal, arguments = core.claim(live_key, name, acc.call_arguments(twin, args, kwargs))
        canonical = canonicalize_request({"name": name, "arguments": arguments}, call_id_pattern=pattern)
        decision = core.decide(live_key, "tool", ordinal, request_hash(canonical), canonical, f"tool {name}")
        action = decision.action
        if action == "intervene":
            assert core.edit is not None
            if core.edit.slot == "result":
                return copy.deepcopy(core.edit.value)
            action = "live"  # an "arguments" edit was applied by the code call
        if action in ("serve", "rerun"):  # smolagents never runs a served tool again
            rec = decision.call
            assert rec is not None
            core.count("serve")
            if rec.error is not None and rec.response is None:
                raise exception_of(_tool_error(rec.error, name))
            return rec.decoded_response()
        core.count("live")
        return original(*args, **kwargs)

    twin.forward = forward
    return twin


_TOOL_ERRORS = tuple(
    re.compile(
        r"^Error executing tool '(?P<name>[^']*)' with arguments " + arguments
        + r": (?P<type>[A-Za-z_][\w.]*): (?P<message>.*)\nPlease try again or use another tool$",
        re.DOTALL,
    )
    for arguments in (r"\{.*?\}", r".*?")  # a dict's repr first, then anything
)


def _tool_error(error: StepError, name: str) -> StepError:
    """The tool's own exception inside a recorded ToolCallingAgent error: the recording keeps the error
    ``execute_tool_call`` raised (``AgentToolExecutionError`` wrapping ``{type}: {message}``), while the playback
    raises inside the tool, where smolagents wraps it again into the very same text."""
    if error.type != "AgentToolExecutionError":
        return error
    match = next((m for m in (p.match(error.message) for p in _TOOL_ERRORS) if m is not None), None)
    if match is None or match.group("name") != name:
        return error
    return StepError(type=match.group("type").rsplit(".", 1)[-1], message=match.group("message"))


def answering_class(cls: type, core: PlaybackCore, parent_key: str) -> type:
    """A subclass for the managed agent whose answer the intervention replaces: the intervened call answers the
    replacement without running the agent (its report is the replacement); other calls run it as usual."""

    def __call__(self: Any, task: str, **kwargs: Any) -> Any:
        code_call = _CODE_CALL.get()
        if code_call is None or code_call.obj is not self:
            arguments = {"task": acc.jsonable(task), **{str(k): acc.jsonable(v) for k, v in kwargs.items()}}
            ordinal, arguments = core.claim(parent_key, acc.agent_name(self), arguments)
            code_call = CodeCall(self, parent_key, ordinal, arguments)
        token = _CODE_CALL.set(code_call)
        try:
            return super(subclass, self).__call__(task, **kwargs)
        finally:
            _CODE_CALL.reset(token)

    def run(self: Any, task: str, *args: Any, **kwargs: Any) -> Any:
        code_call = _CODE_CALL.get()
        edit = core.edit
        if (code_call is not None and code_call.obj is self and edit is not None
                and edit.key == (code_call.key, "tool", code_call.ordinal)):
            state = caller_state()  # the caller's run: the managed agent's own run has not started
            pattern = state.pattern() if state is not None and state.key == code_call.key else None
            canonical = canonicalize_request({"name": acc.agent_name(self), "arguments": code_call.arguments},
                                             call_id_pattern=pattern)
            decision = core.decide(code_call.key, "tool", code_call.ordinal, request_hash(canonical), canonical,
                                   f"managed agent {acc.agent_name(self)}")
            if decision.action == "intervene":
                return _report_answer(self, edit.value)
        return super(subclass, self).run(task, *args, **kwargs)

    subclass = type(cls.__name__, (cls,), {"__call__": __call__, "run": run, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})
    return subclass


def _report_answer(agent: Any, replacement: Any) -> Any:
    """The final answer that ``MultiStepAgent.__call__`` turns into ``replacement`` (its report template's prefix
    and suffix are stripped when the replacement carries them)."""
    text = replacement if isinstance(replacement, str) else json.dumps(replacement)
    try:
        marker = "\x00causaltrace\x00"
        rendered = populate_template(agent.prompt_templates["managed_agent"]["report"],
                                     variables={"name": agent.name, "final_answer": marker})
        prefix, suffix = rendered.split(marker, 1)
    except Exception:
        return replacement
    if text.startswith(prefix) and text.endswith(suffix) and len(text) >= len(prefix) + len(suffix):
        return text[len(prefix): len(text) - len(suffix)]
    return replacement


# ------------------------------------------------------------------------------------------------ the code


def code_callable(core: PlaybackCore, agent: Any, key: str, name: str) -> Callable[..., Any]:
    """The parent-side function the running code calls for ``name`` (a tool, a managed agent, final_answer)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        core.check()
        tools = getattr(agent, "tools", {}) or {}
        managed = getattr(agent, "managed_agents", {}) or {}
        obj = tools.get(name) if name in tools else managed.get(name)
        if obj is None:
            raise NameError(f"{name!r} is not a tool or managed agent of {acc.agent_name(agent)}")
        is_managed = name not in tools
        live_key, pattern = key_and_pattern(agent, key)
        ordinal = core.next_ordinal(live_key, "tool")
        arguments = _code_arguments(obj, is_managed, args, kwargs)
        edit = core.edit
        if edit is not None and edit.slot == "arguments" and edit.key == (live_key, "tool", ordinal):
            canonical = canonicalize_request({"name": name, "arguments": arguments}, call_id_pattern=pattern)
            core.decide(live_key, "tool", ordinal, request_hash(canonical), canonical, f"code call {name}")
            args, kwargs = (), dict(edit.value)
            arguments = _code_arguments(obj, is_managed, args, kwargs)
        token = _CODE_CALL.set(CodeCall(obj, live_key, ordinal, arguments))
        try:
            return obj(*args, **kwargs)
        finally:
            _CODE_CALL.reset(token)

    call.__name__ = call.__qualname__ = name
    return call


def _code_arguments(obj: Any, is_managed: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    if is_managed:  # as the recording's managed-agent hook writes them
        task = args[0] if args else kwargs.get("task")
        out = {"task": acc.jsonable(task)}
        out.update({str(k): acc.jsonable(v) for k, v in kwargs.items() if k != "task"})
        return out
    return acc.call_arguments(obj, args, kwargs)
