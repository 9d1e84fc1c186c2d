"""Recorded calls with repeated content kept once: content-addressed chunks (issue 21 item 14).

Why: a model request carries the whole conversation, so a large tool result is sent again with every later request
of the run, and a recording that keeps each request as it is stores that result once per request (a 20 MB tool
result cost ~123 MB of store; now ~22 MB: ``benchmarks/bench_recording_payloads.py``). Replay needs every request
byte for byte (ARCHITECTURE "Recording"), so nothing is cut: the repetition is factored out instead.

How (schema v3, ``_migrations.py``, both backends):

* **Chunks.** Every string of at least :data:`CHUNK_MIN_CHARS` characters anywhere in a call's ``request`` or
  ``response`` (a message's content, a tool result, a long system prompt) is kept once per store in
  ``recording_chunks (digest, chars, data)``: ``data`` is the string's JSON literal (as it would have stood inside
  the call's JSON — escapes included, so any text PostgreSQL's ``TEXT`` cannot hold, a NUL, stays storable) and
  ``digest`` the SHA-256 of that literal's UTF-8. SQLite keeps the literal as those UTF-8 bytes (a BLOB in the
  ``TEXT`` column: a 50 MB literal is not decoded to be written; older rows are text, both read alike).
* **Pieces.** A string of at least :data:`SEARCH_MIN_CHARS` that contains a shorter large string of the same
  recording is kept as pieces instead: the part before it, that string's pieces, the part after. smolagents sends a
  tool result inside ``Observation:\n…``, beside the tool call's own response; a prompt that grows by appending
  repeats what it held before — either way the shared text is stored once.
* **References.** The call's row in ``recordings`` keeps its JSON with each such string replaced by a placeholder
  (its chunk's digest, or its pieces' digests joined by ``+``), and in the ``chunks`` column the list of
  ``[ref, *path]`` — ``ref`` a digest or the list of its pieces' digests, ``path`` the keys and list indices from the
  call's root, e.g. ``["ab12…", "request", "messages", 3, "content"]`` — that says which values are references, so a
  string that merely looks like a digest is never taken for one. A row whose ``chunks`` is NULL is the whole call
  (every row written before v3, and every call without a large string).
* **Who uses a chunk.** ``recording_chunk_refs (run_id, digest)`` lists the chunks each run's recording uses (the
  same chunk may serve several runs: a replay of a run, a re-import under another id). Replacing or deleting a run's
  recording drops its references and then every chunk no run references any more; a chunk still used by the new
  recording is neither deleted nor written again. Writers serialise (the store's write lock), so no other writer can
  add a reference between the check and the delete.
* **Reading** puts each string back at its paths (its pieces joined) — one string object for all the calls that
  carry it, so a run read back holds the payload once in memory too — and the Recording equals the one written. A
  reference whose chunk is missing is a StoreError naming the call and the digest.
* **Long chunks in files** (issue 35 "Bad input", SQLite only): a chunk whose literal is at least
  ``blob_files.BLOB_MIN_BYTES`` (1 MiB) is written to a content-addressed file beside the store before its row
  commits; the row holds ``blob_files.mark`` (the byte count) in ``data``. Its file goes when its row goes (after
  the commit), orphans are swept under the write lock, a missing or damaged file is a CorruptRecordError naming it
  (``blob_files.py`` says why and how). PostgreSQL keeps every chunk in the database.

Old stores migrate without rewriting their rows (v2 recordings are read as they are; a run written again is
chunked). ``CAUSALTRACE_STORE_MAX_CHARS`` is unchanged: it cuts step fields only, recordings stay whole.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path as PathType
from typing import Any

from causaltrace.collector.blob_files import BLOB_MIN_BYTES, BlobFileError, BlobFiles, is_mark, mark, marked_size
from causaltrace.collector.store_sql import REC_INSERT, Connection, CorruptRecordError, refs_json
from causaltrace.recording.long_texts import json_literal
from causaltrace.schema import RecordedCall, utf8_safe

__all__ = [
    "CHUNK_MIN_CHARS",
    "SplitRecording",
    "TextRefs",
    "delete_recording",
    "delete_texts",
    "resolve_calls",
    "resolve_rows",
    "settle_files",
    "split_calls",
    "sweep_files",
    "write_recording",
    "write_texts",
]

logger = logging.getLogger("causaltrace.collector.store")

#: From how many characters a string of a recorded call is kept as a chunk (shorter ones are cheaper inline than
#: the 64-character digest, the path and the row that would stand for them).
CHUNK_MIN_CHARS = 4096
#: From how many characters a large string is searched for shorter large strings of its recording it contains.
SEARCH_MIN_CHARS = 65_536
#: How many candidates (longest first) are tried per piece before it is kept whole.
SEARCH_TRIES = 16
#: SQLite's bound-parameter limit, per ``IN (…)`` list.
_BATCH = 500

Path = list[str | int]


class _Staged:
    """Texts keyed for one write; with ``files`` (a SQLite store) a literal of at least ``BLOB_MIN_BYTES`` is
    staged: hashed and copied to a temporary file in one pass (``BlobFiles.stage``), put in place by the write
    transaction (``BlobFiles.place``). Whatever that did not place is deleted by :meth:`discard` (call it when the
    write is over, whether it committed or not)."""

    __slots__ = ("files", "staged")

    def __init__(self, files: BlobFiles | None = None) -> None:
        self.files = files
        #: digest -> the temporary file holding its literal.
        self.staged: dict[str, PathType] = {}

    def key(self, literal: bytes | bytearray) -> str:
        """The SHA-256 (hex) of ``literal``, staged to a file when it will be one."""
        if self.files is None or len(literal) < BLOB_MIN_BYTES:
            return hashlib.sha256(literal).hexdigest()
        digest, temp = self.files.stage(literal)
        if digest in self.staged:  # an equal text of another object: staged once
            temp.unlink(missing_ok=True)
        else:
            self.staged[digest] = temp
        return digest

    def place(self, digest: str, literal: bytes | bytearray) -> None:
        """Under the write lock: ``digest``'s file in place (its staged file moved there, or written)."""
        assert self.files is not None
        self.files.place(digest, self.staged.pop(digest, None), literal)

    def discard(self) -> None:
        for temp in self.staged.values():
            temp.unlink(missing_ok=True)
        self.staged.clear()


