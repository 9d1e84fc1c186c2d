"""Where each call of a smolagents playback sits: the agents of a freshly built agent tree (:func:`walk`) with their
static agent keys, and the key and call-id pattern the recording side uses for the agent run in flight
(:func:`key_and_pattern`).

Imports no smolagents at import time (``_playback.py`` imports this module when the facade registers the adapter).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.instrumentation.smolagents._state import CURRENT_RUN

__all__ = ["caller_state", "key_and_pattern", "walk"]


def walk(agent: Any, key: str) -> Iterator[tuple[str, Any]]:
    """``(agent_key, agent)`` for ``agent`` and, recursively, its managed agents (the recording's key rule)."""
    yield key, agent
    for name, managed in (getattr(agent, "managed_agents", None) or {}).items():
        yield from walk(managed, f"{key}/{acc.agent_name(managed) or name}")


def key_and_pattern(agent: Any, static_key: str) -> tuple[str, Any]:
    """The agent run's key and call-id pattern, read off the recording side's live state (exactly what the
    recording hashes with); without instrumentation, the static key and the ids in the agent's memory."""
    state = CURRENT_RUN.get()
    if state is not None and state.agent is agent and not state.closed:
        return state.key, state.pattern()
    ids: list[str] = []
    for step in getattr(getattr(agent, "memory", None), "steps", None) or []:
        for tc in getattr(step, "tool_calls", None) or []:
            ids.append(str(getattr(tc, "id", "") or ""))
        for tc in getattr(getattr(step, "model_output_message", None), "tool_calls", None) or []:
            ids.append(str(getattr(tc, "id", "") or ""))
    return static_key, acc.call_id_pattern(ids)


def caller_state() -> Any:
    """The recording side's state of the agent run in flight (None when the replay does not run instrumented)."""
    return CURRENT_RUN.get()

