"""Test helper: the sandbox security table (issue 7) — each attack, and what each sandbox must make of it.

    from _sandbox_attacks import attack_params, check_contained, fill, run_watched

One table serves both sandboxes: test_sandbox_security.py runs it in the subprocess sandbox (bubblewrap, and the
unshare fallback where the row holds for it), test_sandbox_docker.py in a container on a real Docker engine. A row
gives its code once, what the subprocess sandbox must produce, and — only where a container answers otherwise —
the container's own expectation or variant of the code. Rows use placeholders filled per test (``fill``): ``PORT``
(a port listening in the PARENT), ``HOST_IP`` (the host's non-loopback address; container rows only), ``SECRET`` (a
secret file in the parent's home), ``REPO`` (this repository), ``PREFIX`` (the Python install, bound read-only into
the subprocess sandbox), ``PARENT_PID``. The parent sets ``CAUSALTRACE_TEST_SECRET=hunter2`` in its own
environment for every row.

Decisions written down here:
* spawning a shell is ALLOWED and harmless: it runs as uid 65534, without capabilities, network or writable
  places outside /work and /tmp, inside the same pid namespace and cgroups;
* setuid binaries (su, mount) are powerless: nosuid mounts, no_new_privs, and host root is not mapped;
* a fork bomb is contained by the pids cgroup (pids.max=64) and ends at the wall-clock timeout (measured: ~3.1 s
  for timeout_s=3 on a 2-core machine), leaving nothing behind;
* the work dir is a tmpfs in both sandboxes (240 MiB): a disk bomb is ENOSPC at its size, an inode bomb ENOSPC at
  its nr_inodes (the unshare fallback, 65,536; Docker) or killed by the memory cgroup its inodes are charged to
  (bubblewrap, which cannot set nr_inodes: ~280,000 files at 256 MB, 4 s) — never the host's disk;
* the unshare fallback does not forbid nested user namespaces (bubblewrap's ``--disable-userns`` does), so that
  row runs on bubblewrap only.

Where a container answers otherwise: memory is bounded by the memory cgroup alone (no RLIMIT_AS), so a memory bomb
is OOM-killed (-9) instead of raising MemoryError; ``kill(-1)`` reaches nothing but the code itself and its init,
so the code survives it; the parent's pid and files do not exist inside; starting a container takes longer (a
larger default bound on a row's seconds). Rows of the container's own: the host's address, a 2 GiB allocation,
and an output flood (capped, never on the engine's disk).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from causaltrace.schema import CodeResult

REPO = Path(__file__).resolve().parents[1]
SECRET_TEXT = "TOPSECRET-4d1f"
ENV_SECRET = "hunter2"

Sandbox = Literal["bwrap", "unshare", "docker"]
# a row's bound on its seconds when it names none: the subprocess sandbox starts in well under a second, a container
# takes ~1 s on a loaded machine
DEFAULT_MAX_SECONDS: dict[Sandbox, float] = {"bwrap": 15.0, "unshare": 15.0, "docker": 20.0}


@dataclass(frozen=True)
class Expect:
    """What a row must produce: exit code (an int, ``"nonzero"`` or ``None`` for any), timeout, output."""

    exit_code: int | str | None = 0
    timed_out: bool = False
    stdout_has: tuple[str, ...] = ()
    stderr_has: tuple[str, ...] = ()
    never: tuple[str, ...] = ()  # in neither stdout nor stderr
    max_seconds: float | None = None  # None: the sandbox's DEFAULT_MAX_SECONDS
    timeout_s: float = 10.0
    memory_mb: int = 256


@dataclass(frozen=True)
class Attack:
    """One row of the table: its id, its code, and what each sandbox must make of it."""

    id: str
    code: str
    local: Expect | None  # the subprocess sandbox's answer; None: the row is the container's own
    docker: Expect | None = None  # the container's answer where it differs from ``local``
    docker_code: str | None = None  # the container's variant of the code, where it differs
    bwrap_only: bool = False  # the row does not hold for the unshare fallback

    def in_sandbox(self, sandbox: Sandbox) -> tuple[str, Expect] | None:
        """The code to run and what it must produce in ``sandbox``; None where the row does not apply there."""
        if sandbox == "docker":
            code, expected = self.docker_code or self.code, self.docker or self.local
        else:
            code, expected = self.code, self.local
            if sandbox == "unshare" and self.bwrap_only:
                expected = None
        if expected is None:
            return None
        return code, dataclasses.replace(expected, max_seconds=expected.max_seconds or DEFAULT_MAX_SECONDS[sandbox])


BLOCKED = """
def attempt(label, action):
    try:
        action()
    except BaseException as exc:
        print("blocked", label, type(exc).__name__)
    else:
        print("ALLOWED", label)
