"""Helpers shared by the sandboxes: files into a work dir, exit codes, output caps, JSON framing."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from causaltrace.exceptions import InvalidInputError

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "check_limits",
    "MAX_MESSAGE_BYTES",
    "decode_output",
    "dumps_message",
    "exit_code_of",
    "relative_file_path",
    "write_files",
]

#: Each of stdout and stderr keeps at most this many bytes of a run (the rest is counted and dropped).
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
#: The largest framed JSON message a worker may send (one line).
MAX_MESSAGE_BYTES = 64 << 20


def check_limits(timeout_s: float, memory_mb: int) -> None:
    """InvalidInputError unless ``timeout_s`` > 0 and ``memory_mb`` >= 16."""
    if not timeout_s or timeout_s <= 0:
        raise InvalidInputError(f"timeout_s must be a positive number of seconds, not {timeout_s!r}")
    if memory_mb < 16:
        raise InvalidInputError(f"memory_mb must be at least 16, not {memory_mb!r}")


def relative_file_path(name: str) -> PurePosixPath:
    """``name`` as a safe path relative to the work dir; InvalidInputError for absolute or escaping paths."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or any(part in ("..", "") for part in path.parts) or str(path) == ".":
        raise InvalidInputError(f"sandbox file name {name!r} must be a relative path inside the work dir")
    return path


def write_files(
    work_dir: Path, files: Mapping[str, bytes | str] | None, *, owner: tuple[int, int] | None = None
) -> None:
    """Write ``files`` (relative name -> content) into ``work_dir``, creating sub-directories."""
    for name, content in (files or {}).items():
        relative = relative_file_path(name)
        target = work_dir.joinpath(*relative.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else bytes(content))
        if owner is not None:
            for path in [target, *target.relative_to(work_dir).parents]:
                os.chown(work_dir / path, *owner)


def exit_code_of(returncode: int) -> int:
    """A sandbox launcher's exit status as subprocess reports it: death by signal N (status 128+N) is ``-N``."""
    if 128 < returncode <= 128 + 64:
        return -(returncode - 128)
    return returncode


def decode_output(data: bytes | bytearray, dropped: int = 0) -> str:
    """UTF-8 text of captured output, with a note when bytes beyond the cap were dropped."""
    text = bytes(data).decode("utf-8", errors="replace")
    if dropped:
        text += f"\n[causaltrace sandbox: {dropped} more bytes of output dropped]\n"
    return text


def _fallback(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return repr(value)


def dumps_message(message: Mapping[str, Any]) -> bytes:
    """One framed message: compact JSON on one line (non-JSON values become their repr), newline-terminated."""
    return json.dumps(dict(message), default=_fallback, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
