"""DockerSandbox against a fake docker client (container spec, the files' frame, timeout, ALWAYS removed) and live,
against a real engine (tests/_docker.py: the running daemon, else a private dockerd started for this module),
with the sandbox attack table (tests/_sandbox_attacks.py, shared with test_sandbox_security.py) in a container.
The live tests skip only when this machine has no engine (and FAIL under CAUSALTRACE_STRICT=1):
scripts/install_docker.sh installs one and builds the image ``causaltrace/sandbox-python:bookworm``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _docker import SANDBOX_IMAGE, docker_engine
from _sandbox_attacks import (
    ENV_SECRET,
    REPO,
    Attack,
    attack_params,
    check_contained,
    check_host_untouched,
    fill,
    listening,
    run_watched,
    secret_in_home,
)
from causaltrace.exceptions import MissingExtraError, SandboxError, SandboxTimeout
from causaltrace.protocols import Sandbox, Worker
from causaltrace.replay.sandbox import DockerSandbox, DockerWorker, PythonWorkerSession
from causaltrace.replay.sandbox.docker_sandbox import BOOTSTRAP_SOURCE, IMAGE_ENV, files_payload
from conftest import require

pytestmark = pytest.mark.timeout(300)


class ReadTimeout(Exception):
    """Stands in for requests.exceptions.ReadTimeout, which container.wait raises at its timeout."""


class FakeContainer:
    """Runs the container's command as a local process (``python`` -> this interpreter, ``/work`` -> a temp dir)
    and speaks Docker's multiplexed attach protocol over a socketpair; exit statuses as Docker reports them."""

    def __init__(self, client: FakeClient, spec: dict[str, Any]) -> None:
        self.client = client
        self.spec = spec
        self.id = f"fake-{len(client.created)}"
        self.calls: list[str] = []
        self.removed: dict[str, Any] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.work_dir = Path(tempfile.mkdtemp(prefix="ct-fake-work-"))

    def start(self) -> None:
        self.calls.append("start")
        if self.client.fail_start:
            raise RuntimeError("500 Server Error: OCI runtime create failed")

    def wait(self, timeout: float | None = None) -> dict[str, int]:
        self.calls.append(f"wait({timeout})")
        assert self.process is not None
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ReadTimeout("UnixHTTPConnectionPool(host='localhost', port=None): Read timed out.") from None
        return {"StatusCode": 128 - code if code < 0 else code}  # Docker: death by signal N is 128+N

    def kill(self) -> None:
        self.calls.append("kill")
        if self.process is not None and self.process.poll() is None:
            self.process.kill()

    def remove(self, **kwargs: Any) -> None:
        self.calls.append("remove")
        self.removed = kwargs
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def attach_socket(self, params: dict[str, int]) -> Any:
        self.calls.append("attach_socket")
        assert params == {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        local = {"python": sys.executable, "/work": str(self.work_dir)}
        command = [local.get(part, part) for part in self.spec["command"]]
        self.process = subprocess.Popen(
            command, cwd=self.work_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        ours, theirs = socket.socketpair()
        pumps: list[threading.Thread] = []

        def pump(stream: Any, kind: int) -> None:
            while chunk := stream.read1(3):  # tiny frames: the reader must reassemble lines across frames
                ours.sendall(bytes([kind, 0, 0, 0]) + len(chunk).to_bytes(4, "big") + chunk)

        def feed() -> None:
            try:
                while data := ours.recv(1 << 16):
                    self.process.stdin.write(data)
                    self.process.stdin.flush()
            except OSError:
                pass

        def close_when_done() -> None:  # the engine ends the stream when the container's output ends
            for thread in pumps:
                thread.join()
            ours.shutdown(socket.SHUT_WR)

        for target, args in ((pump, (self.process.stdout, 1)), (pump, (self.process.stderr, 2))):
            pumps.append(threading.Thread(target=target, args=args, daemon=True))
        for thread in [*pumps, threading.Thread(target=feed, daemon=True)]:
            thread.start()
        threading.Thread(target=close_when_done, daemon=True).start()

        class SocketIO:  # what the docker SDK returns: the real socket is in ._sock
            _sock = theirs

            def close(self) -> None:
                theirs.close()

        return SocketIO()


class FakeClient:
    def __init__(self) -> None:
        self.fail_start = False
        self.created: list[FakeContainer] = []
        self.containers = self

    def create(self, **spec: Any) -> FakeContainer:  # client.containers.create(...)
        container = FakeContainer(self, spec)
        self.created.append(container)
        return container


def assert_locked_down(spec: dict[str, Any], *, memory_mb: int) -> None:
    assert spec["network_mode"] == "none"
    assert spec["mem_limit"] == spec["memswap_limit"] == f"{memory_mb}m"
    assert spec["pids_limit"] == 64
    assert spec["nano_cpus"] == 1_000_000_000
    assert spec["read_only"] is True
    assert spec["tmpfs"] == {
        "/tmp": "rw,nosuid,nodev,size=64m,mode=1777",
        "/work": "rw,exec,nosuid,nodev,size=256m,uid=65534,gid=65534,mode=0700",  # nobody owns its work dir
    }
    assert "mounts" not in spec and "volumes" not in spec  # nothing of the host, no volume left on its disk
    assert spec["cap_drop"] == ["ALL"]
    assert spec["security_opt"] == ["no-new-privileges"]
    assert spec["user"] == "65534:65534"
    assert spec["working_dir"] == "/work"
    assert spec["log_config"] == {"type": "none", "config": {}}  # output is never written to the engine's disk
    assert {u["Name"] for u in spec["ulimits"]} >= {"nofile", "fsize", "core"}
    assert set(spec["environment"]) == {
        "PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONPATH", "TMPDIR", "MALLOC_ARENA_MAX",
    }  # fmt: skip
    assert spec["detach"] is True and spec["tty"] is False and spec["stdin_open"] is True


def test_run_creates_a_locked_down_container_and_removes_it() -> None:
    client = FakeClient()
    sandbox = DockerSandbox(client=client)
    assert isinstance(sandbox, Sandbox)
    code = (
        "import os, sys\nprint(open('data/in.txt').read(), open('t.txt').read(), len(open('.causaltrace/main.py').read()))\n"
        "print(sys.stdin.read() == '', sys.argv[0].endswith('.causaltrace/main.py'))\n"
        "sys.stderr.write('err\\n')\nsys.exit(3)"
    )
    result = sandbox.run(code, files={"data/in.txt": b"41", "t.txt": "text"}, timeout_s=7.5, memory_mb=300)
    (container,) = client.created
    assert_locked_down(container.spec, memory_mb=300)
    assert container.spec["image"] == "python:3.11-slim"
    assert container.spec["command"] == ["python", "-c", BOOTSTRAP_SOURCE, "/work", "python", ".causaltrace/main.py"]
    assert {"Name": "cpu", "Soft": 9, "Hard": 10} in container.spec["ulimits"]
    assert container.calls == ["attach_socket", "start", "wait(7.5)", "remove"]  # attached first: no output lost
    # the bootstrap wrote the files, pointed stdin at /dev/null and exec'd the code
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (
        3,
        f"41 text {len(code)}\nTrue True\n",
        "err\n",
        False,
    )
    assert container.removed == {"force": True, "v": True}


def test_files_payload_rejects_escaping_names_and_frames_the_rest() -> None:
    payload = files_payload({"a/b.txt": b"xy", "c": "z"})
    size = int.from_bytes(payload[:8], "big")
    assert payload[8 : 8 + size] == b'[["a/b.txt", 2], ["c", 1]]' and payload[8 + size :] == b"xyz"
    for bad in ("/etc/passwd", "../up", "a/../../b", ""):
        with pytest.raises(ValueError, match="relative path"):
            files_payload({bad: b"x"})


def test_the_bootstrap_says_so_when_the_files_do_not_arrive_whole(tmp_path: Path) -> None:
    frame = files_payload({"x.txt": b"0123456789"})
    result = subprocess.run(
        [sys.executable, "-c", BOOTSTRAP_SOURCE, str(tmp_path), sys.executable, "x.txt"],
        input=frame[:-3], capture_output=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1 and b"did not arrive whole" in result.stderr


def test_the_image_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    assert DockerSandbox().image == "python:3.11-slim"
    monkeypatch.setenv(IMAGE_ENV, SANDBOX_IMAGE)
    assert DockerSandbox().image == SANDBOX_IMAGE
    assert DockerSandbox("other:1").image == "other:1"
    client = FakeClient()
    DockerSandbox(client=client).run("pass", timeout_s=20, memory_mb=64)
    assert client.created[0].spec["image"] == SANDBOX_IMAGE


def test_run_timeout_kills_and_still_removes() -> None:
    client = FakeClient()
    result = DockerSandbox(client=client).run(
        "import sys\nprint('partial', flush=True)\nwhile True: pass", timeout_s=3, memory_mb=256
    )
    (container,) = client.created
    assert result.timed_out is True and result.exit_code == -9 and result.stdout == "partial\n"
    assert container.calls[-2:] == ["kill", "remove"]
    assert container.removed == {"force": True, "v": True}


def test_signal_deaths_are_negative_exit_codes() -> None:
    client = FakeClient()  # Docker reports 137 for a SIGKILL (e.g. the OOM killer)
    result = DockerSandbox(client=client).run("import os\nos.kill(os.getpid(), 9)", timeout_s=20, memory_mb=64)
    assert result.exit_code == -9


def test_start_failure_is_a_sandbox_error_and_the_container_is_removed() -> None:
    client = FakeClient()
    client.fail_start = True
    with pytest.raises(SandboxError, match="could not start"):
        DockerSandbox(client=client).run("print(1)", timeout_s=5, memory_mb=256)
    (container,) = client.created
    assert container.removed == {"force": True, "v": True}


def test_output_is_capped() -> None:
    client = FakeClient()
    result = DockerSandbox(client=client, max_output_bytes=1000).run(
        "import sys\nsys.stdout.write('x' * 5000)\nsys.stderr.write('e' * 1500)", timeout_s=20, memory_mb=256
    )
    assert result.stdout.startswith("x" * 1000) and "4000 more bytes of output dropped" in result.stdout
    assert result.stderr.startswith("e" * 1000) and "500 more bytes of output dropped" in result.stderr


def test_missing_docker_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(MissingExtraError, match=r"causaltrace\[docker\]"):
        DockerSandbox().run("print(1)", timeout_s=5, memory_mb=256)


def test_unreachable_engine_is_a_sandbox_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("docker", reason="no Docker engine (the docker SDK is not installed)")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError, match="no Docker engine answers"):
        DockerSandbox().run("print(1)", timeout_s=5, memory_mb=256)


def test_worker_speaks_framed_json_over_the_attach_socket() -> None:
    client = FakeClient()
    sandbox = DockerSandbox(client=client)
    session = PythonWorkerSession(sandbox, {"lookup": lambda key: {"a": 1}[key]}, timeout_s=20, memory_mb=256)
    try:
        (container,) = client.created
        assert_locked_down(container.spec, memory_mb=256)
        assert container.spec["command"][:2] == ["python", "-c"]
        assert not any(u["Name"] == "cpu" for u in container.spec["ulimits"])
        assert container.calls[:2] == ["attach_socket", "start"]  # attached before it starts
        assert isinstance(session._worker, DockerWorker) and isinstance(session._worker, Worker)
        session.execute("import sys\nvalue = lookup('a')\nprint('stdout ' * 50)\nsys.stderr.write('e\\n')")
        result = session.execute("value + 1")
        assert result["output"] == 2
        assert session.execute("print('x' * 10000)")["stdout"] == "x" * 10000 + "\n"
    finally:
        session.close()
    assert container.removed == {"force": True, "v": True}


def test_worker_recv_timeout_and_close() -> None:
    client = FakeClient()
    worker = DockerSandbox(client=client).open_worker(
        ["python", "-c", 'import time, sys; print(\'{"type": "ready"}\', flush=True); time.sleep(30)'],
        timeout_s=30,
        memory_mb=256,
    )
    try:
        assert worker.recv(timeout_s=20) == {"type": "ready"}
        with pytest.raises(SandboxTimeout):
            worker.recv(timeout_s=0.2)
    finally:
        worker.close()
        worker.close()
    assert client.created[0].removed == {"force": True, "v": True}
    with pytest.raises(SandboxError, match="closed"):
        worker.send({"type": "x"})


# ---------------------------------------------------------------------------------------------- live engine


@pytest.fixture(scope="module")
def engine() -> Any:
    """A docker client for a live engine with the sandbox image (tests/_docker.py)."""
    with docker_engine(require) as client:
        yield client


def _ours(client: Any) -> set[str]:
    return {c.id for c in client.containers.list(all=True, filters={"label": "causaltrace.sandbox"})}


def test_live_docker_engine(engine: Any) -> None:
    sandbox = DockerSandbox(SANDBOX_IMAGE, client=engine)
    before = _ours(engine)
    result = sandbox.run(
        "import os, socket\nprint(os.getuid(), open('in.txt').read())\nopen('out.txt', 'w').write('ok')\n"
        "os.makedirs('sub/dir'); open('sub/dir/x', 'w').write('x')\nprint(open('out.txt').read())\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\nexcept OSError:\n    print('no network')\n"
        "try:\n    open('/etc/evil', 'w')\nexcept OSError:\n    print('read-only root')\n",
        files={"in.txt": b"hello"},
        timeout_s=60,
        memory_mb=256,
    )
    assert result.stdout == "65534 hello\nok\nno network\nread-only root\n", result
    timed = sandbox.run("while True: pass", timeout_s=2, memory_mb=256)
    assert timed.timed_out is True and timed.exit_code == -9
    with PythonWorkerSession(sandbox, {"double": lambda x: 2 * x}, timeout_s=30, memory_mb=256) as session:
        session.execute("v = double(21)\nopen('state.txt', 'w').write('kept')")
        assert session.execute("v")["output"] == 42
        assert session.execute("open('state.txt').read()")["output"] == "kept"
    assert _ours(engine) == before  # every container removed


def test_live_files_and_output(engine: Any) -> None:
    sandbox = DockerSandbox(SANDBOX_IMAGE, client=engine, max_output_bytes=1 << 16)
    blob = os.urandom(3 << 20)  # larger than one chunk of the bootstrap, and not text
    result = sandbox.run(
        "import hashlib, sys\nprint(hashlib.sha256(open('deep/a/b.bin', 'rb').read()).hexdigest())\n"
        "sys.stdout.write('y' * 200_000)\nsys.stderr.write('to stderr')",
        files={"deep/a/b.bin": blob},
        timeout_s=60,
        memory_mb=256,
    )
    import hashlib

    assert result.exit_code == 0, result
    assert result.stdout.startswith(hashlib.sha256(blob).hexdigest() + "\n" + "y" * 1000)
    assert f"{65 + 200_000 - (1 << 16)} more bytes of output dropped" in result.stdout
    assert result.stderr == "to stderr"


def test_live_missing_image_is_a_sandbox_error(engine: Any) -> None:
    with pytest.raises(SandboxError, match="could not be pulled.*CAUSALTRACE_DOCKER_IMAGE"):
        DockerSandbox("causaltrace/no-such-image:none", client=engine).run("print(1)", timeout_s=10, memory_mb=64)


def test_live_run_latency(engine: Any) -> None:
    """``run("print(1)")`` end to end (create, attach, start, files, wait, remove): ~0.9 s here (2 cores, loaded)."""
    sandbox = DockerSandbox(SANDBOX_IMAGE, client=engine)
    times = []
    for _ in range(3):
        started = time.monotonic()
        assert sandbox.run("print(1)", timeout_s=30, memory_mb=128).stdout == "1\n"
        times.append(time.monotonic() - started)
    print(f"DockerSandbox.run('print(1)'): median {sorted(times)[1]:.3f} s over 3")
    assert sorted(times)[1] < 10.0


# The attack table (tests/_sandbox_attacks.py), every row that applies to a container, with the container's own
# answers and rows.


@pytest.fixture
def parent_listener() -> Iterator[socket.socket]:
    with listening("0.0.0.0") as listener:  # every address of the host: the container must reach none of them
        yield listener


@pytest.fixture
def home_secret() -> Iterator[Path]:
    with secret_in_home() as path:
        yield path


def _host_ip() -> str:
    """A non-loopback address of this host (what a container on a bridge would reach it by), else 127.0.0.1."""
    try:
        return next(a for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split())
    except (OSError, StopIteration):
        return "127.0.0.1"


def _kill_ours(client: Any, before: set[str]) -> None:
    """The outer watchdog's action, should containment fail: kill this row's containers."""
    for container in client.containers.list(all=True, filters={"label": "causaltrace.sandbox"}):
        if container.id not in before:
            try:
                container.kill()
            except Exception:
                pass


@pytest.mark.parametrize("attack", attack_params(local=False))
def test_attack_is_contained_in_docker(
    engine: Any,
    attack: Attack,
    parent_listener: socket.socket,
    home_secret: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = attack.in_sandbox("docker")
    assert row is not None
    code, expected = row
    monkeypatch.setenv("CAUSALTRACE_TEST_SECRET", ENV_SECRET)
    filled = fill(
        code,
        HOST_IP=_host_ip(),
        PORT=parent_listener.getsockname()[1],
        SECRET=home_secret,
        REPO=REPO,
        PARENT_PID=os.getpid(),
    )
    sandbox = DockerSandbox(SANDBOX_IMAGE, client=engine)
    before = _ours(engine)
    result, elapsed = run_watched(
        lambda: sandbox.run(filled, timeout_s=expected.timeout_s, memory_mb=expected.memory_mb),
        expected,
        lambda: _kill_ours(engine, before),
    )
    check_contained(result, expected, elapsed=elapsed, detail=repr(result), stdout=result.stdout)

    # nothing reached the parent, the host is untouched, the engine still answers, and no container is left
    check_host_untouched(parent_listener, home_secret)
    assert engine.ping()
    assert _ours(engine) == before
