"""The sandbox security table (issue 7): each attack, what the sandbox does about it, and the expected result.

Every row is real code run in the real sandbox — bubblewrap, and the unshare fallback where the row holds for it.
Rows use placeholders filled per test: ``PORT`` (a port listening in the PARENT on 127.0.0.1), ``SECRET`` (a
secret file in the parent's home), ``REPO`` (this repository), ``PREFIX`` (the Python install, bound read-only),
``PARENT_PID``. The parent sets ``CAUSALTRACE_TEST_SECRET=hunter2`` in its own environment for every row.

Decisions written down here:
* spawning a shell is ALLOWED and harmless: it runs as uid 65534, without capabilities, network or writable
  places outside /work and /tmp, inside the same pid namespace and cgroups;
* setuid binaries (su, mount) are powerless: nosuid mounts, no_new_privs, and host root is not mapped;
* a fork bomb is contained by the pids cgroup (pids.max=64) and ends at the wall-clock timeout (measured: ~3.1 s
  for timeout_s=3 on a 2-core machine), leaving nothing behind;
* the unshare fallback does not forbid nested user namespaces (bubblewrap's ``--disable-userns`` does), so that
  row runs on bubblewrap only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from causaltrace.replay.sandbox import SubprocessSandbox
from causaltrace.replay.sandbox._cgroup import CGROUP_PREFIX, CGROUP_ROOT

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
SECRET_TEXT = "TOPSECRET-4d1f"
ENV_SECRET = "hunter2"


@dataclass(frozen=True)
class Expect:
    """What a row must produce: exit code (an int, ``"nonzero"`` or ``None`` for any), timeout, output."""

    exit_code: int | str | None = 0
    timed_out: bool = False
    stdout_has: tuple[str, ...] = ()
    stderr_has: tuple[str, ...] = ()
    never: tuple[str, ...] = ()  # in neither stdout nor stderr
    max_seconds: float = 15.0
    timeout_s: float = 10.0
    memory_mb: int = 256
    modes: tuple[str, ...] = ("bwrap", "unshare")


BLOCKED = """
def attempt(label, action):
    try:
        action()
    except BaseException as exc:
        print("blocked", label, type(exc).__name__)
    else:
        print("ALLOWED", label)
