"""The live collector: assembles Runs from the full Steps the instrumentation hands it as each step ends.

Steps may end in any order; the collector keeps them per run and hands them to the store in batches from a
background writer thread, so the agent never waits on SQLite and a process that dies mid-run leaves its steps
behind (the run is then listed ``incomplete``). The full Step (not the payload-limited span attributes) reaches
the collector directly (:meth:`RunCollector.accept`), beside the step's span going to the exporters: the collector
is not a span processor. Spans that arrive from outside (an OTLP file, a Jaeger pull) are rebuilt from their
attributes by the importers (``collector/otlp.py``, ``collector/jaeger.py``).

A store that does not answer (a PostgreSQL restart, failover or reaped idle connection; a SQLite file write-locked
by another process) loses nothing the writer can hold: it drops the connection, keeps what it could not write in a
bounded backlog (``collector/backlog.py``: the oldest run dropped past the bound, counted and said in one line),
retries with bounded backoff, and at interpreter exit waits up to :attr:`RunCollector.exit_wait_s` for what is
queued — each run's begin row (its ``incomplete`` crash record) first — then says in one line what it could not
write. While the store does not answer, nobody waits on it: a run's start and end go on at once.

A set-up that is replaced or forgotten (``configure()`` again, ``reset_tracing()``) ends its collector's writer thread
once it has written what it was handed (:meth:`RunCollector.shutdown`); the threads of replaced set-ups no longer pile
up, and a run begun under the old set-up that hands over later starts its writer again until that run is written.

The collector finalises a Run on the adapter's run-end signal (:meth:`RunCollector.finish_run`), not when the root
span ends (ARCHITECTURE decision 5: under ``watch`` the root span stays open while the diagnosis runs).
"""

from __future__ import annotations

import atexit
import itertools
import logging
import operator
import os
import queue
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from causaltrace.collector.backlog import Backlog, Op, carried_by_an_end, is_transient, pending_summary
from causaltrace.collector.handoff import Done, OpQueue
from causaltrace.config import TraceConfig
from causaltrace.protocols import RunStore
from causaltrace.schema import Run, Step

if TYPE_CHECKING:
    from causaltrace.collector.store import Store

__all__ = ["Commit", "RunCollector", "ns_to_datetime"]

