"""Corrections of a routing choice that does not fit (family ``unfit_routing``; issue 32 item 5), in the shapes the
generic target substitution of :mod:`causaltrace.replay.corrections` does not cover:

* **A route written in code** (a smolagents manager's ``if``/``else`` that calls one managed agent or another): the
  finding names the agent the request points to (``request``) and the one the code called (``chosen_agent``). The
  correction calls the named agent the way the code itself writes that call — its arguments are what the code meant
  for that agent (``billing_agent(task='Refund order B7 and say how much.')``, not the device help it wrote for the
  other) — in place of every call of the chosen one. When the code never calls the named agent, the chosen agent's
  call is renamed (its arguments kept).
* **An unfounded choice** (the chosen speaker's reply states the failing value from nothing it was given: the
  finding's ``changed`` value, no ``request``): the work goes to the agent whose tools fit what is left to do — the
  one candidate of the choice that holds tools (the run's roster) none of which the run has called before the choice.
  A chosen agent that has tools itself, no such candidate or several of them: no correction (any other target is an
  alternative).
"""

from __future__ import annotations

import re
from typing import Any

from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["call_texts", "route_in_code", "unfounded_route"]


def call_texts(code: str, name: str) -> list[str]:
    """The call expressions ``name(...)`` of ``code`` as written (balanced parentheses; a parenthesis inside a quoted
    string does not count), in order."""
    out = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\s*\(", code):
        depth, quote, i = 0, "", m.end() - 1
        while i < len(code):
            ch = code[i]
            if quote:
                if ch == "\\":
                    i += 1
                elif ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    out.append(code[m.start():i + 1])
                    break
            i += 1
    return out


def route_in_code(code: str, chosen: str, named: str) -> str | None:
    """``code`` calling ``named`` where it called ``chosen`` (module docstring); None when it calls no ``chosen``."""
    calls = call_texts(code, chosen)
    if not calls:
        return None
    own = list(dict.fromkeys(call_texts(code, named)))
    for call in dict.fromkeys(calls):
        fixed = own[0] if len(own) == 1 else named + call[len(chosen):]
        code = code.replace(call, fixed)
    return code


def _roster_tools(run: Run) -> dict[str, list[str]]:
    roster = (run.metadata or {}).get("roster")
    if not isinstance(roster, dict):
        return {}
    return {str(name): [str(t.get("name")) for t in (entry.get("tools") or ()) if isinstance(t, dict) and t.get("name")]
            for name, entry in roster.items() if isinstance(entry, dict)}


def unfounded_route(step: Step, run: Run, f: Finding) -> Intervention | None:
    """The candidate whose tools fit what is left in place of the agent chosen to state a value from nothing (module
    docstring), or None."""
    chosen = next((str(e.value) for e in f.evidence if e.role == "chosen_agent" and e.value), None)
    stated = next((str(e.value) for e in f.evidence if e.role == "changed" and e.value), None)
    listed: Any = step.metadata.get("candidates")
    tools = _roster_tools(run)
    if chosen is None or not isinstance(listed, list) or tools.get(chosen):
        return None
    called = {s.tool_name for s in run.steps if s.kind == "tool_call" and s.index < step.index and s.tool_name}
    fits = [str(c) for c in listed if str(c) != chosen and tools.get(str(c)) and not called & set(tools[str(c)])]
    if len(fits) != 1:
        return None
    unused = ", ".join(tools[fits[0]])
    return Intervention(step_id=step.step_id, replacement=fits[0], source="mutation", basis="correction", finding=f,
                        description=f"target {chosen} → {fits[0]} (its tools {unused} unused so far; {chosen} stated "
                                    f"{stated} from nothing)")
