"""The AutoGen AgentChat wrappers: framework events → Steps with explicit dependencies, and recorded calls.

Imported only by :func:`causaltrace.instrumentation.autogen.instrument_autogen` (it imports AutoGen at module level).
ARCHITECTURE "Steps" (kinds and the dependency table), "Shared contracts" (run marking, outcome, final answer) and
"Recording" are what this module implements; FACTS.md "AutoGen AgentChat 0.7.5" names the hook points.

How state flows (everything is keyed by contextvars, so two teams running concurrently in one event loop are two
separate runs):

* ``_LEVEL`` — one team run or agent run (its run, agent-key path, parent step, task step, pending
  ``selected_by`` / ``handoff_from`` edges). Set by the ``run_stream`` / ``run`` wrappers around every step of the
  framework's generator, so AutoGen's embedded runtime — started inside the first step — copies it into every task
  it spawns.
* ``_TURN`` — one agent turn (``on_messages_stream``): its ``agent_turn`` step, the messages delivered to it, its
  last llm_response and its tool calls in flight. Model calls, tool executions and code executions read it.
* ``_MANAGER`` — a SelectorGroupChat manager choosing the next speaker: its model calls are llm_responses of the
  manager, whose agent name is the manager's own name (``SelectorGroupChatManager`` by default) and whose
  agent_key is ``<team path>/<manager name>`` (ARCHITECTURE "Recording": ``team/<manager name>``).
* ``_ORCH`` — a MagenticOne orchestrator inside one of its phases (``_orchestrate_step``: the progress ledger and
  the next speaker; ``_reenter_outer_loop``: the task ledger; ``_update_task_ledger``: re-planning;
  ``_prepare_final_answer``): the messages it adds to its own thread become its steps. Its model calls are found by
  client identity (the team's ``model_client``, outside any agent turn), so the facts and plan calls of its
  ``handle_start`` are the orchestrator's too.
* per run (``_RunState``): AutoGen message id → the step that emitted it (``saw`` edges), and per agent_key the
  previous llm_response (``continues``) and what arrived since it (``saw``, ``observed``, ``memory_read``).

Wrappers of async generators set the contextvars only around each ``__anext__`` of the wrapped generator and
reset them before yielding, so nothing leaks into the consumer and no token is reset in a foreign context.
Every piece of our own logic is guarded by :func:`never_raise`; the user's and AutoGen's exceptions pass through
unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
import threading
import weakref
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import wrapt
from autogen_agentchat.agents import UserProxyAgent
from autogen_agentchat.base import Response, TaskResult
from autogen_agentchat.messages import (
    BaseChatMessage,
    CodeExecutionEvent,
    HandoffMessage,
    MemoryQueryEvent,
    ModelClientStreamingChunkEvent,
    TextMessage,
    ThoughtEvent,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)
from autogen_core.models import ChatCompletionClient, CreateResult
from autogen_core.utils import extract_json_from_str

try:
    from autogen_agentchat.teams import MagenticOneGroupChat
except ImportError:  # pragma: no cover - an AutoGen without MagenticOne: its teams are traced like any other
    MagenticOneGroupChat = None

from causaltrace.instrumentation import _runtime
from causaltrace.instrumentation._emitter import never_raise
from causaltrace.instrumentation._runtime import RunContext, StepHandle
from causaltrace.instrumentation.autogen._access import (
    client_settings,
    extract_code,
    handoff_targets,
    llm_request,
    manager_name,
    message_thread_of,
    model_client_of,
    parse_arguments,
    participants_of,
    selectable_speakers,
    team_manager_name,
    text_of,
    tool_request,
)
from causaltrace.schema import StepError, canonicalize_request

__all__ = [
    "classify_stop",
    "disable",
    "enable",
    "ensure_patched_for",
    "patch_attribute",
    "unpatch_all",
    "wrap_agent_run",
    "wrap_agent_run_stream",
    "wrap_create",
    "wrap_create_stream",
    "wrap_execute_code",
    "wrap_execute_tool_call",
    "wrap_orchestrate_step",
    "wrap_orchestrator_final_answer",
    "wrap_orchestrator_outer_loop",
    "wrap_orchestrator_replan",
    "wrap_select_speaker",
    "wrap_team_run_stream",
    "wrap_turn_stream",
    "wrap_update_message_thread",
]

logger = logging.getLogger("causaltrace")

_ENABLED = False
_LEVEL: contextvars.ContextVar[_Level | None] = contextvars.ContextVar("causaltrace_autogen_level", default=None)
_TURN: contextvars.ContextVar[_Turn | None] = contextvars.ContextVar("causaltrace_autogen_turn", default=None)
_MANAGER: contextvars.ContextVar[_Manager | None] = contextvars.ContextVar("causaltrace_autogen_mgr", default=None)
_IN_LLM: contextvars.ContextVar[bool] = contextvars.ContextVar("causaltrace_autogen_in_llm", default=False)
_ORCH: contextvars.ContextVar[_Phase | None] = contextvars.ContextVar("causaltrace_autogen_orch", default=None)


def enable() -> None:
    """Let the wrappers act (set by ``instrument_autogen``)."""
    global _ENABLED
    _ENABLED = True


def disable() -> None:
    """Make every wrapper a pass-through (set by ``uninstrument_autogen``)."""
    global _ENABLED
    _ENABLED = False


# ------------------------------------------------------------------------------------------------------ patching

_PATCH_LOCK = threading.RLock()
#: (owner class, attribute) → the original raw class attribute (function, staticmethod, classmethod).
_ORIGINALS: dict[tuple[type, str], Any] = {}
_CHECKED: set[tuple[type, str]] = set()


def patch_attribute(owner: type, attribute: str, wrapper: Any) -> bool:
    """Wrap ``owner.<attribute>`` (as defined in ``owner.__dict__``) with a wrapt ``FunctionWrapper``; once."""
    with _PATCH_LOCK:
        if (owner, attribute) in _ORIGINALS or attribute not in owner.__dict__:
            return False
        original = owner.__dict__[attribute]
        _ORIGINALS[(owner, attribute)] = original
        setattr(owner, attribute, wrapt.FunctionWrapper(original, wrapper))
        return True


def unpatch_all() -> int:
    """Restore every original patched by :func:`patch_attribute`; returns how many were restored."""
    with _PATCH_LOCK:
        restored = 0
        for (owner, attribute), original in reversed(list(_ORIGINALS.items())):
            setattr(owner, attribute, original)
            restored += 1
        _ORIGINALS.clear()
        _CHECKED.clear()
        return restored


def patched() -> dict[tuple[type, str], Any]:
    """A copy of the patch registry (tests)."""
    with _PATCH_LOCK:
        return dict(_ORIGINALS)


def _patch_defining(cls: type, attribute: str, wrapper: Any, *, skip: tuple[type, ...] = ()) -> None:
    """Patch ``attribute`` on the class of ``cls``'s MRO that defines it (a user subclass defined after
    ``instrument_autogen`` included)."""
    if (cls, attribute) in _CHECKED:
        return
    with _PATCH_LOCK:
        for klass in cls.__mro__:
            if attribute in klass.__dict__:
                if klass not in skip:
                    patch_attribute(klass, attribute, wrapper)
                break
        _CHECKED.add((cls, attribute))


def patch_client_class(cls: type) -> None:
    """Wrap ``create`` / ``create_stream`` of a ChatCompletionClient class (any client: OpenAI, replay, custom)."""
    _patch_defining(cls, "create", wrap_create, skip=(ChatCompletionClient,))
    _patch_defining(cls, "create_stream", wrap_create_stream, skip=(ChatCompletionClient,))


def patch_agent_class(cls: type) -> None:
    """Wrap the ``on_messages_stream`` an agent class uses."""
    _patch_defining(cls, "on_messages_stream", wrap_turn_stream)


@never_raise()
def ensure_patched_for(obj: Any, _depth: int = 0) -> None:
    """Make sure the agent classes and model-client classes a team or agent uses are wrapped."""
    if obj is None or _depth > 8:
        return
    members = participants_of(obj)
    if members:
        for member in members:
            ensure_patched_for(member, _depth + 1)
    elif hasattr(obj, "on_messages_stream"):
        patch_agent_class(type(obj))
    client = model_client_of(obj)
    if client is not None:
        patch_client_class(type(client))


# --------------------------------------------------------------------------------------------------------- state


class _Memo:
    """Per (run, agent_key): the previous llm_response and what reached the agent since it."""

    __slots__ = ("last_llm", "memory", "observed", "saw")

    def __init__(self) -> None:
        self.last_llm: str | None = None
        self.saw: list[str] = []
        self.observed: list[str] = []
        self.memory: list[str] = []


class _RunState:
    """What the adapter remembers about one run."""

    def __init__(self) -> None:
        self.msg_steps: dict[str, str] = {}
        self.memos: dict[str, _Memo] = {}
        #: tool_call step id → the step whose content a nested agent/team returned through that tool (answer_of).
        self.answers: dict[str, str] = {}
        #: the first exception an agent raised in this run: (agent name, exception), for the run's reason.
        self.agent_error: tuple[str, BaseException] | None = None
        #: long-lived steps started here (turns, model / tool / code calls), ended when the run ends before them.
        self.open: list[StepHandle] = []
        #: set when the top-level team/agent run ended: late events of still-running tasks add no steps.
        self.closed = False

    def track(self, handle: StepHandle | None) -> StepHandle | None:
        if handle is not None:
            if len(self.open) > 256:
                self.open = [h for h in self.open if not h.ended]
            self.open.append(handle)
        return handle

    def end_open(self) -> None:
        """End (as cancelled) every step still open: a Run is assembled from ended steps only."""
        for handle in reversed(self.open):
            if not handle.ended:
                handle.end(error=StepError(type="Cancelled", message="the run ended before this step finished"))
        self.open.clear()

    def memo(self, key: str) -> _Memo:
        memo = self.memos.get(key)
        if memo is None:
            memo = self.memos[key] = _Memo()
        return memo


_STATES: weakref.WeakKeyDictionary[RunContext, _RunState] = weakref.WeakKeyDictionary()
_SETTINGS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _settings_of(client: Any) -> dict[str, Any]:
    """The client's recorded settings, computed once per client object."""
    try:
        settings = _SETTINGS.get(client)
    except TypeError:  # not weak-referenceable
        return client_settings(client)
    if settings is None:
        settings = _SETTINGS[client] = client_settings(client)
    return settings


