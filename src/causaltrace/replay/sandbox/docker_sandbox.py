"""``DockerSandbox``: one locked-down container per run (ARCHITECTURE decision 7; the ``docker`` extra).

Every container is created with: ``network_mode="none"``, ``mem_limit`` = ``memswap_limit`` = ``memory_mb``,
``pids_limit``, ``nano_cpus`` (default one core), ``read_only=True`` root, a size-limited ``tmpfs`` ``/tmp``,
``cap_drop=["ALL"]``, ``security_opt=["no-new-privileges"]``, ``user="65534:65534"`` (nobody — numeric, so it works
in images without a ``nobody`` entry), ``init=True`` (zombies are reaped), ulimits for open files, file size, core
dumps and — for ``run`` — CPU seconds, a clean environment, and no log driver (``log_config`` ``none``: output is
read from the attach stream, capped, and never written to the engine's disk).

The work dir ``/work`` (the only writable place besides ``/tmp``) is a tmpfs owned by uid/gid 65534
(``uid=65534,gid=65534,mode=0700``, ``work_mb`` MiB; its pages count against ``memory_mb``). Why not a volume
filled with ``put_archive``: a real engine creates an anonymous volume root-owned 0755 (the archive's root entry is
not applied to an existing directory), so nobody could not write its own work dir; a tmpfs mount, in turn, exists
only once the container runs, so ``put_archive`` cannot reach it. ``run`` therefore starts a tiny bootstrap
(``python -c``, :data:`BOOTSTRAP_SOURCE`) that reads the files and the code (``/work/.causaltrace/main.py``) from
its stdin — framed as :func:`files_payload` writes them — writes them into ``/work``, points stdin at
``/dev/null`` and ``exec``s ``python /work/.causaltrace/main.py``. The container is attached (stdin, stdout,
stderr) before it starts, so no output is lost. At the timeout the container is killed (``timed_out=True``); it is
ALWAYS removed (``remove(force=True, v=True)`` in a ``finally``).

The image is ``image=``, else ``$CAUSALTRACE_DOCKER_IMAGE``, else ``python:3.11-slim``; where images cannot be
pulled, ``scripts/install_docker.sh`` builds ``causaltrace/sandbox-python:bookworm`` from Debian packages. The docker
SDK is imported only when no ``client`` is given (``MissingExtraError`` names the ``docker`` extra when it is
absent); an unreachable engine, or an image that is absent and cannot be pulled, is a ``SandboxError``.
``open_worker`` starts a container with stdin open and speaks the same line-framed JSON over the attach socket
(Docker multiplexes stdout/stderr on it with 8-byte frame headers, which :class:`DockerWorker` splits).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from causaltrace.exceptions import InvalidInputError, MissingExtraError, SandboxError
from causaltrace.replay.sandbox._common import (
    DEFAULT_MAX_OUTPUT_BYTES,
    MAX_MESSAGE_BYTES,
    check_limits,
    decode_output,
    exit_code_of,
    relative_file_path,
)
from causaltrace.replay.sandbox._worker import FramedChannel, FramedWorker, watchdog
from causaltrace.schema import CodeResult

__all__ = ["BOOTSTRAP_SOURCE", "DEFAULT_IMAGE", "IMAGE_ENV", "DockerSandbox", "DockerWorker", "files_payload"]

logger = logging.getLogger("causaltrace")

WORK_DIR = "/work"
_MAIN = ".causaltrace/main.py"
#: The image used when neither ``image=`` nor ``$CAUSALTRACE_DOCKER_IMAGE`` names one.
DEFAULT_IMAGE = "python:3.11-slim"
IMAGE_ENV = "CAUSALTRACE_DOCKER_IMAGE"
_JOIN_S = 5.0  # how long the output reader may take to drain after the container ended

#: Run inside the container as ``python -c BOOTSTRAP WORK_DIR PYTHON MAIN``: reads :func:`files_payload`'s frame
#: from stdin, writes the files under WORK_DIR, then execs ``PYTHON WORK_DIR/MAIN`` with stdin on /dev/null.
BOOTSTRAP_SOURCE = """\
import json, os, sys
work, python, main = sys.argv[1:4]
stdin = sys.stdin.buffer
def take(size):
    data = stdin.read(size)
    if len(data) != size:
        sys.exit("causaltrace sandbox: the files did not arrive whole")
    return data
