"""The store on both backends: round-trips, lookups, listing, concurrent writers, dead writers, limits, schema
versions. Every test that takes ``store`` / ``store_target`` runs against SQLite AND a real PostgreSQL server
(``_postgres.py``: a cluster in a temporary directory); the file-specific ones (migrating a v1 file, read-only
files) are SQLite's, and ``test_store_postgres.py`` holds PostgreSQL's own."""

from __future__ import annotations

import fractions
import multiprocessing
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from _builders import RunBuilder
from _postgres import sql_rows
from causaltrace.collector import _migrations
from causaltrace.collector.store import SCHEMA_VERSION, Store, WriterInfo
from causaltrace.exceptions import InvalidInputError, RunNotFoundError, StoreError
from causaltrace.recording import canonicalize_request, encode_response, request_hash
from causaltrace.schema import (
    Annotations,
    Candidate,
    Dependency,
    Diagnosis,
    EvidenceItem,
    Outcome,
    OutcomeStatus,
    RecordedCall,
    Recording,
    RepairPair,
    Run,
    Step,
    StepError,
    TokenUsage,
    Verdict,
    VerifiedBy,
    action_signature,
)

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
SRC = Path(__file__).resolve().parents[2] / "src"


# --------------------------------------------------------------------------------------------------- builders


def full_run(run_id: str = "run-full-0001") -> Run:
    """A run using every field: containers, deps of several kinds, usage, errors, a recording with an envelope."""
    t = [T0 + timedelta(seconds=i) for i in range(12)]
    question = "What is 6 * 21?"
    multiply = {"name": "multiply", "arguments": {"a": 6, "b": 21}, "call_alias": "call#0"}
    llm_request = canonicalize_request({"messages": [{"role": "user", "content": question}], "tools": []})
    tool_request = canonicalize_request({"name": "multiply", "arguments": {"a": 6, "b": 21}})
    envelope, type_name = encode_response(fractions.Fraction(1, 3))
    division = StepError(type="ZeroDivisionError", message="division by zero")
    return (
        RunBuilder(run_id, t0=T0)
        .task(question, step_id="s0", outputs={"text": question}, ended_at=t[0], status="ok",
              metadata={"user_input": True})
        .turn("solver", step_id="s1", ended_at=t[9], status="error",
              error=StepError(type="ToolError", message="tool failed once"), span_id="00f067aa0ba902b7")
        .llm("solver", "", tool_calls=[multiply], step_id="s2", content="calling multiply", deps=[("s0", "saw")],
             inputs={"messages": [{"role": "user", "content": question}]},
             usage=TokenUsage(input_tokens=42, output_tokens=7), model="scripted-solver", ended_at=t[3], status="ok")
        .tool_call("solver", "multiply", {"a": 6, "b": 21, "opts": {"exact": True, "scale": 1.5, "tags": None}},
                   step_id="s3", content="multiply(a=6, b=21)", deps=[("s2", "produced_by")], call_id="call_abc",
                   ended_at=t[4], status="ok",
                   action_signature=action_signature("tool_call", "multiply", {"a": 6, "b": 21}))
        .tool_response("solver", "ZeroDivisionError: division by zero", is_error=True, step_id="s4",
                       content="ZeroDivisionError", deps=[("s3", "tool_result_of")], ended_at=t[4], status="error",
                       error=division)
        .llm("solver", "The answer is 127 — ünïcödé ✓", step_id="s5", deps=[("s4", "observed"), ("s2", "continues")],
             usage=TokenUsage(input_tokens=60, output_tokens=9), model="scripted-solver", ended_at=t[6], status="ok")
        .final_answer("solver", "127", step_id="s6", deps=[("s5", "answer_of")], started_at=t[7], ended_at=t[7],
                      status="ok")
        .end_turn()
        .recorded("llm", llm_request, agent_key="team/solver", step_id="s2",
                  response={"content": [{"name": "multiply", "arguments": '{"a": 6, "b": 21}'}]},
                  settings={"model": "scripted-solver", "temperature": 0.0, "model_info": {"vision": False}})
        .recorded("tool", tool_request, agent_key="team/solver", step_id="s3", response=envelope,
                  response_type=type_name, error=division)
        .recorded("llm", {"x": 1}, agent_key="team/solver", live_only=True)
        .build(
            trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
            framework="autogen",
            name="multiply demo",
            task=question,
            agents=("user", "solver"),
            ended_at=t[10],
            outcome=Outcome(status="failure", final_answer="127", stop="normal",
                            verdict=Verdict(passed=False, reason="expected 126"), reason="expected 126"),
            metadata={"team": "RoundRobinGroupChat", "max_turns": 10, "nested": {"list": [1, 2.5, "x", None]}},
            annotations=Annotations(mistake_agent="solver", mistake_step=3, mistake_reason="wrong operand",
                                    ground_truth="126", source="hand", extra={"question_id": "q-1"}),
        )
    )


def chain_steps(run_id: str, n: int, *, start: int = 0, agent: str = "a") -> list[Step]:
    """``n`` steps with index start..start+n-1, each depending on the previous one."""
    out = []
    for i in range(start, start + n):
        deps = (Dependency(step_id=f"{run_id}-s{i - 1}", kind="continues"),) if i else ()
        out.append(
            Step(
                step_id=f"{run_id}-s{i}",
                run_id=run_id,
                index=i,
                kind="llm_response" if i else "task",
                agent=agent,
                depends_on=deps,
                content=f"step {i} of {run_id}",
                outputs={"text": f"out {i}"},
                started_at=T0 + timedelta(milliseconds=i),
                status="ok",
            )
        )
    return out


