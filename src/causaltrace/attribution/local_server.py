"""The local model server's process: llama.cpp's OpenAI-compatible server, plus a watchdog that stops it once no
command holds its lease.

Why: a command releases the server at its end (:func:`causaltrace.attribution.local_model.release_server`), but a
command that is killed (SIGKILL, a CI timeout, an OOM kill) never gets there — the kernel drops its lease, and a
~3 GB server used to keep running for good. The watchdog reads the same lease the commands hold
(``flock(LOCK_SH)`` on ``server.lease``): when nobody has held it for ``--idle-s`` seconds (default 60,
``CAUSALTRACE_LOCAL_IDLE_S``) and the server is not *kept* (``--keep-server``, recorded in ``server.json``), the
server stops itself (SIGTERM to its own process, which uvicorn handles after the request it is serving) and
removes its ``server.json``. Until a lease has been seen it waits at least ``--startup-grace-s`` seconds (the
command that starts the server takes its lease once the server answers).

Run by :func:`~causaltrace.attribution.local_model.ensure_server` as
``python -m causaltrace.attribution.local_server --state-dir DIR [--idle-s N] -- <llama_cpp.server arguments>``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path

__all__ = ["lease_held", "main", "watch"]


def lease_held(lease: Path, *, unreadable: bool = True) -> bool:
    """Whether any process holds a shared lease on ``lease`` (an exclusive lock cannot be taken beside one);
    ``unreadable`` when the file cannot be opened (an unwritable home: the watchdog then never stops on leases)."""
    try:
        fh = open(lease, "a")
    except OSError:
        return unreadable
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def _state(state: Path) -> dict:
    try:
        data = json.loads(state.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def watch(state_dir: Path, *, idle_s: float, startup_grace_s: float, stop: threading.Event | None = None,
          poll_s: float | None = None, pid: int | None = None) -> bool:
    """Block until no lease has been held for ``idle_s`` seconds while the server is not kept, then return True;
    return False when ``stop`` is set first. The thread body of the watchdog.

    The start-up grace ends once a lease was seen or ``server.json`` names this server (``pid``, default this
    process): the starting command writes it just before it takes its lease."""
    pid = os.getpid() if pid is None else pid
    lease, state = state_dir / "server.lease", state_dir / "server.json"
    poll = poll_s if poll_s is not None else max(0.2, min(5.0, idle_s / 4))
    started = time.monotonic()
    idle_since: float | None = None
    seen = False  # a lease was held once: the starting command has taken its own, the grace is over
    stop = stop or threading.Event()
    while not stop.wait(poll):
        now = time.monotonic()
        held = lease_held(lease)
        recorded = _state(state)
        seen = seen or held or recorded.get("pid") == pid
        if held or recorded.get("kept") or (not seen and now - started < startup_grace_s):
            idle_since = None
            continue
        idle_since = idle_since if idle_since is not None else now
        if now - idle_since >= idle_s:
            return True
    return False


def _stop_self(state_dir: Path, idle_s: float) -> None:
    print(f"causaltrace: no command has held the local model's lease for {idle_s:.0f} s: stopping the server",
          flush=True)
    state = state_dir / "server.json"
    with contextlib.suppress(OSError, ValueError):
        if json.loads(state.read_text()).get("pid") == os.getpid():
            state.unlink()
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, _, llama_args = _split(argv)
    parser = argparse.ArgumentParser(prog="python -m causaltrace.attribution.local_server")
    parser.add_argument("--state-dir", type=Path, required=True, help="the home's local_model/ folder")
    parser.add_argument("--idle-s", type=float, default=float(os.environ.get("CAUSALTRACE_LOCAL_IDLE_S", "60")),
                        help="stop after this many seconds with no command holding the lease")
    parser.add_argument("--startup-grace-s", type=float, default=180.0,
                        help="never stop in the first seconds (the starting command takes its lease after start)")
    args = parser.parse_args(ours)

    def guard() -> None:
        if watch(args.state_dir, idle_s=args.idle_s, startup_grace_s=args.startup_grace_s):
            _stop_self(args.state_dir, args.idle_s)

    threading.Thread(target=guard, name="causaltrace-local-watchdog", daemon=True).start()
    sys.argv = ["llama_cpp.server", *llama_args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


def _split(argv: list[str]) -> tuple[list[str], str, list[str]]:
    if "--" not in argv:
        return argv, "", []
    i = argv.index("--")
    return argv[:i], "--", argv[i + 1:]


if __name__ == "__main__":
    main()