_STATES_LOCK = threading.Lock()


def _state(ctx: RunContext) -> _RunState:
    with _STATES_LOCK:
        state = _STATES.get(ctx)
        if state is None:
            state = _STATES[ctx] = _RunState()
        return state


@dataclass(eq=False)
class _Level:
    """One team run or agent run inside a causaltrace run."""

    ctx: RunContext
    state: _RunState
    path: tuple[str, ...]
    nested: bool
    parent_id: str | None
    task_step_id: str | None
    selected: dict[str, str] = field(default_factory=dict)
    handoffs: dict[str, str] = field(default_factory=dict)
    selector_seen: dict[str, int] = field(default_factory=dict)
    orchestrator: _Orchestrator | None = None


@dataclass(eq=False)
class _LevelRun:
    ctx: RunContext
    owned: bool
    level: _Level
    nested: bool
    team_turn: StepHandle | None
    invoking: StepHandle | None
    task_messages: list[Any]
    outer_turn: _Turn | None = None


@dataclass(eq=False)
class _PendingCall:
    call: Any
    handle: StepHandle | None
    ordinal: int | None
    arguments: dict[str, Any]
    done: bool = False


@dataclass(eq=False)
class _Turn:
    """One agent turn (``on_messages_stream`` call) in flight."""

    ctx: RunContext
    state: _RunState
    level: _Level
    agent: Any
    name: str
    key: str
    path: tuple[str, ...]
    handle: StepHandle | None
    memo: _Memo
    delivered: list[tuple[Any, str | None]]
    user_input: bool
    last_llm: str | None = None
    last_producer: str | None = None
    calls: list[_PendingCall] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    code_results: list[Any] = field(default_factory=list)
    responded: bool = False


@dataclass(eq=False)
class _Manager:
    name: str
    key: str
    parent_id: str | None
    memo: _Memo
    last_llm: str | None = None


@dataclass(eq=False)
class _Orchestrator(_Manager):
    """A MagenticOneGroupChat's orchestrator (one per team run): its client, the participants it chooses among,
    the thread messages it has already read, and the text of its last model call (the progress ledger)."""

    client: Any = None
    participants: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    last_text: str = ""
    failed: BaseException | None = None


@dataclass(eq=False)
class _Phase:
    """One orchestrator method in flight (``kind``: ``step``, ``outer``, ``replan`` or ``final``)."""

    orch: _Orchestrator
    level: _Level
    manager: Any
    kind: str
    attempts: list[str] = field(default_factory=list)
    said: int = 0


def _sid(handle: StepHandle | None) -> str | None:
    return handle.step_id if handle is not None else None


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else default


def _extend_unique(target: list[str], items: list[str | None]) -> None:
    for item in items:
        if item is not None and item not in target:
            target.append(item)


_NO_SCOPE = nullcontext()


def _activated(handle: StepHandle | None) -> AbstractContextManager[Any]:
    return _NO_SCOPE if handle is None else handle.activate()


# ------------------------------------------------------------------------------------------ stop classification

#: Stop messages of AutoGen's limit conditions (autogen_agentchat 0.7.5), as they appear in TaskResult.stop_reason.
_LIMIT_STOPS = (
    re.compile(r"Maximum number of messages \d+ reached, current message count: \d+"),
    re.compile(r"Maximum number of turns \d+ reached\.?"),
    re.compile(
        r"Token usage limit reached, total token count: \d+, prompt token count: \d+, completion token count: \d+\.?"
    ),
    re.compile(r"Timeout of [\d.]+ seconds reached"),
    re.compile(r"Max rounds reached\.?"),  # MagenticOneGroupChat's max_turns
)
_TEXT_MENTION = re.compile(r"Text '(.+?)' mentioned")


def classify_stop(stop_reason: str | None) -> tuple[str, str | None]:
    """``(stop, keyword)`` for a TaskResult's ``stop_reason``.

    ``stop`` is ``limit`` when only limit conditions fired (MaxMessageTermination, ``max_turns``,
    TokenUsageTermination, TimeoutTermination), else ``normal`` (decision: when a limit and a normal condition fire
    together, e.g. ``TextMentionTermination | MaxMessageTermination`` on the same message, the team reached its
    goal, so the stop is normal). ``keyword`` is the TextMentionTermination text, to strip from the final answer.
    """
    text = stop_reason or ""
    mention = _TEXT_MENTION.search(text)
    rest = text
    for pattern in _LIMIT_STOPS:
        rest = pattern.sub("", rest)
    limit_hit = rest != text
    stop = "limit" if limit_hit and not rest.replace(",", " ").strip() else "normal"
    return stop, mention.group(1) if mention else None


