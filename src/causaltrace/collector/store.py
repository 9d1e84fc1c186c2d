"""The embedded SQLite store: runs (live and finished), their steps, dependencies and recordings, diagnoses and
repair pairs (ARCHITECTURE "Payload policy, the store", "Shared contracts" → Outcome / ``incomplete``).

Usage::

    from causaltrace.collector.store import Store

    with Store() as store:                      # $CAUSALTRACE_HOME/causaltrace.db
        store.begin_run(run_id, framework="autogen", task=task, name=None, trace_id=None, started_at=now)
        store.add_steps(run_id, steps)          # as the run progresses: a crash loses nothing already written
        store.finish_run(run)                   # the full final Run, in one transaction
        run = store.get_run(run_id[:8])         # an id or a unique prefix (>= 4 characters)

Design decisions:

* **Full content, own limit.** The store keeps the full Step (the collector hands it full Steps in-process);
  ``TraceConfig``'s truncation applies to exported spans only. Any single text field of a step (``content``,
  ``action_signature``, an error message, or a string anywhere inside ``inputs`` / ``outputs`` / ``arguments`` /
  ``metadata``) longer than ``max_chars`` is cut to ``max_chars`` characters followed by
  ``…[causaltrace: truncated N chars]``, and the step is stored with ``truncated=True`` — never an error. Ids and
  names are not cut. Recordings are kept whole (replay needs them byte for byte).
* **JSON payload + queryable columns.** Every Step / RecordedCall / Diagnosis / RepairPair is stored as its
  ``model_dump_json()`` next to the columns queries need (run_id, step_id, index, kind, agent, status, parent…).
  The Run's own fields (everything but steps and recording) are one JSON column of ``runs``. Dependencies are
  kept inside the Step JSON (the source of truth for round-trips) AND as ``dependencies (consumer, producer,
  kind)`` rows for queries. A run that came in through :meth:`Store.finish_run` / :meth:`Store.save_run` comes
  back equal (``store.get_run(run.run_id) == run``) unless a field was truncated.
* **Crash safety and honest status.** ``begin_run`` writes a row in state ``running`` with the writer's pid, its
  process start time (``/proc/<pid>/stat`` field 22, guarding against pid reuse) and host. Reading a ``running``
  run whose writer process no longer exists (same host only; another host's writer is never judged) gives outcome
  status ``incomplete`` with its steps kept and ``ended_at=None``; a live writer's run lists as ``running`` and
  ``get_run`` returns it with outcome ``unknown`` and the reason "still running". Reads never write;
  :meth:`Store.mark_incomplete` persists the ``incomplete`` state. A run whose stored steps do not form a valid
  graph (a crashed writer never sent a parent) is still returned, unvalidated, when it is not finished.
* **Concurrency.** WAL journal, a 30 s busy timeout, and every write in ``BEGIN IMMEDIATE`` (so two processes
  never dead-end on a read→write lock upgrade). One connection per Store with ``check_same_thread=False`` behind
  an internal re-entrant lock, so a background collector thread may write through it.
* **Schema versions.** ``PRAGMA user_version`` plus ordered migrations (``_migrations.py``); a file written by a
  newer causaltrace, a SQLite file of another application, or a file that is not SQLite is a ``StoreError``
  naming the path.
* **Re-beginning a run.** ``begin_run`` on an id that is already ``running`` under the same writer only refreshes
  the run's fields (an idempotent retry); on any other existing run it starts the run over (old steps, recording,
  diagnoses and repair pairs are dropped). ``add_steps`` for a run that is already finished is ignored
  (``finish_run`` wrote the final Run; a late re-send is stale); for a run marked ``incomplete`` it revives the run
  to ``running``.
* **Replacing a run** (``finish_run`` / ``save_run`` over any stored run but this writer's own live one) removes
  everything derived from the old run too: its diagnoses and repair pairs. :meth:`Store.import_run` (the importers'
  entry) leaves a stored run that equals the imported one untouched and refuses to overwrite a different one
  unless asked (``replace=True``, the CLI's ``--replace``).
* **Deleting a run** removes its steps, dependencies, recording, diagnoses and repair pairs.
* **Read-only opening** (``Store(path, readonly=True)``, used by the CLI's inspection commands): the file is opened
  ``mode=ro`` (``immutable=1`` where SQLite could not read a WAL store otherwise: a directory this process may not
  write), never migrated and never written; an older schema is read through a migrated in-memory copy, a missing
  file reads as an empty store. Writing through such a Store is a ``StoreError``.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from causaltrace.collector import _migrations
from causaltrace.config import default_db_path
from causaltrace.exceptions import (
    InvalidInputError,
    RunExistsError,
    RunNotFoundError,
    StoreError,
    TraceAssemblyError,
)
from causaltrace.schema import Diagnosis, Outcome, RecordedCall, Recording, RepairPair, Run, Step

__all__ = ["SCHEMA_VERSION", "TRUNCATION_MARKER", "ImportOutcome", "Store", "WriterInfo"]

logger = logging.getLogger(__name__)

#: The schema version this causaltrace writes (files are migrated up to it when opened).
SCHEMA_VERSION = _migrations.LATEST_VERSION
#: What replaces the cut-off tail of a text field longer than the store's ``max_chars``.
TRUNCATION_MARKER = "…[causaltrace: truncated {n} chars]"
_BUSY_TIMEOUT_S = 30.0
_MIN_PREFIX = 4


# ------------------------------------------------------------------------------------------------------ writers


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start_time)`` from ``/proc/<pid>/stat`` (fields 3 and 22), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    # Field 2 (comm) is in parentheses and may itself hold spaces and parentheses: split after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    if len(rest) < 20:
        return None
    return rest[0], rest[19]


def _has_proc() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _ps_start_time(pid: int) -> str:
    """Best effort process start time without /proc (macOS, BSD): ``ps -o lstart=``; empty when unknown."""
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _start_time_of(pid: int) -> str:
    if _has_proc():
        stat = _proc_stat(pid)
        return stat[1] if stat else ""
    if os.name == "posix":
        return _ps_start_time(pid)
    return ""


_current: WriterInfo | None = None


@dataclass(frozen=True)
class WriterInfo:
    """The process writing a live run: pid, process start time (clock ticks since boot, as text) and host."""

    pid: int
    start_time: str
    host: str

    @classmethod
    def current(cls) -> WriterInfo:
        """This process (computed once per pid, so a forked child gets its own)."""
        global _current
        pid = os.getpid()
        if _current is None or _current.pid != pid:
            _current = cls(pid=pid, start_time=_start_time_of(pid), host=socket.gethostname())
        return _current

    def is_alive(self) -> bool:
        """Whether the writer still runs.

        Same host: the process exists (and is not a zombie) AND its start time equals ``start_time`` — a reused pid
        belongs to another process and counts as dead. Another host: True (unknown; such a run is never marked
        incomplete). Where the process table cannot be read (Windows), also True.
        """
        if self.host != socket.gethostname():
            return True
        if self.pid <= 0:
            return False
        if _has_proc():
            stat = _proc_stat(self.pid)
            if stat is None or stat[0] in ("Z", "X", "x"):
                return False
            return not self.start_time or stat[1] == self.start_time
        if os.name != "posix":
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, owned by someone else
        except OSError:
            return True
        if not self.start_time:
            return True
        now = _ps_start_time(self.pid)
        return not now or now == self.start_time


# -------------------------------------------------------------------------------------------------------- helpers


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _sort_ts(started_at: datetime | None) -> float:
    return started_at.timestamp() if started_at is not None else time.time()


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many small objects are built (restored even on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _explain(exc: ValidationError) -> str:
    """One line from a pydantic error: the first problem's location and message (and how many more)."""
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"{loc}: {first.get('msg', '')}{more}"


