"""The live collector's store writer: a run's operations share one transaction, a failing operation loses only
itself, the final write keeps the step rows written live, and a process that dies mid-run leaves what it handed
over (a real SQLite store underneath)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from causaltrace.collector.live import RunCollector
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.exceptions import StoreError
from causaltrace.schema import Outcome, Step

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class CountingStore(Store):
    """A real store that counts its transactions and can be told to fail one run's begin."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.transactions = 0
        self.fail_begin_of: str | None = None

    def transaction(self):  # type: ignore[no-untyped-def]
        self.transactions += 1
        return super().transaction()

    def begin_run(self, run_id: str, **fields):  # type: ignore[no-untyped-def]
        if run_id == self.fail_begin_of:
            raise StoreError("disk full (planted)")
        return super().begin_run(run_id, **fields)


def _step(run_id: str, i: int) -> Step:
    return Step(step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind="message", agent="a", content=f"m{i}",
                started_at=T0, ended_at=T0, status="ok")


def _collector(store: Store) -> RunCollector:
    collector = RunCollector(TraceConfig(store=True), store_factory=lambda: store)
    collector.linger_s = 5.0  # a slow machine must not split the batch: the run's end cuts the wait short
    return collector


def _write_run(collector: RunCollector, run_id: str, n: int) -> None:
    collector.begin_run(run_id, framework="test", task="t", name=None, trace_id=None, started_at=T0)
    for i in range(n):
        collector.accept(_step(run_id, i))
    collector.finish_run(run_id, framework="test", task="t", started_at=T0, ended_at=T0,
                         outcome=Outcome(status="success", stop="normal"))


def test_a_short_runs_begin_steps_and_end_share_one_transaction(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "s.db")
    collector = _collector(store)
    _write_run(collector, "r1", 5)
    assert collector.flush(10)
    assert store.transactions == 1  # begin, 5 steps and the final Run: one commit (the run ended within the linger)
    assert [s.content for s in store.get_run("r1").steps] == [f"m{i}" for i in range(5)]
    assert store.get_run("r1").outcome.status == "success"


def test_a_failing_operation_rolls_back_its_batch_and_only_itself_is_lost(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "s.db")
    store.fail_begin_of = "bad"
    collector = _collector(store)
    collector.begin_run("good", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    collector.begin_run("bad", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    collector.accept(_step("good", 0))
    collector.finish_run("good", framework="test", task="t", started_at=T0, ended_at=T0,
                         outcome=Outcome(status="success", stop="normal"))
    assert collector.flush(10)
    assert collector.write_errors == 1  # the planted failure, once
    run = store.get_run("good")
    assert [s.step_id for s in run.steps] == ["good/0"] and run.outcome.status == "success"
    with pytest.raises(Exception, match="bad"):
        store.get_run("bad")


def test_the_final_write_keeps_the_rows_written_live(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "s.db")
    collector = _collector(store)
    collector.begin_run("r2", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    for i in range(3):
        collector.accept(_step("r2", i))
    assert collector.flush(10)  # the live rows are committed before the run ends
    with sqlite3.connect(store.path) as conn:
        before = dict(conn.execute("SELECT step_id, rowid FROM steps WHERE run_id = 'r2'").fetchall())
    collector.accept(_step("r2", 3))
    run = collector.finish_run("r2", framework="test", task="t", started_at=T0, ended_at=T0,
                               outcome=Outcome(status="failure", stop="error", reason="x"))
    assert store.get_run("r2") == run
    with sqlite3.connect(store.path) as conn:
        after = dict(conn.execute("SELECT step_id, rowid FROM steps WHERE run_id = 'r2'").fetchall())
    assert {k: after[k] for k in before} == before and len(after) == 4


def test_transaction_groups_writes_and_rolls_them_all_back_on_error(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    with store.transaction():
        store.begin_run("a", framework="test", task="t", name=None, trace_id=None, started_at=T0)
        store.add_steps("a", [_step("a", 0)])
    assert [s.step_id for s in store.get_run("a").steps] == ["a/0"]
    with pytest.raises(RuntimeError), store.transaction():
        store.begin_run("b", framework="test", task="t", name=None, trace_id=None, started_at=T0)
        raise RuntimeError("boom")
    assert [r["run_id"] for r in store.list_runs()] == ["a"]
    # another thread's write waits for the open transaction, then commits on its own
    done = threading.Event()
    with store.transaction():
        t = threading.Thread(target=lambda: (store.begin_run("c", framework="test", task="t", name=None,
                                                             trace_id=None, started_at=T0), done.set()))
        t.start()
        assert not done.wait(0.2)
    t.join(5)
    assert done.is_set() and {r["run_id"] for r in store.list_runs()} == {"a", "c"}


_LIVE_CHILD = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {src!r})
    from opentelemetry.sdk.trace import TracerProvider
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.tracing import configure
    from causaltrace.instrumentation.runs import current_run, run as mark_run
    configure(TracerProvider(), TraceConfig(store=True, db_path=sys.argv[1]))
    with mark_run(task="crash me") as handle:
        ctx = current_run()
        for i in range(3):
            ctx.add_step("message", agent="a", content=f"m{{i}}")
        print(handle.run_id, flush=True)
        time.sleep(1.0)  # longer than the writer's linger: what was handed over is written
        os._exit(9)  # the process dies mid-run, without finishing anything
    """
).format(src=str(Path(__file__).resolve().parents[2] / "src"))


def test_a_process_that_dies_mid_run_leaves_its_run_incomplete_with_its_steps(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    child = subprocess.run([sys.executable, "-c", _LIVE_CHILD, str(db)], capture_output=True, text=True, timeout=120)
    assert child.returncode == 9, child.stderr
    run_id = child.stdout.strip()
    store = Store(db)
    run = store.get_run(run_id)
    assert run.outcome.status == "incomplete"
    assert [s.content for s in run.steps] == ["m0", "m1", "m2"]
