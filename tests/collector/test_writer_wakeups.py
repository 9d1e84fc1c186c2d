"""When the store writer wakes (``collector/handoff.py``): a hand-over nobody waits on (a run's begin row, a step)
does not wake it — the writer takes it on its next poll, at most a linger later — while an operation somebody waits
on (a run's end, a flush, a begin row ``causaltrace.run()`` waits for) wakes it at once; after a few empty polls it
sleeps until the next hand-over wakes it. A wake-up while the agent's thread runs Python costs dozens of futile GIL
wake-ups (the module docstring), so the measured rule is: no wake-up mid-run for a short run.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from causaltrace.collector.handoff import Done, OpQueue
from causaltrace.collector.live import Commit, RunCollector
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.schema import Outcome, Step

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def _sleeper(q: OpQueue, poll_s: float, idle_polls: int) -> tuple[threading.Thread, threading.Event]:
    """A thread sleeping as the writer does; the event is set when its sleep returns."""
    returned = threading.Event()

    def run() -> None:
        q.sleep(poll_s, idle_polls)
        returned.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, returned


def test_a_put_does_not_wake_the_polling_writer_and_a_wake_does() -> None:
    q = OpQueue()
    thread, returned = _sleeper(q, poll_s=30.0, idle_polls=3)
    time.sleep(0.05)
    q.put(("steps", ("r", None), None))
    assert not returned.wait(0.3)  # the put left it asleep: its poll (30 s away) would take the step
    q.wake()
    assert returned.wait(5)
    thread.join(5)
    assert list(q.queue) == [("steps", ("r", None), None)]  # sleep takes nothing: the writer drains the queue


def test_the_poll_returns_once_something_is_queued() -> None:
    q = OpQueue()
    thread, returned = _sleeper(q, poll_s=0.05, idle_polls=1000)
    assert not returned.wait(0.3)  # empty polls: it sleeps on
    q.put(("steps", ("r", None), None))
    assert returned.wait(5)  # the next poll found it (no wake-up was sent)
    thread.join(5)


def test_after_its_idle_polls_the_writer_sleeps_until_a_put_wakes_it() -> None:
    q = OpQueue()
    thread, returned = _sleeper(q, poll_s=0.01, idle_polls=3)
    deadline = time.monotonic() + 5
    while not q._deep and time.monotonic() < deadline:
        time.sleep(0.01)
    assert q._deep  # three empty polls: no timeout any more (an idle process has no wake-ups)
    assert not returned.wait(0.2)
    q.put(("begin", ("r", {}), None))  # the first hand-over after the idle spell wakes it
    assert returned.wait(5)
    thread.join(5)
    assert not q._deep


def test_a_wake_before_the_sleep_is_not_lost() -> None:
    q = OpQueue()
    q.wake()  # the writer was busy writing when a run's end came
    thread, returned = _sleeper(q, poll_s=30.0, idle_polls=3)
    assert returned.wait(5)
    thread.join(5)


def test_no_wake_is_lost_while_the_writer_sleeps_and_drains_around_it() -> None:
    """The writer sleeps on a lock a wake releases (once until taken): hand-overs each followed by a wake, racing a
    writer that sleeps and drains in a loop (its poll 30 s away), are all drained in time — a wake is never taken
    without the writer looking at the queue after it."""
    q = OpQueue()
    drained: list[Any] = []
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            q.sleep(30.0, 1000)
            with q.mutex:
                while q.queue:
                    drained.append(q.queue.popleft())

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for i in range(2000):
            q.queue.append(i)
            q.wake()
        deadline = time.monotonic() + 10
        while len(drained) < 2000 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        q.wake()
        thread.join(5)
    assert drained == list(range(2000))


def test_waiting_on_a_done_pokes_once_unset() -> None:
    pokes: list[int] = []
    done = Done()
    done.poke = lambda: pokes.append(1)
    assert not done.wait(0.01)
    assert pokes == [1]
    done.set()
    assert done.wait(0.01)
    assert pokes == [1]  # set: nothing to wake the writer for
    async_done = Done()
    async_done.poke = lambda: (pokes.append(2), async_done.set())  # the writer answers the poke
    assert asyncio.run(async_done.wait_async(5))
    assert pokes == [1, 2]


def test_a_done_wakes_every_waiter_once_set_and_takes_sets_from_two_threads() -> None:
    """Done is a lock released once by set(): every waiting thread returns, a wait with a timeout returns False
    unset, and sets racing from two threads (a held operation's submitter and the writer) release it once."""
    done = Done()
    assert not done.is_set() and not done.wait(0) and not done.wait(0.01) and not done.wait(-1)
    woke: list[bool] = []
    waiters = [threading.Thread(target=lambda: woke.append(done.wait(10))) for _ in range(4)]
    for t in waiters:
        t.start()
    setters = [threading.Thread(target=done.set) for _ in range(8)]
    for t in setters:
        t.start()
    for t in setters + waiters:
        t.join(10)
    assert woke == [True] * 4 and done.is_set() and done.wait(0) and done.wait()
    done.set()  # again: nothing to release
    assert done.wait(0.01)


def _step(run_id: str, i: int) -> Step:
    return Step(step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind="message", agent="a", content=f"m{i}",
                started_at=T0, ended_at=T0, status="ok")


def _collector(path: Path, linger_s: float) -> tuple[RunCollector, Store, list[Commit]]:
    store = Store(path)
    collector = RunCollector(TraceConfig(store=True), store_factory=lambda: store)
    collector.linger_s = linger_s
    commits: list[Commit] = []
    collector.on_commit = commits.append
    return collector, store, commits


def test_a_begin_row_somebody_waits_for_is_written_at_once(tmp_path: Path) -> None:
    collector, store, commits = _collector(tmp_path / "s.db", linger_s=30.0)
    start = time.monotonic()
    begun = collector.begin_run("r", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    assert begun.wait(10)  # causaltrace.run() waits so: the wait wakes the writer (its poll is 30 s away)
    assert time.monotonic() - start < 10
    assert [c.begun for c in commits] == [("r",)]
    assert [r["run_id"] for r in store.list_runs()] == ["r"]  # the crash record is there before the block runs
    store.close()


def test_a_short_runs_begin_and_steps_nobody_waits_for_are_taken_by_the_poll_in_one_transaction(tmp_path: Path) -> None:
    collector, store, commits = _collector(tmp_path / "s.db", linger_s=0.2)
    collector.begin_run("r", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    for i in range(3):
        collector.accept(_step("r", i))
    deadline = time.monotonic() + 10
    while not commits and time.monotonic() < deadline:
        time.sleep(0.02)
    assert commits, "the writer's poll never took what was handed over"
    assert commits[0].begun == ("r",) and commits[0].steps == {"r": frozenset({"r/0", "r/1", "r/2"})}
    collector.finish_run("r", framework="test", task="t", started_at=T0, ended_at=T0,
                         outcome=Outcome(status="success", stop="normal"))
    assert commits[-1].finished == ("r",)  # the run's end waited for its write: it woke the writer
    assert [s.content for s in store.get_run("r").steps] == ["m0", "m1", "m2"]
    store.close()
