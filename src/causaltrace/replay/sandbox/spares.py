"""One started Python worker kept ready while a repair search runs (issue 32, repair cost).

A smolagents CodeAgent replay runs its code in a fresh sandboxed worker (:class:`~.session.PythonWorkerSession`),
and starting one — a sandboxed process, a Python interpreter, the worker program — is most of such a replay: on the
fault suite ~75 ms on a quiet machine, 130 ms on a loaded one, of a 180 ms replay whose recorded run took 30 ms.
Within :func:`spare_workers` (the repair search), every session start takes a worker that was started in the
background and only said "ready", and the next one is started in the background; the replay no longer waits.

A spare is what a fresh start would give: a new process that has run nothing yet (the replay's determinism holds),
for the same sandbox, argv, memory limit and idle timeout. :data:`KEEP` spares per such key; a spare older than half
its idle timeout is closed instead of used (the worker kills itself when idle). A session's worker is closed in the
background too (:func:`retire_worker`). When the outermost :func:`spare_workers` ends, the starts and closes in
flight are waited for and every spare is closed: nothing outlives the search. Outside it, sessions start their
worker themselves, as before.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from causaltrace.protocols import Sandbox, Worker

__all__ = ["retire_worker", "spare_workers", "take_spare"]

_Key = tuple[int, tuple[str, ...], float, int]


#: spares kept per kind of session: two, so that a replay that starts before the previous replay's spare was
#: replaced still finds one
KEEP = 2


class _Spares:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.ready: dict[_Key, list[tuple[Worker, float]]] = {}
        self.in_flight: dict[_Key, int] = {}
        self.idle = threading.Condition(self.lock)  # notified when no start is in flight
        self.jobs: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.spawner: threading.Thread | None = None
        self.closers: list[threading.Thread] = []

    def _spawn_loop(self) -> None:
        """The one thread that starts spares, alive as long as the process: a sandbox may tie its worker's life to
        the thread that started it (bubblewrap's ``--die-with-parent`` is the parent THREAD's death signal)."""
        while True:
            self._fill(*self.jobs.get())

    def take(self, sandbox: Sandbox, argv: Sequence[str], idle_s: float, memory_mb: int,
             start_timeout_s: float) -> Worker | None:
        key = (id(sandbox), tuple(argv), idle_s, memory_mb)
        with self.lock:
            if self.depth == 0:
                return None
            kept = self.ready.setdefault(key, [])
            got = kept.pop(0) if kept else None
            for _ in range(KEEP - len(kept) - self.in_flight.get(key, 0)):
                self.in_flight[key] = self.in_flight.get(key, 0) + 1
                self.jobs.put((key, sandbox, idle_s, memory_mb, start_timeout_s))
            if self.spawner is None:
                self.spawner = threading.Thread(target=self._spawn_loop, name="causaltrace-spare-workers",
                                                daemon=True)
                self.spawner.start()
        if got is None:
            return None
        worker, born = got
        if time.monotonic() - born > idle_s / 2:
            worker.close()
            return None
        return worker

    def _fill(self, key: _Key, sandbox: Sandbox, idle_s: float, memory_mb: int, start_timeout_s: float) -> None:
        worker: Worker | None = None
        ready = False
        with self.lock:
            wanted = self.depth > 0
        if wanted:  # a start queued before the search ended is skipped
            try:
                worker = sandbox.open_worker(list(key[1]), timeout_s=idle_s, memory_mb=memory_mb)
                ready = worker.recv(timeout_s=start_timeout_s).get("type") == "ready"
            except Exception:  # the session's own start reports what is wrong with the sandbox
                ready = False
        with self.lock:
            self.in_flight[key] -= 1
            keep = ready and self.depth > 0 and worker is not None
            if keep:
                self.ready.setdefault(key, []).append((worker, time.monotonic()))  # type: ignore[arg-type]
            if not any(self.in_flight.values()):
                self.idle.notify_all()
        if not keep and worker is not None:
            worker.close()

    def retire(self, worker: Worker) -> bool:
        """Close ``worker`` in the background (False outside a search: the caller closes it)."""
        with self.lock:
            if self.depth == 0:
                return False
            self.closers = [c for c in self.closers if c.is_alive()]
            closer = threading.Thread(target=worker.close, name="causaltrace-worker-close", daemon=True)
            self.closers.append(closer)
            closer.start()
        return True

    def enter(self) -> None:
        with self.lock:
            self.depth += 1

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth:
                return
            # the starts in flight close their workers themselves once they see depth 0
            self.idle.wait_for(lambda: not any(self.in_flight.values()), timeout=30)
            spares = [w for kept in self.ready.values() for w, _ in kept]
            self.ready, closers, self.closers = {}, self.closers, []
        for closer in closers:
            closer.join(timeout=30)
        for worker in spares:
            with contextlib.suppress(Exception):
                worker.send({"type": "shutdown"})
            worker.close()


_SPARES = _Spares()


def take_spare(sandbox: Sandbox, argv: Sequence[str], *, idle_s: float, memory_mb: int,
               start_timeout_s: float) -> Worker | None:
    """A started worker that said "ready" (module docstring), or None — outside :func:`spare_workers`, or when
    none is ready yet; either way the next one is being started."""
    return _SPARES.take(sandbox, argv, idle_s, memory_mb, start_timeout_s)


def retire_worker(worker: Worker) -> bool:
    """Within :func:`spare_workers`, close a session's finished ``worker`` in the background — killing it and
    removing its work dir and cgroup took ~15 ms of every replay — and return True; outside it, False (the caller
    closes it). The search's end waits for these closes too."""
    return _SPARES.retire(worker)


@contextlib.contextmanager
def spare_workers() -> Iterator[None]:
    """Keep a started worker ready for each kind of session started within (nestable; module docstring)."""
    _SPARES.enter()
    try:
        yield
    finally:
        _SPARES.leave()


def _pending() -> dict[str, Any]:
    """What the pool holds (tests)."""
    with _SPARES.lock:
        return {"depth": _SPARES.depth, "ready": sum(len(k) for k in _SPARES.ready.values()),
                "in_flight": sum(_SPARES.in_flight.values())}
