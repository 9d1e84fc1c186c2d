"""Diffs for the report, fully HTML-escaped: a side-by-side line diff with word-level marks inside changed lines
(difflib), and the diff of a repair pair's two turns, which shows what a trainer learns from them.

A repair pair's ``rejected`` and ``chosen`` are chat turns (``content`` and ``tool_calls``). A corrected handoff
renames the transfer call and a corrected tool call changes its arguments while the text stays the same, so the
pair diff never folds a tool call away: it lists each call's change first (name, then argument by argument), and in
the line diff below every tool call's header line is kept in view even when unchanged, with its arguments decoded
from their JSON string (the OpenAI form) into one line per key.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any

from causaltrace.report._style import e
from causaltrace.schema import Step

__all__ = ["as_text", "call_changes", "original_of", "render_diff", "render_pair_diff", "turn_text"]

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
_CONTEXT = 3
_MAX_CHARS = 40_000
#: The first characters of a tool call's header line in :func:`turn_text` (never folded as unchanged).
CALL_MARK = "▸ tool call "
_VALUE_CHARS = 120


def as_text(value: Any) -> str:
    """A JSON payload as diffable text: strings as they are, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _words(old: str, new: str) -> tuple[str, str]:
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    left: list[str] = []
    right: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        da, db = e("".join(a[i1:i2])), e("".join(b[j1:j2]))
        if op == "equal":
            left.append(da)
            right.append(db)
            continue
        if da:
            left.append(f"<del>{da}</del>")
        if db:
            right.append(f"<ins>{db}</ins>")
    return "".join(left), "".join(right)


def _row(cls: str, ln: int | None, old: str, rn: int | None, new: str) -> str:
    return (f'<tr class="{cls}"><td class="ln">{"" if ln is None else ln}</td><td class="old">{old}</td>'
            f'<td class="ln">{"" if rn is None else rn}</td><td class="new">{new}</td></tr>')


def _equal_rows(a: list[str], b: list[str], i1: int, j1: int, n: int, pinned: Callable[[str], bool]) -> list[str]:
    """A run of ``n`` unchanged lines: the first and last :data:`_CONTEXT` and every pinned line, the rest folded
    into "⋯ k unchanged lines ⋯" rows."""
    keep = [k for k in range(n) if k < _CONTEXT or k >= n - _CONTEXT or pinned(a[i1 + k])]
    rows: list[str] = []
    last = -1
    for k in keep:
        if k - last > 1:
            rows.append(f'<tr class="skip"><td colspan="4">⋯ {k - last - 1} unchanged lines ⋯</td></tr>')
        cls = "same call" if pinned(a[i1 + k]) else "same"
        rows.append(_row(cls, i1 + k + 1, e(a[i1 + k]), j1 + k + 1, e(b[j1 + k])))
        last = k
    return rows


def _changed_rows(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int) -> list[str]:
    rows: list[str] = []
    for k in range(max(i2 - i1, j2 - j1)):
        la = a[i1 + k] if i1 + k < i2 else None
        lb = b[j1 + k] if j1 + k < j2 else None
        if la is not None and lb is not None:
            wa, wb = _words(la, lb)
            rows.append(_row("chg", i1 + k + 1, wa, j1 + k + 1, wb))
        elif la is not None:
            rows.append(_row("del", i1 + k + 1, f"<del>{e(la)}</del>", None, ""))
        else:
            rows.append(_row("add", None, "", j1 + k + 1, f"<ins>{e(lb)}</ins>"))
    return rows


def render_diff(original: Any, corrected: Any, *, left: str = "original", right: str = "corrected",
                pinned: Callable[[str], bool] | None = None) -> str:
    """A ``<table class="diff">``: ``original`` on the left, ``corrected`` on the right, changes marked. Unchanged
    lines far from a change fold away, except the lines ``pinned`` keeps."""
    keep = pinned or (lambda line: False)
    old, new = as_text(original)[:_MAX_CHARS], as_text(corrected)[:_MAX_CHARS]
    a, b = old.splitlines() or [""], new.splitlines() or [""]
    rows: list[str] = []
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            rows.extend(_equal_rows(a, b, i1, j1, i2 - i1, keep))
            continue
        removed += i2 - i1
        added += j2 - j1
        rows.extend(_changed_rows(a, b, i1, i2, j1, j2))
    summary = "no difference" if not (added or removed) else f"−{removed} / +{added} line(s)"
    return (f'<table class="diff"><thead><tr><th></th><th>{e(left)}</th><th></th><th>{e(right)}</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody><tfoot><tr><td colspan="4">{e(summary)}</td></tr></tfoot></table>')


# ------------------------------------------------------------------------------------------------- pair turns


