"""Where each call of an AutoGen playback sits: the members of a freshly built team (:func:`walk`) with their static
agent keys, the key the recording side gives the call in flight (:func:`live_key`), and the private AutoGen
attributes the playback reads and swaps (one accessor each; each degrades to a neutral value).

Imports no AutoGen at import time (``_playback.py`` imports this module when the facade registers the adapter).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from causaltrace.instrumentation.autogen._access import participants_of

__all__ = [
    "code_executor_of",
    "handoff_tools_of",
    "handoffs_of",
    "is_team",
    "live_key",
    "manager_name_of",
    "name_of",
    "walk",
    "workbenches_of",
]


# ------------------------------------------------------------------------------- private AutoGen attributes


def workbenches_of(agent: Any) -> list[Any]:
    """``AssistantAgent._workbench``: the agent's workbenches (a list)."""
    value = getattr(agent, "_workbench", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def handoff_tools_of(agent: Any) -> list[Any]:
    """``AssistantAgent._handoff_tools``: the handoff tools built for this agent (fresh per agent)."""
    value = getattr(agent, "_handoff_tools", None)
    return list(value) if isinstance(value, list) else []


def handoffs_of(agent: Any) -> dict[str, Any]:
    """``AssistantAgent._handoffs``: handoff name → ``HandoffBase`` (its ``target``)."""
    value = getattr(agent, "_handoffs", None)
    return dict(value) if isinstance(value, Mapping) else {}


def code_executor_of(agent: Any) -> Any:
    """``CodeExecutorAgent._code_executor``."""
    return getattr(agent, "_code_executor", None)


def _tools_of(workbench: Any) -> list[Any]:
    """``StaticWorkbench._tools``: the tools of a static workbench (to reach AgentTool / TeamTool runners)."""
    value = getattr(workbench, "_tools", None)
    return list(value) if isinstance(value, (list, tuple)) else []


def _runner_of(tool: Any) -> Any:
    """``TaskRunnerTool._task_runner``: the agent or team behind an AgentTool / TeamTool, else None."""
    return getattr(tool, "_task_runner", None)


def _inner_members(agent: Any) -> list[Any]:
    """What runs inside an agent's turn: a SocietyOfMindAgent's ``_team``, a MessageFilterAgent's
    ``_wrapped_agent``."""
    return [v for v in (getattr(agent, "_team", None), getattr(agent, "_wrapped_agent", None)) if v is not None]


def manager_name_of(team: Any) -> str:
    """``BaseGroupChat._group_chat_manager_name`` (the selector's agent name, e.g. ``SelectorGroupChatManager``)."""
    value = getattr(team, "_group_chat_manager_name", None)
    return value if isinstance(value, str) and value else type(team).__name__ + "Manager"


# ---------------------------------------------------------------------------------------------- agent keys


def name_of(obj: Any, default: str) -> str:
    """``obj.name`` when it is a non-empty str, else ``default``."""
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name else default


def is_team(obj: Any) -> bool:
    """Whether ``obj`` is an AutoGen team (``autogen_agentchat.base.Team``)."""
    try:
        from autogen_agentchat.base import Team
    except ImportError:  # pragma: no cover - AutoGen is installed whenever an AutoGen run is replayed
        return bool(participants_of(obj))
    return isinstance(obj, Team)


def walk(obj: Any, path: tuple[str, ...], seen: set[int] | None = None) -> Iterator[tuple[str, Any, bool]]:
    """``(static agent_key, member, is_team)`` for the root and everything that runs inside it, keyed by the
    recording's rule: a team adds its name, an agent its name, and whatever runs inside an agent's turn (an
    AgentTool / TeamTool runner, a SocietyOfMind team, a wrapped agent) sits under that agent."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if is_team(obj):
        here = (*path, name_of(obj, "team"))
        yield "/".join(here), obj, True
        for member in participants_of(obj):
            yield from walk(member, here, seen)
        return
    here = (*path, name_of(obj, type(obj).__name__))
    yield "/".join(here), obj, False
    for workbench in workbenches_of(obj):
        for tool in _tools_of(workbench):
            runner = _runner_of(tool)
            if runner is not None:
                yield from walk(runner, here, seen)
    for inner in _inner_members(obj):
        yield from walk(inner, here, seen)


def live_key(static_key: str, *, manager: bool = False, fallback_name: str | None = None) -> str:
    """The agent key the recording side gives the call in flight (the current turn's or the selector manager's),
    read from its contextvars; the static key when the replay does not run instrumented."""
    try:
        import causaltrace.instrumentation.autogen._state as recording
        from causaltrace.instrumentation import _runtime
    except ImportError:  # pragma: no cover - AutoGen missing
        return static_key
    ctx = _runtime.current_run()
    if ctx is None:
        return static_key
    turn = recording.TURN.get()
    if turn is not None and turn.ctx is ctx:
        return str(turn.key)
    mgr = recording.MANAGER.get()
    if mgr is not None:
        return str(mgr.key)
    level = recording.LEVEL.get()
    if level is not None and level.ctx is ctx and fallback_name is not None and not manager:
        return "/".join((*level.path, fallback_name))
    return static_key
