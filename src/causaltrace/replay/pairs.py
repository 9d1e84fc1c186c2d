"""Repair pairs as training data: JSONL in TRL's DPO format or OpenAI's preference fine-tuning format.

A pair's ``prompt`` is the exact recorded LLM request at the corrected step, in the framework's own message shape
(AutoGen ``model_dump`` of SystemMessage / UserMessage / AssistantMessage / FunctionExecutionResultMessage, or
smolagents ChatMessage dicts with content parts). Export normalises each to ``{"role", "content"}`` chat messages:

* ``trl-dpo`` — ``{"prompt": [...], "chosen": [assistant turn], "rejected": [assistant turn], "tools": "<json>",
  "metadata": {...}}`` (TRL's conversational preference format; ``tools`` as a JSON string of the tool schemas);
* ``openai-dpo`` — ``{"input": {"messages": [...], "tools": [...]}, "preferred_output": [...],
  "non_preferred_output": [...]}`` (metadata kept under ``metadata``).

Only replay-verified pairs are exported unless ``include_predicted=True``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from causaltrace.exceptions import UserError
from causaltrace.schema import RepairPair

__all__ = ["export_pairs", "normalise_messages", "pair_rows"]

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


def normalise_messages(messages: Any) -> list[dict[str, str]]:
    """Framework request messages → plain ``{"role", "content"}`` chat messages."""
    if not isinstance(messages, list):
        return []
    out = []
    for m in messages:
        if not isinstance(m, dict):
            out.append({"role": "user", "content": str(m)})
            continue
        role = m.get("role") or _AUTOGEN_ROLES.get(str(m.get("type")), "user")
        role = {"tool-call": "assistant", "tool-response": "tool", "tool_response": "tool"}.get(str(role), str(role))
        out.append({"role": role, "content": _text(m.get("content"))})
    return out


def _turn(turn: Any) -> list[dict[str, Any]]:
    if isinstance(turn, dict):
        return [turn]
    return [{"role": "assistant", "content": _text(turn)}]


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
    }


def pair_rows(
    pairs: Iterable[RepairPair],
    *,
    format: Literal["trl-dpo", "openai-dpo"] = "trl-dpo",
    include_predicted: bool = False,
) -> Iterator[dict[str, Any]]:
    """One export row per pair (replay-verified only, unless ``include_predicted``)."""
    if format not in ("trl-dpo", "openai-dpo"):
        raise UserError(f"unknown pair format {format!r}; use trl-dpo or openai-dpo")
    for pair in pairs:
        if pair.verified_by != "replay" and not include_predicted:
            continue
        prompt = normalise_messages(pair.prompt)
        tools = pair.tools if isinstance(pair.tools, list) else []
        if format == "trl-dpo":
            yield {
                "prompt": prompt,
                "chosen": _turn(pair.chosen),
                "rejected": _turn(pair.rejected),
                "tools": json.dumps(tools, sort_keys=True),
                "metadata": _metadata(pair),
            }
        else:
            yield {
                "input": {"messages": prompt, "tools": tools},
                "preferred_output": _turn(pair.chosen),
                "non_preferred_output": _turn(pair.rejected),
                "metadata": _metadata(pair),
            }


def export_pairs(pairs: Iterable[RepairPair], **kwargs: Any) -> str:
    """The rows of :func:`pair_rows` as JSONL text."""
    return "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in pair_rows(pairs, **kwargs))
