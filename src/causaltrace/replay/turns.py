"""The producing model's turn, as it was written and as the correction would have written it (issue 19, "Pairs").

A repair pair teaches a model what to write at one LLM request, so its ``chosen`` turn must be what that model would
have written: the SAME message with the same structure — ``content`` and ``tool_calls`` — where only the corrected
part differs:

* a tool call's corrected arguments replace the arguments of THAT call (matched by its call id, else by its
  position among the calls of that tool), the other calls and the text stay;
* a handoff's corrected target renames the transfer call (``transfer_to_sales`` → ``transfer_to_refunds``: the
  handoff tool of the new target in the request's tool schemas); a speaker selection's corrected name replaces the
  name in the selector's answer;
* a code action's corrected code replaces the code inside the model's text;
* an edit of a call made FROM code (a managed agent or tool called by a CodeAgent's code) maps back to the literal
  in that code: the one literal whose value is the edited argument is rewritten, and the code in the text with it;
* a message's corrected text replaces that text inside the model's output.

When an edit cannot be expressed in the producing turn (the text is not in the output, the literal is not unique,
no handoff tool leads to the new target, a tool result — the environment, not the model), :func:`corrected_turn`
returns ``None`` and says why; no pair is made from it. Turns are plain chat messages: ``content`` is always a
string (never ``None``), ``tool_calls`` carry ``id``, ``type`` and ``function: {name, arguments}`` with the
arguments as a JSON object.
"""

from __future__ import annotations

import ast
import copy
import io
import json
import tokenize
from dataclasses import dataclass
from typing import Any

from causaltrace.replay.edits import code_of
from causaltrace.schema import Run, Step

__all__ = ["TurnEdit", "assistant_turn", "corrected_turn", "producing_llm"]


def producing_llm(run: Run, step: Step) -> Step | None:
    """The llm_response whose output contains ``step`` (itself for an llm_response)."""
    seen: set[str] = set()
    current: Step | None = step
    while current is not None and current.step_id not in seen:
        if current.kind == "llm_response":
            return current
        seen.add(current.step_id)
        nxt = current.deps_of_kind("produced_by") or current.deps_of_kind("executes")
        current = run.step(nxt[0]) if nxt else None
    return None


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def assistant_turn(llm: Step) -> dict[str, Any]:
    """The model's turn at ``llm`` as a chat message: its text and, when it called tools, its tool calls.

    The text is what the model wrote (``outputs.text``, empty for a turn of tool calls only), never the step's
    human-readable ``content`` summary (``transfer_to_sales({})``), which the model did not write."""
    text = llm.outputs["text"] if "text" in llm.outputs else llm.content
    turn: dict[str, Any] = {"role": "assistant", "content": str(text or "")}
    calls = llm.outputs.get("tool_calls")
    if isinstance(calls, list) and calls:
        turn["tool_calls"] = [
            {
                "id": str(c.get("call_id") or c.get("id") or c.get("call_alias") or f"call_{i}"),
                "type": "function",
                "function": {"name": str(c.get("name")), "arguments": _arguments_object(c.get("arguments") or {})},
            }
            for i, c in enumerate(calls)
            if isinstance(c, dict)
        ]
    return turn


@dataclass(frozen=True)
class TurnEdit:
    """The corrected turn, or why there is none (``turn`` is None then)."""

    turn: dict[str, Any] | None
    reason: str = ""


def corrected_turn(run: Run, step: Step, replacement: Any) -> TurnEdit:
    """The turn the producing model would have written had ``step`` been ``replacement`` (module docstring)."""
    llm = producing_llm(run, step)
    if llm is None:
        return TurnEdit(None, f"step #{step.index} ({step.kind}) was not written by a model")
    turn = assistant_turn(llm)
    if step.kind == "tool_response" or (step.kind == "code_execution" and code_of(step) is None):
        return TurnEdit(None, "a tool or execution result is the environment's output, not the model's")
    if step.kind == "llm_response":
        return _edit_llm_output(turn, replacement)
    if step.kind == "handoff":
        return _edit_handoff(run, step, llm, turn, str(replacement))
    if step.kind == "speaker_selection":
        return _replace_text(turn, str(step.outputs.get("selected") or ""), str(replacement), "the selected name")
    if step.kind == "tool_call" and code_of(step) is None:
        source = run.step(step.deps_of_kind("produced_by")[0]) if step.deps_of_kind("produced_by") else None
        if source is not None and source.kind == "code_execution":
            return _edit_call_made_from_code(run, step, source, turn, replacement)
        return _edit_tool_arguments(run, step, llm, turn, replacement)
    code = code_of(step)
    if code is not None:
        return _replace_code(turn, code, str(replacement))
    original = str(step.content or step.outputs.get("text") or "")
    return _replace_text(turn, original, str(replacement), "the step's text")


