"""What the store path costs per framework event, measured apart from the tracing (issue 35: store on by default).

The collector's hand-overs of real benchmark runs (``_call_counter``'s teams, store on) are captured — each run's
begin, its steps and its end, with the calls' JSON the run's export made for the store — and then written again,
``--repeats`` times, into a fresh SQLite store each time, through a live collector whose writer runs on this thread
(``_call_counter.synchronous_store``: the begin row at once — with ``--batched`` in its end's transaction, as the
threaded writer's poll mostly has it — the steps with the run's end, as the writer's linger batches a short run).
Printed per team:

* ``statements/run`` — SQL statements sqlite ran per run (``set_trace_callback``: an ``executemany`` counts each of
  its rows), ``transactions/run``;
* ``calls/event`` — Python calls per framework event of the write path (``sys.setprofile``, one replay);
* ``CPU µs/event`` — ``time.process_time`` of writing every captured run, per framework event: the lower quartile
  over the repeats (the machine is shared: the quartile is the steadier figure).

With ``--profile`` a cProfile of the replays is printed too (top functions by own time). With ``--threaded`` the
team itself is run ``--runs`` times (after warm-ups) with the store written by the collector's own writer thread, as
in use, and printed per run: the writer's transactions, its voluntary context switches (each a sleep and a wake-up:
on the queue, the linger, or the GIL while the team's thread runs — /proc, Linux only) and its CPU per event.

Usage: python benchmarks/bench_store_path.py [--team autogen/scripted ...] [--runs 6] [--repeats 15] [--profile]
[--batched] [--threaded]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _call_counter as cc


def capture(team_name: str, runs: int) -> tuple[cc.Team, list[list[tuple[str, Any, Any]]]]:
    """The team, and the operations its collector was handed in ``runs`` runs (after one warm-up): per run, in
    order, with the calls' JSON the export kept for the store (put back before each replay)."""
    from causaltrace.collector import recording_otlp
    from causaltrace.instrumentation.tracing import get_tracing

    team = cc.team(team_name)
    ops: list[tuple[str, Any, Any]] = []
    with cc.mode("ct-store-on", team.framework):
        collector = get_tracing().collector
        real = collector._submit

        def submit(op: str, payload: Any, done: Any = None, **kw: Any) -> None:
            kept = None
            if op == "finish" and payload.recording is not None:  # (before the writer takes them)
                kept = [(kind, entry[1]) for kind in ("texts", "literals")
                        if (entry := recording_otlp._kept.get((kind, id(payload.recording)))) is not None]
            ops.append((op, payload, kept))
            real(op, payload, done, **kw)

        team.run()
        ops.clear()
        collector._submit = submit
        for _ in range(runs):
            team.run()
    by_run: list[list[tuple[str, Any, Any]]] = []
    for op in ops:
        if op[0] == "begin":
            by_run.append([])
        if op[0] == "flush":
            continue
        by_run[-1].append(op)
    return team, by_run


def replay(captured: list[list[tuple[str, Any, Any]]], target: Path, *, count: bool = False,
           profile: Any = None, batched: bool = False) -> tuple[float, int, int]:
    """Write the captured runs into a fresh store at ``target`` through a live collector writing on this thread;
    the CPU seconds of the writes, and the statements and transactions sqlite ran. ``batched``: a run's begin row
    waits for its end's transaction (as the writer's poll gathers a short run), else it is written at once."""
    from causaltrace.collector import recording_otlp
    from causaltrace.collector.handoff import Done
    from causaltrace.collector.live import RunCollector
    from causaltrace.collector.store import Store
    from causaltrace.config import TraceConfig

    store = Store(target)
    statements = [0, 0]

    def traced(sql: str) -> None:
        statements[0] += 1
        if sql.startswith("COMMIT"):
            statements[1] += 1

    collector = RunCollector(TraceConfig(store=True), store_factory=lambda: store)
    cc.synchronous_store(collector)
    for run_ops in captured:  # the export's JSON of the calls, taken by the store
        for op, payload, kept in run_ops:
            if op == "finish":
                for kind, value in kept or ():
                    recording_otlp._keep(kind, payload.recording, value)
    if count:
        store._conn.set_trace_callback(traced)  # type: ignore[union-attr]
    gc.collect()
    if profile is not None:
        profile.enable()
    t = time.process_time()
    for run_ops in captured:
        for op, payload, _ in run_ops:
            if op == "begin":
                collector._submit("begin", payload, Done(), wake=not batched)
            elif op == "steps":
                collector._submit("steps", payload)
            else:
                collector._submit("finish", payload, threading.Event())
    elapsed = time.process_time() - t
    if profile is not None:
        profile.disable()
    store.close()
    return elapsed, statements[0], statements[1]


