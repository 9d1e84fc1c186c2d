"""The hand-overs between the threads of a traced process and the live collector's store writer thread
(``collector/live.py``): the writer's operation queue, and the signal a submitter waits on — from a thread, or from
an event loop without a thread.

Both sit on the hot path of every traced event (a step's hand-over is a queue put), so they are kept to what the
writer needs: :class:`OpQueue` is ``queue.Queue``'s interface with a lock-free put; :class:`Done` is a
``threading.Event`` that also completes futures of event loops.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

from causaltrace.collector.backlog import Op

__all__ = ["Done", "OpQueue"]


class Done(threading.Event):
    """Set by the store writer once the operation it goes with is written — or held for a store that does not answer,
    or given up (then nobody should wait for it). A thread waits for it as for any Event; an event loop awaits it
    with :meth:`wait_async`, without a thread: :meth:`set` completes the loop's future through
    ``loop.call_soon_threadsafe``. (The async run end used to wait in a thread of the loop's default executor, which
    handed a flush to the writer and waited for it there: two thread hand-offs per run.)"""

    #: The (loop, future) of each :meth:`wait_async` under way; replaced, never mutated (``set`` reads one snapshot).
    _loops: tuple[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]], ...] = ()

    def set(self) -> None:
        super().set()
        for loop, future in self._loops:
            try:
                loop.call_soon_threadsafe(_resolve, future)
            except RuntimeError:  # the loop is closed: its waiter is gone
                pass

    async def wait_async(self, timeout_s: float) -> bool:
        """Await this on the running event loop for at most ``timeout_s``; whether it was set (the loop is never
        blocked)."""
        if self.is_set():
            return True
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with _DONE_LOCK:  # two loops awaiting one Done (rare): neither registration is lost
            self._loops = (*self._loops, (loop, future))
        if self.is_set():  # set before the registration was seen: it may not have resolved the future
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
    """The writer's queue of operations: what ``queue.Queue`` offers it (``put``, a blocking ``get``, the ``queue``
    deque and ``mutex`` of the bulk drain), with a ``put`` that is a deque append — no lock, no condition, no notify
    in Python: ~3 µs a step on the agent's thread with ``queue.Queue`` — unless the writer sleeps in ``get``, which a
    put then wakes. (Under the GIL an append before the sleeper's check is seen by it; one after it finds the flag
    set and takes the lock, which the sleeper holds until it waits.)"""

    maxsize = 0

    def __init__(self) -> None:
        self.queue: deque[Op] = deque()
        self.mutex = threading.Lock()
        self.not_full = self._ready = threading.Condition(self.mutex)  # never waited on: the queue is unbounded
        self._sleeping = False

    def put(self, item: Op) -> None:
        self.queue.append(item)
        if self._sleeping:
            with self._ready:
                self._ready.notify()

    def get(self) -> Op:
        items = self.queue
        if items:
            return items.popleft()
        with self._ready:
            self._sleeping = True
            try:
                while not items:
                    self._ready.wait()
            finally:
                self._sleeping = False
            return items.popleft()
