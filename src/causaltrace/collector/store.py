"""The store: runs (live and finished), their steps and recordings, diagnoses and repair pairs
(ARCHITECTURE "Payload policy, the store", "Shared contracts" → Outcome / ``incomplete``) — one interface, two
backends: an embedded SQLite file (the default, ``store_sqlite.py``) or a PostgreSQL database a team shares
(``store_postgres.py``, the ``postgres`` extra).

Usage::

    from causaltrace.collector.store import Store

    with Store() as store:                      # $CAUSALTRACE_DB, else $CAUSALTRACE_HOME/causaltrace.db
        store.begin_run(run_id, framework="autogen", task=task, name=None, trace_id=None, started_at=now)
        store.add_steps(run_id, steps)          # as the run progresses: a crash loses nothing already written
        store.finish_run(run)                   # the full final Run, in one transaction
        run = store.get_run(run_id[:8])         # an id or a unique prefix (>= 4 characters)

    Store("postgresql://ct@db.example/causaltrace")   # the same store in PostgreSQL

Design decisions:

* **A URL is never a path.** ``Store(target)`` takes a file path or a URL; anything that looks like
  ``scheme://…`` is a URL, opened by the backend of its scheme (``postgresql://`` / ``postgres://``; ``sqlite:///path``
  names a file too); any other scheme, a driver that is not installed, an unreachable server or wrong credentials
  are one ``StoreError`` line, and nothing is created on disk.
* **Full content, own limit.** The store keeps the full Step (the collector hands it full Steps in-process);
  ``TraceConfig``'s truncation applies to exported spans only. Any single text field of a step (``content``,
  ``action_signature``, an error message, or a string anywhere inside ``inputs`` / ``outputs`` / ``arguments`` /
  ``metadata``) longer than ``max_chars`` is cut to ``max_chars`` characters followed by
  ``…[causaltrace: truncated N chars]``, and the step is stored with ``truncated=True`` — never an error. The
  run's own texts (the outcome's final answer and reason, the task) are cut the same way. Ids and
  names are not cut. Recordings are kept whole (replay needs them byte for byte), with repeated content kept once:
  a large string a recorded call carries (a tool result every later model request sends again) is stored once as a
  content-addressed chunk and referenced from each call (``recording_chunks.py``, issue 21 item 14).
* **JSON payload + queryable columns.** Every Step / RecordedCall / Diagnosis / RepairPair is stored as its
  ``model_dump_json()`` next to the columns queries need (run_id, step_id, index, kind, agent, status, parent…).
  The Run's own fields (everything but steps and recording) are one JSON column of ``runs``. Dependencies live
  inside the Step JSON only (schema v4 dropped the ``dependencies`` table no query read: its rows were a quarter of
  a short run's SQL). A run that came in through :meth:`Store.finish_run` / :meth:`Store.save_run` comes back equal
  (``store.get_run(run.run_id) == run``) unless a field was truncated.
* **Crash safety and honest status.** ``begin_run`` writes a row in state ``running`` with the writer's pid, its
  process start time and host (:class:`~causaltrace.collector.writers.WriterInfo`). Reading a ``running`` run
  whose writer process no longer exists (same host only; another host's writer is never judged) gives outcome
  status ``incomplete`` with its steps kept and ``ended_at=None``; a live writer's run lists as ``running`` and
  ``get_run`` returns it with outcome ``unknown`` and the reason "still running". Reads never write;
  :meth:`Store.mark_incomplete` persists the ``incomplete`` state. A run whose stored steps do not form a valid
  graph (a crashed writer never sent a parent) is still returned, unvalidated, when it is not finished.
* **Concurrency.** Writers serialise (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the store's advisory lock), so a
  read-then-write never races another process. One connection per Store behind an internal re-entrant lock, so
  a background collector thread may write through it (the live collectors of a process share one Store per target:
  ``collector/live.py``; :meth:`Store.reusable` says whether an open one still serves).
* **Schema versions.** One ordered history for both backends (``_migrations.py``); a store written by a newer
  causaltrace, a database of another application, or a file that is not SQLite is a ``StoreError`` naming it.
* **Re-beginning a run.** ``begin_run`` on an id that is already ``running`` under the same writer only refreshes
  the run's fields (an idempotent retry); on any other existing run it starts the run over (old steps, recording,
  diagnoses and repair pairs are dropped). ``add_steps`` for a run that is already finished is ignored
  (``finish_run`` wrote the final Run; a late re-send is stale); for a run marked ``incomplete`` it revives the run
  to ``running``.
* **Replacing a run** (``finish_run`` / ``save_run`` over any stored run but this writer's own live one) removes
  everything derived from the old run too: its diagnoses and repair pairs. :meth:`Store.import_run` (the importers'
  entry) leaves a stored run that equals the imported one untouched and refuses to overwrite a different one
  unless asked (``replace=True``, the CLI's ``--replace``).
* **Deleting a run** removes its steps, recording, diagnoses and repair pairs, and the recording
  chunks no other run uses (replacing a run's recording does the same for the chunks the new one does not use).
* **Long texts of a SQLite store** (a recording chunk of at least 1 MiB; a cut text of a step or of the run whose
  JSON is at least 1 MiB, kept once and named from every row that shows it: schema v5) are files beside it,
  ``<file>.blobs/`` (``blob_files.py``): read transparently, deleted with their last row; copy that directory with
  the file. PostgreSQL keeps them in its rows.
* **Read-only opening** (``Store(target, readonly=True)``, used by the CLI's inspection commands): never migrated
  and never written (the backends say how); writing through such a Store is a ``StoreError``. A store nobody
  wrote yet — a missing SQLite file, a PostgreSQL database without our tables — reads as an empty store.
"""

