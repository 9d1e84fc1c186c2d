"""Where each call of an AutoGen playback sits: the members of a freshly built team (:func:`walk`) with their static
agent keys, and the key the recording side gives the call in flight (:func:`live_key`). The private AutoGen
attributes the playback reads have their one accessor each in ``_access``.

Imports no AutoGen at import time (``_playback.py`` imports this module when the facade registers the adapter).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from causaltrace.instrumentation.autogen._access import (
    inner_members,
    name_of,
    participants_of,
    runner_of,
    tools_of,
    workbenches_of,
)

__all__ = ["is_team", "live_key", "walk"]


# ---------------------------------------------------------------------------------------------- agent keys


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
        for tool in tools_of(workbench):
            runner = runner_of(tool)
            if runner is not None:
                yield from walk(runner, here, seen)
    for inner in inner_members(obj):
        yield from walk(inner, here, seen)


def live_key(static_key: str, *, manager: bool = False, fallback_name: str | None = None) -> str:
    """The agent key the recording side gives the call in flight (the current turn's or the selector manager's),
    read from its contextvars; the static key when the replay does not run instrumented."""
    try:
        import causaltrace.instrumentation.autogen._state as recording
        from causaltrace.instrumentation.runs import current_run
    except ImportError:  # pragma: no cover - AutoGen missing
        return static_key
    ctx = current_run()
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
