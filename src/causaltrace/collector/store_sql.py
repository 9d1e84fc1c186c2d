"""What the store's two backends share: the SQL both speak, the run row, and turning rows back into Runs.

The statements here are written once, in the subset SQLite and PostgreSQL agree on, with ``?`` placeholders (the
PostgreSQL backend's connection turns them into psycopg's ``%s``); a statement the two spell differently (replacing
a run row, an insert that returns its new id, opening a write transaction) is a method of each backend instead.
:class:`Connection` is the part of a DB-API connection the store uses: ``sqlite3.Connection`` is one as it is, and
the PostgreSQL backend wraps psycopg's.
"""

from __future__ import annotations

import gc
import json
import logging
import operator
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, Protocol

import orjson
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from causaltrace.collector.blob_files import BLOB_MIN_BYTES, BlobFiles
from causaltrace.collector.writers import WriterInfo
from causaltrace.exceptions import InvalidInputError, StoreError, TraceAssemblyError
from causaltrace.recording.long_texts import json_literal
from causaltrace.schema import Dependency, RecordedCall, Recording, Run, Step, StepError, TokenUsage

__all__ = [
    "APART_MIN_CHARS",
    "CHILD_TABLES",
    "CorruptRecordError",
    "HEAD_COLUMNS",
    "DERIVED_TABLES",
    "REC_INSERT",
    "RUN_COLUMNS",
    "RUN_INSERT_NEW",
    "RUN_PLACEHOLDERS",
    "RUN_READ_COLUMNS",
    "STEP_UPSERT",
    "TRUNCATION_MARKER",
    "Backend",
    "WriteScope",
    "ImportOutcome",
    "Connection",
    "NoStoreYetError",
    "RunHead",
    "RunRow",
    "build_run",
    "cut_literal",
    "cut_step_json",
    "explain",
    "gc_paused",
    "iso",
    "long_text_on_top",
    "model_json",
    "now_iso",
    "refs_json",
    "run_head_json",
    "run_row_json",
    "shown_target",
    "sort_ts",
    "step_rows",
    "truncate_run_text",
    "truncate_step",
    "writer_of",
]

logger = logging.getLogger("causaltrace.collector.store")

#: What replaces the cut-off tail of a text field longer than the store's ``max_chars``.
TRUNCATION_MARKER = "…[causaltrace: truncated {n} chars]"


class CorruptRecordError(StoreError):
    """A stored record (a run row, a step, a recorded call, a diagnosis, a repair pair) cannot be read back: the
    store itself answers, only that record is damaged — a fleet command skips its run with one line and goes on."""


class NoStoreYetError(StoreError):
    """A read-only opening found a database no causaltrace wrote yet (no tables at all): the Store reads it as an
    empty store instead (as SQLite reads a missing file), and nothing is created there."""


