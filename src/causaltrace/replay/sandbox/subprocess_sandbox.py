"""``SubprocessSandbox``: untrusted code in a bubblewrap (or ``unshare``) jail with rlimits and per-run cgroups.

ARCHITECTURE decision 7; FACTS.md "Isolation primitives that work here". What one run gets:

* **Namespaces** — bubblewrap (``bwrap``) when it is installed: ``--unshare-all --unshare-user --disable-userns
  --uid 65534 --gid 65534 --cap-drop ALL --die-with-parent --new-session``: fresh user, pid, mount, network (only
  ``lo``; the host's loopback is unreachable), ipc, uts and cgroup namespaces, no capabilities, no nested user
  namespaces. Without bubblewrap (``use_bwrap=False``, or ``None`` and no ``bwrap`` on PATH) the **unshare
  fallback** is used: ``unshare --net --ipc --uts --pid --cgroup --mount --fork --kill-child`` runs
  :mod:`._launcher`, which builds the same file-system view by hand, ``chroot``s into it and drops to the host
  uid/gid 65534 (see that module for how it is weaker); it needs root.
* **File system** — a tmpfs root made read-only after set-up, holding only: the Python install the interpreter
  needs (its prefix and base prefix bound whole, or — for a system prefix such as ``/usr`` — just its ``sys.path``
  entries and the interpreter), ``/usr/bin``, ``/usr/lib``, ``/usr/lib64`` (+ the ``/bin``, ``/lib``, ``/lib64``
  links of a merged-/usr host), ``/etc/ld.so.cache``, ``/etc/alternatives``, a synthetic ``/etc/passwd``,
  ``/etc/group`` and ``/etc/hosts``, the code file and the worker program read-only under ``/opt/causaltrace``, and
  the caller's ``allow_paths`` read-only. Never ``/`` as a whole, ``/root``, ``$HOME``, the repository or ``/sys``.
  The only writable places: a fresh work dir at ``/work`` (the cwd; ``/sandbox`` instead when a read-only bind
  lives under ``/work`` — see ``work_dir``), a tmpfs of ``work_mb`` MiB made inside the sandbox with the run's
  ``files`` copied in (``_workdir.py``: nothing of it is on the host's disk; its inodes are bounded too), and
  size-limited tmpfs ``/tmp`` and ``/dev/shm``. ``/proc`` is the sandbox's own, with ``/proc/sys``
  read-only: sysctl writes are checked by uid alone and, when the caller is root, the sandbox's uid maps back to
  host root — without it ``kernel.core_pattern`` was writable from inside (host-root code execution). ``/dev`` is
  bubblewrap's minimal one, read-only. No ``/sys``.
* **Environment** — built from scratch (nothing of the parent's leaks): ``PATH`` (the interpreter's bin dir,
  ``/usr/local/bin:/usr/bin:/bin``), ``HOME`` = the work dir, ``LANG=C.UTF-8``, ``PYTHONDONTWRITEBYTECODE=1``,
  ``PYTHONNOUSERSITE=1``, ``PYTHONPATH`` = the work dir (files written there import like a script's siblings),
  ``TMPDIR=/tmp``, ``USER=nobody``, ``MALLOC_ARENA_MAX=2`` (threads do not reserve 64 MiB arenas of address space
  under ``RLIMIT_AS``).
* **Limits** — set in the child before it execs (``preexec_fn``): ``RLIMIT_AS`` = ``memory_mb`` (``MemoryError``),
  ``RLIMIT_CPU`` ≈ the timeout + 1 s (``run`` only), ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_CORE`` = 0, and
  the parent-death signal. Per run a cgroup v1 group in each of ``pids`` (``pids.max``, default 64 — this, not
  ``RLIMIT_NPROC``, contains a fork bomb: the sandbox's uid maps back to host root, whose process count is not
  limited), ``memory`` (``memory.limit_in_bytes`` = ``memory_mb``) and ``cpu`` (CFS quota, default one core); the
  child joins them from ``preexec_fn``, i.e. before it execs, so every descendant is counted; they are removed
  after the run, after SIGKILLing what is left in them. Without writable cgroups the run goes on with a logged
  warning and ``RLIMIT_NPROC`` (effective only for a non-root uid). Cost: on cgroup v1 moving a process into a
  group waits for an RCU grace period (~10 ms when the system was idle) — the largest part of a run's overhead.
* **Wall clock** — at ``timeout_s`` the whole process group and every task in the run's cgroups get SIGKILL
  (bubblewrap's ``--new-session`` moves the code to a session of its own; ``--die-with-parent`` and the pid
  namespace take the rest down with it): ``CodeResult(timed_out=True, exit_code=-9)``.

A process killed by signal N is reported as ``exit_code=-N`` (the launchers exit with 128+N; a code that itself
exits with a status above 128 is indistinguishable, as in a shell). Each of stdout and stderr keeps its first
``max_output_bytes``. ``SandboxError`` is raised only when the sandbox itself cannot start (no bubblewrap and no
fallback, a bind source missing, the interpreter not executable inside).

Spawning a shell inside is **allowed and harmless**: ``/usr/bin`` is bound read-only (AutoGen ``sh`` blocks need
it), and a shell runs as uid 65534 of the sandbox's own user namespace, with no capabilities, no network, a
read-only file system outside the work dir and ``/tmp``, and the same pids/memory/cpu groups. Setuid binaries in
``/usr/bin`` are powerless (``nosuid`` mounts, ``no_new_privs``; host root is not mapped into the namespace).

``run`` and ``open_worker`` may be called from several threads at once; each run has its own dir and groups.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import json
import logging
import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from causaltrace.exceptions import InvalidInputError, SandboxError, UserError
from causaltrace.replay.sandbox._cgroup import RunCgroup, cgroups_available
from causaltrace.replay.sandbox._common import (
    DEFAULT_MAX_OUTPUT_BYTES,
    MAX_MESSAGE_BYTES,
    check_limits,
    decode_output,
    exit_code_of,
    write_files,
)
from causaltrace.replay.sandbox._workdir import bwrap_work_args
from causaltrace.replay.sandbox._worker import FramedChannel, FramedWorker, watchdog
from causaltrace.schema import CodeResult

__all__ = ["FALLBACK_WORK_DIR", "INNER_DIR", "PYWORKER_PATH", "WORK_DIR", "SubprocessSandbox", "SubprocessWorker"]

logger = logging.getLogger("causaltrace")

#: Where the work dir is mounted inside the sandbox (also the cwd and ``HOME``) — unless a read-only bind (the
#: interpreter's venv, an allowed path) lives under it; then ``FALLBACK_WORK_DIR`` (see ``SubprocessSandbox.work_dir``).
WORK_DIR = "/work"
FALLBACK_WORK_DIR = "/sandbox"
#: Read-only directory inside the sandbox holding the code file (``main.py``) and the worker program.
INNER_DIR = "/opt/causaltrace"
#: The persistent Python worker program as seen inside the sandbox.
PYWORKER_PATH = f"{INNER_DIR}/_pyworker.py"
SANDBOX_UID = 65534
MIB = 1 << 20

_HERE = Path(__file__).resolve().parent
_PYWORKER_SOURCE = _HERE / "_pyworker.py"
_LAUNCHER_SOURCE = _HERE / "_launcher.py"
_SYSTEM_PREFIXES = {"/", "/usr", "/usr/local"}
_START_FAILURE_PREFIXES = (b"bwrap: ", b"causaltrace launcher: ", b"unshare: ")
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)

_PROBE = (
    "import json, sys; print(json.dumps({'prefix': sys.prefix, 'base_prefix': sys.base_prefix, "
    "'exec_prefix': sys.exec_prefix, 'base_exec_prefix': sys.base_exec_prefix, 'path': sys.path}))"
)


# ------------------------------------------------------------------------------------------ file-system layout


@dataclass(frozen=True)
class _PythonLayout:
    executable: str  # the interpreter's path, the same inside the sandbox
    binds: tuple[str, ...]  # read-only, each at its own path
    bin_dir: str


def _dedupe(paths: set[str]) -> tuple[str, ...]:
    """Existing paths, minus those already inside another one (bubblewrap cannot mount inside a read-only bind)."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths if p and os.path.exists(p)}, key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return tuple(sorted(kept))


