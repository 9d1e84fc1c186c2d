"""A real PostgreSQL server for the store tests: a cluster created in a temporary directory, listening on a free
loopback port, started once per test session and stopped by its pid at the end.

``initdb`` / ``pg_ctl`` come from the PATH (FACTS.md "A real Docker engine, and PostgreSQL"). PostgreSQL refuses
to run as root, so under root the cluster belongs to ``nobody`` and its programs run through ``runuser``. Each test
that asks for ``pg_url`` gets a database of its own (``CREATE DATABASE``), so tests never see each other's runs.
Without PostgreSQL or psycopg the tests that need it skip — and fail under ``CAUSALTRACE_STRICT=1``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

__all__ = ["PostgresServer", "pg_url", "postgres_server", "sql_rows", "store_target", "temporary_cluster"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One running cluster: its port, data directory and postmaster pid; :meth:`new_database` hands out URLs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = _free_port()
        self.pid: int | None = None
        self._options = ""
        self._names = itertools.count()
        self._as_user = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []

    def start(self) -> None:
        if self._as_user:
            os.chown(self.root, _uid("nobody"), -1)
        self._run(["initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        self._options = options = f"-k {self.root} -p {self.port} -h 127.0.0.1 -c fsync=off -c max_connections=60"
        self._run(["pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start"])
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Stop the postmaster by its pid (fast shutdown), and wait for it to exit."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGINT)
        except ProcessLookupError:
            self.pid = None
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        self.pid = None

    def start_again(self) -> None:
        """Start the cluster :meth:`stop` stopped (same data, port and options) and wait until it accepts connections."""
        self._run(["pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(self.root / "log"), "-w", "start"])
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def restart(self, down_s: float = 0.0) -> float:
        """Restart the server (fast shutdown: every connection is cut) and wait until it accepts connections again;
        returns the seconds it was away. ``down_s``: stay down that long between the stop and the start (a slower
        restart or a failover); 0 is ``pg_ctl restart``. The postmaster gets a new pid."""
        t = time.perf_counter()
        if down_s > 0:
            self._run(["pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"])
            time.sleep(down_s)
            self._run(["pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(self.root / "log"), "-w", "start"])
        else:
            self._run(["pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast", "-w", "restart"])
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        return time.perf_counter() - t

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database's URL."""
        import psycopg

        name = f"ct_test_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run([*self._as_user, *cmd], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def _uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def _available() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    for program in ("initdb", "pg_ctl"):
        if shutil.which(program) is None:
            return f"PostgreSQL's {program} is not on the PATH"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'causaltrace[postgres]')"
    return None


@contextmanager
def temporary_cluster(prefix: str = "ct-pg-") -> Iterator[PostgresServer]:
    """A running PostgreSQL cluster in a temporary directory, stopped by pid and removed at the end; skips (fails
    under CAUSALTRACE_STRICT=1) without PostgreSQL or psycopg."""
    from conftest import require  # lazily: conftest imports this module's fixtures (and the bench imports it alone)

    missing = _available()
    require(missing is None, missing or "")
    root = Path(tempfile.mkdtemp(prefix=prefix))  # under /tmp (1777): nobody can reach it, pytest's tmp is 0700
    server = PostgresServer(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL cluster for the whole session, in a temporary directory, stopped by pid at the end."""
    with temporary_cluster() as server:
        yield server


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh database on the session's PostgreSQL server."""
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's store lives: a SQLite file, or a fresh database on the session's PostgreSQL server — a test
    that takes it runs on both backends."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    return str(request.getfixturevalue("pg_url"))


def sql_rows(store: Any, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` on a Store's database over a connection of its own (SQLite or PostgreSQL) and return the rows.
    ``{rowid}`` is the engine's physical row identity (SQLite's rowid; PostgreSQL's ctid with the inserting
    transaction, xmin, so a row rewritten in place never looks untouched)."""
    if store.path is not None:
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            with conn:
                return conn.execute(sql.format(rowid="rowid")).fetchall()
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(store.location, autocommit=True) as pg:
        cur = pg.execute(sql.format(rowid="ctid::text || '/' || xmin::text"))
        return cur.fetchall() if cur.description is not None else []