class SplitRecording(_Staged):
    """A recording ready to write: its ``recordings`` rows (``REC_INSERT`` order) and the chunks they reference
    (digest -> (characters, JSON literal): the literal as the UTF-8 bytes it was written as, which
    :func:`write_recording` decodes only for a backend that needs text; a long one staged to its file: call
    :meth:`discard` when the write is over)."""

    __slots__ = ("chunks", "rows")

    def __init__(self, files: BlobFiles | None = None) -> None:
        self.files = files  # _Staged.__init__ inline (one a run's write)
        self.staged: dict[str, PathType] = {}
        self.rows: list[tuple[Any, ...]] = []
        self.chunks: dict[str, tuple[int, bytes | bytearray]] = {}


class _TextMap:
    """A dict keyed by long strings that never hashes them (Python hashes every character of a 50 MB string the
    first time it is a key): found by identity (the same object — a tool result the calls share), else by length,
    head and tail, compared whole (an equal string that is another object: a memory compare, no hash)."""

    __slots__ = ("_by_id", "_by_shape")

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[str, Any]] = {}
        self._by_shape: dict[tuple[int, str, str], list[tuple[str, Any]]] = {}

    @staticmethod
    def _shape(text: str) -> tuple[int, str, str]:
        return len(text), text[:32], text[-32:]

    def get(self, text: str) -> Any:
        known = self._by_id.get(id(text))
        if known is not None and known[0] is text:
            return known[1]
        for other, value in self._by_shape.get(self._shape(text), ()):
            if other == text:
                return value
        return None

    def __setitem__(self, text: str, value: Any) -> None:
        self._by_id[id(text)] = (text, value)  # the text is held: its id stays its own
        self._by_shape.setdefault(self._shape(text), []).append((text, value))

    def __getitem__(self, text: str) -> Any:
        value = self.get(text)
        if value is None:
            raise KeyError(text[:64])
        return value


# The chunks of the last writes, per process (issue 35: the store's own work per event): an agent sends the same
# system prompt, tool descriptions or task in every run — a new string object each time — and each run's write
# made its JSON literal and hashed it again (~10 µs for a 9 KB smolagents prompt). A text below
# _RECENT_MAX_CHARS (so never a file: its literal stays under BLOB_MIN_BYTES) is found here by its length, head
# and tail, then compared whole (no hash of the text); its digest, characters and literal are a pure function of
# it. At most about _RECENT_MAX entries (a few MB at most; ~0.5 MB for ASCII prompts), the oldest dropped. The
# writer threads of several stores share it without a lock (a lock held across a fork would stay held in the
# child): each step is one atomic dict operation, and a race between two writers costs at most an entry.
_RECENT_MAX = 32
_RECENT_MAX_CHARS = 16_384
_recent: dict[tuple[int, str, str], tuple[str, str, int, bytes | bytearray]] = {}