# ------------------------------------------------------------------------------------------------ the edits


def _edit_llm_output(turn: dict[str, Any], replacement: Any) -> TurnEdit:
    if isinstance(replacement, str):
        turn["content"] = replacement
        return TurnEdit(turn)
    if isinstance(replacement, dict) and isinstance(replacement.get("tool_calls"), list):
        return _replace_reply(turn, replacement)
    if isinstance(replacement, list) and "tool_calls" in turn and len(replacement) == len(turn["tool_calls"]):
        for call, new in zip(turn["tool_calls"], replacement, strict=True):
            if not isinstance(new, dict):
                return TurnEdit(None, "a replaced tool call is not an object")
            call["function"] = {"name": str(new.get("name", call["function"]["name"])),
                                "arguments": _arguments_object(new.get("arguments", {}))}
        return TurnEdit(turn)
    return TurnEdit(None, "the replacement does not fit the model's output (text or the same number of tool calls)")


def _replace_reply(turn: dict[str, Any], replacement: dict[str, Any]) -> TurnEdit:
    """A reply replaced wholesale (``{"text": …, "tool_calls": [{name, arguments}, …]}``: a correction that calls the
    tool for what the reply made up or left out, in place of what it said): its text and its tool calls, the
    original calls' ids kept by position."""
    calls = replacement["tool_calls"]
    if not all(isinstance(c, dict) and c.get("name") for c in calls):
        return TurnEdit(None, "a replaced tool call is not an object with a name")
    ids = [c.get("id") for c in turn.get("tool_calls") or ()]
    turn["content"] = str(replacement.get("text") or "")
    turn["tool_calls"] = [{"id": str(ids[i]) if i < len(ids) else f"call_{i}", "type": "function",
                           "function": {"name": str(c["name"]), "arguments": _arguments_object(c.get("arguments")
                                                                                               or {})}}
                          for i, c in enumerate(calls)]
    if not turn["tool_calls"]:
        del turn["tool_calls"]
    return TurnEdit(turn)


def _replace_text(turn: dict[str, Any], old: str, new: str, what: str) -> TurnEdit:
    content = turn["content"]
    if old and old not in content:
        restyled = _same_json(content, old, new)
        if restyled is not None:
            turn["content"] = restyled
            return TurnEdit(turn)
    if not old or old not in content:
        return TurnEdit(None, f"{what} does not appear in the model's output, so the correction has no place in it")
    turn["content"] = content.replace(old, new, 1)
    return TurnEdit(turn)


def _same_json(content: str, old: str, new: str) -> str | None:
    """A structured output the framework re-serialised: when the model wrote ``content`` as JSON equal to the step's
    ``old`` JSON (``{"sku": "PX-210", …}`` posted as ``{"sku":"PX-210",…}``), the corrected ``new`` JSON written in
    the model's own spacing; None otherwise."""
    try:
        written, posted, corrected = json.loads(content), json.loads(old), json.loads(new)
    except ValueError:
        return None
    if written != posted or not isinstance(written, (dict, list)):
        return None
    spaced = ", " in content or ": " in content
    out = json.dumps(corrected, ensure_ascii=False, separators=(", ", ": ") if spaced else (",", ":"))
    return out if json.loads(out) == corrected else None


def _replace_code(turn: dict[str, Any], old: str, new: str) -> TurnEdit:
    if old and old in turn["content"]:
        turn["content"] = turn["content"].replace(old, new, 1)
        return TurnEdit(turn)
    for call in turn.get("tool_calls", []):
        arguments = call["function"]["arguments"]
        if isinstance(arguments, dict):
            for key, value in arguments.items():
                if value == old:
                    arguments[key] = new
                    return TurnEdit(turn)
    return TurnEdit(None, "the code does not appear in the model's output")


def _sibling_calls(run: Run, llm: Step, tool_name: str | None) -> list[Step]:
    return [s for s in run.steps if s.kind == "tool_call" and s.tool_name == tool_name
            and llm.step_id in s.deps_of_kind("produced_by")]


def _matching_call(run: Run, step: Step, llm: Step, turn: dict[str, Any]) -> dict[str, Any] | None:
    calls = turn.get("tool_calls", [])
    if step.call_id:
        for call in calls:
            if call["id"] == step.call_id:
                return call
    same_name = [c for c in calls if c["function"]["name"] == step.tool_name]
    siblings = _sibling_calls(run, llm, step.tool_name)
    position = next((i for i, s in enumerate(siblings) if s.step_id == step.step_id), None)
    if position is not None and position < len(same_name):
        return same_name[position]
    return same_name[0] if len(same_name) == 1 else None


