"""The PostgreSQL store's own cases: a URL is never a path, bad servers / credentials / databases are one line and
exit 2 with nothing written, a schema newer than this causaltrace or another application's database is refused,
and ``causaltrace export`` / ``import`` move a run between SQLite and PostgreSQL unchanged."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from _postgres import PostgresServer
from causaltrace.cli import main
from causaltrace.collector.store import SCHEMA_VERSION, Store
from causaltrace.collector.store_sql import shown_target
from causaltrace.config import TraceConfig, default_db_target
from causaltrace.exceptions import RunNotFoundError, StoreError
from test_store import full_run, simple_run


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("causaltrace: error: ") and "\n" not in err, err
    return err


def test_a_url_is_never_taken_for_a_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, causaltrace_home: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    err = _one_line_exit_2(capsys, ["--db", "postgresql://nobody@127.0.0.1:1/nothing", "runs"])
    assert "cannot connect" in err and "127.0.0.1" in err
    err = _one_line_exit_2(capsys, ["--db", "mysql://u:secret@db/x", "runs"])
    assert "mysql" in err and "secret" not in err
    assert list(work.iterdir()) == list(causaltrace_home.iterdir()) == []  # no `postgresql:` folder, no SQLite file
    # CAUSALTRACE_DB as a URL keeps its // (Path would fold it to postgresql:/…)
    monkeypatch.setenv("CAUSALTRACE_DB", "postgresql://u@h:5/db")
    assert default_db_target() == "postgresql://u@h:5/db"
    assert TraceConfig.from_env().resolved_db_path() == "postgresql://u@h:5/db"
    monkeypatch.setenv("CAUSALTRACE_DB", str(tmp_path / "env.db"))
    assert TraceConfig.from_env().resolved_db_path() == tmp_path / "env.db"


def test_the_driver_missing_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    tmp_path = tmp_path / "cwd"
    tmp_path.mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"causaltrace\[postgres\]") as err:
        Store("postgresql://u:pw@127.0.0.1:1/db")
    assert "pw" not in str(err.value) and list(tmp_path.iterdir()) == []


def test_wrong_credentials_and_missing_database(postgres_server: PostgresServer,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_exit_2(capsys, ["--db", postgres_server.url(user="intruder").replace("intruder", "intruder:pw"),
                                    "runs"])
    assert "intruder" in err and ":pw@" not in err and "***" in err
    err = _one_line_exit_2(capsys, ["--db", postgres_server.url("no_such_db"), "runs"])
    assert "no_such_db" in err


def test_another_applications_database_and_a_newer_schema(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match="another application"):
        Store(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE users")
        assert conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
    with Store(pg_url) as store:
        assert store.schema_version() == SCHEMA_VERSION
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer") as err:
        Store(pg_url)
    assert "99" in str(err.value)


def _tables(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0])


def test_a_never_written_database_reads_as_an_empty_store(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``runs`` / ``show`` on a database no causaltrace wrote: an empty store (as a missing SQLite file), not an
    error, and nothing is created in it."""
    with Store(pg_url, readonly=True) as store:
        assert store.list_runs() == [] and store.schema_version() == SCHEMA_VERSION
        assert store.location == pg_url and store.path is None
        with pytest.raises(RunNotFoundError):
            store.get_run("abcd1234")
        with pytest.raises(StoreError, match="read-only"):
            store.save_run(simple_run("ro-pg-0002"))
    capsys.readouterr()
    assert main(["--db", pg_url, "runs"]) == 0
    assert "abcd" not in capsys.readouterr().out
    assert main(["--db", pg_url, "runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--db", pg_url, "show", "abcd1234"]) == 2  # the run is not there, as in an empty SQLite store
    err = capsys.readouterr().err
    assert "abcd1234" in err and "no causaltrace store" not in err
    assert _tables(pg_url) == 0
    # once written, the same commands read it
    with Store(pg_url) as store:
        store.save_run(simple_run("ro-pg-0001"))
    assert main(["--db", pg_url, "runs", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["ro-pg-0001"]


def test_read_only_never_writes(pg_url: str) -> None:
    with Store(pg_url) as store:
        store.save_run(simple_run("ro-pg-0001"))
    with Store(pg_url, readonly=True) as store:
        assert store.get_run("ro-pg") == simple_run("ro-pg-0001")
        with pytest.raises(StoreError, match="read-only"):
            store.save_run(simple_run("ro-pg-0002"))


def test_export_import_round_trip_between_the_backends(pg_url: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = full_run("cross-0001")
    sqlite_db = str(tmp_path / "a.db")
    with Store(sqlite_db) as store:
        store.save_run(run)
    out = tmp_path / "run.json"
    assert main(["--db", sqlite_db, "export", "cross-0001", "-o", str(out)]) == 0
    assert main(["--db", pg_url, "import", "--format", "otlp-json", str(out)]) == 0
    with Store(pg_url) as store:
        in_pg = store.get_run("cross-0001")
    back = tmp_path / "back.json"
    assert main(["--db", pg_url, "export", "cross-0001", "-o", str(back)]) == 0
    assert back.read_text() == out.read_text()  # PostgreSQL → OTLP gives the bytes SQLite → OTLP gave
    second = str(tmp_path / "b.db")
    assert main(["--db", second, "import", "--format", "otlp-json", str(back)]) == 0
    with Store(second) as store:
        assert store.get_run("cross-0001") == in_pg
    capsys.readouterr()
    assert os.path.exists(second)


@pytest.mark.parametrize(("target", "shown"), [
    ("/var/lib/ct/causaltrace.db", "/var/lib/ct/causaltrace.db"),
    ("postgresql://ct@db:5432/runs", "postgresql://ct@db:5432/runs"),
    ("postgresql://ct:pw@db:5432/runs", "postgresql://ct:***@db:5432/runs"),
    ("postgresql://ct:p@ss/w@db/runs?sslmode=require", "postgresql://ct:***@db/runs?sslmode=require"),
    ("postgres://db/runs?sslmode=require&Password=pw", "postgres://db/runs?sslmode=require&Password=***"),
    ("postgresql://ct:pw@db:notaport/runs", "postgresql://ct:***@db:notaport/runs"),
])
def test_a_store_target_is_shown_without_its_password(target: str, shown: str) -> None:
    assert shown_target(target) == shown