"""

_NOTHING_ALLOWED = ("ALLOWED",)


def _timed_out(timeout_s: float, slack_s: float, **more: Any) -> Expect:
    """Killed (-9) at the row's wall-clock timeout, and back within ``slack_s`` seconds of it."""
    return Expect(exit_code=-9, timed_out=True, timeout_s=timeout_s, max_seconds=timeout_s + slack_s, **more)  # the usual ``never`` of a BLOCKED row: no attempt got through

ATTACKS = [
    # ---------------------------------------------------------------------------------------- network
    Attack(
        "network-parent-loopback-port",
        BLOCKED + "import socket\ns = socket.socket(); s.settimeout(3)\n"
        "attempt('parent-loopback', lambda: s.connect(('127.0.0.1', PORT)))",
        Expect(stdout_has=("blocked parent-loopback",), never=_NOTHING_ALLOWED),
    ),
    Attack(
        "network-host-address",
        BLOCKED + "import socket\ns = socket.socket(); s.settimeout(3)\n"
        "attempt('host-ip', lambda: s.connect(('HOST_IP', PORT)))",
        None,
        docker=Expect(stdout_has=("blocked host-ip",), never=_NOTHING_ALLOWED),
    ),
    Attack(
        "network-external-ip",
        BLOCKED + "import socket\ns = socket.socket(); s.settimeout(3)\n"
        "attempt('external-ip', lambda: s.connect(('1.1.1.1', 53)))",
        Expect(stdout_has=("blocked external-ip",), never=_NOTHING_ALLOWED),
    ),
    Attack(
        "network-dns",
        BLOCKED + "import socket\nattempt('dns', lambda: socket.getaddrinfo('pypi.org', 443))",
        Expect(stdout_has=("blocked dns",), never=_NOTHING_ALLOWED),
    ),
    Attack(
        "network-only-loopback-no-raw-sockets",
        BLOCKED + "import socket\n"
        "attempt('raw-socket', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n"
        "print([name for _, name in socket.if_nameindex()])",
        Expect(stdout_has=("blocked raw-socket", "['lo']"), never=_NOTHING_ALLOWED),
    ),
    # ---------------------------------------------------------------------------------------- reading secrets
    Attack(
        "read-secret-in-root-home",
        BLOCKED + "import os\nattempt('home-secret', lambda: print(open('SECRET').read()))\n"
        "print('listing', os.listdir('/root') if os.path.isdir('/root') else None)",
        Expect(stdout_has=("blocked home-secret FileNotFoundError",), never=(SECRET_TEXT, "causaltrace-secret")),
        docker=Expect(stdout_has=("blocked home-secret",), never=(SECRET_TEXT, "causaltrace-secret")),
        docker_code=BLOCKED + "import os\nattempt('home-secret', lambda: print(open('SECRET').read()))\n"
        "print('listing', os.listdir('/root') if os.access('/root', os.R_OK) else None)",
    ),
    Attack(
        # (a virtualenv inside the repository is bound read-only, so the repository's directory may exist — holding
        # nothing but that virtualenv)
        "read-the-repository",
        BLOCKED + "import os\nattempt('repo', lambda: open('REPO/pyproject.toml').read())\n"
        "attempt('repo-src', lambda: os.listdir('REPO/src'))\n"
        "print('repo listing:', os.listdir('REPO') if os.path.isdir('REPO') else None)",
        Expect(stdout_has=("blocked repo ", "blocked repo-src "), never=("ALLOWED", "'src'", "pyproject")),
        docker=Expect(stdout_has=("blocked repo FileNotFoundError", "blocked repo-src "), never=_NOTHING_ALLOWED),
        docker_code=BLOCKED + "import os\nattempt('repo', lambda: open('REPO/pyproject.toml').read())\n"
        "attempt('repo-src', lambda: os.listdir('REPO/src'))",
    ),
    Attack(
        "read-system-secrets",
        BLOCKED + "for path in ['/etc/shadow', '/etc/ssh', '/dev/mem', '/proc/kcore', '/sys/kernel', '/var/log']:\n"
        "    attempt(path, lambda: open(path).read())\n"
        "print(open('/etc/passwd').read())",
        Expect(stdout_has=("blocked /etc/shadow", "blocked /dev/mem", "nobody:x:65534"), never=_NOTHING_ALLOWED),
        docker=Expect(
            stdout_has=("blocked /etc/shadow PermissionError", "blocked /dev/mem", "nobody:x:65534"),
            never=_NOTHING_ALLOWED,
        ),
        docker_code=BLOCKED + "for path in ['/etc/shadow', '/dev/mem', '/proc/kcore', '/sys/kernel', '/var/log']:\n"
        "    attempt(path, lambda: open(path).read())\n"
        "print(open('/etc/passwd').read())",
    ),
    # ---------------------------------------------------------------------------------------- writing
    Attack(
        "write-outside-the-work-dir",
        BLOCKED + "targets = ['/evil', '/etc/evil', '/usr/lib/evil', '/opt/causaltrace/evil', 'PREFIX/evil',\n"
        "           '/root/evil', '/opt/causaltrace/main.py', '/dev/evil']\n"
        "for t in targets:\n"
        "    attempt(t, lambda: open(t, 'w').write('x'))\n"
        "open('ok.txt', 'w').write('ok'); open('/tmp/ok.txt', 'w').write('ok')\n"
        "print('work and tmp writable')",
        Expect(stdout_has=("blocked /evil", "blocked PREFIX/evil", "work and tmp writable"), never=_NOTHING_ALLOWED),
        docker=Expect(
            stdout_has=("blocked /evil", "blocked /dev/evil", "work and tmp writable"), never=_NOTHING_ALLOWED
        ),
        docker_code=BLOCKED
        + "targets = ['/evil', '/etc/evil', '/usr/lib/evil', '/root/evil', '/dev/evil', '/var/evil']\n"
        "for t in targets:\n"
        "    attempt(t, lambda: open(t, 'w').write('x'))\n"
        "open('ok.txt', 'w').write('ok'); open('/tmp/ok.txt', 'w').write('ok')\n"
        "print('work and tmp writable')",
    ),
    Attack(
        # sysctl writes are checked by uid only, and under bubblewrap-as-root the sandbox's uid maps back to host
        # root: without the read-only /proc/sys, kernel.core_pattern (host-root code execution on the next crash)
        # was writable. The row writes the CURRENT value back, so a failure could not change the host.
        "write-kernel-sysctls",
        BLOCKED + "current = open('/proc/sys/kernel/core_pattern').read()\n"
        "attempt('core_pattern', lambda: open('/proc/sys/kernel/core_pattern', 'w').write(current))\n"
        "attempt('hostname-sysctl', lambda: open('/proc/sys/kernel/hostname', 'w').write('sandbox'))\n"
        "attempt('sysrq', lambda: open('/proc/sysrq-trigger', 'w').write('h'))",
        Expect(stdout_has=("blocked core_pattern", "blocked sysrq"), never=_NOTHING_ALLOWED),
        docker=Expect(
            stdout_has=("blocked core_pattern", "blocked hostname-sysctl", "blocked sysrq"), never=_NOTHING_ALLOWED
        ),
    ),
    Attack(
        "raise-own-rlimits",
        BLOCKED + "import resource\n"
        "attempt('raise-AS', lambda: resource.setrlimit(resource.RLIMIT_AS, (-1, -1)))\n"
        "attempt('raise-NOFILE', lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20)))",
        Expect(stdout_has=("blocked raise-AS", "blocked raise-NOFILE"), never=_NOTHING_ALLOWED),
        docker=Expect(
            stdout_has=("blocked raise-NOFILE", "blocked raise-FSIZE", "blocked raise-CPU"), never=_NOTHING_ALLOWED
        ),
        docker_code=BLOCKED + "import resource\n"
        "attempt('raise-NOFILE', lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20)))\n"
        "attempt('raise-FSIZE', lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (-1, -1)))\n"
        "attempt('raise-CPU', lambda: resource.setrlimit(resource.RLIMIT_CPU, (-1, -1)))",
    ),
    Attack(
        "escape-the-cgroup-or-remount",
        BLOCKED + "import os\n"
        "attempt('cgroup-escape', lambda: open('/sys/fs/cgroup/pids/cgroup.procs', 'w').write(str(os.getpid())))\n"
        "attempt('chmod-root', lambda: os.chmod('/', 0o777))",
        Expect(stdout_has=("blocked cgroup-escape", "blocked chmod-root"), never=_NOTHING_ALLOWED),
    ),
    Attack(
        "file-size-limit",
        BLOCKED + "def big():\n    with open('big.bin', 'wb') as f:\n        f.write(b'0' * (100 << 20))\n"
        "attempt('100MiB-file', big)",
        Expect(stdout_has=("blocked 100MiB-file OSError",), never=_NOTHING_ALLOWED, memory_mb=512),
    ),
    Attack(
        "tmp-is-size-limited",
        BLOCKED + "def fill():\n    for i in range(20):\n        open(f'/tmp/f{i}', 'wb').write(b'0' * (10 << 20))\n"
        "attempt('fill-tmp', fill)",
        Expect(stdout_has=("blocked fill-tmp OSError",), never=_NOTHING_ALLOWED, memory_mb=512),
    ),
    Attack(
        "work-dir-is-size-limited",
        BLOCKED + "def fill():\n    for i in range(40):\n        open(f'f{i}', 'wb').write(b'0' * (10 << 20))\n"
        "attempt('fill-work', fill)",
        Expect(stdout_has=("blocked fill-work OSError",), never=_NOTHING_ALLOWED, memory_mb=512),
    ),
    Attack(  # was: 2 GiB of the host's disk in 4.8 s; now the work dir's 240 MiB tmpfs, then ENOSPC at once
        "disk-bomb-in-the-work-dir",
        BLOCKED + "import os\ndef bomb():\n    for i in range(128):\n"
        "        with open(f'b{i}', 'wb') as f:\n            f.write(b'0' * (16 << 20))\n"
        "attempt('2GiB-in-work', bomb)\nprint('written MiB', sum(os.path.getsize(n) for n in os.listdir('.')) >> 20)",
        Expect(stdout_has=("blocked 2GiB-in-work OSError",), never=_NOTHING_ALLOWED, memory_mb=512, max_seconds=10),
    ),
    Attack(  # was: ~200,000 host inodes in 6 s; now ENOSPC at nr_inodes (unshare fallback) or, where bubblewrap
        # cannot set nr_inodes, the inodes' kernel memory charged to the memory cgroup ends it (killed, -9)
        "inode-bomb-in-the-work-dir",
        BLOCKED + "def bomb():\n    for i in range(2_000_000):\n        open(f'f{i}', 'w').close()\n"
        "attempt('2M-files-in-work', bomb)",
        Expect(exit_code=None, never=_NOTHING_ALLOWED, timeout_s=30, max_seconds=25),
    ),
    Attack(
        "open-files-limit",
        BLOCKED
        + "handles = []\nattempt('1000-files', lambda: [handles.append(open('/dev/null')) for _ in range(1000)])",
        Expect(stdout_has=("blocked 1000-files OSError",), never=_NOTHING_ALLOWED),
    ),
    # ---------------------------------------------------------------------------------------- processes
    Attack(
        "fork-bomb",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        _timed_out(3, 4),
        docker=_timed_out(3, 12),
    ),
    Attack(
        "fork-count-capped-by-pids-cgroup",
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n"
        "print('capped' if n < 64 else f'uncapped {n}')",
        Expect(stdout_has=("capped",), never=("uncapped",)),
    ),
    Attack(
        "kill-every-process-it-can-see",
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('survived')",
        Expect(exit_code="nonzero", never=("survived",)),
        docker=Expect(stdout_has=("ProcessLookupError", "survived")),
        docker_code="import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as exc:\n"
        "    print(type(exc).__name__)\nprint('survived')",
    ),
    Attack(
        "parent-process-invisible",
        BLOCKED + "import os\nattempt('signal-parent', lambda: os.kill(PARENT_PID, 0))\n"
        "print('parent in /proc:', os.path.exists('/proc/PARENT_PID'))\n"
        "attempt('parent-mem', lambda: open('/proc/PARENT_PID/mem', 'rb').read(1))",
        Expect(
            stdout_has=("blocked signal-parent ProcessLookupError", "parent in /proc: False"), never=_NOTHING_ALLOWED
        ),
    ),
    # ---------------------------------------------------------------------------------------- memory and cpu
    Attack(
        "memory-bomb-one-allocation",
        "x = bytearray(10 ** 10)",
        Expect(exit_code=1, stderr_has=("MemoryError",)),
        docker=Expect(exit_code=-9),
    ),
    Attack(
        "memory-2GiB-allocation",
        "x = b'x' * (2 << 30)\nprint('allocated')",
        None,
        docker=Expect(exit_code=-9, never=("allocated",)),
    ),
    Attack(
        "memory-bomb-gradual",
        "blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))",
        Expect(exit_code="nonzero", stderr_has=("MemoryError",), memory_mb=128),
        docker=Expect(exit_code=-9, memory_mb=128),
    ),
    Attack(
        "memory-bomb-across-processes-memory-cgroup",
        # each child holds its 150 MiB for a second: four at once exceed the cgroup (on a quiet machine a child could
        # finish before the next one touched its pages, and four turns of 150 MiB each fit in 256 MiB)
        "import os, time\npids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        block = bytearray(150 << 20)\n        for i in range(0, len(block), 4096):\n            block[i] = 1\n"
        "        time.sleep(1)\n        os._exit(0)\n    pids.append(pid)\n"
        "codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]\n"
        "print('oom-killed' if -9 in codes else f'all survived {codes}')",
        Expect(stdout_has=("oom-killed",), never=("all survived",)),
    ),
    Attack(
        "infinite-loop",
        "while True:\n    pass",
        _timed_out(2, 3),
        docker=_timed_out(2, 10),
    ),
    Attack(
        "cpu-burn-8-processes",
        "import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    sum(range(10 ** 6))",
        _timed_out(2, 3),
        docker=_timed_out(2, 10),
    ),
    Attack(
        "output-flood-capped",
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
        None,
        docker=_timed_out(3, 10, stdout_has=("more bytes of output",)),
    ),
    # ---------------------------------------------------------------------------------------- shells, setuid, ctypes
    Attack(
        "spawn-a-shell-allowed-but-harmless",
        "import subprocess\n"
        "out = subprocess.run(['sh', '-c', 'id -u; touch /etc/pwned || echo touch-blocked; "
        "cat /etc/shadow || echo shadow-blocked; cat SECRET || echo secret-blocked'], capture_output=True, text=True)\n"
        "print(out.stdout)",
        Expect(stdout_has=("65534", "touch-blocked", "shadow-blocked", "secret-blocked"), never=(SECRET_TEXT,)),
    ),
    Attack(
        "setuid-binaries-powerless",
        "import subprocess\n"
        "for argv in (['su', '-c', 'id -u'], ['mount', '-t', 'tmpfs', 'x', '/work']):\n"
        "    r = subprocess.run(argv, capture_output=True, text=True, input='')\n"
        "    print(argv[0], r.returncode, r.stdout.strip())",
        Expect(stdout_has=("su 1",), never=("su 0", "mount 0")),
    ),
    Attack(
        "ctypes-setuid-0",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('setuid', libc.setuid(0), 'setgid', libc.setgid(0), 'uid', os.getuid(), os.geteuid())",
        Expect(stdout_has=("setuid -1 setgid -1 uid 65534 65534",)),
    ),
    Attack(
        "ctypes-read-arbitrary-memory-segfaults-inside", "import ctypes\nctypes.string_at(1, 64)", Expect(exit_code=-11)
    ),
    Attack(
        "ctypes-privileged-syscalls",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('mount', libc.mount(b'none', b'/work', b'tmpfs', 0, None))\n"
        "print('chroot', libc.chroot(b'/tmp'), 'sethostname', libc.sethostname(b'x', 1))",
        Expect(stdout_has=("mount -1", "chroot -1 sethostname -1")),
    ),
    Attack(
        "ctypes-nested-user-namespace",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('unshare-user', libc.unshare(0x10000000))",
        Expect(stdout_has=("unshare-user -1",)),
        bwrap_only=True,
    ),
    # ---------------------------------------------------------------------------------------- environment
    Attack(
        "parent-env-vars-do-not-leak",
        "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ', 'rb').read())\n"
        "print(open('/proc/1/environ', 'rb').read() if os.access('/proc/1/environ', os.R_OK) else '')",
        Expect(never=(ENV_SECRET, "CAUSALTRACE_TEST_SECRET", "/root")),
    ),
]


