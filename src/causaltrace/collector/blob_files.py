"""Long texts of a SQLite store kept as content-addressed files beside it, outside SQLite's write-ahead log (issue 35
"Bad input").

Why: a 50 MiB tool result's recording chunk cost SQLite ~145 ms of CPU to insert, commit and checkpoint — the
bytes go through the WAL and are then copied into the database file — against ~20–70 ms to write them once to a
file (more when the kernel must reclaim page cache first) plus an fsync, whose CPU is small. Small content stays in
the database: below :data:`BLOB_MIN_BYTES` (1 MiB) a commit costs less wall time than a file's fsync (measured:
256 KiB: SQLite 0.52 ms CPU / 0.53 ms wall, a file 0.21 / 1.02 ms; 1 MiB: 1.92 / 1.98 against 0.51 / 2.33 ms;
4 MiB: 11.9 / 31 against 1.4 / 7.8 ms).

Layout: ``<store file>.blobs/ab/abcdef…`` — the file is named by the SHA-256 (hex) of its bytes, the key the
store's row keeps (with the byte count, :func:`mark`); the row says where the text is, the file holds the bytes.

Rules (the callers, ``recording_chunks.py`` and ``store_sqlite.py``, hold them up):

* **Written before the row commits**: first to a temporary file in the directory, hashed on the way
  (:meth:`BlobFiles.stage`, before the write transaction: the text's one pass — the SHA-256 and the copy to the
  file a slice at a time, while the slice is in the CPU's cache — cost 45 ms for 52 MB where hashing it whole and
  then writing it whole cost 45–100), then, inside the store's write transaction, fsynced and renamed into place
  (atomic) and the directory fsynced (:meth:`BlobFiles.place`). The store runs
  ``synchronous = NORMAL``: a committed row survives the process dying, and after the next checkpoint a power loss
  too — so the file its row names must be on disk by then; syncing it before the commit is the only point this
  side of SQLite can do it (its CPU is ~1 ms for 52 MB; the wall time is the disk's).
* **Same key, same bytes**: two writers of the same text write the same file; the rename is atomic, so a reader
  never sees a half-written one, and whichever rename lands last leaves the same bytes.
* **Read and verified**: a missing file, or one whose size or SHA-256 is not its key's, is a
  :class:`BlobFileError` (the store turns it into a CorruptRecordError naming the run) — never other content.
* **Only while holding the store's write lock** are files put in place or deleted, so under that lock a file no
  row names is an orphan (its writer died before committing, or after deleting the row):
  ``recording_chunks.sweep_files`` removes those, and temporary files older than :data:`TEMP_MAX_AGE_S` (a writer
  that died before placing them; a younger one may still be placed), ``recording_chunks.settle_files`` the files
  of the rows a transaction deleted (after its commit) or the files it placed (after its rollback). A staged file
  that is gone when its writer comes to place it (swept after an hour's wait for the lock) is written again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["BLOB_MIN_BYTES", "TEMP_MAX_AGE_S", "BlobFileError", "BlobFiles", "is_mark", "mark", "marked_size"]

logger = logging.getLogger("causaltrace.collector.store")

#: From how many bytes a text is kept in a file beside the store instead of in a row.
BLOB_MIN_BYTES = 1 << 20
#: What a row holds instead of the text kept in a file: this prefix and the file's byte count. Not a JSON string,
#: so a causaltrace that predates the files reads it as a damaged chunk (a clear error), never as the text.
MARK_PREFIX = "@causaltrace-file:"
_MARK_BYTES = MARK_PREFIX.encode()
_NAME = re.compile(r"[0-9a-f]{64}\Z")
_TEMP_PREFIX = ".tmp-"
#: How old a temporary file must be for a sweep to take it for a dead writer's (staged files wait for the lock).
TEMP_MAX_AGE_S = 3600.0
#: How many bytes :meth:`BlobFiles.stage` hashes and writes at a time (well inside a core's cache).
_SLICE = 1 << 18


class BlobFileError(Exception):
    """A text kept in a file beside the store cannot be read back as it was written (missing or damaged)."""


def mark(size: int) -> str:
    """The row's stand-in for a text of ``size`` bytes kept in a file."""
    return f"{MARK_PREFIX}{size}"


def is_mark(data: str | bytes | bytearray | memoryview) -> bool:
    """Whether a stored value is :func:`mark`'s stand-in (a stored text itself is a JSON literal: it starts with a
    quote)."""
    if isinstance(data, str):
        return data.startswith(MARK_PREFIX)
    return bytes(data[: len(_MARK_BYTES)]) == _MARK_BYTES


def marked_size(data: str | bytes | bytearray | memoryview) -> int:
    """The byte count a :func:`mark` names (ValueError when it names none)."""
    text = data if isinstance(data, str) else bytes(data).decode("ascii", "replace")
    size = int(text[len(MARK_PREFIX):])
    if size < 0:
        raise ValueError(f"negative size {size}")
    return size


