"""smolagents' half of an intervention: a neutral :class:`~causaltrace.protocols.CallEdit` of a model response
turned into a function from the recorded ``ChatMessage`` to the edited one (see ``_playback``'s table).

This module imports smolagents at its top; ``_playback.py`` imports it only when a playback is assembled.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction

from causaltrace.exceptions import ReplayError, UserError
from causaltrace.instrumentation.smolagents import _access as acc
from causaltrace.protocols import CallEdit
from causaltrace.schema import Step

__all__ = ["edit_transform"]


def edit_transform(edit: CallEdit, agents: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """The transform of the recorded message that applies ``edit`` (None for a result or arguments edit).
    ``agents``: agent key → the fresh agent tree's member (a code edit follows that agent's code tags)."""
    if edit.slot != "response":
        return None
    value, part = edit.value, edit.part
    if part == "whole":
        return _llm_transform(value)
    if part in ("thought", "plan"):
        return _segment_transform(str(edit.old or ""), value)
    if part == "tool_arguments":
        assert edit.step is not None
        return _args_transform(edit.step, value)
    if part == "final_answer":
        return _final_answer_transform(value)
    if part == "code":
        return _code_transform(agents.get(edit.call.agent_key), value)
    raise UserError(f"a smolagents replay cannot edit the {part!r} part of a model response")


def _set_content(message: Any, text: str) -> Any:
    message.content = text
    return message


def _text_transform(value: Any) -> Callable[[Any], Any]:
    return lambda message: _set_content(message, value if isinstance(value, str) else json.dumps(value))


def _llm_transform(value: Any) -> Callable[[Any], Any]:
    """An llm_response's new text, new tool calls (``[{name, arguments}]``) or ``{"text", "tool_calls"}``."""
    if isinstance(value, str):
        return _text_transform(value)
    text: Any = None
    calls: Any = None
    if isinstance(value, list):
        calls = value
    elif isinstance(value, Mapping):
        text, calls = value.get("text"), value.get("tool_calls")
    else:
        raise UserError(f"an llm_response intervention needs text or tool calls, got {type(value).__name__}")

    def apply(message: Any) -> Any:
        if text is not None:
            message.content = text
        if calls is not None:
            old = list(message.tool_calls or [])
            message.tool_calls = [
                ChatMessageToolCall(
                    id=old[i].id if i < len(old) else f"call_replay_{i}",
                    type="function",
                    function=ChatMessageToolCallFunction(name=str(c["name"]), arguments=c.get("arguments") or {}),
                )
                for i, c in enumerate(calls)
            ] or None
        return message

    return apply


def _segment_transform(original: str, value: str) -> Callable[[Any], Any]:
    """Reasoning / plan: replace that segment of the response text (the step's text, ``original``, minus any wrapper
    around the response), keeping the rest (the code block, the tool calls)."""

    def apply(message: Any) -> Any:
        content = acc.message_text(message)
        new = value
        at = original.find(content) if content else -1
        if content and at >= 0:  # the step wraps the response (a plan): unwrap the replacement the same way
            prefix, suffix = original[:at], original[at + len(content):]
            if new.startswith(prefix) and new.endswith(suffix) and len(new) >= len(prefix) + len(suffix):
                new = new[len(prefix): len(new) - len(suffix)]
            message.content = new
        elif original and original in content:
            message.content = content.replace(original, new, 1)
        else:
            message.content = new
        return message

    return apply


def _args_transform(step: Step, arguments: dict[str, Any]) -> Callable[[Any], Any]:
    def apply(message: Any) -> Any:
        calls = list(message.tool_calls or [])
        match = [tc for tc in calls if step.call_id is not None and str(tc.id) == step.call_id]
        if not match:
            match = [tc for tc in calls if tc.function.name == step.tool_name]
        if not match:
            raise ReplayError(f"the recorded response has no tool call {step.tool_name!r} ({step.call_id})")
        fn = match[0].function
        fn.arguments = json.dumps(arguments, ensure_ascii=False) if isinstance(fn.arguments, str) else dict(arguments)
        return message

    return apply


def _final_answer_transform(value: Any) -> Callable[[Any], Any]:
    def apply(message: Any) -> Any:
        calls = [tc for tc in (message.tool_calls or []) if tc.function.name == "final_answer"]
        if not calls:  # a forced final answer: the response text is the answer
            return _set_content(message, value if isinstance(value, str) else json.dumps(value))
        fn = calls[0].function
        args = fn.arguments
        parsed = json.loads(args) if isinstance(args, str) else args
        key = next(iter(parsed), "answer") if isinstance(parsed, Mapping) and len(parsed) == 1 else "answer"
        new = {key: value}
        fn.arguments = json.dumps(new, ensure_ascii=False) if isinstance(args, str) else new
        return message

    return apply


def _code_transform(agent: Any, code: str) -> Callable[[Any], Any]:
    tags = tuple(getattr(agent, "code_block_tags", None) or ("<code>", "</code>"))
    structured = acc.uses_structured_outputs(agent)

    def apply(message: Any) -> Any:
        content = acc.message_text(message)
        if structured:
            try:
                data = json.loads(content)
            except ValueError:
                data = None
            if isinstance(data, dict) and "code" in data:
                data["code"] = code
                return _set_content(message, json.dumps(data, ensure_ascii=False))
        return _set_content(message, _replace_code(content, code, tags))

    return apply


def _replace_code(content: str, code: str, tags: tuple[str, ...]) -> str:
    """The response text with the code between the code tags replaced (several blocks: the span from the first
    block's start to the last block's end); the whitespace around the code inside the tags is kept."""
    open_tag, close_tag = tags[0], tags[1]
    start = content.find(open_tag)
    if start < 0:
        return f"{content.rstrip()}\n{open_tag}\n{code.strip()}\n{close_tag}"
    inner_start = start + len(open_tag)
    last_open = content.rfind(open_tag)
    end = content.find(close_tag, last_open + len(open_tag))
    if end < 0:
        end = len(content)
    inner = content[inner_start:end]
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()):] if inner.strip() else ""
    return content[:inner_start] + lead + code.strip() + trail + content[end:]
