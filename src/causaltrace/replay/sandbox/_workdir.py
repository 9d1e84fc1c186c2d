"""The subprocess sandbox's work dir: a tmpfs of its own with a size and an inode bound (issue 36 item 5).

The work dir used to be a host directory bound read-write into the sandbox, so the code could fill the host's disk
(2 GiB in 4.8 s) or its inode table (~200,000 files in 6 s), bounded only by the timeout. Now it is a tmpfs made
inside the sandbox's mount namespace, as Docker's ``/work`` is: ``work_mb`` MiB (a write past it is ``OSError``
ENOSPC), in RAM, gone with the run. The ``files`` of a run are staged on the host first (``write_files``) and
copied in:

* **bubblewrap** — ``--size --perms 0700 --tmpfs /work``, then ``--dir`` for each staged directory and ``--file FD``
  for each staged file (bubblewrap copies from a descriptor the parent passes). bubblewrap cannot set a tmpfs's
  ``nr_inodes``; each inode's kernel memory is charged to the run's memory cgroup (as the tmpfs's pages are), so an
  inode bomb ends at ``memory_mb`` like a memory bomb (killed, -9).
* **the unshare fallback** — the launcher mounts the tmpfs itself with ``size``, ``nr_inodes`` = ``work_inodes``
  (a file past it is ENOSPC), ``uid``/``gid`` 65534 and ``mode=0700``, and copies the staged tree into it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["bwrap_work_args", "staged_tree"]


def staged_tree(staging: Path) -> tuple[list[str], list[str]]:
    """The staged directories (parents first) and files, as paths relative to ``staging``."""
    dirs: list[str] = []
    files: list[str] = []
    for here, subdirs, names in os.walk(staging):
        subdirs.sort()
        rel = os.path.relpath(here, staging)
        if rel != ".":
            dirs.append(rel)
        files += [name if rel == "." else f"{rel}/{name}" for name in sorted(names)]
    return dirs, files


def bwrap_work_args(staging: Path, dest: str, size_bytes: int) -> tuple[list[str], list[int]]:
    """bubblewrap's arguments for a ``size_bytes`` tmpfs at ``dest`` holding the staged tree, and the descriptors
    they name (opened here: the caller passes them to the child and closes them after it started)."""
    args = ["--size", str(size_bytes), "--perms", "0700", "--tmpfs", dest]
    dirs, files = staged_tree(staging)
    for rel in dirs:
        args += ["--perms", "0755", "--dir", f"{dest}/{rel}"]
    fds: list[int] = []
    try:
        for rel in files:
            fd = os.open(staging / rel, os.O_RDONLY | os.O_CLOEXEC)
            fds.append(fd)
            args += ["--perms", "0644", "--file", str(fd), f"{dest}/{rel}"]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return args, fds
