"""Test helper: what the host sees of THIS test process's subprocess sandboxes — their processes and cgroups.

    from _sandbox_host import leftovers, kill_leftovers, our_cgroups, sandbox_processes

Other test sessions may run sandboxes on the same machine at the same time, so a process counts only when it sits
in one of this process's per-run cgroups or descends from this process. test_sandbox.py asserts after every test
that nothing is left; the attack table's watchdog (test_sandbox_security.py) kills what is left should containment
fail.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from causaltrace.replay.sandbox._cgroup import CGROUP_PREFIX, CGROUP_ROOT

_CONTROLLERS = ("pids", "memory", "cpu")
_MARKS = ("/opt/causaltrace/", "causaltrace-sbx-")  # the sandbox's paths, in a sandboxed process's command line


def is_ours(pid: str) -> bool:
    """Whether a host process belongs to THIS test process (other sessions may run sandboxes concurrently)."""
    try:
        if f"{CGROUP_PREFIX}{os.getpid()}-" in Path(f"/proc/{pid}/cgroup").read_text():
            return True
        for _ in range(64):  # walk up the parents
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = stat[stat.rindex(")") + 2 :].split()[1]
            if int(pid) == os.getpid():
                return True
            if int(pid) <= 1:
                return False
    except (OSError, ValueError):
        return False
    return False


def sandbox_processes() -> dict[int, str]:
    """This process's sandboxed host processes (their command line names the sandbox's paths): pid -> command line."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(mark in cmdline for mark in _MARKS) and is_ours(entry.name):
            found[int(entry.name)] = cmdline[:200]
    return found


def our_cgroups() -> list[Path]:
    """The per-run cgroups of this process that still exist."""
    return [
        path
        for controller in _CONTROLLERS
        if (CGROUP_ROOT / controller).is_dir()
        for path in (CGROUP_ROOT / controller).glob(f"{CGROUP_PREFIX}{os.getpid()}-*")
    ]


def leftovers() -> list[str]:
    """Every sandboxed process (``pid: command line``) and per-run cgroup of this process still there."""
    return [f"{pid}: {cmdline}" for pid, cmdline in sandbox_processes().items()] + [str(p) for p in our_cgroups()]


def kill_leftovers() -> None:
    """SIGKILL every sandboxed process and every task in this process's cgroups (an outer watchdog's action)."""
    for pid in sandbox_processes():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for group in our_cgroups():
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
