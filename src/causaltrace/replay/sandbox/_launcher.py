"""The ``unshare`` fallback's in-namespace launcher (used only when bubblewrap is absent; stdlib only).

``unshare --net --ipc --uts --pid --fork --kill-child --mount --propagation private`` starts this script as root
in fresh namespaces; it then does by hand what bubblewrap would: mounts a tmpfs as the new root, bind-mounts the
allowed paths read-only (``nosuid,nodev``), mounts the work dir's bounded tmpfs and copies the staged files in, mounts ``/proc`` (of the new pid
namespace), a minimal ``/dev`` and a size-limited ``/tmp``, brings nothing up in the empty network namespace (not
even ``lo``), ``chroot``s into the new root, drops every privilege (``setgroups([])``, uid/gid 65534, which clears
all capabilities, ``PR_SET_NO_NEW_PRIVS``) and ``execve``s the command with the given environment.

Weaker than bubblewrap in two documented ways: ``chroot`` instead of ``pivot_root`` (an unprivileged process
cannot leave a chroot; the host mounts stay listed in ``/proc/self/mountinfo``) and no user namespace (the code
runs as the host's uid 65534, so host DAC permissions apply on top of the narrow binds).

Usage: ``python -I -S _launcher.py CONFIG_JSON``; CONFIG has ``root`` (an empty directory to mount the new root
on), ``binds`` ([source, destination, writable]), ``symlinks`` ([target, destination]), ``tmp_size``, ``work``
(``staging``, ``dest``, ``size``, ``inodes``: the work dir tmpfs and the files copied into it), ``uid``,
``gid``, ``hostname``, ``cwd``, ``env`` and ``argv``.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _enc(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _libc.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} -> {target}: {os.strerror(errno)}")


def _make_target(path: str, like: str) -> None:
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            open(path, "a").close()


def _bind(root: str, source: str, dest: str, writable: bool, *, nodev: bool = True) -> None:
    target = root + dest
    _make_target(target, source)
    _mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (MS_NODEV if nodev else 0) | (0 if writable else MS_RDONLY)
    _mount(None, target, None, flags)


def _work_dir(root: str, work: dict, uid: int, gid: int) -> None:
    """The work dir: a tmpfs bounded in size and inodes, owned by the sandbox's uid, with the staged files copied
    in (they stay on the host only in the staging dir the sandbox never sees)."""
    target = root + work["dest"]
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV,
           f"mode=0700,uid={uid},gid={gid},size={int(work['size'])},nr_inodes={int(work['inodes'])}")
    shutil.copytree(work["staging"], target, dirs_exist_ok=True)
    for here, dirs, files in os.walk(target):
        for name in dirs + files:
            os.lchown(os.path.join(here, name), uid, gid)


def main(config: dict) -> None:
    root = config["root"]
    os.makedirs(root, exist_ok=True)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    os.makedirs(root + "/proc", exist_ok=True)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(root + "/dev", exist_ok=True)
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=65536")
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        if os.path.exists("/dev/" + node):
            _bind(root, "/dev/" + node, "/dev/" + node, True, nodev=False)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/dev/shm", exist_ok=True)
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={int(config['tmp_size'])}")
    os.makedirs(root + "/tmp", exist_ok=True)  # before the binds: the interpreter may live under /tmp
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={int(config['tmp_size'])}")
    for target, dest in config["symlinks"]:
        os.makedirs(os.path.dirname(root + dest), exist_ok=True)
        os.symlink(target, root + dest)
    for source, dest, writable in config["binds"]:
        _bind(root, source, dest, writable)
    _work_dir(root, config["work"], config["uid"], config["gid"])
    _mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    name = config["hostname"].encode()
    _libc.sethostname(name, len(name))  # best effort: the uts namespace is private anyway
    os.chroot(root)
    os.chdir(config["cwd"])
    os.setgroups([])
    os.setgid(config["gid"])
    os.setuid(config["uid"])
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    argv = config["argv"]
    os.execvpe(argv[0], argv, config["env"])


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except BaseException as exc:  # report any set-up failure the way bwrap does, then exit 1
        sys.stderr.write(f"causaltrace launcher: {exc}\n")
        sys.stderr.flush()
        os._exit(1)
