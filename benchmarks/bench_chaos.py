"""Chaos: N processes × M instrumented runs writing one store while a killer sends SIGKILL at random moments.

What it checks (issue 21, "A chaos benchmark"; items 8 and 9): every run whose block started is in the store (its
begin row is committed before ``causaltrace.run()`` lets the block run, so before any of its steps is acknowledged),
complete or ``incomplete``; nothing the store writer acknowledged is lost; the steps still queued at a kill are a
bounded, counted window; the store passes ``PRAGMA integrity_check``. Beside it, how long handing a step over takes
on the agent's thread (it never waits on a commit), how long a run's start and end wait for their rows (bounded:
2 s / 10 s), how late the event loop of an ``async with`` run wakes a 5 ms sleep while those waits run off the loop
(on a loaded machine this is mostly CPU starvation; a loop blocked by the waits would show them), and how long a
step waits for its acknowledgement (the window in time: the writer's 100 ms linger, its wait for the write lock,
one transaction).

How: each worker process runs real instrumented runs with the public API (``causaltrace.run`` — ``with`` and
``async with`` alternating — and ``causaltrace.current_run().start_step(...).end()``), no framework, no exporter.
The writer's acknowledgements come from ``RunCollector.on_commit`` (called after each committed transaction). A
worker appends what it did to a side log outside the store (one ``os.write`` per event on an ``O_APPEND`` file:
a SIGKILL cannot take back a completed write; ``--fsync`` adds an fsync for power-loss paranoia): ``enter`` (before
the ``with``), ``begun`` (first line of the block), ``handed`` (a step's ``end()`` returned), ``ack`` /
``ack-begin`` / ``ack-finish`` (the hook, before the writer wakes anyone), ``finished`` (after the block). It also
tells the killer on stdout when it enters a run, so kills "inside the first 100 ms of a run" are timed from the
run's start without polling. Kill moments (seeded): ``early`` — 0–100 ms after a run is entered; ``late`` —
0.1–0.5 s after; ``startup`` — 0–1 s after the process was spawned (its imports, the store's opening). A killed
worker's slot is restarted with its next run; at most N workers run at once.

Two more disturbances (issue 36 item 1), each instead of the kills: ``--chaos restart`` restarts the PostgreSQL
server (fast shutdown: every connection cut; down for ``--down`` 0.3–1 s, then started) ``--restarts`` times while
the workers run; ``--chaos lock`` holds the store's write lock for ``--lock-seconds`` (SQLite: a second connection
in ``BEGIN IMMEDIATE``; PostgreSQL: the writers' advisory lock in a session of its own). In both the workers are a
long-lived service: they keep running runs until 3 s after the last disturbance ended, then exit (their exit waits,
bounded, for what is still queued). The added figures: the disturbances and how long each took, the runs entered
after the first one ended and how many of those are not stored complete, the workers that said at exit that
something was not stored.

Usage: python benchmarks/bench_chaos.py [--procs 3] [--runs 20] [--kills 15] [--seed 7] [--db PATH|postgresql://…]
       [--postgres] [--max-steps 8] [--early 0.5] [--fsync] [--json]
       [--chaos kill|restart|lock] [--restarts 3] [--down 0.3 1] [--lock-seconds 15]
(``--postgres``: a temporary cluster on a free loopback port, as tests/_postgres.py starts it; ``--chaos restart``
needs it.) Exit 0 when every target holds, 1 when one is broken.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAYLOAD_CHARS = 200
STEP_SLEEP_S = 0.015
GAP_SLEEP_S = 0.02
EARLY_S = 0.1


def step_content(run_id: str, index: int, payload: int) -> str:
    """The content a worker gives step ``index`` of ``run_id`` (the analysis checks the stored text against it)."""
    return f"{run_id} step {index} " + "x" * payload


# ------------------------------------------------------------------------------------------------- the worker


class SideLog:
    """An append-only event log outside the store: one ``os.write`` per call on an ``O_APPEND`` descriptor."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.fsync = fsync

    def write(self, *lines: str) -> None:
        now = f"{time.time():.6f}"
        os.write(self.fd, "".join(f"{now} {line}\n" for line in lines).encode())
        if self.fsync:
            os.fsync(self.fd)


