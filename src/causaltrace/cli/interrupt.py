"""What ``causaltrace`` does on Ctrl-C (SIGINT) or SIGTERM (issue 33 item 1): it stops within 2 s, the store
consistent, no process of its own left behind.

The handler runs in the main thread as soon as the signal arrives (Python runs it there when the main thread's wait
— the event loop's select, a join — is interrupted) and never returns:

1. no replay starts any more (:func:`causaltrace.replay.concurrency.request_stop`);
2. this process's descendants — the sandboxes' workers and whatever they started, the local model server this
   command started — are killed by pid (found in ``/proc``, so nothing a sandbox started inside escapes), reaped,
   and their empty sandbox cgroups removed. ``--keep-server`` spares the server once it answers and is recorded for
   ``causaltrace local stop``; one still starting is killed (nothing could find it later). The Docker sandbox
   containers this process holds are removed (``force``: killed) through the engine, beside the next steps;
3. the running repair search stores what it tried, marked interrupted, in one transaction
   (:func:`causaltrace.replay.concurrency.save_interrupted`). It is bounded: when the interrupted main thread holds
   the store at that instant, the save is skipped and the unfinished transaction rolls back, so the store is
   always either before or after a whole write;
4. the spans are flushed (:data:`FLUSH_S`, 0.5 s at most);
5. the process exits with 130 (SIGINT) or 143 (SIGTERM) through ``os._exit``: replay threads are never joined.

Why not ``KeyboardInterrupt``: unwinding through ``asyncio.run`` cancels every task and then joins the default
executor's threads, and the interpreter's exit joins the rest — a replay stuck in a framework call never returns, so
Ctrl-C did nothing. A second signal while stopping exits at once.

Installed only when ``causaltrace`` runs as a command (``main()`` with the process's own arguments, in the main
thread); ``main(argv)`` called in-process (tests, embedding) keeps Python's default handling.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["FLUSH_S", "SAVE_S", "descendants", "kill_descendants", "stop_on_signals"]

#: How long the interrupted search's save may take, and the span flush after it (the whole stop stays under 2 s).
SAVE_S = 0.8
FLUSH_S = 0.5
_CGROUP_ROOT = Path("/sys/fs/cgroup")


@contextlib.contextmanager
def stop_on_signals(*, keep_server: bool = False) -> Iterator[None]:
    """Stop the process as the module docstring says on SIGINT / SIGTERM within the block (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopper = _Stopper(keep_server)
    previous = {sig: signal.signal(sig, stopper) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Stopper:
    """The signal handler (module docstring)."""

    def __init__(self, keep_server: bool) -> None:
        self.keep_server = keep_server
        self.stopping = False

    def __call__(self, signum: int, frame: Any) -> None:
        code = 128 + signum
        if self.stopping:  # a second signal while stopping: now
            os._exit(code)
        self.stopping = True
        started = time.monotonic()
        concurrency = sys.modules.get("causaltrace.replay.concurrency")
        if concurrency is not None:
            concurrency.request_stop()
        containers = _background(_kill_containers)
        killed = kill_descendants(spare=self._spared())
        saved = _bounded(concurrency.save_interrupted, SAVE_S) if concurrency is not None else 0
        _bounded(_flush_spans, FLUSH_S)
        containers.join(max(0.0, 1.6 - (time.monotonic() - started)))
        _bounded(_flush_stdout, 0.1)
        what = [f"{killed} child process{'es' if killed != 1 else ''} stopped" if killed else "",
                "the repair search so far is stored" if saved else ""]
        shown = "; ".join(w for w in what if w)
        _say(f"causaltrace: interrupted ({time.monotonic() - started:.1f} s{'; ' + shown if shown else ''})")
        os._exit(code)

    def _spared(self) -> set[int]:
        """The local model server's pid when ``--keep-server`` keeps it (it outlives the command by design)."""
        local = sys.modules.get("causaltrace.attribution.local_model")
        if not self.keep_server or local is None:
            return set()
        with contextlib.suppress(Exception):
            server = local.server_info()
            if server is not None:
                return {server.pid}
        return set()


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), read from ``/proc`` (empty where there is none)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path("/proc", entry.name, "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
            children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(*, spare: set[int] | frozenset[int] = frozenset(), reap_s: float = 0.3) -> int:
    """SIGKILL this process's descendants except ``spare`` and theirs; reap the direct children (a container's
    init may never do it) and remove the sandboxes' empty cgroups of this process. Returns how many were killed."""
    me = os.getpid()
    spared = set(spare)
    for pid in spare:
        spared.update(descendants(pid))
    victims = [pid for pid in descendants(me) if pid not in spared]
    for pid in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + reap_s
    waiting = set(victims)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child (a grandchild) or already reaped
                done = pid
            if done:
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)
    for group in _CGROUP_ROOT.glob(f"*/causaltrace-{me}-*"):
        with contextlib.suppress(OSError):
            group.rmdir()
    return len(victims)


def _kill_containers() -> None:
    """Remove (``force``: kill first) the Docker sandbox containers this process holds — a worker's, or a one-shot
    run's still in its call — found among this process's objects by the sandbox's label; their ``finally`` that
    would remove them never runs after ``os._exit``."""
    if "causaltrace.replay.sandbox.docker_sandbox" not in sys.modules or "docker.models.containers" not in sys.modules:
        return
    from docker.models.containers import Container

    for container in [o for o in gc.get_objects() if isinstance(o, Container)]:
        with contextlib.suppress(Exception):
            if container.labels.get("causaltrace.sandbox") == "1":
                container.remove(force=True, v=True)


def _flush_spans() -> None:
    if "opentelemetry.sdk.trace" not in sys.modules:
        return
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush(int(FLUSH_S * 1000))


def _flush_stdout() -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()


def _background(work: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=work, name="causaltrace-stop", daemon=True)
    thread.start()
    return thread


def _bounded(work: Callable[[], Any], timeout_s: float) -> Any:
    """``work()`` in a daemon thread, waited for ``timeout_s`` at most (the main thread, interrupted, may hold a
    lock it needs); its result, or None when it did not finish or raised."""
    result: list[Any] = []

    def run() -> None:
        with contextlib.suppress(Exception):
            result.append(work())

    _background(run).join(timeout_s)
    return result[0] if result else None


def _say(line: str) -> None:
    """One line on stderr, written to the file descriptor (the interrupted thread may hold the stream's lock); on a
    terminal, over a live status line, with the cursor shown again (a live display hides it)."""
    terminal = os.isatty(2) and os.environ.get("TERM", "") not in ("dumb", "")
    text = ("\r\x1b[2K" if terminal else "") + line + "\n" + ("\x1b[?25h" if terminal else "")
    with contextlib.suppress(OSError):
        os.write(2, text.encode(errors="replace"))
