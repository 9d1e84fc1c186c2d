"""What each agent of an imported OpenInference trace can do — the roster a live run stores itself
(``causaltrace.instrumentation.roster``; ``Run.metadata["roster"]``), rebuilt from what OpenInference's
instrumentors record, so an imported run's routing is judged by the agents' tools and descriptions too (issue 32
item 1):

* a team's CHAIN span (AutoGen AgentChat): ``participant_names`` with ``participant_descriptions``;
* an AGENT span (smolagents): ``smolagents.managed_agents.<i>.name`` / ``.description`` (its managed agents),
  ``smolagents.tools_names`` (its own tools), ``gen_ai.agent.description`` (its own description);
* a TOOL span: ``tool.name`` and ``tool.description``, a tool of the agent whose AGENT span encloses it;
* an LLM span: ``llm.tools.<i>.tool.json_schema`` (a function schema, bare or OpenAI's ``{"function": …}``), tools
  offered to the enclosing agent's model.

Handoff tools (``transfer_to_…``) are routing, not capability, and ``final_answer`` is every agent's: both are left
out. Texts are cut as a live roster's are; a trace with fewer than two agents has no roster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from causaltrace.collector.foreign_common import SpanLike, TraceTree, indexed, json_or_text

__all__ = ["roster_of_trace"]

_TEXT_LIMIT = 400
_TOOL_LIMIT = 40
_KIND = "openinference.span.kind"


def _entry(roster: dict[str, dict[str, Any]], name: Any) -> dict[str, Any] | None:
    if not isinstance(name, str) or not name:
        return None
    return roster.setdefault(name[:_TEXT_LIMIT], {"description": "", "tools": []})


def _describe(entry: dict[str, Any] | None, text: Any) -> None:
    if entry is not None and isinstance(text, str) and text and not entry["description"]:
        entry["description"] = text[:_TEXT_LIMIT]


def _add_tool(entry: dict[str, Any] | None, name: Any, description: Any = "") -> None:
    if entry is None or not isinstance(name, str) or not name or name == "final_answer" or name.startswith(
            "transfer_to_") or len(entry["tools"]) >= _TOOL_LIMIT:
        return
    for tool in entry["tools"]:
        if tool["name"] == name:
            if not tool["description"] and isinstance(description, str):
                tool["description"] = description[:_TEXT_LIMIT]
            return
    entry["tools"].append({"name": name[:_TEXT_LIMIT],
                           "description": description[:_TEXT_LIMIT] if isinstance(description, str) else ""})


def _schema_tool(schema: Any) -> tuple[Any, Any]:
    value = json_or_text(schema)
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        value = value["function"]
    return (value.get("name"), value.get("description")) if isinstance(value, dict) else (None, None)


def roster_of_trace(tree: TraceTree, agent_name: Callable[[SpanLike], str]) -> dict[str, dict[str, Any]]:
    """The roster of one trace's OpenInference spans (module docstring); {} with fewer than two agents."""
    roster: dict[str, dict[str, Any]] = {}

    def owner(span: SpanLike) -> dict[str, Any] | None:
        agent = next((a for a in tree.ancestors(span) if a.attrs.get(_KIND) == "AGENT"), None)
        return _entry(roster, agent_name(agent)) if agent is not None else None

    for span in tree.spans:
        attrs, kind = span.attrs, span.attrs.get(_KIND)
        names, descriptions = attrs.get("participant_names"), attrs.get("participant_descriptions")
        if isinstance(names, (list, tuple)):
            for i, name in enumerate(names):
                text = descriptions[i] if isinstance(descriptions, (list, tuple)) and i < len(descriptions) else ""
                _describe(_entry(roster, name), text)
        for managed in indexed(attrs, "smolagents.managed_agents."):
            _describe(_entry(roster, managed.get("name")), managed.get("description"))
        if kind == "AGENT":
            entry = _entry(roster, agent_name(span))
            _describe(entry, attrs.get("gen_ai.agent.description"))
            for name in attrs.get("smolagents.tools_names") or ():
                _add_tool(entry, name)
        elif kind == "TOOL":
            _add_tool(owner(span), attrs.get("tool.name"), attrs.get("tool.description"))
        elif kind == "LLM":
            tools = indexed(attrs, "llm.tools.")
            entry = owner(span) if tools else None
            for tool in tools:
                _add_tool(entry, *_schema_tool(tool.get("tool.json_schema")))
    return roster if len(roster) >= 2 else {}
