"""What the command modules of :mod:`causaltrace.cli` share: the store of ``--db``, consoles, JSON output, the
status colours and text shortening.

Kept in one place so every command prints the same way (ARCHITECTURE "CLI conventions"); the parser helpers that
the replay half shares with this package (``Parser``, ``open_store``, ``write_output``) live in
:mod:`causaltrace._cli_replay` so the two never import each other in a circle.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from causaltrace._cli_replay import open_store

__all__ = ["STATUS_STYLE", "console", "csv_values", "print_json", "short", "store", "wide_console"]

#: rich style of each run / step status
STATUS_STYLE = {
    "success": "green",
    "failure": "red",
    "unknown": "yellow",
    "incomplete": "magenta",
    "running": "cyan",
    "ok": "green",
    "error": "bold red",
    "unset": "dim",
}


def store(args: argparse.Namespace, *, readonly: bool = False) -> Any:
    """The store of ``--db``; ``readonly`` for the inspection commands (they never migrate or write it)."""
    return open_store(args, readonly=readonly)


def console(stream: TextIO | None = None, *, width: int | None = None) -> Any:
    """A rich console on ``stream`` (stdout), ``width`` columns wide; by default the terminal's width on a tty,
    and on a pipe ``$COLUMNS`` or 160 (rich's 80-column default for pipes would cut ids and step text)."""
    from rich.console import Console

    out = stream or sys.stdout
    if width is None and not out.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else 160
    return Console(file=out, highlight=False, soft_wrap=False, width=width)


def wide_console(stream: TextIO) -> Any:
    """A console for the benchmark tables: the terminal's width on a tty, 220 columns on a pipe."""
    from rich.console import Console

    return Console(file=stream, highlight=False, soft_wrap=False, width=None if stream.isatty() else 220)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (``--json``)."""
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def short(text: str | None, width: int = 80) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def csv_values(values: Sequence[str] | None) -> list[str]:
    """The values of a repeatable, comma-separated option (``--ablate a,b --ablate c``)."""
    return [v.strip() for raw in values or () for v in raw.split(",") if v.strip()]