try:
    for name, size in json.loads(take(int.from_bytes(take(8), "big"))):
        path = os.path.join(work, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            while size:
                chunk = take(min(size, 1 << 20))
                out.write(chunk)
                size -= len(chunk)
except OSError as exc:
    sys.exit(f"causaltrace sandbox: could not write the files into {work}: {exc}")
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
os.execvp(python, [python, os.path.join(work, main)])
"""


def files_payload(files: Mapping[str, bytes | str]) -> bytes:
    """The bootstrap's stdin: an 8-byte big-endian header length, a JSON ``[[name, size], ...]``, the contents."""
    names, blobs = [], []
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else bytes(content)
        names.append([str(relative_file_path(name)), len(data)])
        blobs.append(data)
    header = json.dumps(names).encode()
    return len(header).to_bytes(8, "big") + header + b"".join(blobs)


def _is_timeout(exc: BaseException) -> bool:
    """requests' ReadTimeout / urllib3's ReadTimeoutError, however the docker SDK wraps them."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TimeoutError) or "timeout" in type(current).__name__.lower():
            return True
        if "timed out" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


def _remove(container: Any) -> None:
    try:
        container.remove(force=True, v=True)
    except Exception as exc:  # never mask the run's own result or error; the label lets an operator find it
        logger.warning("causaltrace sandbox: could not remove container %s: %s", getattr(container, "id", "?"), exc)


class DockerSandbox:
    """Runs untrusted code in a fresh, locked-down Docker container per run (see the module docstring).

    Args:
        image: the image to run (must contain ``python`` on PATH for ``run`` and the Python worker); default
            ``$CAUSALTRACE_DOCKER_IMAGE``, else ``python:3.11-slim``.
        client: a ``docker.DockerClient`` (or anything with its ``containers.create``); default ``docker.from_env()``.
        python: the interpreter's name or path inside the image.
        work_mb: size of the tmpfs work dir ``/work`` (the files passed to ``run`` must fit in it).
        pids_max, cpus, tmp_mb, max_file_mb, max_open_files, max_output_bytes: as for ``SubprocessSandbox``.
    """

    def __init__(
        self,
        image: str | None = None,
        client: Any = None,
        *,
        python: str = "python",
        pids_max: int = 64,
        cpus: float | None = 1.0,
        work_mb: int = 256,
        tmp_mb: int = 64,
        max_file_mb: int = 64,
        max_open_files: int = 256,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        self.image = image or os.environ.get(IMAGE_ENV, "").strip() or DEFAULT_IMAGE
        self._client = client
        self.python = python
        self.pids_max = pids_max
        self.cpus = cpus
        self.work_mb = work_mb
        self.tmp_mb = tmp_mb
        self.max_file_mb = max_file_mb
        self.max_open_files = max_open_files
        self.max_output_bytes = max_output_bytes

    def __repr__(self) -> str:
        return f"DockerSandbox(image={self.image!r})"

    @property
    def client(self) -> Any:
        """The docker client; created from the environment (and pinged) on first use."""
        if self._client is None:
            try:
                import docker
            except ImportError as exc:
                raise MissingExtraError("docker", "docker") from exc
            try:
                client = docker.from_env()
                client.ping()
            except Exception as exc:  # DockerException, requests' ConnectionError, ...
                raise SandboxError(f"no Docker engine answers: {exc}") from exc
            self._client = client
        return self._client

    def _spec(self, command: list[str], *, memory_mb: int, cpu_seconds: int | None) -> dict[str, Any]:
        ulimits = [
            {"Name": "nofile", "Soft": self.max_open_files, "Hard": self.max_open_files},
            {"Name": "fsize", "Soft": self.max_file_mb << 20, "Hard": self.max_file_mb << 20},
            {"Name": "core", "Soft": 0, "Hard": 0},
        ]
        if cpu_seconds:
            ulimits.append({"Name": "cpu", "Soft": cpu_seconds, "Hard": cpu_seconds + 1})
        spec: dict[str, Any] = {
            "image": self.image,
            "command": command,
            "working_dir": WORK_DIR,
            "user": "65534:65534",
            "hostname": "sandbox",
            "network_mode": "none",
            "mem_limit": f"{memory_mb}m",
            "memswap_limit": f"{memory_mb}m",
            "pids_limit": self.pids_max,
            "read_only": True,
            "tmpfs": {
                "/tmp": f"rw,nosuid,nodev,size={self.tmp_mb}m,mode=1777",
                WORK_DIR: f"rw,exec,nosuid,nodev,size={self.work_mb}m,uid=65534,gid=65534,mode=0700",
            },
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "ulimits": ulimits,
            "environment": {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": WORK_DIR,
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONNOUSERSITE": "1",
                "PYTHONPATH": WORK_DIR,
                "TMPDIR": "/tmp",
                "MALLOC_ARENA_MAX": "2",
            },
            "init": True,
            "labels": {"causaltrace.sandbox": "1"},
            "log_config": {"type": "none", "config": {}},
            "detach": True,
            "stdin_open": True,
            "tty": False,
        }
        if self.cpus:
            spec["nano_cpus"] = int(self.cpus * 1e9)
        return spec

    def _create(self, spec: dict[str, Any]) -> Any:
        client = self.client
        try:
            return client.containers.create(**spec)
        except Exception as exc:
            if type(exc).__name__ != "ImageNotFound":
                raise
        try:
            client.images.pull(self.image)
        except Exception as exc:
            raise SandboxError(
                f"the Docker image {self.image!r} is not on this engine and could not be pulled ({exc}); "
                f"build one (scripts/install_docker.sh) and pass image= or set ${IMAGE_ENV}"
            ) from exc
        return client.containers.create(**spec)

    def _start_attached(self, spec: dict[str, Any]) -> tuple[Any, Any]:
        """Create the container, attach stdin/stdout/stderr, start it; on failure remove it (SandboxError)."""
        container = sock = None
        try:
            container = self._create(spec)
            sock = container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            container.start()
        except Exception as exc:
            if sock is not None:
                _close_socket(sock)
            if container is not None:
                _remove(container)
            if isinstance(exc, (MissingExtraError, SandboxError)):
                raise
            raise SandboxError(f"the Docker sandbox could not start: {exc}") from exc
        return container, sock

    def run(
        self, code: str, *, files: Mapping[str, bytes] | None = None, timeout_s: float, memory_mb: int
    ) -> CodeResult:
        """Run ``code`` as ``python /work/.causaltrace/main.py`` in a new container; always removes it."""
        check_limits(timeout_s, memory_mb)
        started = time.monotonic()
        payload = files_payload({**(files or {}), _MAIN: code})
        command = [self.python, "-c", BOOTSTRAP_SOURCE, WORK_DIR, self.python, _MAIN]
        spec = self._spec(command, memory_mb=memory_mb, cpu_seconds=math.ceil(timeout_s) + 1)
        container, sock = self._start_attached(spec)
        try:
            output = _CappedOutput(sock, self.max_output_bytes)
            # sent from a thread: a container that stops reading cannot block us past the timeout (killing it
            # closes the connection); one that is already gone (e.g. OOM-killed) has its status say so
            threading.Thread(target=_send, args=(sock, payload), name="causaltrace-docker-files", daemon=True).start()
            timed_out = False
            try:
                status = container.wait(timeout=timeout_s)  # the code's time starts with the container's
                exit_code = exit_code_of(int(status.get("StatusCode", -1)))
            except Exception as exc:
                if not _is_timeout(exc):
                    raise SandboxError(f"lost the Docker sandbox while waiting for it: {exc}") from exc
                timed_out, exit_code = True, -9
                with contextlib.suppress(Exception):
                    container.kill()
            stdout, stderr = output.result(_JOIN_S)
            return CodeResult(
                exit_code=exit_code,
                stdout=stdout,
                stderr=stderr,
                timed_out=timed_out,
                duration_s=round(time.monotonic() - started, 6),
            )
        finally:
            _close_socket(sock)
            _remove(container)

    def open_worker(self, argv: list[str], *, timeout_s: float, memory_mb: int) -> DockerWorker:
        """Start ``argv`` in a container with stdin open; framed JSON over the attach socket (see module doc)."""
        if not argv:
            raise InvalidInputError("open_worker needs a non-empty argv")
        check_limits(timeout_s, memory_mb)
        spec = self._spec(list(argv), memory_mb=memory_mb, cpu_seconds=None)
        container, sock = self._start_attached(spec)
        return DockerWorker(container, sock, idle_timeout_s=timeout_s)

    def python_worker_argv(self) -> list[str]:
        """The ready-made Python worker, passed as ``python -c SOURCE`` (nothing to copy into the image)."""
        from causaltrace.replay.sandbox.session import PYWORKER_SOURCE

        return [self.python, "-c", PYWORKER_SOURCE]


class _CappedOutput:
    """Reads a run's attach stream in a thread: the first ``cap`` bytes of stdout and of stderr, the rest counted."""

    def __init__(self, sock: Any, cap: int) -> None:
        self._sock = sock
        self._cap = cap
        self._kept = {1: bytearray(), 2: bytearray()}
        self._dropped = {1: 0, 2: 0}
        self._thread = threading.Thread(target=self._read, name="causaltrace-docker-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for stream, payload in _frames(self._sock):
                key = 2 if stream == 2 else 1
                kept = self._kept[key]
                room = max(0, self._cap - len(kept))
                kept += payload[:room]
                self._dropped[key] += max(0, len(payload) - room)

    def result(self, join_s: float) -> tuple[str, str]:
        """(stdout, stderr) once the stream ended (or after ``join_s``: what arrived by then)."""
        self._thread.join(join_s)
        return (
            decode_output(bytes(self._kept[1]), self._dropped[1]),
            decode_output(bytes(self._kept[2]), self._dropped[2]),
        )


def _send(sock: Any, payload: bytes) -> None:
    with contextlib.suppress(OSError):
        _raw(sock).sendall(payload)


def _close_socket(sock: Any) -> None:
    with contextlib.suppress(Exception):
        _raw(sock).close()
    with contextlib.suppress(Exception):
        sock.close()


# ------------------------------------------------------------------------------------------ the worker


def _raw(sock: Any) -> Any:
    """The real socket under the docker SDK's ``SocketIO`` wrapper (or the object itself)."""
    return getattr(sock, "_sock", sock)


def _read_exact(sock: Any, size: int) -> bytes:
    raw = _raw(sock)
    chunks = bytearray()
    while len(chunks) < size:
        chunk = raw.recv(size - len(chunks)) if hasattr(raw, "recv") else sock.read(size - len(chunks))
        if not chunk:
            break
        chunks += chunk
    return bytes(chunks)


def _frames(sock: Any) -> Any:
    """Docker's multiplexed attach stream as (stream id, payload) pairs (8-byte headers: stream id, 3 zero bytes,
    big-endian size); ends at EOF or a short frame."""
    while True:
        header = _read_exact(sock, 8)
        if len(header) < 8:
            return
        size = int.from_bytes(header[4:8], "big")
        payload = _read_exact(sock, size)
        yield header[0], payload
        if len(payload) < size:
            return


def _demux(sock: Any, channel: FramedChannel) -> None:
    """Feed a worker's attach stream into its channel: stream 2 is stderr, the rest stdout."""
    with contextlib.suppress(OSError, ValueError):
        for stream, payload in _frames(sock):
            if stream == 2:
                channel.feed_stderr(payload)
            else:
                channel.feed_stdout(payload)
    channel.eof()


def _close_docker_worker(container: Any, sock: Any, channel: FramedChannel) -> None:
    channel.closed.set()
    _close_socket(sock)
    _remove(container)


class DockerWorker(FramedWorker):
    """A persistent container speaking line-framed JSON over its attach socket (``Worker``)."""

    def __init__(
        self, container: Any, sock: Any, *, idle_timeout_s: float, max_message_bytes: int = MAX_MESSAGE_BYTES
    ) -> None:
        super().__init__(FramedChannel(idle_timeout_s, max_message_bytes))
        self._container = container
        self._sock = sock
        channel = self._channel
        dead = threading.Event()

        def running() -> bool:
            return not dead.is_set()

        def kill() -> None:
            with contextlib.suppress(Exception):
                container.kill()

        self._threads = [
            threading.Thread(target=lambda: (_demux(sock, channel), dead.set()), daemon=True),
            threading.Thread(
                target=watchdog, args=(channel, running, kill, str(getattr(container, "id", "?"))), daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()
        self._finalizer = weakref.finalize(self, _close_docker_worker, container, sock, channel)

    @property
    def container(self) -> Any:
        """The docker container object."""
        return self._container

    def _write(self, data: bytes) -> None:
        _raw(self._sock).sendall(data)

    def _exit_code(self) -> int | None:
        try:
            return int(self._container.wait(timeout=2).get("StatusCode"))
        except Exception:  # still running, already removed, or the engine went away
            return None