from __future__ import annotations

import logging
import operator
import os
import sys
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from causaltrace.collector import _migrations, recording_chunks, recording_otlp
from causaltrace.collector.store_sql import (
    CHILD_TABLES,
    DERIVED_TABLES,
    HEAD_COLUMNS,
    RUN_INSERT_NEW,
    RUN_READ_COLUMNS,
    STEP_UPSERT,
    TRUNCATION_MARKER,
    Backend,
    Connection,
    CorruptRecordError,
    ImportOutcome,
    NoStoreYetError,
    RunHead,
    RunRow,
    WriteScope,
    build_run,
    explain,
    iso,
    run_head_json,
    run_row_json,
    shown_target,
    sort_ts,
    step_rows,
    truncate_run_text,
)
from causaltrace.collector.store_sqlite import SQLiteBackend
from causaltrace.collector.writers import WriterInfo
from causaltrace.config import default_db_target, is_url
from causaltrace.exceptions import InvalidInputError, RunExistsError, RunNotFoundError, StoreError
from causaltrace.schema import Diagnosis, Outcome, RepairPair, Run, Step

__all__ = ["SCHEMA_VERSION", "TRUNCATION_MARKER", "ImportOutcome", "Store", "WriterInfo", "open_backend"]

logger = logging.getLogger(__name__)

#: The schema version this causaltrace writes (stores are migrated up to it when opened).
SCHEMA_VERSION = _migrations.LATEST_VERSION
_MIN_PREFIX = 4
_step_order = operator.itemgetter(0, 1)
#: The final write of this writer's live run: its row updated in place (a row replaced as a new one is written to the
#: table and both of its indexes again: three pages of the commit instead of one).
_FINISH = ("UPDATE runs SET framework = ?, name = ?, task = ?, trace_id = ?, started_at = ?, ended_at = ?, status = ?, "
           "state = 'finished', writer_pid = ?, writer_start = ?, writer_host = ?, has_recording = ?, written_at = ?, "
           "data = ?, chunks = ? WHERE run_id = ?")
_FINISH_MOVED = _FINISH.replace(" WHERE", ", sort_ts = ? WHERE")
#: The same for a run the collector's writer says it is writing live, without reading its row first: it changes the
#: row only while that is still this writer's live run (and its sort key where the Run gives one stays), else nothing
#: (rowcount 0: the row is read and written as above).
_FINISH_OWN = _FINISH + " AND state <> 'finished' AND writer_pid = ? AND writer_start = ? AND writer_host = ?"
_FINISH_OWN_AT = _FINISH_OWN + " AND sort_ts = ?"
#: The row of a run begun and finished in one batch of the collector's writer, written once (``finish_new_run``).
_FINISH_NEW = RUN_INSERT_NEW.replace(") VALUES (", ", chunks) VALUES (?, ")
#: The fields of a run's start ``finish_new_run`` takes as they are (anything else: the begin row is written).
_PLAIN_BEGIN = frozenset({"framework", "task", "name", "trace_id", "started_at"})
_TEXT_OR_NONE = (str, type(None))


