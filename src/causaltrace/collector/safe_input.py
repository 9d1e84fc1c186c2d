"""Guards for what comes in from outside — files to import, answers of a trace server, run ids — so that every bad
input is one :class:`~causaltrace.exceptions.InvalidInputError` / :class:`~causaltrace.exceptions.UserError` line
(the CLI's exit 2), never an internal error, a hang or an unbounded read (issue 36 item 6).

* :func:`refuse_special_file` — a FIFO, a device (``/dev/zero``), a socket is not read: opening a FIFO waits for a
  writer forever and a device never ends.
* :func:`reading` — a context manager around any reader of outside data that turns what Python's own parsers raise
  on hostile input into one line naming the source: an integer of more than 4,300 digits (``ValueError``), nesting
  deeper than the interpreter's stack (``RecursionError``), text that is not valid Unicode, a document too large
  for memory (``MemoryError``).
* :func:`loads` — ``json.loads`` with those guards and an integer-size limit of its own (:data:`MAX_INT_DIGITS`).
* :func:`fetch` / :func:`read_bounded` — an HTTP answer read with a total deadline (not only a per-read timeout: a
  server sending one byte a second never trips that), at most :func:`max_answer_bytes` bytes (after decompression:
  a gzip bomb stops there too) and a redirect loop named as such.
* :func:`check_run_id` — an imported run id is 1–:data:`MAX_RUN_ID_CHARS` printable characters (``""`` or a 1 MB id
  was stored and then unreachable).
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from causaltrace.exceptions import InvalidInputError, UserError

__all__ = ["MAX_INT_DIGITS", "MAX_RUN_ID_CHARS", "check_run_id", "fetch", "loads", "max_answer_bytes",
           "read_bounded", "reading", "refuse_special_file", "within"]

#: The longest integer a document may hold (a nanosecond timestamp has 19 digits; Python's own limit is 4,300).
MAX_INT_DIGITS = 40
#: The longest run id an import accepts (ids are shown, typed and used as prefixes).
MAX_RUN_ID_CHARS = 512
#: The default bound on one HTTP answer (``CAUSALTRACE_MAX_ANSWER_MB`` changes it).
_DEFAULT_ANSWER_MB = 256
_CHUNK = 1 << 16

T = TypeVar("T")


def refuse_special_file(path: str | os.PathLike[str], what: str = "input") -> None:
    """Raise InvalidInputError when ``path`` exists and is not a regular file or a directory (a FIFO, a device, a
    socket): reading it could wait forever or never end."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: the caller's own check says so
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
    raise InvalidInputError(f"{what} {os.fspath(path)!r} is {kind}, not a regular file; causaltrace reads files only")


def _why(exc: BaseException) -> str | None:
    """What a hostile input made a parser raise, in words; None for anything else."""
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    if isinstance(exc, MemoryError):
        return "it is too large to read into memory"
    if isinstance(exc, UnicodeError):
        return f"its text is not valid Unicode ({exc.reason})" if hasattr(exc, "reason") else "its text is not valid Unicode"
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return "it holds an integer with more than 4300 digits"
    return None


@contextmanager
def reading(source: str) -> Iterator[None]:
    """Turn what parsers raise on hostile input (:func:`_why`) into InvalidInputError naming ``source``."""
    try:
        yield
    except (RecursionError, MemoryError, UnicodeError, ValueError) as exc:
        why = _why(exc)
        if why is None or isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"{source}: {why}") from None


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise InvalidInputError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def loads(text: str | bytes, source: str) -> Any:
    """JSON of ``text`` with integers of at most :data:`MAX_INT_DIGITS` digits; any failure is one
    InvalidInputError naming ``source``."""
    try:
        with reading(source):
            return json.loads(text, parse_int=_bounded_int)
    except InvalidInputError as exc:
        raise InvalidInputError(exc.message if exc.message.startswith(source) else f"{source}: {exc.message}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def max_answer_bytes() -> int:
    """The most bytes one HTTP answer may hold: ``CAUSALTRACE_MAX_ANSWER_MB`` MiB (default 256)."""
    raw = (os.environ.get("CAUSALTRACE_MAX_ANSWER_MB") or "").strip()
    try:
        mb = float(raw) if raw else _DEFAULT_ANSWER_MB
    except ValueError:
        mb = _DEFAULT_ANSWER_MB
    return int(max(mb, 0.001) * (1 << 20))


def _too_large(source: str, limit: int) -> InvalidInputError:
    return InvalidInputError(f"{source} answered more than {limit >> 20 or limit} "
                             f"{'MiB' if limit >> 20 else 'bytes'} (CAUSALTRACE_MAX_ANSWER_MB raises the bound)")


def read_bounded(chunks: Callable[[], bytes], source: str, deadline: float, limit: int) -> bytes:
    """Bytes from ``chunks()`` (each call the next piece, ``b""`` at the end) until the end, failing past
    ``limit`` bytes or the monotonic ``deadline``."""
    parts: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise UserError(f"{source} did not finish its answer in time")
        piece = chunks()
        if not piece:
            return b"".join(parts)
        size += len(piece)
        if size > limit:
            raise _too_large(source, limit)
        parts.append(piece)


def within(seconds: float, work: Callable[[], T], what: str) -> T:
    """``work()`` with a total deadline: run in a daemon thread, abandoned (UserError "… no complete answer within
    N s") when it is still busy after ``seconds`` — what a per-read socket timeout cannot bound (an answer, or its
    headers, trickling in one byte a second)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="causaltrace-fetch", daemon=True)
    worker.start()
    worker.join(seconds + 0.5)
    if worker.is_alive():
        raise UserError(f"{what}: no complete answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def fetch(client: Any, url: str, *, source: str, timeout_s: float) -> Any:
    """GET ``url`` with an httpx ``client`` and return the response with its body read: within ``timeout_s`` in
    total, at most :func:`max_answer_bytes` bytes after decompression; a redirect loop is a UserError."""
    import httpx

    limit = max_answer_bytes()
    deadline = time.monotonic() + timeout_s

    def get() -> Any:
        try:
            with client.stream("GET", url) as response:
                pieces = response.iter_bytes(_CHUNK)
                body = read_bounded(lambda: next(pieces, b""), source, deadline, limit)
                return httpx.Response(response.status_code, headers=response.headers, content=body,
                                      request=response.request)
        except httpx.TooManyRedirects:
            raise UserError(f"{source} answered {url} with a redirect loop") from None

    return within(timeout_s, get, source)


def check_run_id(run_id: Any, source: str = "the input") -> None:
    """Raise InvalidInputError unless ``run_id`` is 1–:data:`MAX_RUN_ID_CHARS` characters with no control
    character: an empty or huge id was stored and then unreachable."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise InvalidInputError(f"{source}: a run id must not be empty (got {run_id!r})")
    if len(run_id) > MAX_RUN_ID_CHARS:
        raise InvalidInputError(f"{source}: a run id of {len(run_id)} characters (at most {MAX_RUN_ID_CHARS}): "
                                f"{run_id[:40]!r}…")
    if any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in run_id):
        raise InvalidInputError(f"{source}: the run id {run_id[:80]!r} holds control characters")