_RUN_COLUMNS = (
    "run_id, framework, name, task, trace_id, started_at, ended_at, status, state, writer_pid, writer_start, "
    "writer_host, has_recording, written_at, data, sort_ts"
)
_RUN_PLACEHOLDERS = ", ".join("?" * len(_RUN_COLUMNS.split(",")))
_STEP_UPSERT = (
    "INSERT INTO steps (run_id, step_id, idx, kind, agent, status, parent, truncated, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, step_id) DO UPDATE SET idx = excluded.idx, kind = excluded.kind, agent = excluded.agent, "
    "status = excluded.status, parent = excluded.parent, truncated = excluded.truncated, data = excluded.data"
)
_DEP_INSERT = "INSERT INTO dependencies (run_id, consumer, producer, kind, pos) VALUES (?, ?, ?, ?, ?)"
_REC_INSERT = (
    "INSERT INTO recordings (run_id, seq, step_id, agent_key, kind, ordinal, request_hash, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _delete_dependencies_of(conn: sqlite3.Connection, run_id: str, consumers: list[str]) -> None:
    """Delete the dependency rows of these consumer steps (a step written again replaces them): a few statements,
    not one per step."""
    for start in range(0, len(consumers), 500):  # SQLite's bound-parameter limit
        chunk = consumers[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        conn.execute(f"DELETE FROM dependencies WHERE run_id = ? AND consumer IN ({marks})", (run_id, *chunk))


_CHILD_TABLES = ("steps", "dependencies", "recordings")
_DERIVED_TABLES = ("diagnoses", "repair_pairs")
#: What :meth:`Store.import_run` did with a run.
ImportOutcome = Literal["stored", "unchanged", "replaced"]


class _RunRow(NamedTuple):
    """A ``runs`` row by column name (fields in ``_RUN_COLUMNS`` order)."""

    run_id: str
    framework: str
    name: str | None
    task: str | None
    trace_id: str | None
    started_at: str | None
    ended_at: str | None
    status: str
    state: str
    writer_pid: int | None
    writer_start: str | None
    writer_host: str | None
    has_recording: int
    written_at: str
    data: str
    sort_ts: float

    def writer(self) -> WriterInfo | None:
        if self.writer_pid is None:
            return None
        return WriterInfo(pid=int(self.writer_pid), start_time=self.writer_start or "", host=self.writer_host or "")


# ---------------------------------------------------------------------------------------------------------- store


class Store:
    """The SQLite store of runs, diagnoses and repair pairs (see the module docstring for the decisions)."""

    path: Path

    def __init__(self, path: str | Path | None = None, *, max_chars: int = 2_000_000, readonly: bool = False) -> None:
        if not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidInputError(f"max_chars={max_chars!r}: the store's text limit must be a positive integer")
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.max_chars = max_chars
        self.readonly = readonly
        self._lock = threading.RLock()
        self._batched = 0  # > 0 inside transaction(): writes join it (only its thread holds the lock meanwhile)
        self._conn: sqlite3.Connection | None = None
        if readonly:
            self._conn = self._open_readonly()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory of the store {str(self.path)!r}: {exc}") from exc
        if self.path.is_dir():
            raise StoreError(f"the store path {str(self.path)!r} is a directory; give a file path")
        try:
            conn = sqlite3.connect(
                str(self.path), timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store {str(self.path)!r}: {exc}") from exc
        try:
            self._setup(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # -- opening -------------------------------------------------------------------------------------------------

    def _setup(self, conn: sqlite3.Connection) -> None:
        with self._opening():
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            self._check_file(conn)
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            _migrations.migrate(conn)
            version = _migrations.user_version(conn)
        if version > SCHEMA_VERSION:  # a newer causaltrace migrated it while we were opening
            raise StoreError(self._too_new(version))

    @contextmanager
    def _opening(self) -> Iterator[None]:
        """Turn sqlite's errors while opening into a StoreError naming the file (and what it is not)."""
        where = repr(str(self.path))
        try:
            yield
        except StoreError:
            raise
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc) or "encrypted" in str(exc):
                raise StoreError(f"{where} is not a causaltrace store (not a readable SQLite database: {exc})") from exc
            raise StoreError(f"cannot open or migrate the store {where}: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open or migrate the store {where}: {exc}") from exc

    def _check_file(self, conn: sqlite3.Connection) -> int:
        """The file's schema version, after refusing a newer one and another application's database."""
        version = _migrations.user_version(conn)  # the first read: fails here on a non-SQLite file
        if version > SCHEMA_VERSION:
            raise StoreError(self._too_new(version))
        if version == 0:
            tables = {
                name
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            }
            foreign = sorted(tables - _migrations.OUR_TABLES)
            if foreign:
                raise StoreError(
                    f"{str(self.path)!r} is a SQLite database of another application (tables {', '.join(foreign)}), "
                    "not a causaltrace store; choose another path"
                )
        return version

    def _open_readonly(self) -> sqlite3.Connection:
        """A connection that never writes the file (``readonly=True``; the read-only CLI commands use it).

        ``mode=ro`` first; where that cannot work (a WAL file in a directory this process may not write, so SQLite
        cannot create the ``-shm`` index) ``immutable=1``. Nothing is migrated: a store of an older schema version
        is copied into memory and the copy migrated; a missing file reads as an empty store (nothing is created).
        """
        if self.path.is_dir():
            raise StoreError(f"the store path {str(self.path)!r} is a directory; give a file path")
        if not self.path.exists():
            return self._in_memory(None)
        conn: sqlite3.Connection | None = None
        with self._opening():
            try:
                conn = self._connect_uri("mode=ro")
                version = self._check_file(conn)
            except sqlite3.OperationalError:
                if conn is not None:
                    conn.close()
                conn = self._connect_uri("immutable=1")
                version = self._check_file(conn)
                wal = Path(f"{self.path}-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    logger.warning(
                        "causaltrace store: %s is read without its write-ahead log %s (its directory is not "
                        "writable, so SQLite cannot index it): the latest writes may be missing", self.path, wal
                    )
            if version < SCHEMA_VERSION:
                try:
                    return self._in_memory(conn)
                finally:
                    conn.close()
        return conn

    def _connect_uri(self, flags: str) -> sqlite3.Connection:
        from urllib.parse import quote

        uri = f"file:{quote(str(self.path.resolve()))}?{flags}"
        conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        return conn

    @staticmethod
    def _in_memory(source: sqlite3.Connection | None) -> sqlite3.Connection:
        """An in-memory store: a copy of ``source`` (or empty) migrated to the current schema."""
        memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        if source is not None:
            source.backup(memory)
        _migrations.migrate(memory)
        return memory

    def _too_new(self, version: int) -> str:
        return (
            f"the store {str(self.path)!r} has schema version {version}, newer than this causaltrace knows "
            f"(up to {SCHEMA_VERSION}); upgrade causaltrace or use another CAUSALTRACE_HOME"
        )

    @staticmethod
    def _enable_wal(conn: sqlite3.Connection) -> None:
        for attempt in range(5):
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
                continue
            if str(mode).lower() != "wal":
                logger.debug("causaltrace store: journal_mode is %s (WAL unavailable here)", mode)
            return

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def schema_version(self) -> int:
        """The schema version of the open file (``PRAGMA user_version``)."""
        with self._read() as conn:
            return _migrations.user_version(conn)

    # -- transactions --------------------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the store {str(self.path)!r} is closed")
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several writes (``begin_run``, ``add_steps``, ``finish_run``…) into ONE transaction: one commit
        for all of them (the live collector's writer uses it per batch); anything raised rolls all of them back."""
        with self._write():
            self._batched += 1
            try:
                yield
            finally:
                self._batched -= 1

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (or a part of the open :meth:`transaction`); sqlite errors become
        StoreError, anything raised rolls back."""
        with self._lock:
            conn = self._connection()
            if self.readonly:
                raise StoreError(f"the store {str(self.path)!r} was opened read-only; it cannot be written")
            if self._batched:
                yield conn
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write to the store {str(self.path)!r}: {exc}") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"cannot write to the store {str(self.path)!r}: {exc}") from exc
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent snapshot (WAL) for multi-statement reads."""
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the store {str(self.path)!r}: {exc}") from exc

    # -- writing -------------------------------------------------------------------------------------------------

    def begin_run(
        self,
        run_id: str,
        *,
        framework: str,
        task: str | None,
        name: str | None,
        trace_id: str | None,
        started_at: datetime | None,
        metadata: dict[str, Any] | None = None,
        writer: WriterInfo | None = None,
    ) -> None:
        """Write the row of a live run (state ``running``, with its writer's pid, start time and host)."""
        writer = writer or WriterInfo.current()
        try:
            head = Run(
                run_id=run_id,
                framework=framework,
                task=task,
                name=name,
                trace_id=trace_id,
                started_at=started_at,
                metadata=metadata or {},
            )
        except ValidationError as exc:
            raise InvalidInputError(f"begin_run({run_id!r}): {_explain(exc)}") from exc
        data = head.model_dump_json(exclude={"steps", "recording"})
        with self._write() as conn:
            old = self._row(conn, run_id)
            same_writer = old is not None and old.state == "running" and old.writer() == writer
            if old is not None and not same_writer:
                self._delete_children(conn, run_id, derived=True)
            conn.execute(
                f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({_RUN_PLACEHOLDERS})",
                (
                    run_id,
                    head.framework,
                    head.name,
                    head.task,
                    head.trace_id,
                    _iso(head.started_at),
                    None,
                    "running",
                    "running",
                    writer.pid,
                    writer.start_time,
                    writer.host,
                    0,
                    _now_iso(),
                    data,
                    _sort_ts(head.started_at),
                ),
            )

    def add_steps(self, run_id: str, steps: Sequence[Step]) -> None:
        """Upsert steps of a live run (a step may be re-sent with its end) and their dependency rows."""
        if not steps:
            return
        rows, deps = self._step_rows(run_id, steps)
        with self._write() as conn:
            old = self._row(conn, run_id)
            if old is None:
                raise StoreError(f"run {run_id!r} was not begun in the store {str(self.path)!r}; call begin_run first")
            if old.state == "finished":
                logger.debug("causaltrace store: ignoring %d late step(s) for finished run %r", len(rows), run_id)
                return
            if old.state == "incomplete":
                conn.execute("UPDATE runs SET state = 'running', status = 'running' WHERE run_id = ?", (run_id,))
            _delete_dependencies_of(conn, run_id, [r[1] for r in rows])
            conn.executemany(_STEP_UPSERT, rows)
            conn.executemany(_DEP_INSERT, deps)

    def finish_run(self, run: Run, *, stored_steps: Collection[str] = ()) -> None:
        """Write the full final Run (row, steps, dependencies, recording) in one transaction; state ``finished``.

        ``stored_steps`` are ids of steps this process already wrote to this live run (the collector's writer passes
        them): while the run is still this writer's live run, those rows are kept as they are instead of being
        deleted and written again. Otherwise every child row is replaced.
        """
        if not isinstance(run, Run):
            raise InvalidInputError(f"finish_run/save_run expects a Run, got {type(run).__name__}")
        recs = []
        if run.recording is not None:
            recs = [
                (run.run_id, seq, c.step_id, c.agent_key, c.kind, c.ordinal, c.request_hash, c.model_dump_json())
                for seq, c in enumerate(run.recording.calls)
            ]
        data = run.model_dump_json(exclude={"steps", "recording"})
        with self._write() as conn:
            old = self._row(conn, run.run_id)
            writer = (old.writer() if old is not None else None) or WriterInfo.current()
            sort_ts = _sort_ts(run.started_at) if run.started_at is not None or old is None else old.sort_ts
            live = bool(stored_steps) and old is not None and old.state != "finished" and writer == WriterInfo.current()
            if live:  # keep the rows written live; add the rest (a step re-sent replaces its dependency rows)
                rows, deps = self._step_rows(run.run_id, [s for s in run.steps if s.step_id not in stored_steps])
                conn.execute("DELETE FROM recordings WHERE run_id = ?", (run.run_id,))
                _delete_dependencies_of(conn, run.run_id, [r[1] for r in rows])
            else:
                rows, deps = self._step_rows(run.run_id, run.steps)
                own_live = old is not None and old.state == "running" and old.writer() == WriterInfo.current()
                self._delete_children(conn, run.run_id, derived=old is not None and not own_live)
            conn.execute(
                f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({_RUN_PLACEHOLDERS})",
                (
                    run.run_id,
                    run.framework,
                    run.name,
                    run.task,
                    run.trace_id,
                    _iso(run.started_at),
                    _iso(run.ended_at),
                    run.outcome.status,
                    "finished",
                    writer.pid,
                    writer.start_time,
                    writer.host,
                    int(run.recording is not None),
                    _now_iso(),
                    data,
                    sort_ts,
                ),
            )
            conn.executemany(_STEP_UPSERT, rows)
            conn.executemany(_DEP_INSERT, deps)
            conn.executemany(_REC_INSERT, recs)

    def save_run(self, run: Run) -> None:
        """Store a whole run, replacing a stored run of that id; saving the same run twice leaves one copy and
        keeps its diagnoses and repair pairs (a run with other content drops them: they describe the old one)."""
        self.import_run(run, replace=True)

    def import_run(self, run: Run, *, replace: bool = False) -> ImportOutcome:
        """Store an imported run (``causaltrace import`` / ``pull``): ``"stored"`` when its id was free,
        ``"unchanged"`` when the store already holds this very run (nothing is written: re-importing is idempotent),
        ``"replaced"`` when ``replace`` is set and a different run of that id was stored (with everything derived from
        it: diagnoses and repair pairs). Without ``replace`` that case is a :class:`RunExistsError`.
        """
        if not isinstance(run, Run):
            raise InvalidInputError(f"import_run/save_run expects a Run, got {type(run).__name__}")
        with self.transaction():  # the comparison and the write see the same row
            conn = self._connection()
            old = self._row(conn, run.run_id)
            if old is None:
                self.finish_run(run)
                return "stored"
            if old.state == "finished" and self._same_run(conn, old, run):
                return "unchanged"
            if not replace:
                raise RunExistsError(
                    f"run {run.run_id!r} is already in the store {str(self.path)!r} with other content "
                    f"({old.state}, {old.status}); pass --replace to overwrite it (its diagnoses and repair pairs "
                    "are removed), or delete it first"
                )
            self.finish_run(run)
            return "replaced"

    def mark_incomplete(self) -> list[str]:
        """Persist ``incomplete`` for running runs whose writer process is dead; return their ids."""
        with self._write() as conn:
            rows = conn.execute(
                "SELECT run_id, writer_pid, writer_start, writer_host FROM runs WHERE state = 'running'"
            ).fetchall()
            verdicts: dict[WriterInfo, bool] = {}
            dead: list[str] = []
            for run_id, pid, start, host in rows:
                if pid is None:
                    continue
                writer = WriterInfo(pid=int(pid), start_time=start or "", host=host or "")
                if writer not in verdicts:
                    verdicts[writer] = writer.is_alive()
                if not verdicts[writer]:
                    dead.append(run_id)
            conn.executemany(
                "UPDATE runs SET state = 'incomplete', status = 'incomplete', ended_at = NULL "
                "WHERE run_id = ? AND state = 'running'",
                [(r,) for r in dead],
            )
        return dead

    def delete_run(self, run_id: str) -> None:
        """Delete a run (id or unique prefix) with its steps, recording, diagnoses and repair pairs."""
        with self._write() as conn:
            row = self._resolve(conn, run_id)
            self._delete_children(conn, row.run_id, derived=True)
            conn.execute("DELETE FROM runs WHERE run_id = ?", (row.run_id,))

    @staticmethod
    def _delete_children(conn: sqlite3.Connection, run_id: str, *, derived: bool = False) -> None:
        """Delete a run's steps, dependencies and recording; with ``derived`` also its diagnoses and repair pairs
        (the run is being replaced by another one, so what was concluded about the old one no longer holds)."""
        for table in _CHILD_TABLES + (_DERIVED_TABLES if derived else ()):
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))

    def _step_rows(self, run_id: str, steps: Sequence[Step]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        rows: list[tuple[Any, ...]] = []
        deps: list[tuple[Any, ...]] = []
        for step in steps:
            if not isinstance(step, Step):
                raise InvalidInputError(f"run {run_id!r}: expected Step objects, got {type(step).__name__}")
            if step.run_id != run_id:
                raise InvalidInputError(
                    f"step {step.step_id!r} has run_id {step.run_id!r} but is being stored under run {run_id!r}"
                )
            data = step.model_dump_json()
            if len(data) > self.max_chars:  # cheap test: no string inside can be longer than the whole JSON
                cut = self._truncate(step)
                if cut is not step:
                    step, data = cut, cut.model_dump_json()
            rows.append(
                (
                    run_id,
                    step.step_id,
                    step.index,
                    step.kind,
                    step.agent,
                    step.status,
                    step.parent_step_id,
                    int(step.truncated),
                    data,
                )
            )
            deps.extend((run_id, step.step_id, d.step_id, d.kind, pos) for pos, d in enumerate(step.depends_on))
        return rows, deps

    def _truncate(self, step: Step) -> Step:
        """The step with every text field longer than ``max_chars`` cut and marked, or ``step`` itself."""
        limit = self.max_chars
        cut = 0

        def walk(value: Any) -> Any:
            nonlocal cut
            if isinstance(value, str):
                if len(value) > limit:
                    cut += 1
                    return value[:limit] + TRUNCATION_MARKER.format(n=len(value) - limit)
                return value
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return value

        update: dict[str, Any] = {
            "content": walk(step.content),
            "inputs": walk(step.inputs),
            "outputs": walk(step.outputs),
            "arguments": walk(step.arguments),
            "metadata": walk(step.metadata),
            "action_signature": walk(step.action_signature),
        }
        if step.error is not None:
            update["error"] = step.error.model_copy(update={"message": walk(step.error.message)})
        if not cut:
            return step
        update["truncated"] = True
        return step.model_copy(update=update)

    # -- reading -------------------------------------------------------------------------------------------------

    @staticmethod
    def _row(conn: sqlite3.Connection, run_id: str) -> _RunRow | None:
        row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _RunRow(*row) if row is not None else None

    def _resolve(self, conn: sqlite3.Connection, ref: str) -> _RunRow:
        """The run with id ``ref``, else the one run whose id starts with ``ref`` (>= 4 characters)."""
        where = repr(str(self.path))
        if not isinstance(ref, str) or not ref:
            raise RunNotFoundError(f"no run id given (got {ref!r}); `causaltrace runs` lists the stored runs")
        exact = self._row(conn, ref)
        if exact is not None:
            return exact
        if len(ref) < _MIN_PREFIX:
            raise RunNotFoundError(
                f"no run {ref!r} in the store {where}; a run id prefix needs at least {_MIN_PREFIX} characters"
            )
        if ord(ref[-1]) < sys.maxunicode:  # an index range scan: ref <= run_id < ref with its last char bumped
            upper = ref[:-1] + chr(ord(ref[-1]) + 1)
            found = conn.execute(
                "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ? ORDER BY run_id LIMIT 6", (ref, upper)
            ).fetchall()
        else:
            found = conn.execute(
                "SELECT run_id FROM runs WHERE substr(run_id, 1, ?) = ? ORDER BY run_id LIMIT 6", (len(ref), ref)
            ).fetchall()
        ids = [r[0] for r in found if r[0].startswith(ref)]
        if not ids:
            raise RunNotFoundError(
                f"no run with id or prefix {ref!r} in the store {where}; `causaltrace runs` lists the stored runs"
            )
        if len(ids) > 1:
            shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
            raise RunNotFoundError(f"run id prefix {ref!r} is ambiguous: it matches {shown}; give more characters")
        row = self._row(conn, ids[0])
        assert row is not None
        return row

    def get_run(self, run_id: str) -> Run:
        """The run with this id or unique prefix, steps in index order, with recording and annotations.

        A ``running`` run whose writer is dead comes back with outcome ``incomplete`` and ``ended_at=None``; one
        whose writer still runs, with outcome ``unknown`` and the reason "still running".
        """
        with self._read() as conn:
            row = self._resolve(conn, run_id)
            run = self._stored_run(conn, row)
        override = self._live_outcome(row)
        if override is not None:
            run = run.model_copy(update={"outcome": override, "ended_at": None})
        return run

    def _same_run(self, conn: sqlite3.Connection, row: _RunRow, run: Run) -> bool:
        """Whether the stored run of ``row`` equals ``run`` (a stored record too corrupt to read is not equal)."""
        try:
            return self._stored_run(conn, row) == run
        except StoreError:
            return False

    def _stored_run(self, conn: sqlite3.Connection, row: _RunRow) -> Run:
        """The run of ``row`` as stored (no live-outcome override), read inside the caller's transaction."""
        steps = conn.execute(
            "SELECT step_id, data FROM steps WHERE run_id = ? ORDER BY idx, step_id", (row.run_id,)
        ).fetchall()
        recs = (
            conn.execute("SELECT seq, data FROM recordings WHERE run_id = ? ORDER BY seq", (row.run_id,)).fetchall()
            if row.has_recording
            else None
        )
        return self._build_run(row, steps, recs)

    def _live_outcome(self, row: _RunRow) -> Outcome | None:
        """The outcome a not-finished run reads as (None for a finished run: its stored outcome stands)."""
        if row.state == "finished":
            return None
        writer = row.writer()
        who = f"pid {writer.pid} on {writer.host}" if writer else "an unknown process"
        if row.state == "incomplete" or (writer is not None and not writer.is_alive()):
            return Outcome(status="incomplete", reason=f"the writer process ({who}) died before the run finished")
        return Outcome(status="unknown", reason=f"still running (writer {who})")

    def _build_run(self, row: _RunRow, steps: list[tuple[str, str]], recs: list[tuple[int, str]] | None) -> Run:
        """Parse the stored JSON back into a Run; a corrupt record is a StoreError naming the run and the part.

        Each step is parsed on its own (faster than one big document, and a failure names the step) with the
        cyclic garbage collector paused: 10,000 steps allocate enough objects to trigger several full
        collections that would double the time.
        """
        where = f"run {row.run_id!r} in the store {str(self.path)!r}"
        try:
            fields = json.loads(row.data)
            if not isinstance(fields, dict):
                raise ValueError(f"expected a JSON object, got {type(fields).__name__}")
            for key in ("steps", "recording"):
                fields.pop(key, None)
            base = Run.model_validate(fields)
        except (ValueError, TypeError) as exc:
            detail = _explain(exc) if isinstance(exc, ValidationError) else str(exc)
            raise StoreError(f"{where}: the stored run record is corrupt ({detail})") from exc
        with _gc_paused():
            parsed: list[Step] = []
            for step_id, data in steps:
                try:
                    parsed.append(Step.model_validate_json(data))
                except ValidationError as exc:
                    raise StoreError(f"{where}: stored step {step_id!r} is corrupt ({_explain(exc)})") from exc
            recording = None
            if recs is not None:
                calls = []
                for seq, data in recs:
                    try:
                        calls.append(RecordedCall.model_validate_json(data))
                    except ValidationError as exc:
                        raise StoreError(f"{where}: recorded call #{seq} is corrupt ({_explain(exc)})") from exc
                recording = Recording(run_id=row.run_id, calls=tuple(calls))
            values = {name: getattr(base, name) for name in Run.model_fields}
            values.update(steps=tuple(parsed), recording=recording)
            try:
                return Run.model_validate(values)
            except (ValidationError, TraceAssemblyError) as exc:
                detail = _explain(exc) if isinstance(exc, ValidationError) else exc.message
                if row.state == "finished":
                    raise StoreError(f"{where}: the stored steps do not form a valid run ({detail})") from exc
                # A live or crashed run may lack a step that was never sent (a parent sent only at its end).
                logger.debug("causaltrace store: %s is partial (%s); returning it unvalidated", where, detail)
                return Run.model_construct(**values)

    def list_runs(self, *, failed: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        """Runs, newest first: ``run_id, name, framework, status, steps, started_at, ended_at, task`` (200 chars).

        ``status`` is the outcome status, ``running`` for a live writer's run and ``incomplete`` for a dead
        writer's. ``failed=True`` keeps outcome status ``failure`` only.
        """
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidInputError(f"limit={limit!r} must be a non-negative integer")
        sql = (
            "SELECT r.run_id, r.name, r.framework, r.status, r.state, r.writer_pid, r.writer_start, r.writer_host, "
            "r.started_at, r.ended_at, substr(r.task, 1, 200), "
            "(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.run_id) FROM runs r"
        )
        params: list[Any] = []
        if failed:
            sql += " WHERE r.status = 'failure'"
        sql += " ORDER BY r.sort_ts DESC, r.rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        verdicts: dict[WriterInfo, bool] = {}
        out: list[dict[str, Any]] = []
        for run_id, name, framework, status, state, pid, start, host, started, ended, task, count in rows:
            if state == "running" and pid is not None:
                writer = WriterInfo(pid=int(pid), start_time=start or "", host=host or "")
                if writer not in verdicts:
                    verdicts[writer] = writer.is_alive()
                status = "running" if verdicts[writer] else "incomplete"
            if status in ("running", "incomplete"):
                ended = None
            out.append(
                {
                    "run_id": run_id,
                    "name": name,
                    "framework": framework,
                    "status": status,
                    "steps": int(count),
                    "started_at": started,
                    "ended_at": ended,
                    "task": task,
                }
            )
        return out

    # -- diagnoses and repair pairs ------------------------------------------------------------------------------

    def save_diagnosis(self, d: Diagnosis) -> int:
        """Store a diagnosis; returns its row id (diagnoses of a run come back oldest first)."""
        if not isinstance(d, Diagnosis):
            raise InvalidInputError(f"save_diagnosis expects a Diagnosis, got {type(d).__name__}")
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO diagnoses (run_id, method, verified_by, created_at, data) VALUES (?, ?, ?, ?, ?)",
                (d.run_id, d.method, d.verified_by, _iso(d.created_at), d.model_dump_json()),
            )
            assert cur.lastrowid is not None
            return int(cur.lastrowid)

    def diagnoses(self, run_id: str) -> list[Diagnosis]:
        """The diagnoses stored for ``run_id`` (exact id), newest last."""
        with self._read() as conn:
            rows = conn.execute("SELECT id, data FROM diagnoses WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        out = []
        for row_id, data in rows:
            try:
                out.append(Diagnosis.model_validate_json(data))
            except ValidationError as exc:
                raise StoreError(
                    f"diagnosis #{row_id} of run {run_id!r} in the store {str(self.path)!r} is corrupt "
                    f"({_explain(exc)})"
                ) from exc
        return out

    def has_run(self, run_id: str) -> bool:
        """Whether a run with exactly this id is stored."""
        with self._read() as conn:
            return self._row(conn, run_id) is not None

    def strongest_diagnosis(self, run_id: str) -> Diagnosis | None:
        """The diagnosis a run shows (issue 19 item 5): the strongest it has — replay-verified over prediction over
        heuristic, newest within a level, an answer over a failed diagnosis; None when it has none. All stay
        stored (:meth:`diagnoses`)."""
        level = {"replay": 2, "prediction": 1, "heuristic": 0}
        ranked = [(not d.failed, level.get(d.verified_by, 0), i, d) for i, d in enumerate(self.diagnoses(run_id))]
        return max(ranked, key=lambda t: t[:3])[3] if ranked else None

    def save_repair_pair(self, p: RepairPair) -> None:
        """Store a repair pair (saving the same ``pair_id`` again replaces it, keeping its place in the order)."""
        if not isinstance(p, RepairPair):
            raise InvalidInputError(f"save_repair_pair expects a RepairPair, got {type(p).__name__}")
        with self._write() as conn:
            conn.execute(
                "INSERT INTO repair_pairs (pair_id, run_id, step_id, verified_by, created_at, data) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pair_id) DO UPDATE SET run_id = excluded.run_id, "
                "step_id = excluded.step_id, verified_by = excluded.verified_by, created_at = excluded.created_at, "
                "data = excluded.data",
                (p.pair_id, p.run_id, p.step_id, p.verified_by, _iso(p.created_at), p.model_dump_json()),
            )

    def repair_pairs(self, *, run_id: str | None = None, verified_by: set[str] | None = None) -> list[RepairPair]:
        """Stored repair pairs in the order first saved, optionally of one run and/or some ``verified_by`` values."""
        clauses: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if verified_by is not None:
            if not verified_by:
                return []
            values = sorted(verified_by)
            clauses.append(f"verified_by IN ({', '.join('?' * len(values))})")
            params.extend(values)
        sql = "SELECT pair_id, data FROM repair_pairs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY rowid"
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        out = []
        for pair_id, data in rows:
            try:
                out.append(RepairPair.model_validate_json(data))
            except ValidationError as exc:
                raise StoreError(
                    f"repair pair {pair_id!r} in the store {str(self.path)!r} is corrupt ({_explain(exc)})"
                ) from exc
        return out