def simple_run(
    run_id: str,
    *,
    n: int = 3,
    status: OutcomeStatus = "unknown",
    started_at: datetime | None = T0,
    task: str | None = "a task",
    name: str | None = None,
) -> Run:
    return Run(
        run_id=run_id,
        framework="smolagents",
        name=name,
        task=task,
        steps=tuple(chain_steps(run_id, n)),
        started_at=started_at,
        ended_at=started_at + timedelta(seconds=5) if started_at else None,
        outcome=Outcome(status=status),
    )


def begin(store: Store, run_id: str, **kw: object) -> None:
    args: dict[str, object] = dict(framework="test", task="t", name=None, trace_id=None, started_at=T0)
    args.update(kw)
    store.begin_run(run_id, **args)  # type: ignore[arg-type]


@pytest.fixture
def store(store_target: str):
    with Store(store_target) as s:
        yield s


# ------------------------------------------------------------------------------------------------ round trips


def test_full_run_round_trips_exactly(store: Store, store_target: str) -> None:
    run = full_run()
    store.finish_run(run)
    back = store.get_run(run.run_id)
    assert back == run
    assert [s.index for s in back.steps] == list(range(7))
    assert back.recording is not None
    assert back.recording.calls[1].decoded_response() == fractions.Fraction(1, 3)
    assert back.annotations == run.annotations and back.outcome.verdict == Verdict(passed=False, reason="expected 126")
    # Survives reopening the file; the dependencies come back from the steps' JSON, one row per recorded call.
    store.close()
    with Store(store_target) as again:
        back = again.get_run(run.run_id)
    assert back == run
    assert [(d.step_id, d.kind) for d in back.step("s5").depends_on] == [("s4", "observed"), ("s2", "continues")]
    assert sum(len(s.depends_on) for s in back.steps) == 6
    assert sql_rows(again, "SELECT COUNT(*) FROM recordings")[0][0] == 3


def test_save_run_is_idempotent_and_replaces(store: Store) -> None:
    run = simple_run("imported-0001", n=5)
    store.save_run(run)
    store.save_run(run)
    assert [r["run_id"] for r in store.list_runs()] == ["imported-0001"]
    assert store.get_run("imported-0001") == run
    shorter = simple_run("imported-0001", n=2, status="failure")
    store.save_run(shorter)
    assert store.get_run("imported-0001") == shorter
    assert store.list_runs()[0]["steps"] == 2
    # A run saved without a recording comes back without one; an empty recording stays an empty recording.
    assert store.get_run("imported-0001").recording is None
    empty = shorter.model_copy(update={"recording": Recording(run_id="imported-0001")})
    store.save_run(empty)
    assert store.get_run("imported-0001").recording == Recording(run_id="imported-0001")


def test_large_run_round_trip_and_timings(store: Store) -> None:
    """10,000 steps and 60 recorded calls: written in one transaction (PostgreSQL sends the recording rows by COPY)
    and read back equal, every step in index order with its dependencies (timings printed, never asserted)."""
    awkward = "tab\there, a new\nline, a back\\slash, \\N, ünï ✓"  # what COPY's text format must escape
    calls = tuple(
        RecordedCall(run_id="big-run-0001", step_id=f"big-run-0001-s{i + 1}", agent_key="team/a", kind="llm",
                     ordinal=i, request={"i": i, "text": awkward}, request_hash=request_hash({"i": i}),
                     response=awkward if i % 2 else None, start_order=i, finish_order=i)
        for i in range(60)
    )
    run = Run(
        run_id="big-run-0001",
        framework="autogen",
        steps=tuple(chain_steps("big-run-0001", 10_000)),
        started_at=T0,
        outcome=Outcome(status="failure"),
        recording=Recording(run_id="big-run-0001", calls=calls),
    )
    t = time.perf_counter()
    store.finish_run(run)
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    back = store.get_run("big-run")
    read_s = time.perf_counter() - t
    assert back == run
    assert [s.index for s in back.steps] == list(range(10_000))
    assert [(d.step_id, d.kind) for d in back.step("big-run-0001-s5000").depends_on] == [
        ("big-run-0001-s4999", "continues")
    ]
    assert sql_rows(store, "SELECT step_id, ordinal FROM recordings WHERE seq = 59") == [("big-run-0001-s60", 59)]
    print(f"\nstore: finish_run {10_000 / write_s:,.0f} steps/s; get_run of 10,000 steps {read_s:.3f} s")


# ------------------------------------------------------------------------------------------- lookup, listing


def test_prefix_lookup_and_ambiguity(store: Store) -> None:
    for rid in ("abcd1234", "abcd5678", "zzzz0000"):
        store.save_run(simple_run(rid))
    assert store.get_run("abcd1").run_id == "abcd1234"
    assert store.get_run("zzzz").run_id == "zzzz0000"
    assert store.get_run("abcd5678").run_id == "abcd5678"
    with pytest.raises(RunNotFoundError, match="ambiguous") as ambiguous:
        store.get_run("abcd")
    assert "abcd1234" in str(ambiguous.value) and "abcd5678" in str(ambiguous.value)
    with pytest.raises(RunNotFoundError, match="at least 4 characters"):
        store.get_run("abc")
    with pytest.raises(RunNotFoundError, match="nope-nope") as missing:
        store.get_run("nope-nope")
    assert store.location in str(missing.value)
    assert isinstance(missing.value, KeyError)
    with pytest.raises(RunNotFoundError):
        store.get_run("")


