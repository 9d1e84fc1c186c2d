"""The async run end waits for the store ON the event loop (issue 35): the writer completes a future of the loop when
the run is written, so no thread of the loop's default executor carries the wait (two thread hand-offs per run
before), the loop keeps running while the store is locked, and the run is stored when the end returns.

Real parts only: a real SQLite file (locked by a second connection), the AutoGen example team on the scripted clients
of ``causaltrace.testing``, a real ThreadPoolExecutor as the loop's default executor, counting what it is given."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import causaltrace
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.tracing import configure, reset_tracing


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting the calls handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted: list[str] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.submitted.append(getattr(fn, "__qualname__", repr(fn)))
        return super().submit(fn, *args, **kwargs)


@pytest.fixture(autouse=True)
def _forget_the_set_up() -> Iterator[None]:
    yield
    reset_tracing()


async def test_an_autogen_run_end_waits_for_the_store_without_an_executor_thread(tmp_path: Path) -> None:
    """The example team's own run (no ``causaltrace.run`` block: the adapter finishes it) is stored when ``team.run``
    returns, and nothing of causaltrace went through the loop's default executor (before: the end's flush)."""
    pytest.importorskip("autogen_agentchat", reason="the AutoGen extra is not installed")
    from _autogen import example
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen

    db = tmp_path / "store.db"
    instrument_autogen(TracerProvider(), TraceConfig(db_path=db))
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    try:
        for _ in range(2):
            await example.build().run(task=example.TASK)
    finally:
        uninstrument_autogen()
    with Store(db, readonly=True) as store:  # read before anything else waits: the ends waited for their writes
        runs = [store.get_run(row["run_id"]) for row in store.list_runs()]
    assert len(runs) == 2 and all(len(run.steps) > 10 and run.ended_at is not None for run in runs)
    assert {run.outcome.final_answer for run in runs} == {"RESULT: 126 verified."}
    assert executor.submitted == [], executor.submitted


async def test_a_locked_store_delays_the_run_end_but_never_the_event_loop(tmp_path: Path) -> None:
    """The store is write-locked by another connection inside the run's block and released 1 s later: the run's end
    waits for its write (it is stored when ``async with`` exits), while a ticker on the same loop keeps ticking."""
    db = tmp_path / "store.db"
    Store(db).close()
    configure(TracerProvider(), TraceConfig(db_path=db))
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    locker = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    release = threading.Timer(1.0, locker.execute, ("COMMIT",))
    try:
        async with causaltrace.run(task="t", verify="ok") as handle:  # its begin row is written before the block
            locker.execute("BEGIN IMMEDIATE")
            release.start()
            causaltrace.current_run().add_step("message", agent="a", content="m0")
            handle.report(final_answer="ok")
            ended = time.monotonic()
        took = time.monotonic() - ended
        with Store(db, readonly=True) as store:
            run = store.get_run(handle.run_id)
    finally:
        if release.is_alive():
            release.join()
        locker.close()
        stop.set()
        await ticking
    assert 0.7 < took < 5, took  # it waited for the lock to go, not its 10 s bound
    assert run.outcome.status == "success" and [s.content for s in run.steps] == ["m0"]
    assert len(gaps) > 30 and max(gaps) < 0.5, max(gaps)
    assert executor.submitted == [], executor.submitted
