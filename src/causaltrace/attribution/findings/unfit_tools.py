"""Family ``unfit_routing``, for a tool: an agent calls a tool whose name and description share nothing with what
the request asks, while another of its own tools covers it and is never called in the run — the wrong tool chosen
(issue 32 item 1: "a routing or delegation choice that does not fit the request"; a call is the agent's delegation
to a tool, as a handoff is to an agent).

What a tool can do comes from the roster a live run stores (``Run.metadata["roster"]``: each agent's tools with
their descriptions; an imported OpenInference trace carries the same) and is read as stems, as for agents
(:mod:`causaltrace.attribution.stages.capabilities`); words all of the agent's tools share ("rainfall" in
``rainfall_archive`` and ``rainfall_forecast``) tell them apart in nothing and are dropped.

Not evidence: a run without a roster, an agent with fewer than two tools, a tool the roster does not list (a code
interpreter, a handoff, ``final_answer``); a chosen tool that fits any word of the request; an alternative that fits
less than a tool name's worth, or ties with another; an alternative that is called somewhere in the run (then the
chosen tool is a step of the work, as an ``add`` after the lookups is); a call of a tool a teammate's message or
plan named before it (the instruction's author is to blame, not its faithful executor).
"""

from __future__ import annotations

from collections.abc import Mapping

from causaltrace.attribution.findings._common import TASK_INDEX, change_strength, evidence, finding
from causaltrace.attribution.stages.capabilities import Capability, stems
from causaltrace.attribution.stages.drift import task_request
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.view import content_of
from causaltrace.schema import Finding, Run

__all__ = ["detect_unfit_tools", "tool_capabilities"]

_ROSTER_KEY = "roster"
#: the steps by which a teammate asks for work: its messages and plans (not results, replies or calls)
_INSTRUCTING = ("message", "planning", "handoff")


def tool_capabilities(run: Run) -> dict[str, dict[str, Capability]]:
    """Per agent of the run's roster with two tools or more, each tool's capability less what all its tools share."""
    roster = (run.metadata or {}).get(_ROSTER_KEY)
    if not isinstance(roster, Mapping):
        return {}
    out: dict[str, dict[str, Capability]] = {}
    for agent, entry in roster.items():
        tools = [t for t in (entry.get("tools") or () if isinstance(entry, Mapping) else ()) if isinstance(t, Mapping)
                 and t.get("name")]
        if len(tools) < 2:
            continue
        caps = {}
        for t in tools:
            names = stems(str(t["name"]).replace("_", " "))
            caps[str(t["name"])] = Capability(names, stems(str(t.get("description") or "")) - names)
        common_names = frozenset.intersection(*(c.names for c in caps.values()))
        common_words = frozenset.intersection(*(c.words for c in caps.values()))
        out[str(agent)] = {n: Capability(c.names - common_names, c.words - common_words) for n, c in caps.items()}
    return out


def detect_unfit_tools(run: Run, prov: Provenance) -> list[Finding]:
    """One finding at the first call of a tool that fits nothing the request asks while an uncalled tool of the same
    agent does (module docstring)."""
    by_agent = tool_capabilities(run)
    if not by_agent:
        return []
    opening = next((s for s in run.steps if s.kind == "task"), None)
    request = stems(task_request(run.task or (content_of(opening) if opening is not None else "")))
    called = {s.tool_name for s in run.steps if s.kind == "tool_call" and s.tool_name}
    #: per teammate, the stems its messages and plans said so far: a call one of them names was asked for (the
    #: author of the instruction is to blame, not its faithful executor, as for a value)
    said: dict[str, set[str]] = {}
    for step in run.steps:
        if step.kind in _INSTRUCTING and step.agent:
            said.setdefault(step.agent, set()).update(stems(content_of(step).replace("_", " ")))
        tools = by_agent.get(step.agent or "")
        if step.kind != "tool_call" or not tools or step.tool_name not in tools:
            continue
        chosen = tools[step.tool_name]
        if chosen.fit(request):
            continue
        scored = sorted(((c.fit(request), name) for name, c in tools.items() if name != step.tool_name), reverse=True)
        best_fit, best = scored[0]
        if best_fit < 2 or (len(scored) > 1 and scored[1][0] == best_fit) or best in called:
            continue
        if any(agent != step.agent and chosen.names & words for agent, words in said.items()):
            continue
        covered = ", ".join(tools[best].covered(request))
        claim = (f"step {step.index} calls {step.tool_name!r}, whose name and description share no word with what "
                 f"the request asks, while {best!r} of the same agent covers it ({covered}) and is never called")
        items = [evidence(run, TASK_INDEX, "request", covered), evidence(run, TASK_INDEX, "source", best),
                 evidence(run, step.index, "chosen_agent", step.tool_name)]
        return [finding(run, "unfit_routing", step.index, claim, items, strength=change_strength(prov, step.index))]
    return []
