"""Repair pairs as training data: JSONL in TRL's DPO format or OpenAI's preference fine-tuning format.

A pair's ``prompt`` is the exact recorded LLM request at the corrected step, in the framework's own message shape
(AutoGen ``model_dump`` of SystemMessage / UserMessage / AssistantMessage / FunctionExecutionResultMessage, or
smolagents ChatMessage dicts with content parts). Export turns each into chat messages a chat template renders:
``content`` is always a string; an assistant message that called tools carries ``tool_calls`` (``id``, ``type``,
``function: {name, arguments}``) and each tool result is a ``tool`` message with its ``tool_call_id`` (AutoGen);
smolagents' own ``tool-call`` / ``tool-response`` roles become ``assistant`` / ``user``, as smolagents itself sends
them to a model. Tool schemas become OpenAI function schemas (``{"type": "function", "function": {...}}``).

* ``trl-dpo`` — ``{"prompt": [...], "chosen": [assistant turn], "rejected": [assistant turn], "tools": [schemas],
  "metadata": {...}}``: TRL's conversational preference format, ``tools`` a LIST of JSON schemas, tool-call
  arguments as JSON objects (what tool-aware chat templates such as Qwen2.5's expect);
* ``openai-dpo`` — ``{"input": {"messages": [...], "tools": [...]}, "preferred_output": [...],
  "non_preferred_output": [...]}``: OpenAI's preference fine-tuning format, tool-call arguments as JSON strings
  (as the OpenAI API writes them); metadata kept under ``metadata``.

Only replay-verified pairs are exported unless ``include_predicted=True``, and only pairs of a *correction* (an edit
derived from a finding, issue 32 item 5) unless ``include_alternatives=True``: a flip by an alternative shows the
run could have gone otherwise, not that the rejected turn was wrong, so training on it teaches a guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from causaltrace.exceptions import UserError
from causaltrace.schema import RepairPair

__all__ = ["export_pairs", "normalise_messages", "pair_rows", "tool_schemas"]

_AUTOGEN_ROLES = {
    "SystemMessage": "system",
    "UserMessage": "user",
    "AssistantMessage": "assistant",
    "FunctionExecutionResultMessage": "tool",
}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if "text" in part:
                    parts.append(str(part["text"]))
                elif "content" in part:
                    parts.append(_text(part["content"]))
                elif "arguments" in part and "name" in part:
                    parts.append(f"{part['name']}({part['arguments']})")
                else:
                    parts.append(json.dumps(part, sort_keys=True))
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True, default=str)


def _tool_call(call: Any, index: int) -> dict[str, Any]:
    """An AutoGen ``FunctionCall`` dump or an OpenAI-style tool call → ``{id, type, function: {name, arguments}}``."""
    if not isinstance(call, dict):
        return {"id": f"call_{index}", "type": "function", "function": {"name": str(call), "arguments": {}}}
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return {"id": str(call.get("id") or call.get("call_id") or f"call_{index}"), "type": "function",
            "function": {"name": str(function.get("name")), "arguments": arguments if arguments is not None else {}}}


def _autogen_message(m: dict[str, Any]) -> list[dict[str, Any]]:
    kind = str(m.get("type"))
    content = m.get("content")
    if kind == "FunctionExecutionResultMessage" and isinstance(content, list):
        return [{"role": "tool", "tool_call_id": str(r.get("call_id")), "name": str(r.get("name") or ""),
                 "content": _text(r.get("content"))} for r in content if isinstance(r, dict)]
    if kind == "AssistantMessage" and isinstance(content, list):
        calls = [_tool_call(c, i) for i, c in enumerate(content)]
        return [{"role": "assistant", "content": _text(m.get("thought")), "tool_calls": calls}]
    return [{"role": _AUTOGEN_ROLES.get(kind, "user"), "content": _text(content)}]


def normalise_messages(messages: Any) -> list[dict[str, Any]]:
    """Framework request messages → chat messages a tool-aware chat template renders (module docstring)."""
    if not isinstance(messages, list):
        return []
    out: list[dict[str, Any]] = []
    for m in messages:
        if not isinstance(m, dict):
            out.append({"role": "user", "content": str(m)})
            continue
        if "role" not in m and "type" in m:
            out.extend(_autogen_message(m))
            continue
        role = {"tool-call": "assistant", "tool-response": "user", "tool_response": "user"}.get(
            str(m.get("role")), str(m.get("role") or "user"))
        message: dict[str, Any] = {"role": role, "content": _text(m.get("content"))}
        if isinstance(m.get("tool_calls"), list) and m["tool_calls"]:
            message["tool_calls"] = [_tool_call(c, i) for i, c in enumerate(m["tool_calls"])]
        if role == "tool" and m.get("tool_call_id") is not None:
            message["tool_call_id"] = str(m["tool_call_id"])
        out.append(message)
    return out


def tool_schemas(tools: Any) -> list[dict[str, Any]]:
    """Recorded tool schemas (AutoGen ``ToolSchema`` dicts or OpenAI function schemas) → OpenAI function schemas."""
    out = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
            out.append({"type": "function", "function": dict(tool["function"])})
            continue
        spec = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        if "name" in spec:
            out.append({"type": "function", "function": spec})
    return out


def _turn(turn: Any) -> list[dict[str, Any]]:
    if isinstance(turn, dict):
        message = {"role": str(turn.get("role") or "assistant"), "content": _text(turn.get("content"))}
        if isinstance(turn.get("tool_calls"), list) and turn["tool_calls"]:
            message["tool_calls"] = [_tool_call(c, i) for i, c in enumerate(turn["tool_calls"])]
        return [message]
    return [{"role": "assistant", "content": _text(turn)}]


def _openai_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same messages with tool-call arguments as JSON strings (the OpenAI API's wire form)."""
    out = []
    for m in messages:
        if "tool_calls" in m:
            m = {**m, "tool_calls": [
                {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"],
                                                                           ensure_ascii=False, default=str)}}
                for c in m["tool_calls"]]}
        out.append(m)
    return out