def test_list_runs_order_filters_and_fields(store: Store) -> None:
    store.save_run(simple_run("old-0001", status="failure", started_at=T0, name="old"))
    store.save_run(simple_run("new-0001", status="success", started_at=T0 + timedelta(hours=2), task="x" * 500))
    store.save_run(simple_run("mid-0001", n=7, status="failure", started_at=T0 + timedelta(hours=1)))
    # A different timezone must not confuse the ordering (13:30+02:00 is 11:30 UTC: the oldest).
    tz = datetime(2025, 3, 1, 13, 30, tzinfo=UTC).astimezone(timezone(timedelta(hours=2)))
    store.save_run(simple_run("tz-0001", status="unknown", started_at=tz - timedelta(hours=2)))
    runs = store.list_runs()
    assert [r["run_id"] for r in runs] == ["new-0001", "mid-0001", "old-0001", "tz-0001"]
    assert set(runs[0]) == {"run_id", "name", "framework", "status", "steps", "started_at", "ended_at", "task"}
    assert runs[0]["task"] == "x" * 200
    assert runs[1]["steps"] == 7 and isinstance(runs[1]["steps"], int)
    assert runs[2]["name"] == "old" and runs[2]["started_at"] == T0.isoformat()
    assert runs[2]["ended_at"] == (T0 + timedelta(seconds=5)).isoformat()
    assert [r["run_id"] for r in store.list_runs(failed=True)] == ["mid-0001", "old-0001"]
    assert [r["run_id"] for r in store.list_runs(limit=2)] == ["new-0001", "mid-0001"]
    assert store.list_runs(failed=True, limit=1)[0]["run_id"] == "mid-0001"
    # A live run of this process lists as running, and never as failed.
    begin(store, "live-0001", started_at=T0 + timedelta(hours=3))
    assert store.list_runs()[0] == {
        "run_id": "live-0001",
        "name": None,
        "framework": "test",
        "status": "running",
        "steps": 0,
        "started_at": (T0 + timedelta(hours=3)).isoformat(),
        "ended_at": None,
        "task": "t",
    }
    assert "live-0001" not in [r["run_id"] for r in store.list_runs(failed=True)]
    with pytest.raises(InvalidInputError):
        store.list_runs(limit=-1)


def test_delete_run_removes_everything(store: Store) -> None:
    store.finish_run(full_run("del-0001"))
    store.save_run(simple_run("keep-0001"))
    store.save_diagnosis(Diagnosis(run_id="del-0001", method="graph"))
    store.delete_run("del-0")
    with pytest.raises(RunNotFoundError):
        store.get_run("del-0001")
    assert store.diagnoses("del-0001") == []
    assert [r["run_id"] for r in store.list_runs()] == ["keep-0001"]
    for table in ("steps", "recordings", "recording_chunk_refs"):
        assert sql_rows(store, f"SELECT COUNT(*) FROM {table} WHERE run_id = 'del-0001'")[0][0] == 0
    with pytest.raises(RunNotFoundError):
        store.delete_run("del-0001")


# -------------------------------------------------------------------------------------------------- live runs


def final_run(run_id: str, steps: list[Step], outcome: Outcome | None = None) -> Run:
    """The finished Run of a live test run: its steps, ten seconds after T0."""
    return Run(
        run_id=run_id,
        framework="test",
        task="t",
        steps=tuple(steps),
        started_at=T0,
        ended_at=T0 + timedelta(seconds=10),
        outcome=outcome or Outcome(status="success", stop="normal"),
    )


def test_live_run_progress_then_finish(store: Store) -> None:
    begin(store, "live-0002", metadata={"k": "v"}, name="n", trace_id="t" * 32)
    steps = chain_steps("live-0002", 4)
    store.add_steps("live-0002", steps[:2])
    # A step re-sent with its end replaces the first version.
    resent = steps[1].model_copy(update={"ended_at": T0 + timedelta(seconds=9), "content": "done"})
    store.add_steps("live-0002", [resent, *steps[2:]])
    live = store.get_run("live-0002")
    assert live.outcome.status == "unknown" and "still running" in live.outcome.reason
    assert [s.step_id for s in live.steps] == [s.step_id for s in steps]
    assert live.steps[1] == resent and live.metadata == {"k": "v"} and live.name == "n"
    assert sql_rows(store, "SELECT COUNT(*) FROM steps WHERE run_id = 'live-0002'")[0][0] == 4
    final = final_run("live-0002", steps)
    store.finish_run(final)
    assert store.get_run("live-0002") == final
    assert store.list_runs()[0]["status"] == "success"
    store.add_steps("live-0002", [resent])  # a late re-send after the final Run is stale: ignored
    assert store.get_run("live-0002") == final


def test_finish_keeps_the_steps_this_writer_stored_live_and_writes_the_rest(store: Store) -> None:
    begin(store, "live-0003")
    steps = chain_steps("live-0003", 4)
    store.add_steps("live-0003", steps[:3])
    rowids = dict(sql_rows(store, "SELECT step_id, {rowid} FROM steps WHERE run_id = 'live-0003'"))
    final = final_run("live-0003", steps, Outcome(status="failure", stop="error", reason="boom"))
    store.finish_run(final, stored_steps={s.step_id for s in steps[:3]})
    assert store.get_run("live-0003") == final
    after = dict(sql_rows(store, "SELECT step_id, {rowid} FROM steps WHERE run_id = 'live-0003'"))
    assert {k: after[k] for k in rowids} == rowids  # the live rows were kept, not deleted and written again
    assert len(after) == 4