def _strip_keyword(text: str, keyword: str | None) -> str:
    if keyword:
        text = text.replace(keyword, "")
    return text.strip()


# ------------------------------------------------------------------------------------------ team and agent runs


def _name_of(obj: Any, default: str) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else default


def _task_messages(kwargs: dict[str, Any]) -> list[Any]:
    """The task as chat messages; a str task becomes the same ``TextMessage(source="user")`` AutoGen would build,
    created here so its id is known before the framework starts."""
    task = kwargs.get("task")
    if isinstance(task, str):
        task = TextMessage(content=task, source="user")
        kwargs["task"] = task
    if isinstance(task, BaseChatMessage):
        return [task]
    if isinstance(task, (list, tuple)):
        return [m for m in task if isinstance(m, BaseChatMessage)]
    return []


@never_raise(default=None)
def _begin_level(obj: Any, kwargs: dict[str, Any], *, team: bool) -> _LevelRun | None:
    outer = _runtime.current_run()
    outer_level = _LEVEL.get()
    outer_turn = _TURN.get()
    if outer_level is not None and outer_level.ctx is not outer:
        outer_level = None
    if outer_turn is not None and outer_turn.ctx is not outer:
        outer_turn = None
    nested = outer is not None and (outer_level is not None or outer_turn is not None)
    messages = _task_messages(kwargs)
    task_text = "\n".join(text_of(m) for m in messages) or None
    name = _name_of(obj, "team" if team else type(obj).__name__)
    ctx, owned = _runtime.attach_run(
        framework="autogen", task=None if nested else task_text, name=None if nested else name, source=obj
    )
    state = _state(ctx)
    if outer_turn is not None:
        base = outer_turn.path
    elif outer_level is not None:
        base = outer_level.path
    else:
        base = ()
    path = base + (name,) if team else base
    invoking = _runtime.current_step() if nested else None
    if invoking is not None and invoking.ctx is not ctx:
        invoking = None
    team_turn = None
    if nested and team:
        deps: list[tuple[str, str]] = []
        if outer_level is not None and outer_turn is None:  # a team participating in a team
            selected = outer_level.selected.pop(name, None)
            handoff = outer_level.handoffs.pop(name, None)
            deps += [(selected, "selected_by")] if selected else []
            deps += [(handoff, "handoff_from")] if handoff else []
        team_turn = state.track(
            ctx.start_step(
                "agent_turn",
                agent=name,
                parent=invoking,
                depends_on=deps,
                content=f"{name} turn",
                metadata={"agent_key": "/".join(path), "team": True},
            )
        )
    task_step_id = None
    new = [m for m in messages if m.id not in state.msg_steps]
    if new:
        deps = [(invoking.step_id, "delegated_by")] if invoking is not None and invoking.kind == "tool_call" else []
        agent = invoking.agent if (nested and invoking is not None) else "user"
        task_step = ctx.add_step(
            "task",
            agent=agent,
            parent=team_turn if team_turn is not None else invoking,
            depends_on=deps,
            content="\n".join(text_of(m) for m in new),
            outputs={"text": "\n".join(text_of(m) for m in new)},
            metadata={} if nested else {"user_input": True},
        )
        if task_step is not None:
            task_step_id = task_step.step_id
            for m in new:
                state.msg_steps[m.id] = task_step_id
    elif messages:
        task_step_id = state.msg_steps.get(messages[-1].id)
    parent_id = _sid(team_turn) if team_turn is not None else _sid(invoking)
    level = _Level(ctx, state, path, nested, parent_id, task_step_id)
    if team and MagenticOneGroupChat is not None and isinstance(obj, MagenticOneGroupChat):
        level.orchestrator = _new_orchestrator(obj, level)
    ensure_patched_for(obj)
    return _LevelRun(ctx, owned, level, nested, team_turn, invoking, messages, outer_turn)


def _level_scope(lr: _LevelRun) -> AbstractContextManager[Any]:
    """This team / agent run is current (and its run when owned, and its team turn when nested); no agent turn or
    speaker selection is."""
    values = ((_LEVEL, lr.level), (_TURN, None), (_MANAGER, None))
    if lr.owned:
        return _runtime.run_scope(lr.ctx, *values, step=lr.team_turn)
    if lr.team_turn is not None:
        return lr.team_turn.activate(*values)
    return _runtime.Scope(values)


async def _end_level(lr: _LevelRun, result: Any, error: BaseException | None, *, closed: bool) -> None:
    """Close a team/agent run: nested → end its turn and note its answer; top level → final answer, end report,
    and (when the adapter owns the run) the verifier and the stored Run."""
    try:
        _close_level(lr, result, error, closed=closed)
        if lr.owned:  # an owned run is never nested; it is finished even if closing it above failed
            await lr.ctx.finish()
    except Exception:
        logger.warning("causaltrace: closing an AutoGen run failed (the run continues)", exc_info=True)


@never_raise(default=None)
def _close_level(lr: _LevelRun, result: Any, error: BaseException | None, *, closed: bool) -> bool | None:
    ctx, state = lr.ctx, lr.level.state
    answer_msg = None
    stop, keyword = "normal", None
    if isinstance(result, TaskResult):
        for msg in reversed(result.messages):
            if isinstance(msg, BaseChatMessage) and msg.source != "user":
                answer_msg = msg
                break
        stop, keyword = classify_stop(result.stop_reason)
    answer = _strip_keyword(text_of(answer_msg), keyword) if answer_msg is not None else None
    answer_sid = state.msg_steps.get(answer_msg.id) if answer_msg is not None else None
    cancelled = isinstance(error, asyncio.CancelledError) or (closed and result is None)
    if lr.nested:
        if lr.team_turn is not None:
            if error is not None:
                lr.team_turn.end(error=error)
            elif cancelled:
                lr.team_turn.end(error=StepError(type="Cancelled", message="the team run was closed before it ended"))
            else:
                lr.team_turn.end(status="ok", outputs={"text": answer or "", "stop_reason": _stop_reason(result)})
        if lr.invoking is not None and lr.invoking.kind == "tool_call":
            if answer_sid is not None:
                state.answers[lr.invoking.step_id] = answer_sid
        elif lr.outer_turn is not None and isinstance(result, TaskResult):
            # a team run inside an agent's turn (SocietyOfMindAgent): the agent reads its whole transcript
            sids = [state.msg_steps.get(m.id) for m in result.messages if isinstance(m, BaseChatMessage)]
            _extend_unique(lr.outer_turn.memo.saw, sids)
        return None
    state.end_open()
    if error is None and not cancelled and stop == "normal" and answer_sid is not None:
        ctx.add_step(
            "final_answer",
            agent=answer_msg.source,
            parent=lr.level.parent_id,
            depends_on=[(answer_sid, "answer_of")],
            content=answer or "",
            outputs={"text": answer or ""},
        )
    if cancelled and not isinstance(error, Exception):
        ctx.report_end(final_answer=answer, stop="limit", reason="the run was cancelled before it ended")
    elif error is not None:
        ctx.report_end(final_answer=answer, error=error, reason=_error_reason(state, error))
    else:
        ctx.report_end(final_answer=answer, stop=stop, reason=_stop_reason(result))
    if lr.owned:
        state.closed = True
    return True


