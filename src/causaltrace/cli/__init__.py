"""The ``causaltrace`` command: inspect stored runs, import / export / pull traces, diagnose, repair, benchmark.

Conventions (ARCHITECTURE "CLI conventions"): inspection commands print JSON to stdout with ``--json``; ``import``
prints one run id per line; ``export`` writes to stdout unless ``-o FILE`` (its directory is created). A user error
— a bad argument, a bad input file, any problem with the store — prints one line on stderr and exits with 2; an
internal error exits with 1 and points to ``--debug`` (which shows the traceback). The inspection commands (``runs``,
``show``, ``export``, ``report``, ``pairs export``) open the store read-only: they work in a read-only directory and
never migrate or write it.

One module per command group, each with its parser (``add_…_commands(sub)``) and its handlers (``cmd_…``):
:mod:`~causaltrace.cli.inspection` (runs, show, report), :mod:`~causaltrace.cli.transfer` (import, pull, export),
:mod:`~causaltrace.cli.run_team` (run), :mod:`~causaltrace.cli.diagnose`, :mod:`~causaltrace.cli.bench`, :mod:`~causaltrace.cli.local`; the replay half
(repair, pairs, demo) is :mod:`causaltrace._cli_replay`. A new command is a new ``add_…`` call in
:func:`build_parser`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext

from causaltrace._cli_replay import EXIT_USER_ERROR, Parser, add_replay_commands
from causaltrace.cli.bench import add_bench_commands
from causaltrace.cli.common import guard_output
from causaltrace.cli.diagnose import add_diagnose_command
from causaltrace.cli.fleet import add_stats_command
from causaltrace.cli.inspection import add_inspection_commands, add_report_command
from causaltrace.cli.interrupt import stop_on_signals
from causaltrace.cli.local import add_local_commands, release_local_server
from causaltrace.cli.run_team import add_run_command
from causaltrace.cli.transfer import add_transfer_commands
from causaltrace.exceptions import CausaltraceError, UserError
from causaltrace.report.terminal import safe_text

__all__ = ["build_parser", "main"]

EXIT_INTERNAL_ERROR = 1
#: The pip extra that brings each optional top-level module a command may import (a missing one is a user error).
_EXTRA_OF = {"autogen_agentchat": "autogen", "autogen_core": "autogen", "autogen_ext": "autogen",
             "smolagents": "smolagents", "docker": "docker", "litellm": "llm", "psycopg": "postgres"}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``causaltrace`` command (subcommands in the order ``--help`` lists them)."""
    parser = Parser(
        prog="causaltrace",
        description="Trace LLM multi-agent runs, find the decisive error of a failed run, and prove it by replay.",
    )
    parser.add_argument("--db", help="the store: a file path or a postgresql:// URL (default: $CAUSALTRACE_DB, "
                        "else $CAUSALTRACE_HOME/causaltrace.db)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_inspection_commands(sub)
    add_transfer_commands(sub)
    add_run_command(sub)
    add_diagnose_command(sub)
    add_stats_command(sub)
    add_bench_commands(sub)
    add_replay_commands(sub)
    add_local_commands(sub)
    add_report_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``causaltrace`` command; returns the exit code.

    Run as the command (``argv`` None: the process's own arguments), it also guards the process's output streams
    (:func:`~causaltrace.cli.common.guard_output`: an unwritable or non-UTF output is never a traceback) and stops
    on SIGINT / SIGTERM as :mod:`~causaltrace.cli.interrupt` says (exit 130 / 143 within 2 s)."""
    finish = guard_output() if argv is None else None
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or an argument error's one line: the output's fate still decides the code
        if finish is None or not isinstance(exc.code, int):
            raise
        raise SystemExit(finish(exc.code)) from None
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USER_ERROR
    func: Callable[[argparse.Namespace], int] = args.func
    signals = stop_on_signals(keep_server=bool(getattr(args, "keep_server", False))) if argv is None else nullcontext()
    try:
        with signals:
            code = _run(func, args)
    finally:
        release_local_server(args)
    return finish(code) if finish is not None else code


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run one command, turning its errors into the exit codes of the module docstring; an error's line may carry
    imported text (a file's, a server's, a user module's), so its control characters are shown escaped."""
    try:
        return func(args)
    except UserError as exc:
        print(f"causaltrace: error: {safe_text(exc.message)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except CausaltraceError as exc:
        if args.debug:
            raise
        print(f"causaltrace: error: {safe_text(exc.message)} (run with --debug for details)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    except KeyboardInterrupt:
        print("causaltrace: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        extra = _EXTRA_OF.get((exc.name or "").split(".")[0]) if isinstance(exc, ModuleNotFoundError) else None
        if extra is not None:  # a framework extra is not installed: a user error naming the extra
            print(f"causaltrace: error: this command needs {exc.name!r}; install it with: "  # type: ignore[attr-defined]
                  f"pip install 'causaltrace[{extra}]'", file=sys.stderr)
            return EXIT_USER_ERROR
        if args.debug:
            raise
        print(f"causaltrace: internal error: {type(exc).__name__}: {safe_text(exc)} (run with --debug for the "
              "traceback)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
