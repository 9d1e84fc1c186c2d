"""Speaker selection of a SelectorGroupChat: ``SelectorGroupChatManager.select_speaker``'s model calls are
llm_responses of the manager (agent = the manager's name, agent_key ``<team path>/<manager name>``), followed by a
``speaker_selection`` step (``produced_by`` its last llm_response); the selected agent's next agent_turn is
``selected_by`` it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from autogen_agentchat.messages import BaseChatMessage

from causaltrace.instrumentation._emitter import never_raise
from causaltrace.instrumentation.autogen._access import manager_name, selectable_speakers
from causaltrace.instrumentation.autogen._patches import SWITCH
from causaltrace.instrumentation.autogen._state import LEVEL, MANAGER, TURN, Level, Manager, call_arg, extend_unique
from causaltrace.instrumentation.runs import CURRENT_RUN

__all__ = ["wrap_select_speaker"]


def wrap_select_speaker(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``SelectorGroupChatManager.select_speaker``: its model calls are llm_responses of the manager, followed by
    a ``speaker_selection`` step; the selected agent's next agent_turn is ``selected_by`` it."""
    level = LEVEL.get()
    if not SWITCH.on or level is None or CURRENT_RUN.get() is not level.ctx:
        return wrapped(*args, **kwargs)
    return _select_speaker(wrapped, instance, level, args, kwargs)


@never_raise(default=None)
def _begin_select(manager: Any, level: Level, thread: Any) -> Manager | None:
    """The manager as the owner of the model calls of one selection; what is new in the thread since its last
    selection is what its next llm_response ``saw``."""
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
    extend_unique(memo.saw, fresh)
    level.selector_seen[key] = len(thread)
    return Manager(name=name, key=key, parent_id=level.parent_id, memo=memo)


@never_raise()
def _end_select(
    level: Level, mgr: Manager, result: Any, error: BaseException | None, *, candidates: list[str] | None = None
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
    wrapped: Any, manager: Any, level: Level, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The wrapped ``select_speaker``: the manager is current (no agent turn is) while it chooses."""
    mgr = _begin_select(manager, level, call_arg(args, kwargs, 0, "thread", ()))
    if mgr is None:
        return await wrapped(*args, **kwargs)
    t_mgr = MANAGER.set(mgr)
    t_turn = TURN.set(None)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_select(level, mgr, None, exc)
        raise
    finally:
        TURN.reset(t_turn)
        MANAGER.reset(t_mgr)
    _end_select(level, mgr, result, None, candidates=selectable_speakers(manager))
    return result