@functools.lru_cache(maxsize=16)
def _python_layout(python: str) -> _PythonLayout:
    executable = python if os.path.isabs(python) else shutil.which(python)
    if not executable or not os.access(executable, os.X_OK):
        raise SandboxError(f"the sandbox interpreter {python!r} is not an executable file")
    executable = os.path.abspath(executable)
    if os.path.realpath(executable) == os.path.realpath(sys.executable):
        info: dict[str, Any] = {
            "prefix": sys.prefix,
            "base_prefix": sys.base_prefix,
            "exec_prefix": sys.exec_prefix,
            "base_exec_prefix": sys.base_exec_prefix,
            "path": list(sys.path),
        }
    else:
        try:
            probe = subprocess.run(
                [executable, "-I", "-c", _PROBE],
                capture_output=True,
                text=True,
                timeout=60,
                env={"PATH": "/usr/bin:/bin"},
            )
            info = json.loads(probe.stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise SandboxError(f"cannot inspect the sandbox interpreter {executable!r}: {exc}") from exc
    binds: set[str] = set()
    for key in ("prefix", "base_prefix", "exec_prefix", "base_exec_prefix"):
        prefix = os.path.normpath(info[key])
        if prefix in _SYSTEM_PREFIXES:  # bind only what the interpreter uses, not all of /usr/local
            root = prefix.rstrip("/") + "/"
            binds.update(p for p in info["path"] if p.startswith(root) and os.path.isdir(p))
            libdir = Path(prefix, "lib")
            if libdir.is_dir():
                binds.update(str(p) for p in libdir.glob("libpython*"))
        else:
            binds.add(prefix)
    hop = executable  # every hop of the interpreter's symlink chain must exist inside
    for _ in range(16):
        binds.add(hop)
        if not os.path.islink(hop):
            break
        hop = os.path.normpath(os.path.join(os.path.dirname(hop), os.readlink(hop)))
    return _PythonLayout(executable=executable, binds=_dedupe(binds), bin_dir=os.path.dirname(executable))


@functools.lru_cache(maxsize=1)
def _system_binds() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Read-only system paths to bind and the (target, path) symlinks of a merged-/usr host."""
    binds = ["/usr/bin", "/usr/lib"]
    if os.path.isdir("/usr/lib64") and not os.path.islink("/usr/lib64"):
        binds.append("/usr/lib64")
    symlinks: list[tuple[str, str]] = []
    for top in ("/bin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(top):
            symlinks.append((os.readlink(top), top))
        elif os.path.isdir(top) and top in ("/bin", "/lib", "/lib64"):
            binds.append(top)
    binds += [p for p in ("/etc/ld.so.cache", "/etc/alternatives") if os.path.exists(p)]
    return tuple(binds), tuple(symlinks)


_static_lock = threading.Lock()
_static_dir: Path | None = None


def _static_etc() -> Path:
    """A process-lifetime directory with the synthetic passwd/group/hosts files bound into every sandbox."""
    global _static_dir
    with _static_lock:
        if _static_dir is None or not _static_dir.is_dir():
            path = Path(tempfile.mkdtemp(prefix="causaltrace-sbx-etc-"))
            path.chmod(0o755)
            (path / "passwd").write_text(
                f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
                f"nobody:x:{SANDBOX_UID}:{SANDBOX_UID}:nobody:/nonexistent:/usr/sbin/nologin\n"
            )
            (path / "group").write_text(f"root:x:0:\nnogroup:x:{SANDBOX_UID}:\n")
            (path / "hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n")
            for name in ("passwd", "group", "hosts"):
                (path / name).chmod(0o644)
            atexit.register(shutil.rmtree, path, True)
            _static_dir = path
        return _static_dir


# ------------------------------------------------------------------------------------------ child set-up


class _Preexec:
    """Runs in the forked child before exec: join the cgroups, set the rlimits, die with the parent."""

    def __init__(self, cgroup: RunCgroup, limits: list[tuple[int, int, int]]) -> None:
        self.cgroup = cgroup
        self.limits = limits

    def __call__(self) -> None:
        self.cgroup.join_from_child()
        for which, soft, hard in self.limits:
            resource.setrlimit(which, (soft, hard))
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _nproc_limit(uid: int, extra: int) -> int:
    """RLIMIT_NPROC counts every process of the uid: allow its current count plus ``extra``."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(entry.path).st_uid == uid:
                    count += 1
    return count + extra


def _kill_group(proc: subprocess.Popen[bytes], cgroup: RunCgroup | None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    if cgroup is not None:
        cgroup.kill()


def _collect(
    proc: subprocess.Popen[bytes], cgroup: RunCgroup, deadline: float, limit: int
) -> tuple[bytes, bytes, int, int, bool]:
    """Read stdout/stderr (each capped at ``limit``) until exit or ``deadline``; kill everything at the deadline."""
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): 0, proc.stderr.fileno(): 1}
    bufs = [bytearray(), bytearray()]
    dropped = [0, 0]
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)

    def pump(wait: float) -> None:
        for key, _ in selector.select(wait):
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                selector.unregister(key.fd)
                continue
            index = streams[key.fd]
            room = max(0, limit - len(bufs[index]))
            bufs[index] += chunk[:room]
            dropped[index] += len(chunk) - min(room, len(chunk))

    timed_out = False
    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            pump(remaining)
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            _kill_group(proc, cgroup)
            proc.wait()
            drain_until = time.monotonic() + 0.5
            while selector.get_map() and time.monotonic() < drain_until:
                pump(0.05)
    finally:
        selector.close()
    return bytes(bufs[0]), bytes(bufs[1]), dropped[0], dropped[1], timed_out