def _edit_tool_arguments(run: Run, step: Step, llm: Step, turn: dict[str, Any], replacement: Any) -> TurnEdit:
    if not isinstance(replacement, dict):
        return TurnEdit(None, "corrected tool arguments must be an object")
    call = _matching_call(run, step, llm, turn)
    if call is None:
        return TurnEdit(None, f"the model's output has no call of {step.tool_name!r} to correct")
    call["function"]["arguments"] = copy.deepcopy(replacement)
    return TurnEdit(turn)


def _handoff_tool(tools: Any, target: str) -> str | None:
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            names.append(str(spec.get("name") or ""))
    exact = [n for n in names if n == f"transfer_to_{target}"]
    if exact:
        return exact[0]
    ending = [n for n in names if n.endswith(target)]
    return ending[0] if len(ending) == 1 else None


def _request_of(run: Run, llm: Step) -> dict[str, Any]:
    ref = llm.inputs.get("recording")
    if isinstance(ref, dict) and run.recording is not None:
        call = run.recording.find(str(ref.get("agent_key")), "llm", int(ref.get("ordinal", -1)))
        if call is not None and isinstance(call.request, dict):
            return call.request
    return {}


def _edit_handoff(run: Run, step: Step, llm: Step, turn: dict[str, Any], target: str) -> TurnEdit:
    current = str(step.outputs.get("target") or "")
    calls = turn.get("tool_calls", [])
    transfer = [c for c in calls if current and c["function"]["name"].endswith(current)]
    if len(transfer) != 1:
        return _replace_text(turn, current, target, "the handoff target")
    request = _request_of(run, llm)
    tools = request.get("tools") or request.get("tools_to_call_from")
    new_name = _handoff_tool(tools, target) if tools else None
    if new_name is None:
        old_name = transfer[0]["function"]["name"]
        if not tools and old_name.endswith(current):
            new_name = old_name[: len(old_name) - len(current)] + target
        else:
            return TurnEdit(None, f"the agent has no handoff tool to {target!r}")
    transfer[0]["function"]["name"] = new_name
    return TurnEdit(turn)


# ----------------------------------------------------------------------------------------- calls made by code


def _literal_tokens(code: str) -> list[tuple[int, int, Any, str]]:
    """(start, end, value, token text) of every string and number literal in ``code``."""
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in (tokenize.STRING, tokenize.NUMBER):
                try:
                    value = ast.literal_eval(tok.string)
                except (ValueError, SyntaxError):
                    continue
                start = offsets[tok.start[0] - 1] + tok.start[1]
                end = offsets[tok.end[0] - 1] + tok.end[1]
                out.append((start, end, value, tok.string))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return out


def _rewritten_literal(token: str, old: Any, new: Any) -> str | None:
    """``token`` (the literal of ``old``) rewritten to hold ``new``, in the same quotes; None if it cannot be."""
    if isinstance(old, str) and isinstance(new, str):
        opening = next((i for i, ch in enumerate(token) if ch in "'\""), None)
        if opening is None or "f" in token[:opening].lower() or "r" in token[:opening].lower():
            return None
        quote = token[opening : opening + 3] if token[opening : opening + 3] in ("'" * 3, '"' * 3) else token[opening]
        inner = token[opening + len(quote) : len(token) - len(quote)]
        if inner != old or quote[0] in new or "\\" in new or "\\" in inner:
            return None
        return token[: opening + len(quote)] + new + quote
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(new, bool):
        return repr(new)
    return None


def _edit_call_made_from_code(run: Run, step: Step, execution: Step, turn: dict[str, Any], replacement: Any
                              ) -> TurnEdit:
    if not isinstance(replacement, dict) or not isinstance(step.arguments, dict):
        return TurnEdit(None, "corrected tool arguments must be an object")
    changed = [k for k in replacement if replacement.get(k) != step.arguments.get(k)]
    if len(changed) != 1 or changed[0] not in step.arguments:
        return TurnEdit(None, "only a change of one existing argument maps back to the code")
    key = changed[0]
    old, new = step.arguments[key], replacement[key]
    code_step = run.step(execution.deps_of_kind("executes")[0]) if execution.deps_of_kind("executes") else execution
    code = code_of(code_step) or code_of(execution)
    if not code:
        return TurnEdit(None, "the code that made the call is not recorded")
    hits = [t for t in _literal_tokens(code) if t[2] == old and type(t[2]) is type(old)]
    if len(hits) != 1:
        where = "no literal" if not hits else f"{len(hits)} literals"
        return TurnEdit(None, f"argument {key!r} of the call made from code is {where} in the code "
                              "(computed, or ambiguous): the correction cannot be written back into the code")
    start, end, _, token = hits[0]
    literal = _rewritten_literal(token, old, new)
    if literal is None:
        return TurnEdit(None, f"the new value of {key!r} cannot be written as the same literal")
    return _replace_code(turn, code, code[:start] + literal + code[end:])
