"""Writers that survive their database (issue 36 item 1): a PostgreSQL restart, a reaped idle connection and a
SQLite file write-locked by another connection for 15 s lose no run; a store that never answers costs a bounded
backlog (the oldest run dropped, counted, said once) and a bounded wait at exit that says what it could not write.

Real parts only: a PostgreSQL cluster of this module's own (it is restarted with ``pg_ctl restart``), the session's
cluster for the reaped connection, a real SQLite file locked by a second connection, instrumented runs in child
processes through the public API."""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from _postgres import PostgresServer, temporary_cluster
from causaltrace.collector import live
from causaltrace.collector.backlog import Backlog, is_transient
from causaltrace.collector.live import RunCollector
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.exceptions import StoreError
from causaltrace.schema import Outcome, Run, Step

SRC = str(Path(__file__).resolve().parents[2] / "src")
T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)

#: A child that runs ``n`` instrumented runs one after another (one step each), printing each run id when done.
_RUNS = (
    "import sys, time\nimport causaltrace\n"
    "n, gap = int(sys.argv[1]), float(sys.argv[2])\n"
    "for i in range(n):\n"
    "    with causaltrace.run(task=f't{i}', verify='ok') as h:\n"
    "        causaltrace.current_run().add_step('message', agent='a', content=f'm{i}')\n"
    "        h.report(final_answer='ok')\n"
    "    print(h.run_id, flush=True)\n"
    "    time.sleep(gap)\n"
)