def _error_reason(state: _RunState, error: BaseException) -> str:
    """A one-line reason: the agent that raised and its exception (AutoGen re-raises it as a RuntimeError whose
    text carries a whole traceback)."""
    if state.agent_error is not None:
        agent, exc = state.agent_error
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"agent {agent!r} raised {type(exc).__name__}: {first}"
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"


def _stop_reason(result: Any) -> str:
    reason = getattr(result, "stop_reason", None)
    return reason if isinstance(reason, str) else ""


def wrap_team_run_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseGroupChat.run_stream``: a team run (``BaseGroupChat.run`` goes through it)."""
    if not _ENABLED:
        return wrapped(*args, **kwargs)
    return _level_stream(wrapped, instance, args, kwargs, team=True)


def wrap_agent_run_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatAgent.run_stream``: a single agent's run (top level, or inside an AgentTool)."""
    if not _ENABLED:
        return wrapped(*args, **kwargs)
    return _level_stream(wrapped, instance, args, kwargs, team=False)


async def _level_stream(wrapped: Any, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, team: bool) -> Any:
    kwargs = dict(kwargs)
    lr = _begin_level(obj, kwargs, team=team)
    agen = wrapped(*args, **kwargs)
    if lr is None:
        async for item in agen:
            yield item
        return
    result = None
    error: BaseException | None = None
    exhausted = False
    try:
        while True:
            with _level_scope(lr):
                try:
                    item = await agen.__anext__()
                except StopAsyncIteration:
                    exhausted = True
                    break
                except BaseException as exc:
                    error = exc
                    raise
            if isinstance(item, TaskResult):
                result = item
            yield item
    finally:
        try:
            if error is None and not exhausted:
                with _level_scope(lr):
                    await agen.aclose()
        finally:
            await _end_level(lr, result, error, closed=error is None and not exhausted)


def wrap_agent_run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseChatAgent.run``: it calls ``on_messages`` directly, so the turn is opened here."""
    if not _ENABLED:
        return wrapped(*args, **kwargs)
    return _agent_run(wrapped, instance, args, kwargs)


async def _agent_run(wrapped: Any, agent: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    kwargs = dict(kwargs)
    lr = _begin_level(agent, kwargs, team=False)
    if lr is None:
        return await wrapped(*args, **kwargs)
    result = None
    error: BaseException | None = None
    try:
        with _level_scope(lr):
            turn, owner = _begin_turn(agent, lr.task_messages)
            try:
                with _turn_scope(turn):
                    result = await wrapped(*args, **kwargs)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if turn is not None and owner:
                    for msg in getattr(result, "messages", None) or ():
                        _observe(turn, msg)
                    _end_turn(turn, error, closed=False)
        return result
    finally:
        await _end_level(lr, result, error, closed=False)


# ---------------------------------------------------------------------------------------------------- agent turns


@never_raise(default=(None, False))
def _begin_turn(agent: Any, messages: Any) -> tuple[_Turn | None, bool]:
    ctx = _runtime.current_run()
    if ctx is None:
        return None, False
    current = _TURN.get()
    if current is not None and current.agent is agent and current.ctx is ctx:
        return current, False  # on_messages → on_messages_stream of the same agent: one turn
    level = _LEVEL.get()
    if level is None or level.ctx is not ctx:
        level = _Level(ctx, _state(ctx), (), False, None, None)
    state = level.state
    if state.closed:
        return None, False
    name = _name_of(agent, type(agent).__name__)
    if current is not None and current.ctx is ctx and current.level is level:
        prefix, parent = current.path, _sid(current.handle)  # an agent called directly inside another's turn
    else:
        prefix, parent = level.path, level.parent_id
    path = prefix + (name,)
    key = "/".join(path)
    deps: list[tuple[str, str]] = []
    selected = level.selected.pop(name, None)
    if selected:
        deps.append((selected, "selected_by"))
    handoff = level.handoffs.pop(name, None)
    if handoff:
        deps.append((handoff, "handoff_from"))
    delivered: list[tuple[Any, str | None]] = []
    for msg in list(messages or ()):
        mid = getattr(msg, "id", None)
        sid = state.msg_steps.get(mid) if mid is not None else None
        if sid is None and level.task_step_id is not None and getattr(msg, "source", None) == "user":
            sid = level.task_step_id
            if mid is not None:
                state.msg_steps[mid] = sid
        delivered.append((msg, sid))
    memo = state.memo(key)
    _extend_unique(memo.saw, [sid for _, sid in delivered])
    handle = state.track(
        ctx.start_step(
            "agent_turn",
            agent=name,
            parent=parent,
            depends_on=deps,
            content=f"{name} turn",
            metadata={"agent_key": key, "agent_type": type(agent).__name__, "delivered": len(delivered)},
        )
    )
    client = model_client_of(agent)
    if client is not None:
        patch_client_class(type(client))
    turn = _Turn(
        ctx=ctx,
        state=state,
        level=level,
        agent=agent,
        name=name,
        key=key,
        path=path,
        handle=handle,
        memo=memo,
        delivered=delivered,
        user_input=isinstance(agent, UserProxyAgent),
    )
    return turn, True


def _turn_scope(turn: _Turn | None) -> AbstractContextManager[Any]:
    if turn is None:
        return _NO_SCOPE
    if turn.handle is None:
        return _runtime.Scope(((_TURN, turn),))
    return turn.handle.activate((_TURN, turn))


@never_raise()
def _end_turn(turn: _Turn, error: BaseException | None, *, closed: bool) -> None:
    for pending in turn.calls:
        if not pending.done and pending.handle is not None:
            pending.handle.end(error=StepError(type="NoResult", message="the turn ended before this call returned"))
            pending.done = True
    if turn.handle is None:
        return
    if error is None and (not closed or turn.responded):
        turn.handle.end(status="ok")
    elif error is None or isinstance(error, asyncio.CancelledError):
        turn.handle.end(error=StepError(type="Cancelled", message="the turn was cancelled before it finished"))
    else:
        if turn.state.agent_error is None:
            turn.state.agent_error = (turn.name, error)
        turn.ctx.add_step(
            "error",
            agent=turn.name,
            parent=turn.handle,
            content=f"{type(error).__name__}: {error}",
            error=error,
            metadata={"agent_key": turn.key},
        )
        turn.handle.end(error=error)


def wrap_turn_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``<agent class>.on_messages_stream``: one agent turn, with exactly the messages delivered to it."""
    if not _ENABLED or _runtime.current_run() is None:
        return wrapped(*args, **kwargs)
    return _turn_stream(wrapped, instance, args, kwargs)


