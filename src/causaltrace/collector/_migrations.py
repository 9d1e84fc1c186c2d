"""The store's schema history: ONE ordered list of migrations for both backends (SQLite and PostgreSQL), applied
in order inside one write transaction each.

One tool for both dialects, not two histories: each migration is one function that takes the connection and the
:class:`Dialect`, and the few words the two dialects spell differently (an auto-numbered id, a double, an
insertion-order column, a text key that sorts by code point) come from the dialect. So a version number means the
same tables and columns on both backends, and a new migration is written once, in one place, for both.

Version authority. SQLite: ``PRAGMA user_version`` (the ``meta`` table mirrors it). PostgreSQL has no such
header: the ``meta`` table's ``schema_version`` row is the authority there (its ``application`` row says whose
database it is). A migration is a callable ``(conn, dialect) -> None`` run inside one write transaction together
with the version bump (``BEGIN IMMEDIATE`` on SQLite; on PostgreSQL a transaction holding the store's advisory
lock, its DDL being transactional), so two processes opening a fresh store at once cannot both apply it, and a
crash mid-migration leaves the old version intact.

PostgreSQL columns that differ: ``runs`` and ``repair_pairs`` get an explicit ``rowid`` identity column (SQLite's
implicit rowid, which the "newest first" and "order first saved" queries use); keys and the columns queries sort
by are ``COLLATE "C"`` so that they sort by code point as SQLite does; ``REAL`` is ``DOUBLE PRECISION``.

History:

* **v1** — the run store: ``meta``, ``runs`` (one row per run, its writer's pid / start time / host and its
  state), ``steps`` (full Step JSON plus the queryable columns), ``dependencies`` (consumer, producer, kind) and
  ``recordings`` (one row per RecordedCall).
* **v2** — ``runs.sort_ts`` (a numeric "newest first" key, back-filled from ``started_at``), the ``diagnoses`` and
  ``repair_pairs`` tables.
* **v3** — recorded calls keep repeated content once (issue 21 item 14, ``recording_chunks.py``): the
  ``recording_chunks`` table (a large string of a call, keyed by its digest), ``recording_chunk_refs`` (which runs
  use which chunk) and ``recordings.chunks`` (the references of a row; NULL: the row is the whole call). Existing
  rows are not rewritten: they are whole calls, read as before.
* **v4** — cheaper writes (issue 35): the ``dependencies`` table goes (nothing read it: a step's ``depends_on`` lives
  in its JSON, the source of truth of every round-trip, and its ~20 rows a short run cost a quarter of the store's
  SQL), and so do the indexes no query needed — ``runs_status`` and ``runs_state`` (every command that filters on
  them lists all runs anyway: ``causaltrace runs``, the fleet's ``mark_incomplete`` + ``list_runs``) and
  ``steps_run_idx`` (a run's steps are read through the primary key and put in index order in Python). Every row
  written is one b-tree insert fewer per index dropped, and a commit writes fewer pages. Nothing is rewritten. A
  causaltrace older than v4 still writing the same store (a process left running across the upgrade) fails its
  writes ("no such table: dependencies") and refuses the store when it reopens it: restart it after upgrading.
* **v5** — a long text stored once across a run's rows (issue 35 "Bad input"): ``steps.chunks`` and
  ``runs.chunks`` (JSON ``[[digest, *path], …]``: the values of the row's ``data`` that are references to a chunk
  of ``recording_chunks``; NULL: the row is whole, as every row before v5) and ``text_chunk_refs (run_id,
  digest)`` (the chunks a run's step and run rows name, beside ``recording_chunk_refs`` for its recording: a chunk
  goes when neither names it). A SQLite store refers so to a cut text of at least 1 MiB, which it keeps in a file
  (``blob_files.py``): a 50 MiB tool result's 2 M-character cut was written into six step rows and the run row.
  PostgreSQL keeps writing whole rows. Nothing is rewritten; a causaltrace older than v5 refuses the store.

Never edit a released migration: append a new one. Tests build an older file with ``migrate(conn, target=1)``.
(``executescript`` is avoided on purpose: it commits the open transaction, which would break the atomic bump.)
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "OUR_TABLES",
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "meta_version",
    "migrate",
    "migrate_postgres",
    "user_version",
]


@dataclass(frozen=True)
class Dialect:
    """The words a migration spells differently per backend (``{key}`` in the DDL below)."""

    name: str
    #: A text key / sort column (code-point order on both backends).
    key: str
    #: A double-precision number.
    real: str
    #: An auto-numbered integer primary key.
    autoid: str
    #: The explicit insertion-order column of a table ("" where the engine has an implicit rowid), with its comma.
    rowid: str


SQLITE = Dialect(name="sqlite", key="TEXT", real="REAL", autoid="INTEGER PRIMARY KEY AUTOINCREMENT", rowid="")
POSTGRES = Dialect(
    name="postgresql",
    key='TEXT COLLATE "C"',
    real="DOUBLE PRECISION",
    autoid="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    rowid="rowid BIGINT GENERATED ALWAYS AS IDENTITY,",
)

Migration = Callable[[Any, Dialect], None]


def _v1(conn: Any, d: Dialect = SQLITE) -> None:
    for sql in (
        """CREATE TABLE IF NOT EXISTS meta (
               key   TEXT PRIMARY KEY,
               value TEXT NOT NULL
           )""",
        """CREATE TABLE runs (
               {rowid}
               run_id       {key} PRIMARY KEY,
               framework    TEXT NOT NULL,
               name         TEXT,
               task         TEXT,
               trace_id     TEXT,
               started_at   TEXT,
               ended_at     TEXT,
               status       TEXT NOT NULL,   -- the outcome status, or 'running' while a writer is on it
               state        TEXT NOT NULL,   -- running | finished | incomplete
               writer_pid   INTEGER,
               writer_start TEXT,
               writer_host  TEXT,
               has_recording INTEGER NOT NULL DEFAULT 0,
               written_at   TEXT NOT NULL,
               data         TEXT NOT NULL    -- the Run's JSON without steps and recording
           )""",
        "CREATE INDEX runs_status ON runs (status)",
        "CREATE INDEX runs_state ON runs (state)",
        """CREATE TABLE steps (
               run_id    {key} NOT NULL,
               step_id   {key} NOT NULL,
               idx       INTEGER NOT NULL,
               kind      TEXT NOT NULL,
               agent     TEXT NOT NULL,
               status    TEXT NOT NULL,
               parent    TEXT,
               truncated INTEGER NOT NULL DEFAULT 0,
               data      TEXT NOT NULL,      -- the full Step JSON
               PRIMARY KEY (run_id, step_id)
           )""",
        "CREATE INDEX steps_run_idx ON steps (run_id, idx)",
        """CREATE TABLE dependencies (
               run_id   {key} NOT NULL,
               consumer {key} NOT NULL,
               producer {key} NOT NULL,
               kind     TEXT NOT NULL,
               pos      INTEGER NOT NULL
           )""",
        "CREATE INDEX deps_consumer ON dependencies (run_id, consumer)",
        "CREATE INDEX deps_producer ON dependencies (run_id, producer)",
        """CREATE TABLE recordings (
               run_id       {key} NOT NULL,
               seq          INTEGER NOT NULL,
               step_id      TEXT,
               agent_key    TEXT NOT NULL,
               kind         TEXT NOT NULL,
               ordinal      INTEGER NOT NULL,
               request_hash TEXT NOT NULL,
               data         TEXT NOT NULL,   -- the full RecordedCall JSON
               PRIMARY KEY (run_id, seq)
           )""",
    ):
        conn.execute(sql.format(key=d.key, rowid=d.rowid))


def _sort_ts(started_at: str | None, written_at: str | None) -> float:
    for text in (started_at, written_at):
        if text:
            try:
                return datetime.fromisoformat(text).timestamp()
            except ValueError:
                continue
    return time.time()


def _v2(conn: Any, d: Dialect = SQLITE) -> None:
    conn.execute(f"ALTER TABLE runs ADD COLUMN sort_ts {d.real} NOT NULL DEFAULT 0")
    rows = conn.execute("SELECT run_id, started_at, written_at FROM runs").fetchall()
    if rows:
        conn.executemany(
            "UPDATE runs SET sort_ts = ? WHERE run_id = ?",
            [(_sort_ts(started, written), rid) for rid, started, written in rows],
        )
    conn.execute("CREATE INDEX runs_sort ON runs (sort_ts)")
    conn.execute(
        f"""CREATE TABLE diagnoses (
               id          {d.autoid},
               run_id      {d.key} NOT NULL,
               method      TEXT NOT NULL,
               verified_by TEXT NOT NULL,
               created_at  TEXT,
               data        TEXT NOT NULL     -- the full Diagnosis JSON
           )"""
    )
    conn.execute("CREATE INDEX diagnoses_run ON diagnoses (run_id)")
    conn.execute(
        f"""CREATE TABLE repair_pairs (
               {d.rowid}
               pair_id     {d.key} PRIMARY KEY,
               run_id      {d.key} NOT NULL,
               step_id     TEXT NOT NULL,
               verified_by TEXT NOT NULL,
               created_at  TEXT,
               data        TEXT NOT NULL     -- the full RepairPair JSON
           )"""
    )
    conn.execute("CREATE INDEX repair_pairs_run ON repair_pairs (run_id)")


def _v3(conn: Any, d: Dialect = SQLITE) -> None:
    conn.execute("ALTER TABLE recordings ADD COLUMN chunks TEXT")  # JSON [[digest, *path], …] or NULL
    conn.execute(
        f"""CREATE TABLE recording_chunks (
               digest {d.key} PRIMARY KEY,   -- SHA-256 (hex) of data's UTF-8
               chars  INTEGER NOT NULL,     -- the length of data
               data   TEXT NOT NULL         -- the string's JSON literal
           )"""
    )
    conn.execute(
        f"""CREATE TABLE recording_chunk_refs (
               run_id {d.key} NOT NULL,
               digest {d.key} NOT NULL,
               PRIMARY KEY (run_id, digest)
           )"""
    )
    conn.execute("CREATE INDEX recording_chunk_refs_digest ON recording_chunk_refs (digest)")


def _v4(conn: Any, d: Dialect = SQLITE) -> None:
    for sql in (
        "DROP TABLE IF EXISTS dependencies",  # with its indexes deps_consumer / deps_producer
        "DROP INDEX IF EXISTS runs_status",
        "DROP INDEX IF EXISTS runs_state",
        "DROP INDEX IF EXISTS steps_run_idx",
    ):
        conn.execute(sql)


def _v5(conn: Any, d: Dialect = SQLITE) -> None:
    conn.execute("ALTER TABLE steps ADD COLUMN chunks TEXT")  # JSON [[digest, *path], …] or NULL
    conn.execute("ALTER TABLE runs ADD COLUMN chunks TEXT")
    conn.execute(
        f"""CREATE TABLE text_chunk_refs (
               run_id {d.key} NOT NULL,
               digest {d.key} NOT NULL,
               PRIMARY KEY (run_id, digest)
           )"""
    )
    conn.execute("CREATE INDEX text_chunk_refs_digest ON text_chunk_refs (digest)")


#: The ordered schema history; ``MIGRATIONS[i]`` takes a file from version ``i`` to ``i + 1``.
MIGRATIONS: tuple[Migration, ...] = (_v1, _v2, _v3, _v4, _v5)
LATEST_VERSION = len(MIGRATIONS)
#: Every table some migration creates (a version-0 file holding other tables is not ours; ``dependencies``, dropped by
#: v4, stays listed: a store of an older version holds it).
OUR_TABLES = frozenset({
    "meta", "runs", "steps", "dependencies", "recordings", "diagnoses", "repair_pairs", "recording_chunks",
    "recording_chunk_refs", "text_chunk_refs",
})


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file header."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int | None = None) -> list[int]:
    """Bring ``conn``'s file up to ``target`` (default: the latest version); return the versions applied.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Each migration runs in its own ``BEGIN
    IMMEDIATE`` transaction and re-reads the version inside it, so a concurrent opener that got there first wins
    and this one applies nothing. A file newer than ``target`` is left alone (the caller decides whether that is
    an error).
    """
    target = LATEST_VERSION if target is None else target
    applied: list[int] = []
    if user_version(conn) >= target:  # the common case takes no write lock (a read-only file opens fine)
        return applied
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = user_version(conn)
            if current >= target:
                conn.execute("COMMIT")
                return applied
            MIGRATIONS[current](conn)
            new = current + 1
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('application', 'causaltrace')")
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(new),))
            conn.execute(f"PRAGMA user_version = {new:d}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(new)


def meta_version(conn: Any) -> int:
    """The schema version a PostgreSQL store records in its ``meta`` table (0: no ``meta`` table yet)."""
    # pg_tables is read with the statement's snapshot (to_regclass's catalog cache may not yet see a table another
    # process just committed, even after this one took the store's lock)
    found = conn.execute(
        "SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'meta'"
    ).fetchone()[0]
    if not found:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row is not None else 0


def migrate_postgres(conn: Any, begin: Callable[[], None], target: int | None = None) -> list[int]:
    """Bring a PostgreSQL store up to ``target`` (default: the latest version); return the versions applied.

    ``begin`` opens the store's write transaction (``BEGIN`` plus the store's advisory lock, which every writer
    takes), so the version read inside it is final: a concurrent opener that migrated first makes this one apply
    nothing. The same migrations as SQLite's, with the PostgreSQL dialect.
    """
    target = LATEST_VERSION if target is None else target
    applied: list[int] = []
    if meta_version(conn) >= target:
        return applied
    while True:
        begin()
        try:
            current = meta_version(conn)
            if current >= target:
                conn.execute("COMMIT")
                return applied
            MIGRATIONS[current](conn, POSTGRES)
            new = current + 1
            for key, value in (("application", "causaltrace"), ("schema_version", str(new))):
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(new)
