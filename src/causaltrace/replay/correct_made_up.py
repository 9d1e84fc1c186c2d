"""The correction of made-up data (family ``made_up_data``; issue 32 item 5): obtain the value instead of inventing it.

A step that simulates figures, assumes a placeholder key or states a number "from what I know" stands in for a
lookup its agent stopped trying. What it should have done is derived from the run, not from the case: in place of
the fabricating model reply, a call of the team's own tool that fits the data the reply made up, so the replay
fetches the real value.

* **What was made up**: the reply's lines (code) or sentences (text) that carry the finding's markers
  (``simulate``, ``placeholder``, ``hypothetical`` …) — the fabricated value and what it stands for.
* **The tool**: among the agent's tools (``Run.metadata["roster"]`` for live runs, else the tools it called), the
  one whose name and description share the most word stems with those lines, the task's request breaking ties; when
  none shares any, the tool the agent called last before the step (the lookup it gave up on). Code and the final
  answer are no lookups.
* **The arguments**: those of the agent's latest earlier call of that tool — the call that failed or found nothing
  before the agent made its value up; when the made-up lines name one entity of the task and that call's one string
  argument names another, the made-up one in its place. A tool the agent never called gets arguments only when its
  schema (in the reply's recorded request) has one parameter, a string: the one name of the task the made-up lines
  name, else the one code the made-up lines write for what they stand for (``USD/EUR`` in "approximate USD/EUR
  rate"); else no correction.
* **The shape**: a code action's code becomes that call (``print(get_sales(region='West'))``); any other step's
  producing reply has its tool calls replaced wholesale by it (both adapters replay a reply's tool calls).

A figure filled into a table with no marker at all (the finding's ``source`` siblings and ``changed`` figure,
:mod:`~causaltrace.attribution.findings.filled_gaps`) is corrected by the lookup that left the gap: the agent's latest
call of a tool that failed and was never answered by a later call with the same arguments (``read_meter(building='C',
month='January 2024')`` timed out, and the analyst wrote 18400 for C), in the same shape.

Before that call, when an earlier observation of the run already holds a value for the entity the made-up sentence
names (a tool result naming the same task entities, with one number), a text step gets that value in place of the
made-up number (:func:`_observed`): the run held the real value, the agent stated another.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from causaltrace.replay.edits import replacement_kind
from causaltrace.schema import Finding, Intervention, Run, Step

__all__ = ["agent_tools", "made_up_corrections", "stems"]

#: tools that are no lookup: running code and answering
_NOT_LOOKUPS = frozenset({"python_interpreter", "final_answer"})
_WORD = re.compile(r"[A-Za-z]{3,}")
_STOP = frozenset("the and for from with that this its their into then than what when where which your you are was "
                  "were has have had not but can get set use let".split())
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
#: an entity the task names: a capitalised word or an identifier with an upper-case part (``West``, ``MARKET_API_KEY``)
_ENTITY = re.compile(r"\b[A-Z][A-Za-z0-9_-]+\b")


def stems(text: str) -> set[str]:
    """The word stems of ``text`` (words of 3+ letters, split at ``_`` and case, lower-cased, cut to 5 letters) minus
    function words: ``get_sales`` and "sales region" share ``sales``, "closing" and "closes" ``closi``/``close``."""
    words = _WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", text.replace("_", " ")))
    return {w.lower()[:5] for w in words if w.lower() not in _STOP}


def agent_tools(run: Run, agent: str) -> dict[str, str]:
    """``{tool name: description}`` of ``agent``'s lookups: the roster's for a live run, else the tools its steps
    called (no description)."""
    roster = (run.metadata or {}).get("roster")
    entry = roster.get(agent) if isinstance(roster, dict) else None
    tools: dict[str, str] = {}
    if isinstance(entry, dict):
        for t in entry.get("tools") or ():
            if isinstance(t, dict) and t.get("name"):
                tools[str(t["name"])] = str(t.get("description") or "")
    if not tools:
        tools = {s.tool_name: "" for s in run.steps if s.kind == "tool_call" and s.agent == agent and s.tool_name}
    return {name: text for name, text in tools.items() if name not in _NOT_LOOKUPS}


def _made_up_lines(reply: str, markers: Iterable[str]) -> str:
    """The lines (code) or sentences (text) of ``reply`` that carry a marker."""
    wanted = [m.lower() for m in markers]
    parts = [p for line in reply.splitlines() for p in _SENTENCE.split(line)]
    return "\n".join(p for p in parts if any(m in p.lower() for m in wanted))


def _fitting_tool(run: Run, step: Step, tools: dict[str, str], made_up: str) -> str | None:
    """The tool that fits the made-up data (module docstring), or None."""
    from causaltrace.attribution.stages.drift import task_request

    lines, request = stems(made_up), stems(task_request(run.task or ""))
    scored = sorted(((len(stems(f"{n} {d}") & lines), len(stems(f"{n} {d}") & request), n) for n, d in tools.items()),
                    reverse=True)
    if scored and scored[0][0] > 0:
        return scored[0][2]
    called = [s for s in run.steps if s.kind == "tool_call" and s.agent == step.agent and s.index < step.index
              and s.tool_name in tools]
    return called[-1].tool_name if called else None


def _arguments(run: Run, step: Step, tool: str, made_up: str) -> dict[str, Any] | None:
    """The arguments of the agent's latest earlier call of ``tool``, the made-up entity in place of another
    (module docstring); None when the agent never called it."""
    calls = [s for s in run.steps if s.kind == "tool_call" and s.agent == step.agent and s.tool_name == tool
             and s.index < step.index]
    if not calls:
        return None
    arguments = dict(calls[-1].arguments or {})
    strings = [k for k, v in arguments.items() if isinstance(v, str)]
    if len(strings) == 1:
        value = arguments[strings[0]]
        entities = set(_ENTITY.findall(run.task or ""))
        made_up_names, named = _named(entities, made_up), _named(entities, value)
        wanted, other = made_up_names - named, named - made_up_names
        if len(wanted) == 1 and len(other) == 1:
            arguments[strings[0]] = re.sub(rf"\b{re.escape(other.pop())}\b", wanted.pop(), value)
    return arguments


def _schema_arguments(run: Run, llm: Step | None, tool: str, made_up: str) -> dict[str, Any] | None:
    """The arguments of a tool the agent never called: when the tool schemas of the producing reply's recorded
    request give ``tool`` one parameter, a string, the one name of the task (a capitalised word that does not open a
    sentence and is no all-capitals label, :func:`~causaltrace.replay.correct_drift.entity_kinds`) the made-up
    lines name; None otherwise."""
    from causaltrace.replay.correct_drift import entity_kinds

    ref = llm.inputs.get("recording") if llm is not None else None
    call = (run.recording.find(str(ref.get("agent_key")), "llm", int(ref.get("ordinal", -1)))
            if isinstance(ref, dict) and run.recording is not None else None)
    request = call.request if call is not None and isinstance(call.request, dict) else {}
    for schema in request.get("tools") or request.get("tools_to_call_from") or ():
        spec = schema.get("function") if isinstance(schema, dict) and isinstance(schema.get("function"), dict) \
            else schema
        if not isinstance(spec, dict) or spec.get("name") != tool:
            continue
        properties = (spec.get("parameters") or {}).get("properties") or {}
        if len(properties) != 1 or next(iter(properties.values()), {}).get("type") != "string":
            return None
        names = [e for e in entity_kinds(run.task or "") if not e.isupper() and e in _named({e}, made_up)]
        if not names:  # the made-up lines' one code of what they stand for ('approximate USD/EUR rate')
            names = list(dict.fromkeys(_CODE.findall(made_up)))
        return {next(iter(properties)): names[0]} if len(names) == 1 else None
    return None


#: a code of upper-case parts joined by '/' or '-' (``USD/EUR``, ``EUR-GBP``): what a made-up figure is of
_CODE = re.compile(r"(?<![\w/-])[A-Z]{2,}(?:[/-][A-Z]{2,})+(?![\w/-])")


def _named(entities: set[str], text: str) -> set[str]:
    """The ``entities`` ``text`` names as whole words."""
    return {e for e in entities if re.search(rf"(?<![\w]){re.escape(e)}(?![\w])", text)}


def _call_code(tool: str, arguments: dict[str, Any]) -> str:
    """The call as a code action writes it, its result printed for the next step to observe."""
    return f"print({tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())}))"


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
#: the most numbers of a made-up sentence an observed value is tried in place of
_AT_MOST = 3


def _observed(run: Run, step: Step, f: Finding, made_up: str) -> list[Intervention]:
    """The made-up number replaced by what an earlier observation of the run says for the same entity: the latest
    tool result naming the task entities the made-up sentence names (at least one) and holding one number (the
    task's own numbers aside), in place of each number of the sentence the task does not give (at most
    :data:`_AT_MOST`; a sentence writes "1 GBP = 1.30 USD": which is made up the replay tells); a text step only."""
    if replacement_kind(step) != "text":
        return []
    task = run.task or ""
    given, entities = set(_NUMBER.findall(task)), set(_ENTITY.findall(task))
    named = _named(entities, made_up)
    numbers = list(dict.fromkeys(n for n in _NUMBER.findall(made_up) if n not in given))
    if not named or not numbers or len(numbers) > _AT_MOST:
        return []
    for obs in sorted((s for s in run.steps if s.kind == "tool_response" and s.index < step.index
                       and s.status != "error"), key=lambda s: -s.index):
        text = obs.content or ""
        held = {n for n in _NUMBER.findall(text) if n not in given}
        if _named(entities, text) != named or len(held) != 1:
            continue
        value, out = held.pop(), []
        for number in numbers:
            replacement = step.content or ""
            for part in made_up.splitlines():  # only the made-up sentences: "1 EUR" elsewhere stays
                fixed = _NUMBER.sub(lambda m, n=number, v=value: v if m.group(0) == n else m.group(0), part)
                replacement = replacement.replace(part, fixed)
            if replacement != step.content:
                out.append(Intervention(step_id=step.step_id, replacement=replacement, source="mutation",
                                        basis="correction", finding=f,
                                        description=f"number {number} → {value} (observed at step {obs.index})"))
        return out
    return []


def made_up_corrections(step: Step, run: Run, f: Finding) -> list[Intervention]:
    """What ``step`` made up, corrected (module docstring): the value an earlier observation holds for it, then the
    call that obtains it; none when the run shows neither."""
    from causaltrace.replay.turns import producing_llm

    llm = producing_llm(run, step)
    reply = str((llm.outputs.get("text") if llm is not None else None) or step.content or "")
    markers = [str(e.value) for e in f.evidence if e.role == "marker" and e.value]
    made_up = _made_up_lines(reply, markers) or _made_up_lines(step.content or "", markers)
    if not made_up:
        gap = _unanswered_lookup(run, step)  # a figure filled into a gap (no marker): the lookup that left it
        return [_as_intervention(step, f, llm, *gap)] if gap is not None and (
            replacement_kind(step) == "code" or llm is not None) else []
    call = _obtaining_call(step, run, f, llm, made_up)
    return _observed(run, step, f, made_up) + ([call] if call is not None else [])


def _unanswered_lookup(run: Run, step: Step) -> tuple[str, dict[str, Any]] | None:
    """``(tool, arguments)`` of the agent's latest lookup before ``step`` whose call failed and was never answered
    by a later call with the same arguments: the gap a figure was filled into (:mod:`~causaltrace.attribution.
    findings.filled_gaps`: siblings from results, one figure from nobody)."""
    tools = agent_tools(run, step.agent) if step.agent else {}
    calls = [s for s in run.steps if s.kind == "tool_call" and s.agent == step.agent and s.index < step.index
             and s.tool_name in tools]

    def answer(call: Step) -> Step | None:
        return next((s for s in run.steps if s.kind == "tool_response" and s.tool_name == call.tool_name
                     and call.index < s.index < step.index), None)

    answered = {(c.tool_name, repr(sorted((c.arguments or {}).items()))) for c in calls
                if (r := answer(c)) is not None and r.status != "error"}
    for call in reversed(calls):
        response = answer(call)
        key = (call.tool_name, repr(sorted((call.arguments or {}).items())))
        if response is not None and response.status == "error" and key not in answered:
            return str(call.tool_name), dict(call.arguments or {})
    return None


def _as_intervention(step: Step, f: Finding, llm: Step | None, tool: str, arguments: dict[str, Any]) -> Intervention:
    """The call of ``tool`` in ``step``'s place: a code action's code, else its producing reply's tool calls — also
    for code in a message, which another agent runs (AutoGen's executor), where the agent's tools are not defined."""
    described = f"call {tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())}) instead of making the data up"
    if (replacement_kind(step) == "code" and step.kind != "message") or llm is None:
        return Intervention(step_id=step.step_id, replacement=_call_code(tool, arguments), source="mutation",
                            basis="correction", finding=f, description=described)
    return Intervention(step_id=llm.step_id, replacement={"text": None, "tool_calls": [{"name": tool,
                                                                                          "arguments": arguments}]},
                        source="mutation", basis="correction", finding=f, description=described)


def _obtaining_call(step: Step, run: Run, f: Finding, llm: Step | None, made_up: str) -> Intervention | None:
    """The call of the team's tool that obtains what ``step`` made up (module docstring), or None."""
    tools = agent_tools(run, step.agent) if step.agent else {}
    tool = _fitting_tool(run, step, tools, made_up) if tools else None
    arguments = (_arguments(run, step, tool, made_up) or _schema_arguments(run, llm, tool, made_up)) if tool else None
    if tool is not None and arguments is not None:
        arguments = _refined(run, step, tool, arguments)
    if tool is None or arguments is None or (replacement_kind(step) != "code" and llm is None):
        return None
    return _as_intervention(step, f, llm, tool, arguments)


#: an answer that found nothing (not an error: the same call finds nothing again)
_NOTHING = re.compile(r"\b(?:no (?:results?|matches|records|entries|data)|not found|nothing found|found nothing)\b",
                      re.IGNORECASE)
_TERM = re.compile(r"[A-Za-z][A-Za-z-]{2,}")


def _answers(run: Run, step: Step, tool: str) -> list[tuple[Step, Step]]:
    """``(call, its answer)`` of the agent's calls of ``tool`` before ``step`` that were answered."""
    out = []
    for call in (s for s in run.steps if s.kind == "tool_call" and s.agent == step.agent and s.tool_name == tool
                 and s.index < step.index):
        answer = next((s for s in run.steps if s.kind == "tool_response" and s.tool_name == tool
                       and call.index < s.index < step.index), None)
        if answer is not None:
            out.append((call, answer))
    return out


def _refined(run: Run, step: Step, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """``arguments``, unless the same call already found nothing (an answer that is no error and says so): then its
    one string argument with the terms every answer the tool found for the agent's other items shares (the source
    they cite: "(INSEE, 2021 census)" for each city found) — a search refined by what its hits have in common; None
    when there are no such terms (the same call would find nothing again)."""
    answers = _answers(run, step, tool)
    if not any(c.arguments == arguments and a.status != "error" and _NOTHING.search(a.content or "")
               for c, a in answers):
        return arguments
    strings = [k for k, v in arguments.items() if isinstance(v, str)]
    found = [a.content or "" for c, a in answers if a.status != "error" and not _NOTHING.search(a.content or "")
             and c.arguments != arguments]
    if len(strings) != 1 or len(found) < 2:
        return None
    said = {w.lower() for w in _TERM.findall(arguments[strings[0]])}
    shared = [w for w in dict.fromkeys(_TERM.findall(found[0])) if w.lower() not in said
              and all(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text) for text in found[1:])]
    return {**arguments, strings[0]: f"{arguments[strings[0]]} {' '.join(shared)}"} if shared else None