def open_backend(target: str | os.PathLike[str], *, readonly: bool = False) -> Backend:
    """The backend of a store target: a PostgreSQL URL, ``sqlite:///path``, or a file path.

    A target that looks like a URL (``scheme://``) is never taken for a path: an unknown scheme is a StoreError.
    """
    text = os.fspath(target)
    if is_url(text):
        scheme = text.split("://", 1)[0].lower()
        if scheme in ("postgresql", "postgres"):
            from causaltrace.collector.store_postgres import PostgresBackend

            return PostgresBackend(text, readonly=readonly)
        if scheme == "sqlite":
            rest = text.split("://", 1)[1]
            if not rest.startswith("/") or rest in ("/", ""):
                raise StoreError(f"the store URL {text!r} needs a file path: sqlite:///relative.db or sqlite:////abs.db")
            return SQLiteBackend(Path(rest[1:]).expanduser(), readonly=readonly)
        raise StoreError(
            f"the store URL {shown_target(text)!r} has the scheme {scheme!r}, which causaltrace cannot store to; give a file "
            "path or a postgresql:// URL"
        )
    return SQLiteBackend(Path(text).expanduser(), readonly=readonly)


# ---------------------------------------------------------------------------------------------------------- store


class Store:
    """The store of runs, diagnoses and repair pairs, in SQLite or PostgreSQL (see the module docstring)."""

    #: The SQLite file of the store (None for a PostgreSQL store: see :attr:`location`).
    path: Path | None
    #: How messages name the store: its file path, or its URL without the password.
    location: str

    def __init__(
        self, target: str | os.PathLike[str] | None = None, *, max_chars: int = 2_000_000, readonly: bool = False
    ) -> None:
        if not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidInputError(f"max_chars={max_chars!r}: the store's text limit must be a positive integer")
        self._backend = open_backend(target if target is not None else default_db_target(), readonly=readonly)
        self.path = getattr(self._backend, "path", None)
        self.location = self._backend.location
        self.max_chars = max_chars
        self.readonly = readonly
        self._lock = threading.RLock()
        self._batched = 0  # > 0 inside transaction(): writes join it (only its thread holds the lock meanwhile)
        self._pid = os.getpid()
        self._conn: Connection | None = None
        try:
            self._conn = self._backend.connect()
        except NoStoreYetError:
            if not readonly:
                raise
            self._backend = SQLiteBackend.empty(self.location)  # never written: an empty store, nothing created
            self._conn = self._backend.connect()
        #: Where a SQLite store keeps its long texts (``blob_files.py``); None for PostgreSQL.
        self._files = self._backend.blob_files
        self._open: list[Connection | None] = []  # per entered write scope: the connection it began, or None
        self._write_scope = WriteScope(self, batch=False, settle=recording_chunks.settle_files)
        self._batch_scope = WriteScope(self, batch=True, settle=recording_chunks.settle_files)


    def reconnect(self) -> None:
        """Drop the connection and open a new one (the live writer, after a write failed because the server
        restarted, failed over or reaped the idle connection); a StoreError when the store does not answer yet."""
        with self._lock:
            old, self._conn = self._conn, None
            if old is not None:
                try:
                    old.close()
                except Exception:  # a broken connection may fail to close: it is dropped either way
                    logger.debug("causaltrace store: closing a broken connection failed", exc_info=True)
            self._conn = self._backend.connect()

    def reusable(self) -> bool:
        """Whether this open Store can take more writes as it is: open, writable, in the process that opened it,
        its connection not known broken, and — SQLite — its file still the one it opened (the live collector keeps
        one open Store per target for the whole process: ``collector/live.py``)."""
        with self._lock:
            conn = self._conn
            if conn is None or self.readonly or self._pid != os.getpid():
                return False
            return bool(getattr(conn, "usable", True)) and self._backend.same_file()

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
        return f"Store({self.location!r})"

    def schema_version(self) -> int:
        """The schema version of the open store."""
        with self._read() as conn:
            return self._backend.schema_version(conn)

    # -- transactions --------------------------------------------------------------------------------------------

    def _connection(self) -> Connection:
        if self._conn is None:
            raise StoreError(f"the store {self.location!r} is closed")
        return self._conn

    def transaction(self) -> AbstractContextManager[Connection]:
        """Group several writes (``begin_run``, ``add_steps``, ``finish_run``…) into ONE transaction: one commit
        for all of them (the live collector's writer uses it per batch); anything raised rolls all of them back."""
        return self._batch_scope

    def _write(self) -> AbstractContextManager[Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (or a part of the open :meth:`transaction`); sqlite errors become
        StoreError, anything raised rolls back (``store_sql.WriteScope``; the writes of the live writer enter
        ``_write_scope`` itself)."""
        return self._write_scope

    def _roll_back(self, conn: Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if self._files is not None:  # the files it wrote for rows that never committed
            recording_chunks.settle_files(conn, self._files, self._backend.begin_write, committed=False)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot (WAL) for multi-statement reads."""
        with self._lock:
            conn = self._connection()
            try:
                self._backend.begin_read(conn)
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except self._backend.errors as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise StoreError(f"cannot read the store {self.location!r}: {exc}") from exc

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
            raise InvalidInputError(f"begin_run({run_id!r}): {explain(exc)}") from exc
        head = truncate_run_text(head, self.max_chars)
        data = run_head_json(head)
        started = head.started_at  # (iso, now_iso and sort_ts inline: one row a run)
        with self._write_scope as conn:
            row = (run_id, head.framework, head.name, head.task, head.trace_id,
                   None if started is None else started.isoformat(), None, "running", "running", writer.pid,
                   writer.start_time, writer.host, 0, datetime.now(UTC).isoformat(), data,
                   time.time() if started is None else started.timestamp())
            if conn.execute(RUN_INSERT_NEW, row).rowcount == 1:  # a new run (the usual case): no read first
                return
            old = self._head(conn, run_id)
            same_writer = old is not None and old.state == "running" and old.writer() == writer
            if old is not None and not same_writer:
                self._delete_children(conn, run_id, derived=True)
            self._backend.put_run(conn, row)

    def add_steps(self, run_id: str, steps: Sequence[Step]) -> None:
        """Upsert steps of a live run (a step may be re-sent with its end: its row is replaced)."""
        if not steps:
            return
        refs = self._text_refs()
        try:
            self._add_steps(run_id, steps, refs)
        except OSError as exc:  # a file beside the store (blob_files.py) could not be written
            raise StoreError(f"cannot write to the store {self.location!r}: {exc}") from exc
        finally:
            if refs is not None and refs.staged:
                refs.discard()  # what the write did not place (it was ignored, or it failed)

    def _add_steps(self, run_id: str, steps: Sequence[Step], refs: recording_chunks.TextRefs | None) -> None:
        rows = self._step_rows(run_id, steps, refs)
        with self._write_scope as conn:
            old = self._head(conn, run_id)
            if old is None:
                raise StoreError(f"run {run_id!r} was not begun in the store {self.location!r}; call begin_run first")
            if old.state == "finished":
                logger.debug("causaltrace store: ignoring %d late step(s) for finished run %r", len(rows), run_id)
                return
            if old.state == "incomplete":
                conn.execute("UPDATE runs SET state = 'running', status = 'running' WHERE run_id = ?", (run_id,))
            if refs is not None and refs.texts:
                recording_chunks.write_texts(conn, run_id, refs)
            conn.executemany(STEP_UPSERT, rows)

    def finish_run(self, run: Run, *, stored_steps: Collection[str] | None = None) -> None:
        """Write the full final Run (row, steps, recording) in one transaction; state ``finished``.

        ``stored_steps`` are ids of steps this process already wrote to this live run — all of them, an empty
        collection saying none (the collector's writer passes them): while the run is still this writer's live run,
        those rows are kept as they are and the others written, nothing deleted (no step of the run is stored but
        those), and the run's row is updated in place (it keeps its place among runs that began at the same
        instant). Otherwise (None, the default) every child row is replaced, and the run's row too (as a new row).
        """
        self._final_write(run, stored_steps, None)

    def finish_new_run(self, run: Run, begun: Mapping[str, Any]) -> bool:
        """A run begun and finished within one batch of the collector's writer (a short run's begin row waits for
        its end's transaction): its row written ONCE, as it ends — the same row, steps and recording as
        ``begin_run(run.run_id, **begun)`` then ``finish_run(run, stored_steps=())`` leave, with one INSERT instead
        of the begin row's INSERT and the final write's UPDATE (and no begin row to validate and serialize).

        False, with nothing written, when a run of that id is stored already, or ``begun`` holds anything but the
        plain fields of a run's start (``framework``, ``task``, ``name``, ``trace_id``, ``started_at``): the caller
        then writes both as before (``begin_run`` restarts a stored run, or refuses bad fields) — as it does for a
        subclass that overrides either of them (its own ``begin_run`` / ``finish_run`` are called as ever)."""
        started = begun.get("started_at")
        cls = type(self)
        if cls is not Store and (cls.begin_run is not Store.begin_run or cls.finish_run is not Store.finish_run):
            return False
        if not (begun.keys() <= _PLAIN_BEGIN and type(begun.get("framework", "")) is str
                and (started is None or isinstance(started, datetime)) and type(begun.get("task")) in _TEXT_OR_NONE
                and type(begun.get("name")) in _TEXT_OR_NONE and type(begun.get("trace_id")) in _TEXT_OR_NONE):
            return False
        # the row's sort key as the two writes leave it: the Run's start, else the begin row's (its start, or now)
        return self._final_write(run, (), started.timestamp() if started is not None else time.time())

    def _final_write(self, run: Run, stored_steps: Collection[str] | None, new_sort_key: float | None) -> bool:
        if not isinstance(run, Run):
            raise InvalidInputError(f"finish_run/save_run expects a Run, got {type(run).__name__}")
        split: recording_chunks.SplitRecording | None = None
        refs = self._text_refs()
        try:
            if run.recording is not None:  # the calls' JSON, when the run's export already made it (not made again)
                texts, literals = recording_otlp.take_for_store(run.recording)
                split = recording_chunks.split_calls(run.run_id, run.recording.calls, texts, literals,
                                                     refs.files if refs is not None else None)
            return self._finish(run, stored_steps, split, refs, new_sort_key)
        except OSError as exc:  # a file beside the store (blob_files.py) could not be written
            raise StoreError(f"cannot write to the store {self.location!r}: {exc}") from exc
        finally:  # the files staged for the write that it did not place (it failed, or wrote nothing)
            for staged in (split, refs):
                if staged is not None and staged.staged:
                    staged.discard()

    def _finish(self, run: Run, stored_steps: Collection[str] | None, split: recording_chunks.SplitRecording | None,
                refs: recording_chunks.TextRefs | None, new_sort_key: float | None = None) -> bool:
        whole, run = run, truncate_run_text(run, self.max_chars)
        literals: dict[int, tuple[str, bytes | bytearray]] = {}  # the long texts' cut JSON literals, made once
        data, run_chunks = run_row_json(whole, self.max_chars, literals, refs.refer if refs is not None else None)
        with self._write_scope as conn:
            current = WriterInfo.current()
            started, ended = run.started_at, run.ended_at  # (iso, now_iso and sort_ts inline: one row a run)
            fields = (run.framework, run.name, run.task, run.trace_id, None if started is None else started.isoformat(),
                      None if ended is None else ended.isoformat(), run.outcome.status)
            tail = (int(run.recording is not None), datetime.now(UTC).isoformat(), data, run_chunks)
            if new_sort_key is not None:  # a run begun in this very batch: its row written once, finished
                if conn.execute(_FINISH_NEW, (run.run_id, *fields, "finished", current.pid, current.start_time, current.host,
                                              *tail[:3], new_sort_key if started is None else started.timestamp(),
                                              run_chunks)).rowcount != 1:
                    return False  # a run of that id is stored: nothing written (the caller begins it first)
                live, had = True, False
            elif stored_steps is not None and conn.execute(
                _FINISH_OWN if started is None else _FINISH_OWN_AT,
                (*fields, current.pid, current.start_time, current.host, *tail, run.run_id, current.pid,
                 current.start_time, current.host, *(() if started is None else (started.timestamp(),)))
            ).rowcount == 1:
                # the collector's own live run (the usual final write): its row updated in place, not read first
                live, had = True, False
            else:
                old = self._head(conn, run.run_id)
                writer = (old.writer() if old is not None else None) or current
                sort_key = sort_ts(run.started_at) if run.started_at is not None or old is None else old.sort_ts
                live = stored_steps is not None and old is not None and old.state != "finished" and writer == current
                if live:  # its row updated in place: its indexes are not touched unless its sort key moved
                    assert old is not None
                    moved = sort_key != old.sort_ts
                    conn.execute(_FINISH_MOVED if moved else _FINISH,
                                 (*fields, writer.pid, writer.start_time, writer.host, *tail,
                                  *((sort_key,) if moved else ()), run.run_id))
                else:
                    own_live = old is not None and old.state == "running" and old.writer() == current
                    # the recording is replaced below: chunks the new one shares with the old are kept, not rewritten
                    self._delete_children(conn, run.run_id, derived=old is not None and not own_live, recording=False)
                    self._backend.put_run(conn, (run.run_id, *fields, "finished", writer.pid, writer.start_time,
                                                 writer.host, *tail[:3], sort_key))
                    if run_chunks is not None:
                        conn.execute("UPDATE runs SET chunks = ? WHERE run_id = ?", (run_chunks, run.run_id))
                # a run not finished yet has no recording rows (only this final write stores one, and begin_run over a
                # finished run drops it): nothing to replace
                had = old is None or old.state == "finished"
            if live and stored_steps:  # keep the rows written live; add the rest
                rows = self._step_rows(run.run_id, [s for s in run.steps if s.step_id not in stored_steps], refs,
                                       literals)
            else:
                rows = self._step_rows(run.run_id, run.steps, refs, literals)
            if refs is not None and refs.texts:
                recording_chunks.write_texts(conn, run.run_id, refs)
            conn.executemany(STEP_UPSERT, rows)
            if split is not None:
                recording_chunks.write_recording(conn, run.run_id, split, replaces=had,
                                                 utf8_blobs=self._backend.utf8_blobs, files=self._files)
            elif had:
                recording_chunks.delete_recording(conn, run.run_id, self._files)
        return True

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
        run = truncate_run_text(run, self.max_chars)  # compared as it would be stored
        try:
            return self._import(run, replace)
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800" in an imported JSON) SQLite cannot store
            raise InvalidInputError(f"run {run.run_id[:80]!r}: its text is not valid Unicode ({exc.reason}: "
                                    f"{exc.object[max(exc.start - 20, 0):exc.end + 20]!r})") from None

    def _import(self, run: Run, replace: bool) -> ImportOutcome:
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
                    f"run {run.run_id!r} is already in the store {self.location!r} with other content "
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

    def _delete_children(self, conn: Connection, run_id: str, *, derived: bool = False, recording: bool = True) -> None:
        """Delete a run's steps and (unless ``recording=False``: the caller replaces it) recording with
        the chunks no other run uses; with ``derived`` also its diagnoses and repair pairs (the run is being
        replaced by another one, so what was concluded about the old one no longer holds)."""
        for table in CHILD_TABLES + (DERIVED_TABLES if derived else ()):
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        recording_chunks.delete_texts(conn, run_id, self._files)
        if recording:
            recording_chunks.delete_recording(conn, run_id, self._files)

    def _text_refs(self) -> recording_chunks.TextRefs | None:
        """Where a write stages the long texts that go to files (None: they stay in the rows — PostgreSQL — or the
        write is refused — a read-only store, where nothing is staged)."""
        return None if self._files is None or self.readonly else recording_chunks.TextRefs(self._files)

    def _step_rows(self, run_id: str, steps: Sequence[Step], text_refs: recording_chunks.TextRefs | None = None,
                   literals: dict[int, tuple[str, bytes | bytearray]] | None = None) -> list[tuple[Any, ...]]:
        """The steps' rows (``store_sql.step_rows``); with ``text_refs`` (a SQLite store) a long cut text is named by
        its key instead of held, and the texts to write are left in ``text_refs``."""
        return step_rows(run_id, steps, self.max_chars, utf8=self._backend.utf8_blobs,
                         refer=text_refs.refer if text_refs is not None else None, literals=literals)

    # -- reading -------------------------------------------------------------------------------------------------

    @staticmethod
    def _head(conn: Connection, run_id: str) -> RunHead | None:
        """What a write needs of a stored run's row (its state, writer and sort key), or None: the narrow read
        every live write does (the whole row, its JSON included, cost a third more)."""
        row = conn.execute(f"SELECT {HEAD_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return RunHead(*row) if row is not None else None

    @staticmethod
    def _row(conn: Connection, run_id: str) -> RunRow | None:
        row = conn.execute(f"SELECT {RUN_READ_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return RunRow(*row) if row is not None else None

    def _resolve(self, conn: Connection, ref: str) -> RunRow:
        """The run with id ``ref``, else the one run whose id starts with ``ref`` (>= 4 characters)."""
        where = repr(self.location)
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

    def _same_run(self, conn: Connection, row: RunRow, run: Run) -> bool:
        """Whether the stored run of ``row`` equals ``run`` (a stored record too corrupt to read is not equal)."""
        try:
            return self._stored_run(conn, row) == run
        except StoreError:
            return False

    def _stored_run(self, conn: Connection, row: RunRow) -> Run:
        """The run of ``row`` as stored (no live-outcome override), read inside the caller's transaction."""
        # in index order (then step id), sorted here: the primary key finds the rows, no index on idx is kept up
        found = conn.execute("SELECT idx, step_id, data, chunks FROM steps WHERE run_id = ?", (row.run_id,)).fetchall()
        found.sort(key=_step_order)
        where = f"run {row.run_id!r} in the store {self.location!r}"
        # a long text the rows name by reference (schema v5) put back in place
        steps = recording_chunks.resolve_rows(conn, where, [(step_id, data, chunks) for _, step_id, data, chunks
                                                            in found], "stored step {!r}", self._files)
        if row.chunks is not None:
            row = row._replace(data=recording_chunks.resolve_rows(
                conn, where, [(0, row.data, row.chunks)], "the stored run record", self._files)[0][1])
        recs = None
        if row.has_recording:
            rows = conn.execute(
                "SELECT seq, data, chunks FROM recordings WHERE run_id = ? ORDER BY seq", (row.run_id,)
            ).fetchall()
            recs = recording_chunks.resolve_calls(conn, where, rows, self._files)
        return build_run(where, row, steps, recs)

    def _live_outcome(self, row: RunRow) -> Outcome | None:
        """The outcome a not-finished run reads as (None for a finished run: its stored outcome stands)."""
        if row.state == "finished":
            return None
        writer = row.writer()
        who = f"pid {writer.pid} on {writer.host}" if writer else "an unknown process"
        if row.state == "incomplete" or (writer is not None and not writer.is_alive()):
            return Outcome(status="incomplete", reason=f"the writer process ({who}) died before the run finished")
        return Outcome(status="unknown", reason=f"still running (writer {who})")

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
            return self._backend.insert_id(
                conn,
                "INSERT INTO diagnoses (run_id, method, verified_by, created_at, data) VALUES (?, ?, ?, ?, ?)",
                (d.run_id, d.method, d.verified_by, iso(d.created_at), d.model_dump_json()),
            )

    def diagnoses(self, run_id: str) -> list[Diagnosis]:
        """The diagnoses stored for ``run_id`` (exact id), newest last."""
        with self._read() as conn:
            rows = conn.execute("SELECT id, data FROM diagnoses WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        out = []
        for row_id, data in rows:
            try:
                out.append(Diagnosis.model_validate_json(data))
            except ValidationError as exc:
                raise CorruptRecordError(
                    f"diagnosis #{row_id} of run {run_id!r} in the store {self.location!r} is corrupt "
                    f"({explain(exc)})"
                ) from exc
        return out

    def has_run(self, run_id: str) -> bool:
        """Whether a run with exactly this id is stored."""
        with self._read() as conn:
            return self._row(conn, run_id) is not None

    def verdict(self, run_id: str) -> Diagnosis | None:
        """The run's verdict: the one diagnosis every surface shows (issue 32 item 7; :mod:`.verdict` orders them:
        a replay-verified correction, a tool / data fault, a finding-backed ranking, a replay-verified
        alternative, uncertain; newest within a level); None when it has none. All stay stored
        (:meth:`diagnoses`)."""
        from causaltrace.collector.verdict import verdict_of

        return verdict_of(self.diagnoses(run_id))

    def strongest_diagnosis(self, run_id: str) -> Diagnosis | None:
        """The former name of :meth:`verdict` (kept for callers)."""
        return self.verdict(run_id)

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
                (p.pair_id, p.run_id, p.step_id, p.verified_by, iso(p.created_at), p.model_dump_json()),
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
                raise CorruptRecordError(
                    f"repair pair {pair_id!r} in the store {self.location!r} is corrupt ({explain(exc)})"
                ) from exc
        return out
