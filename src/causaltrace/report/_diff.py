"""A side-by-side line diff with word-level marks inside changed lines (difflib), fully HTML-escaped."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from causaltrace.report._style import e

__all__ = ["as_text", "render_diff"]

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
_CONTEXT = 3
_MAX_CHARS = 40_000


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


def render_diff(original: Any, corrected: Any, *, left: str = "original", right: str = "corrected") -> str:
    """A ``<table class="diff">``: ``original`` on the left, ``corrected`` on the right, changes marked."""
    old, new = as_text(original)[:_MAX_CHARS], as_text(corrected)[:_MAX_CHARS]
    a, b = old.splitlines() or [""], new.splitlines() or [""]
    rows: list[str] = []
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            span = list(range(i2 - i1))
            keep = span if len(span) <= 2 * _CONTEXT + 1 else span[:_CONTEXT] + [-1] + span[-_CONTEXT:]
            for k in keep:
                if k < 0:
                    rows.append(f'<tr class="skip"><td colspan="4">⋯ {len(span) - 2 * _CONTEXT} unchanged '
                                "lines ⋯</td></tr>")
                    continue
                rows.append(_row("same", i1 + k + 1, e(a[i1 + k]), j1 + k + 1, e(b[j1 + k])))
            continue
        n = max(i2 - i1, j2 - j1)
        removed += i2 - i1
        added += j2 - j1
        for k in range(n):
            la = a[i1 + k] if i1 + k < i2 else None
            lb = b[j1 + k] if j1 + k < j2 else None
            if la is not None and lb is not None:
                wa, wb = _words(la, lb)
                rows.append(_row("chg", i1 + k + 1, wa, j1 + k + 1, wb))
            elif la is not None:
                rows.append(_row("del", i1 + k + 1, f"<del>{e(la)}</del>", None, ""))
            else:
                rows.append(_row("add", None, "", j1 + k + 1, f"<ins>{e(lb)}</ins>"))
    summary = "no difference" if not (added or removed) else f"−{removed} / +{added} line(s)"
    return (f'<table class="diff"><thead><tr><th></th><th>{e(left)}</th><th></th><th>{e(right)}</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody><tfoot><tr><td colspan="4">{e(summary)}</td></tr></tfoot></table>')
