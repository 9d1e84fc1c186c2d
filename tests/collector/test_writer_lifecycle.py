"""The store writer thread of a replaced tracing set-up (issue 35): ``configure()`` again or ``reset_tracing()`` ends
the old collector's ``causaltrace-store-writer`` once it has written what it was handed — the threads no longer pile
up — and loses nothing: a run begun under the old set-up that ends under the new one is stored whole, and a store that
is locked or down at that moment costs no more than the flush's bound; what it held is written once it answers.

Real parts only: real SQLite files (one locked by a second connection), a PostgreSQL cluster of this module's own
(stopped and started), and the AutoGen example team on the scripted clients of ``causaltrace.testing``."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import causaltrace
from _postgres import PostgresServer, temporary_cluster
from causaltrace.collector import live
from causaltrace.collector.live import RunCollector
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.tracing import configure, get_tracing, reset_tracing
from causaltrace.schema import Outcome, Step

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
WRITER = "causaltrace-store-writer"


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WRITER]


def _until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _one_run(i: int) -> str:
    with causaltrace.run(task=f"t{i}", verify="ok") as handle:
        causaltrace.current_run().add_step("message", agent="a", content=f"m{i}")
        handle.report(final_answer="ok")
    return handle.run_id


def _hand_over(collector: RunCollector, run_id: str) -> None:
    """A run's begin, one step and end handed to ``collector`` as the instrumentation does, nobody waiting."""
    collector.begin_run(run_id, framework="test", task="t", name=None, trace_id=None, started_at=T0)
    collector.accept(Step(step_id=f"{run_id}/0", run_id=run_id, index=0, kind="message", agent="a", content="m0",
                          started_at=T0, ended_at=T0, status="ok"))
    collector.finish_run(run_id, framework="test", task="t", started_at=T0, ended_at=T0, wait_s=0,
                         outcome=Outcome(status="success", stop="normal"))


@pytest.fixture(autouse=True)
def _forget_the_set_up() -> Iterator[None]:
    yield
    reset_tracing()


def test_configuring_again_and_again_keeps_one_writer_thread(store_target: str) -> None:
    """Twelve set-ups in a row, each storing a run: one writer thread at most (the live set-up's), every run stored;
    before, each replaced set-up left its writer running for the life of the process."""
    before = len(_writers())
    ids = []
    for i in range(12):
        configure(TracerProvider(), TraceConfig(db_path=store_target))
        ids.append(_one_run(i))
        assert len(_writers()) <= before + 1, [t.ident for t in _writers()]
    with Store(store_target, readonly=True) as store:
        assert [[s.content for s in store.get_run(run_id).steps] for run_id in ids] == [[f"m{i}"] for i in range(12)]


def test_reset_tracing_leaves_no_writer_thread(store_target: str) -> None:
    configure(TracerProvider(), TraceConfig(db_path=store_target))
    run_id = _one_run(0)
    collector = get_tracing().collector
    writer = collector._writer
    assert writer is not None and writer.is_alive()
    reset_tracing()
    assert not writer.is_alive() and collector._writer is None and writer not in _writers()
    with Store(store_target, readonly=True) as store:
        assert store.get_run(run_id).outcome.status == "success"


async def test_a_run_that_spans_a_reconfigure_is_stored_whole(tmp_path: Path) -> None:
    """The AutoGen example team; the reviewer's model call replaces the set-up mid-run (a new provider): the run
    goes on under the set-up it began with, whose writer ended at the replacement and starts again for the rest of
    the run — every step and the outcome reach the store, and that writer ends again afterwards."""
    pytest.importorskip("autogen_agentchat", reason="the AutoGen extra is not installed")
    from _autogen import example
    from causaltrace.instrumentation.autogen import instrument_autogen, uninstrument_autogen
    from causaltrace.testing.autogen import ScriptedChatCompletionClient, planner_client, reviewer_policy, solver_client

    db = tmp_path / "store.db"
    instrument_autogen(TracerProvider(), TraceConfig(db_path=db))
    old = get_tracing()
    replaced: list[float] = []

    def reviewer(request):  # type: ignore[no-untyped-def]
        if not replaced:
            started = time.monotonic()
            configure(TracerProvider(), TraceConfig(db_path=db))
            replaced.append(time.monotonic() - started)
        return reviewer_policy(request)

    team = example.build_with((planner_client(), solver_client(), ScriptedChatCompletionClient(reviewer, model="r")))
    try:
        async with causaltrace.run(task=example.TASK, verify=example.verify) as handle:
            await team.run(task=example.TASK)
    finally:
        uninstrument_autogen()
    assert replaced and get_tracing() is not old
    assert handle.run is not None and handle.outcome is not None and handle.outcome.status == "success"
    with Store(db, readonly=True) as store:
        stored = store.get_run(handle.run_id)
    assert len(handle.run.steps) == 17
    assert [(s.index, s.kind, s.agent, s.content) for s in stored.steps] == [
        (s.index, s.kind, s.agent, s.content) for s in handle.run.steps]
    assert stored.outcome.status == "success" and stored.ended_at is not None
    assert _until(lambda: old.collector._writer is None, 5), "the replaced set-up's writer did not end again"


def test_shutdown_with_a_locked_sqlite_store_returns_within_its_bound_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the write lock: ``reset_tracing()`` returns within the shutdown's bound (2 s here,
    30 s by default — the flush it always did) and says it did not write everything; once the lock goes, the writer
    stores the run and ends."""
    monkeypatch.setattr(live, "_SHUTDOWN_WAIT_S", 2.0)
    db = tmp_path / "store.db"
    Store(db).close()
    collector = configure(TracerProvider(), TraceConfig(db_path=db)).collector
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        _hand_over(collector, "locked")
        started = time.monotonic()
        reset_tracing()
        took = time.monotonic() - started
        assert 1.5 < took < 4, took
        assert collector._writer is not None and collector._writer.is_alive()  # still waiting for the lock
    finally:
        locker.execute("COMMIT")
        locker.close()
    assert collector.drain(60)
    with Store(db, readonly=True) as store:
        run = store.get_run("locked")
    assert run.outcome.status == "success" and [s.content for s in run.steps] == ["m0"]
    assert _until(lambda: collector._writer is None, 5)


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    """A cluster of this module's own: stopping it must not cut the connections of other tests."""
    with temporary_cluster("ct-pg-lifecycle-") as server:
        yield server


def test_shutdown_with_a_postgresql_store_down_returns_at_once_and_the_backlog_writes_it(
    own_postgres: PostgresServer,
) -> None:
    """The server is down while a set-up is replaced: the shutdown does not wait for it, the run stays in the
    backlog, and the old set-up's writer stores it once the server is back, then ends."""
    url = own_postgres.new_database()
    Store(url).close()
    collector = configure(TracerProvider(), TraceConfig(db_path=url)).collector
    own_postgres.stop()
    try:
        _hand_over(collector, "down")
        assert _until(lambda: collector._down, 10)  # the writer found the server gone and holds the run
        started = time.monotonic()
        configure(TracerProvider(), TraceConfig(db_path=url))
        assert time.monotonic() - started < 1.0
        assert collector._writer is not None and collector._writer.is_alive()
    finally:
        own_postgres.start_again()
    assert collector.drain(60)
    with Store(url, readonly=True) as store:
        run = store.get_run("down")
    assert run.outcome.status == "success" and [s.content for s in run.steps] == ["m0"]
    assert _until(lambda: collector._writer is None, 5)