async def _turn_stream(wrapped: Any, agent: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    turn, owner = _begin_turn(agent, _arg(args, kwargs, 0, "messages", ()))
    agen = wrapped(*args, **kwargs)
    if turn is None:
        async for item in agen:
            yield item
        return
    error: BaseException | None = None
    exhausted = False
    try:
        while True:
            with _turn_scope(turn):
                try:
                    item = await agen.__anext__()
                except StopAsyncIteration:
                    exhausted = True
                    break
                except BaseException as exc:
                    error = exc
                    raise
            _observe(turn, item)
            yield item
    finally:
        try:
            if error is None and not exhausted:
                with _turn_scope(turn):
                    await agen.aclose()
        finally:
            if owner:
                _end_turn(turn, error, closed=error is None and not exhausted)


# ------------------------------------------------------------------------------------------ what a turn yields


@never_raise()
def _observe(turn: _Turn, item: Any) -> None:
    """Turn one item an agent yielded (event, message, Response) into steps; each item once."""
    if turn.state.closed:
        return
    if isinstance(item, Response):
        for inner in item.inner_messages or ():
            _observe_one(turn, inner, response=False)
        _observe_one(turn, item.chat_message, response=True)
        turn.responded = True
        return
    _observe_one(turn, item, response=False)


def _observe_one(turn: _Turn, item: Any, *, response: bool) -> None:
    mid = getattr(item, "id", None)
    if mid is not None:
        if mid in turn.seen:
            return
        turn.seen.add(mid)
    if isinstance(item, ModelClientStreamingChunkEvent):
        return
    if not response and getattr(item, "source", turn.name) != turn.name:
        return  # an inner team's event relayed through this agent: its own turn recorded it
    if isinstance(item, ToolCallRequestEvent):
        _tool_calls(turn, list(item.content))
    elif isinstance(item, ToolCallExecutionEvent):
        for result in item.content:
            _tool_result_fallback(turn, result)
    elif isinstance(item, MemoryQueryEvent):
        _memory(turn, item)
    elif isinstance(item, ThoughtEvent):
        deps = [(turn.last_llm, "produced_by")] if turn.last_llm else []
        turn.ctx.add_step(
            "reasoning",
            agent=turn.name,
            parent=turn.handle,
            depends_on=deps,
            content=str(item.content),
            outputs={"text": str(item.content)},
        )
    elif isinstance(item, CodeExecutionEvent):
        if not any(r is item.result for r in turn.code_results):
            _code_fallback(turn, item.result)
    elif isinstance(item, BaseChatMessage):
        if mid is not None and mid in turn.state.msg_steps:
            return
        if response or item.source == turn.name:
            _message(turn, item)
        if response:
            turn.responded = True


def _message(turn: _Turn, msg: Any) -> None:
    text = text_of(msg)
    handoff = isinstance(msg, HandoffMessage)
    deps = [] if turn.user_input or not turn.last_producer else [(turn.last_producer, "produced_by")]
    outputs: dict[str, Any] = {"text": text}
    if handoff:
        outputs["target"] = msg.target
    code = extract_code(text)
    metadata: dict[str, Any] = {"message_type": type(msg).__name__}
    if handoff:
        metadata["candidates"] = handoff_targets(turn.agent)  # the targets a correction may choose among
    if turn.user_input:
        metadata["user_input"] = True
    step = turn.ctx.add_step(
        "handoff" if handoff else "message",
        agent=turn.name,
        parent=turn.handle,
        depends_on=deps,
        content=text,
        inputs=code or {},
        outputs=outputs,
        metadata=metadata,
    )
    if step is None:
        return
    if getattr(msg, "id", None) is not None:
        turn.state.msg_steps[msg.id] = step.step_id
    if handoff:
        turn.level.handoffs[msg.target] = step.step_id


def _memory(turn: _Turn, event: Any) -> None:
    results: list[Any] = []
    for item in event.content or ():
        content = getattr(item, "content", item)
        results.append(content if isinstance(content, (str, dict)) else str(content))
    query = text_of(turn.delivered[-1][0]) if turn.delivered else ""
    step = turn.ctx.add_step(
        "memory_access",
        agent=turn.name,
        parent=turn.handle,
        content="\n".join(r if isinstance(r, str) else json.dumps(r, default=str) for r in results),
        inputs={"query": query},
        outputs={"results": json.loads(json.dumps(results, default=str))},
    )
    if step is not None:
        turn.memo.memory.append(step.step_id)


# ------------------------------------------------------------------------------------------------------ tools


def _tool_calls(turn: _Turn, calls: list[Any]) -> None:
    """A ToolCallRequestEvent: one tool_call step per FunctionCall, ordinals reserved in the model's order."""
    ordinals = turn.ctx.reserve_ordinals(turn.key, "tool", len(calls)) or [None] * len(calls)
    deps = [(turn.last_llm, "produced_by")] if turn.last_llm else []
    for call, ordinal in zip(calls, ordinals, strict=False):
        name = getattr(call, "name", "?")
        raw = getattr(call, "arguments", "")
        arguments = parse_arguments(raw)
        handle = turn.state.track(
            turn.ctx.start_step(
                "tool_call",
                agent=turn.name,
                parent=turn.handle,
                depends_on=deps,
                content=f"{name}({raw})",
                tool_name=name,
                arguments=arguments,
                call_id=getattr(call, "id", None),
            )
        )
        turn.calls.append(_PendingCall(call, handle, ordinal, arguments))


def _claim(turn: _Turn, call: Any, call_id: str | None = None, name: str | None = None) -> _PendingCall | None:
    for pending in turn.calls:
        if not pending.done and pending.call is call:
            return pending
    call_id = call_id if call_id is not None else getattr(call, "id", None)
    name = name if name is not None else getattr(call, "name", None)
    for pending in turn.calls:  # ids may repeat within a run: only calls of this turn still in flight match
        if (
            not pending.done
            and getattr(pending.call, "id", None) == call_id
            and getattr(pending.call, "name", name) == name
        ):
            return pending
    return None


@never_raise(default=None)
def _begin_tool(turn: _Turn, call: Any) -> tuple[_PendingCall, Any] | None:
    if turn.state.closed:
        return None
    pending = _claim(turn, call)
    if pending is None:
        return None
    record = turn.ctx.begin_call(
        turn.key,
        "tool",
        tool_request(getattr(call, "name", "?"), pending.arguments),
        ordinal=pending.ordinal,
        step_id=_sid(pending.handle),
    )
    return pending, record


@never_raise()
def _finish_tool(turn: _Turn, pending: _PendingCall, record: Any, result: Any) -> None:
    if pending.done or turn.state.closed:
        return
    pending.done = True
    if record is not None:
        record.finish(result)
    if pending.handle is not None:
        pending.handle.end(status="ok")
    content = getattr(result, "content", result)
    content = content if isinstance(content, str) else str(content)
    is_error = bool(getattr(result, "is_error", False))
    deps: list[tuple[str, str]] = []
    if pending.handle is not None:
        deps.append((pending.handle.step_id, "tool_result_of"))
        answer = turn.state.answers.pop(pending.handle.step_id, None)
        if answer:
            deps.append((answer, "answer_of"))
    step = turn.ctx.add_step(
        "tool_response",
        agent=turn.name,
        parent=turn.handle,
        depends_on=deps,
        content=content,
        tool_name=getattr(pending.call, "name", None),
        call_id=getattr(pending.call, "id", None),
        outputs={"result": content, "is_error": is_error},
        status="error" if is_error else "ok",
        error=StepError(type="ToolError", message=content) if is_error else None,
    )
    if step is not None:
        turn.memo.observed.append(step.step_id)


@never_raise()
def _fail_tool(turn: _Turn, pending: _PendingCall, record: Any, exc: BaseException) -> None:
    pending.done = True
    if record is not None:
        record.finish(error=exc)
    if pending.handle is not None:
        pending.handle.end(error=exc)


def _tool_result_fallback(turn: _Turn, result: Any) -> None:
    """A result in a ToolCallExecutionEvent whose execution no hook saw (a custom agent's tools)."""
    pending = _claim(turn, None, getattr(result, "call_id", None), getattr(result, "name", None))
    if pending is None:
        return
    record = turn.ctx.begin_call(
        turn.key,
        "tool",
        tool_request(getattr(pending.call, "name", "?"), pending.arguments),
        ordinal=pending.ordinal,
        step_id=_sid(pending.handle),
    )
    _finish_tool(turn, pending, record, result)


def wrap_execute_tool_call(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``AssistantAgent._execute_tool_call`` (private; FACTS.md): one tool execution, handoff tools included."""
    turn = _TURN.get()
    if not _ENABLED or turn is None:
        return wrapped(*args, **kwargs)
    return _execute_tool(wrapped, turn, args, kwargs)


async def _execute_tool(wrapped: Any, turn: _Turn, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    begun = _begin_tool(turn, _arg(args, kwargs, 0, "tool_call"))
    if begun is None:
        return await wrapped(*args, **kwargs)
    pending, record = begun
    try:
        with _activated(pending.handle):  # a nested AgentTool / TeamTool run has this tool_call as parent
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail_tool(turn, pending, record, exc)
        raise
    _finish_tool(turn, pending, record, result[1] if isinstance(result, tuple) and len(result) == 2 else result)
    return result


# ------------------------------------------------------------------------------------------------- code execution


@never_raise(default=None)
def _begin_code(turn: _Turn, blocks: Any) -> StepHandle | None:
    if turn.state.closed:
        return None
    blocks = list(blocks or ())
    code = "\n\n".join(getattr(b, "code", str(b)) for b in blocks)
    language = getattr(blocks[0], "language", "") if blocks else ""
    carrier = None
    snippets = [getattr(b, "code", "").strip() for b in blocks if getattr(b, "code", "").strip()]
    for msg, sid in reversed(turn.delivered):
        if sid is not None and snippets and all(s in text_of(msg) for s in snippets):
            carrier = sid
            break
    if carrier is None:
        carrier = turn.last_llm
    return turn.state.track(
        turn.ctx.start_step(
            "code_execution",
            agent=turn.name,
            parent=turn.handle,
            depends_on=[(carrier, "executes")] if carrier else [],
            content=code,
            inputs={"code": code, "language": language},
        )
    )


@never_raise()
def _end_code(turn: _Turn, handle: StepHandle | None, result: Any, error: BaseException | None = None) -> None:
    if handle is None:
        return
    if error is not None:
        handle.end(error=error, outputs={"stdout": "", "stderr": "", "exit_code": None, "error": str(error)})
        return
    turn.code_results.append(result)
    exit_code = getattr(result, "exit_code", None)
    output = getattr(result, "output", "")
    output = output if isinstance(output, str) else str(output)
    failed = exit_code not in (0, None)
    error_text = f"exit code {exit_code}" if failed else None
    handle.end(
        status="error" if failed else "ok",
        error=StepError(type="CodeExecutionError", message=f"{error_text}: {output[:500]}") if failed else None,
        outputs={"stdout": output, "stderr": "", "exit_code": exit_code, "error": error_text},
    )
    turn.last_producer = handle.step_id
    turn.memo.observed.append(handle.step_id)


def _code_fallback(turn: _Turn, result: Any) -> None:
    """A CodeExecutionEvent whose execution no ``execute_code_block`` hook saw."""
    handle = _begin_code(turn, ())
    _end_code(turn, handle, result)


def wrap_execute_code(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``CodeExecutorAgent.execute_code_block``: a code_execution step (code, output, exit code)."""
    turn = _TURN.get()
    if not _ENABLED or turn is None or turn.agent is not instance:
        return wrapped(*args, **kwargs)
    return _execute_code(wrapped, turn, args, kwargs)


async def _execute_code(wrapped: Any, turn: _Turn, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    handle = _begin_code(turn, _arg(args, kwargs, 0, "code_blocks", ()))
    try:
        with _activated(handle):
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_code(turn, handle, None, exc)
        raise
    _end_code(turn, handle, result)
    return result


# ---------------------------------------------------------------------------------------------- speaker selection


def wrap_select_speaker(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``SelectorGroupChatManager.select_speaker``: its model calls are llm_responses of the manager, followed by
    a ``speaker_selection`` step; the selected agent's next agent_turn is ``selected_by`` it."""
    level = _LEVEL.get()
    if not _ENABLED or level is None or _runtime.current_run() is not level.ctx:
        return wrapped(*args, **kwargs)
    return _select_speaker(wrapped, instance, level, args, kwargs)


@never_raise(default=None)
def _begin_select(manager: Any, level: _Level, thread: Any) -> _Manager | None:
    if level.state.closed:
        return None
    name = manager_name(manager)
    key = "/".join(level.path + (name,))
    memo = level.state.memo(key)
    thread = list(thread or ())
    start = level.selector_seen.get(key, 0)
    fresh: list[str | None] = []
    for msg in thread[start:]:
        if isinstance(msg, BaseChatMessage):
            sid = level.state.msg_steps.get(msg.id)
            if sid is None and level.task_step_id is not None and msg.source == "user":
                sid = level.task_step_id
            fresh.append(sid)
    _extend_unique(memo.saw, fresh)
    level.selector_seen[key] = len(thread)
    return _Manager(name=name, key=key, parent_id=level.parent_id, memo=memo)


@never_raise()
def _end_select(
    level: _Level, mgr: _Manager, result: Any, error: BaseException | None, *, candidates: list[str] | None = None
) -> None:
    if error is not None:
        if not isinstance(error, asyncio.CancelledError):
            level.ctx.add_step(
                "error", agent=mgr.name, parent=mgr.parent_id, content=f"{type(error).__name__}: {error}", error=error
            )
        return
    selected = [result] if isinstance(result, str) else [str(s) for s in (result or ())]
    deps = [(mgr.last_llm, "produced_by")] if mgr.last_llm else []
    step = level.ctx.add_step(
        "speaker_selection",
        agent=mgr.name,
        parent=mgr.parent_id,
        depends_on=deps,
        content=", ".join(selected),
        outputs={"selected": selected[0] if len(selected) == 1 else selected},
        metadata={"agent_key": mgr.key, "by_model": mgr.last_llm is not None, "candidates": candidates or []},
    )
    if step is not None:
        for name in selected:
            level.selected[name] = step.step_id


async def _select_speaker(
    wrapped: Any, manager: Any, level: _Level, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    mgr = _begin_select(manager, level, _arg(args, kwargs, 0, "thread", ()))
    if mgr is None:
        return await wrapped(*args, **kwargs)
    t_mgr = _MANAGER.set(mgr)
    t_turn = _TURN.set(None)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_select(level, mgr, None, exc)
        raise
    finally:
        _TURN.reset(t_turn)
        _MANAGER.reset(t_mgr)
    _end_select(level, mgr, result, None, candidates=selectable_speakers(manager))
    return result


# ------------------------------------------------------------------------------------- MagenticOne orchestration
#
# MagenticOneOrchestrator (autogen_agentchat 0.7.5) chooses speakers in its own private methods, not in
# ``select_speaker`` (which it leaves unused): ``handle_start`` asks for facts and a plan, ``_reenter_outer_loop``
# broadcasts the task ledger, each ``_orchestrate_step`` asks for the JSON progress ledger, then broadcasts the
# instruction to the next speaker (or ``_update_task_ledger`` re-plans, or ``_prepare_final_answer`` answers). Each of
# these messages enters the orchestrator's own thread through ``update_message_thread`` BEFORE it is published, so
# that hook makes its steps while the phase it belongs to is known: the task ledger → ``planning``; an instruction →
# ``speaker_selection`` (the ledger's ``next_speaker``) and ``message``; the final answer → ``message``. Each is
# ``produced_by`` the orchestrator's last llm_response; the selected agent's next agent_turn is ``selected_by`` the
# speaker_selection, and the agents' llm_responses ``saw`` the messages.


@never_raise(default=None)
def _new_orchestrator(team: Any, level: _Level) -> _Orchestrator | None:
    client = model_client_of(team)
    if client is None:
        return None
    name = team_manager_name(team)
    key = "/".join(level.path + (name,))
    memo = level.state.memo(key)
    _extend_unique(memo.saw, [level.task_step_id])  # the facts call reads the task
    members = [_name_of(p, type(p).__name__) for p in participants_of(team)]
    return _Orchestrator(name=name, key=key, parent_id=level.parent_id, memo=memo, client=client, participants=members)


def _orchestrator_of(ctx: RunContext, client: Any) -> _Orchestrator | None:
    """The MagenticOne orchestrator whose client makes this model call outside any agent turn, or None."""
    level = _LEVEL.get()
    if level is None or level.ctx is not ctx or level.orchestrator is None:
        return None
    return level.orchestrator if client is level.orchestrator.client else None


def _retried_attempt(orch: _Orchestrator) -> str | None:
    """The previous progress-ledger call of the same ``_orchestrate_step`` (its JSON was rejected), or None."""
    phase = _ORCH.get()
    if phase is None or phase.orch is not orch or phase.kind != "step" or not phase.attempts:
        return None
    return phase.attempts[-1]


def _note_attempt(orch: _Orchestrator, step_id: str) -> None:
    phase = _ORCH.get()
    if phase is not None and phase.orch is orch and phase.kind == "step":
        phase.attempts.append(step_id)


@never_raise(default=None)
def _begin_phase(manager: Any, kind: str) -> _Phase | None:
    level = _LEVEL.get()
    if level is None or level.orchestrator is None or _runtime.current_run() is not level.ctx or level.state.closed:
        return None
    orch = level.orchestrator
    if model_client_of(manager) is not orch.client:
        return None
    if kind == "outer":  # the participants are reset (GroupChatReset): their context does not carry over
        for name in orch.participants:
            memo = level.state.memos.get("/".join(level.path + (name,)))
            if memo is not None:
                memo.last_llm, memo.saw, memo.observed, memo.memory = None, [], [], []
    else:  # what reached the orchestrator's thread from the agents since its last call
        fresh: list[str | None] = []
        for msg in message_thread_of(manager):
            if isinstance(msg, BaseChatMessage) and msg.id not in orch.seen:
                orch.seen.add(msg.id)
                if msg.source != orch.name:
                    fresh.append(level.state.msg_steps.get(msg.id))
        _extend_unique(orch.memo.saw, fresh)
    return _Phase(orch, level, manager, kind)


def _next_speaker(ledger: str, participants: list[str]) -> str | None:
    """The progress ledger's ``next_speaker`` answer, read as the orchestrator reads it."""
    if len(participants) == 1:
        return participants[0]
    try:
        found = extract_json_from_str(ledger)
    except Exception:
        return None
    entry = found[0].get("next_speaker") if len(found) == 1 and isinstance(found[0], dict) else None
    answer = entry.get("answer") if isinstance(entry, dict) else None
    return answer if isinstance(answer, str) else None


@never_raise()
def _orchestrator_said(phase: _Phase, messages: Any) -> None:
    orch, level = phase.orch, phase.level
    if level.state.closed:
        return
    for msg in list(messages or ()):
        if not isinstance(msg, BaseChatMessage) or msg.source != orch.name or msg.id in level.state.msg_steps:
            continue
        orch.seen.add(msg.id)
        text = text_of(msg)
        deps = [(orch.last_llm, "produced_by")] if orch.last_llm else []
        metadata: dict[str, Any] = {"message_type": type(msg).__name__, "agent_key": orch.key}
        if phase.kind == "step":
            selected = _next_speaker(orch.last_text, orch.participants)
            if selected is not None:
                selection = level.ctx.add_step(
                    "speaker_selection",
                    agent=orch.name,
                    parent=orch.parent_id,
                    depends_on=deps,
                    content=selected,
                    outputs={"selected": selected, "instruction": text},
                    metadata={
                        "agent_key": orch.key,
                        "by_model": orch.last_llm is not None,
                        "candidates": list(orch.participants),
                        "ledger_field": "next_speaker",
                    },
                )
                if selection is not None:
                    level.selected[selected] = selection.step_id
            metadata["ledger_field"] = "instruction_or_question"
        phase.said += 1
        step = level.ctx.add_step(
            "planning" if phase.kind == "outer" and phase.said == 1 else "message",  # the task ledger comes first
            agent=orch.name,
            parent=orch.parent_id,
            depends_on=deps,
            content=text,
            inputs=extract_code(text) or {},
            outputs={"text": text},
            metadata=metadata,
        )
        if step is not None:
            level.state.msg_steps[msg.id] = step.step_id


@never_raise()
def _orchestrator_failed(phase: _Phase, exc: BaseException) -> None:
    """An exception out of an orchestrator phase (a ledger it could not parse, an invalid speaker): one ``error``
    step of the orchestrator (once, however many nested phases it passes through)."""
    orch, level = phase.orch, phase.level
    if isinstance(exc, asyncio.CancelledError) or orch.failed is exc or level.state.closed:
        return
    orch.failed = exc
    if level.state.agent_error is None:
        level.state.agent_error = (orch.name, exc)
    level.ctx.add_step(
        "error",
        agent=orch.name,
        parent=orch.parent_id,
        content=f"{type(exc).__name__}: {exc}",
        error=exc,
        metadata={"agent_key": orch.key},
    )


async def _in_phase(wrapped: Any, phase: _Phase, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    token = _ORCH.set(phase)
    try:
        return await wrapped(*args, **kwargs)
    except BaseException as exc:
        _orchestrator_failed(phase, exc)
        raise
    finally:
        _ORCH.reset(token)


def _phase_wrapper(kind: str, doc: str) -> Any:
    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        phase = _begin_phase(instance, kind) if _ENABLED else None
        if phase is None:
            return wrapped(*args, **kwargs)
        return _in_phase(wrapped, phase, args, kwargs)

    wrapper.__doc__ = doc
    return wrapper


wrap_orchestrate_step = _phase_wrapper(
    "step",
    "``MagenticOneOrchestrator._orchestrate_step`` (private): the progress-ledger call(s), then a speaker_selection "
    "and the instruction message (or re-planning, or the final answer).",
)
wrap_orchestrator_outer_loop = _phase_wrapper(
    "outer", "``MagenticOneOrchestrator._reenter_outer_loop`` (private): the task ledger, a ``planning`` step."
)
wrap_orchestrator_replan = _phase_wrapper(
    "replan", "``MagenticOneOrchestrator._update_task_ledger`` (private): the facts-update and plan-update calls."
)
wrap_orchestrator_final_answer = _phase_wrapper(
    "final", "``MagenticOneOrchestrator._prepare_final_answer`` (private): the final-answer call and its message."
)


def wrap_update_message_thread(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``BaseGroupChatManager.update_message_thread``: inside a MagenticOne orchestrator phase, the orchestrator's
    own messages (added to its thread before they are published) become its steps; a pass-through otherwise."""
    phase = _ORCH.get()
    if _ENABLED and phase is not None and phase.manager is instance:
        _orchestrator_said(phase, _arg(args, kwargs, 0, "messages", ()))
    return wrapped(*args, **kwargs)


# --------------------------------------------------------------------------------------------------- model calls


@dataclass(eq=False)
class _LlmCall:
    owner: Any
    memo: _Memo
    handle: StepHandle | None
    record: Any


@never_raise(default=None)
def _begin_llm(ctx: RunContext, client: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _LlmCall | None:
    state = _state(ctx)
    if state.closed:
        return None
    turn = _TURN.get()
    mgr = _MANAGER.get()
    owner: Any
    if turn is not None and turn.ctx is ctx:
        owner, agent, key, parent, memo = turn, turn.name, turn.key, turn.handle, turn.memo
    elif mgr is not None:
        owner, agent, key, parent, memo = mgr, mgr.name, mgr.key, mgr.parent_id, mgr.memo
    elif (orch := _orchestrator_of(ctx, client)) is not None:
        owner, agent, key, parent, memo = orch, orch.name, orch.key, orch.parent_id, orch.memo
    else:  # a model call outside any agent turn (a custom orchestrator): the client is the agent
        level = _LEVEL.get()
        agent = type(client).__name__
        key = "/".join((level.path if level is not None and level.ctx is ctx else ()) + (agent,))
        owner, parent, memo = None, (level.parent_id if level is not None and level.ctx is ctx else None), None
        memo = state.memo(key)
    deps: list[tuple[str, str]] = []
    retried = _retried_attempt(owner) if isinstance(owner, _Orchestrator) else None
    if memo.last_llm and memo.last_llm != retried:
        deps.append((memo.last_llm, "continues"))
    if retried:
        deps.append((retried, "retry_of"))
    deps += [(s, "saw") for s in memo.saw]
    deps += [(s, "observed") for s in memo.observed]
    deps += [(s, "memory_read") for s in memo.memory]
    memo.saw, memo.observed, memo.memory = [], [], []
    messages = _arg(args, kwargs, 0, "messages", ())
    request = llm_request(
        messages,
        tools=kwargs.get("tools") or (),
        tool_choice=kwargs.get("tool_choice", "auto"),
        json_output=kwargs.get("json_output"),
        extra_create_args=kwargs.get("extra_create_args"),
    )
    settings = _settings_of(client)
    record = ctx.begin_call(key, "llm", request, settings=settings)
    if record is not None:
        inputs: dict[str, Any] = {
            "recording": {
                "agent_key": key,
                "kind": "llm",
                "ordinal": record.ordinal,
                "request_hash": record.request_hash,
            }
        }
    else:
        inputs = {"messages": canonicalize_request(list(messages))}
    handle = state.track(
        ctx.start_step(
            "llm_response",
            agent=agent,
            parent=parent,
            depends_on=deps,
            model=settings.get("model"),
            inputs=inputs,
            metadata={} if record is not None else {"agent_key": key},
        )
    )
    if record is not None and handle is not None:
        record.step_id = handle.step_id
    if isinstance(owner, _Orchestrator) and handle is not None:
        _note_attempt(owner, handle.step_id)
    return _LlmCall(owner, memo, handle, record)


@never_raise()
def _end_llm(llm: _LlmCall, result: Any) -> None:
    handle = llm.handle
    content = getattr(result, "content", None)
    thought = getattr(result, "thought", None)
    calls: list[dict[str, Any]] = []
    if isinstance(content, str):
        text = content
    else:
        text = thought or ""
        for i, call in enumerate(content or ()):
            calls.append(
                {
                    "name": getattr(call, "name", "?"),
                    "arguments": parse_arguments(getattr(call, "arguments", "")),
                    "call_alias": f"call#{i}",
                    "call_id": getattr(call, "id", None),
                }
            )
    outputs: dict[str, Any] = {"text": text, "tool_calls": calls}
    if thought and isinstance(content, str):
        outputs["thought"] = thought
    finish = getattr(result, "finish_reason", None)
    if finish is not None:
        outputs["finish_reason"] = str(finish)
    usage = getattr(result, "usage", None)
    tokens = (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
    display = text or "; ".join(f"{c['name']}({json.dumps(c['arguments'], sort_keys=True)})" for c in calls)
    if handle is not None:
        handle.end(status="ok", content=display, outputs=outputs, usage=tokens)
    if llm.record is not None:
        llm.record.finish(result)
    step_id = _sid(handle)
    if step_id is not None:
        llm.memo.last_llm = step_id
        if llm.owner is not None:
            llm.owner.last_llm = step_id
            if isinstance(llm.owner, _Turn):
                llm.owner.last_producer = step_id
            elif isinstance(llm.owner, _Orchestrator):
                llm.owner.last_text = text


@never_raise()
def _fail_llm(llm: _LlmCall, exc: BaseException) -> None:
    if llm.handle is not None:
        llm.handle.end(error=exc)
    if llm.record is not None:
        llm.record.finish(error=exc)


def wrap_create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``<client class>.create``: one llm_response step and one recorded call per model call."""
    if not _ENABLED or _IN_LLM.get():
        return wrapped(*args, **kwargs)
    ctx = _runtime.current_run()
    if ctx is None:
        return wrapped(*args, **kwargs)
    return _create(wrapped, instance, ctx, args, kwargs)


async def _create(wrapped: Any, client: Any, ctx: RunContext, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    llm = _begin_llm(ctx, client, args, kwargs)  # hashes the request now, before the framework mutates it
    if llm is None:
        return await wrapped(*args, **kwargs)
    token = _IN_LLM.set(True)
    try:
        with _activated(llm.handle):
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail_llm(llm, exc)
        raise
    finally:
        _IN_LLM.reset(token)
    _end_llm(llm, result)
    return result


def wrap_create_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``<client class>.create_stream``: like :func:`wrap_create`; the step ends with the final CreateResult."""
    if not _ENABLED or _IN_LLM.get():
        return wrapped(*args, **kwargs)
    ctx = _runtime.current_run()
    if ctx is None:
        return wrapped(*args, **kwargs)
    return _create_stream(wrapped, instance, ctx, args, kwargs)


async def _create_stream(
    wrapped: Any, client: Any, ctx: RunContext, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    llm = _begin_llm(ctx, client, args, kwargs)
    agen = wrapped(*args, **kwargs)
    if llm is None:
        async for item in agen:
            yield item
        return
    result = None
    error: BaseException | None = None
    exhausted = False
    try:
        while True:
            token = _IN_LLM.set(True)
            try:
                with _activated(llm.handle):
                    item = await agen.__anext__()
            except StopAsyncIteration:
                exhausted = True
                break
            except BaseException as exc:
                error = exc
                raise
            finally:
                _IN_LLM.reset(token)
            if isinstance(item, CreateResult):
                result = item
            yield item
    finally:
        try:
            if error is None and not exhausted:
                await agen.aclose()
        finally:
            if error is not None:
                _fail_llm(llm, error)
            elif result is not None:
                _end_llm(llm, result)
            else:
                _fail_llm(llm, asyncio.CancelledError("the stream was closed before its final result"))
