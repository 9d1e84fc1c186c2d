"""Stored text, safe for a terminal: no control character of a run reaches the user's terminal (issue 36 item 4).

A run's texts come from models, tools, fetched web pages and imported logs. Printed raw, an ``ESC`` sequence in
them could set the window title, write the clipboard (OSC 52), show a disguised link (OSC 8), clear the screen or
recolour what follows; a C1 control (``U+009B`` is a CSI on many terminals) and the Unicode direction overrides
(``U+202A``–``U+202E``, ``U+2066``–``U+2069``) reorder or hide text. rich's markup escaping does not touch any of
them (rich itself drops only BEL, BS, VT, FF and CR from a Text). So every CLI surface that prints stored or
imported text goes through this one helper:

* :func:`safe_text` — a text for plain output (``print``, one id per line): each unsafe character becomes a
  visible escape (``\\x1b``, ``\\u202e``); newline and tab stay.
* :func:`guarded` — a rich console whose every rendered segment is cleaned (the unsafe characters dropped: rich
  measures them as zero columns, so tables and trees keep their layout), whatever the call site printed: the last
  guard, through rich's public render hooks.
* :func:`safe_json` — JSON text with the characters JSON does not escape by itself (C1, direction overrides)
  written as ``\\uXXXX`` escapes: the same data, inert on a terminal.

The HTML report escapes its own way (``report/_page.py``: everything taken from the run is HTML-escaped).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["UNSAFE", "guarded", "safe_json", "safe_text", "strip_unsafe", "write_json"]

#: C0 controls but tab and newline, DEL, C1 controls, and the Unicode direction overrides / isolates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: What JSON leaves as it is (it escapes C0 itself): DEL, C1 and the direction marks.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: Any) -> str:
    """``text`` (any value, as ``str``) with every unsafe character written as a visible escape."""
    value = text if isinstance(text, str) else str(text)
    return UNSAFE.sub(_visible, value) if UNSAFE.search(value) else value


def strip_unsafe(text: str) -> str:
    """``text`` without its unsafe characters (what a guarded console prints)."""
    return UNSAFE.sub("", text) if UNSAFE.search(text) else text


def safe_json(value: Any) -> str:
    """``value`` as indented JSON (non-ASCII kept readable) whose unsafe characters are ``\\uXXXX`` escapes."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def write_json(value: Any) -> None:
    """``value`` as :func:`safe_json` on stdout (``--json``)."""

    sys.stdout.write(safe_json(value) + "\n")


class _Cleaned:
    """A renderable printed through :func:`guarded`: its segments, cleaned."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Any, options: Any) -> Iterable[Any]:
        from rich.segment import Segment

        for segment in console.render(self.renderable, options):
            text = segment.text
            if segment.control is None and text and UNSAFE.search(text):
                yield Segment(strip_unsafe(text), segment.style)
            else:
                yield segment

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.renderable)


def guarded(console: Any) -> Any:
    """``console`` (a rich Console), with a render hook that cleans everything it prints from now on (once: a
    console guarded already is returned as it is)."""
    from rich.console import RenderHook

    class _Guard(RenderHook):
        def process_renderables(self, renderables: list[Any]) -> list[Any]:
            return [r if isinstance(r, _Cleaned) else _Cleaned(r) for r in renderables]

    if not getattr(console, "_causaltrace_guarded", False):
        console.push_render_hook(_Guard())
        console._causaltrace_guarded = True
    return console

