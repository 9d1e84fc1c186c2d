"""Test helper (issue 33 item 2): what Phoenix shows of causaltrace's spans against OpenInference's own instrumentor's.

    from _oi_parity import missing_keys, conversation_mismatches

    missing = missing_keys(oi_spans, ct_spans)          # {span kind: [attribute keys OI fills, ct does not]}
    wrong = conversation_mismatches(oi_spans, ct_spans)  # LLM calls whose messages differ, one line each

Spans are Phoenix REST answers (``/v1/projects/{p}/spans``: ``span_kind``, ``start_time``, flat ``attributes``).
Keys are compared with their list indices stripped (``llm.input_messages.3.message.role`` →
``llm.input_messages.message.role``), per OpenInference span kind. Values: each LLM call's input and output
messages — roles, texts, tool-call names, arguments (as JSON) and ids wherever OpenInference fills them (causaltrace
also structures the calls smolagents keeps as ``Calling tools: [...]`` text) — in call order.

Where OpenInference's instrumentors write a framework's own shape, the comparison maps it to the shape causaltrace
writes (OpenAI's roles, as the brief asks, and as OpenInference's other instrumentors write them):

* AutoGen's ``SystemMessage`` is role ``developer`` there, ``system`` here; a ``FunctionExecutionResultMessage`` is
  role ``function`` with its results as JSON under ``llm.input_messages.N.function.M`` there, one ``tool`` message
  per result here (``message.content``, ``message.tool_call_id``, ``message.name``) — :data:`EQUIVALENT_KEYS`;
* smolagents' ``tool-call`` / ``tool-response`` roles are ``assistant`` (with structured ``tool_calls``) / ``tool``
  here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["EQUIVALENT_KEYS", "conversation_mismatches", "key_table", "messages_of", "missing_keys", "shape"]

_INDEX = re.compile(r"\.\d+(?=\.|$)")
KINDS = ("LLM", "TOOL", "AGENT", "CHAIN")
#: An OpenInference key → the causaltrace keys that carry the same fields.
EQUIVALENT_KEYS: dict[str, frozenset[str]] = {
    "llm.input_messages.function": frozenset({"llm.input_messages.message.content",
                                              "llm.input_messages.message.tool_call_id",
                                              "llm.input_messages.message.name"}),
}
_ROLES = {"developer": "system", "function": "tool", "tool-call": "assistant", "tool-response": "tool"}
_MESSAGE = re.compile(r"^(llm\.(?:input|output)_messages)\.(\d+)\.(.+)$")


def shape(key: str) -> str:
    return _INDEX.sub("", key)


def _keys(spans: Iterable[Mapping[str, Any]], kind: str) -> set[str]:
    return {shape(key) for s in spans if s.get("span_kind") == kind for key in s.get("attributes") or {}}


def missing_keys(oi: list[Mapping[str, Any]], ct: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per span kind, the attribute keys OpenInference's spans have and causaltrace's have not."""
    out = {}
    for kind in KINDS:
        ours = _keys(ct, kind)
        out[kind] = sorted(k for k in _keys(oi, kind) if k not in ours and not EQUIVALENT_KEYS.get(k, {"-"}) <= ours)
    return out


def key_table(oi: list[Mapping[str, Any]], ct: list[Mapping[str, Any]]) -> list[tuple[str, int, int, int]]:
    """(span kind, OpenInference keys, causaltrace keys, OpenInference keys causaltrace lacks) per kind."""
    missing = missing_keys(oi, ct)
    return [(kind, len(_keys(oi, kind)), len(_keys(ct, kind)), len(missing[kind])) for kind in KINDS]


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def messages_of(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The messages under ``prefix`` (``llm.input_messages`` / ``llm.output_messages``), normalised: role, text (the
    content, or the text parts joined), tool calls as (name, arguments, id), tool_call_id."""
    raw: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = _MESSAGE.match(key)
        if match and match.group(1) == prefix:
            raw.setdefault(int(match.group(2)), {})[match.group(3)] = value
    out: list[dict[str, Any]] = []
    for index in sorted(raw):
        fields = raw[index]
        results = sorted((k for k in fields if re.fullmatch(r"function\.\d+", k)), key=lambda k: int(k.split(".")[1]))
        if results:  # OpenInference's AutoGen function results: one tool message each
            for k in results:
                result = _json(fields[k])
                out.append({"role": "tool", "text": str(result.get("content", "")), "tool_calls": [],
                            "tool_call_id": result.get("call_id")})
            continue
        role = str(fields.get("message.role", ""))
        parts = sorted((k for k in fields if re.fullmatch(r"message\.contents\.\d+\.message_content\.text", k)),
                       key=lambda k: int(k.split(".")[2]))
        text = fields.get("message.content") if parts == [] else "\n".join(str(fields[k]) for k in parts)
        calls = {}
        for k, value in fields.items():
            found = re.fullmatch(r"message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)", k)
            if found:
                calls.setdefault(int(found.group(1)), {})[found.group(2)] = value
        out.append({
            "role": _ROLES.get(role, role),
            "text": text or "",
            "tool_calls": [(c.get("function.name"), _json(c.get("function.arguments")), c.get("id"))
                           for _, c in sorted(calls.items())],
            "tool_call_id": fields.get("message.tool_call_id"),
        })
    return out


def _calls(spans: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted((s for s in spans if s.get("span_kind") == "LLM"), key=lambda s: s["start_time"])


def _differences(what: str, theirs: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[str]:
    out = []
    if len(theirs) != len(ours):
        out.append(f"{what}: {len(theirs)} messages from OpenInference, {len(ours)} from causaltrace")
    for i, (a, b) in enumerate(zip(theirs, ours, strict=False)):
        for field in ("role", "text"):
            if a[field] != b[field]:
                out.append(f"{what} message {i} {field}: {a[field]!r} != {b[field]!r}")
        if a["tool_calls"] and a["tool_calls"] != b["tool_calls"]:  # causaltrace may show calls OI keeps as text
            out.append(f"{what} message {i} tool_calls: {a['tool_calls']!r} != {b['tool_calls']!r}")
        if a["tool_call_id"] is not None and a["tool_call_id"] != b["tool_call_id"]:
            out.append(f"{what} message {i} tool_call_id: {a['tool_call_id']!r} != {b['tool_call_id']!r}")
    return out


def conversation_mismatches(oi: list[Mapping[str, Any]], ct: list[Mapping[str, Any]]) -> list[str]:
    """Where the LLM calls' messages differ (call by call, in start order); empty when they all agree."""
    theirs, ours = _calls(oi), _calls(ct)
    out = [] if len(theirs) == len(ours) else [f"{len(theirs)} LLM spans from OpenInference, {len(ours)} ours"]
    for n, (a, b) in enumerate(zip(theirs, ours, strict=False)):
        for prefix in ("llm.input_messages", "llm.output_messages"):
            out += _differences(f"call {n} {prefix}", messages_of(a["attributes"], prefix),
                                messages_of(b["attributes"], prefix))
    return out