logger = logging.getLogger("causaltrace")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ns_to_datetime(ns: int | None) -> datetime | None:
    """Nanoseconds since the epoch → an aware UTC datetime, exact to the microsecond."""
    if not ns:
        return None
    return _EPOCH + timedelta(microseconds=ns // 1000)


@dataclass(frozen=True)
class Commit:
    """What one transaction of the store writer made durable (given to :attr:`RunCollector.on_commit`).

    ``begun``: runs whose begin row (their crash record) is stored; ``steps``: per run, the ids of its steps now
    stored (for a run finished here, all of its steps); ``finished``: runs whose final write is stored. What a
    Commit names survives the process being killed right after; what was handed over and not yet named is the
    window a crash can lose (the writer's linger, plus its wait for the store's write lock, plus one transaction).
    """

    begun: tuple[str, ...] = ()
    steps: Mapping[str, frozenset[str]] = field(default_factory=dict)
    finished: tuple[str, ...] = ()


@dataclass
class _LiveRun:
    run_id: str
    steps: dict[str, Step] = field(default_factory=dict)
    unsaved: list[Step] = field(default_factory=list)
    begun: bool = False


class RunCollector:
    """Assembles Runs from Steps and writes them to the store (when ``config.store`` is on).

    ``store_factory`` opens the store lazily in the writer thread (``collector.store.Store`` by default), so
    importing or instrumenting never touches the disk until a run is written.
    """

    def __init__(self, config: TraceConfig | None = None, *, store_factory: Callable[[], RunStore] | None = None) -> None:
        self.config = config or TraceConfig.from_env()
        self._store_factory = store_factory
        self._store: RunStore | None = None
        self._target: Any = None  # the path / URL the open store was opened from
        #: The environment the default target was last resolved from, and that target (see :meth:`_target_now`).
        self._target_key: tuple[tuple[str | None, ...], Any] | None = None
        self._runs: dict[str, _LiveRun] = {}
        #: The ids of recently finished runs (bounded, oldest first): a step that ends after its run finished (a
        #: framework closing a stream late) is not kept in memory for a run that will never be assembled again.
        self._finished: OrderedDict[str, None] = OrderedDict()
        #: Steps that arrived after their run had finished (not kept; the store ignores them too).
        self.late_steps = 0
        self._lock = threading.Lock()
        self._queue: OpQueue | queue.Queue[Op] = OpQueue()
        self._writer: threading.Thread | None = None
        #: How often the writer takes what was handed over without anybody waiting for it (begin rows and steps;
        #: a run's end or a flush wakes it at once): the most a crash can lose of what was already handed over.
        self.linger_s = _LINGER_S
        #: Writer thread only: per live run, the ids of the steps already in the store.
        self._stored: dict[str, set[str]] = {}
        self.write_errors = 0
        #: Called in the writer thread after each committed transaction with its :class:`Commit` — the writer's
        #: acknowledgement, for monitoring and crash tests (``causaltrace.configure().collector.on_commit = fn``,
        #: set before the runs it should see begin). None, the default, costs nothing; it must be quick (the
        #: writer waits for it), and an exception it raises is logged and swallowed.
        self.on_commit: Callable[[Commit], None] | None = None
        #: Writer thread, only while ``on_commit`` is set: runs whose begin row is committed and final write not yet.
        self._open_rows: set[str] = set()
        #: What the writer holds while the store does not answer (bounded; see ``collector/backlog.py``).
        self.backlog = Backlog()
        #: How long interpreter exit waits for what is still queued (a store that was never opened: at most 5 s).
        self.exit_wait_s = _EXIT_WAIT_S
        self._down = False  # the store does not answer: operations are held, nobody waits for them
        self._stalled = False  # a run's end waited in vain (a long lock): later ones do not wait until it answers
        self._wake = threading.Event()  # ends the writer's backoff sleep (interpreter exit)
        self._exiting = False
        self._opened = False  # the store was opened at least once in this process
        self._reconnect = False
        self._backoff_s = _BACKOFF_MIN_S
        self._inflight: list[Op] = []
        #: Data operations handed over (counted by ``next`` — one atomic C call per hand-over, no lock) and settled
        #: (written or dropped: added under ``_idle``); their difference is what :meth:`drain` waits for.
        self._handed = itertools.count(1)
        self._handed_reads = 0
        self._settled_n = 0
        self._idle_lock = threading.Lock()  # taken as it is where nobody is woken (no Condition methods in Python)
        self._idle = threading.Condition(self._idle_lock)
        self._draining = 0  # threads waiting in drain(): only then does a settled batch notify
        #: The process whose writer thread runs (None: none runs; a fork's child has none either).
        self._writer_pid: int | None = None
        #: The set-up that made this collector was replaced or forgotten (:meth:`shutdown`): the writer thread ends
        #: whenever nothing is queued or held, and a late hand-over (a run begun under that set-up) starts it again.
        self._retiring = False

    # -- the emitter's side -------------------------------------------------------------------------------------

    def begin_run(self, run_id: str, **fields: Any) -> Done:
        """A run started: remember it and write its row (so a crash leaves an ``incomplete`` run, not nothing).

        The row waits at most the writer's linger, like a step (``collector/handoff.py`` says why it does not wake
        the writer); the returned event is set once it is committed (or the write failed), and waiting on it wakes
        the writer, so ``causaltrace.run()`` waits — bounded — for its crash record before its block runs.
        """
        with self._lock:
            self._runs.setdefault(run_id, _LiveRun(run_id))
            self._finished.pop(run_id, None)  # the same id begun again (a replaced run) takes steps again
        if not self.config.store:
            return _NOTHING_TO_WRITE
        done = Done()
        done.poke = self._queue.wake
        self._submit("begin", (run_id, fields), done, wake=False)
        return done

    def accept(self, step: Step) -> None:
        """Take a full Step that has ended (the instrumentation's handoff; the step's span goes to the exporters).
        Once per step on the agent's thread: kept with its live run and (store on) queued as :meth:`_submit` does."""
        run_id = step.run_id
        with self._lock:
            live = self._runs.get(run_id)
            if live is None and run_id in self._finished:
                self.late_steps += 1
            else:
                if live is None:
                    live = self._runs[run_id] = _LiveRun(run_id)
                live.steps[step.step_id] = step
        if self.config.store:
            if self._writer_pid != os.getpid():
                self._ensure_writer()
            next(self._handed)
            q = self._queue  # its put inline (``OpQueue.put``: append, then wake a writer deep asleep)
            q.queue.append(("steps", (run_id, step), None))
            if getattr(q, "_deep", False):
                q.wake()
            if self._retiring:  # as in _submit
                self._ensure_writer()

    def finish_run(self, run_id: str, *, wait_s: float = 10.0, done: Done | None = None, **run_fields: Any) -> Run:
        """The adapter's run-end signal: assemble the Run from its steps, write it, and return it.

        ``run_fields`` are the Run's other fields (framework, task, outcome, recording…). Waits up to ``wait_s``
        for the store write so a CLI started right after sees the run (``0``: not at all); with ``done`` it never
        waits: the writer sets ``done`` instead, which the async path awaits on its event loop
        (:meth:`wait_stored`). Never raises for a store failure.
        """
        with self._lock:
            live = self._runs.pop(run_id, None) or _LiveRun(run_id)
            self._finished[run_id] = None
            if len(self._finished) > _FINISHED_KEPT:
                self._finished.popitem(last=False)
        steps = live.steps.values()
        if {*map(type, steps)} <= _STEP and "steps" not in run_fields:
            # Steps are checked when made and frozen: the Run checks its other fields and its graph, not each Step
            # again (an "after" validator runs for a model instance too: a call per step of every run)
            run = Run(run_id=run_id, **run_fields)
            run.__dict__["steps"] = ordered = tuple(sorted(steps, key=_BY_INDEX))  # (as Run's own validator sorts)
            run.__pydantic_fields_set__.add("steps")
            try:
                Run._check_graph(run)
            except Exception:
                run = Run(run_id=run_id, steps=ordered, **run_fields)  # its error, as it always was
        else:
            run = Run(run_id=run_id, steps=tuple(steps), **run_fields)
        if not self.config.store:
            if done is not None:
                done.set()
            return run
        event = Done() if done is None else done
        self._submit("finish", run, event)
        if done is None and wait_s > 0 and not event.wait(wait_s):
            self._stall(run_id, wait_s)
        return run

    async def wait_stored(self, done: Done, run_id: str, wait_s: float) -> bool:
        """The async run end: await ``done`` (given to :meth:`finish_run`) on the running loop for at most ``wait_s``
        — the same bound and the same one line as the sync path's wait when it runs out (:meth:`_stall`)."""
        if not self.config.store or await done.wait_async(wait_s):
            return True
        self._stall(run_id, wait_s)
        return False

    def steps_of(self, run_id: str) -> list[Step]:
        """The steps collected so far for a live run, in index order."""
        with self._lock:
            live = self._runs.get(run_id)
            return sorted(live.steps.values(), key=lambda s: s.index) if live else []

    # -- internals -----------------------------------------------------------------------------------------------

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything submitted so far is written — or held for a retry because the store does not
        answer (the writer said so in its one line; :meth:`drain` waits for the store itself)."""
        if not self.config.store or self._writer is None:
            return True
        if not self._retiring:  # (a retiring writer ends when the flush wakes it: :meth:`shutdown`)
            with self._idle_lock:  # all handed over is written (or given up) already: no round trip to the writer
                if self._unwritten() <= 0:
                    return True
        done = Done()
        self._submit("flush", None, done)
        if done.wait(timeout_s):
            return True
        self._stalled = True  # a long lock: later run ends (the async path flushes) do not wait until it answers
        return False

    def drain(self, timeout_s: float) -> bool:
        """Wait until everything handed over is written (or dropped as unwritable); False when ``timeout_s`` ran
        out first. The writer retries a store that does not answer meanwhile."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            self._draining += 1
            try:
                while self._unwritten() > 0:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._idle.wait(min(left, 0.5))
            finally:
                self._draining -= 1
        return True

    def shutdown(self, timeout_s: float | None = None) -> bool:
        """The set-up that made this collector is replaced or forgotten: wait (up to ``timeout_s``, as a flush) until
        what was handed over is written, then end the writer thread. Returns whether everything was written.

        Nothing is lost and nothing hangs: a store that does not answer (locked, down) keeps what it could not take in
        the backlog, and the writer goes on retrying it and ends once it is written (interpreter exit waits for it
        as before); a run begun under this set-up that hands over later starts the writer again, which ends again
        when it has written it. The run stays with the collector it began with — its live steps, the step rows
        already stored and its store target are this collector's — rather than moving to the set-up now in force."""
        self._retiring = True
        if self._writer is None:
            return True
        timeout_s = _SHUTDOWN_WAIT_S if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        if not self.flush(timeout_s):
            return False
        with self._idle:
            if self._unwritten() > 0:  # held for a store that does not answer: the writer ends once it is written
                return False
        end = min(deadline, time.monotonic() + _RETIRE_WAIT_S)  # a late hand-over meanwhile keeps the writer busy
        while (writer := self._writer) is not None and writer is not threading.current_thread():
            left = end - time.monotonic()
            if left <= 0:
                break
            writer.join(left)
        return True

    def close(self, timeout_s: float | None = None) -> bool:
        """Interpreter exit (called by ``atexit``): wait a bounded time for what is queued — begin rows first — and
        say in one line what could not be written. Returns whether everything was written."""
        _LIVE.discard(self)  # said once: interpreter exit does not wait for it again
        if self._writer is None:
            return True
        with self._idle:
            if self._unwritten() <= 0:
                return True
        self._exiting = True
        self._wake.set()
        self._queue.wake()
        wait = self.exit_wait_s if timeout_s is None else timeout_s
        if not self._opened:  # never reachable in this process: a configuration problem, not an outage
            wait = min(wait, _NEVER_OPENED_WAIT_S)
        if self.drain(wait):
            return True
        seen: set[int] = set()  # the writer may move a batch between the lists while they are read
        left = [op for op in [*self._inflight, *self.backlog.snapshot(), *list(self._queue.queue)]
                if op[0] != "flush" and not (id(op) in seen or seen.add(id(op)))]
        runs, begins, steps = pending_summary(left)
        if not runs:
            return True
        shown = ", ".join(runs[:3]) + (", …" if len(runs) > 3 else "")
        logger.warning(
            "causaltrace: at exit the store at %s had not taken %d run(s) within %.0f s (%s: %d begin row(s), %d "
            "step(s)); they are not stored%s", self._where(), len(runs), wait, shown, begins, steps,
            f"; {self.backlog.dropped_runs} older run(s) were dropped before" if self.backlog.dropped_runs else "",
        )
        return False

    def _submit(self, op: str, payload: Any, done: threading.Event | None = None, *, wake: bool = True) -> None:
        if not self.config.store:
            if done is not None:
                done.set()
            return
        if self._writer_pid != os.getpid():  # (else the writer runs: see _ensure_writer)
            self._ensure_writer()
        if op != "flush":
            next(self._handed)
        q = self._queue  # its put inline, as in accept
        q.queue.append((op, payload, done))
        if getattr(q, "_deep", False):
            q.wake()
        if self._retiring:  # the writer may have ended since: check again AFTER the put (see :meth:`_retire`)
            self._ensure_writer()
        if done is not None and (self._down or self._stalled):
            done.set()  # the store does not answer: the operation is held, its submitter does not wait
        if done is not None and wake:  # someone waits on it (a flush, a run's end): the writer takes it now
            self._queue.wake()

    def _settled(self, items: list[Op]) -> None:
        """These operations are written or given up: wake their waiters and :meth:`drain`. (Counted first: a waiter
        woken by its event and flushing then finds nothing unwritten — no round trip to the writer.)"""
        n = 0
        for op, _, _ in items:
            n += op != "flush"
        if n:
            with self._idle_lock:
                self._settled_n += n
                if self._draining:
                    self._idle.notify_all()
        for _, _, event in items:
            if event is not None:
                event.set()

    def _unwritten(self) -> int:
        """Data operations handed over and not settled yet (the caller holds ``_idle``). ``next`` reads the
        hand-over counter and counts the read itself, which ``_handed_reads`` takes back out."""
        self._handed_reads += 1
        return next(self._handed) - self._handed_reads - self._settled_n

    def _stall(self, run_id: str, wait_s: float) -> None:
        """A run's end waited ``wait_s`` in vain (the store is locked or slow): say so once per episode; until the
        store answers, later runs do not wait."""
        first = not self._stalled
        self._stalled = True
        if first:
            logger.warning(
                "causaltrace: the store at %s has not taken run %s within %.0f s (locked or slow); it stays queued "
                "and is written when the store answers (at exit causaltrace waits up to %.0f s more)",
                self._where(), run_id, wait_s, self.exit_wait_s,
            )

    def _ensure_writer(self) -> None:
        if self._writer_pid == os.getpid():  # the writer runs (it clears the mark before it ends; a fork's child
            return  # has another pid): no ``is_alive()`` — a lock and three calls — on every hand-over
        with self._lock:
            if self._writer is not None and self._writer.is_alive():  # (a fork's child: not alive)
                return
            self._writer = threading.Thread(target=self._run_writer, name="causaltrace-store-writer", daemon=True)
            self._writer.start()
            _LIVE.add(self)

    def _run_writer(self) -> None:
        """The writer thread: marks the process it runs in while :meth:`_write_loop` runs — until :meth:`_retire`
        ends it (and clears the mark itself), or forever while the set-up is in force."""
        self._writer_pid = os.getpid()
        try:
            self._write_loop()
        except BaseException:
            self._writer_pid = None
            raise

    def _retire(self) -> bool:
        """Writer thread, once :meth:`shutdown` was called: whether to end now — nothing queued, nothing held.

        Race-free with a hand-over on another thread, which (once the collector retires) checks for a writer again
        AFTER it queued its operation (:meth:`_submit`): the mark is cleared first, so a hand-over that still saw it
        queued before this check; one that did not takes :meth:`_ensure_writer`'s lock, which this decision holds,
        and starts a new writer."""
        if len(self.backlog) or self._queue.queue:
            return False
        self._writer_pid = None
        with self._lock:
            if self._queue.queue:  # handed over meanwhile: still this writer's to write
                self._writer_pid = os.getpid()
                return False
            self._writer = None
            _LIVE.discard(self)
        return True

    def _open_store(self) -> RunStore:
        """The store of the next batch. One rule for every part of causaltrace (``Store()``, ``repair()``, this
        writer): the store is ``config.db_path``, else ``$CAUSALTRACE_DB`` / ``$CAUSALTRACE_HOME`` resolved at the
        time of use — so when the home changes within a process, later writes follow it (issue 21 item 12)."""
        if self._reconnect and self._store is not None:  # the last write failed: a fresh connection first
            reconnect = getattr(self._store, "reconnect", None)
            if callable(reconnect):
                reconnect()
            self._reconnect = False
        if self._store_factory is not None:
            if self._store is None:
                self._store = self._store_factory()
            return self._store
        target = self._target_now()
        if self._store is not None and self._target is not target and self._target != target:
            self._store = None  # not closed: another collector may write through it (closed when none holds it)
        if self._store is None:
            self._store = _open_shared(target, self.config.store_max_chars)
            self._target = target
        return self._store

    def _target_now(self) -> Any:
        """The store target by the rule of :meth:`_open_store` (a path, or a URL): resolved again only when one of
        the variables it depends on changed (rebuilding the config from the environment for every batch cost the
        writer ~80 µs a transaction)."""
        if self.config.db_path:
            return self.config.db_path
        # what the default target depends on: $CAUSALTRACE_DB, else $CAUSALTRACE_HOME (whose ``~`` is $HOME) — read
        # from the environment's own dict where it has one (POSIX: three C look-ups instead of three calls each)
        env = getattr(os.environ, "_data", None)
        env, names = (env, _ENV_KEYS) if type(env) is dict and _ENV_KEYS else (os.environ, _ENV_NAMES)
        key = (env.get(names[0]), env.get(names[1]), env.get(names[2]))
        if self._target_key is None or self._target_key[0] != key:
            self._target_key = (key, TraceConfig.from_env().resolved_db_path())
        return self._target_key[1]

    def _write_loop(self) -> None:
        while True:
            if self._retiring and self._retire():
                return
            pending = self._next_batch()
            if not pending:  # woken with nothing queued (exit, a retiring set-up): look again
                continue
            if pending[0][0] == "flush" and all(op == "flush" for op, _, _ in pending):
                self._settled(pending)  # nothing to write: wake the waiters
                continue
            self._inflight = pending
            try:
                store = self._open_store()
                self._opened = True
            except Exception as exc:  # the store cannot be opened: not yet (hold, retry later), or never (drop)
                if is_transient(exc):
                    self._hold(pending, exc, opening=True)
                else:
                    self._inflight = []
                    self._write_failed(exc, opening=True)
                    self._settled(pending)
                continue
            try:
                with _transaction(store):  # one commit for the whole batch
                    written = self._apply(store, pending)
            except Exception as exc:
                if is_transient(exc):
                    self._hold(pending, exc)
                    continue
                self._one_by_one(store, pending)  # the batch rolled back: only a failing operation is lost
                continue
            if self.on_commit is not None:
                self._acknowledge(pending, written)
            self._remember(written)
            self._answered()
            self._settled(pending)

    def _one_by_one(self, store: RunStore, pending: list[Op]) -> None:
        """Write a batch that failed one operation at a time: a bad operation is dropped and counted; when the
        store stops answering meanwhile, the rest is held."""
        written: dict[str, set[str] | None] = {}
        for i, item in enumerate(pending):
            try:
                with _transaction(store):
                    new = self._apply(store, [item], written)
            except Exception as exc:
                if is_transient(exc):
                    self._remember(written)
                    self._hold(pending[i:], exc)
                    return
                self._write_failed(exc)
            else:
                _merge(written, new)
                self._acknowledge([item], new)
                self._answered()
            self._settled([item])
        self._remember(written)

    def _next_batch(self) -> list[Op]:
        """The next operations to write: held ones first (with whatever was queued meanwhile, within the
        backlog's bound), else a fresh batch gathered with the linger."""
        if not self.backlog.ops:
            return self._gather()
        new = self._drain_queue([], _UNBOUNDED)
        if self._down:  # nobody waits for an operation the store does not take
            for _, _, event in new:
                if event is not None:
                    event.set()
        dropped, subsumed = self.backlog.extend(new)
        for _, (run_id, step), _ in subsumed:  # a step stored live and sent again since: the end rewrites it
            self._stored.get(run_id, set()).discard(step.step_id)
        self._settled(subsumed)  # their run's end, queued after them, writes them
        if dropped:
            self._dropped(dropped)
        if self._exiting:
            self.backlog.begins_first()
        return self.backlog.take(_MAX_BATCH)

    def _hold(self, items: list[Op], exc: BaseException, *, opening: bool = False) -> None:
        """The store did not answer: keep ``items`` at the head of the backlog, drop the connection, say it
        once, and sleep the backoff (cut short at exit)."""
        self._inflight = []
        self.backlog.push_front(items)
        self._reconnect = True
        self._down = True
        for _, _, event in items:
            if event is not None:
                event.set()
        self._write_failed(exc, opening=opening, held=True)
        if self._exiting:
            time.sleep(min(self._backoff_s, _BACKOFF_EXIT_S))
        else:
            self._wake.wait(self._backoff_s)
        self._backoff_s = min(self._backoff_s * 2, _BACKOFF_MAX_S)

    def _answered(self) -> None:
        """A write committed: the store answers again."""
        self._inflight = []
        self._backoff_s = _BACKOFF_MIN_S
        self._stalled = False
        if self._down:
            self._down = False
            logger.info("causaltrace: the store at %s answers again; writing what was held", self._where())

    def _dropped(self, ops: list[Op]) -> None:
        """Operations dropped past the backlog's bound: counted, said in one line the first time."""
        global _DROP_WARNED
        self._settled(ops)
        with _WARN_LOCK:
            first, _DROP_WARNED = not _DROP_WARNED, True
        if first:
            logger.warning(
                "causaltrace: the store at %s does not answer and more than %d runs are queued: the oldest run (%s) "
                "was dropped; later drops are counted", self._where(), self.backlog.max_runs, self.backlog.dropped_ids[0]
                if self.backlog.dropped_ids else "?",
            )

    def _acknowledge(self, items: list[tuple[str, Any, threading.Event | None]], written: dict[str, set[str] | None]) -> None:
        """Tell :attr:`on_commit` what the transaction that wrote ``items`` made durable. A step counts only when
        its run's begin row is committed and its final write not yet (a late step of a finished run is ignored by
        the store, so it is never acknowledged); a finished run acknowledges all of its steps."""
        hook = self.on_commit
        if hook is None:
            return
        begun = tuple(payload[0] for op, payload, _ in items if op == "begin")
        finished = [payload for op, payload, _ in items if op == "finish"]
        self._open_rows.update(begun)
        steps = {run_id: frozenset(ids) for run_id, ids in written.items() if ids and run_id in self._open_rows}
        for run in finished:
            steps[run.run_id] = frozenset(s.step_id for s in run.steps)
            self._open_rows.discard(run.run_id)
        try:
            hook(Commit(begun=begun, steps=steps, finished=tuple(run.run_id for run in finished)))
        except Exception:
            logger.debug("causaltrace: the on_commit hook raised", exc_info=True)

    def _write_failed(self, exc: BaseException, *, opening: bool = False, held: bool = False) -> None:
        """Count a failed write; warn in ONE line, once per process, naming the store (the host's stderr stays
        readable: an unwritable ``CAUSALTRACE_HOME`` is not a traceback per run)."""
        global _WARNED
        self.write_errors += 1
        with _WARN_LOCK:
            first, _WARNED = not _WARNED, True
        what = "cannot open the store" if opening else "writing to the store failed"
        message = " ".join(f"{exc}".split()) or type(exc).__name__
        then = (f"runs are kept (up to {self.backlog.max_runs}) and written when it answers" if held
                else "runs are not stored" if opening else "that write is not stored")
        if first:
            logger.warning("causaltrace: %s at %s (%s); %s, later failures are counted", what, self._where(), message, then)
        else:
            logger.debug("causaltrace: %s at %s (%s)", what, self._where(), message)

    def _where(self) -> str:
        """The open store's own name (a URL without its password), else the target it is opened from, masked."""
        from causaltrace.collector.store_sql import shown_target  # lazily: only a message needs it

        where = getattr(self._store, "location", None) if self._store is not None else None
        if where is None:
            where = shown_target(str(self._target_now() if self._store_factory is None else self.config.resolved_db_path()))
        return str(where)

    def _gather(self) -> list[tuple[str, Any, threading.Event | None]]:
        """The next batch of operations: whatever is queued once the writer has something to look at — an operation
        somebody waits on, or its poll every ``linger_s`` (``OpQueue.sleep``) — so a short run's begin, steps and
        end usually share one transaction, written while the run's end waits for it. Empty when it was woken for
        nothing (exit, a retiring set-up)."""
        self._queue.sleep(self.linger_s, _IDLE_POLLS)
        return self._drain_queue([], _MAX_BATCH)

    def _drain_queue(self, into: list[Op], limit: int) -> list[Op]:
        """Move what is queued (up to ``limit`` operations in all) to ``into`` at once: one hold of the queue's lock
        instead of a ``get_nowait`` — a lock, a condition and a notify in Python — per operation."""
        q = self._queue
        with q.mutex:
            items = q.queue
            take = min(len(items), limit - len(into))
            pop = items.popleft  # one at a time: a put appends without the lock (``OpQueue``)
            into.extend([pop() for _ in range(take)])
            if take and q.maxsize > 0:
                q.not_full.notify(take)
        return into

    def _apply(
        self,
        store: RunStore,
        pending: list[tuple[str, Any, threading.Event | None]],
        written_before: dict[str, set[str] | None] | None = None,
    ) -> dict[str, set[str] | None]:
        """Write ``pending`` in order; returns per run the step ids written (None: the run was finished).

        A run whose end is in the batch has its steps written by that end, which carries them all (the Run holds the
        latest version of each): its step operations before the end are not written on their own first — one
        statement and one look-up of the run's row fewer per run."""
        written: dict[str, set[str] | None] = {}
        batch: list[Step] = []
        carried, whole = carried_by_an_end(pending)
        resent: dict[str, set[str]] = {}  # per run, the steps its end carries that were sent again in this batch
        new_run = getattr(store, "finish_new_run", None) if whole else None
        for i, (op, payload, _) in enumerate(pending):
            if op == "steps":
                if i in carried:
                    resent.setdefault(payload[0], set()).add(payload[1].step_id)
                else:
                    batch.append(payload[1])
                continue
            if batch:
                self._write_steps(store, batch, written)
                batch = []
            if op == "begin":
                run_id, fields = payload
                end = whole.get(i)
                # begun and ended in this batch, nothing of it stored yet: its row written once, as it ends, here
                if (end is not None and new_run is not None and run_id not in written and run_id not in self._stored
                        and not (written_before and run_id in written_before)
                        and new_run(pending[end][1], fields)):
                    written[run_id] = None
                    whole[end] = -1  # (its end: written)
                    continue
                store.begin_run(run_id, **fields)
            elif op == "finish":
                if whole.get(i) == -1:
                    resent.pop(payload.run_id, None)
                    continue
                stored = set(self._stored.get(payload.run_id, ()))
                stored |= (written_before or {}).get(payload.run_id) or set()
                stored |= written.get(payload.run_id) or set()
                stored -= resent.pop(payload.run_id, set())  # stored live, sent again since: the end rewrites them
                store.finish_run(payload, stored_steps=stored)
                written[payload.run_id] = None
        if batch:
            self._write_steps(store, batch, written)
        return written

    def _remember(self, written: dict[str, set[str] | None]) -> None:
        """After a commit: the steps now stored per live run (the run's final write keeps their rows)."""
        for run_id, ids in written.items():
            with self._lock:
                live = run_id in self._runs
            if ids is None or not live:  # finished (late steps of a finished run are not kept either)
                self._stored.pop(run_id, None)
            else:
                self._stored.setdefault(run_id, set()).update(ids)

    @staticmethod
    def _write_steps(store: RunStore, steps: list[Step], written: dict[str, set[str] | None]) -> None:
        by_run: dict[str, list[Step]] = {}
        for step in steps:
            by_run.setdefault(step.run_id, []).append(step)
        for run_id, run_steps in by_run.items():
            store.add_steps(run_id, run_steps)
            if run_id in written and written[run_id] is None:
                continue  # late steps of a run finished in this batch: the store ignored them
            written.setdefault(run_id, set()).update([s.step_id for s in run_steps])  # type: ignore[union-attr]


#: How often the store writer takes operations nobody waits for (a run's end or a flush wakes it at once).
_LINGER_S = 0.1
#: After this many polls that found nothing, the writer sleeps until a hand-over wakes it (an idle process: none).
_IDLE_POLLS = 10
#: The keys of ``os.environ``'s own dict the store target depends on (POSIX: bytes; elsewhere None, read as usual).
_ENV_NAMES = ("CAUSALTRACE_DB", "CAUSALTRACE_HOME", "HOME")
_ENV_KEYS = tuple(name.encode() for name in _ENV_NAMES) if os.name == "posix" else ()
#: How many finished run ids the collector remembers to recognise late steps (a few hundred KB at most).
_FINISHED_KEPT = 4096
_MAX_BATCH = 2000
_UNBOUNDED = 1 << 62
#: One warning per process for store failures (every later one is counted in ``write_errors``), one for drops.
_WARNED = False
_DROP_WARNED = False
_WARN_LOCK = threading.Lock()
#: The writer's backoff between attempts on a store that does not answer: doubling from MIN to MAX (at exit EXIT).
_BACKOFF_MIN_S = 0.1
_BACKOFF_MAX_S = 5.0
_BACKOFF_EXIT_S = 0.25
#: How long interpreter exit waits for queued writes (a store never opened in this process: at most the second).
_EXIT_WAIT_S = 30.0
_NEVER_OPENED_WAIT_S = 5.0
#: How long a replaced set-up waits for its writes (:meth:`RunCollector.shutdown`, as the flush it always did), and
#: at most for its writer thread to end after them (longer only when a late hand-over keeps it writing).
_SHUTDOWN_WAIT_S = 30.0
_RETIRE_WAIT_S = 1.0
#: What :meth:`RunCollector.begin_run` returns with the store off: nothing to wait for (one shared, already set).
_STEP = {Step}
_BY_INDEX = operator.attrgetter("index")
_NOTHING_TO_WRITE = Done()
_NOTHING_TO_WRITE.set()
#: The Stores the collectors of this process write through, by (pid, target, max_chars): see :func:`_open_shared`.
_SHARED: weakref.WeakValueDictionary[tuple[int, str, int], Store] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()
#: The collectors with a writer thread, closed (drained, bounded) at interpreter exit.
_LIVE: weakref.WeakSet[RunCollector] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for collector in list(_LIVE):
        try:
            collector.close()
        except Exception:  # exit goes on whatever a collector does
            logger.debug("causaltrace: closing a collector at exit failed", exc_info=True)


def _open_shared(target: Any, max_chars: int) -> Store:
    """The open Store of ``target`` in this process, else a newly opened one (a StoreError when it cannot be).

    Every collector of the process writes a target through ONE Store (its lock serialises their transactions): a
    set-up configured again (``configure()`` with another provider or config, a test's or benchmark's next batch)
    reuses the open connection instead of opening, checking and migrating the store and compiling its statements
    again — ~0.6 ms a set-up, a dozen µs per event of a benchmark batch of six AutoGen runs. Held weakly: a Store
    no collector holds any more is closed. Never reused across a fork, once closed or known broken, nor — SQLite —
    when its file was deleted or replaced since (``Store.reusable``)."""
    key = (os.getpid(), os.fspath(target), max_chars)
    with _SHARED_LOCK:
        store = _SHARED.get(key)
    if store is not None and store.reusable():
        return store
    from causaltrace.collector.store import Store

    store = Store(target, max_chars=max_chars)
    with _SHARED_LOCK:
        _SHARED[key] = store
    return store


def _merge(into: dict[str, set[str] | None], new: dict[str, set[str] | None]) -> None:
    for run_id, ids in new.items():
        if ids is None or into.get(run_id, set()) is None:
            into[run_id] = None
        else:
            into.setdefault(run_id, set()).update(ids)  # type: ignore[union-attr]


def _transaction(store: RunStore) -> AbstractContextManager[Any]:
    """The store's grouping transaction (a custom store without one writes each operation on its own)."""
    begin = getattr(store, "transaction", None)
    return begin() if callable(begin) else nullcontext()