class Cursor(Protocol):
    """The cursor methods the store reads results with."""

    #: How many rows the statement changed (an INSERT … ON CONFLICT DO NOTHING: 1 or 0).
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The connection methods the store uses (``sqlite3.Connection`` has them; psycopg's is wrapped)."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """One storage engine under :class:`~causaltrace.collector.store.Store` (SQLite or PostgreSQL)."""

    #: How messages name the store: a file path, or a URL without its password.
    location: str
    #: The engine's error base classes: the store turns them into a StoreError naming ``location``.
    errors: tuple[type[BaseException], ...]
    #: Whether a TEXT column takes UTF-8 bytes as they are (SQLite keeps them as a BLOB and reads them back as bytes:
    #: a recording chunk's JSON literal is written without decoding it; PostgreSQL's TEXT needs a str).
    utf8_blobs: bool
    #: Where the store keeps its long texts as files (SQLite: beside its file, ``blob_files.py``), or None (the
    #: database keeps everything: PostgreSQL).
    blob_files: BlobFiles | None

    def connect(self) -> Connection:
        """Open (and unless read-only, migrate) the store; a StoreError naming ``location`` when it cannot."""
        ...

    def begin_write(self, conn: Connection) -> None:
        """Open a write transaction that serialises with every other writer of this store."""
        ...

    def begin_read(self, conn: Connection) -> None:
        """Open a read transaction that sees one consistent snapshot."""
        ...

    def put_run(self, conn: Connection, values: Sequence[Any]) -> None:
        """Write a ``runs`` row (``RUN_COLUMNS`` order), replacing the row of that id as a new row."""
        ...

    def insert_id(self, conn: Connection, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT into a table with an auto-numbered ``id`` and return the new id."""
        ...

    def schema_version(self, conn: Connection) -> int:
        """The store's schema version."""
        ...

    def same_file(self) -> bool:
        """Whether the store the connection opened is still the one its target names (SQLite: the same file)."""
        ...


def shown_target(target: str | os.PathLike[str]) -> str:
    """A store target as messages show it: a path as it is; a URL with its password — in the user part
    (``user:secret@host``) or a ``password=`` query parameter — replaced by ``***``.

    The user part ends at the last ``@`` before the query, so a password holding ``@`` or ``/`` is masked whole; a
    URL that does not parse is masked the same way (no parsing involved)."""
    text = os.fspath(target)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    before_query, query_sep, query = rest.partition("?")
    userinfo, at, after = before_query.rpartition("@")
    if at and ":" in userinfo:
        before_query = f"{userinfo.split(':', 1)[0]}:***@{after}"
    query = re.sub(r"(^|&)(password=)[^&#]*", r"\1\2***", query, flags=re.IGNORECASE)
    return f"{scheme}://{before_query}{query_sep}{query}"


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def sort_ts(started_at: datetime | None) -> float:
    return started_at.timestamp() if started_at is not None else time.time()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many small objects are built (restored even on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


#: ``json.dumps(value, separators=(",", ":"))`` — a row's ``chunks`` list — with its encoder made once, not once a row
#: (json.dumps builds a new JSONEncoder whenever an argument is given: ~0.9 µs of its ~2.8).
refs_json = json.JSONEncoder(separators=(",", ":")).encode
#: A run row's JSON leaves these out (they are rows of their own). A set, never changed: pydantic-core takes a
#: frozenset its slow way (2.7 µs a row instead of 1.6).
_RUN_ROW_EXCLUDE = {"steps", "recording"}


def run_head_json(run: Run) -> str:
    """``run.model_dump_json(exclude={"steps", "recording"})`` — the same text — straight from the model's serializer
    (the Python wrapper around it was ~1.5 µs of ~4.3 a run row); a lone surrogate takes the model's own way."""
    try:
        return run.__pydantic_serializer__.to_json(run, exclude=_RUN_ROW_EXCLUDE).decode()  # type: ignore[no-any-return]
    except PydanticSerializationError:
        return run.model_dump_json(exclude={"steps", "recording"})


def model_json(model: Any) -> str:
    """``model.model_dump_json()`` — the same text — straight from the model's serializer (the store writes a JSON
    per step: pydantic's and the schema's Python layers around it were two calls a row); a text the serializer
    refuses (a lone surrogate) takes the model's own way, which replaces it."""
    try:
        return model.__pydantic_serializer__.to_json(model).decode()  # type: ignore[no-any-return]
    except PydanticSerializationError:
        return model.model_dump_json()  # type: ignore[no-any-return]


def explain(exc: ValidationError) -> str:
    """One line from a pydantic error: the first problem's location and message (and how many more)."""
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"{loc}: {first.get('msg', '')}{more}"


RUN_COLUMNS = (
    "run_id, framework, name, task, trace_id, started_at, ended_at, status, state, writer_pid, writer_start, "
    "writer_host, has_recording, written_at, data, sort_ts"
)
RUN_PLACEHOLDERS = ", ".join("?" * len(RUN_COLUMNS.split(",")))
#: A new run's row; nothing when the id is stored already (``rowcount`` says which: ``Store.begin_run``).
RUN_INSERT_NEW = f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({RUN_PLACEHOLDERS}) ON CONFLICT (run_id) DO NOTHING"
#: What a read takes of a run's row: its columns and ``chunks`` (schema v5: the long texts its ``data`` references;
#: a write sets it apart, only for a run that has them: :func:`run_row_json`).
RUN_READ_COLUMNS = RUN_COLUMNS + ", chunks"
#: A step's row; ``chunks`` lists the long texts its ``data`` references (schema v5: ``cut_step_json``), or NULL.
STEP_UPSERT = (
    "INSERT INTO steps (run_id, step_id, idx, kind, agent, status, parent, truncated, data, chunks) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, step_id) DO UPDATE SET idx = excluded.idx, kind = excluded.kind, agent = excluded.agent, "
    "status = excluded.status, parent = excluded.parent, truncated = excluded.truncated, data = excluded.data, "
    "chunks = excluded.chunks"
)
#: A recorded call's row; ``chunks`` lists the chunks its ``data`` references (``recording_chunks.py``), or NULL.
REC_INSERT = (
    "INSERT INTO recordings (run_id, seq, step_id, agent_key, kind, ordinal, request_hash, data, chunks) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


#: A run's rows besides its recording (which ``recording_chunks.delete_recording`` removes with its chunks).
CHILD_TABLES = ("steps",)
DERIVED_TABLES = ("diagnoses", "repair_pairs")
#: What :meth:`Store.import_run` did with a run.
ImportOutcome = Literal["stored", "unchanged", "replaced"]


def writer_of(pid: int | None, start: str | None, host: str | None) -> WriterInfo | None:
    """The writer a run row names (None: the row names none — an imported or finished-elsewhere run)."""
    if pid is None:
        return None
    return WriterInfo(pid=int(pid), start_time=start or "", host=host or "")


class RunHead(NamedTuple):
    """The columns of a ``runs`` row a write decides by (``HEAD_COLUMNS`` order)."""

    state: str
    writer_pid: int | None
    writer_start: str | None
    writer_host: str | None
    sort_ts: float

    def writer(self) -> WriterInfo | None:
        return writer_of(self.writer_pid, self.writer_start, self.writer_host)


HEAD_COLUMNS = "state, writer_pid, writer_start, writer_host, sort_ts"


class RunRow(NamedTuple):
    """A ``runs`` row by column name (fields in ``RUN_COLUMNS`` order)."""

    run_id: str
    framework: str
    name: str | None
    task: str | None
    trace_id: str | None
    started_at: str | None
    ended_at: str | None
    status: str
    state: str
    writer_pid: int | None
    writer_start: str | None
    writer_host: str | None
    has_recording: int
    written_at: str
    data: str | dict[str, Any]  # a dict: its referenced texts in place (``Store._stored_run``)
    sort_ts: float
    chunks: str | None = None

    def writer(self) -> WriterInfo | None:
        return writer_of(self.writer_pid, self.writer_start, self.writer_host)


# ---------------------------------------------------------------------------------------------------------- store


class WriteScope:
    """A write transaction of a Store as a context manager object, reused (``Store._write``: a generator-based one
    cost ~1.4 µs more a use, and the live writer enters one per batch and per operation): the store's lock, a
    ``BEGIN IMMEDIATE`` unless a :meth:`Store.transaction` is open (then the writes join it), the COMMIT, or the
    rollback of anything raised, the engine's errors as StoreError. ``batch``: it is the :meth:`Store.transaction`
    scope (writes entered inside it join). Nested entries keep their state on the store, under its lock."""

    __slots__ = ("batch", "settle", "store")

    def __init__(self, store: Any, *, batch: bool, settle: Callable[..., None]) -> None:
        self.store = store  # a collector.store.Store
        self.batch = batch
        self.settle = settle  # recording_chunks.settle_files (which imports this module)

    def __enter__(self) -> Connection:
        store = self.store
        store._lock.acquire()
        try:
            conn = store._connection()
            if store.readonly:
                raise StoreError(f"the store {store.location!r} was opened read-only; it cannot be written")
            began: Connection | None = None
            if not store._batched:
                try:
                    store._backend.begin_write(conn)
                except store._backend.errors as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise StoreError(f"cannot write to the store {store.location!r}: {exc}") from exc
                began = conn
        except BaseException:
            store._lock.release()
            raise
        store._open.append(began)
        if self.batch:
            store._batched += 1
        return conn

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        store = self.store
        try:
            if self.batch:
                store._batched -= 1
            conn = store._open.pop()
            if conn is None:  # a part of the open transaction: it commits or rolls back
                return False
            if exc is None:
                try:
                    conn.execute("COMMIT")
                except store._backend.errors as error:
                    store._roll_back(conn)
                    raise StoreError(f"cannot write to the store {store.location!r}: {error}") from error
                except BaseException:
                    store._roll_back(conn)
                    raise
                if store._files is not None and store._files.dropped:  # the files of the chunk rows it deleted
                    self.settle(conn, store._files, store._backend.begin_write, committed=True)
                return False
            store._roll_back(conn)
            if isinstance(exc, store._backend.errors):
                raise StoreError(f"cannot write to the store {store.location!r}: {exc}") from exc
            return False
        finally:
            store._lock.release()




_CUT_TAIL = re.compile(re.escape(TRUNCATION_MARKER).replace(r"\{n\}", r"\d+") + r"\Z")


def _too_long(value: str, limit: int) -> bool:
    """Longer than ``limit`` and not already cut to it (a cut text stored again is not cut twice)."""
    return len(value) > limit and _CUT_TAIL.match(value, limit) is None


def _cut(value: str, limit: int) -> str:
    return value[:limit] + TRUNCATION_MARKER.format(n=len(value) - limit)


def truncate_run_text(run: Run, limit: int) -> Run:
    """The run with its own long texts — the outcome's final answer and reason, the task — cut to ``limit`` as a
    step's fields are (issue 36 item 7: a 50 MB tool result that became the final answer was stored whole in the
    run's row beside its recording, which keeps the full text once), or ``run`` itself."""
    outcome = run.outcome
    answer = outcome.final_answer
    update: dict[str, Any] = {}
    cut_outcome: dict[str, Any] = {}
    # (the lengths first: _too_long is a call, and this runs on every write of a run's row)
    if answer is not None and len(answer) > limit and _too_long(answer, limit):
        cut_outcome["final_answer"] = _cut(answer, limit)
    if len(outcome.reason) > limit and _too_long(outcome.reason, limit):
        cut_outcome["reason"] = _cut(outcome.reason, limit)
    if cut_outcome:
        update["outcome"] = outcome.model_copy(update=cut_outcome)
    if run.task is not None and len(run.task) > limit and _too_long(run.task, limit):
        update["task"] = _cut(run.task, limit)
    return run.model_copy(update=update) if update else run


#: From how many characters a text of a step or run row is named by a key where the store can (``refer``): its
#: literal may then reach ``blob_files.BLOB_MIN_BYTES`` (four bytes a character at most, escapes aside), and
#: ``refer`` decides by the literal's size.
APART_MIN_CHARS = BLOB_MIN_BYTES // 4
#: A run's own texts a store cuts (:func:`truncate_run_text`), by their path in the run's JSON.
_RUN_TEXTS = (("outcome", "final_answer"), ("outcome", "reason"), ("task",))


def run_row_json(run: Run, limit: int, literals: dict[int, tuple[str, bytes | bytearray]],
                 refer: Callable[[bytes | bytearray], str | None] | None) -> tuple[str, str | None]:
    """The run's row: its JSON without steps and recording, its own long texts cut (:func:`truncate_run_text`),
    and its ``chunks`` (or None). With ``refer`` (schema v5, a SQLite store), a cut text whose literal it gives a key
    for is named by that key instead (as :func:`cut_step_json` does: the final answer is the tool result its steps
    show, one cut literal for all of them)."""
    refs: list[list[Any]] = []
    if refer is not None:
        outcome: dict[str, Any] = {}
        update: dict[str, Any] = {}
        for path in _RUN_TEXTS:
            text = getattr(run.outcome, path[1]) if len(path) == 2 else run.task
            if text is None or (len(text) <= limit and len(text) < APART_MIN_CHARS):
                continue
            try:
                key = refer(cut_literal(text, limit, literals))
            except TypeError:  # a lone surrogate: cut as the model's own JSON replaces it
                continue
            if key is not None:
                refs.append([key, *path])
                (outcome if len(path) == 2 else update)[path[-1]] = key
        if outcome:
            update["outcome"] = run.outcome.model_copy(update=outcome)
        if update:
            run = run.model_copy(update=update)
    return run_head_json(truncate_run_text(run, limit)), refs_json(refs) if refs else None


def long_text_on_top(step: Step, limit: int) -> bool:
    """Whether one of ``step``'s own texts, or a text directly under one of its dicts' keys — where the adapters put
    a tool's result or a message — is longer than ``limit``: such a step is cut BEFORE its JSON is made (a 50 MiB
    tool result was serialized whole, 100 MB of JSON for content + outputs, only to be cut and serialized again).
    A cheap screen (no walk): a long text deeper down is still found after the JSON is made."""
    if len(step.content) > limit or len(step.action_signature or "") > limit:
        return True
    if step.error is not None and len(step.error.message) > limit:
        return True
    for values in (step.inputs, step.outputs, step.arguments or (), step.metadata):
        for value in values.values() if values else ():
            if isinstance(value, str) and len(value) > limit:
                return True
    return False


def truncate_step(step: Step, limit: int, *, marks: list[str] | None = None,
                  paths: list[list[str | int]] | None = None, apart: int | None = None) -> Step:
    """The step with every text field longer than ``limit`` cut and marked, or ``step`` itself. With ``marks``,
    each such text is instead replaced by :func:`_mark` of its position and appended to ``marks`` (the caller puts
    its cut's JSON literal there: :func:`cut_step_json`), and with ``paths`` its path in the step's JSON too; with
    ``apart`` a text of at least that many characters is marked so as well, though not cut. A text under a key
    that is not a string (its JSON key would differ from its path) is cut in place, never marked."""
    cut = 0
    marked = 0

    def walk(value: Any, path: list[str | int] | None) -> Any:
        nonlocal cut, marked
        if isinstance(value, str):
            too_long = _too_long(value, limit)
            if too_long:
                cut += 1
            if marks is None or path is None or not (too_long or (apart is not None and len(value) >= apart)):
                return _cut(value, limit) if too_long else value
            marked += 1
            marks.append(value)
            if paths is not None:
                paths.append(path)
            return _mark(len(marks) - 1)
        if isinstance(value, dict):
            return {k: walk(v, [*path, k] if path is not None and isinstance(k, str) else None)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, [*path, i] if path is not None else None) for i, v in enumerate(value)]
        return value

    update: dict[str, Any] = {
        name: walk(getattr(step, name), [name])
        for name in ("content", "inputs", "outputs", "arguments", "metadata", "action_signature")
    }
    if step.error is not None:
        update["error"] = step.error.model_copy(update={"message": walk(step.error.message, ["error", "message"])})
    if not cut and not marked:
        return step
    if cut:
        update["truncated"] = True
    return step.model_copy(update=update)


#: What stands for a cut text while a step's JSON is made (:func:`cut_step_json`): ASCII, so its JSON is itself in
#: quotes, and a per-process nonce, so no stored text is taken for it (a count check guards that too).
_MARK = "causaltrace-cut:" + secrets.token_hex(8) + ":{}"
_MARKS = re.compile(rb'"' + re.escape(_MARK.split("{")[0].encode()) + rb'(\d+)"')


def _mark(n: int) -> str:
    return _MARK.format(n)


def cut_literal(text: str, limit: int, literals: dict[int, tuple[str, bytes | bytearray]]) -> bytes | bytearray:
    """The JSON literal of ``text`` cut to ``limit`` (by orjson: ``recording.long_texts.json_literal``; TypeError
    for a lone surrogate), made once per text object and kept in ``literals`` (id of the whole text -> (text,
    literal)) for the other fields and rows of the same write that show it."""
    known = literals.get(id(text))
    if known is None or known[0] is not text:
        known = literals[id(text)] = (text, json_literal(_cut(text, limit) if _too_long(text, limit) else text,
                                                         remember=False))
    return known[1]


def cut_step_json(step: Step, limit: int, literals: dict[int, tuple[str, bytes | bytearray]],
                  data: str | None = None, *, utf8: bool = False,
                  refer: Callable[[bytes | bytearray], str | None] | None = None,
                  refs: list[list[Any]] | None = None, apart: int | None = None) -> tuple[Step, str | bytes]:
    """The cut step (:func:`truncate_step`) and its JSON — the same text as ``model_json(truncate_step(step,
    limit))`` — made without serializing the long texts again: each cut text's JSON literal is made once
    (:func:`cut_literal`, kept in ``literals``) for the other fields and steps of the same write that show it (a
    tool's result is its step's content and its output, its message's, the final answer's: each cut copy was 2 M
    characters escaped again). The step's own JSON holds a mark where each of them goes. A text the literal cannot
    be made of (a lone surrogate) takes the plain way. ``data``: the step's JSON when the caller made it already
    (returned as it is when nothing is cut). ``utf8``: a cut step's JSON is returned as its UTF-8 bytes (for a
    backend that stores them as they are: ``Backend.utf8_blobs``) — the cut's marker is not ASCII, so as text a
    4 MB row was decoded to a two-byte-per-character string and encoded back to UTF-8 to be written, 5 ms a row.

    ``refer`` (schema v5, a SQLite store): a cut literal it gives a key for (a digest: the text is kept once, as a
    chunk) is not written into the JSON: the key stands there as a JSON string instead, and ``[key, *path]`` is
    appended to ``refs`` (the row's ``chunks``; a row read back puts the text in its place) — for a text of at
    least ``apart`` characters too, cut or not (:func:`truncate_step`)."""
    marks: list[str] = []
    paths: list[list[str | int]] = []
    cut = truncate_step(step, limit, marks=marks, paths=paths, apart=apart)
    if not marks:
        return cut, model_json(cut) if data is None else data
    try:
        pieces = []
        for text, path in zip(marks, paths, strict=True):
            literal = cut_literal(text, limit, literals)
            key = refer(literal) if refer is not None else None
            if key is not None and refs is not None:
                refs.append([key, *path])
                literal = b'"' + key.encode() + b'"'
            pieces.append(literal)
        data = cut.__pydantic_serializer__.to_json(cut)
    except (TypeError, PydanticSerializationError):  # a lone surrogate: the model's own way replaces it
        if refs:
            refs.clear()
        cut = truncate_step(step, limit)
        return cut, model_json(cut)
    used = [0] * (len(pieces) + 1)  # the last counts marks of no piece

    def literal(match: re.Match[bytes]) -> bytes | bytearray:
        n = min(int(match[1]), len(pieces))
        used[n] += 1
        return pieces[n] if n < len(pieces) else match[0]

    out = _MARKS.sub(literal, data)
    if used != [1] * len(pieces) + [0]:  # a stored text holding a mark (never by chance: the nonce): the plain way
        if refs:
            refs.clear()
        cut = truncate_step(step, limit)
        return cut, model_json(cut)
    return cut, out if utf8 else out.decode()

#: A Step's JSON by orjson from its ``__dict__`` (``step_rows``): the same bytes as pydantic's serializer —
#: which also writes a model's fields in its ``__dict__``'s order — in ~60 % of its time (3.0 -> 1.9 µs a row).
#: Taken only where the two are known to agree (``tests/collector/test_store_step_json.py``): a plain ``Step``
#: with every field, its dependencies, usage and error plain ``Dependency`` / ``TokenUsage`` / ``StepError``, no
#: ``source`` (an imported step's), and timestamps naive or in ``datetime.UTC`` (orjson writes an offset of
#: seconds its own way). Whatever orjson refuses (a lone surrogate, an integer beyond 64 bits, a non-text key,
#: a type outside JSON) takes pydantic's way. Floats are written alike (NaN and infinities as ``null``).
_STEP_FIELD_COUNT = len(Step.model_fields)
_DEPENDENCY = {Dependency}
_PLAIN_TZ = (None, UTC)
_dict_of = operator.attrgetter("__dict__")
_dumps = orjson.dumps
_UTC_Z = orjson.OPT_UTC_Z


def step_rows(run_id: str, steps: Sequence[Step], limit: int, *, utf8: bool,
              refer: Callable[[bytes | bytearray], str | None] | None = None,
              literals: dict[int, tuple[str, bytes | bytearray]] | None = None) -> list[tuple[Any, ...]]:
    """The steps' rows (``STEP_UPSERT`` order), their long texts cut to ``limit`` (:func:`cut_step_json`, with
    ``utf8``, ``refer`` and ``literals``: the cut literals of this write, made once)."""
    rows: list[tuple[Any, ...]] = []
    literals = {} if literals is None else literals
    # with refer, a text long enough for its literal to reach BLOB_MIN_BYTES is named by its key even uncut
    apart = APART_MIN_CHARS if refer is not None else None
    screen = limit if apart is None else min(limit, apart - 1)
    to_json = Step.__pydantic_serializer__.to_json
    for step in steps:
        if type(step) is not Step and not isinstance(step, Step):
            raise InvalidInputError(f"run {run_id!r}: expected Step objects, got {type(step).__name__}")
        if step.run_id != run_id:
            raise InvalidInputError(
                f"step {step.step_id!r} has run_id {step.run_id!r} but is being stored under run {run_id!r}"
            )
        data: str | bytes
        refs: list[list[Any]] | None = None
        # long_text_on_top inline (the writer runs this once a step): a long text on top is cut before any JSON
        on_top = len(step.content) > screen or (step.action_signature is not None
                                                 and len(step.action_signature) > screen)
        if not on_top:
            error = step.error
            on_top = error is not None and len(error.message) > screen
        if not on_top:
            arguments = step.arguments
            for values in (step.inputs, step.outputs, arguments, step.metadata) if arguments else (
                    step.inputs, step.outputs, step.metadata):
                for value in values.values() if values else ():
                    if isinstance(value, str) and len(value) > screen:
                        on_top = True
                        break
                if on_top:
                    break
        if on_top:
            refs = []
            step, data = cut_step_json(step, limit, literals, utf8=utf8, refer=refer, refs=refs, apart=apart)
        else:
            raw: bytes | None = None
            fields = step.__dict__
            if type(step) is Step and len(fields) == _STEP_FIELD_COUNT:  # orjson where it writes pydantic's bytes
                started, ended = fields["started_at"], fields["ended_at"]
                deps, usage, error = fields["depends_on"], fields["usage"], fields["error"]
                if (fields["source"] is None
                        and (started is None or (type(started) is datetime and started.tzinfo in _PLAIN_TZ))
                        and (ended is None or (type(ended) is datetime and ended.tzinfo in _PLAIN_TZ))
                        and (not deps or (type(deps) is tuple and {*map(type, deps)} == _DEPENDENCY))
                        and (usage is None or type(usage) is TokenUsage)
                        and (error is None or type(error) is StepError)):
                    if deps or usage is not None or error is not None:  # the nested models as their dicts
                        fields = fields.copy()
                        if deps:
                            fields["depends_on"] = [*map(_dict_of, deps)]
                        if usage is not None:
                            fields["usage"] = usage.__dict__
                        if error is not None:
                            fields["error"] = error.__dict__
                    try:
                        raw = _dumps(fields, option=_UTC_Z)
                    except TypeError:  # (orjson.JSONEncodeError): pydantic's way below
                        raw = None
            try:  # model_json inline
                data = (to_json(step) if raw is None else raw).decode()
            except PydanticSerializationError:
                data = step.model_dump_json()
            if len(data) > screen:  # cheap test: no text inside is longer than the JSON
                refs = []
                step, data = cut_step_json(step, limit, literals, data, utf8=utf8, refer=refer, refs=refs,
                                           apart=apart)
        rows.append((run_id, step.step_id, step.index, step.kind, step.agent, step.status, step.parent_step_id,
                     int(step.truncated), data, refs_json(refs) if refs else None))
    return rows


# -- reading -------------------------------------------------------------------------------------------------


def build_run(
    where: str, row: RunRow, steps: Sequence[tuple[str, str | bytes | dict[str, Any]]],
    recs: Sequence[tuple[int, str | dict[str, Any]]] | None
) -> Run:
    """Parse the stored JSON back into a Run; a corrupt record is a StoreError naming
    ``where`` (the run and its store) and the part. A recorded call comes as its JSON text, or as its JSON data
    (a call whose chunks were put back in place: ``recording_chunks.resolve_calls``). A step's JSON is text, or
    its UTF-8 bytes (SQLite keeps a cut step's row so: ``cut_step_json``).

    Each step is parsed on its own (faster than one big document, and a failure names the step) with the
    cyclic garbage collector paused: 10,000 steps allocate enough objects to trigger several full
    collections that would double the time.
    """
    try:
        fields = row.data if isinstance(row.data, dict) else json.loads(row.data)
        if not isinstance(fields, dict):
            raise ValueError(f"expected a JSON object, got {type(fields).__name__}")
        for key in ("steps", "recording"):
            fields.pop(key, None)
        base = Run.model_validate(fields)
    except (ValueError, TypeError) as exc:
        detail = explain(exc) if isinstance(exc, ValidationError) else str(exc)
        raise CorruptRecordError(f"{where}: the stored run record is corrupt ({detail})") from exc
    with gc_paused():
        parsed: list[Step] = []
        for step_id, data in steps:
            try:
                if isinstance(data, dict):  # its referenced texts put back (schema v5)
                    parsed.append(Step.model_validate(data))
                else:
                    parsed.append(Step.model_validate_json(data))
            except ValidationError as exc:
                raise CorruptRecordError(f"{where}: stored step {step_id!r} is corrupt ({explain(exc)})") from exc
        recording = None
        if recs is not None:
            calls = []
            for seq, data in recs:
                try:
                    if isinstance(data, str):
                        calls.append(RecordedCall.model_validate_json(data))
                    else:
                        calls.append(RecordedCall.model_validate(data))
                except ValidationError as exc:
                    raise CorruptRecordError(f"{where}: recorded call #{seq} is corrupt ({explain(exc)})") from exc
            recording = Recording(run_id=row.run_id, calls=tuple(calls))
        values = {name: getattr(base, name) for name in Run.model_fields}
        values.update(steps=tuple(parsed), recording=recording)
        try:
            return Run.model_validate(values)
        except (ValidationError, TraceAssemblyError) as exc:
            detail = explain(exc) if isinstance(exc, ValidationError) else exc.message
            if row.state == "finished":
                raise CorruptRecordError(f"{where}: the stored steps do not form a valid run ({detail})") from exc
            # A live or crashed run may lack a step that was never sent (a parent sent only at its end).
            logger.debug("causaltrace store: %s is partial (%s); returning it unvalidated", where, detail)
            return Run.model_construct(**values)
