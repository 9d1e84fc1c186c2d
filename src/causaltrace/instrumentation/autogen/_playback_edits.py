"""AutoGen's half of an intervention: a neutral :class:`~causaltrace.protocols.CallEdit` of a model response turned
into a function from the recorded ``CreateResult`` to the edited one (see ``_playback``'s table).

This module imports AutoGen at its top; ``_playback.py`` imports it only when a playback is assembled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from autogen_core import FunctionCall

from causaltrace.exceptions import ReplayError, UserError
from causaltrace.instrumentation.autogen._access import handoffs_of, name_of
from causaltrace.protocols import CallEdit
from causaltrace.schema import Step

__all__ = ["edit_transform", "replace_code"]

_CODE_BLOCK = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_FENCED_JSON = re.compile(r"```(?:[ \t]*json)?[ \t]*\n([\s\S]*?)```")

Transform = Callable[[Any], Any]


def edit_transform(edit: CallEdit, agents: Mapping[str, Any]) -> Transform | None:
    """The transform of the recorded CreateResult that applies ``edit`` (None for a tool result edit).
    ``agents``: agent key → the fresh team's member (a handoff must target one of the agent's handoffs)."""
    if edit.slot != "response":
        return None
    value, part = edit.value, edit.part
    if part == "whole":
        return _llm_transform(value)
    if part == "text":
        return lambda r: _set_text(r, edit.old, value)
    if part == "code":
        return lambda r: _set_text(r, None, replace_code(r.content if isinstance(r.content, str) else "", value))
    if part in ("plan", "selection"):
        return lambda r: _set_content(r, value)
    if part == "thought":
        return lambda r: _set_thought(r, value)
    if part == "ledger":
        return _ledger_transform(str(edit.field), value)
    if part == "tool_arguments":
        assert edit.step is not None
        return _args_transform(edit.step, value)
    if part == "handoff":
        agent = agents.get(edit.call.agent_key)
        if agent is None:
            raise UserError(f"the factory's team has no agent {edit.call.agent_key!r}")
        return _handoff_transform(agent, edit.old, value)
    raise UserError(f"an AutoGen replay cannot edit the {part!r} part of a model response")


def replace_code(text: str, code: str) -> str:
    """``text`` with the body of its Markdown code blocks replaced by ``code`` (several blocks: the span from the
    first block's body to the last block's end becomes one body); a text without a block gets one appended."""
    blocks = list(_CODE_BLOCK.finditer(text))
    body = code if code.endswith("\n") else code + "\n"
    if not blocks:
        return f"{text.rstrip()}\n```python\n{body}```"
    start = blocks[0].start(2)
    end = blocks[-1].end(2)
    return text[:start] + body + text[end:]


def _set_content(result: Any, value: str) -> Any:
    result.content = value
    return result


def _set_thought(result: Any, value: str) -> Any:
    result.thought = value
    return result


def _set_text(result: Any, old: str | None, new: str) -> Any:
    """The CreateResult's text with ``old`` replaced by ``new`` where it occurs, else all of it."""
    content = result.content
    if not isinstance(content, str):
        raise UserError("the producing model response is a tool call, not text: intervene on its tool_call")
    if old and old in content and old != content:
        result.content = content.replace(old, new, 1)
    else:
        result.content = new
    return result


def _ledger_transform(field_name: str, value: str) -> Transform:
    """A MagenticOne progress ledger (the JSON object the orchestrator parses, bare or in a fenced block) with the
    ``answer`` of ``field_name`` (``next_speaker`` / ``instruction_or_question``) replaced by ``value``."""

    def apply(result: Any) -> Any:
        content = result.content
        if not isinstance(content, str):
            raise UserError("the producing model response is a tool call, not a progress ledger")
        fenced = _FENCED_JSON.search(content)
        raw = fenced.group(1) if fenced else content
        try:
            ledger = json.loads(raw)
        except ValueError:
            raise UserError("the producing model response is not a JSON progress ledger") from None
        entry = ledger.get(field_name) if isinstance(ledger, dict) else None
        if not isinstance(entry, dict):
            raise UserError(f"the progress ledger has no {field_name!r} entry")
        entry["answer"] = value
        new = json.dumps(ledger, ensure_ascii=False)
        result.content = content[: fenced.start(1)] + new + "\n" + content[fenced.end(1) :] if fenced else new
        return result

    return apply


def _function_calls(calls: Any, old: Any) -> list[Any]:
    if not isinstance(calls, list):
        raise UserError("new tool calls must be a list of {name, arguments}")
    previous = list(old) if isinstance(old, list) else []
    out = []
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping) or not call.get("name"):
            raise UserError("each new tool call needs a name (and arguments)")
        arguments = call.get("arguments") or {}
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call_id = getattr(previous[i], "id", None) if i < len(previous) else None
        out.append(FunctionCall(id=str(call_id or f"replay-call-{i}"), name=str(call["name"]), arguments=raw))
    return out


def _llm_transform(value: Any) -> Transform:
    """An llm_response's new text, new tool calls (``[{name, arguments}]``) or ``{"text", "tool_calls"}``."""
    if isinstance(value, str):
        text, calls = value, None
    elif isinstance(value, list):
        text, calls = None, value
    elif isinstance(value, Mapping):
        text, calls = value.get("text"), value.get("tool_calls")
    else:
        raise UserError(f"an llm_response intervention needs text or tool calls, got {type(value).__name__}")

    def apply(result: Any) -> Any:
        if calls:
            result.content = _function_calls(calls, result.content)
            result.finish_reason = "function_calls"
            if text is not None:
                result.thought = str(text)
        elif text is not None:
            result.content = str(text)
            result.finish_reason = "stop"
        return result

    return apply


def _args_transform(step: Step, arguments: dict[str, Any]) -> Transform:
    def apply(result: Any) -> Any:
        calls = result.content if isinstance(result.content, list) else []
        match = [c for c in calls if step.call_id is not None and c.id == step.call_id and c.name == step.tool_name]
        match = match or [c for c in calls if c.name == step.tool_name]
        if not match:
            raise ReplayError(f"the recorded response has no tool call {step.tool_name!r} ({step.call_id})")
        match[0].arguments = json.dumps(arguments, ensure_ascii=False)
        return result

    return apply


def _handoff_transform(agent: Any, old_target: Any, new_target: str) -> Transform:
    handoffs = handoffs_of(agent)
    names = {h.target: name for name, h in handoffs.items() if hasattr(h, "target")}
    if new_target not in names:
        raise UserError(
            f"agent {name_of(agent, '?')!r} has no handoff to {new_target!r}; its handoff targets: {sorted(names)}"
        )
    old_name = names.get(str(old_target))

    def apply(result: Any) -> Any:
        calls = result.content if isinstance(result.content, list) else []
        match = [c for c in calls if c.name == old_name] or [c for c in calls if c.name in handoffs]
        if not match:
            raise ReplayError(f"the recorded response has no handoff call to {old_target!r}")
        match[0].name = names[new_target]
        return result

    return apply