def _on_commit(log: SideLog):  # type: ignore[no-untyped-def]
    """The writer's acknowledgements, logged: what the commit just made durable."""

    def hook(commit: Any) -> None:
        lines = [f"ack-begin {run_id}" for run_id in commit.begun]
        lines += [f"ack {step_id}" for ids in commit.steps.values() for step_id in sorted(ids)]
        lines += [f"ack-finish {run_id}" for run_id in commit.finished]
        if lines:
            log.write(*lines)

    return hook


def _step(ctx: Any, i: int, prev: str | None, payload: int) -> Any:
    """Start step ``i`` (a message depending on ``prev``); the caller pauses, then ends it with :func:`_end`."""
    import causaltrace

    deps = [causaltrace.Dependency(step_id=prev, kind="saw")] if prev else []
    return ctx.start_step("message", agent=f"agent{i % 3}", content=step_content(ctx.run_id, i, payload),
                          depends_on=deps)


def _end(handle: Any, log: SideLog) -> str:
    """End a step and log its handover time (what the agent's thread spends: it never waits on a commit)."""
    t = time.perf_counter()
    step = handle.end()
    log.write(f"handed {step.step_id} {int((time.perf_counter() - t) * 1e6)}")
    return str(step.step_id)


def _enter(log: SideLog, handle: Any, slot: int, number: int, mode: str) -> None:
    log.write(f"enter {handle.run_id} {slot} {number} {mode}")
    print(f"enter {time.time():.6f}", flush=True)  # the killer's cue


def _run_sync(log: SideLog, rng: random.Random, slot: int, number: int, args: argparse.Namespace) -> None:
    import causaltrace

    handle = causaltrace.run(task=f"chaos slot {slot} run {number}", verify="done")
    _enter(log, handle, slot, number, "sync")
    with handle:
        log.write(f"begun {handle.run_id} {int(handle.ctx.begun.is_set())}")
        prev = None
        for i in range(rng.randint(1, args.max_steps)):
            step = _step(causaltrace.current_run(), i, prev, args.payload)
            time.sleep(rng.uniform(0, STEP_SLEEP_S))
            prev = _end(step, log)
        handle.report(final_answer="done")
        log.write(f"ending {handle.run_id}")
    log.write(f"finished {handle.run_id}")


async def _ticker(lateness: list[float]) -> None:
    """How late the event loop wakes a 5 ms sleep, over and over: a blocked loop shows as a large lateness."""
    while True:
        t = time.perf_counter()
        await asyncio.sleep(0.005)
        lateness.append(time.perf_counter() - t - 0.005)


async def _run_async(log: SideLog, rng: random.Random, slot: int, number: int, args: argparse.Namespace) -> None:
    import causaltrace

    lateness: list[float] = []
    ticker = asyncio.create_task(_ticker(lateness))
    await asyncio.sleep(0)
    handle = causaltrace.run(task=f"chaos slot {slot} run {number}", verify="done")
    _enter(log, handle, slot, number, "async")
    async with handle:  # its begin and end waits run off the loop (issue 21 item 9)
        log.write(f"begun {handle.run_id} {int(handle.ctx.begun.is_set())}")
        prev = None
        for i in range(rng.randint(1, args.max_steps)):
            step = _step(causaltrace.current_run(), i, prev, args.payload)
            await asyncio.sleep(rng.uniform(0, STEP_SLEEP_S))
            prev = _end(step, log)
        handle.report(final_answer="done")
        log.write(f"ending {handle.run_id}")
    ticker.cancel()
    log.write(f"finished {handle.run_id}", f"loop-stall {handle.run_id} {max(lateness, default=0) * 1000:.3f}")


def worker_main(args: argparse.Namespace) -> None:
    """One worker process: runs ``args.first`` .. ``args.runs - 1`` of its slot, logging to ``args.log``."""
    import causaltrace

    log = SideLog(Path(args.log), fsync=args.fsync)
    causaltrace.configure().collector.on_commit = _on_commit(log)
    rng = random.Random(f"{args.seed}-{args.slot}-{args.first}")
    number = args.first
    while number < args.runs or (args.until and not os.path.exists(args.until)):  # a service: on until told
        if number % 2:
            asyncio.run(_run_async(log, rng, args.slot, number, args))
        else:
            _run_sync(log, rng, args.slot, number, args)
        time.sleep(rng.uniform(0, GAP_SLEEP_S))
        number += 1
    log.write("done")


