"""Concurrent replays of one step's proposals (``repair --concurrency N``), and the output capture they share.

**In-process, not worker processes** (issue 19 item 3 leaves the choice open). The replays of one step run as
asyncio tasks on the search's own event loop; smolagents replays already run in a worker thread each
(``asyncio.to_thread``), AutoGen's are coroutines. Why not worker processes:

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
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import io
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["CANCEL_GRACE_S", "OutputRouter", "captured", "default_concurrency", "in_order", "routed_output"]

T = TypeVar("T")

#: How long cancelled replays that ran ahead are waited for (a framework's cleanup may wait on a stuck call).
CANCEL_GRACE_S = 2.0

_BUFFER: contextvars.ContextVar[io.StringIO | None] = contextvars.ContextVar("causaltrace_replay_output",
                                                                              default=None)


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


class OutputRouter:
    """Where a write goes while replays run (module docstring): the replay's buffer, else the only replay's, else
    the unattributed buffer (another thread), else the terminal."""

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.active: list[io.StringIO] = []
        self.unattributed = io.StringIO()
        self._lock = threading.Lock()

    def target(self) -> io.StringIO | None:
        buffer = _BUFFER.get()
        if buffer is not None:
            return buffer
        if threading.get_ident() == self.owner:
            return None
        with self._lock:
            return self.active[0] if len(self.active) == 1 else self.unattributed

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


_ROUTER: list[OutputRouter] = []  # the installed router (a stack: a nested search reuses the outer one)


@contextlib.contextmanager
def routed_output() -> Iterator[OutputRouter]:
    """Install per-replay output routing on ``sys.stdout`` / ``sys.stderr`` for the block (reentrant)."""
    if _ROUTER:
        yield _ROUTER[-1]
        return
    router = OutputRouter()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _RoutedStream(router, saved[0]), _RoutedStream(router, saved[1])
    _ROUTER.append(router)
    try:
        yield router
    finally:
        _ROUTER.pop()
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """Capture what the current context prints (one replay) while a :func:`routed_output` block is active; on its
    own it installs one for the block."""
    with routed_output() as router, router.replay() as buffer:
        yield buffer


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
        # whose result the consumer throws away
        while len(pending) < max(1, concurrency) and (may_start is None or may_start(len(pending))):
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