# ------------------------------------------------------------------------------------------ the sandbox


class SubprocessSandbox:
    """Runs untrusted code in a bubblewrap sandbox (else the ``unshare`` fallback); see the module docstring.

    Args:
        python: the interpreter to run inside (its install is bound read-only); default the current one.
        allow_paths: extra host paths bound read-only at the same path inside (data sets, packages).
        use_bwrap: ``True`` requires bubblewrap, ``False`` forces the ``unshare`` fallback (root only), ``None``
            uses bubblewrap when ``bwrap`` is on PATH.
        pids_max: the pids cgroup's ``pids.max`` (processes + threads of one run or worker).
        cpus: CPU quota of the cpu cgroup, in cores (``None``: no quota).
        max_file_mb: ``RLIMIT_FSIZE``, the largest file the code may write.
        max_open_files: ``RLIMIT_NOFILE``.
        tmp_mb: size of the tmpfs ``/tmp`` (its pages are also charged to the memory cgroup).
        work_mb: size of the tmpfs work dir (``files`` must fit in it; its pages are charged to the memory cgroup).
        work_inodes: the work dir's ``nr_inodes`` in the unshare fallback (bubblewrap cannot set it: there the
            inodes' kernel memory, charged to the memory cgroup, bounds them).
        max_output_bytes: how much of each of stdout and stderr a run keeps.
    """

    def __init__(
        self,
        python: str = sys.executable,
        *,
        allow_paths: Sequence[str | os.PathLike[str]] = (),
        use_bwrap: bool | None = None,
        pids_max: int = 64,
        cpus: float | None = 1.0,
        max_file_mb: int = 64,
        max_open_files: int = 256,
        tmp_mb: int = 64,
        work_mb: int = 240,
        work_inodes: int = 65536,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        self.python = python
        self.allow_paths = tuple(os.path.abspath(os.fspath(p)) for p in allow_paths)
        for path in self.allow_paths:
            if not os.path.exists(path):
                raise UserError(f"allow_paths entry {path!r} does not exist")
        bwrap = shutil.which("bwrap")
        unshare = shutil.which("unshare")
        self.mode: Literal["bwrap", "unshare"]
        if use_bwrap is True and not bwrap:
            raise SandboxError("use_bwrap=True but bubblewrap is not installed: apt-get install -y bubblewrap")
        if use_bwrap is True or (use_bwrap is None and bwrap):
            self.mode, self._tool = "bwrap", bwrap or "bwrap"
        else:
            if not unshare or os.geteuid() != 0:
                raise SandboxError(
                    "no bubblewrap, and the unshare fallback needs root and util-linux unshare: "
                    "install bubblewrap (apt-get install -y bubblewrap)"
                )
            self.mode, self._tool = "unshare", unshare
        self.pids_max = pids_max
        self.cpus = cpus
        self.max_file_mb = max_file_mb
        self.max_open_files = max_open_files
        self.tmp_mb = tmp_mb
        self.work_mb = work_mb
        self.work_inodes = work_inodes
        self.max_output_bytes = max_output_bytes
        #: The work dir's path inside the sandbox: ``/work``, or ``/sandbox`` when a read-only bind lives under
        #: ``/work`` (e.g. a virtualenv inside a repository checked out under ``/work``).
        self.work_dir = WORK_DIR
        try:
            binds = [*_python_layout(python).binds, *self.allow_paths]
        except SandboxError:  # reported by the first run, as "the sandbox cannot start"
            binds = [*self.allow_paths]
        if any(path == WORK_DIR or path.startswith(WORK_DIR + "/") for path in binds):
            self.work_dir = FALLBACK_WORK_DIR

    def __repr__(self) -> str:
        return f"SubprocessSandbox(python={self.python!r}, mode={self.mode!r})"

    # --------------------------------------------------------------------------------------------- public API

    def run(
        self, code: str, *, files: Mapping[str, bytes] | None = None, timeout_s: float, memory_mb: int
    ) -> CodeResult:
        """Run ``code`` as ``python /opt/causaltrace/main.py`` in the work dir; returns for whatever the code does."""
        check_limits(timeout_s, memory_mb)
        started = time.monotonic()
        root = Path(tempfile.mkdtemp(prefix="causaltrace-sbx-"))
        proc: subprocess.Popen[bytes] | None = None
        cgroup: RunCgroup | None = None
        try:
            work = self._make_work_dir(root, files)
            main = root / "main.py"
            main.write_text(code, encoding="utf-8")
            main.chmod(0o644)
            layout = _python_layout(self.python)
            proc, cgroup = self._spawn(
                [layout.executable, f"{INNER_DIR}/main.py"],
                root=root,
                work=work,
                extra_binds=[(str(main), f"{INNER_DIR}/main.py")],
                memory_mb=memory_mb,
                cpu_seconds=math.ceil(timeout_s) + 1,
                stdin=subprocess.DEVNULL,
            )
            out, err, out_dropped, err_dropped, timed_out = _collect(
                proc, cgroup, time.monotonic() + timeout_s, self.max_output_bytes
            )
            returncode = proc.returncode
            if not timed_out and returncode == 1 and not out and err.startswith(_START_FAILURE_PREFIXES):
                raise SandboxError(f"the sandbox could not start: {err.decode(errors='replace').strip()}")
            return CodeResult(
                exit_code=-signal.SIGKILL if timed_out else exit_code_of(returncode),
                stdout=decode_output(out, out_dropped),
                stderr=decode_output(err, err_dropped),
                timed_out=timed_out,
                duration_s=round(time.monotonic() - started, 6),
            )
        finally:
            if proc is not None:
                if proc.poll() is None:
                    _kill_group(proc, cgroup)
                    proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
            if cgroup is not None:
                cgroup.remove()
            shutil.rmtree(root, ignore_errors=True)

    def open_worker(self, argv: list[str], *, timeout_s: float, memory_mb: int) -> SubprocessWorker:
        """Start ``argv`` as a persistent sandboxed process speaking one JSON message per line on stdin/stdout.

        ``timeout_s`` is the idle timeout: the worker is killed when neither ``send`` nor ``recv`` has been called
        for that long (time spent waiting inside ``recv`` does not count), and the default ``recv`` timeout. The
        worker has no CPU-seconds limit; memory, pids and cpu limits are as for ``run``. ``PYWORKER_PATH``
        (``python_worker_argv()``) is the ready-made Python worker.
        """
        if not argv:
            raise InvalidInputError("open_worker needs a non-empty argv")
        check_limits(timeout_s, memory_mb)
        root = Path(tempfile.mkdtemp(prefix="causaltrace-sbx-"))
        try:
            work = self._make_work_dir(root, None)
            proc, cgroup = self._spawn(
                list(argv),
                root=root,
                work=work,
                extra_binds=[],
                memory_mb=memory_mb,
                cpu_seconds=None,
                stdin=subprocess.PIPE,
            )
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return SubprocessWorker(proc, cgroup, root, idle_timeout_s=timeout_s)

    def python_worker_argv(self) -> list[str]:
        """The argv of the ready-made persistent Python worker (``_pyworker.py``) inside this sandbox."""
        return [_python_layout(self.python).executable, PYWORKER_PATH]

    # --------------------------------------------------------------------------------------------- internals

    def _make_work_dir(self, root: Path, files: Mapping[str, bytes] | None) -> Path:
        """The host staging dir of ``files`` (copied into the sandbox's own work dir tmpfs at start)."""
        work = root / "work"
        work.mkdir()
        write_files(work, files)
        total = sum(p.stat().st_size for p in work.rglob("*") if p.is_file())
        if total > self.work_mb * MIB:
            raise InvalidInputError(f"the files of the run ({total} bytes) do not fit the work dir ({self.work_mb} MiB)")
        return work

    def _env(self, layout: _PythonLayout) -> dict[str, str]:
        path = [layout.bin_dir] + [p for p in ("/usr/local/bin", "/usr/bin", "/bin") if p != layout.bin_dir]
        return {
            "PATH": ":".join(path),
            "HOME": self.work_dir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONPATH": self.work_dir,
            "TMPDIR": "/tmp",
            "USER": "nobody",
            "LOGNAME": "nobody",
            "MALLOC_ARENA_MAX": "2",
        }

    def _binds(
        self, layout: _PythonLayout, work: Path, extra: list[tuple[str, str]]
    ) -> tuple[list[tuple[str, str, bool]], list[tuple[str, str]]]:
        system, symlinks = _system_binds()
        etc = _static_etc()
        ro = _dedupe(set(system) | set(layout.binds) | set(self.allow_paths))
        binds: list[tuple[str, str, bool]] = [(path, path, False) for path in ro]
        binds += [(str(etc / name), f"/etc/{name}", False) for name in ("passwd", "group", "hosts")]
        binds.append((str(_PYWORKER_SOURCE), PYWORKER_PATH, False))
        binds += [(source, dest, False) for source, dest in extra]
        return binds, list(symlinks)

    def _limits(self, memory_mb: int, cpu_seconds: int | None, cgroup: RunCgroup) -> list[tuple[int, int, int]]:
        limits = [
            (resource.RLIMIT_CORE, 0, 0),
            (resource.RLIMIT_NOFILE, self.max_open_files, self.max_open_files),
            (resource.RLIMIT_FSIZE, self.max_file_mb * MIB, self.max_file_mb * MIB),
            (resource.RLIMIT_AS, memory_mb * MIB, memory_mb * MIB),
        ]
        if cpu_seconds:
            limits.append((resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1))
        if not cgroup.has_pids:
            uid = SANDBOX_UID if self.mode == "unshare" else os.geteuid()
            if uid != 0:  # not enforced for root: the pids cgroup is the real bound
                nproc = _nproc_limit(uid, self.pids_max)
                limits.append((resource.RLIMIT_NPROC, nproc, nproc))
        return limits

    def _spawn(
        self,
        argv: list[str],
        *,
        root: Path,
        work: Path,
        extra_binds: list[tuple[str, str]],
        memory_mb: int,
        cpu_seconds: int | None,
        stdin: int,
    ) -> tuple[subprocess.Popen[bytes], RunCgroup]:
        layout = _python_layout(self.python)
        env = self._env(layout)
        binds, symlinks = self._binds(layout, work, extra_binds)
        fds: list[int] = []
        if self.mode == "bwrap":
            work_args, fds = bwrap_work_args(work, self.work_dir, self.work_mb * MIB)
            command = self._bwrap_command(argv, binds, symlinks, work_args)
            popen_env = env
        else:
            command = self._unshare_command(argv, binds, symlinks, env, root, layout, work)
            popen_env = {"PATH": "/usr/bin:/bin"}
        cgroup = RunCgroup(
            pids_max=self.pids_max,
            memory_bytes=memory_mb * MIB if cgroups_available()["memory"] else None,
            cpu_quota=self.cpus,
        )
        try:
            proc = subprocess.Popen(
                command,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=popen_env,
                cwd=str(root),
                close_fds=True,
                start_new_session=True,
                pass_fds=fds,
                preexec_fn=_Preexec(cgroup, self._limits(memory_mb, cpu_seconds, cgroup)),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            cgroup.remove()
            raise SandboxError(f"cannot start the sandbox ({command[0]}): {exc}") from exc
        finally:
            for fd in fds:  # the child has its copies; bubblewrap reads them before the code starts
                os.close(fd)
        return proc, cgroup

    def _bwrap_command(
        self, argv: list[str], binds: list[tuple[str, str, bool]], symlinks: list[tuple[str, str]], work: list[str]
    ) -> list[str]:
        command = [
            self._tool,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID),
            "--cap-drop", "ALL",
            "--die-with-parent",
            "--new-session",
            "--hostname", "sandbox",
        ]  # fmt: skip
        # /proc/sys read-only: sysctl writes are checked by uid alone, and the sandbox's uid maps back to the
        # caller's — host root when we run as root (kernel.core_pattern would then be writable from inside).
        command += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
        command += ["--dev", "/dev", "--remount-ro", "/dev"]
        command += ["--size", str(self.tmp_mb * MIB), "--perms", "1777", "--tmpfs", "/dev/shm"]
        command += ["--size", str(self.tmp_mb * MIB), "--perms", "1777", "--tmpfs", "/tmp"]  # before binds under /tmp
        for target, path in symlinks:
            command += ["--symlink", target, path]
        for source, dest, writable in binds:
            command += ["--bind" if writable else "--ro-bind", source, dest]
        command += work  # the work dir: a tmpfs of its own, the staged files copied in
        command += ["--chdir", self.work_dir, "--remount-ro", "/", "--"]
        return command + argv

    def _unshare_command(
        self,
        argv: list[str],
        binds: list[tuple[str, str, bool]],
        symlinks: list[tuple[str, str]],
        env: dict[str, str],
        root: Path,
        layout: _PythonLayout,
        work: Path,
    ) -> list[str]:
        config = {
            "root": str(root / "newroot"),
            "binds": binds,
            "symlinks": symlinks,
            "tmp_size": self.tmp_mb * MIB,
            "work": {"staging": str(work), "dest": self.work_dir, "size": self.work_mb * MIB,
                     "inodes": self.work_inodes},
            "uid": SANDBOX_UID,
            "gid": SANDBOX_UID,
            "hostname": "sandbox",
            "cwd": self.work_dir,
            "env": env,
            "argv": argv,
        }
        return [
            self._tool, "--net", "--ipc", "--uts", "--pid", "--cgroup", "--mount", "--propagation", "private",
            "--fork", "--kill-child", "--",
            os.path.realpath(layout.executable), "-I", "-S", "-B", str(_LAUNCHER_SOURCE), json.dumps(config),
        ]  # fmt: skip


# ------------------------------------------------------------------------------------------ the worker


def _pump_stdout(stream: Any, channel: FramedChannel) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(1 << 16):
            channel.feed_stdout(chunk)
    channel.eof()


def _pump_stderr(stream: Any, channel: FramedChannel) -> None:
    with contextlib.suppress(OSError, ValueError):
        while chunk := stream.read1(1 << 16):
            channel.feed_stderr(chunk)


def _close_worker(proc: subprocess.Popen[bytes], cgroup: RunCgroup, root: Path, channel: FramedChannel) -> None:
    channel.closed.set()
    if proc.stdin is not None:
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
    if proc.poll() is None:
        _kill_group(proc, cgroup)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    cgroup.remove()
    shutil.rmtree(root, ignore_errors=True)


class SubprocessWorker(FramedWorker):
    """A persistent sandboxed process exchanging one JSON object per line over its stdin/stdout (``Worker``)."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        cgroup: RunCgroup,
        root: Path,
        *,
        idle_timeout_s: float,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        super().__init__(FramedChannel(idle_timeout_s, max_message_bytes))
        self._proc = proc
        channel = self._channel
        self._threads = [
            threading.Thread(target=_pump_stdout, args=(proc.stdout, channel), daemon=True),
            threading.Thread(target=_pump_stderr, args=(proc.stderr, channel), daemon=True),
            threading.Thread(
                target=watchdog,
                args=(channel, lambda: proc.poll() is None, lambda: _kill_group(proc, cgroup), str(proc.pid)),
                daemon=True,
            ),
        ]
        for thread in self._threads:
            thread.start()
        self._finalizer = weakref.finalize(self, _close_worker, proc, cgroup, root, channel)

    @property
    def pid(self) -> int:
        """The host pid of the sandbox launcher (the process-group leader)."""
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the worker process is still running."""
        return self._proc.poll() is None and not self._channel.closed.is_set()

    def _write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def _exit_code(self) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=10)  # stdout closed: the launcher follows within moments
        return self._proc.returncode