def _metadata(pair: RepairPair) -> dict[str, Any]:
    return {
        "pair_id": pair.pair_id,
        "run_id": pair.run_id,
        "task_id": pair.task_id,
        "agent": pair.agent,
        "step_index": pair.step_index,
        "step_kind": pair.step_kind,
        "minimality": pair.minimality,
        "crs": pair.crs,
        "consensus": pair.consensus,
        "verified_by": pair.verified_by,
        "replays_run": pair.replays_run,
        "replays_succeeded": pair.replays_succeeded,
        "replay_run_id": pair.replay_run_id,
        "basis": pair.basis,
    }


def pair_rows(
    pairs: Iterable[RepairPair],
    *,
    format: Literal["trl-dpo", "openai-dpo"] = "trl-dpo",
    include_predicted: bool = False,
    include_alternatives: bool = False,
) -> Iterator[dict[str, Any]]:
    """One export row per pair (replay-verified corrections only, unless ``include_predicted`` /
    ``include_alternatives``)."""
    if format not in ("trl-dpo", "openai-dpo"):
        raise UserError(f"unknown pair format {format!r}; use trl-dpo or openai-dpo")
    for pair in pairs:
        if pair.verified_by != "replay" and not include_predicted:
            continue
        if pair.basis == "alternative" and not include_alternatives:
            continue
        prompt = normalise_messages(pair.prompt)
        tools = tool_schemas(pair.tools)
        if format == "trl-dpo":
            yield {
                "prompt": prompt,
                "chosen": _turn(pair.chosen),
                "rejected": _turn(pair.rejected),
                "tools": tools,
                "metadata": _metadata(pair),
            }
        else:
            yield {
                "input": {"messages": _openai_arguments(prompt), "tools": tools},
                "preferred_output": _openai_arguments(_turn(pair.chosen)),
                "non_preferred_output": _openai_arguments(_turn(pair.rejected)),
                "metadata": _metadata(pair),
            }


def export_pairs(pairs: Iterable[RepairPair], **kwargs: Any) -> str:
    """The rows of :func:`pair_rows` as JSONL text."""
    return "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in pair_rows(pairs, **kwargs))
