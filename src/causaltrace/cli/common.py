"""What the command modules of :mod:`causaltrace.cli` share: the store of ``--db``, consoles, JSON output, the
status colours and text shortening, and the guard on the process's own output streams.

Output that cannot be written never becomes a traceback (issue 33, "Bad input"): :func:`guard_output` makes
``sys.stdout`` / ``sys.stderr`` replace what their encoding cannot show (an ASCII or Latin-1 terminal gets ``?``
for ``→``), and turns a write error into a note instead of an exception — a closed pipe (``| head -1``) drops the
rest of the output and the command finishes with its own exit code, and so does a closed stdout (``>&-``: its
descriptor is pointed at ``/dev/null`` first, so no file the command opens later — the store — takes descriptor 1
and receives the output). A full device (``> /dev/full``) or any other write error is a user error: one line on
stderr at the end and exit code 2, as ``export -o FILE`` on a full disk is (a command that already ended with a
non-zero code keeps it: it says more).

Everything printed goes through :mod:`causaltrace.report.terminal` (issue 36 item 4): :func:`console` and
:func:`wide_console` are guarded consoles (no control character of a stored or imported text reaches the
terminal) and :func:`print_json` writes :func:`~causaltrace.report.terminal.safe_json`.

Kept in one place so every command prints the same way (ARCHITECTURE "CLI conventions"); the parser helpers that
the replay half shares with this package (``Parser``, ``open_store``, ``write_output``) live in
:mod:`causaltrace._cli_replay` so the two never import each other in a circle.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from causaltrace._cli_replay import EXIT_USER_ERROR, open_store
from causaltrace.report.terminal import guarded, safe_json

__all__ = ["STATUS_STYLE", "GuardedStream", "console", "csv_values", "guard_output", "print_json", "short", "store",
           "wide_console"]

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
    """A guarded rich console on ``stream`` (stdout), ``width`` columns wide; by default the terminal's width on a
    tty, and on a pipe ``$COLUMNS`` or 160 (rich's 80-column default for pipes would cut ids and step text)."""
    from rich.console import Console

    out = stream or sys.stdout
    if width is None and not out.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else 160
    return guarded(Console(file=out, highlight=False, soft_wrap=False, width=width))


def wide_console(stream: TextIO) -> Any:
    """A guarded console for the benchmark tables: the terminal's width on a tty, 220 columns on a pipe."""
    from rich.console import Console

    return guarded(Console(file=stream, highlight=False, soft_wrap=False, width=None if stream.isatty() else 220))


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (``--json``), its control characters escaped."""
    sys.stdout.write(safe_json(value) + "\n")


def short(text: str | None, width: int = 80) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def csv_values(values: Sequence[str] | None) -> list[str]:
    """The values of a repeatable, comma-separated option (``--ablate a,b --ablate c``)."""
    return [v.strip() for raw in values or () for v in raw.split(",") if v.strip()]


class GuardedStream:
    """A text stream whose write errors are noted, not raised (module docstring): after the first one its file
    descriptor is pointed at ``/dev/null`` (the interpreter's own flush at exit then succeeds too) and the rest of
    the output is dropped. Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        #: the first write error (None while writing works); EPIPE means the reader went away
        self.error: OSError | None = None

    def write(self, text: str) -> int:
        if self.error is None:
            try:
                return self.stream.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if self.error is None:
            try:
                self.stream.flush()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.error = exc
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)

    def isatty(self) -> bool:
        return self.error is None and self.stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def guard_output() -> Callable[[int], int]:
    """Guard ``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` for the rest of the process (module docstring);
    returns the function that, given the command's exit code, flushes stdout and gives the code to exit with: the
    command's, or 2 with one line on stderr when stdout could not be written (a closed pipe is not an error: its
    reader chose to stop)."""
    streams: dict[str, GuardedStream] = {}
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        if getattr(sys, name) is None:  # the descriptor was closed when the process started (``>&-``)
            setattr(sys, name, _null_stream(fd))
        stream = getattr(sys, name)
        if name == "stdin" or isinstance(stream, GuardedStream):
            continue
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="replace")
        streams[name] = GuardedStream(stream)
        setattr(sys, name, streams[name])

    def finish(code: int) -> int:
        out = streams.get("stdout")  # sys.stdout itself may be a replay router's stream left installed (idle)
        if out is None:
            return code
        out.flush()
        if out.error is None or out.error.errno == errno.EPIPE:
            return code
        print(f"causaltrace: error: cannot write the output: {out.error.strerror or out.error}", file=sys.stderr)
        return code or EXIT_USER_ERROR

    return finish


def _null_stream(fd: int) -> TextIO:
    """A text stream on descriptor ``fd`` (0, 1 or 2, closed when the process started), now pointed at
    ``/dev/null``: what is written there is dropped, and no file the command opens later (the store) nor a child
    process can take the descriptor and receive the output."""
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    return open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="replace", closefd=False)