"""

CASES = [
    # ---------------------------------------------------------------------------------------- network
    pytest.param(
        BLOCKED + "import socket\ns = socket.socket(); s.settimeout(3)\n"
        "attempt('parent-loopback', lambda: s.connect(('127.0.0.1', PORT)))",
        Expect(stdout_has=("blocked parent-loopback",), never=("ALLOWED",)),
        id="network-parent-loopback-port",
    ),
    pytest.param(
        BLOCKED + "import socket\ns = socket.socket(); s.settimeout(3)\n"
        "attempt('external-ip', lambda: s.connect(('1.1.1.1', 53)))",
        Expect(stdout_has=("blocked external-ip",), never=("ALLOWED",)),
        id="network-external-ip",
    ),
    pytest.param(
        BLOCKED + "import socket\nattempt('dns', lambda: socket.getaddrinfo('pypi.org', 443))",
        Expect(stdout_has=("blocked dns",), never=("ALLOWED",)),
        id="network-dns",
    ),
    pytest.param(
        BLOCKED + "import socket\n"
        "attempt('raw-socket', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n"
        "print([name for _, name in socket.if_nameindex()])",
        Expect(stdout_has=("blocked raw-socket", "['lo']"), never=("ALLOWED",)),
        id="network-only-loopback-no-raw-sockets",
    ),
    # ---------------------------------------------------------------------------------------- reading secrets
    pytest.param(
        BLOCKED + "import os\nattempt('home-secret', lambda: print(open('SECRET').read()))\n"
        "print('listing', os.listdir('/root') if os.path.isdir('/root') else None)",
        Expect(stdout_has=("blocked home-secret FileNotFoundError",), never=(SECRET_TEXT, "causaltrace-secret")),
        id="read-secret-in-root-home",
    ),
    pytest.param(
        # (a virtualenv inside the repository is bound read-only, so the repository's directory may exist — holding
        # nothing but that virtualenv)
        BLOCKED + "import os\nattempt('repo', lambda: open('REPO/pyproject.toml').read())\n"
        "attempt('repo-src', lambda: os.listdir('REPO/src'))\n"
        "print('repo listing:', os.listdir('REPO') if os.path.isdir('REPO') else None)",
        Expect(stdout_has=("blocked repo ", "blocked repo-src "), never=("ALLOWED", "'src'", "pyproject")),
        id="read-the-repository",
    ),
    pytest.param(
        BLOCKED + "for path in ['/etc/shadow', '/etc/ssh', '/dev/mem', '/proc/kcore', '/sys/kernel', '/var/log']:\n"
        "    attempt(path, lambda: open(path).read())\n"
        "print(open('/etc/passwd').read())",
        Expect(stdout_has=("blocked /etc/shadow", "blocked /dev/mem", "nobody:x:65534"), never=("ALLOWED",)),
        id="read-system-secrets",
    ),
    # ---------------------------------------------------------------------------------------- writing
    pytest.param(
        BLOCKED + "targets = ['/evil', '/etc/evil', '/usr/lib/evil', '/opt/causaltrace/evil', 'PREFIX/evil',\n"
        "           '/root/evil', '/opt/causaltrace/main.py', '/dev/evil']\n"
        "for t in targets:\n"
        "    attempt(t, lambda: open(t, 'w').write('x'))\n"
        "open('ok.txt', 'w').write('ok'); open('/tmp/ok.txt', 'w').write('ok')\n"
        "print('work and tmp writable')",
        Expect(stdout_has=("blocked /evil", "blocked PREFIX/evil", "work and tmp writable"), never=("ALLOWED",)),
        id="write-outside-the-work-dir",
    ),
    pytest.param(
        # sysctl writes are checked by uid only, and under bubblewrap-as-root the sandbox's uid maps back to host
        # root: without the read-only /proc/sys, kernel.core_pattern (host-root code execution on the next crash)
        # was writable. The row writes the CURRENT value back, so a failure could not change the host.
        BLOCKED + "current = open('/proc/sys/kernel/core_pattern').read()\n"
        "attempt('core_pattern', lambda: open('/proc/sys/kernel/core_pattern', 'w').write(current))\n"
        "attempt('hostname-sysctl', lambda: open('/proc/sys/kernel/hostname', 'w').write('sandbox'))\n"
        "attempt('sysrq', lambda: open('/proc/sysrq-trigger', 'w').write('h'))",
        Expect(stdout_has=("blocked core_pattern", "blocked sysrq"), never=("ALLOWED",)),
        id="write-kernel-sysctls",
    ),
    pytest.param(
        BLOCKED + "import resource\n"
        "attempt('raise-AS', lambda: resource.setrlimit(resource.RLIMIT_AS, (-1, -1)))\n"
        "attempt('raise-NOFILE', lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20)))",
        Expect(stdout_has=("blocked raise-AS", "blocked raise-NOFILE"), never=("ALLOWED",)),
        id="raise-own-rlimits",
    ),
    pytest.param(
        BLOCKED + "import os\n"
        "attempt('cgroup-escape', lambda: open('/sys/fs/cgroup/pids/cgroup.procs', 'w').write(str(os.getpid())))\n"
        "attempt('chmod-root', lambda: os.chmod('/', 0o777))",
        Expect(stdout_has=("blocked cgroup-escape", "blocked chmod-root"), never=("ALLOWED",)),
        id="escape-the-cgroup-or-remount",
    ),
    pytest.param(
        BLOCKED + "def big():\n    with open('big.bin', 'wb') as f:\n        f.write(b'0' * (100 << 20))\n"
        "attempt('100MiB-file', big)",
        Expect(stdout_has=("blocked 100MiB-file OSError",), never=("ALLOWED",), memory_mb=512),
        id="file-size-limit",
    ),
    pytest.param(
        BLOCKED + "def fill():\n    for i in range(20):\n        open(f'/tmp/f{i}', 'wb').write(b'0' * (10 << 20))\n"
        "attempt('fill-tmp', fill)",
        Expect(stdout_has=("blocked fill-tmp OSError",), never=("ALLOWED",), memory_mb=512),
        id="tmp-is-size-limited",
    ),
    pytest.param(
        BLOCKED
        + "handles = []\nattempt('1000-files', lambda: [handles.append(open('/dev/null')) for _ in range(1000)])",
        Expect(stdout_has=("blocked 1000-files OSError",), never=("ALLOWED",)),
        id="open-files-limit",
    ),
    # ---------------------------------------------------------------------------------------- processes
    pytest.param(
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        Expect(exit_code=-9, timed_out=True, timeout_s=3, max_seconds=3 + 4),
        id="fork-bomb",
    ),
    pytest.param(
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(30)\n"
        "            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n"
        "print('capped' if n < 64 else f'uncapped {n}')",
        Expect(stdout_has=("capped",), never=("uncapped",)),
        id="fork-count-capped-by-pids-cgroup",
    ),
    pytest.param(
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('survived')",
        Expect(exit_code="nonzero", never=("survived",)),
        id="kill-every-process-it-can-see",
    ),
    pytest.param(
        BLOCKED + "import os\nattempt('signal-parent', lambda: os.kill(PARENT_PID, 0))\n"
        "print('parent in /proc:', os.path.exists('/proc/PARENT_PID'))\n"
        "attempt('parent-mem', lambda: open('/proc/PARENT_PID/mem', 'rb').read(1))",
        Expect(stdout_has=("blocked signal-parent ProcessLookupError", "parent in /proc: False"), never=("ALLOWED",)),
        id="parent-process-invisible",
    ),
    # ---------------------------------------------------------------------------------------- memory and cpu
    pytest.param(
        "x = bytearray(10 ** 10)",
        Expect(exit_code=1, stderr_has=("MemoryError",)),
        id="memory-bomb-one-allocation",
    ),
    pytest.param(
        "blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))",
        Expect(exit_code="nonzero", stderr_has=("MemoryError",), memory_mb=128),
        id="memory-bomb-gradual",
    ),
    pytest.param(
        "import os\npids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n"
        "        block = bytearray(150 << 20)\n        for i in range(0, len(block), 4096):\n            block[i] = 1\n"
        "        os._exit(0)\n    pids.append(pid)\n"
        "codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]\n"
        "print('oom-killed' if -9 in codes else f'all survived {codes}')",
        Expect(stdout_has=("oom-killed",), never=("all survived",)),
        id="memory-bomb-across-processes-memory-cgroup",
    ),
    pytest.param(
        "while True:\n    pass",
        Expect(exit_code=-9, timed_out=True, timeout_s=2, max_seconds=2 + 3),
        id="infinite-loop",
    ),
    pytest.param(
        "import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    sum(range(10 ** 6))",
        Expect(exit_code=-9, timed_out=True, timeout_s=2, max_seconds=2 + 3),
        id="cpu-burn-8-processes",
    ),
    # ---------------------------------------------------------------------------------------- shells, setuid, ctypes
    pytest.param(
        "import subprocess\n"
        "out = subprocess.run(['sh', '-c', 'id -u; touch /etc/pwned || echo touch-blocked; "
        "cat /etc/shadow || echo shadow-blocked; cat SECRET || echo secret-blocked'], capture_output=True, text=True)\n"
        "print(out.stdout)",
        Expect(stdout_has=("65534", "touch-blocked", "shadow-blocked", "secret-blocked"), never=(SECRET_TEXT,)),
        id="spawn-a-shell-allowed-but-harmless",
    ),
    pytest.param(
        "import subprocess\n"
        "for argv in (['su', '-c', 'id -u'], ['mount', '-t', 'tmpfs', 'x', '/work']):\n"
        "    r = subprocess.run(argv, capture_output=True, text=True, input='')\n"
        "    print(argv[0], r.returncode, r.stdout.strip())",
        Expect(stdout_has=("su 1",), never=("su 0", "mount 0")),
        id="setuid-binaries-powerless",
    ),
    pytest.param(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('setuid', libc.setuid(0), 'setgid', libc.setgid(0), 'uid', os.getuid(), os.geteuid())",
        Expect(stdout_has=("setuid -1 setgid -1 uid 65534 65534",)),
        id="ctypes-setuid-0",
    ),
    pytest.param(
        "import ctypes\nctypes.string_at(1, 64)",
        Expect(exit_code=-11),
        id="ctypes-read-arbitrary-memory-segfaults-inside",
    ),
    pytest.param(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('mount', libc.mount(b'none', b'/work', b'tmpfs', 0, None))\n"
        "print('chroot', libc.chroot(b'/tmp'), 'sethostname', libc.sethostname(b'x', 1))",
        Expect(stdout_has=("mount -1", "chroot -1 sethostname -1")),
        id="ctypes-privileged-syscalls",
    ),
    pytest.param(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('unshare-user', libc.unshare(0x10000000))",
        Expect(stdout_has=("unshare-user -1",), modes=("bwrap",)),
        id="ctypes-nested-user-namespace",
    ),
    # ---------------------------------------------------------------------------------------- environment
    pytest.param(
        "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ', 'rb').read())\n"
        "print(open('/proc/1/environ', 'rb').read() if os.access('/proc/1/environ', os.R_OK) else '')",
        Expect(never=(ENV_SECRET, "CAUSALTRACE_TEST_SECRET", "/root")),
        id="parent-env-vars-do-not-leak",
    ),
]


@pytest.fixture
def parent_listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    yield listener
    listener.close()


@pytest.fixture
def home_secret() -> Path:
    path = Path.home() / f".causaltrace-secret-{os.getpid()}"
    path.write_text(SECRET_TEXT)
    path.chmod(0o600)
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture(scope="module", params=["bwrap", "unshare"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def _is_ours(pid: str) -> bool:
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


def _leftovers() -> list[str]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if (b"/opt/causaltrace/" in cmdline or b"causaltrace-sbx-" in cmdline) and _is_ours(entry.name):
                found.append(entry.name)
    found += [
        str(p)
        for c in ("pids", "memory", "cpu")
        for p in (CGROUP_ROOT / c).glob(f"{CGROUP_PREFIX}{os.getpid()}-*")
        if (CGROUP_ROOT / c).is_dir()
    ]
    return found


def _kill_leftovers() -> None:
    """The outer watchdog's action: SIGKILL every sandboxed process and every task in this process's cgroups."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
                if (b"/opt/causaltrace/" in cmdline or b"causaltrace-sbx-" in cmdline) and _is_ours(entry.name):
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue
    for controller in ("pids", "memory", "cpu"):
        for group in (CGROUP_ROOT / controller).glob(f"{CGROUP_PREFIX}{os.getpid()}-*"):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)