def _recent_chunk(text: str) -> tuple[str, int, bytes | bytearray] | None:
    """(digest, characters, literal) of ``text`` when a recent write chunked an equal text."""
    known = _recent.get((len(text), text[:32], text[-32:]))
    if known is not None and (known[0] is text or known[0] == text):
        return known[1], known[2], known[3]
    return None


def _remember_chunk(text: str, digest: str, chars: int, literal: bytes | bytearray) -> None:
    try:
        while len(_recent) >= _RECENT_MAX:
            _recent.pop(next(iter(_recent)), None)
    except (RuntimeError, StopIteration):  # another writer changed the table meanwhile: it keeps it bounded too
        pass
    _recent[(len(text), text[:32], text[-32:])] = (text, digest, chars, literal)


def _large_strings(value: Any, trail: Path, into: list[tuple[Path, str]]) -> None:
    """Append ``(path, string)`` for every string of at least CHUNK_MIN_CHARS inside ``value`` (``trail`` its
    path), depth first in key / index order — the order the call's references are listed in."""
    if isinstance(value, dict):
        _walk(value.items(), list(trail), into)
    elif isinstance(value, list):
        _walk(enumerate(value), list(trail), into)
    elif isinstance(value, str) and len(value) >= CHUNK_MIN_CHARS:
        into.append((trail, value))


def _walk(items: Iterable[tuple[Any, Any]], path: list[Any], into: list[tuple[Path, str]]) -> None:
    """:func:`_large_strings` over a dict's items or a list's enumeration, ``path`` their container's path (grown
    and shrunk in place: a path is copied only for a string found). Exact type tests first, and no call for an
    empty dict or list: this walk visits every value of every long call, so it is kept lean."""
    for key, item in items:
        kind = type(item)
        if kind is str:
            if len(item) >= CHUNK_MIN_CHARS:
                into.append(([*path, key], item))
        elif kind is dict:
            if item:
                path.append(key)
                _walk(item.items(), path, into)
                path.pop()
        elif kind is list:
            if item:
                path.append(key)
                _walk(enumerate(item), path, into)
                path.pop()
        elif isinstance(item, str):
            if len(item) >= CHUNK_MIN_CHARS:
                into.append(([*path, key], item))
        elif isinstance(item, dict):
            path.append(key)
            _walk(item.items(), path, into)
            path.pop()
        elif isinstance(item, list):
            path.append(key)
            _walk(enumerate(item), path, into)
            path.pop()


def _replaced(value: Any, found: list[tuple[Path, str]]) -> Any:
    """A copy of ``value`` with the value at each ``path`` (relative to ``value``) replaced by its ``new`` text:
    only the dicts and lists on those paths are copied, the rest is shared."""
    root = dict(value) if isinstance(value, dict) else list(value)
    copies: dict[tuple[Any, ...], Any] = {(): root}
    for path, new in found:
        holder = root
        for depth in range(1, len(path)):
            prefix = tuple(path[:depth])
            copy = copies.get(prefix)
            if copy is None:
                child = holder[path[depth - 1]]
                copy = copies[prefix] = dict(child) if isinstance(child, dict) else list(child)
                holder[path[depth - 1]] = copy
            holder = copy
        holder[path[-1]] = new
    return root


