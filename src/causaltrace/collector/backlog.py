"""What the live store writer holds while its store does not answer: a bounded, ordered backlog of operations.

A PostgreSQL restart, a failover, a reaped idle connection or a SQLite file write-locked by another process (a
``VACUUM``, a backup, a big import) must not lose the runs of a long-lived agent service (issue 36 item 1). The
writer (``collector/live.py``) keeps the operations it could not write here, in order, retries them with bounded
backoff after dropping its connection, and at exit waits a bounded time for them. This module is the bookkeeping:

* **Order.** Operations stay in the order they were handed over (a run's begin before its steps before its end).
  A run's end carries the whole Run, so the step operations of a run whose end is queued are dropped when it comes
  (the final write stores every step).
* **Bound.** At most ``max_runs`` runs and ``max_ops`` operations are kept; past that the oldest run's operations
  are dropped, counted, and said once (:attr:`Backlog.dropped_runs`).
* **Exit.** :meth:`Backlog.begins_first` moves every run's begin row to the front: under the exit deadline the
  ``incomplete`` crash record of a run matters more than the full write of another.

:func:`is_transient` decides whether a failed write is worth retrying (the store did not answer) or the operation
itself is bad (it is dropped and counted, as before).
"""

from __future__ import annotations

import sqlite3
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Backlog", "Op", "carried_by_an_end", "is_transient", "pending_summary"]

#: One queued operation: (kind, payload, the event its submitter may wait on). Kinds: ``begin`` (payload
#: ``(run_id, fields)``), ``steps`` (``(run_id, step)``), ``finish`` (the Run), ``flush`` (None).
Op = tuple[str, Any, Any]


def run_of(op: Op) -> str | None:
    """The run id an operation belongs to (None for a flush)."""
    kind, payload, _ = op
    if kind in ("begin", "steps"):
        return str(payload[0])
    if kind == "finish":
        return str(payload.run_id)
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether a failed write means "the store did not answer" (retry after reconnecting) rather than "this
    operation is bad" (drop it): an error raised while opening the store, SQLite's ``OperationalError`` (locked,
    busy, I/O, disk full) and the driver's connection errors anywhere in the exception's chain."""
    from causaltrace.exceptions import StoreError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlite3.OperationalError | ConnectionError | TimeoutError):
            return True
        module = type(current).__module__ or ""
        if module.startswith("psycopg") and any(
            cls.__name__ in ("OperationalError", "InterfaceError") for cls in type(current).__mro__
        ):
            return True
        if isinstance(current, StoreError) and str(current).endswith("is closed"):
            return True
        current = current.__cause__ or current.__context__
    return False


@dataclass
class Backlog:
    """The writer's held operations (writer thread only; :meth:`snapshot` may be read from another thread)."""

    max_runs: int = 1000
    max_ops: int = 200_000
    ops: deque[Op] = field(default_factory=deque)
    #: Runs whose queued operations were dropped past the bound (their ids, oldest first, at most 20 kept).
    dropped_runs: int = 0
    dropped_ids: list[str] = field(default_factory=list)
    _runs: Counter[str] = field(default_factory=Counter)

    def __len__(self) -> int:
        return len(self.ops)

    def push_front(self, items: list[Op]) -> None:
        """Put a batch that could not be written back at the head, in its order."""
        for op in reversed(items):
            self.ops.appendleft(op)
            self._count(op, +1)

    def extend(self, items: Iterable[Op]) -> tuple[list[Op], list[Op]]:
        """Append new operations; returns ``(dropped, subsumed)``: the operations dropped to stay within the bound,
        and the step operations a queued run end now carries. The caller settles both (wakes their waiters)."""
        subsumed: list[Op] = []
        for op in items:
            if op[0] == "finish":
                subsumed += self._drop_steps_of(str(op[1].run_id))
            self.ops.append(op)
            self._count(op, +1)
        return self._enforce(), subsumed

    def take(self, n: int) -> list[Op]:
        """The next ``n`` operations (removed)."""
        out = []
        while self.ops and len(out) < n:
            op = self.ops.popleft()
            self._count(op, -1)
            out.append(op)
        return out

    def begins_first(self) -> None:
        """Move each run's first queued begin ahead of everything (exit: crash records before full writes)."""
        seen: set[str] = set()
        begins: list[Op] = []
        rest: list[Op] = []
        for op in self.ops:
            run_id = run_of(op)
            if op[0] == "begin" and run_id not in seen:
                begins.append(op)
            else:
                rest.append(op)
            if run_id is not None:
                seen.add(run_id)
        self.ops = deque(begins + rest)

    def snapshot(self) -> list[Op]:
        return list(self.ops)

    def _count(self, op: Op, delta: int) -> None:
        run_id = run_of(op)
        if run_id is None:
            return
        self._runs[run_id] += delta
        if self._runs[run_id] <= 0:
            del self._runs[run_id]

    def _drop_steps_of(self, run_id: str) -> list[Op]:
        gone = [op for op in self.ops if op[0] == "steps" and op[1][0] == run_id]
        if gone:
            self.ops = deque(op for op in self.ops if not (op[0] == "steps" and op[1][0] == run_id))
            self._runs[run_id] -= len(gone)
        return gone

    def _enforce(self) -> list[Op]:
        dropped: list[Op] = []
        while self.ops and (len(self._runs) > self.max_runs or len(self.ops) > self.max_ops):
            oldest = next((run_of(op) for op in self.ops if run_of(op) is not None), None)
            if oldest is None or len(self._runs) <= 1:  # one huge live run: drop its oldest operation only
                op = self.ops.popleft()
                self._count(op, -1)
                dropped.append(op)
                continue
            gone = [op for op in self.ops if run_of(op) == oldest]
            self.ops = deque(op for op in self.ops if run_of(op) != oldest)
            self._runs.pop(oldest, None)
            dropped.extend(gone)
            self.dropped_runs += 1
            if len(self.dropped_ids) < 20:
                self.dropped_ids.append(oldest)
        return dropped


def pending_summary(ops: Iterable[Op]) -> tuple[list[str], int, int]:
    """What a list of unwritten operations means: the run ids (first seen first), how many of them lack even their
    begin row among the operations (their crash record), and how many steps."""
    runs: dict[str, None] = {}
    begins = 0
    steps = 0
    for op in ops:
        run_id = run_of(op)
        if run_id is None:
            continue
        runs.setdefault(run_id, None)
        if op[0] == "begin":
            begins += 1
        elif op[0] == "steps":
            steps += 1
        else:
            steps += len(op[1].steps)
    return list(runs), begins, steps


def carried_by_an_end(pending: list[Op]) -> tuple[set[int], dict[int, int]]:
    """In a batch of the store writer (``collector/live.py``): the positions of the step operations whose run ends
    later in ``pending`` (not begun again in between: a replaced run's id takes new steps), read from the end; and
    per run begun in ``pending`` whose end comes later in it, the begin's position -> the end's (its row can be
    written once: ``Store.finish_new_run``)."""
    ending: dict[str, int] = {}
    carried: set[int] = set()
    whole: dict[int, int] = {}
    for i in range(len(pending) - 1, -1, -1):
        op, payload, _ = pending[i]
        if op == "steps":
            if payload[0] in ending:
                carried.add(i)
        elif op == "finish":
            ending[payload.run_id] = i
        elif op == "begin":
            end = ending.pop(payload[0], None)
            if end is not None:
                whole[i] = end
    return carried, whole