# ------------------------------------------------------------------------------------------------- the killer


@dataclass
class Incarnation:
    """One worker process of a slot, its kill plan and what became of it."""

    slot: int
    first: int
    log: Path
    proc: subprocess.Popen[bytes]
    spawned: float
    plan: tuple[str, int, float] | None = None  # (mode, the index of the entered run it counts from, delay)
    entered: list[float] = field(default_factory=list)
    deadline: float | None = None
    killed_at: float | None = None
    returncode: int | None = None
    buffer: bytes = b""


def _spawn(slot: int, first: int, n: int, logs: Path, env: dict[str, str], args: argparse.Namespace) -> Incarnation:
    log = logs / f"slot{slot}-from{first}-{n}.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--slot", str(slot), "--first", str(first),
           "--runs", str(args.runs), "--log", str(log), "--seed", str(args.seed), "--max-steps", str(args.max_steps),
           "--payload", str(args.payload)] + (["--fsync"] if args.fsync else []) + (
           ["--until", args.until] if args.until else [])
    with open(log.with_suffix(".err"), "wb") as stderr:  # the child keeps its own descriptor
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, env=env)
    return Incarnation(slot=slot, first=first, log=log, proc=proc, spawned=time.time())


def _arm(inc: Incarnation, rng: random.Random, early_share: float) -> None:
    """Give a worker its kill: ``early`` / ``late`` count from the enter of one of its next three runs, ``startup``
    (any moment: for a fresh process, its imports and the store's opening) from now."""
    roll = rng.random()
    if roll < early_share:
        inc.plan = ("early", len(inc.entered) + rng.randint(0, 2), rng.uniform(0, EARLY_S))
    elif roll < early_share + (1 - early_share) * 0.7:
        inc.plan = ("late", len(inc.entered) + rng.randint(0, 2), rng.uniform(EARLY_S, 0.5))
    else:
        inc.plan = ("startup", 0, rng.uniform(0, 1.0))
        inc.deadline = time.time() + inc.plan[2]


def _next_first(inc: Incarnation) -> int:
    """The slot's next run number after this incarnation died: one past the last run it entered."""
    last = inc.first - 1
    for line in _lines(inc.log):
        parts = line.split()
        if parts[1] == "enter":
            last = int(parts[4])
    return last + 1


def _read_cues(inc: Incarnation) -> bool:
    """Read the worker's stdout cues; False at EOF."""
    assert inc.proc.stdout is not None
    chunk = os.read(inc.proc.stdout.fileno(), 65536)
    if not chunk:
        return False
    inc.buffer += chunk
    *lines, inc.buffer = inc.buffer.split(b"\n")
    for line in lines:
        if line.startswith(b"enter "):
            inc.entered.append(float(line.split()[1]))
            if inc.plan is not None and inc.deadline is None and inc.plan[0] != "startup":
                if len(inc.entered) == inc.plan[1] + 1:
                    inc.deadline = inc.entered[-1] + inc.plan[2]
    return True


