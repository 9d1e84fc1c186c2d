"""Agent turns: each ``on_messages_stream`` call (every agent class, user subclasses included) is an ``agent_turn``
with exactly the messages delivered to it (``selected_by`` / ``handoff_from`` the step that chose it); an exception
out of the turn is an ``error`` step and ERROR on the turn. What the turn yields is handled by :mod:`._messages`.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from autogen_agentchat.agents import UserProxyAgent

from causaltrace.instrumentation._emitter import internal_error
from causaltrace.instrumentation.autogen._messages import observe
from causaltrace.instrumentation.autogen._model_calls import patch_client_class
from causaltrace.instrumentation.autogen._oi import turn_attributes
from causaltrace.instrumentation.autogen._patches import CHECKED, SWITCH, patch_defining
from causaltrace.instrumentation.autogen._state import (
    LEVEL,
    NO_SCOPE,
    TURN,
    Level,
    Turn,
    add_agent_error,
    extend_unique,
    state_of,
    step_id_of,
)
from causaltrace.instrumentation.autogen._streams import StreamHooks, scoped_stream
from causaltrace.instrumentation.runs import CURRENT_RUN
from causaltrace.instrumentation.scope import Scope
from causaltrace.schema import StepError

__all__ = ["begin_turn", "end_turn", "patch_agent_class", "turn_scope", "wrap_turn_stream"]


#: Agent class → whether it is a UserProxyAgent (an ``isinstance`` against AutoGen's agent classes goes through
#: typing's Protocol instance check, a Python call, on every turn).
_USER_PROXY: dict[type, bool] = {}


def _is_user_proxy(cls: type) -> bool:
    found = _USER_PROXY.get(cls)
    if found is None:
        found = issubclass(cls, UserProxyAgent)
        if len(_USER_PROXY) < 256:
            _USER_PROXY[cls] = found
    return found


def begin_turn(agent: Any, messages: Any) -> tuple[Turn | None, bool]:
    """Open an ``agent_turn`` for ``agent`` with the ``messages`` delivered to it; ``(turn, owner)``, where ``owner``
    is False when this call joins the turn already in flight (``on_messages`` → ``on_messages_stream``)."""
    try:  # never_raise's work in the body: no wrapper frame per call
        ctx = CURRENT_RUN.get()
        if ctx is None:
            return None, False
        current = TURN.get()
        if current is not None and current.agent is agent and current.ctx is ctx:
            return current, False  # on_messages → on_messages_stream of the same agent: one turn
        level = LEVEL.get()
        if level is None or level.ctx is not ctx:
            level = Level(ctx, state_of(ctx), (), False, None, None)
        state = level.state
        if state.closed:
            return None, False
        name = getattr(agent, "name", None)  # name_of, inline (every turn)
        if not isinstance(name, str) or not name:
            name = type(agent).__name__
        if current is not None and current.ctx is ctx and current.level is level:
            prefix, parent = current.path, step_id_of(current.handle)  # an agent called directly inside another's turn
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
        received: list[Any] = []  # the messages and their steps apart too: no comprehension frames
        sids: list[str | None] = []
        for msg in list(messages or ()):
            mid = getattr(msg, "id", None)
            sid = state.msg_steps.get(mid) if mid is not None else None
            if sid is None and level.task_step_id is not None and getattr(msg, "source", None) == "user":
                sid = level.task_step_id
                if mid is not None:
                    state.msg_steps[mid] = sid
            delivered.append((msg, sid))
            received.append(msg)
            sids.append(sid)
        memo = state.memo(key)
        extend_unique(memo.saw, sids)
        handle = ctx.start_step(
            "agent_turn",
            agent=name,
            parent=parent,
            depends_on=deps,
            content=f"{name} turn",
            metadata={"agent_key": key, "agent_type": type(agent).__name__, "delivered": len(delivered)},
        )
        if handle is not None:
            if len(state.open) > 256:  # state.track, inline (every turn)
                state.open = [h for h in state.open if not h.ended]
            state.open.append(handle)
            handle.set_span_attributes(turn_attributes(agent, name, received,
                                                       content=ctx.tracing.config.oi_content))
        client = getattr(agent, "_model_client", None)  # model_client_of, inline (every turn)
        if client is not None and not ((type(client), "create") in CHECKED and (type(client), "create_stream") in CHECKED):
            patch_client_class(type(client))  # (its check, inline: done once per client class)
        turn = Turn(ctx=ctx, state=state, level=level, agent=agent, name=name, key=key, path=path, handle=handle,
                    memo=memo, delivered=delivered, user_input=_is_user_proxy(type(agent)))
        # ``on_messages`` returns without closing its ``on_messages_stream``: the run ends such a turn itself
        ctx.at_end(lambda: end_turn(turn, None, closed=True))
        return turn, True
    except Exception:
        internal_error("begin_turn")
        return (None, False)


def turn_scope(turn: Turn | None) -> AbstractContextManager[Any]:
    """The turn (and its step) current while the agent runs."""
    if turn is None:
        return NO_SCOPE
    if turn.handle is None:
        return Scope(((TURN, turn),))
    return turn.handle.activate((TURN, turn))


def end_turn(turn: Turn, error: BaseException | None, *, closed: bool) -> None:
    """End a turn: its tool calls still in flight get no result; an exception is an ``error`` step and ERROR on
    the turn; a turn closed before it responded is cancelled."""
    try:  # never_raise's work in the body: no wrapper frame per call
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
            add_agent_error(turn.ctx, turn.state, turn.name, turn.key, turn.handle, error)
            turn.handle.end(error=error)
    except Exception:
        internal_error("end_turn")


def wrap_turn_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``<agent class>.on_messages_stream``: one agent turn, with exactly the messages delivered to it."""
    if not SWITCH.on or CURRENT_RUN.get() is None:
        return wrapped(*args, **kwargs)
    return scoped_stream(partial(_turn_hooks, instance, args, kwargs), wrapped, args, kwargs)  # no lambda frame


def _turn_hooks(agent: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StreamHooks | None:
    """The wrapped ``on_messages_stream``: each ``__anext__`` inside the turn's scope, each item observed."""
    messages = kwargs["messages"] if "messages" in kwargs else (args[0] if args else ())  # call_arg, inline
    turn, owner = begin_turn(agent, messages)
    if turn is None:
        return None

    def end(result: Any, error: BaseException | None, closed: bool) -> None:
        if owner:
            end_turn(turn, error, closed=closed)

    scope = Scope(((TURN, turn),)) if turn.handle is None else turn.handle.activate((TURN, turn))  # turn_scope's
    return StreamHooks(scope=scope, end=end, observe=partial(observe, turn))


def patch_agent_class(cls: type) -> None:
    """Wrap the ``on_messages_stream`` an agent class uses."""
    patch_defining(cls, "on_messages_stream", wrap_turn_stream)
