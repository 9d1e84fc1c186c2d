"""Crash safety of the live store writer (issue 21 items 8 and 9, and the chaos benchmark).

The writer's acknowledgement (``RunCollector.on_commit``) names only what a committed transaction made durable, and
a tiny round of ``benchmarks/bench_chaos.py`` — one worker process of real instrumented runs, SIGKILLed three times
at seeded moments, most of them in a run's first 100 ms — loses no run whose block started and no acknowledged
step, and leaves a store that passes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from causaltrace.collector.live import Commit, RunCollector
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.schema import Outcome, Step

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _step(run_id: str, i: int) -> Step:
    return Step(step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind="message", agent="a", content=f"m{i}",
                started_at=T0, ended_at=T0, status="ok")


def _collector(store: Store) -> RunCollector:
    collector = RunCollector(TraceConfig(store=True), store_factory=lambda: store)
    collector.linger_s = 5.0  # only a flush or a run's end cuts a batch: the commits below are the ones we make
    return collector


def _stored_ids(path: Path, run_id: str) -> set[str]:
    """The step ids another connection sees committed."""
    with Store(path) as other:
        return {s.step_id for s in other.get_run(run_id).steps}


def test_on_commit_names_only_what_the_store_holds(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store(path)
    collector = _collector(store)
    commits: list[Commit] = []
    collector.on_commit = commits.append
    collector.begin_run("r", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    assert collector.flush(10)
    assert [c.begun for c in commits] == [("r",)]  # the begin row is acknowledged on its own, at once
    collector.accept(_step("r", 0))
    collector.accept(_step("r", 1))
    assert collector.flush(10)
    assert commits[-1].steps == {"r": frozenset({"r/0", "r/1"})} and commits[-1].finished == ()
    assert _stored_ids(path, "r") == {"r/0", "r/1"}  # acknowledged = committed: another connection sees them
    collector.accept(_step("r", 2))
    collector.finish_run("r", framework="test", task="t", started_at=T0, ended_at=T0,
                         outcome=Outcome(status="success", stop="normal"))
    assert commits[-1].finished == ("r",) and commits[-1].steps == {"r": frozenset({"r/0", "r/1", "r/2"})}
    n = len(commits)
    collector.accept(_step("r", 5))  # a late step of a finished run: the store ignores it, so it is never acknowledged
    assert collector.flush(10)
    assert all("r/5" not in ids for c in commits[n:] for ids in c.steps.values())
    assert _stored_ids(path, "r") == {"r/0", "r/1", "r/2"}
    store.close()


def test_a_raising_hook_does_not_stop_the_writer(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.db")
    collector = _collector(store)

    def hook(commit: Commit) -> None:
        raise RuntimeError("the user's hook broke")

    collector.on_commit = hook
    collector.begin_run("r", framework="test", task="t", name=None, trace_id=None, started_at=T0)
    collector.accept(_step("r", 0))
    collector.finish_run("r", framework="test", task="t", started_at=T0, ended_at=T0,
                         outcome=Outcome(status="success", stop="normal"))
    assert collector.write_errors == 0
    assert [s.step_id for s in store.get_run("r").steps] == ["r/0"]
    store.close()


@pytest.fixture(scope="module")
def bench_chaos():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_chaos", ROOT / "benchmarks" / "bench_chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_chaos"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_a_tiny_chaos_round_loses_no_started_run_and_no_acknowledged_step(bench_chaos, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args = bench_chaos.parse_args(["--procs", "1", "--runs", "6", "--kills", "3", "--seed", "3", "--early", "0.7"])
    report = bench_chaos.run_bench(args, tmp_path)
    summary = bench_chaos.table(report)
    assert report["worker_failures"] == [], summary
    assert report["kills"] >= 1, summary
    assert report["runs_started"] >= 1 and report["steps_acknowledged"] >= 1, summary
    assert report["started_runs_missing"] == [], summary  # its begin row came before its block
    assert report["acknowledged_steps_lost"] == [], summary
    assert report["stored_steps_with_wrong_content"] == [], summary
    assert report["finished_runs_not_complete"] == [], summary
    assert report["runs_stored"] == report["runs_stored_complete"] + report["runs_stored_incomplete"], summary
    assert report["runs_stored_incomplete"] <= report["kills"], summary  # only a killed process leaves one
    assert report["integrity_check"] == "ok", summary
    assert report["targets_met"], summary


def test_a_tiny_lock_round_stores_every_run(bench_chaos, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The benchmark's lock phase, small: the store's write lock held 3 s while one worker process keeps running
    runs; every run it started is stored complete once the lock goes (issue 36 item 1)."""
    args = bench_chaos.parse_args(["--procs", "1", "--runs", "3", "--chaos", "lock", "--lock-seconds", "3",
                                   "--max-steps", "3"])
    report = bench_chaos.run_bench(args, tmp_path)
    summary = bench_chaos.table(report)
    assert report["disturber_error"] is None and report["disturbances"] and report["kills"] == 0, summary
    assert report["started_runs_missing"] == [] and report["acknowledged_steps_lost"] == [], summary
    assert report["runs_stored"] == report["runs_stored_complete"] == report["runs_entered"], summary
    assert report["workers_saying_not_stored_at_exit"] == [] and report["targets_met"], summary