class _Splitter:
    """Cuts the large strings out of a recording's calls.

    Each distinct string gets its pieces once (equal strings from different requests meet in a :class:`_TextMap`,
    which never hashes them). A string of at least :data:`SEARCH_MIN_CHARS` that
    contains a shorter such string of the same recording is stored as pieces — the part before it, its pieces, the
    part after (each searched again) — so a tool result the framework wraps (smolagents sends ``Observation:\n`` +
    the result) or a text that grows by appending keeps the shared part once. At most :data:`SEARCH_TRIES`
    candidates are tried per piece, longest first, so the search stays linear in the recording's size.
    """

    def __init__(self, out: SplitRecording, literals: Mapping[int, tuple[str, bytes | bytearray]] | None = None) -> None:
        self.out = out
        self.digest_of = _TextMap()
        self.pieces_of = _TextMap()
        self.literals = literals or {}

    def digest(self, text: str) -> str:
        found = self.digest_of.get(text)
        if found is None:
            recent = _recent_chunk(text) if len(text) < _RECENT_MAX_CHARS else None
            if recent is not None:  # a text an earlier write chunked (a system prompt every run sends): known
                found, chars, literal = recent
                self.out.chunks.setdefault(found, (chars, literal))
                self.digest_of[text] = found
                return found
            kept = self.literals.get(id(text))
            if kept is not None and kept[0] is text:
                literal = kept[1]  # written by the run's export (issue 35 "Bad input"): not written again
            else:
                try:  # pydantic-core's bytes, by orjson (recording.long_texts.json_literal)
                    literal = json_literal(text, remember=False)
                except TypeError:  # a lone surrogate: U+FFFD, as the call's own JSON does
                    literal = json_literal(utf8_safe(text), remember=False)
            found = self.out.key(literal)
            # an ASCII text (a flag of the str) has an ASCII literal: its characters are its bytes, nothing decoded
            chars = len(literal) if text.isascii() else len(literal.decode())
            self.out.chunks.setdefault(found, (chars, literal))
            self.digest_of[text] = found
            if len(text) < _RECENT_MAX_CHARS:
                _remember_chunk(text, found, chars, literal)
        return found

    def plan(self, strings: list[tuple[Path, str]]) -> None:
        """Decide the pieces of every large string of the recording (``strings``, in first-seen order), shortest
        first (a string's candidates are the shorter ones already planned)."""
        distinct = {id(text): text for _, text in strings}  # one per object: no string is hashed
        searched: list[str] = []
        for text in sorted(distinct.values(), key=len):
            if self.pieces_of.get(text) is not None:  # an equal string, another object
                continue
            if len(text) >= SEARCH_MIN_CHARS:
                self.pieces_of[text] = self._pieces(text, searched)
                searched.append(text)
            else:
                self.pieces_of[text] = [self.digest(text)]

    def _pieces(self, text: str, searched: list[str]) -> list[str]:
        tries = 0
        for known in reversed(searched):
            if len(known) >= len(text):
                continue
            at = text.find(known)
            if at >= 0:
                return (self._part(text[:at], searched) + self.pieces_of[known]
                        + self._part(text[at + len(known):], searched))
            tries += 1
            if tries >= SEARCH_TRIES:
                break
        return [self.digest(text)]

    def _part(self, text: str, searched: list[str]) -> list[str]:
        if not text:
            return []
        known = self.pieces_of.get(text)
        if known is not None:
            return known
        return self._pieces(text, searched) if len(text) >= SEARCH_MIN_CHARS else [self.digest(text)]

    def call_row(self, run_id: str, seq: int, call: RecordedCall, text: str | None,
                 found: Sequence[tuple[Path, str]]) -> tuple[Any, ...]:
        """The call's ``recordings`` row: its JSON (``text`` when given) when it holds no large string, else its JSON
        with each of them (``found``: paths from the call's root) replaced by its reference."""
        if not found:
            data = call.model_dump_json() if text is None else text
            return (run_id, seq, call.step_id, call.agent_key, call.kind, call.ordinal, call.request_hash, data, None)
        refs: list[list[Any]] = []
        by_field: dict[str, list[tuple[Path, str]]] = {}
        for path, string in found:
            pieces = self.pieces_of[string]
            ref: str | list[str] = pieces[0] if len(pieces) == 1 else pieces
            refs.append([ref, *path])
            by_field.setdefault(str(path[0]), []).append((path[1:], placeholder(ref)))
        data = self._swapped(text, refs) if text is not None else None
        if data is None:
            update: dict[str, Any] = {}
            for field, items in by_field.items():
                value = getattr(call, field)
                update[field] = items[0][1] if not items[0][0] else _replaced(value, items)  # [] is the field itself
            data = call.model_copy(update=update).model_dump_json()
        return (run_id, seq, call.step_id, call.agent_key, call.kind, call.ordinal, call.request_hash, data,
                refs_json(refs))

    def _swapped(self, text: str, refs: list[list[Any]]) -> str | None:
        """The call's JSON ``text`` with each chunked string's literal replaced by its reference's — the same text as
        the call serialized again with its references in place, without serializing it (a smolagents request carries
        a 4 KB system prompt: every call was written twice); None (serialize it) when a string is kept as pieces, or
        when a literal is not found in ``text`` exactly as often as the walk found the string (a dict key equal to
        it, or an export that wrote it otherwise). A literal holds no unescaped quote, so its occurrences neither
        overlap each other nor lie inside another literal."""
        counts: dict[str, int] = {}  # digest -> times the walk found its string
        for ref, *_ in refs:
            if not isinstance(ref, str):
                return None
            counts[ref] = counts.get(ref, 0) + 1
        spans: list[tuple[int, int, str]] = []
        for digest, n in counts.items():
            # where the literal stands: its head searched, the rest compared (a search for the whole literal —
            # ``str.count`` / ``str.replace`` with a 9 KB needle — cost more than writing the call's JSON again)
            literal = self.out.chunks[digest][1].decode()
            head = literal[:64]
            at = text.find(head)
            while at >= 0:
                if text.startswith(literal, at):
                    spans.append((at, at + len(literal), digest))
                    n -= 1
                    at = text.find(head, at + len(literal))
                else:
                    at = text.find(head, at + 1)
            if n:
                return None
        spans.sort()
        parts: list[str] = []
        last = 0
        for start, end, digest in spans:
            parts += (text[last:start], '"', digest, '"')
            last = end
        parts.append(text[last:])
        return "".join(parts)


