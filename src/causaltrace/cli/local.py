"""``causaltrace local status|stop``: the local model server that ``--model local`` starts, and the end-of-command
release of it (stopped unless ``--keep-server``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from causaltrace.cli.common import print_json

__all__ = ["add_local_commands", "cmd_local_status", "cmd_local_stop", "release_local_server"]


def add_local_commands(sub: Any) -> None:
    """Add ``local status`` and ``local stop`` to the ``causaltrace`` subcommands."""
    p = sub.add_parser("local", help="the local model server that --model local starts: status, stop")
    local = p.add_subparsers(dest="local_command", metavar="ACTION", required=True)
    a = local.add_parser("status", help="show the server of this $CAUSALTRACE_HOME (pid, address, memory)")
    a.add_argument("--json", action="store_true", help="print JSON (null when none is running)")
    a.set_defaults(func=cmd_local_status)
    a = local.add_parser("stop", help="stop the server of this $CAUSALTRACE_HOME (by its pid)")
    a.set_defaults(func=cmd_local_stop)


def cmd_local_status(args: argparse.Namespace) -> int:
    """Show the local model server of this ``$CAUSALTRACE_HOME`` (``--model local``), if one is running."""
    from causaltrace.attribution.local_model import server_status
    from causaltrace.config import causaltrace_home

    status = server_status()
    if args.json:
        print_json(status)
        return 0
    if status is None:
        print(f"no local model server is running for {causaltrace_home()}")
        return 0
    rss = f", {status['rss_mb']} MB RSS" if status["rss_mb"] is not None else ""
    how = "kept (--keep-server)" if status["kept"] else ("in use by a command" if status["in_use"] else "idle")
    print(f"local model server: pid {status['pid']}, {status['api_base']}{rss}, {how}; "
          "stop it with: causaltrace local stop")
    return 0


def cmd_local_stop(args: argparse.Namespace) -> int:
    """Stop the local model server of this ``$CAUSALTRACE_HOME`` (by its pid)."""
    from causaltrace.attribution.local_model import server_info, stop_server
    from causaltrace.config import causaltrace_home

    server = server_info()
    if server is None or not stop_server():
        print(f"no local model server is running for {causaltrace_home()}")
        return 0
    print(f"stopped the local model server (pid {server.pid})")
    return 0


def release_local_server(args: argparse.Namespace) -> None:
    """The end of a command: stop the local model server it used unless ``--keep-server`` (local_model.py), and
    say in one line when one is left running. Nothing happens when the command never touched the local model."""
    if "causaltrace.attribution.local_model" not in sys.modules:
        return
    from causaltrace.attribution.local_model import release_server

    try:
        server, why = release_server(keep=bool(getattr(args, "keep_server", False)))
    except OSError as exc:  # the state directory went away or became unwritable: say so, never mask the exit code
        print(f"causaltrace: could not release the local model server: {exc}", file=sys.stderr)
        return
    if server is not None:
        reason = "kept by --keep-server" if why == "kept" else "still in use by another command"
        print(f"causaltrace: the local model server is still running (pid {server.pid}, {reason}); "
              "stop it with: causaltrace local stop", file=sys.stderr)