def _env(db: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CAUSALTRACE_"))}
    env.update(PYTHONPATH=SRC, CAUSALTRACE_DB=db, CAUSALTRACE_HOME=str(home))
    return env


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    """A cluster of this module's own: restarting it must not cut the connections of other tests."""
    with temporary_cluster("ct-pg-restart-") as server:
        yield server


def test_a_postgresql_restart_mid_run_loses_no_run(own_postgres: PostgresServer, tmp_path: Path) -> None:
    """``pg_ctl restart`` while a writer process runs 24 runs: every run is stored complete, in one warning line."""
    url = own_postgres.new_database()
    Store(url).close()  # created and migrated before the writer starts
    child = subprocess.Popen([sys.executable, "-c", _RUNS, "24", "0.1"], env=_env(url, tmp_path / "home"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    ids = [child.stdout.readline().strip() for _ in range(4)]
    took = own_postgres.restart()  # every connection is cut; the server is down for a moment
    ids += [line.strip() for line in child.stdout]
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr
    assert len(ids) == 24 and took < 10
    with Store(url, readonly=True) as store:
        runs = {run_id: store.get_run(run_id) for run_id in ids}
    assert {r.outcome.status for r in runs.values()} == {"success"}, stderr
    assert [len(r.steps) for r in runs.values()] == [1] * 24
    lines = _warnings(stderr)
    assert len(lines) <= 1 and "not stored" not in stderr and "Traceback" not in stderr, stderr


def _step(run_id: str, i: int) -> Step:
    return Step(step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind="message", agent="a", content=f"m{i}",
                started_at=T0, ended_at=T0, status="ok")


def _write_run(collector: RunCollector, run_id: str, *, wait_s: float = 10.0) -> None:
    collector.begin_run(run_id, framework="test", task="t", name=None, trace_id=None, started_at=T0)
    collector.accept(_step(run_id, 0))
    collector.finish_run(run_id, framework="test", task="t", started_at=T0, ended_at=T0, wait_s=wait_s,
                         outcome=Outcome(status="success", stop="normal"))


def test_a_reaped_idle_connection_is_replaced(pg_url: str) -> None:
    """The server ends the writer's idle connection (``pg_terminate_backend``, as an idle-session reaper does): the
    next run is stored over a new connection."""
    import psycopg

    collector = RunCollector(TraceConfig(store=True, db_path=pg_url))
    _write_run(collector, "before")
    assert collector.drain(10)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        reaped = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
    assert reaped
    _write_run(collector, "after")
    assert collector.drain(20)
    with Store(pg_url, readonly=True) as store:
        assert store.get_run("after").outcome.status == "success"
        assert [s.content for s in store.get_run("after").steps] == ["m0"]
    collector.close()


def test_a_sqlite_store_locked_for_15_s_stores_the_run_at_exit(tmp_path: Path) -> None:
    """Another connection holds the write lock for 15 s (a VACUUM, a backup, a big import): the run that ended
    meanwhile is stored before the process exits, and the one line says it waits instead of claiming it is written."""
    db = tmp_path / "store.db"
    Store(db).close()
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", _RUNS, "1", "0"], env=_env(str(db), tmp_path / "home"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(max(0.0, 15 - (time.monotonic() - started)))
    finally:
        locker.execute("COMMIT")
        locker.close()
    stdout, stderr = child.communicate(timeout=90)
    assert child.returncode == 0, stderr
    run_id = stdout.strip()
    with Store(db, readonly=True) as store:
        run = store.get_run(run_id)
    assert run.outcome.status == "success" and [s.content for s in run.steps] == ["m0"]
    lines = _warnings(stderr)
    assert len(lines) == 1 and "stays queued" in lines[0] and "not stored" not in stderr, stderr


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_store_that_never_answers_keeps_a_bounded_backlog_and_says_what_it_lost(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5 runs for a server that is down, a bound of 2 runs: the 3 oldest are dropped (counted, one line); at exit
    the 2 kept are named in one line, within the bounded wait."""
    monkeypatch.setattr(live, "_DROP_WARNED", False)
    collector = RunCollector(TraceConfig(store=True, db_path=f"postgresql://ct@127.0.0.1:{_closed_port()}/x"))
    collector.backlog.max_runs = 2
    caplog.set_level(logging.WARNING, logger="causaltrace")
    t = time.monotonic()
    for i in range(5):
        _write_run(collector, f"r{i}")  # nobody waits for a store that does not answer
        time.sleep(0.05)
    assert time.monotonic() - t < 5
    deadline = time.monotonic() + 15
    while collector.backlog.dropped_runs < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert collector.backlog.dropped_runs == 3 and collector.backlog.dropped_ids == ["r0", "r1", "r2"]
    t = time.monotonic()
    assert collector.close(timeout_s=1) is False
    assert time.monotonic() - t < 3
    drops = [r.getMessage() for r in caplog.records if "was dropped" in r.getMessage()]
    exits = [r.getMessage() for r in caplog.records if "at exit" in r.getMessage()]
    assert len(drops) == 1 and "r0" in drops[0]
    assert len(exits) == 1 and "2 run(s)" in exits[0] and "r3, r4" in exits[0] and "3 older run(s)" in exits[0]


def test_the_backlog_keeps_order_compacts_a_finished_run_and_puts_begin_rows_first_at_exit() -> None:
    run = Run(run_id="b", framework="test", steps=(_step("b", 0),))
    log = Backlog(max_runs=10)
    dropped, subsumed = log.extend([("begin", ("a", {}), None), ("steps", ("a", _step("a", 0)), None), ("begin", ("b", {}), None),
                ("steps", ("b", _step("b", 0)), None), ("finish", run, None), ("begin", ("c", {}), None)])
    assert [op[0] for op in log.ops] == ["begin", "steps", "begin", "finish", "begin"]  # b's steps are in its end
    assert not dropped and [op[1][0] for op in subsumed] == ["b"]
    log.begins_first()
    assert [(op[0], op[1][0] if op[0] != "finish" else op[1].run_id) for op in log.ops] == [
        ("begin", "a"), ("begin", "b"), ("begin", "c"), ("steps", "a"), ("finish", "b")]
    assert [op[0] for op in log.take(2)] == ["begin", "begin"] and len(log) == 3


def test_what_counts_as_the_store_not_answering() -> None:
    locked = sqlite3.OperationalError("database is locked")
    wrapped = StoreError("cannot write to the store 'x': database is locked")
    wrapped.__cause__ = locked
    assert is_transient(locked) and is_transient(wrapped)
    assert not is_transient(StoreError("disk full (planted)")) and not is_transient(ValueError("bad step"))


def test_under_a_long_lock_only_the_first_async_run_end_waits(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A SQLite file write-locked by another connection: the first ``async with`` run's end waits its bounded 10 s
    and says so once; the runs after it do not wait for a store that does not answer; all are stored once the lock
    goes."""
    import asyncio

    from opentelemetry.sdk.trace import TracerProvider

    import causaltrace
    from causaltrace.instrumentation.tracing import configure, reset_tracing

    db = tmp_path / "store.db"
    Store(db).close()
    collector = configure(TracerProvider(), TraceConfig(db_path=db)).collector
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    caplog.set_level(logging.WARNING)

    async def one(i: int) -> tuple[str, float]:
        started = time.monotonic()
        async with causaltrace.run(task=f"t{i}", verify="ok") as handle:
            handle.report(final_answer="ok")
        return handle.run_id, time.monotonic() - started

    try:
        results = [asyncio.run(one(i)) for i in range(3)]
    finally:
        locker.execute("COMMIT")
        locker.close()
    try:
        assert collector.drain(60)
        took = [t for _, t in results]
        assert 9 < took[0] < 20 and max(took[1:]) < 3, took
        waits = [r for r in caplog.records if "longer than" in r.getMessage() or "has not taken" in r.getMessage()]
        assert len(waits) == 1, [r.getMessage() for r in caplog.records]
        with Store(db, readonly=True) as store:
            assert {store.get_run(run_id).outcome.status for run_id, _ in results} == {"success"}
    finally:
        reset_tracing()