def placeholder(ref: str | list[str]) -> str:
    """What a call's JSON holds where a chunked string was: its chunk's digest, or its pieces' digests joined by
    ``+``."""
    return ref if isinstance(ref, str) else "+".join(ref)


def split_calls(run_id: str, calls: Sequence[RecordedCall], texts: Sequence[str] | None = None,
                literals: Mapping[int, tuple[str, bytes | bytearray]] | None = None,
                files: BlobFiles | None = None) -> SplitRecording:
    """The rows and chunks of a run's recorded calls (``seq`` = position in ``calls``).

    ``texts``, when given, are the calls' own JSON (``call.model_dump_json()``, in order), already made by whoever
    had them: not made again, and a call whose JSON is shorter than :data:`CHUNK_MIN_CHARS` holds no large string (a
    string's JSON literal is longer than the string), so it is not searched. Each call is searched at most once, and
    a call holding a large string is serialized only with its references in place (never whole). ``literals``
    (id of a string -> (the string, its JSON literal)), when given, are literals the run's export already wrote.
    ``files`` (a SQLite store): a chunk that will be a file is staged to it now (``_Staged``).
    """
    out = SplitRecording(files)
    given: Sequence[str | None] = texts if texts is not None and len(texts) == len(calls) else [None] * len(calls)
    found: list[Sequence[tuple[Path, str]]] = []
    every: list[tuple[Path, str]] = []  # the large strings of all calls, in order
    whole = True  # every call's row is its own JSON as given (most recordings: no splitter at all)
    for call, text in zip(calls, given, strict=True):
        if text is None or len(text) >= CHUNK_MIN_CHARS:  # without its JSON (never made whole: it may be huge), walk
            strings: list[tuple[Path, str]] = []
            request, response = call.request, call.response
            if type(request) is dict:  # (the usual request: straight into the walk)
                _walk(request.items(), ["request"], strings)
            else:
                _large_strings(request, ["request"], strings)
            if type(response) is dict:
                _walk(response.items(), ["response"], strings)
            else:
                _large_strings(response, ["response"], strings)
            if strings or text is None:
                whole = False
                every += strings
            found.append(strings)
        else:
            found.append(())
    rows = out.rows
    if whole:
        for seq, (call, text) in enumerate(zip(calls, given, strict=True)):
            rows.append((run_id, seq, call.step_id, call.agent_key, call.kind, call.ordinal, call.request_hash, text,
                         None))
        return out
    splitter = _Splitter(out, literals)
    splitter.plan(every)
    for seq, (call, text, found_in) in enumerate(zip(calls, given, found, strict=True)):
        if found_in or text is None:
            rows.append(splitter.call_row(run_id, seq, call, text, found_in))
        else:  # the call's own JSON as it is (most calls: no call_row)
            rows.append((run_id, seq, call.step_id, call.agent_key, call.kind, call.ordinal, call.request_hash, text,
                         None))
    return out


# ------------------------------------------------------------------------------------------------------ writing


def _digests_of_run(conn: Connection, run_id: str) -> set[str]:
    rows = conn.execute("SELECT digest FROM recording_chunk_refs WHERE run_id = ?", (run_id,)).fetchall()
    return {r[0] for r in rows}


def _batches(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[i : i + _BATCH] for i in range(0, len(values), _BATCH)]


