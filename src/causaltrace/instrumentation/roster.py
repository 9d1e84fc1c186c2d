"""What each agent of a traced team can do: its description and its tools' names and descriptions.

Gathered once per run from the framework's own objects (an AutoGen team's participants, a smolagents agent and its
managed agents), so the diagnosis can ask whether a routing choice fits what was asked — issue 32 item 1: "the
chosen agent has no tool or description for what is asked". A run's steps show only the agents that ran; the agent
that *should* have been chosen usually never ran, so its tools are nowhere else in the run.

The roster goes to the store with the run (``Run.metadata["roster"]``, :data:`ROSTER_KEY`), not to the exported
spans: OpenInference's attributes already carry participants' names and descriptions, and the golden spans of issue
35 stay as they are. Shape: ``{agent name: {"description": str, "tools": [{"name": str, "description": str}]}}``;
texts are cut (:data:`_TEXT_LIMIT`) and tools counted (:data:`_TOOL_LIMIT`), so a huge docstring costs nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ROSTER_KEY", "autogen_roster", "smolagents_roster"]

#: The run-metadata key the roster is stored under (read by ``attribution.stages.capabilities``).
ROSTER_KEY = "roster"
_TEXT_LIMIT = 400
_TOOL_LIMIT = 40
_DEPTH_LIMIT = 4


def _text(value: Any) -> str:
    return value[:_TEXT_LIMIT] if isinstance(value, str) else ""


def _tools(tools: Any, *, skip: frozenset[str] = frozenset()) -> list[dict[str, str]]:
    out = []
    for tool in list(tools)[:_TOOL_LIMIT]:
        name = getattr(tool, "name", None)
        if isinstance(name, str) and name and name not in skip:
            out.append({"name": name[:_TEXT_LIMIT], "description": _text(getattr(tool, "description", None))})
    return out


def autogen_roster(team: Any, _depth: int = 0) -> dict[str, dict[str, Any]]:
    """An AutoGen team's participants (``BaseGroupChat._participants``; nested teams opened up): each one's
    ``description`` and its tools (``AssistantAgent._tools``; handoff tools are routing, not capability)."""
    out: dict[str, dict[str, Any]] = {}
    participants = getattr(team, "_participants", None)
    if not isinstance(participants, (list, tuple)) or _depth > _DEPTH_LIMIT:
        return out
    for member in participants:
        name = getattr(member, "name", None)
        if not isinstance(name, str) or not name:
            continue
        tools = getattr(member, "_tools", None)
        out[name] = {"description": _text(getattr(member, "description", None)),
                     "tools": _tools(tools) if isinstance(tools, (list, tuple)) else []}
        if isinstance(getattr(member, "_participants", None), (list, tuple)):
            out.update(autogen_roster(member, _depth + 1))
    return out


def smolagents_roster(agent: Any, _depth: int = 0) -> dict[str, dict[str, Any]]:
    """A smolagents agent and its managed agents (recursively): each one's ``description`` and its tools
    (``agent.tools``, less ``final_answer``, which every agent has)."""
    out: dict[str, dict[str, Any]] = {}
    if _depth > _DEPTH_LIMIT:
        return out
    name = getattr(agent, "name", None) or type(agent).__name__
    tools = getattr(agent, "tools", None)
    out[str(name)] = {"description": _text(getattr(agent, "description", None)),
                      "tools": _tools(tools.values(), skip=frozenset({"final_answer"})) if isinstance(tools, dict)
                      else []}
    managed = getattr(agent, "managed_agents", None)
    if isinstance(managed, dict):
        for member in managed.values():
            out.update(smolagents_roster(member, _depth + 1))
    return out