class Killer:
    """Runs every slot's M runs to the end, at most N workers at once, while it spends ``args.kills`` SIGKILLs."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], logs: Path) -> None:
        self.args, self.env, self.logs = args, env, logs
        self.rng = random.Random(args.seed)
        self.kills_left = args.kills
        self.spawned = 0
        self.live: dict[int, Incarnation] = {}
        self.done: list[Incarnation] = []
        self.sel = selectors.DefaultSelector()

    def run(self) -> list[Incarnation]:
        """The whole round; returns every worker process it started."""
        try:
            for slot in range(self.args.procs):
                self._start(slot, 0)
            while self.live:
                self._step()
        finally:
            for inc in self.live.values():  # interrupted: stop the workers this round started, by pid
                inc.proc.kill()
                inc.proc.wait()
            self.sel.close()
        return self.done

    def _start(self, slot: int, first: int) -> None:
        inc = _spawn(slot, first, self.spawned, self.logs, self.env, self.args)
        self.spawned += 1
        self.live[inc.proc.pid] = inc
        self.sel.register(inc.proc.stdout, selectors.EVENT_READ, inc)  # type: ignore[arg-type]
        self._arm_idle()

    def _arm_idle(self) -> None:
        """Hand the kills left to live workers that have none (a kill whose worker ended first comes back)."""
        for inc in self.live.values():
            if self.kills_left > 0 and inc.plan is None:
                _arm(inc, self.rng, self.args.early)
                self.kills_left -= 1

    def _step(self) -> None:
        """Wait for a cue or the next deadline; reap and restart ended workers; SIGKILL those due."""
        deadlines = [i.deadline for i in self.live.values() if i.deadline is not None and i.killed_at is None]
        timeout = max(0.0, min(deadlines) - time.time()) if deadlines else 1.0
        for key, _ in self.sel.select(timeout):
            inc = key.data
            if _read_cues(inc):
                continue
            self.sel.unregister(key.fileobj)
            key.fileobj.close()  # type: ignore[union-attr]
            inc.returncode = inc.proc.wait()
            del self.live[inc.proc.pid]
            self.done.append(inc)
            if inc.plan is not None and inc.killed_at is None:
                self.kills_left += 1  # it ended before its kill came: the kill goes back to the pool
            first = _next_first(inc)
            if first < self.args.runs and (inc.killed_at is not None or inc.returncode == 0):
                self._start(inc.slot, first)
            self._arm_idle()
        now = time.time()
        for inc in self.live.values():
            if inc.deadline is not None and inc.killed_at is None and now >= inc.deadline:
                os.kill(inc.proc.pid, signal.SIGKILL)
                inc.killed_at = time.time()


class Disturber(threading.Thread):
    """Restarts the PostgreSQL server or holds the store's write lock while the workers run, then tells them to
    stop (the ``--until`` file) 3 s after the last disturbance ended. ``events``: (kind, start, end) epoch times."""

    def __init__(self, args: argparse.Namespace, target: str, server: Any) -> None:
        super().__init__(name="chaos-disturber", daemon=True)
        self.args, self.target, self.server = args, target, server
        self.events: list[tuple[str, float, float]] = []
        self.error: str | None = None

    def run(self) -> None:
        rng = random.Random(self.args.seed)
        try:
            time.sleep(1.0)  # the workers are under way
            if self.args.chaos == "restart":
                for _ in range(self.args.restarts):
                    t = time.time()
                    self.server.restart(down_s=rng.uniform(*self.args.down))
                    self.events.append(("restart", t, time.time()))
                    time.sleep(rng.uniform(1.0, 2.0))
            else:
                self._hold_lock()
            time.sleep(3.0)
        except Exception as exc:  # reported, and the round still ends
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            Path(self.args.until).touch()

    def _hold_lock(self) -> None:
        if "://" in self.target:
            import psycopg

            from causaltrace.collector.store_postgres import _WRITE_LOCK

            with psycopg.connect(self.target, autocommit=True) as conn:
                conn.execute(f"SELECT pg_advisory_lock({_WRITE_LOCK})")
                t = time.time()
                time.sleep(self.args.lock_seconds)
                conn.execute(f"SELECT pg_advisory_unlock({_WRITE_LOCK})")
        else:
            import sqlite3

            conn = sqlite3.connect(self.target, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                t = time.time()
                time.sleep(self.args.lock_seconds)
                conn.execute("COMMIT")
            finally:
                conn.close()
        self.events.append(("lock", t, time.time()))


# ------------------------------------------------------------------------------------------------- the analysis


def _lines(path: Path) -> list[str]:
    """The complete lines of a side log (a line torn by the kill has no newline and is left out)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line for line in text.split("\n")[:-1] if line]


@dataclass
class Events:
    """Everything the side logs say, keyed by run / step id."""

    entered: dict[str, tuple[float, Incarnation]] = field(default_factory=dict)
    begun: dict[str, tuple[float, bool]] = field(default_factory=dict)
    ending: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    stall_ms: dict[str, float] = field(default_factory=dict)  # async runs: the event loop's worst lateness
    handed: dict[str, tuple[float, int]] = field(default_factory=dict)
    acked: dict[str, float] = field(default_factory=dict)
    of: dict[str, Incarnation] = field(default_factory=dict)  # step id -> its process