def test_finish_rewrites_everything_when_the_run_is_not_this_writers_live_run(store: Store) -> None:
    begin(store, "live-0004", writer=WriterInfo(pid=1, start_time="1", host="another-host"))
    steps = chain_steps("live-0004", 3)
    store.add_steps("live-0004", [steps[0].model_copy(update={"content": "stale"})])
    final = final_run("live-0004", steps)
    # the ids were stored by another writer: nothing is trusted, every row is replaced
    store.finish_run(final, stored_steps={steps[0].step_id})
    assert store.get_run("live-0004") == final


def test_add_steps_needs_begin_and_matching_run_id(store: Store) -> None:
    with pytest.raises(StoreError, match="begin_run"):
        store.add_steps("never-begun", chain_steps("never-begun", 1))
    begin(store, "live-0003")
    with pytest.raises(InvalidInputError, match="other-run"):
        store.add_steps("live-0003", chain_steps("other-run", 1))
    with pytest.raises(InvalidInputError, match="metadata"):
        begin(store, "live-0004", metadata={"obj": object()})


def test_background_thread_writes_through_the_same_store(store: Store) -> None:
    errors: list[BaseException] = []

    def work(tag: str) -> None:
        try:
            for r in range(5):
                rid = f"{tag}-{r:04d}"
                begin(store, rid)
                steps = chain_steps(rid, 10)
                for k in range(0, 10, 3):
                    store.add_steps(rid, steps[k : k + 3])
                store.finish_run(Run(run_id=rid, framework="test", task="t", steps=tuple(steps), started_at=T0))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"thr{i}",)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not errors
    runs = store.list_runs()
    assert len(runs) == 15 and all(r["steps"] == 10 for r in runs)


def _write_runs(path: str, tag: str, n_runs: int, n_steps: int, barrier: Any) -> None:
    """Worker of the writer-processes test (module level so 'spawn' can import it)."""
    barrier.wait(30)
    with Store(path) as store:
        for r in range(n_runs):
            rid = f"{tag}-{r:04d}"
            store.begin_run(rid, framework="test", task=f"task {r}", name=tag, trace_id=None, started_at=None)
            steps = chain_steps(rid, n_steps, agent=tag)
            for k in range(0, n_steps, 5):
                store.add_steps(rid, steps[k : k + 5])
            store.finish_run(
                Run(
                    run_id=rid,
                    framework="test",
                    task=f"task {r}",
                    name=tag,
                    steps=tuple(steps),
                    outcome=Outcome(status="failure" if r % 2 else "success"),
                )
            )


