"""The hand-overs between the threads of a traced process and the live collector's store writer thread
(``collector/live.py``): the writer's operation queue, and the signal a submitter waits on — from a thread, or from
an event loop without a thread.

Both sit on the hot path of every traced event (a step's hand-over is a queue put), so they are kept to what the
writer needs: :class:`OpQueue` is ``queue.Queue``'s interface with a lock-free put that does not wake the writer;
:class:`Done` is an event (a ``threading.Event``'s methods, one Python call each) that also completes futures of event
loops, and wakes the writer when waited on.

Why a hand-over does not wake the writer: a thread woken while the agent's thread runs Python fights it for the GIL
— in CPython each GIL release of the running thread (an event loop's ``select``, any lock or I/O) wakes the waiter
again, which mostly finds the GIL taken back. On an AutoGen run that was ~90 futile wake-ups per run for the run's
begin row alone (voluntary context switches of the writer, /proc), about 300 µs of CPU per framework event on a
2-core VM, and the begin row was still written only once the run ended in a fifth of the runs. So the writer polls:
every ``poll_s`` while operations come, it takes what is queued (nothing waits longer than one poll — the crash
window); an operation somebody waits on (a run's end, a flush, a begin row ``causaltrace.run()`` waits for) wakes
it at once (:meth:`OpQueue.wake`, :attr:`Done.poke`), when the submitting thread is about to wait and so leaves
the GIL to it. After ``idle_polls`` empty polls the writer sleeps without a timeout, and the next put wakes it.
"""

from __future__ import annotations

import asyncio
import threading
from _thread import allocate_lock as _allocate_lock
from collections import deque
from collections.abc import Callable

from causaltrace.collector.backlog import Op

__all__ = ["Done", "OpQueue"]


class Done:
    """Set by the store writer once the operation it goes with is written — or held for a store that does not answer,
    or given up (then nobody should wait for it). A thread waits for it as for a ``threading.Event`` (``wait``,
    ``is_set``, ``set``); an event loop awaits it with :meth:`wait_async`, without a thread: :meth:`set` completes
    the loop's future through ``loop.call_soon_threadsafe``. (The async run end used to wait in a thread of the
    loop's default executor, which handed a flush to the writer and waited for it there: two thread hand-offs per
    run.)

    Not a ``threading.Event``: one lock, held from the start and released by :meth:`set`, is what a waiter blocks
    on — each method one Python call (an Event's wait, set and construction go through its Condition: three to
    seven calls each, and a run's end makes, waits on and sets one, its begin another)."""

    __slots__ = ("_flag", "_lock", "_loops", "poke")

    def __init__(self) -> None:
        self._flag = False
        self._lock = _allocate_lock()
        self._lock.acquire()  # released once, by set(): a waiter's acquire returns then
        #: The (loop, future) of each :meth:`wait_async` under way; replaced, never mutated (``set`` reads one
        #: snapshot).
        self._loops: tuple[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]], ...] = ()
        #: Called before a wait on this Done while it is unset: the writer's :meth:`OpQueue.wake`, for an operation
        #: handed over without waking it (a run's begin row) that somebody waits on after all.
        self.poke: Callable[[], None] | None = None

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set, or ``timeout`` seconds (None: no bound); whether it is set."""
        if self._flag:
            return True
        if (poke := self.poke) is not None:
            poke()
        if self._lock.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            self._lock.release()  # (the next waiter's turn: every waiter returns)
            return True
        return self._flag

    def set(self) -> None:
        if not self._flag:
            with _DONE_LOCK:  # two writers' sets at once (a held operation, its retry): released once
                if not self._flag:
                    self._flag = True
                    self._lock.release()
        for loop, future in self._loops:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # the loop is closed: its waiter is gone
                pass

    async def wait_async(self, timeout_s: float) -> bool:
        """Await this on the running event loop for at most ``timeout_s``; whether it was set (the loop is never
        blocked)."""
        if self._flag:
            return True
        if (poke := self.poke) is not None:
            poke()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with _DONE_LOCK:  # two loops awaiting one Done (rare): neither registration is lost
            self._loops = (*self._loops, (loop, future))
        if self._flag:  # set before the registration was seen: it may not have resolved the future
            return True
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # set again (a held operation), or the waiter timed out and cancelled it
        future.set_result(None)


_DONE_LOCK = threading.Lock()


class OpQueue:
    """The writer's queue of operations: what ``queue.Queue`` offers it (``put``, the ``queue`` deque and ``mutex`` of
    the bulk drain) with a ``put`` that is a deque append — no lock, no condition, no wake-up — and the writer's
    :meth:`sleep` in place of a blocking ``get`` (the module docstring says why the writer polls).

    A put wakes the writer only from its deep sleep (nothing was handed over for ``idle_polls`` polls). Race-free
    under the GIL: the put appends and then reads ``_deep``; the writer sets ``_deep`` and then looks at the queue —
    whichever comes second sees the other's write."""

    maxsize = 0

    def __init__(self) -> None:
        self.queue: deque[Op] = deque()
        self.mutex = threading.Lock()
        self.not_full = threading.Condition(self.mutex)  # never waited on: unbounded (the bulk drain's interface)
        #: Released by :meth:`wake` (once until the writer takes it): what the writer's sleep acquires — a lock, not
        #: a Condition, so a wake and a sleep are C calls (a Condition's notify and wait were four Python calls
        #: each, the wake on the agent's thread at every run's end).
        self._bell = _allocate_lock()
        self._bell.acquire()
        self._guard = _allocate_lock()  # a wake's test-and-release, and the writer's taking it back
        self._deep = False  # the writer sleeps without a timeout: a put must wake it
        self._woken = False  # a wake() came since the writer last looked (the bell is released)

    def put(self, item: Op) -> None:
        """(The collector does this inline on its hot paths: ``RunCollector.accept`` and ``_submit``.)"""
        self.queue.append(item)
        if self._deep:
            self.wake()

    def wake(self) -> None:
        """End the writer's sleep now (or its next one at once, if it is awake)."""
        with self._guard:
            if not self._woken:
                self._woken = True
                self._bell.release()

    def sleep(self, poll_s: float, idle_polls: int) -> None:
        """Writer: return when there is something to look at — a :meth:`wake`, or a poll (every ``poll_s``) that
        finds operations queued; after ``idle_polls`` empty polls in a row, sleep until a put or a wake."""
        idle = 0
        bell = self._bell
        while True:
            if idle >= idle_polls:
                self._deep = True
                rung = False if self.queue else bell.acquire()  # (after setting ``_deep``: see the class docstring)
                self._deep = False
            else:
                rung = bell.acquire(True, poll_s)
            if rung or self.queue:
                if rung or bell.acquire(False):  # a wake that came meanwhile is taken with it (not another round)
                    with self._guard:
                        self._woken = False
                return
            idle += 1