def attack_params(*, local: bool) -> list[Any]:
    """The rows for the subprocess sandbox (``local``) or for a container, as ``pytest.param(attack, id=...)``."""
    sandbox: Sandbox = "bwrap" if local else "docker"
    return [pytest.param(attack, id=attack.id) for attack in ATTACKS if attack.in_sandbox(sandbox) is not None]


def fill(code: str, **placeholders: object) -> str:
    """``code`` with each placeholder (``PORT``, ``SECRET``, …) replaced by its value, in the order given."""
    for name, value in placeholders.items():
        code = code.replace(name, str(value))
    return code


def run_watched(
    run: Callable[[], CodeResult], expected: Expect, on_overrun: Callable[[], None]
) -> tuple[CodeResult, float]:
    """``run()`` under an outer watchdog, and its seconds: should containment fail (a fork bomb escaping the pids
    cgroup), ``on_overrun`` kills it all well before the module's hard pytest timeout, instead of leaving a 2-core
    machine thrashing."""
    assert expected.max_seconds is not None
    watchdog = threading.Timer(expected.max_seconds + 10, on_overrun)
    watchdog.start()
    started = time.monotonic()
    try:
        result = run()
    finally:
        watchdog.cancel()
    return result, time.monotonic() - started


def check_contained(result: CodeResult, expected: Expect, *, elapsed: float, detail: str, stdout: str) -> None:
    """The row's assertions: exit code, timeout, seconds, and the texts its output must and must never hold
    (``stdout``: the result's stdout as the row's texts name it)."""
    assert expected.max_seconds is not None
    if expected.exit_code == "nonzero":
        assert result.exit_code != 0, detail
    elif expected.exit_code is not None:
        assert result.exit_code == expected.exit_code, detail
    assert result.timed_out is expected.timed_out, detail
    assert elapsed < expected.max_seconds, detail
    for text in expected.stdout_has:
        assert text in stdout, detail
    for text in expected.stderr_has:
        assert text in result.stderr, detail
    for text in expected.never:
        assert text not in stdout and text not in result.stderr, detail


@contextlib.contextmanager
def listening(host: str) -> Iterator[socket.socket]:
    """A non-blocking socket listening on ``host`` in the parent: nothing the sandbox does may connect to it."""
    listener = socket.socket()
    listener.bind((host, 0))
    listener.listen()
    listener.setblocking(False)
    try:
        yield listener
    finally:
        listener.close()


@contextlib.contextmanager
def secret_in_home() -> Iterator[Path]:
    """A secret file (mode 0600) in the parent's home, removed afterwards."""
    path = Path.home() / f".causaltrace-secret-{os.getpid()}"
    path.write_text(SECRET_TEXT)
    path.chmod(0o600)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def check_host_untouched(listener: socket.socket, secret: Path, *written: Path) -> None:
    """Nothing reached the parent's listener, no file the attacks write was created on the host, the secret is
    unchanged."""
    with pytest.raises(BlockingIOError):
        listener.accept()
    for path in (*written, Path("/etc/pwned"), Path("/evil")):
        assert not path.exists(), path
    assert secret.read_text() == SECRET_TEXT