@pytest.mark.parametrize(("code", "expected"), CASES)
def test_attack_is_contained(
    code: str,
    expected: Expect,
    mode: str,
    parent_listener: socket.socket,
    home_secret: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if mode not in expected.modes:
        return  # documented above: this row holds for bubblewrap only
    monkeypatch.setenv("CAUSALTRACE_TEST_SECRET", ENV_SECRET)
    prefix = os.path.realpath(sys.base_prefix)
    filled = (
        code.replace("PORT", str(parent_listener.getsockname()[1]))
        .replace("SECRET", str(home_secret))
        .replace("REPO", str(REPO))
        .replace("PREFIX", prefix)
        .replace("PARENT_PID", str(os.getpid()))
    )
    sandbox = SubprocessSandbox(use_bwrap=mode == "bwrap")
    # outer watchdog: should containment fail (a fork bomb escaping the pids cgroup), kill it all well before the
    # module's hard pytest timeout, instead of leaving a 2-core machine thrashing
    watchdog = threading.Timer(expected.max_seconds + 10, _kill_leftovers)
    watchdog.start()
    started = time.monotonic()
    try:
        result = sandbox.run(filled, timeout_s=expected.timeout_s, memory_mb=expected.memory_mb)
    finally:
        watchdog.cancel()
    elapsed = time.monotonic() - started
    detail = f"{mode}: {result!r}"

    if expected.exit_code == "nonzero":
        assert result.exit_code != 0, detail
    elif expected.exit_code is not None:
        assert result.exit_code == expected.exit_code, detail
    assert result.timed_out is expected.timed_out, detail
    assert elapsed < expected.max_seconds, detail
    stdout = result.stdout.replace(prefix, "PREFIX")
    for text in expected.stdout_has:
        assert text in stdout, detail
    for text in expected.stderr_has:
        assert text in result.stderr, detail
    for text in expected.never:
        assert text not in stdout and text not in result.stderr, detail

    # nothing reached the parent, and nothing is left behind
    with pytest.raises(BlockingIOError):
        parent_listener.accept()
    assert not Path(prefix, "evil").exists() and not Path("/etc/pwned").exists() and not Path("/evil").exists()
    assert home_secret.read_text() == SECRET_TEXT
    deadline = time.monotonic() + 5
    while _leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _leftovers() == []