def read_events(incs: Sequence[Incarnation]) -> Events:
    ev = Events()
    for inc in incs:
        for line in _lines(inc.log):
            t, what, *rest = line.split()
            if what == "enter":
                ev.entered[rest[0]] = (float(t), inc)
            elif what == "begun":
                ev.begun[rest[0]] = (float(t), rest[1] == "1")
            elif what == "ending":
                ev.ending[rest[0]] = float(t)
            elif what == "finished":
                ev.finished[rest[0]] = float(t)
            elif what == "loop-stall":
                ev.stall_ms[rest[0]] = float(rest[1])
            elif what == "handed":
                ev.handed[rest[0]] = (float(t), int(rest[1]))
                ev.of[rest[0]] = inc
            elif what == "ack":
                ev.acked.setdefault(rest[0], float(t))
                ev.of[rest[0]] = inc
    return ev


def _kill_phase(inc: Incarnation, ev: Events) -> tuple[str, float | None]:
    """Where a kill landed, and how many ms after the last ``enter``: ``startup`` (no run entered yet),
    ``entering`` (waiting for the begin row), ``in-run``, ``ending`` (the block left, its final write awaited) or
    ``between`` runs."""
    assert inc.killed_at is not None
    mine = sorted((t, run_id) for run_id, (t, i) in ev.entered.items() if i is inc and t <= inc.killed_at)
    if not mine:
        return "startup", None
    t, run_id = mine[-1]
    ms = (inc.killed_at - t) * 1000
    if run_id in ev.finished:
        return "between", ms
    if run_id in ev.ending:
        return "ending", ms
    return ("in-run" if run_id in ev.begun else "entering"), ms


def _stored(target: str, run_ids: Sequence[str]) -> tuple[dict[str, tuple[str, dict[str, str]]], str, int]:
    """Per run id: (outcome status, {step id: content}) of what the store holds; the integrity check; the number of
    runs in the store."""
    from causaltrace.collector.store import Store
    from causaltrace.exceptions import RunNotFoundError

    out: dict[str, tuple[str, dict[str, str]]] = {}
    with Store(target) as store:
        for run_id in run_ids:
            try:
                run = store.get_run(run_id)
            except RunNotFoundError:
                continue
            out[run_id] = (run.outcome.status, {s.step_id: s.content for s in run.steps})
        total = len(store.list_runs())
        path = store.path
    integrity = "n/a (PostgreSQL)"
    if path is not None:
        import sqlite3

        conn = sqlite3.connect(path)
        try:
            integrity = "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check").fetchall())
        finally:
            conn.close()
    return out, integrity, total


def _failure(inc: Incarnation) -> str:
    """A worker that died on its own: its log's name, exit status and last line of stderr."""
    err = inc.log.with_suffix(".err").read_text(errors="replace").strip().splitlines()
    return f"{inc.log.name}: exit {inc.returncode}" + (f": {err[-1]}" if err else "")


def _expected(step_id: str, payload: int) -> str:
    run_id, index = step_id.rsplit("/", 1)
    return step_content(run_id, int(index), payload)


def _ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    values = sorted(values)
    return {"p50": round(statistics.median(values), 2), "p99": round(values[int(0.99 * (len(values) - 1))], 2),
            "max": round(values[-1], 2)}


def _disturbed(ev: Events, stored: dict[str, tuple[str, dict[str, str]]], incs: Sequence[Incarnation],
               events: Sequence[tuple[str, float, float]]) -> dict[str, Any]:
    """The restart / lock figures: each disturbance's seconds, the runs entered after the first one ended and how
    many of them are not stored complete, and the workers whose exit said something was not stored."""
    after = [r for r, (t, _) in ev.entered.items() if events and t >= events[0][2]]
    said = [i.log.name for i in incs if "not stored" in i.log.with_suffix(".err").read_text(errors="replace")]
    return {
        "disturbances": [f"{kind} {end - start:.2f} s" for kind, start, end in events],
        "runs_entered_after_first_disturbance": len(after),
        "of_them_not_stored_complete": sorted(r for r in after if stored.get(r, ("",))[0] != "success"),
        "workers_saying_not_stored_at_exit": said,
    }