def _existing(conn: Connection, digests: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for part in _batches(digests):
        marks = ", ".join("?" * len(part))
        found.update(r[0] for r in conn.execute(
            f"SELECT digest FROM recording_chunks WHERE digest IN ({marks})", tuple(part)).fetchall())
    return found


def _collect(conn: Connection, digests: set[str], files: BlobFiles | None = None) -> None:
    """Delete those of ``digests`` that no run's recording, step or run row references any more (with ``files``, those that may be
    kept in a file go to ``files.dropped``: their files are deleted once the transaction commits)."""
    unused = ("FROM recording_chunks WHERE digest IN ({}) AND NOT EXISTS "
              "(SELECT 1 FROM recording_chunk_refs r WHERE r.digest = recording_chunks.digest) AND NOT EXISTS "
              "(SELECT 1 FROM text_chunk_refs t WHERE t.digest = recording_chunks.digest)")
    for part in _batches(sorted(digests)):
        marks = ", ".join("?" * len(part))
        if files is not None:  # a file holds at least BLOB_MIN_BYTES, so at least a quarter as many characters
            files.dropped.update(r[0] for r in conn.execute(
                f"SELECT digest {unused.format(marks)} AND chars >= ?", (*part, BLOB_MIN_BYTES // 4)).fetchall())
        conn.execute(f"DELETE {unused.format(marks)}", tuple(part))


def write_recording(conn: Connection, run_id: str, split: SplitRecording, *, replaces: bool = True,
                    utf8_blobs: bool = False, files: BlobFiles | None = None) -> None:
    """Replace the run's recording by ``split`` inside the caller's write transaction: chunks the store already
    holds are not written again, chunks only the old recording used are deleted. ``replaces=False``: the run has no
    recording yet (a live run's final write), so there is nothing to look up or delete first. ``utf8_blobs``: the
    backend takes a chunk's literal as its UTF-8 bytes (SQLite: a 50 MB literal is not decoded to text first; it is
    read back as bytes, which ``json.loads`` reads as it reads text); else it is written as text. ``files`` (a
    SQLite store): a literal of at least ``BLOB_MIN_BYTES`` is written to its file beside the store now, before the
    row (which holds ``blob_files.mark``) commits; a chunk the store already holds gets its file again if it is
    missing (same key, same bytes: a lost file is repaired by storing its text again)."""
    old = _digests_of_run(conn, run_id) if replaces else set()
    if replaces:
        conn.execute("DELETE FROM recordings WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM recording_chunk_refs WHERE run_id = ?", (run_id,))
    digests = sorted(split.chunks)
    if digests:  # most recordings hold no long text: no statement for it
        have = _existing(conn, digests)
        rows = []
        for d in digests:
            chars, literal = split.chunks[d]
            if files is not None and len(literal) >= BLOB_MIN_BYTES:
                split.place(d, literal)  # (a file already there is a stat)
                if d not in have:
                    rows.append((d, chars, mark(len(literal))))
            elif d not in have:
                rows.append((d, chars, literal if utf8_blobs else literal.decode()))
        conn.executemany("INSERT INTO recording_chunks (digest, chars, data) VALUES (?, ?, ?)", rows)
        conn.executemany("INSERT INTO recording_chunk_refs (run_id, digest) VALUES (?, ?)",
                         [(run_id, d) for d in digests])
    conn.executemany(REC_INSERT, split.rows)
    if old:
        _collect(conn, old - set(digests), files)


def delete_recording(conn: Connection, run_id: str, files: BlobFiles | None = None) -> None:
    """Delete the run's recording and every chunk no other run references (inside the caller's transaction; their
    files, with ``files``, once it commits: :func:`settle_files`)."""
    old = _digests_of_run(conn, run_id)
    conn.execute("DELETE FROM recordings WHERE run_id = ?", (run_id,))
    conn.execute("DELETE FROM recording_chunk_refs WHERE run_id = ?", (run_id,))
    _collect(conn, old, files)


class TextRefs(_Staged):
    """The long cut texts one write's step and run rows name by reference instead of holding them (schema v5, a
    SQLite store: ``store_sql.cut_step_json``'s ``refer``): a cut literal of at least ``BLOB_MIN_BYTES`` is keyed
    by its SHA-256 — once per literal object: the six step rows and the run row of a 50 MiB tool result show one
    — staged to its file and kept with its chunk row (:func:`write_texts`; :meth:`discard` when the write is
    over)."""

    __slots__ = ("_keyed", "texts")

    def __init__(self, files: BlobFiles) -> None:
        self.files: BlobFiles | None = files  # _Staged.__init__ inline (one a write)
        self.staged: dict[str, PathType] = {}
        #: digest -> (characters, literal), as ``SplitRecording.chunks``.
        self.texts: dict[str, tuple[int, bytes | bytearray]] = {}
        self._keyed: dict[int, tuple[bytes | bytearray, str]] = {}

    def refer(self, literal: bytes | bytearray) -> str | None:
        """The key that stands for ``literal`` in a row, or None: it is short enough to stay in the row."""
        if len(literal) < BLOB_MIN_BYTES:
            return None
        known = self._keyed.get(id(literal))
        if known is not None and known[0] is literal:
            return known[1]
        digest = self.key(literal)
        chars = len(literal) if literal.isascii() else len(literal.decode())
        self.texts.setdefault(digest, (chars, literal))
        self._keyed[id(literal)] = (literal, digest)  # the literal is held: its id stays its own
        return digest


def write_texts(conn: Connection, run_id: str, refs: TextRefs) -> None:
    """Inside the caller's write transaction, before its rows commit: the texts the run's rows name (``refs``) —
    each in its file (unless there: a stat), its chunk row (unless there) and the run's reference to it. The
    references are the run's, not a row's (no statement per step row): a step re-sent with another long text
    leaves the old one referenced until the run is deleted or written again whole."""
    if not refs.texts:
        return
    for digest, (_, literal) in refs.texts.items():
        refs.place(digest, literal)
    conn.executemany("INSERT INTO recording_chunks (digest, chars, data) VALUES (?, ?, ?) ON CONFLICT (digest) "
                     "DO NOTHING", [(d, chars, mark(len(literal))) for d, (chars, literal) in refs.texts.items()])
    conn.executemany("INSERT INTO text_chunk_refs (run_id, digest) VALUES (?, ?) ON CONFLICT DO NOTHING",
                     [(run_id, d) for d in refs.texts])


def delete_texts(conn: Connection, run_id: str, files: BlobFiles | None = None) -> None:
    """Drop the run's references to texts its step and run rows named (they are being deleted or replaced) and
    every chunk nothing references any more (inside the caller's transaction; files as :func:`delete_recording`)."""
    old = {r[0] for r in conn.execute("SELECT digest FROM text_chunk_refs WHERE run_id = ?", (run_id,)).fetchall()}
    if old:
        conn.execute("DELETE FROM text_chunk_refs WHERE run_id = ?", (run_id,))
        _collect(conn, old, files)


def settle_files(conn: Connection, files: BlobFiles, begin: Callable[[Connection], None], *, committed: bool) -> None:
    """After a write transaction ended: delete the files of the chunks it deleted (it committed) or the files it
    wrote (it rolled back) that no row names — in a write transaction of their own, so no other writer can store
    the same text meanwhile (files are written only under the store's write lock); after a deletion, orphans too
    (:func:`sweep_files`). A failure here leaves orphans for a later sweep (logged, never raised)."""
    candidates = files.dropped if committed else files.written
    files.dropped, files.written = set(), set()
    if not candidates:
        return
    try:
        begin(conn)
        try:
            kept = _existing(conn, sorted(candidates))
            files.remove(candidates - kept)
            if committed:
                sweep_files(conn, files)
        finally:
            conn.execute("COMMIT")
    except Exception as exc:  # the data is committed (or rolled back) already: only files are left over
        logger.debug("causaltrace store: cannot delete the files of unused chunks yet: %s", exc)
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def sweep_files(conn: Connection, files: BlobFiles) -> int:
    """Inside the caller's write transaction: delete every file beside the store that no chunk row names (its
    writer died before committing, or before deleting it: an orphan is never read, a row names every file read)
    and every temporary file; return how many files went."""
    keys, temps = files.listed()
    kept = _existing(conn, keys) if keys else set()
    gone = [key for key in keys if key not in kept]
    files.remove(gone)
    files.discard(temps)
    return len(gone)


# ------------------------------------------------------------------------------------------------------ reading


def _place(data: Any, mark: str, path: Sequence[Any], text: str) -> None:
    """Put ``text`` at ``path`` in ``data``, where the row holds the placeholder ``mark`` (anything else is damage)."""
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    if holder[path[-1]] != mark:
        raise ValueError(f"no reference {mark[:64]} at {'/'.join(map(str, path))}")
    holder[path[-1]] = text


def _parse_refs(where: str, what: str, chunks: str) -> list[list[Any]]:
    try:
        refs = json.loads(chunks)
        if not isinstance(refs, list) or not all(
            isinstance(r, list) and len(r) >= 2
            and (isinstance(r[0], str) or (isinstance(r[0], list) and all(isinstance(d, str) for d in r[0])))
            for r in refs
        ):
            raise ValueError("expected a list of [digest or [digests], field, …] references")
    except ValueError as exc:
        raise CorruptRecordError(f"{where}: the chunk references of {what} are corrupt ({exc})") from exc
    return refs


def _chunk_texts(conn: Connection, where: str, digests: set[str], files: BlobFiles | None) -> dict[str, str]:
    texts: dict[str, str] = {}
    for part in _batches(sorted(digests)):
        marks = ", ".join("?" * len(part))
        for digest, literal in conn.execute(
            f"SELECT digest, data FROM recording_chunks WHERE digest IN ({marks})", tuple(part)
        ).fetchall():
            if is_mark(literal):
                literal = _file_literal(where, digest, literal, files)
            try:
                text = json.loads(literal)
            except ValueError:
                text = None
            if not isinstance(text, str):
                raise CorruptRecordError(f"{where}: the stored chunk {digest} is corrupt (not a JSON string)")
            texts[digest] = text
    return texts


def _file_literal(where: str, digest: str, stored: str | bytes, files: BlobFiles | None) -> bytes:
    """The literal of a chunk whose row says it is kept in a file beside the store (a CorruptRecordError naming the
    run, the chunk and the file when it is missing or damaged)."""
    if files is None:
        raise CorruptRecordError(f"{where}: the stored chunk {digest} is kept in a file beside a SQLite store "
                                 "file, which this store has none of")
    try:
        return files.read(digest, marked_size(stored))
    except ValueError:
        raise CorruptRecordError(f"{where}: the stored chunk {digest} is corrupt (a damaged file reference)") from None
    except BlobFileError as exc:
        raise CorruptRecordError(f"{where}: the stored chunk {digest} cannot be read: {exc}") from None


def resolve_calls(
    conn: Connection, where: str, rows: Sequence[tuple[int, str, str | None]], files: BlobFiles | None = None
) -> list[tuple[int, str | dict[str, Any]]]:
    """``(seq, data, chunks)`` rows as ``(seq, call)``: the stored JSON text where the row references no chunk, else
    the call's JSON data with every chunked string back in place — one string object per distinct string, shared
    by every call that carries it (a StoreError naming ``where`` and the call when the row or a chunk is damaged or
    missing; ``files``: where a SQLite store keeps its long chunks). The caller validates the RecordedCall."""
    return resolve_rows(conn, where, rows, "recorded call #{}", files)


def resolve_rows(
    conn: Connection, where: str, rows: Sequence[tuple[Any, Any, str | None]], what: str, files: BlobFiles | None
) -> list[tuple[Any, Any]]:
    """``(key, data, chunks)`` rows (recorded calls, steps, a run row) as ``(key, data)``: ``data`` as it is where
    ``chunks`` is NULL, else its JSON data with every referenced text in place (:func:`resolve_calls`; ``what``
    names a row in messages, ``{}`` its key)."""
    refs_of = {key: _parse_refs(where, what.format(key), chunks) for key, _, chunks in rows if chunks is not None}
    if not refs_of:
        return [(key, data) for key, data, _ in rows]
    wanted = {d for refs in refs_of.values() for r in refs for d in ([r[0]] if isinstance(r[0], str) else r[0])}
    texts = _chunk_texts(conn, where, wanted, files)
    joined: dict[str, str] = {}
    out: list[tuple[Any, Any]] = []
    for key, data, _ in rows:
        refs = refs_of.get(key)
        if refs is None:
            out.append((key, data))
            continue
        try:
            value = json.loads(data)
            for ref, *path in refs:
                mark = placeholder(ref)
                text = joined.get(mark)
                if text is None:
                    missing = next((d for d in ([ref] if isinstance(ref, str) else ref) if d not in texts), None)
                    if missing is not None:
                        raise CorruptRecordError(
                            f"{where}: {what.format(key)} references the chunk {missing} the store lacks")
                    text = joined[mark] = texts[ref] if isinstance(ref, str) else "".join(texts[d] for d in ref)
                _place(value, mark, path, text)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise CorruptRecordError(f"{where}: {what.format(key)} is corrupt ({exc})") from exc
        out.append((key, value))
    return out
