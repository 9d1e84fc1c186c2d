"""A SQLite store keeps its long texts in content-addressed files beside it (issue 35 "Bad input",
``collector/blob_files.py``): a recording chunk of at least 1 MiB is written to ``<store>.blobs/ab/abcdef…`` before
its row commits, read back transparently (Store, CLI export), deleted when no row names it any more, swept when
orphaned by a writer that died, and a missing or damaged file is one clear error naming it — never other content.
PostgreSQL keeps every text in the database."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from _postgres import sql_rows
from causaltrace.cli import main
from causaltrace.collector.blob_files import BLOB_MIN_BYTES, MARK_PREFIX, TEMP_MAX_AGE_S
from causaltrace.collector.store import Store
from causaltrace.exceptions import StoreError
from causaltrace.schema import Run
from test_recording_chunks import payload_run, random_text

#: A payload whose JSON literal is above the files' threshold (hex: one byte a character, plus the quotes).
BIG = BLOB_MIN_BYTES + 10_000


def literal_digest(text: str) -> str:
    return hashlib.sha256(f'"{text}"'.encode()).hexdigest()


def blob_path(db: str | Path, text: str) -> Path:
    digest = literal_digest(text)
    return Path(f"{db}.blobs") / digest[:2] / digest


def files_beside(db: str | Path) -> list[Path]:
    root = Path(f"{db}.blobs")
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_a_long_chunk_goes_to_a_file_beside_sqlite_and_stays_in_postgres(store_target: str) -> None:
    payload, small = random_text(BIG), random_text(200_000)
    run = payload_run("file-0001", payload, later_calls=3)
    with Store(store_target, max_chars=10_000) as store:  # (the steps' copies of the payload cut short)
        store.finish_run(run)
        store.finish_run(payload_run("file-0002", small, later_calls=1))
        assert store.get_run("file-0001").recording == run.recording  # read back whole, equal
        rows = dict(sql_rows(store, "SELECT digest, substr(CAST(data AS TEXT), 1, 40) FROM recording_chunks"))
        if store.path is None:  # PostgreSQL: the literal is the row
            assert rows[literal_digest(payload)] == f'"{payload[:39]}'
            return
        assert rows[literal_digest(payload)] == f"{MARK_PREFIX}{BIG + 2}"
        assert rows[literal_digest(small)].startswith('"')  # below the threshold: in the database as before
    path = blob_path(store_target, payload)
    assert files_beside(store_target) == [path] and path.read_bytes() == f'"{payload}"'.encode()
    # the text never went through the WAL: the database and its log hold a fraction of it
    written = sum(os.path.getsize(p) for p in Path(store_target).parent.glob("store.db*") if p.is_file())
    assert written < BIG // 2


def test_the_file_goes_with_the_last_row_that_names_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    payload = random_text(BIG)
    with Store(db) as store:
        store.finish_run(payload_run("keep-0001", payload, later_calls=1))
        store.finish_run(payload_run("keep-0002", payload, later_calls=2))
        assert files_beside(db) == [blob_path(db, payload)]  # one file for both runs
        store.delete_run("keep-0001")
        assert files_beside(db) == [blob_path(db, payload)]  # still named by keep-0002
        store.save_run(payload_run("keep-0002", random_text(5_000), later_calls=1))  # its recording replaced
        assert files_beside(db) == []
        store.finish_run(payload_run("keep-0003", payload, later_calls=1))
        store.delete_run("keep-0003")
        assert files_beside(db) == []


def test_a_missing_or_damaged_file_is_one_error_naming_it_and_storing_the_text_again_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.db"
    payload = random_text(BIG)
    run = payload_run("lost-0001", payload, later_calls=2)
    with Store(db) as store:
        store.finish_run(run)
    path = blob_path(db, payload)
    whole = path.read_bytes()
    other = whole[:-2] + (b'1"' if whole[-2:] == b'0"' else b'0"')  # the same size, one byte changed
    for damage in (b"", whole[:-1], other, None):  # empty, cut short, other bytes, gone
        if damage is None:
            path.unlink()
        else:
            path.write_bytes(damage)
        with Store(db, readonly=True) as store, pytest.raises(StoreError) as err:
            store.get_run("lost-0001")
        message = str(err.value)
        assert "lost-0001" in message and literal_digest(payload) in message and str(path) in message
        assert ("missing" if damage is None else "damaged") in message
    # the CLI: one line, exit 2, no traceback
    assert main(["--db", str(db), "export", "lost-0001"]) == 2
    assert "missing" in capsys.readouterr().err
    with Store(db) as store:
        store.finish_run(payload_run("lost-0002", payload, later_calls=1))  # the same text again writes the file
        assert store.get_run("lost-0001") == run
    out = tmp_path / "run.json"
    assert main(["--db", str(db), "export", "lost-0001", "-o", str(out)]) == 0
    assert payload in out.read_text()


def _die_before_commit(db: str, payload: str) -> None:
    """A writer killed mid-write: the file is written, the transaction holding its row never commits."""
    store = Store(db)
    with store.transaction():
        store.finish_run(payload_run("dead-0001", payload, later_calls=1))
        os._exit(0)


def test_an_orphan_file_is_never_read_and_the_next_writer_sweeps_it(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    payload = random_text(BIG)
    Store(db).close()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_die_before_commit, args=(str(db), payload))
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0
    orphan = blob_path(db, payload)
    assert files_beside(db) == [orphan]  # written before the row, which never committed
    dead = orphan.parent / ".tmp-0123456789abcdef-1-dead"  # a writer that died mid-write, long ago
    dead.write_bytes(b'"half')
    old = time.time() - TEMP_MAX_AGE_S - 60
    os.utime(dead, (old, old))
    waiting = Path(f"{db}.blobs") / ".tmp-2-0123456789abcdef"  # staged by a writer still waiting for the lock
    waiting.write_bytes(b'"whole"')
    with Store(db, readonly=True) as store:  # a reader neither sees nor removes them
        assert store.list_runs() == [] and not store.has_run("dead-0001")
    assert dead.exists() and orphan.exists()
    with Store(db) as store:  # a writer's opening sweeps
        assert files_beside(db) == [waiting]
        store.finish_run(payload_run("dead-0001", payload, later_calls=1))
        assert store.get_run("dead-0001").recording is not None
    assert files_beside(db) == sorted([orphan, waiting])


def test_a_rolled_back_write_leaves_no_file(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    payload = random_text(BIG)
    with Store(db) as store:
        with pytest.raises(RuntimeError, match="changed my mind"), store.transaction():
            store.finish_run(payload_run("undo-0001", payload, later_calls=1))
            assert files_beside(db) == [blob_path(db, payload)]
            raise RuntimeError("changed my mind")
        assert files_beside(db) == [] and not store.has_run("undo-0001")


def _write_same(db: str, tag: str, payload: str, barrier: Any) -> None:
    with Store(db) as store:
        barrier.wait(60)
        for r in range(3):
            store.finish_run(payload_run(f"{tag}-{r}", payload, later_calls=1))
        store.delete_run(f"{tag}-0")


def test_writers_storing_the_same_text_at_once_share_one_whole_file(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    payload = random_text(BIG)
    Store(db).close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_write_same, args=(db, f"w{i}", payload, barrier)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert files_beside(db) == [blob_path(db, payload)]
    with Store(db) as store:
        for i in range(3):
            for r in (1, 2):
                back: Run = store.get_run(f"w{i}-{r}")
                assert back.recording == payload_run(f"w{i}-{r}", payload, later_calls=1).recording
        for run in store.list_runs():
            store.delete_run(run["run_id"])
    assert files_beside(db) == []


def test_a_text_stored_whole_in_the_database_reads_as_before(tmp_path: Path) -> None:
    """A long chunk a causaltrace before the files wrote into its row stays readable (and writing the same text
    again keeps that row as it is)."""
    db = tmp_path / "store.db"
    payload = random_text(BIG)
    run = payload_run("old-0001", payload, later_calls=1)
    with Store(db) as store:
        store.finish_run(run)
    digest = literal_digest(payload)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE recording_chunks SET data = ? WHERE digest = ?", (f'"{payload}"', digest))
    conn.close()
    blob_path(db, payload).unlink()
    with Store(db) as store:
        assert store.get_run("old-0001") == run
        store.finish_run(payload_run("old-0002", payload, later_calls=1))
        assert store.get_run("old-0002").recording == payload_run("old-0002", payload, later_calls=1).recording
        assert store.get_run("old-0001") == run


def test_a_write_that_fails_or_is_ignored_leaves_no_file(tmp_path: Path) -> None:
    """Long texts are hashed into temporary files before the write transaction (one pass over the text): a write
    refused (a run never begun) or ignored (steps of a finished run) deletes them, and a rolled-back one its placed
    files."""
    db = tmp_path / "store.db"
    payload = random_text(BIG)
    limit = BLOB_MIN_BYTES  # the tool result's cut literal is above the files' threshold
    run = payload_run("late-0001", payload + random_text(20_000), later_calls=1)
    with Store(db, max_chars=limit) as store:
        with pytest.raises(StoreError, match="not begun"):
            store.add_steps("late-0001", run.steps)
        assert files_beside(db) == []
        store.finish_run(run)
        kept = files_beside(db)
        assert len(kept) == 2  # the recorded text and the steps' cut of it
        store.add_steps("late-0001", run.steps)  # late: ignored
        assert files_beside(db) == kept
        with pytest.raises(RuntimeError, match="undo"), store.transaction():
            store.finish_run(payload_run("late-0002", random_text(BIG), later_calls=1))
            assert len(files_beside(db)) == 4
            raise RuntimeError("undo")
        assert files_beside(db) == kept
        back = store.get_run("late-0001")
        assert back.recording == run.recording and back.steps[4].content.startswith(payload[:1000])
        assert back.steps[4].truncated


def test_a_read_only_store_stages_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    Store(db).close()
    with Store(db, readonly=True) as store, pytest.raises(StoreError, match="read-only"):
        store.finish_run(payload_run("ro-0001", random_text(BIG), later_calls=1))
    assert not Path(f"{db}.blobs").exists()


def test_a_file_that_cannot_be_written_is_a_store_error_and_nothing_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with Store(db) as store:
        Path(f"{db}.blobs").write_text("not a directory")  # the files' directory cannot be made
        with pytest.raises(StoreError, match="cannot write to the store") as err:
            store.finish_run(payload_run("nodir-0001", random_text(BIG), later_calls=1))
        assert str(db) in str(err.value) and not store.has_run("nodir-0001")
        small = payload_run("nodir-0002", random_text(10_000), later_calls=1)  # what stays in the database: stored
        store.finish_run(small)
        assert store.get_run("nodir-0002") == small


def test_a_long_text_under_the_cut_limit_is_one_file_for_the_recording_and_every_row(store_target: str) -> None:
    """A tool result too short to be cut (the store's limit is 2 M characters) but long enough for a file: the
    recording's chunk of it and every step row that shows it name one file (SQLite; PostgreSQL: whole rows), and
    the run reads back equal."""
    payload = random_text(BIG)
    run = payload_run("mid-0001", payload, later_calls=2)
    with Store(store_target) as store:
        store.finish_run(run)
        assert store.get_run("mid-0001") == run
        rows = sql_rows(store, "SELECT step_id, LENGTH(CAST(data AS TEXT)), chunks FROM steps WHERE run_id = 'mid-0001' "
                               "AND LENGTH(CAST(data AS TEXT)) > 100000 OR chunks IS NOT NULL ORDER BY step_id")
        if store.path is None:
            assert rows and all(r[2] is None and r[1] > BIG for r in rows)
            return
        assert rows and all(r[1] < 5_000 and literal_digest(payload) in r[2] for r in rows)
        assert sql_rows(store, "SELECT truncated FROM steps WHERE chunks IS NOT NULL") == [(0,)] * len(rows)
    assert files_beside(store_target) == [blob_path(store_target, payload)]