@pytest.mark.parametrize("writers", [2, 4])
def test_writer_processes_at_once_lose_nothing(store_target: str, writers: int) -> None:
    """Several processes open one fresh store at once (the first ones race to create its schema) and write 100
    runs between them: every run arrives whole."""
    path = store_target.replace("store.db", "shared/store.db")
    tags = [f"p{i + 1}" for i in range(writers)]
    per_writer = 100 // writers
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers)
    procs = [ctx.Process(target=_write_runs, args=(path, tag, per_writer, 20, barrier)) for tag in tags]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * writers
    with Store(path) as store:
        runs = store.list_runs()
        assert len(runs) == 100
        assert {r["run_id"] for r in runs} == {f"{t}-{r:04d}" for t in tags for r in range(per_writer)}
        assert all(r["steps"] == 20 for r in runs)
        assert len(store.list_runs(failed=True)) == writers * (per_writer // 2)  # every odd run of each writer
        for rid in ("p1-0000", f"{tags[-1]}-{per_writer - 1:04d}", "p2-0011"):
            run = store.get_run(rid)
            assert [s.index for s in run.steps] == list(range(20)) and run.outcome.status in ("success", "failure")


def test_a_reader_during_writes_sees_only_whole_runs(store_target: str) -> None:
    """While another process writes 30 runs, this one reads: every read succeeds, and a finished run always comes
    back whole (its 20 steps), never half written."""
    path = store_target.replace("store.db", "shared/store.db")
    Store(path).close()  # created and migrated before the writer starts
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    writer = ctx.Process(target=_write_runs, args=(path, "w", 30, 20, barrier))
    writer.start()
    barrier.wait(30)
    reads = 0
    with Store(path, readonly=True) as reader:
        while writer.is_alive() or reads == 0:
            for row in reader.list_runs():
                if row["status"] in ("success", "failure"):
                    run = reader.get_run(row["run_id"])
                    assert len(run.steps) == 20 and [s.index for s in run.steps] == list(range(20))
                    reads += 1
            time.sleep(0.01)
        writer.join(60)
        assert writer.exitcode == 0
        assert len(reader.list_runs()) == 30
    assert reads > 0


# ------------------------------------------------------------------------------------------------ dead writers

_CHILD = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {src!r})
    sys.path[:0] = [{tests!r}, {helpers!r}]
    from causaltrace.collector.store import Store
    from test_store import chain_steps
    store = Store(sys.argv[1])
    rid = sys.argv[2]
    store.begin_run(rid, framework="test", task="t", name=None, trace_id=None, started_at=None)
    store.add_steps(rid, chain_steps(rid, 3))
    if sys.argv[3] == "exit":
        os._exit(1)
    print("ready", flush=True)
    time.sleep(60)
    """
).format(src=str(SRC), tests=str(Path(__file__).resolve().parent), helpers=str(Path(__file__).resolve().parents[1]))


def test_run_of_a_writer_that_exited_is_incomplete(store: Store) -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD, store.location, "crashed-0001", "exit"], timeout=60)
    assert done.returncode == 1
    [row] = store.list_runs()
    assert row["status"] == "incomplete" and row["steps"] == 3 and row["ended_at"] is None
    run = store.get_run("crashed-0001")
    assert run.outcome.status == "incomplete" and run.ended_at is None and "died" in run.outcome.reason
    assert [s.step_id for s in run.steps] == [f"crashed-0001-s{i}" for i in range(3)]
    assert store.mark_incomplete() == ["crashed-0001"]
    assert store.mark_incomplete() == []
    assert store.get_run("crashed-0001").outcome.status == "incomplete"


def test_killed_writer_running_then_incomplete(store: Store) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, store.location, "killed-0001", "wait"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        begin(store, "mine-0001")  # this process is alive too
        assert {r["run_id"]: r["status"] for r in store.list_runs()} == {
            "killed-0001": "running",
            "mine-0001": "running",
        }
        assert store.get_run("killed-0001").outcome.status == "unknown"
        assert store.mark_incomplete() == []
    finally:
        child.kill()
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
    assert {r["run_id"]: r["status"] for r in store.list_runs()} == {
        "killed-0001": "incomplete",
        "mine-0001": "running",
    }
    run = store.get_run("killed-0001")
    assert run.outcome.status == "incomplete" and len(run.steps) == 3
    assert store.mark_incomplete() == ["killed-0001"]


@pytest.mark.skipif(os.name == "nt", reason="the process table is not read on Windows")
def test_pid_reuse_guard_and_other_hosts(store: Store) -> None:
    me = WriterInfo.current()
    assert me.pid == os.getpid() and me.host == socket.gethostname() and me.start_time
    assert me.is_alive()
    reused = WriterInfo(pid=os.getpid(), start_time="not-" + me.start_time, host=me.host)
    assert not reused.is_alive()
    assert WriterInfo(pid=os.getpid(), start_time="0", host="some-other-host.example").is_alive()
    begin(store, "reused-0001", writer=reused)
    begin(store, "remote-0001", writer=WriterInfo(pid=1, start_time="1", host="some-other-host.example"))
    statuses = {r["run_id"]: r["status"] for r in store.list_runs()}
    assert statuses == {"reused-0001": "incomplete", "remote-0001": "running"}
    assert store.mark_incomplete() == ["reused-0001"]


def test_partial_run_with_a_missing_parent_is_still_returned(store: Store) -> None:
    """A crashed writer may never have sent a container step: its children still come back."""
    dead = WriterInfo(pid=os.getpid(), start_time="bogus", host=socket.gethostname())
    begin(store, "partial-0001", writer=dead)
    child = Step(step_id="c1", run_id="partial-0001", index=2, kind="message", parent_step_id="turn-never-sent")
    store.add_steps("partial-0001", [child])
    run = store.get_run("partial-0001")
    assert run.outcome.status == "incomplete" and run.steps == (child,)


# ---------------------------------------------------------------------------------------------- size limits


def test_text_longer_than_the_limit_is_cut_and_marked(store_target: str) -> None:
    with Store(store_target, max_chars=100) as store:
        long_step = Step(
            step_id="big",
            run_id="trunc-0001",
            index=0,
            kind="tool_response",
            content="x" * 250,
            outputs={"result": "short", "nested": [{"deep": "z" * 150}], "n": 5},
            status="error",
            error=StepError(type="E", message="m" * 101),
        )
        short_step = Step(step_id="small", run_id="trunc-0001", index=1, kind="message", content="fine" * 20)
        store.finish_run(Run(run_id="trunc-0001", steps=(long_step, short_step)))
        back = store.get_run("trunc-0001")
        cut = back.step("big")
        assert cut.truncated is True
        assert cut.content == "x" * 100 + "…[causaltrace: truncated 150 chars]"
        assert cut.outputs == {
            "result": "short",
            "nested": [{"deep": "z" * 100 + "…[causaltrace: truncated 50 chars]"}],
            "n": 5,
        }
        assert cut.error == StepError(type="E", message="m" * 100 + "…[causaltrace: truncated 1 chars]")
        assert back.step("small") == short_step
        # The live path applies the same limit.
        begin(store, "trunc-0002")
        store.add_steps("trunc-0002", [long_step.model_copy(update={"run_id": "trunc-0002"})])
        assert store.get_run("trunc-0002").step("big").truncated is True
        assert sql_rows(store, "SELECT COUNT(*) FROM steps WHERE truncated = 1")[0][0] == 2


def test_a_long_text_is_cut_wherever_it_stands_and_a_cut_text_is_not_cut_again(store_target: str) -> None:
    """The store cuts a step whose long text stands on top (its content, a value of its outputs) before making its
    JSON, and finds a long text deeper down after: either way the stored step is the same; a text already cut to the
    limit and stored again keeps its marker as it is."""
    with Store(store_target, max_chars=100) as store:
        on_top = Step(step_id="top", run_id="cut-0001", index=0, kind="tool_response", outputs={"result": "r" * 300})
        deep = Step(step_id="deep", run_id="cut-0001", index=1, kind="message", inputs={"m": [{"text": "d" * 300}]})
        store.finish_run(Run(run_id="cut-0001", steps=(on_top, deep)))
        back = store.get_run("cut-0001")
        assert back.step("top").outputs == {"result": "r" * 100 + "…[causaltrace: truncated 200 chars]"}
        assert back.step("deep").inputs == {"m": [{"text": "d" * 100 + "…[causaltrace: truncated 200 chars]"}]}
        assert back.step("top").truncated and back.step("deep").truncated
        again = Run(run_id="cut-0002", steps=tuple(s.model_copy(update={"run_id": "cut-0002"}) for s in back.steps))
        store.finish_run(again)
        assert store.get_run("cut-0002") == again


def test_a_long_text_in_many_fields_is_stored_as_the_plain_cut_would_store_it(store_target: str) -> None:
    """The store makes a cut text's JSON once per write and puts it where each field shows it (a tool result is
    its step's content and output, its message's, the final answer's): every stored row is the very JSON of the cut
    step (escapes, non-ASCII and all; SQLite's as its UTF-8 bytes), a text only equal to another is found too, a
    lone surrogate and a text equal to the mark the JSON is assembled with take the plain way, and the run reads back
    as cut."""
    from causaltrace.collector import store_sql

    limit = 1000
    text = ("é\"\\\n\t\x01€😀<>&'" + "abc" * 50) * 20  # every escape pydantic writes, 4 K characters
    twin = "".join(text)  # equal, another object
    surrogate = "s" * 500 + "\udc80" + "t" * 800  # inside the kept part
    mark = store_sql._mark(0)
    steps = (
        Step(step_id="a", run_id="cut-many", index=0, kind="tool_response", content=text,
             outputs={"result": text, "deep": [{"x": twin}], "n": 1}, inputs={"k": "short"}),
        Step(step_id="b", run_id="cut-many", index=1, kind="message", content=twin, outputs={"text": text},
             status="error", error=StepError(type="E", message=text)),
        Step(step_id="c", run_id="cut-many", index=2, kind="final_answer", content=surrogate + text),
        Step(step_id="d", run_id="cut-many", index=3, kind="message", content=text, outputs={"m": mark}),
        Step(step_id="f", run_id="cut-many", index=4, kind="message", content=text,
             outputs={"q": 'a"' + store_sql._mark(7)}),  # its JSON holds '"<mark 7>"' (an escaped quote before)
        Step(step_id="e", run_id="cut-many", index=5, kind="message", content="short", outputs={"text": "x" * 900}),
    )
    literals: dict[int, Any] = {}
    for step in steps:
        plain = store_sql.truncate_step(step, limit)
        got_step, got = store_sql.cut_step_json(step, limit, literals)
        assert got == plain.model_dump_json(), step.step_id
        assert got_step.truncated is plain.truncated and got_step.step_id == step.step_id
        raw = store_sql.cut_step_json(step, limit, literals, utf8=True)[1]  # SQLite's row: the UTF-8 as it is
        assert (raw if isinstance(raw, bytes) else raw.encode()) == got.encode()
    assert len(literals) == 2  # the text and the twin: one literal each, whatever field or step shows them
    with Store(store_target, max_chars=limit) as store:
        store.finish_run(Run(run_id="cut-many", steps=steps))
        back = store.get_run("cut-many")
        begin(store, "cut-live")
        store.add_steps("cut-live", [s.model_copy(update={"run_id": "cut-live"}) for s in steps])
        live = store.get_run("cut-live")
        kinds = dict(sql_rows(store, "SELECT step_id, data FROM steps WHERE run_id = 'cut-many'"))
    if store.path is not None:  # SQLite keeps a cut step's row as the UTF-8 bytes it was made as
        assert isinstance(kinds["a"], bytes) and isinstance(kinds["e"], str)
    cut = text[:limit] + f"…[causaltrace: truncated {len(text) - limit} chars]"
    assert back.step("a").outputs == {"result": cut, "deep": [{"x": cut}], "n": 1}
    assert back.step("b").error == StepError(type="E", message=cut)
    assert back.step("c").content == (surrogate + text)[:limit].replace("\udc80", "\ufffd") + \
        f"…[causaltrace: truncated {len(surrogate + text) - limit} chars]"
    assert back.step("d").outputs == {"m": mark} and back.step("e") == steps[-1]
    assert [s.model_copy(update={"run_id": "cut-many"}) for s in live.steps] == list(back.steps)


# ----------------------------------------------------------------------------------- diagnoses, repair pairs


def test_diagnoses_newest_last(store: Store) -> None:
    first = Diagnosis(
        run_id="r-0001",
        method="heuristic",
        agent="solver",
        decisive_step_id="s3",
        category="FM-3.2",
        candidates=(Candidate(step_id="s3", index=3, agent="solver", score=0.9, reasons=("error",)),),
        evidence=(EvidenceItem(step_id="s3", index=3, role="introduced"),),
        artifacts={"graph": {"nodes": 7}},
        created_at=T0,
    )
    second = Diagnosis(run_id="r-0001", method="graph", verified_by="replay", confidence=0.8)
    other = Diagnosis(run_id="r-0002", method="graph")
    ids = [store.save_diagnosis(d) for d in (first, second, other)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert store.diagnoses("r-0001") == [first, second]
    assert store.diagnoses("r-0002") == [other]
    assert store.diagnoses("r-none") == []


def test_repair_pairs_filters_and_idempotence(store: Store) -> None:
    def pair(pid: str, run_id: str, verified_by: VerifiedBy) -> RepairPair:
        return RepairPair(
            pair_id=pid,
            run_id=run_id,
            step_id="s3",
            step_index=3,
            step_kind="tool_call",
            agent="solver",
            prompt=[{"role": "user", "content": "6*21"}],
            chosen={"a": 6, "b": 21},
            rejected={"a": 6, "b": 12},
            verified_by=verified_by,
            crs=0.5,
        )

    a, b, c = pair("p1", "r1", "replay"), pair("p2", "r1", "prediction"), pair("p3", "r2", "replay")
    for p in (a, b, c):
        store.save_repair_pair(p)
    store.save_repair_pair(a)  # same pair again: still one copy, still first
    assert store.repair_pairs() == [a, b, c]
    assert store.repair_pairs(run_id="r1") == [a, b]
    assert store.repair_pairs(verified_by={"replay"}) == [a, c]
    assert store.repair_pairs(run_id="r1", verified_by={"prediction", "heuristic"}) == [b]
    assert store.repair_pairs(verified_by=set()) == []


# ------------------------------------------------------------------------------------ files, schema versions


def test_default_path_and_missing_directories(tmp_path: Path, causaltrace_home: Path) -> None:
    with Store() as store:
        assert store.path == causaltrace_home / "causaltrace.db" and store.path.exists()
    deep = tmp_path / "a" / "b" / "c" / "store.db"
    with Store(deep) as store:
        assert deep.exists() and store.schema_version() == SCHEMA_VERSION
        assert store.list_runs() == []


def test_migration_from_v1(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert _migrations.migrate(conn, target=1) == [1]
    run = simple_run("v1-run-0001", status="failure", started_at=T0)
    later = simple_run("v1-run-0002", started_at=T0 + timedelta(days=1))
    for r in (run, later):
        conn.execute(
            "INSERT INTO runs (run_id, framework, name, task, trace_id, started_at, ended_at, status, state, "
            "has_recording, written_at, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'finished', 0, ?, ?)",
            (
                r.run_id,
                r.framework,
                r.name,
                r.task,
                r.trace_id,
                r.started_at.isoformat(),
                None,
                r.outcome.status,
                T0.isoformat(),
                r.model_dump_json(exclude={"steps", "recording"}),
            ),
        )
        for s in r.steps:
            conn.execute(
                "INSERT INTO steps (run_id, step_id, idx, kind, agent, status, parent, truncated, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
                (r.run_id, s.step_id, s.index, s.kind, s.agent, s.status, s.parent_step_id, s.model_dump_json()),
            )
    assert _migrations.user_version(conn) == 1
    conn.close()
    with Store(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        assert store.get_run("v1-run-0001") == run
        assert [r["run_id"] for r in store.list_runs()] == ["v1-run-0002", "v1-run-0001"]  # sort key back-filled
        store.save_diagnosis(Diagnosis(run_id="v1-run-0001", method="graph"))  # a v2 table
        assert len(store.diagnoses("v1-run-0001")) == 1
    with sqlite3.connect(path) as conn:
        assert dict(conn.execute("SELECT key, value FROM meta")) == {
            "application": "causaltrace",
            "schema_version": "5",
        }
    with Store(path) as store:  # reopening migrates nothing more
        assert store.schema_version() == 5


def _schema_objects(store: Store) -> set[str]:
    """The tables and indexes of the store's database, by name."""
    if store.path is not None:
        return {name for (name,) in sql_rows(store, "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")}
    return {name for (name,) in sql_rows(store, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                                                "UNION SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}


def _store_of_version(store_target: str, version: int) -> Any:
    """A connection to a new store at schema ``version`` (SQLite or PostgreSQL, as the target says)."""
    if "://" not in store_target:
        conn: Any = sqlite3.connect(store_target, isolation_level=None)
        assert _migrations.migrate(conn, target=version) == list(range(1, version + 1))
        return conn
    import psycopg

    from causaltrace.collector.store_postgres import PgConnection, PostgresBackend

    conn = PgConnection(psycopg.connect(store_target, autocommit=True))
    assert (_migrations.migrate_postgres(conn, lambda: PostgresBackend.begin_write(conn), target=version)
            == list(range(1, version + 1)))
    return conn


def _write_old_way(conn: Any, run: Run, *, dependencies: bool) -> None:
    """The run's rows as a causaltrace of schema v3 (``dependencies``) or v4 wrote them, its steps out of index
    order."""
    conn.execute(
        "INSERT INTO runs (run_id, framework, name, task, trace_id, started_at, ended_at, status, state, "
        "has_recording, written_at, data, sort_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'finished', 0, ?, ?, ?)",
        (run.run_id, run.framework, run.name, run.task, run.trace_id, T0.isoformat(), run.ended_at.isoformat(),
         run.outcome.status, T0.isoformat(), run.model_dump_json(exclude={"steps", "recording"}), T0.timestamp()),
    )
    for s in reversed(run.steps):
        conn.execute(
            "INSERT INTO steps (run_id, step_id, idx, kind, agent, status, parent, truncated, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (run.run_id, s.step_id, s.index, s.kind, s.agent, s.status, s.parent_step_id, s.model_dump_json()),
        )
        for pos, d in enumerate(s.depends_on if dependencies else ()):
            conn.execute("INSERT INTO dependencies (run_id, consumer, producer, kind, pos) VALUES (?, ?, ?, ?, ?)",
                         (run.run_id, s.step_id, d.step_id, d.kind, pos))


def test_migration_v4_drops_the_dependencies_table_and_the_unused_indexes(store_target: str) -> None:
    """A v3 store holding a run written the v3 way (its dependency rows filled, its steps inserted out of index
    order) migrates when opened: the table and the indexes v4 drops are gone, the run reads back equal — its
    dependencies from the steps' JSON, its steps in index order — and is deleted whole."""
    conn = _store_of_version(store_target, 3)
    run = simple_run("v3-run-0001", n=12, started_at=T0)
    _write_old_way(conn, run, dependencies=True)
    conn.close()
    assert any(s.depends_on for s in run.steps)
    with Store(store_target) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        objects = _schema_objects(store)
        assert not {"dependencies", "deps_consumer", "deps_producer", "runs_status", "runs_state", "steps_run_idx"} & objects
        assert {"runs", "steps", "recordings", "runs_sort"} <= objects
        back = store.get_run("v3-run-0001")
        assert back == run and [s.index for s in back.steps] == list(range(12))
        store.delete_run("v3-run-0001")
        assert sql_rows(store, "SELECT COUNT(*) FROM steps")[0][0] == 0


def test_migration_v5_adds_the_text_references_and_sqlite_stores_a_long_cut_text_once(store_target: str) -> None:
    """A v4 store migrates when opened (``steps.chunks``, ``runs.chunks``, ``text_chunk_refs``; nothing rewritten:
    its run reads back equal). Then a run whose tool result (and final answer) is longer than the store's limit:
    SQLite names the one cut text from each row that shows it and keeps it once, in a file; PostgreSQL keeps whole
    rows as before. Both read the run back as cut, and deleting it leaves no text behind."""
    from causaltrace.collector.store_sql import truncate_run_text, truncate_step

    conn = _store_of_version(store_target, 4)
    old = simple_run("v4-run-0001", n=6, started_at=T0)
    _write_old_way(conn, old, dependencies=False)
    conn.close()
    limit = 1_100_000  # a cut literal of at least 1 MiB
    payload = os.urandom(600_000).hex()
    builder = (RunBuilder("v5-run-0001").task("Fetch it.", step_id="s0").turn("reader", step_id="s1")
               .tool_call("reader", "fetch", {}, step_id="s2").tool_response("reader", payload, step_id="s3")
               .llm("reader", payload, step_id="s4").end_turn())
    built = builder.build(framework="autogen", task="Fetch it.")
    run = built.model_copy(update={"outcome": Outcome(status="success", final_answer=payload)})
    with Store(store_target, max_chars=limit) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        assert {"text_chunk_refs", "text_chunk_refs_digest"} <= _schema_objects(store)
        assert sql_rows(store, "SELECT COUNT(*) FROM steps WHERE chunks IS NULL")[0][0] == 6  # old rows: whole
        assert store.get_run("v4-run-0001") == old
        store.finish_run(run)
        back = store.get_run("v5-run-0001")
        assert list(back.steps) == [truncate_step(s, limit) for s in run.steps]
        assert back.outcome == truncate_run_text(run, limit).outcome
        assert back.steps[3].content == payload[:limit] + f"…[causaltrace: truncated {len(payload) - limit} chars]"
        rows = sql_rows(store, "SELECT step_id, LENGTH(CAST(data AS TEXT)), chunks FROM steps "
                               "WHERE run_id = 'v5-run-0001' AND truncated = 1 ORDER BY step_id")
        run_chunks = sql_rows(store, "SELECT chunks FROM runs WHERE run_id = 'v5-run-0001'")[0][0]
        refs = sql_rows(store, "SELECT digest FROM text_chunk_refs")
        if store.path is None:  # PostgreSQL: whole rows, as before v5
            assert [r[0] for r in rows] == ["s3", "s4"] and all(r[1] > limit and r[2] is None for r in rows)
            assert run_chunks is None and refs == []
        else:  # SQLite: every row names the one cut text, kept once in a file
            assert [r[0] for r in rows] == ["s3", "s4"] and all(r[1] < 5_000 for r in rows)
            digest = refs[0][0]
            assert refs == [(digest,)] and digest in rows[0][2] and digest in rows[1][2] and digest in run_chunks
            files = [p for p in Path(f"{store_target}.blobs").rglob("*") if p.is_file()]
            assert [p.name for p in files] == [digest]
        store.delete_run("v5-run-0001")
        assert sql_rows(store, "SELECT COUNT(*) FROM recording_chunks")[0][0] == 0
        assert sql_rows(store, "SELECT COUNT(*) FROM text_chunk_refs")[0][0] == 0
        if store.path is not None:
            assert not [p for p in Path(f"{store_target}.blobs").rglob("*") if p.is_file()]


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="newer") as err:
        Store(path)
    assert str(path) in str(err.value) and "99" in str(err.value)


def test_file_that_is_not_a_store(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is certainly not a SQLite database\n" * 200)
    with pytest.raises(StoreError) as err:
        Store(junk)
    assert str(junk) in str(err.value) and "not" in str(err.value)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match="another application") as err:
        Store(other)
    assert str(other) in str(err.value)
    with pytest.raises(StoreError, match="directory"):
        Store(tmp_path)


def test_corrupt_rows_name_what_is_wrong(store: Store) -> None:
    store.finish_run(full_run("bad-0001"))
    store.save_run(simple_run("bad-0002"))
    sql_rows(store, "UPDATE runs SET data = '{{not json' WHERE run_id = 'bad-0001'")
    sql_rows(store, "UPDATE steps SET data = '{{\"step_id\": 5}}' WHERE step_id = 'bad-0002-s1'")
    with pytest.raises(StoreError, match="bad-0001") as err:
        store.get_run("bad-0001")
    assert "corrupt" in str(err.value) and store.location in str(err.value)
    with pytest.raises(StoreError, match="bad-0002-s1") as err:
        store.get_run("bad-0002")
    assert "corrupt" in str(err.value)
    # Listing still works: it reads the queryable columns only.
    assert {r["run_id"] for r in store.list_runs()} == {"bad-0001", "bad-0002"}


def test_closed_store_and_bad_arguments(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.list_runs()
    with pytest.raises(InvalidInputError):
        Store(tmp_path / "d.db", max_chars=0)


def test_a_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with Store(path) as store:
        store.save_run(simple_run("ro-run-0001"))
    with Store(path, readonly=True) as store:
        assert [r["run_id"] for r in store.list_runs()] == ["ro-run-0001"]
        assert store.get_run("ro-run") == simple_run("ro-run-0001")
        with pytest.raises(StoreError, match="read-only"):
            store.save_run(simple_run("ro-run-0002"))
    with Store(tmp_path / "missing.db", readonly=True) as store:
        assert store.list_runs() == [] and store.schema_version() == SCHEMA_VERSION
    assert not (tmp_path / "missing.db").exists()