def analyse(incs: Sequence[Incarnation], target: str, payload: int,
            events: Sequence[tuple[str, float, float]] = ()) -> dict[str, Any]:
    """The report: runs, steps, the window at each kill, timings, integrity, and the targets."""
    ev = read_events(incs)
    stored, integrity, total = _stored(target, list(ev.entered))
    started = [r for r in ev.entered if r in ev.begun]
    statuses = [stored[r][0] for r in ev.entered if r in stored]
    stored_steps = {sid: content for _, steps in stored.values() for sid, content in steps.items()}
    acked_lost = sorted(s for s in ev.acked if s not in stored_steps)
    wrong = sorted(s for s, c in stored_steps.items() if c != _expected(s, payload))
    handed = set(ev.handed) | set(ev.acked)
    windows, phases = [], []
    for inc in incs:
        if inc.killed_at is None:
            continue
        queued = [s for s in handed if ev.of.get(s) is inc and s not in ev.acked]
        windows.append((len(queued), sum(s in stored_steps for s in queued)))
        phases.append(_kill_phase(inc, ev))
    latency = [(ev.acked[s] - ev.handed[s][0]) * 1000 for s in ev.handed if s in ev.acked]
    report: dict[str, Any] = {
        "processes": len(incs),
        "kills": len(phases),
        "kill_phases": {p: sum(1 for q, _ in phases if q == p) for p in ("startup", "entering", "in-run", "ending", "between")},
        "kills_in_first_100ms_of_a_run": sum(1 for q, ms in phases if q in ("entering", "in-run") and ms < 100),
        "worker_failures": [_failure(i) for i in incs if i.killed_at is None and i.returncode != 0],
        "runs_entered": len(ev.entered),
        "runs_started": len(started),
        "runs_started_after_begin_wait_timed_out": sum(1 for r in started if not ev.begun[r][1]),
        "runs_stored": len(statuses),
        "runs_stored_complete": sum(1 for s in statuses if s == "success"),
        "runs_stored_incomplete": sum(1 for s in statuses if s == "incomplete"),
        "runs_stored_other": sorted({s for s in statuses if s not in ("success", "incomplete")}),
        "runs_entered_not_started_stored": sum(1 for r in ev.entered if r not in ev.begun and r in stored),
        "runs_in_store": total,
        "started_runs_missing": sorted(r for r in started if r not in stored),
        "finished_runs_not_complete": sorted(r for r in ev.finished if stored.get(r, ("",))[0] != "success"),
        "steps_handed": len(handed),
        "steps_acknowledged": len(ev.acked),
        "steps_stored": len(stored_steps),
        "acknowledged_steps_lost": acked_lost,
        "stored_steps_with_wrong_content": wrong,
        "window_at_kill": {"count": sum(w for w, _ in windows), "max": max((w for w, _ in windows), default=0),
                           "stored_anyway": sum(s for _, s in windows)},
        "handover_ms": _ms([us / 1000 for _, us in ev.handed.values()]),
        "run_start_wait_ms": _ms([(ev.begun[r][0] - ev.entered[r][0]) * 1000 for r in started]),
        "run_end_wait_ms": _ms([(t - ev.ending[r]) * 1000 for r, t in ev.finished.items() if r in ev.ending]),
        "async_run_waits_ms": _ms([max((ev.begun[r][0] - ev.entered[r][0]), t - ev.ending[r]) * 1000
                                   for r, t in ev.finished.items() if r in ev.stall_ms and r in ev.ending]),
        "async_loop_stall_ms": _ms(list(ev.stall_ms.values())),
        "ack_latency_ms": _ms(latency),
        "integrity_check": integrity,
    }
    if events:
        report.update(_disturbed(ev, stored, incs, events))
    report["targets_met"] = not (report["started_runs_missing"] or acked_lost or wrong or report["worker_failures"]
                                 or report["finished_runs_not_complete"] or integrity not in ("ok", "n/a (PostgreSQL)")
                                 or report.get("of_them_not_stored_complete"))
    return report


