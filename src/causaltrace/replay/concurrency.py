"""Concurrent replays of one step's proposals (``repair --concurrency N``), and the output capture they share.

**In-process, not worker processes** (issue 19 item 3 leaves the choice open). The replays of one step run
concurrently in this process: each on an event loop of its own in a daemon worker thread (:func:`in_own_loop`,
issue 36 item 3: whatever user code does there — block its thread, raise ``SystemExit`` out of a framework's task —
the search's loop keeps running and the replay's timeout fires), awaited from the search's loop. Why not worker
processes:

* the factory and the verifier are arbitrary Python objects — closures, lambdas, objects holding clients — in the
  Python API; a spawned process cannot receive them, and forking a process that runs an event loop, OpenTelemetry's
  export thread and the store's live writer thread is unsafe (a lock held by a thread that does not exist in the
  child deadlocks it);
* every replayed run is stored through the ONE live writer of this process (a child would need its own store
  connection and its own writer, and a kill would lose its rows);
* the costly part of a real repair is waiting, not computing: live model calls over the network and code executed
  in sandbox subprocesses. Waits overlap in one process. Nothing global is shared between replays: the playback
  core (:mod:`causaltrace.replay.playback`) holds no module state and a run's recording state lives in context
  variables.

The price: replays that are pure Python work (the scripted models of the fault suite) share one interpreter and
barely speed up; ``benchmarks/bench_repair_order.py --concurrency`` measures it. The default,
:func:`default_concurrency`, is ``min(4, CPU count)``: more replays in flight than that only adds replays that run
ahead and are thrown away once an earlier proposal flips.

**Same answer as one at a time.** :func:`in_order` starts up to N proposals at once but hands their results back in
proposal order; the search consumes them in that order and applies its stopping rules (the first flip, the budget)
exactly as the sequential search does, then cancels what is still in flight. The earliest flipping step, its most
minimal flipping proposal, the replays recorded and the progress lines are therefore those of ``--concurrency 1``;
results that ran ahead past the stop are discarded (counted, never recorded). A factory whose teams share mutable
state between builds (a counter, a "busy" flag) makes replays depend on their interleaving: such a factory needs
``--concurrency 1``.

**Output per replay.** ``contextlib.redirect_stdout`` swaps one process-wide stream, so concurrent replays would
mix their output. :func:`routed_output` installs, for the search's duration, streams that write to the buffer of
the replay running in the current context (:func:`captured`; asyncio tasks and ``asyncio.to_thread`` inherit it).
A write from another thread that carries no replay context (a framework's executor thread) goes to the one replay
running when there is only one, else to a shared buffer counted as unattributed; anything else — the search's own
progress lines — reaches the terminal as before.

**Never wrapped into a terminal display, and the terminal never gets a replay's late output** (issue 33 item 1).
A rich live display (``Console.status``, ``Live``) may have replaced ``sys.stdout`` / ``sys.stderr`` by its proxy,
which writes through its console — and a console without a fixed file writes to ``sys.stdout`` / ``sys.stderr``:
wrapping that proxy made the proxy and the router write into each other forever (``causaltrace demo`` froze in a
terminal). The router therefore wraps the stream under such a proxy (``rich_proxied_file``), never the proxy, and
the CLI's own status display redirects nothing. A replay that outlives the search — cancelled after it ran ahead,
or past its timeout, its worker thread still running — keeps writing to its own buffer: when the search ends while
threads it started are still alive, the routing streams stay installed, idle (a write from any other thread passes
straight through), instead of handing those threads the terminal.

**Stopping** (``causaltrace`` on SIGINT, :mod:`causaltrace.cli.interrupt`): :func:`request_stop` makes every
:func:`in_order` start nothing more, and :func:`save_interrupted` runs what each search registered with
:func:`on_interrupt` (the repair search stores what it tried, marked interrupted, in one transaction).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import io
import logging
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["CANCEL_GRACE_S", "OutputRouter", "UserCodeExit", "captured", "default_concurrency", "in_order",
           "in_own_loop", "on_interrupt", "request_stop", "routed_output", "save_interrupted", "stop_requested"]

T = TypeVar("T")

logger = logging.getLogger("causaltrace")

#: How long cancelled replays that ran ahead are waited for (a framework's cleanup may wait on a stuck call).
CANCEL_GRACE_S = 2.0

_BUFFER: contextvars.ContextVar[io.StringIO | None] = contextvars.ContextVar("causaltrace_replay_output",
                                                                              default=None)
_STOP = threading.Event()  # set once: no replay starts any more in this process (module docstring, "Stopping")
_SAVERS: list[Callable[[], None]] = []  # what the running searches store when the process is stopped


def default_concurrency() -> int:
    """Replays in flight per step by default: ``min(4, CPU count)`` (module docstring)."""
    return max(1, min(4, os.cpu_count() or 1))


class _RoutedStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` while a search runs: writes go to the current replay's buffer."""

    def __init__(self, router: OutputRouter, original: Any) -> None:
        self.router = router
        self.original = original

    def write(self, text: str) -> int:
        target = self.router.target()
        (target if target is not None else self.original).write(text)
        return len(text)

    def flush(self) -> None:
        if self.router.target() is None:
            self.original.flush()

    def isatty(self) -> bool:
        return self.router.target() is None and bool(getattr(self.original, "isatty", lambda: False)())

    def fileno(self) -> int:
        return int(self.original.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.original, "encoding", "utf-8"))


