"""The shared backend of the store: a PostgreSQL database (``Store("postgresql://user@host/db")``, ``--db URL``,
``CAUSALTRACE_DB=URL``), so workers on many machines write one store. The driver is psycopg 3 (the ``postgres``
extra), imported only when such a URL is opened.

* **Same schema, same history.** The tables and columns of the SQLite store, created by the same migrations
  (``_migrations.py``, the PostgreSQL dialect); the ``meta`` table's ``schema_version`` row is the version. A
  database of another application (tables of ours missing, others present), or a schema newer than this
  causaltrace, is a ``StoreError`` naming the URL (its password never shown).
* **Concurrency.** Every write transaction first takes one transaction-scoped advisory lock of the store, so
  writers serialise exactly as SQLite's ``BEGIN IMMEDIATE`` makes them (a read-then-write such as ``begin_run`` or
  ``import_run`` never races another writer); readers take no lock and read one ``REPEATABLE READ`` snapshot.
* **Read-only opening** sets the session read-only and never migrates. A database no causaltrace wrote yet (no
  tables at all) reads as an empty store, as SQLite reads a missing file (a ``NoStoreYetError`` the Store turns
  into an empty in-memory store: nothing is created in the database); a schema older than this causaltrace is a
  ``StoreError`` saying to open it once with a writing command.
* **Bad input** — an unreachable server, wrong credentials, a missing database, the driver not installed — is
  one ``StoreError`` line, and nothing is written anywhere (a URL is never taken for a file path).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from causaltrace.collector import _migrations
from causaltrace.collector.store_sql import RUN_COLUMNS, RUN_PLACEHOLDERS, NoStoreYetError, shown_target
from causaltrace.exceptions import StoreError

__all__ = ["URL_SCHEMES", "PostgresBackend"]

#: The URL schemes this backend opens (libpq's two spellings).
URL_SCHEMES = ("postgresql", "postgres")
#: The advisory lock every writer of a store takes (one store per database; the value spells "causaltr").
_WRITE_LOCK = 0x63617573616C7472
_CONNECT_TIMEOUT_S = 10
_SCHEMA_VERSION = _migrations.LATEST_VERSION
#: A plain ``INSERT INTO table (columns) VALUES (?, …)`` (no ON CONFLICT): many rows of it go by COPY.
_PLAIN_INSERT = re.compile(r"INSERT INTO (\w+) \(([\w, ]+)\) VALUES \((?:\?, )*\?\)")
#: From how many rows a plain insert is sent by COPY instead of one statement per row.
_COPY_MIN_ROWS = 50


def _one_line(exc: BaseException) -> str:
    """A driver error as one line (libpq's messages span several, with tabs)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text or type(exc).__name__


def _qmark(sql: str, _cache: dict[str, str] = {}) -> str:  # noqa: B006 - a deliberate module-lifetime cache
    """The shared ``?``-placeholder SQL in psycopg's ``%s`` style (no statement of the store holds ``?`` or ``%``
    otherwise)."""
    out = _cache.get(sql)
    if out is None:
        out = _cache[sql] = sql.replace("%", "%%").replace("?", "%s")
    return out


class PgConnection:
    """psycopg's connection as the store's :class:`~causaltrace.collector.store_sql.Connection` (autocommit; the
    store opens and ends its transactions with BEGIN / COMMIT / ROLLBACK, as on SQLite)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._tx_idle = raw.info.transaction_status.__class__.IDLE

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != self._tx_idle

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        if not parameters:
            return self.raw.execute(sql)
        return self.raw.execute(_qmark(sql), tuple(parameters))

    def executemany(self, sql: str, parameters: Any) -> None:
        """The statement once per row (psycopg's pipeline); a plain INSERT of many rows by one COPY, which costs
        psycopg a fraction of the per-row work (a long run's recorded calls)."""
        rows = list(parameters)
        if not rows:
            return
        plain = _PLAIN_INSERT.fullmatch(sql) if len(rows) >= _COPY_MIN_ROWS else None
        with self.raw.cursor() as cur:
            if plain is None:
                cur.executemany(_qmark(sql), rows)
                return
            with cur.copy(f"COPY {plain[1]} ({plain[2]}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    def close(self) -> None:
        self.raw.close()

    @property
    def usable(self) -> bool:
        """Not closed and not known broken (a server that went away unnoticed is found by the next write)."""
        return not (self.raw.closed or self.raw.broken)


class PostgresBackend:
    """A store in a PostgreSQL database (the Store holds the logic; this opens, checks and migrates)."""

    path = None
    utf8_blobs = False  # TEXT takes a str: a recording chunk's literal is decoded first (see Backend.utf8_blobs)
    blob_files = None  # the database keeps every text (it may be remote): no files beside it

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        self.url = url
        self.location = shown_target(url)
        self.readonly = readonly
        try:
            import psycopg
        except ImportError as exc:
            raise StoreError(
                f"the store {self.location!r} is a PostgreSQL URL, and the PostgreSQL driver is not installed: "
                "pip install 'causaltrace[postgres]'"
            ) from exc
        self._psycopg = psycopg
        self.errors: tuple[type[BaseException], ...] = (psycopg.Error,)

    def connect(self) -> PgConnection:
        """Connect, check whose database it is and its version, and (unless read-only) migrate it."""
        try:
            raw = self._psycopg.connect(self.url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
        except self._psycopg.Error as exc:
            raise StoreError(f"cannot connect to the store {self.location!r}: {_one_line(exc)}") from exc
        except Exception as exc:  # a malformed URL or option is libpq's ProgrammingError or a ValueError
            raise StoreError(f"cannot connect to the store {self.location!r}: {_one_line(exc)}") from exc
        conn = PgConnection(raw)
        try:
            self._setup(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _setup(self, conn: PgConnection) -> None:
        try:
            version = self._check(conn)
            if self.readonly:
                if version == 0:
                    raise NoStoreYetError(f"the store {self.location!r} holds no causaltrace store yet")
                if version < _SCHEMA_VERSION:
                    raise StoreError(
                        f"the store {self.location!r} has the older schema version {version}; open it once with a "
                        "writing command (e.g. `causaltrace import`) to migrate it"
                    )
                conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                return
            _migrations.migrate_postgres(conn, lambda: self.begin_write(conn))
            version = _migrations.meta_version(conn)
        except self._psycopg.Error as exc:
            raise StoreError(f"cannot open or migrate the store {self.location!r}: {_one_line(exc)}") from exc
        if version > _SCHEMA_VERSION:
            raise StoreError(self._too_new(version))

    def _check(self, conn: PgConnection) -> int:
        """The store's schema version, after refusing a newer one and another application's database."""
        tables = {name for (name,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        version = _migrations.meta_version(conn) if "meta" in tables else 0
        app = None
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
            app = row[0] if row is not None else None
        foreign = sorted(tables - _migrations.OUR_TABLES)
        if (app is not None and app != "causaltrace") or (version == 0 and foreign):
            shown = f"application {app!r}" if app not in (None, "causaltrace") else f"tables {', '.join(foreign)}"
            raise StoreError(
                f"{self.location!r} is a PostgreSQL database of another application ({shown}), not a causaltrace "
                "store; choose another database"
            )
        if version > _SCHEMA_VERSION:
            raise StoreError(self._too_new(version))
        return version

    def _too_new(self, version: int) -> str:
        return (
            f"the store {self.location!r} has schema version {version}, newer than this causaltrace knows "
            f"(up to {_SCHEMA_VERSION}); upgrade causaltrace or use another database"
        )

    # -- the statements PostgreSQL spells its own way ------------------------------------------------------------

    @staticmethod
    def same_file() -> bool:
        """A database is not a file: always the same store (see ``SQLiteBackend.same_file``)."""
        return True

    @staticmethod
    def begin_write(conn: Any) -> None:
        conn.execute("BEGIN")
        conn.execute(f"SELECT pg_advisory_xact_lock({_WRITE_LOCK})")

    @staticmethod
    def begin_read(conn: Any) -> None:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")

    @staticmethod
    def put_run(conn: Any, values: Sequence[Any]) -> None:
        # SQLite's INSERT OR REPLACE: the old row goes and the new one gets a new rowid ("newest first" ties).
        conn.execute("DELETE FROM runs WHERE run_id = ?", (values[0],))
        conn.execute(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({RUN_PLACEHOLDERS})", tuple(values))

    @staticmethod
    def insert_id(conn: Any, sql: str, params: Sequence[Any]) -> int:
        return int(conn.execute(sql + " RETURNING id", tuple(params)).fetchone()[0])

    @staticmethod
    def schema_version(conn: Any) -> int:
        return _migrations.meta_version(conn)