class BlobFiles:
    """The directory of content-addressed files beside one SQLite store (created when the first file is written)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        #: The keys whose files the open write transaction wrote, and those whose rows it deleted (settled after it
        #: ends: ``recording_chunks.settle_files``).
        self.written: set[str] = set()
        self.dropped: set[str] = set()

    @classmethod
    def beside(cls, store_file: Path) -> BlobFiles:
        return cls(Path(f"{store_file}.blobs"))

    def path(self, digest: str) -> Path:
        if not _NAME.match(digest):
            raise BlobFileError(f"{digest[:80]!r} is not a SHA-256 key")
        return self.root / digest[:2] / digest

    def has(self, digest: str, size: int) -> bool:
        """Whether the file of ``digest`` exists with ``size`` bytes (a stat: not read)."""
        try:
            return self.path(digest).stat().st_size == size
        except OSError:
            return False

    def stage(self, data: bytes | bytearray) -> tuple[str, Path]:
        """Write ``data`` to a new temporary file in the directory, hashing it on the way, a slice at a time:
        ``(its SHA-256 hex, the file)``, for :meth:`place` (no lock needed: the name is this writer's own)."""
        self._make(self.root)
        temp = self.root / f"{_TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
        digest = hashlib.sha256()
        view = memoryview(data)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(fd, "wb", buffering=0, closefd=True) as out:
                for start in range(0, len(view), _SLICE):
                    part = view[start : start + _SLICE]
                    digest.update(part)
                    _write_all(out, part)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return digest.hexdigest(), temp

    def place(self, digest: str, temp: Path | None, data: bytes | bytearray) -> None:
        """Under the store's write lock, before the row that names ``digest`` commits: its file in place — the
        staged ``temp`` fsynced and renamed there, or dropped when the file is there already (same key, same
        bytes); ``data`` written again when there is no staged file (or it was swept meanwhile)."""
        if self.has(digest, len(data)):
            if temp is not None:
                temp.unlink(missing_ok=True)
            return
        if temp is None:
            self.write(digest, data)
            return
        target = self.path(digest)
        try:
            fd = os.open(temp, os.O_RDONLY)
        except FileNotFoundError:
            self.write(digest, data)
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._make(target.parent)
        os.replace(temp, target)
        self.written.add(digest)
        _sync_dir(target.parent)

    def write(self, digest: str, data: bytes | bytearray) -> None:
        """Write ``data`` (whose SHA-256 is ``digest``) to its file: a temporary file, fsynced, renamed into place,
        the directory fsynced. A file already there with its size is left as it is (same key, same bytes)."""
        if self.has(digest, len(data)):
            return
        target = self.path(digest)
        folder = target.parent
        self._make(folder)
        temp = folder / f"{_TEMP_PREFIX}{digest[:16]}-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(fd, "wb", buffering=0, closefd=True) as out:
                _write_all(out, memoryview(data))
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self.written.add(digest)
        _sync_dir(folder)

    def _make(self, folder: Path) -> None:
        """Create ``folder`` (the directory or one of its key folders) if missing, its new name synced."""
        if folder.is_dir():
            return
        if folder != self.root:
            self._make(self.root)
        folder.mkdir(exist_ok=True)
        _sync_dir(folder.parent)

    def read(self, digest: str, size: int) -> bytes:
        """The bytes of ``digest``'s file, checked against its size and SHA-256 (a :class:`BlobFileError` when the
        file is missing, unreadable or not those bytes)."""
        path = self.path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobFileError(
                f"its text is kept in the file {path}, which is missing (a copy of the store without its "
                f"{self.root.name} directory, or the run was deleted while it was read)") from None
        except OSError as exc:
            raise BlobFileError(f"its text is kept in the file {path}, which cannot be read ({exc})") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            raise BlobFileError(
                f"its text is kept in the file {path}, which is damaged ({len(data)} bytes, expected {size}"
                f"{'' if len(data) != size else ', other content'})")
        return data

    def remove(self, digests: Iterable[str]) -> None:
        """Delete the files of ``digests`` (those there are). Call only under the store's write lock, for digests no
        committed row names."""
        for digest in digests:
            try:
                self.path(digest).unlink(missing_ok=True)
            except (OSError, BlobFileError) as exc:
                logger.debug("causaltrace store: cannot delete the file of %s: %s", digest, exc)

    def listed(self, *, now: float | None = None) -> tuple[list[str], list[Path]]:
        """The keys of the files there are, and the temporary files older than :data:`TEMP_MAX_AGE_S` (left by
        writers that died: a younger one may be a writer's waiting for the lock)."""
        keys: list[str] = []
        temps: list[Path] = []
        cutoff = (time.time() if now is None else now) - TEMP_MAX_AGE_S
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return keys, temps
        folders = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry)
            elif entry.name.startswith(_TEMP_PREFIX) and _older(entry, cutoff):
                temps.append(Path(entry.path))
        for folder in folders:
            for entry in os.scandir(folder.path):
                if entry.name.startswith(_TEMP_PREFIX):
                    if _older(entry, cutoff):
                        temps.append(Path(entry.path))
                elif _NAME.match(entry.name):
                    keys.append(entry.name)
        return keys, temps

    @staticmethod
    def discard(temps: Iterable[Path]) -> None:
        """Delete temporary files (:meth:`listed`: left by writers that died mid-write). Call only under the store's
        write lock (no writer is writing one then)."""
        for temp in temps:
            try:
                temp.unlink(missing_ok=True)
            except OSError as exc:
                logger.debug("causaltrace store: cannot delete %s: %s", temp, exc)


def _older(entry: os.DirEntry[str], cutoff: float) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_mtime < cutoff
    except OSError:
        return False


def _write_all(out: Any, view: memoryview) -> None:
    while view:
        view = view[out.write(view) or 0 :]


def _sync_dir(folder: Path) -> None:
    """fsync a directory (a new or renamed name in it survives a power loss); a no-op where directories cannot be
    opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