def _underlying(stream: Any) -> Any:
    """The stream under a rich live display's proxy (``rich_proxied_file``) or under another router's stream."""
    stream = getattr(stream, "rich_proxied_file", stream)
    return stream.original if isinstance(stream, _RoutedStream) else stream


class OutputRouter:
    """Where a write goes while replays run (module docstring): the replay's buffer, else the only replay's, else
    the unattributed buffer (another thread), else the terminal. Idle (no search running), only the threads that
    wrote for replays are still caught; everything else passes through."""

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.active: list[io.StringIO] = []
        self.unattributed = io.StringIO()
        self.searching = False
        #: threads that wrote, with no replay context, while the search ran: a framework's worker threads (the
        #: Thread objects, not their idents: an ident is reused by a later, unrelated thread)
        self.replay_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self.streams: tuple[_RoutedStream, _RoutedStream] | None = None
        self._lock = threading.Lock()

    def target(self) -> io.StringIO | None:
        buffer = _BUFFER.get()
        if buffer is not None:  # a replay's own context — also after its search ended (a thread that outlived it)
            return buffer
        if threading.get_ident() == self.owner and self.searching:
            return None
        thread = threading.current_thread()
        with self._lock:
            if not self.searching:
                return self.unattributed if thread in self.replay_threads else None
            self.replay_threads.add(thread)
            return self.active[0] if len(self.active) == 1 else self.unattributed

    def install(self, stdout: Any, stderr: Any) -> None:
        """Route ``sys.stdout`` / ``sys.stderr`` (over the streams under any live display's proxy) through this
        router, and start routing for a search run by the calling thread."""
        if self.streams is None:
            self.streams = _RoutedStream(self, _underlying(stdout)), _RoutedStream(self, _underlying(stderr))
        sys.stdout, sys.stderr = self.streams
        self.owner = threading.get_ident()
        self.searching = True

    @contextlib.contextmanager
    def replay(self) -> Iterator[io.StringIO]:
        """Capture this context's writes (one replay) into a fresh buffer."""
        buffer = io.StringIO()
        token = _BUFFER.set(buffer)
        with self._lock:
            self.active.append(buffer)
        try:
            yield buffer
        finally:
            with self._lock:
                self.active.remove(buffer)
            _BUFFER.reset(token)


_ROUTER: list[OutputRouter] = []  # the routers of the searches running (a stack: a nested search reuses the outer)


def _idle_router() -> OutputRouter | None:
    """The router a finished search left installed (idle), when ``sys.stdout`` / ``sys.stderr`` are still its."""
    out, err = (getattr(s, "rich_proxied_file", s) for s in (sys.stdout, sys.stderr))
    if isinstance(out, _RoutedStream) and isinstance(err, _RoutedStream) and out.router is err.router:
        return out.router
    return None


@contextlib.contextmanager
def routed_output() -> Iterator[OutputRouter]:
    """Install per-replay output routing on ``sys.stdout`` / ``sys.stderr`` for the block (reentrant). When the
    block ends while threads it started still run (a replay that outlived its search), the routing stays
    installed, idle, so they never write to the terminal (module docstring)."""
    if _ROUTER:
        yield _ROUTER[-1]
        return
    saved = sys.stdout, sys.stderr
    before = {t.ident for t in threading.enumerate()}
    router = _idle_router() or OutputRouter()
    router.install(*saved)
    _ROUTER.append(router)
    try:
        yield router
    finally:
        _ROUTER.pop()
        router.searching = False
        if not any(t.ident not in before for t in threading.enumerate()):
            sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """Capture what the current context prints (one replay) while a :func:`routed_output` block is active; on its
    own it installs one for the block."""
    with routed_output() as router, router.replay() as buffer:
        yield buffer


def request_stop() -> None:
    """From now on no :func:`in_order` of this process starts another replay (module docstring, "Stopping")."""
    _STOP.set()


def stop_requested() -> bool:
    """Whether :func:`request_stop` was called."""
    return _STOP.is_set()


