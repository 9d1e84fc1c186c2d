"""Who writes a live run: a process identified by pid, process start time and host, and whether it still runs.

The store writes a live run's writer into its row (``begin_run``); a reader judges a ``running`` run whose writer
is gone as ``incomplete``. The start time (``/proc/<pid>/stat`` field 22, or ``ps -o lstart=`` where there is no
``/proc``) guards against a reused pid; another host's writer is never judged (its process table is not ours).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["WriterInfo"]


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start_time)`` from ``/proc/<pid>/stat`` (fields 3 and 22), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    # Field 2 (comm) is in parentheses and may itself hold spaces and parentheses: split after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    if len(rest) < 20:
        return None
    return rest[0], rest[19]


def _has_proc() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _ps_start_time(pid: int) -> str:
    """Best effort process start time without /proc (macOS, BSD): ``ps -o lstart=``; empty when unknown."""
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _start_time_of(pid: int) -> str:
    if _has_proc():
        stat = _proc_stat(pid)
        return stat[1] if stat else ""
    if os.name == "posix":
        return _ps_start_time(pid)
    return ""


_current: WriterInfo | None = None


@dataclass(frozen=True)
class WriterInfo:
    """The process writing a live run: pid, process start time (clock ticks since boot, as text) and host."""

    pid: int
    start_time: str
    host: str

    @classmethod
    def current(cls) -> WriterInfo:
        """This process (computed once per pid, so a forked child gets its own)."""
        global _current
        pid = os.getpid()
        if _current is None or _current.pid != pid:
            _current = cls(pid=pid, start_time=_start_time_of(pid), host=socket.gethostname())
        return _current

    def is_alive(self) -> bool:
        """Whether the writer still runs.

        Same host: the process exists (and is not a zombie) AND its start time equals ``start_time`` — a reused pid
        belongs to another process and counts as dead. Another host: True (unknown; such a run is never marked
        incomplete). Where the process table cannot be read (Windows), also True.
        """
        if self.host != socket.gethostname():
            return True
        if self.pid <= 0:
            return False
        if _has_proc():
            stat = _proc_stat(self.pid)
            if stat is None or stat[0] in ("Z", "X", "x"):
                return False
            return not self.start_time or stat[1] == self.start_time
        if os.name != "posix":
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, owned by someone else
        except OSError:
            return True
        if not self.start_time:
            return True
        now = _ps_start_time(self.pid)
        return not now or now == self.start_time
