"""The parent side of a persistent sandboxed worker, shared by the subprocess and Docker sandboxes.

Framing: one JSON object per line (UTF-8) in each direction; the worker's stderr is kept as a 64 KiB tail for
diagnostics. A reader thread turns the worker's output into messages; a watchdog kills the worker after
``idle_timeout_s`` without traffic (time spent inside ``recv`` or inside ``busy()`` does not count).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from causaltrace.exceptions import SandboxError, SandboxTimeout, SandboxViolation
from causaltrace.replay.sandbox._common import MAX_MESSAGE_BYTES, dumps_message, exit_code_of

__all__ = ["FramedChannel", "FramedWorker"]

logger = logging.getLogger("causaltrace")

_EOF = object()
_STDERR_TAIL = 64 << 10


class _BadFrame:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class FramedChannel:
    """State shared by the worker object and its threads (no reference to the worker, so it can be collected)."""

    def __init__(self, idle_timeout_s: float, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.max_message_bytes = max_message_bytes
        self.messages: queue.Queue[Any] = queue.Queue()
        self.lock = threading.Lock()
        self.last_activity = time.monotonic()
        self.receiving = 0
        self.closed = threading.Event()
        self.exited = threading.Event()  # the worker's stdout reached EOF: it is gone (or going)
        self.idle_killed = False
        self.stderr_tail = bytearray()
        self._pending = bytearray()
        self._broken = False

    def touch(self) -> None:
        with self.lock:
            self.last_activity = time.monotonic()

    def feed_stdout(self, data: bytes) -> None:
        """Split the worker's stdout into lines and queue each as a message."""
        if self._broken:
            return
        self._pending += data
        while (end := self._pending.find(b"\n")) >= 0:
            line = bytes(self._pending[:end])
            del self._pending[: end + 1]
            self._queue_line(line)
        if len(self._pending) > self.max_message_bytes:
            self._broken = True
            self._pending.clear()
            self.messages.put(_BadFrame(f"a message longer than {self.max_message_bytes} bytes"))

    def _queue_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            self.messages.put(_BadFrame(f"a line that is not JSON: {line[:200]!r}"))
            return
        except RecursionError:  # must not end the reader thread: recv() would wait out its whole timeout
            self.messages.put(_BadFrame(f"a message nested too deeply to decode: {line[:40]!r}…"))
            return
        self.messages.put(message if isinstance(message, dict) else _BadFrame(f"a non-object message: {line[:200]!r}"))

    def feed_stderr(self, data: bytes) -> None:
        with self.lock:
            self.stderr_tail += data
            del self.stderr_tail[:-_STDERR_TAIL]

    def eof(self) -> None:
        self.exited.set()
        self.messages.put(_EOF)


def watchdog(channel: FramedChannel, is_running: Callable[[], bool], kill: Callable[[], None], name: str) -> None:
    """Kill the worker after ``channel.idle_timeout_s`` without traffic; runs in a daemon thread."""
    interval = max(0.05, min(1.0, channel.idle_timeout_s / 4))
    while not channel.closed.wait(interval):
        if not is_running():
            return
        with channel.lock:
            idle = channel.receiving == 0 and time.monotonic() - channel.last_activity > channel.idle_timeout_s
        if idle:
            channel.idle_killed = True
            logger.info("causaltrace sandbox: worker %s idle for %.1fs, killed", name, channel.idle_timeout_s)
            kill()
            return


class FramedWorker:
    """The ``Worker`` protocol over a :class:`FramedChannel`; subclasses write bytes and report the exit code."""

    def __init__(self, channel: FramedChannel) -> None:
        self._channel = channel
        self.idle_timeout_s = channel.idle_timeout_s
        self._threads: list[threading.Thread] = []
        self._finalizer: Any = None

    # ----------------------------------------------------------------------------- subclass hooks

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def _exit_code(self) -> int | None:
        raise NotImplementedError

    # ----------------------------------------------------------------------------- protocol

    @property
    def stderr_tail(self) -> str:
        """The last 64 KiB the worker wrote to stderr (diagnostics; the protocol itself is on stdout)."""
        with self._channel.lock:
            return bytes(self._channel.stderr_tail).decode("utf-8", errors="replace")

    def _exit_description(self) -> str:
        code = self._exit_code()
        how = " (killed after the idle timeout)" if self._channel.idle_killed else ""
        tail = self.stderr_tail.strip()[-2000:]
        described = exit_code_of(code) if code is not None else "?"
        return f"the worker exited with code {described}{how}" + (f"; stderr: {tail}" if tail else "")

    def send(self, message: Mapping[str, Any]) -> None:
        """Send one message (a JSON object); SandboxError when the worker is closed or has exited."""
        if self._channel.closed.is_set():
            raise SandboxError("the worker is closed")
        if self._channel.exited.is_set():
            raise SandboxError(self._exit_description())
        data = dumps_message(message)
        self._channel.touch()
        try:
            self._write(data)
        except (OSError, ValueError) as exc:
            raise SandboxError(self._exit_description()) from exc
        finally:
            self._channel.touch()

    def recv(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The next message.

        Raises ``SandboxTimeout`` after ``timeout_s`` (default: the idle timeout), ``SandboxError`` once the worker has
        exited (with its exit code and stderr tail), ``SandboxViolation`` for a frame that is not a JSON object or
        is larger than ``max_message_bytes``.
        """
        if self._channel.closed.is_set():
            raise SandboxError("the worker is closed")
        wait = self.idle_timeout_s if timeout_s is None else timeout_s
        with self.busy():
            try:
                item = self._channel.messages.get(timeout=max(0.0, wait))
            except queue.Empty:
                raise SandboxTimeout(f"the worker sent nothing within {wait:g}s") from None
        if item is _EOF:
            self._channel.messages.put(_EOF)
            raise SandboxError(self._exit_description())
        if isinstance(item, _BadFrame):
            raise SandboxViolation(f"the worker broke the framing: it sent {item.reason}")
        return item

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Pause the idle clock (the parent is waiting for, or working for, the worker)."""
        with self._channel.lock:
            self._channel.receiving += 1
        try:
            yield
        finally:
            with self._channel.lock:
                self._channel.receiving -= 1
                self._channel.last_activity = time.monotonic()

    def close(self) -> None:
        """Kill the worker (if still running) and release everything it holds. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=2)

    def __enter__(self) -> FramedWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