@contextlib.contextmanager
def on_interrupt(save: Callable[[], None]) -> Iterator[None]:
    """Register ``save`` for the block: what :func:`save_interrupted` runs if the process is stopped meanwhile."""
    _SAVERS.append(save)
    try:
        yield
    finally:
        _SAVERS.remove(save)


def save_interrupted() -> int:
    """Run what the running searches registered with :func:`on_interrupt` (innermost first); returns how many
    finished. A failing one is logged and skipped: the process is stopping either way."""
    done = 0
    for save in reversed(list(_SAVERS)):
        try:
            save()
            done += 1
        except Exception as exc:
            logger.warning("causaltrace: could not store the interrupted search: %s: %s", type(exc).__name__, exc)
    return done


class UserCodeExit(Exception):
    """``SystemExit`` or ``KeyboardInterrupt`` raised by user code (a tool, the factory, the verifier) inside one
    replay: it marks that replay, not the search (issue 36 item 3). The user's own Ctrl-C never arrives as one:
    ``causaltrace`` stops on SIGINT through :mod:`causaltrace.cli.interrupt`, and ``asyncio.run`` turns the first
    SIGINT into a cancellation of its main task."""

    def __init__(self, exc: BaseException) -> None:
        code = f"({exc.code!r})" if isinstance(exc, SystemExit) and exc.code is not None else ""
        super().__init__(f"user code raised {type(exc).__name__}{code}")
        self.kind = type(exc).__name__


async def in_own_loop(start: Callable[[], Awaitable[T]], timeout_s: float | None) -> T:
    """``await start()`` on an event loop of its own, in a daemon thread (the caller's context copied into it), for
    at most ``timeout_s`` (issue 36 item 3): whatever the user's code in it does — a factory, a tool or a verifier
    that blocks its thread, a ``SystemExit`` escaping a framework's task (asyncio re-raises it out of the loop that
    runs the task) — the search's own loop keeps running, the timeout fires, and a ``SystemExit`` /
    ``KeyboardInterrupt`` comes back as :class:`UserCodeExit`. On the timeout (``TimeoutError``) or a cancellation
    the task is cancelled in its loop and waited for :data:`CANCEL_GRACE_S` at most; a thread that stays stuck is
    a daemon, abandoned (it never holds up the process's exit)."""
    done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    caller = asyncio.get_running_loop()
    handle: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[T]]] = []
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if isinstance(error, asyncio.CancelledError):
            done.cancel()
        elif error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def main() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            task = loop.create_task(start())  # type: ignore[arg-type]
            handle.append((loop, task))
            try:
                value, error = loop.run_until_complete(task), None
            except (SystemExit, KeyboardInterrupt) as exc:
                value, error = None, UserCodeExit(exc)
            except BaseException as exc:  # an ordinary exception or the cancellation: the caller's to judge
                value, error = None, exc
            with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody waits any more
                caller.call_soon_threadsafe(settle, value, error)
        finally:
            with contextlib.suppress(BaseException):
                loop.close()

    threading.Thread(target=context.run, args=(main,), daemon=True, name="causaltrace-replay").start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), timeout_s)
    except (TimeoutError, asyncio.CancelledError):
        if handle:
            loop, task = handle[0]
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        await asyncio.wait({done}, timeout=CANCEL_GRACE_S)
        if not done.done():
            done.cancel()  # what the stuck thread settles later goes nowhere
        elif not done.cancelled():
            done.exception()  # retrieved: the late error was this replay's, already marked by the caller
        raise


async def in_order(starts: Iterable[Callable[[], Awaitable[T]]], concurrency: int, *,
                   may_start: Callable[[int], bool] | None = None) -> AsyncIterator[T]:
    """Run up to ``concurrency`` of ``starts`` at once (each a task of its own, in order), yielding results in the
    order of ``starts``. ``may_start(in_flight)`` can hold back further starts (a budget), the first one included.
    When the consumer stops (``aclose``, e.g. ``contextlib.aclosing`` around a ``break``) the tasks still in flight
    are cancelled and waited for at most :data:`CANCEL_GRACE_S`."""
    pending: collections.deque[asyncio.Task[T]] = collections.deque()
    source = iter(starts)

    def fill() -> None:
        # asked even when nothing is in flight: a start past the budget would be a replay (or a paid prediction)
        # whose result the consumer throws away; after a stop (SIGINT) nothing more starts
        while (len(pending) < max(1, concurrency) and not _STOP.is_set()
               and (may_start is None or may_start(len(pending)))):
            start = next(source, None)
            if start is None:
                return
            pending.append(asyncio.ensure_future(start()))

    try:
        fill()
        while pending:
            result = await pending[0]
            pending.popleft()
            yield result
            fill()
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(set(pending), timeout=CANCEL_GRACE_S)
