"""Per-run cgroup v1 groups (pids, memory, cpu) for the subprocess sandbox (FACTS.md "Isolation primitives").

A :class:`RunCgroup` is made under each writable v1 hierarchy (``/sys/fs/cgroup/pids``, ``…/memory``, ``…/cpu``)
as ``causaltrace-<pid>-<n>``; the sandboxed child joins it from its ``preexec_fn`` (before it execs), so every
descendant is counted from the first instruction. ``kill()`` SIGKILLs whatever is left in the groups and
``remove()`` deletes them. When a hierarchy is missing or not writable (cgroup v2, no root) the run goes on
without it; :func:`cgroups_available` says which controllers work and logs one warning per process when pids
is missing, since then only ``RLIMIT_NPROC`` bounds the process count (and that is not enforced for root).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import threading
import time
from pathlib import Path

__all__ = ["CGROUP_PREFIX", "CGROUP_ROOT", "RunCgroup", "cgroups_available"]

logger = logging.getLogger("causaltrace")

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "causaltrace-"
_CONTROLLERS = ("pids", "memory", "cpu")
_counter = itertools.count()
_lock = threading.Lock()
_available: dict[str, bool] | None = None
_warned = False


def _probe(controller: str) -> bool:
    base = CGROUP_ROOT / controller
    if not (base / "cgroup.procs").is_file() or not os.access(base, os.W_OK):
        return False
    probe = base / f"{CGROUP_PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError:
        return False
    return True


def cgroups_available(*, refresh: bool = False) -> dict[str, bool]:
    """Which v1 controllers (pids, memory, cpu) this process can create groups in; probed once, then cached."""
    global _available, _warned
    with _lock:
        if _available is None or refresh:
            _available = {name: _probe(name) for name in _CONTROLLERS}
        if not _available["pids"] and not _warned:
            _warned = True
            logger.warning(
                "causaltrace sandbox: no writable cgroup v1 pids controller under %s; process counts fall back to "
                "RLIMIT_NPROC, which is not enforced for root — a fork bomb is then bounded only by the timeout",
                CGROUP_ROOT,
            )
        return dict(_available)


class RunCgroup:
    """The cgroups of one sandboxed process tree: create, join (from the child), kill, remove."""

    def __init__(self, *, pids_max: int | None, memory_bytes: int | None, cpu_quota: float | None) -> None:
        available = cgroups_available()
        name = f"{CGROUP_PREFIX}{os.getpid()}-{next(_counter)}"
        self.paths: list[Path] = []
        wanted = {"pids": pids_max, "memory": memory_bytes, "cpu": cpu_quota}
        try:
            for controller, value in wanted.items():
                if value is None or not available.get(controller):
                    continue
                path = CGROUP_ROOT / controller / name
                path.mkdir()
                self.paths.append(path)
                if controller == "pids":
                    (path / "pids.max").write_text(str(int(value)))
                elif controller == "memory":
                    (path / "memory.limit_in_bytes").write_text(str(int(value)))
                    with contextlib.suppress(OSError):  # absent without swap accounting
                        (path / "memory.memsw.limit_in_bytes").write_text(str(int(value)))
                    with contextlib.suppress(OSError):
                        (path / "memory.swappiness").write_text("0")
                else:
                    period = 100_000
                    (path / "cpu.cfs_period_us").write_text(str(period))
                    (path / "cpu.cfs_quota_us").write_text(str(max(1000, int(period * float(value)))))
        except OSError as exc:
            logger.warning("causaltrace sandbox: could not set up cgroup %s (%s); running without it", name, exc)
            self.remove()
            self.paths = []
        self.procs_files = [os.fsencode(path / "cgroup.procs") for path in self.paths]

    @property
    def has_pids(self) -> bool:
        """Whether a pids group bounds this run's process count."""
        return any(path.parent.name == "pids" for path in self.paths)

    def join_from_child(self) -> None:
        """Put the calling process in every group; called in the forked child before exec (async-signal-light)."""
        pid = str(os.getpid()).encode()
        for procs in self.procs_files:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def pids(self) -> set[int]:
        """The processes currently in any of the groups."""
        found: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(OSError):
                found.update(int(line) for line in (path / "cgroup.procs").read_text().split())
        return found

    def kill(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every process in the groups until they are empty (or ``timeout_s`` passes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                logger.warning("causaltrace sandbox: processes %s survived SIGKILL in %s", sorted(pids), self.paths)
                return
            time.sleep(0.005)

    def remove(self, timeout_s: float = 5.0) -> None:
        """Kill what is left and delete the groups (retrying while the kernel still counts exiting tasks)."""
        if not self.paths:
            return
        self.kill(timeout_s)
        deadline = time.monotonic() + timeout_s
        for path in self.paths:
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        logger.warning("causaltrace sandbox: could not remove cgroup %s: %s", path, exc)
                        break
                    self.kill(0.5)
                    time.sleep(0.005)
        self.paths = []