def _turn(value: Any) -> dict[str, Any] | None:
    """``value`` as a chat turn (a one-message list is unwrapped), or None when it is not one."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and ("tool_calls" in value or "role" in value):
        return value
    return None


def _calls(turn: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """The turn's tool calls as ``(id, name, arguments)``; arguments given as a JSON string are decoded."""
    out: list[tuple[str, str, Any]] = []
    calls = turn.get("tool_calls")
    for i, call in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(call, dict):
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                pass
        out.append((str(call.get("id") or f"#{i + 1}"), str(fn.get("name") or "?"), args))
    return out


def turn_text(value: Any) -> str:
    """A turn as diffable lines: its text, then per tool call a header line (``▸ tool call 1: name · id``) and its
    arguments as indented JSON. Anything that is not a turn is :func:`as_text`."""
    turn = _turn(value)
    if turn is None:
        return as_text(value)
    text = str(turn.get("content") or "")
    parts = [text] if text or not turn.get("tool_calls") else []  # a turn of tool calls only starts with its first
    for n, (cid, name, args) in enumerate(_calls(turn), 1):
        parts.append(f"{CALL_MARK}{n}: {name} · id {cid}")
        parts.append(as_text(args) if args not in (None, "", {}) else "(no arguments)")
    return "\n".join(parts)


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _argument_changes(old: Any, new: Any) -> list[str]:
    """What changed between two calls' arguments, key by key when both are objects (HTML)."""
    if old == new:
        return []
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [f"arguments <code><del>{e(_value(old))}</del></code> → <code><ins>{e(_value(new))}</ins></code>"]
    out: list[str] = []
    for key in [*old, *(k for k in new if k not in old)]:
        if key not in new:
            out.append(f"<code>{e(key)}</code> removed (was <code><del>{e(_value(old[key]))}</del></code>)")
        elif key not in old:
            out.append(f"<code>{e(key)}</code> added: <code><ins>{e(_value(new[key]))}</ins></code>")
        elif old[key] != new[key]:
            out.append(f"<code>{e(key)}</code> <code><del>{e(_value(old[key]))}</del></code> → "
                       f"<code><ins>{e(_value(new[key]))}</ins></code>")
    return out


def call_changes(rejected: Any, chosen: Any) -> list[str]:
    """One HTML line per tool call that differs between the two turns (calls matched by id, else by position),
    and one saying whether the text changed; empty when neither turn calls a tool."""
    old_turn, new_turn = _turn(rejected), _turn(chosen)
    if old_turn is None or new_turn is None:
        return []
    old, new = _calls(old_turn), _calls(new_turn)
    if not old and not new:
        return []
    by_id = {cid: (name, args) for cid, name, args in new}
    out: list[str] = []
    for n, (cid, name, args) in enumerate(old, 1):
        match = by_id.pop(cid, None)
        if match is None and n - 1 < len(new) and new[n - 1][0] in by_id:
            match = by_id.pop(new[n - 1][0])
        if match is None:
            out.append(f"tool call {n} removed: <code><del>{e(name)}</del></code>")
            continue
        head = f"tool call {n} <code>{e(name)}</code>"
        if match[0] != name:
            head = f"tool call {n}: <code><del>{e(name)}</del></code> → <code><ins>{e(match[0])}</ins></code>"
        changes = _argument_changes(args, match[1])
        if match[0] != name or changes:
            out.append(head + (": " + "; ".join(changes) if changes else " (same arguments)"))
        else:
            out.append(f"{head}: unchanged")
    out.extend(f"tool call added: <code><ins>{e(name)}</ins></code> {e(_value(args))}" for name, args in by_id.values())
    same_text = str(old_turn.get("content") or "") == str(new_turn.get("content") or "")
    out.append("text unchanged" if same_text else "text changed (below)")
    return out


def render_pair_diff(rejected: Any, chosen: Any, *, left: str = "original (rejected)",
                     right: str = "corrected (chosen)") -> str:
    """The diff of a repair pair: the tool-call changes listed, then the line diff of the two turns with every
    tool call's header kept in view."""
    changes = call_changes(rejected, chosen)
    listed = f'<ul class="calls">{"".join(f"<li>{c}</li>" for c in changes)}</ul>' if changes else ""
    return listed + render_diff(turn_text(rejected), turn_text(chosen), left=left, right=right,
                                pinned=lambda line: line.startswith(CALL_MARK))


def original_of(step: Step | None, replacement: Any) -> Any:
    """What a replacement replaces: tool arguments, the code, or the step's text."""
    if step is None:
        return ""
    if isinstance(replacement, dict) and step.arguments is not None:
        return step.arguments
    code = step.inputs.get("code")
    if isinstance(code, str) and isinstance(replacement, str) and step.kind == "code_execution":
        return code
    if isinstance(replacement, str) and step.kind == "tool_call" and step.arguments:
        for key in ("code", "source", "script"):
            value = step.arguments.get(key)
            if isinstance(value, str):
                return value
    return step.content
