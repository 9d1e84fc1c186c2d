"""Collector assembly and store throughput on a 10,000-step run.

* Collector: steps per second that the live collector assembles into a Run (spans ended out of order, full Steps
  staged by the emitter, as in a live run), and the peak memory of doing so (tracemalloc). Target >= 50,000/s.
  Baseline in the same run: building the same Run directly from the list of Steps (pydantic validation only).
* Store, on BOTH backends in the same run: steps written per second (one finished run, and live batches of 100) —
  target >= 10,000/s; also per CPU second of this process, the steadier figure on a shared machine — and the time
  of the query behind `causaltrace show` (get_run) on the 10,000-step run — target < 1 s. SQLite is a temporary
  file; PostgreSQL is ``--pg-url`` (a database this bench may fill and drop tables in: give an empty one), or else a
  temporary cluster started on a free loopback port by the test fixture's code (tests/_postgres.py: ``initdb`` /
  ``pg_ctl`` on the PATH) and stopped by pid afterwards.

Usage: python benchmarks/bench_collector_store.py [--steps 10000] [--pg-url postgresql://…] [--no-postgres]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from causaltrace.collector._migrations import OUR_TABLES
from causaltrace.collector.live import RunCollector
from causaltrace.collector.store import Store
from causaltrace.config import TraceConfig
from causaltrace.schema import Dependency, Run, Step


def make_steps(n: int, run_id: str = "bench") -> list[Step]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    steps = []
    turn = None
    for i in range(n):
        if i % 20 == 0:
            kind, parent, deps = "agent_turn", None, []
            turn = f"{run_id}/{i}"
        else:
            kind = random.choice(["llm_response", "tool_call", "tool_response", "message"])
            parent = turn
            deps = [Dependency(step_id=f"{run_id}/{i - 1}", kind="saw")]
            if i > 2:
                deps.append(Dependency(step_id=f"{run_id}/{i - 2}", kind="continues"))
        steps.append(Step(step_id=f"{run_id}/{i}", run_id=run_id, index=i, kind=kind, agent=f"agent{i % 4}",
                          parent_step_id=parent, depends_on=tuple(deps), content=f"step {i} " + "x" * 200,
                          outputs={"text": f"out {i}"}, started_at=t0 + timedelta(milliseconds=i),
                          ended_at=t0 + timedelta(milliseconds=i + 1), status="ok"))
    return steps


def bench_collector(steps: list[Step]) -> tuple[float, float, float]:
    shuffled = steps[:]
    random.shuffle(shuffled)
    collector = RunCollector(TraceConfig(store=False))
    tracemalloc.start()
    t = time.perf_counter()
    collector.begin_run("bench", framework="bench", task=None, name=None, trace_id=None, started_at=None)
    for step in shuffled:
        collector.accept(step)
    run = collector.finish_run("bench", framework="bench")
    elapsed = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(run.steps) == len(steps)
    t = time.perf_counter()
    Run(run_id="bench", steps=tuple(steps), framework="bench")
    baseline = time.perf_counter() - t
    return len(steps) / elapsed, peak / 2**20, len(steps) / baseline


def bench_store(
    steps: list[Step], target_a: str, target_b: str
) -> tuple[float, float, float, tuple[float, float], tuple[float, float]]:
    """(finished-run steps/s, live-batch steps/s, get_run seconds, (median ms of the first 10 live batches, of the
    last 10), (finished-run steps per CPU second, live-batch steps per CPU second)) on two fresh stores of one
    backend: a live rate that falls as the run grows shows as last >> first. The CPU rates count this process's
    thread only (a PostgreSQL server's own CPU is not in them): steadier than the wall rates on a busy machine."""
    run = Run(run_id="bench", steps=tuple(steps), framework="bench")
    with Store(target_a) as store:
        t, cpu = time.perf_counter(), time.thread_time()
        store.finish_run(run)
        finished_rate = len(steps) / (time.perf_counter() - t)
        finished_cpu = len(steps) / (time.thread_time() - cpu)
        t = time.perf_counter()
        back = store.get_run("bench")
        query_s = time.perf_counter() - t
        assert back == run
    with Store(target_b) as store:
        store.begin_run("bench", framework="bench", task=None, name=None, trace_id=None, started_at=None)
        batches = []
        cpu = time.thread_time()
        for i in range(0, len(steps), 100):
            t = time.perf_counter()
            store.add_steps("bench", steps[i : i + 100])
            batches.append(time.perf_counter() - t)
        live_cpu = len(steps) / (time.thread_time() - cpu)
        live_rate = len(steps) / sum(batches)
    ends = (statistics.median(batches[:10]) * 1000, statistics.median(batches[-10:]) * 1000)
    return finished_rate, live_rate, query_s, ends, (finished_cpu, live_cpu)


def _postgres_targets(url: str | None, tmp: Path) -> tuple[tuple[str, str], object | None]:
    """Two empty PostgreSQL databases' URLs, and the temporary server to stop afterwards (None for ``--pg-url``)."""
    import psycopg

    if url is not None:
        with psycopg.connect(url, autocommit=True) as conn:
            # every table the store's migrations create (the recording chunk tables too), children first
            for table in sorted(OUR_TABLES, key=lambda t: t in ("meta", "runs", "recordings")):
                conn.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
        return (url, url), None
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from _postgres import PostgresServer

    root = Path(tempfile.mkdtemp(prefix="ct-bench-pg-"))
    server = PostgresServer(root)
    server.start()
    return (server.new_database(), server.new_database()), server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--pg-url", help="an empty PostgreSQL database (default: a temporary cluster)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    random.seed(7)
    steps = make_steps(args.steps)
    rate, peak_mb, baseline = bench_collector(steps)
    print(f"collector assembly: {rate:10,.0f} steps/s  (target >= 50,000/s); peak memory {peak_mb:.1f} MiB")
    print(f"  baseline, Run(...) from a ready list: {baseline:10,.0f} steps/s")
    with tempfile.TemporaryDirectory() as tmp:
        backends = [("sqlite", (str(Path(tmp) / "a.db"), str(Path(tmp) / "b.db")), None)]
        if not args.no_postgres:
            targets, server = _postgres_targets(args.pg_url, Path(tmp))
            backends.append(("postgresql", targets, server))
        try:
            for name, (a, b), _server in backends:
                finished, live, query, (first_ms, last_ms), (finished_cpu, live_cpu) = bench_store(steps, a, b)
                print(f"{name:>10} store, finished run in one transaction: {finished:10,.0f} steps/s  (target >= 10,000/s;"
                      f" {finished_cpu:,.0f} steps per CPU second of this process)")
                print(f"{name:>10} store, live batches of 100:             {live:10,.0f} steps/s  (a batch: "
                      f"{first_ms:.1f} ms at the start, {last_ms:.1f} ms at the end of the run; {live_cpu:,.0f} steps per"
                      " CPU second)")
                print(f"{name:>10} store, get_run (the `show` query) of {args.steps} steps: {query * 1000:.0f} ms"
                      "  (target < 1000 ms)")
        finally:
            for _name, _targets, server in backends:
                if server is not None:
                    server.stop()  # type: ignore[attr-defined]
                    shutil.rmtree(server.root, ignore_errors=True)  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
