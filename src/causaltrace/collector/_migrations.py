"""The store's schema history: an ordered list of migrations, applied in order inside one write transaction each.

``PRAGMA user_version`` is the authority on which migrations a file has had; the ``meta`` table mirrors it
(``schema_version``) next to ``application = causaltrace`` for humans and other tools. A migration is a callable
``(conn) -> None`` run inside ``BEGIN IMMEDIATE`` together with the ``user_version`` bump, so two processes
opening a fresh file at once cannot both apply it, and a crash mid-migration leaves the old version intact.

History:

* **v1** — the run store: ``meta``, ``runs`` (one row per run, its writer's pid / start time / host and its
  state), ``steps`` (full Step JSON plus the queryable columns), ``dependencies`` (consumer, producer, kind) and
  ``recordings`` (one row per RecordedCall).
* **v2** — ``runs.sort_ts`` (a numeric "newest first" key, back-filled from ``started_at``), the ``diagnoses`` and
  ``repair_pairs`` tables.

Never edit a released migration: append a new one. Tests build an older file with ``migrate(conn, target=1)``.
(``executescript`` is avoided on purpose: it commits the open transaction, which would break the atomic bump.)
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime

__all__ = ["LATEST_VERSION", "MIGRATIONS", "OUR_TABLES", "migrate", "user_version"]

Migration = Callable[[sqlite3.Connection], None]


def _v1(conn: sqlite3.Connection) -> None:
    for sql in (
        """CREATE TABLE IF NOT EXISTS meta (
               key   TEXT PRIMARY KEY,
               value TEXT NOT NULL
           )""",
        """CREATE TABLE runs (
               run_id       TEXT PRIMARY KEY,
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
               run_id    TEXT NOT NULL,
               step_id   TEXT NOT NULL,
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
               run_id   TEXT NOT NULL,
               consumer TEXT NOT NULL,
               producer TEXT NOT NULL,
               kind     TEXT NOT NULL,
               pos      INTEGER NOT NULL
           )""",
        "CREATE INDEX deps_consumer ON dependencies (run_id, consumer)",
        "CREATE INDEX deps_producer ON dependencies (run_id, producer)",
        """CREATE TABLE recordings (
               run_id       TEXT NOT NULL,
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
        conn.execute(sql)


def _sort_ts(started_at: str | None, written_at: str | None) -> float:
    for text in (started_at, written_at):
        if text:
            try:
                return datetime.fromisoformat(text).timestamp()
            except ValueError:
                continue
    return time.time()


def _v2(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE runs ADD COLUMN sort_ts REAL NOT NULL DEFAULT 0")
    rows = conn.execute("SELECT run_id, started_at, written_at FROM runs").fetchall()
    conn.executemany(
        "UPDATE runs SET sort_ts = ? WHERE run_id = ?",
        [(_sort_ts(started, written), rid) for rid, started, written in rows],
    )
    conn.execute("CREATE INDEX runs_sort ON runs (sort_ts)")
    conn.execute(
        """CREATE TABLE diagnoses (
               id          INTEGER PRIMARY KEY AUTOINCREMENT,
               run_id      TEXT NOT NULL,
               method      TEXT NOT NULL,
               verified_by TEXT NOT NULL,
               created_at  TEXT,
               data        TEXT NOT NULL     -- the full Diagnosis JSON
           )"""
    )
    conn.execute("CREATE INDEX diagnoses_run ON diagnoses (run_id)")
    conn.execute(
        """CREATE TABLE repair_pairs (
               pair_id     TEXT PRIMARY KEY,
               run_id      TEXT NOT NULL,
               step_id     TEXT NOT NULL,
               verified_by TEXT NOT NULL,
               created_at  TEXT,
               data        TEXT NOT NULL     -- the full RepairPair JSON
           )"""
    )
    conn.execute("CREATE INDEX repair_pairs_run ON repair_pairs (run_id)")


#: The ordered schema history; ``MIGRATIONS[i]`` takes a file from version ``i`` to ``i + 1``.
MIGRATIONS: tuple[Migration, ...] = (_v1, _v2)
LATEST_VERSION = len(MIGRATIONS)
#: Every table some migration creates (a version-0 file holding other tables is not ours).
OUR_TABLES = frozenset({"meta", "runs", "steps", "dependencies", "recordings", "diagnoses", "repair_pairs"})


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