def _voluntary_switches(tid: int) -> int:
    try:
        with open(f"/proc/self/task/{tid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("voluntary_ctxt_switches"))
    except (OSError, StopIteration):
        return 0


def threaded(team_name: str, runs: int) -> None:
    """The team run ``runs`` times with the collector's writer thread: per run, its transactions and voluntary
    context switches, and its CPU per event."""
    from causaltrace.collector.store import Store
    from causaltrace.config import TraceConfig
    from causaltrace.instrumentation.tracing import get_tracing

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _traced_teams import flush, traced

    team = cc.team(team_name)
    commits = [0]
    begin = Store.transaction

    def counted(self: Store) -> Any:
        commits[0] += 1
        return begin(self)

    with tempfile.TemporaryDirectory() as tmp, traced(TraceConfig(db_path=Path(tmp) / "t.db"),
                                                      framework=team.framework):
        for _ in range(3):
            team.run()
            flush()
        writer = get_tracing().collector._writer
        assert writer is not None and writer.native_id is not None
        clock = time.pthread_getcpuclockid(writer.ident)  # type: ignore[arg-type]
        switches, cpu = _voluntary_switches(writer.native_id), time.clock_gettime(clock)
        Store.transaction = counted  # type: ignore[method-assign]
        try:
            for _ in range(runs):
                team.run()
                flush()
        finally:
            Store.transaction = begin  # type: ignore[method-assign]
        switches = _voluntary_switches(writer.native_id) - switches
        cpu = time.clock_gettime(clock) - cpu
    print(f"{team_name:30s} threaded: runs {runs}  transactions/run {commits[0] / runs:.2f}  writer voluntary "
          f"switches/run {switches / runs:.2f}  writer CPU µs/event {cpu / runs / team.events * 1e6:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--team", action="append", help="a team of _call_counter.TEAMS (default: autogen/scripted, "
                        "smolagents-example/scripted)")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--threaded", action="store_true")
    parser.add_argument("--batched", action="store_true", help="a run's begin row in its end's transaction")
    args = parser.parse_args()
    teams = args.team or ["autogen/scripted", "smolagents-example/scripted"]
    cc.examples_on_path()
    with cc.temporary_home():
        for name in teams:
            if args.threaded:
                threaded(name, args.runs)
                continue
            team, captured = capture(name, args.runs)
            events = team.events * len(captured)
            with tempfile.TemporaryDirectory() as tmp:
                batched = args.batched
                replay(captured, Path(tmp) / "warm.db", batched=batched)
                _, stmts, txns = replay(captured, Path(tmp) / "count.db", count=True, batched=batched)
                counter = cc.CallCounter()
                with cc.quiet_gc(), counter.counting():
                    replay(captured, Path(tmp) / "calls.db", batched=batched)
                calls = counter.counts().total(cc.CAUSALTRACE, exclude=cc.NOT_CAUSALTRACE)
                times = [replay(captured, Path(tmp) / f"t{i}.db", batched=batched)[0] for i in range(args.repeats)]
                if args.profile:
                    import cProfile
                    import pstats

                    prof = cProfile.Profile()
                    for i in range(5):
                        replay(captured, Path(tmp) / f"p{i}.db", profile=prof, batched=batched)
                    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            q1 = statistics.quantiles(times, n=4)[0]
            print(f"{name:30s} runs {len(captured)}  events/run {team.events}  statements/run {stmts / len(captured):.1f}"
                  f"  transactions/run {txns / len(captured):.1f}  calls/event {calls / events:.1f}"
                  f"  CPU µs/event q1 {q1 / events * 1e6:.1f} (median {statistics.median(times) / events * 1e6:.1f})")


if __name__ == "__main__":
    main()