def table(report: dict[str, Any]) -> str:
    """The report as aligned ``name  value`` lines (lists shown by their length and first items)."""
    rows = []
    for key, value in report.items():
        if isinstance(value, list):
            value = f"{len(value)}" + (f"  {', '.join(map(str, value[:3]))}" if value else "")
        elif isinstance(value, dict):
            value = "  ".join(f"{k} {v}" for k, v in value.items())
        rows.append(f"{key.replace('_', ' '):<44} {value}")
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------- main


def _postgres(tmp: Path) -> tuple[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from _postgres import PostgresServer

    server = PostgresServer(Path(tempfile.mkdtemp(prefix="ct-chaos-pg-")))
    server.start()
    return server.new_database(), server


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--procs", type=int, default=3, help="worker processes at once (N; default 3)")
    parser.add_argument("--runs", type=int, default=20, help="runs per process slot (M; default 20)")
    parser.add_argument("--kills", type=int, help="SIGKILLs to send (default N*M/4)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", help="the store: a SQLite path or a postgresql:// URL (default: a temporary home)")
    parser.add_argument("--postgres", action="store_true", help="a temporary PostgreSQL cluster as the store")
    parser.add_argument("--max-steps", type=int, default=8, help="steps per run: 1..this (default 8)")
    parser.add_argument("--payload", type=int, default=PAYLOAD_CHARS, help="characters per step's content")
    parser.add_argument("--early", type=float, default=0.5, help="share of kills in a run's first 100 ms")
    parser.add_argument("--fsync", action="store_true", help="fsync the side logs after each write")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--chaos", choices=("kill", "restart", "lock"), default="kill",
                        help="the disturbance: SIGKILLs (default), PostgreSQL restarts, or a held write lock")
    parser.add_argument("--restarts", type=int, default=3, help="--chaos restart: how many restarts (default 3)")
    parser.add_argument("--down", type=float, nargs=2, default=(0.3, 1.0), metavar=("MIN", "MAX"),
                        help="--chaos restart: seconds the server stays down, drawn from MIN..MAX (default 0.3 1; "
                             "0 0: pg_ctl restart)")
    parser.add_argument("--lock-seconds", type=float, default=15.0, help="--chaos lock: seconds held (default 15)")
    parser.add_argument("--until", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--slot", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kills is None:
        args.kills = args.procs * args.runs // 4 if args.chaos == "kill" else 0
    if args.chaos == "restart" and not args.postgres:
        parser.error("--chaos restart restarts a server of its own: add --postgres")
    return args


def run_bench(args: argparse.Namespace, tmp: Path, server: Any = None) -> dict[str, Any]:
    """One chaos round in ``tmp`` (logs, and the store unless ``args.db`` names one); returns the report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    env["CAUSALTRACE_HOME"] = str(tmp / "home")
    target = args.db or str(tmp / "home" / "causaltrace.db")
    env["CAUSALTRACE_DB"] = target
    (tmp / "home").mkdir(exist_ok=True)
    logs = tmp / "logs"
    logs.mkdir(exist_ok=True)
    disturber = None
    if args.chaos != "kill":
        from causaltrace.collector.store import Store

        Store(target).close()  # created before the lock is taken
        args.until = str(tmp / "stop")
        disturber = Disturber(args, target, server)
        disturber.start()
    t = time.perf_counter()
    incs = Killer(args, env, logs).run()
    report = {"procs": args.procs, "runs_per_proc": args.runs, "seed": args.seed, "store": target.split("@")[-1],
              "chaos": args.chaos, "seconds": round(time.perf_counter() - t, 1)}
    if disturber is not None:
        disturber.join()
        report["disturber_error"] = disturber.error
    report.update(analyse(incs, target, args.payload, disturber.events if disturber is not None else ()))
    if disturber is not None and (disturber.error or not disturber.events):
        report["targets_met"] = False
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker_main(args)
        return 0
    server = None
    with tempfile.TemporaryDirectory(prefix="ct-chaos-") as tmp:
        try:
            if args.postgres and not args.db:
                args.db, server = _postgres(Path(tmp))
            load = os.getloadavg()
            report = run_bench(args, Path(tmp), server)
            report["load_before"] = " ".join(f"{x:.2f}" for x in load)
        finally:
            if server is not None:
                server.stop()
                shutil.rmtree(server.root, ignore_errors=True)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0 if report["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
