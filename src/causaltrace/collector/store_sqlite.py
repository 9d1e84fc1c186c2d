"""The embedded backend of the store: one SQLite file (the default, ``$CAUSALTRACE_HOME/causaltrace.db``).

* **Concurrency.** WAL journal, a 30 s busy timeout, and every write in ``BEGIN IMMEDIATE`` (so two processes
  never dead-end on a read→write lock upgrade). One connection per Store with ``check_same_thread=False``; the
  Store's re-entrant lock lets a background collector thread write through it.
* **Durability.** ``synchronous = NORMAL`` with the WAL journal: a commit is atomic and survives the writing
  process being killed at any point (the WAL is in the operating system's cache, SQLite's documented guarantee for
  every ``synchronous`` level) — the live collector's crash record, a run's ``incomplete`` row with its steps,
  rests on that; only a power loss or an operating-system crash may take back the transactions committed since the
  last checkpoint (the WAL is synced before each checkpoint, the database after it). ``FULL`` would add an fsync to
  every commit — two a run — for that case alone.
* **Page size: SQLite's default (4 KB), measured against 8–64 KB** (issue 35 "Bad input", a 50 MiB tool result's
  52 MB chunk): 64 KB pages looked twice as fast (insert + commit 145 -> 73 ms CPU), but only because 52 MB is
  fewer than the WAL's auto-checkpoint threshold of 1000 pages, so the commit no longer ran the checkpoint — with
  the checkpoint counted, every size costs the same (145–178 ms); and each small run pays for the bigger pages
  (a 15-step live run: 0.59 -> 0.85 ms CPU, 87 -> 690 KiB written to the WAL). So new stores keep 4 KB pages.
* **Schema versions.** ``PRAGMA user_version`` plus the ordered migrations of ``_migrations.py``; a file written
  by a newer causaltrace, a SQLite file of another application, or a file that is not SQLite is a ``StoreError``
  naming the path.
* **Long texts beside the file** (issue 35 "Bad input"): a recording chunk of at least 1 MiB, and a step's or the
  run's cut text of at least 1 MiB (once for all the rows that show it), is kept in a content-addressed file in ``<store file>.blobs/`` instead of going through the WAL (``blob_files.py``). A copy
  of a store is its file AND that directory (``causaltrace export`` reads through the store: it needs nothing
  more); a copy without the directory reads, but a run whose long text is missing is a CorruptRecordError naming
  the file. Opening a store for writing sweeps the files no row names (orphans of a writer that died), when no
  other writer holds the store at that moment (never waited for).
* **Read-only opening** (``readonly=True``, used by the CLI's inspection commands): the file is opened ``mode=ro``
  (``immutable=1`` where SQLite could not read a WAL store otherwise: a directory this process may not write),
  never migrated and never written; an older schema is read through a migrated in-memory copy, a missing file
  reads as an empty store.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from causaltrace.collector import _migrations, recording_chunks
from causaltrace.collector.blob_files import BlobFiles
from causaltrace.collector.store_sql import RUN_COLUMNS, RUN_PLACEHOLDERS
from causaltrace.exceptions import StoreError

__all__ = ["SQLiteBackend"]

logger = logging.getLogger("causaltrace.collector.store")

_BUSY_TIMEOUT_S = 30.0
_SCHEMA_VERSION = _migrations.LATEST_VERSION


class SQLiteBackend:
    """A store file: opening, migrating, checking and read-only access (the Store holds the logic)."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    utf8_blobs = True  # a recording chunk's literal is written as its bytes (see Backend.utf8_blobs)

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.location = str(path)
        self.readonly = readonly
        self._empty = False
        #: The file the last connection opened (device, inode): see :meth:`same_file`.
        self._file_id: tuple[int, int] | None = None
        #: Where the long texts are kept (``blob_files.py``): beside the file.
        self.blob_files: BlobFiles | None = BlobFiles.beside(path)

    @classmethod
    def empty(cls, location: str) -> SQLiteBackend:
        """A read-only, empty in-memory store standing in for ``location`` (a database no causaltrace wrote yet:
        reading it shows no runs; nothing is created anywhere)."""
        backend = cls(Path(), readonly=True)
        backend.location = location
        backend._empty = True
        backend.blob_files = None
        return backend

    def connect(self) -> sqlite3.Connection:
        """The open connection (created and migrated unless read-only)."""
        if self._empty:
            return self._in_memory(None)
        self._refuse_special()
        if self.readonly:
            return self._open_readonly()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the directory of the store {self.location!r}: {exc}") from exc
        if self.path.is_dir():
            raise StoreError(f"the store path {self.location!r} is a directory; give a file path")
        try:
            conn = sqlite3.connect(
                str(self.path), timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store {self.location!r}: {exc}") from exc
        try:
            self._setup(conn)
        except BaseException:
            conn.close()
            raise
        self._file_id = self._identity()
        self._sweep(conn)
        return conn

    def _sweep(self, conn: sqlite3.Connection) -> None:
        """Delete the files beside the store no row names (``recording_chunks.sweep_files``), if there is a folder of
        them and no other writer holds the store right now (not waited for: the next opening sweeps)."""
        files = self.blob_files
        if files is None or not files.root.is_dir():
            return
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                gone = recording_chunks.sweep_files(conn, files)
            finally:
                conn.execute("COMMIT")
            if gone:
                logger.debug("causaltrace store: deleted %d file(s) beside %s no row names", gone, self.path)
        except (sqlite3.Error, OSError) as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            logger.debug("causaltrace store: files beside %s not swept now: %s", self.path, exc)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")

    def same_file(self) -> bool:
        """Whether the file at the store's path is still the one the connection opened (a store deleted or replaced
        since — a test's or a user's ``rm`` — is not: writing on through the old connection would write nowhere)."""
        return self._file_id is not None and self._identity() == self._file_id

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _refuse_special(self) -> None:
        """A FIFO, a device or a socket as the store is refused: SQLite would wait for a FIFO's writer forever."""
        from causaltrace.collector.safe_input import refuse_special_file
        from causaltrace.exceptions import InvalidInputError

        try:
            refuse_special_file(self.path, "the store path")
        except InvalidInputError as exc:
            raise StoreError(exc.message.replace("causaltrace reads files only", "give a file path")) from None

    # -- the statements SQLite spells its own way --------------------------------------------------------------

    @staticmethod
    def begin_write(conn: Any) -> None:
        conn.execute("BEGIN IMMEDIATE")

    @staticmethod
    def begin_read(conn: Any) -> None:
        conn.execute("BEGIN")

    @staticmethod
    def put_run(conn: Any, values: Sequence[Any]) -> None:
        conn.execute(f"INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES ({RUN_PLACEHOLDERS})", tuple(values))

    @staticmethod
    def insert_id(conn: Any, sql: str, params: Sequence[Any]) -> int:
        cur = conn.execute(sql, tuple(params))
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    @staticmethod
    def schema_version(conn: Any) -> int:
        return _migrations.user_version(conn)

    # -- opening -------------------------------------------------------------------------------------------------

    def _setup(self, conn: sqlite3.Connection) -> None:
        with self._opening():
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            self._check_file(conn)
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            _migrations.migrate(conn)
            version = _migrations.user_version(conn)
        if version > _SCHEMA_VERSION:  # a newer causaltrace migrated it while we were opening
            raise StoreError(self._too_new(version))

    @contextmanager
    def _opening(self) -> Iterator[None]:
        """Turn sqlite's errors while opening into a StoreError naming the file (and what it is not)."""
        where = repr(self.location)
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
        if version > _SCHEMA_VERSION:
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
                    f"{self.location!r} is a SQLite database of another application (tables {', '.join(foreign)}), "
                    "not a causaltrace store; choose another path"
                )
        return version

    def _open_readonly(self) -> sqlite3.Connection:
        """A connection that never writes the file.

        ``mode=ro`` first; where that cannot work (a WAL file in a directory this process may not write, so SQLite
        cannot create the ``-shm`` index) ``immutable=1``. Nothing is migrated: a store of an older schema version
        is copied into memory and the copy migrated; a missing file reads as an empty store (nothing is created).
        """
        if self.path.is_dir():
            raise StoreError(f"the store path {self.location!r} is a directory; give a file path")
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
            if version < _SCHEMA_VERSION:
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
            f"the store {self.location!r} has schema version {version}, newer than this causaltrace knows "
            f"(up to {_SCHEMA_VERSION}); upgrade causaltrace or use another CAUSALTRACE_HOME"
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
