"""``DockerSandbox``: one locked-down container per run (ARCHITECTURE decision 7; the ``docker`` extra).

Every container is created with: ``network_mode="none"``, ``mem_limit`` = ``memswap_limit`` = ``memory_mb``,
``pids_limit``, ``nano_cpus`` (default one core), ``read_only=True`` root, a size-limited ``tmpfs`` ``/tmp``,
``cap_drop=["ALL"]``, ``security_opt=["no-new-privileges"]``, ``user="65534:65534"`` (nobody — numeric, so it works
in images without a ``nobody`` entry), ``init=True`` (zombies are reaped), ulimits for open files, file size, core
dumps and — for ``run`` — CPU seconds, and a clean environment. The work dir ``/work`` is an anonymous volume (the
only writable place besides ``/tmp``): the files and the code (``/work/.causaltrace/main.py``) are copied in with
``put_archive`` before the container starts, the archive's root entry making ``/work`` writable for nobody. At the
timeout the container is killed (``timed_out=True``); it is ALWAYS removed with its volume (``remove(force=True,
v=True)`` in a ``finally``).

The docker SDK is imported only when no ``client`` is given (``MissingExtraError`` names the ``docker`` extra when
it is absent); an unreachable engine is a ``SandboxError``. ``open_worker`` starts a container with stdin open and
speaks the same line-framed JSON over the attach socket (Docker multiplexes stdout/stderr on it with 8-byte frame
headers, which :class:`DockerWorker` splits).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import tarfile
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

__all__ = ["DockerSandbox", "DockerWorker"]

logger = logging.getLogger("causaltrace")

WORK_DIR = "/work"
_MAIN = ".causaltrace/main.py"


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


def _archive(files: Mapping[str, bytes | str]) -> bytes:
    """A tar of ``files`` for ``put_archive('/work', ...)``; directories 1777/0777 and files 0666 for uid 65534."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        now = time.time()
        root = tarfile.TarInfo(".")
        root.type, root.mode, root.mtime = tarfile.DIRTYPE, 0o1777, now
        tar.addfile(root)
        made: set[str] = set()
        for name, content in files.items():
            relative = relative_file_path(name)
            for parent in reversed(relative.parents[:-1]):
                if str(parent) not in made:
                    made.add(str(parent))
                    info = tarfile.TarInfo(str(parent))
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o777, now
                    tar.addfile(info)
            data = content.encode() if isinstance(content, str) else bytes(content)
            info = tarfile.TarInfo(str(relative))
            info.size, info.mode, info.mtime = len(data), 0o666, now
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _remove(container: Any) -> None:
    try:
        container.remove(force=True, v=True)
    except Exception as exc:  # never mask the run's own result or error; the label lets an operator find it
        logger.warning("causaltrace sandbox: could not remove container %s: %s", getattr(container, "id", "?"), exc)


class DockerSandbox:
    """Runs untrusted code in a fresh, locked-down Docker container per run (see the module docstring).

    Args:
        image: the image to run (must contain ``python`` on PATH for ``run`` and the Python worker).
        client: a ``docker.DockerClient`` (or anything with its ``containers.create``); default ``docker.from_env()``.
        python: the interpreter's name or path inside the image.
        pids_max, cpus, tmp_mb, max_file_mb, max_open_files, max_output_bytes: as for ``SubprocessSandbox``.
    """

    def __init__(
        self,
        image: str = "python:3.11-slim",
        client: Any = None,
        *,
        python: str = "python",
        pids_max: int = 64,
        cpus: float | None = 1.0,
        tmp_mb: int = 64,
        max_file_mb: int = 64,
        max_open_files: int = 256,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        self.image = image
        self._client = client
        self.python = python
        self.pids_max = pids_max
        self.cpus = cpus
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

    def _spec(self, command: list[str], *, memory_mb: int, cpu_seconds: int | None, stdin_open: bool) -> dict[str, Any]:
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
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={self.tmp_mb}m,mode=1777"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "mounts": [{"Target": WORK_DIR, "Type": "volume", "ReadOnly": False}],
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
            "detach": True,
            "stdin_open": stdin_open,
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
        client.images.pull(self.image)
        return client.containers.create(**spec)

    def run(
        self, code: str, *, files: Mapping[str, bytes] | None = None, timeout_s: float, memory_mb: int
    ) -> CodeResult:
        """Run ``code`` as ``python /work/.causaltrace/main.py`` in a new container; always removes it."""
        check_limits(timeout_s, memory_mb)
        started = time.monotonic()
        archive = _archive({**(files or {}), _MAIN: code})
        spec = self._spec(
            [self.python, f"{WORK_DIR}/{_MAIN}"],
            memory_mb=memory_mb,
            cpu_seconds=math.ceil(timeout_s) + 1,
            stdin_open=False,
        )
        container = None
        try:
            try:
                container = self._create(spec)
                container.put_archive(WORK_DIR, archive)
                container.start()
            except (MissingExtraError, SandboxError):
                raise
            except Exception as exc:
                raise SandboxError(f"the Docker sandbox could not start: {exc}") from exc
            timed_out = False
            try:
                status = container.wait(timeout=timeout_s)
                exit_code = exit_code_of(int(status.get("StatusCode", -1)))
            except Exception as exc:
                if not _is_timeout(exc):
                    raise SandboxError(f"lost the Docker sandbox while waiting for it: {exc}") from exc
                timed_out, exit_code = True, -9
                with contextlib.suppress(Exception):
                    container.kill()
            stdout = container.logs(stdout=True, stderr=False) or b""
            stderr = container.logs(stdout=False, stderr=True) or b""
            cap = self.max_output_bytes
            return CodeResult(
                exit_code=exit_code,
                stdout=decode_output(stdout[:cap], max(0, len(stdout) - cap)),
                stderr=decode_output(stderr[:cap], max(0, len(stderr) - cap)),
                timed_out=timed_out,
                duration_s=round(time.monotonic() - started, 6),
            )
        finally:
            if container is not None:
                _remove(container)

    def open_worker(self, argv: list[str], *, timeout_s: float, memory_mb: int) -> DockerWorker:
        """Start ``argv`` in a container with stdin open; framed JSON over the attach socket (see module doc)."""
        if not argv:
            raise InvalidInputError("open_worker needs a non-empty argv")
        check_limits(timeout_s, memory_mb)
        spec = self._spec(list(argv), memory_mb=memory_mb, cpu_seconds=None, stdin_open=True)
        container = None
        try:
            container = self._create(spec)
            container.put_archive(WORK_DIR, _archive({}))
            sock = container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            container.start()
        except (MissingExtraError, SandboxError):
            if container is not None:
                _remove(container)
            raise
        except Exception as exc:
            if container is not None:
                _remove(container)
            raise SandboxError(f"the Docker sandbox could not start: {exc}") from exc
        return DockerWorker(container, sock, idle_timeout_s=timeout_s)

    def python_worker_argv(self) -> list[str]:
        """The ready-made Python worker, passed as ``python -c SOURCE`` (nothing to copy into the image)."""
        from causaltrace.replay.sandbox.session import PYWORKER_SOURCE

        return [self.python, "-c", PYWORKER_SOURCE]


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


def _demux(sock: Any, channel: FramedChannel) -> None:
    """Split Docker's multiplexed attach stream (8-byte headers: stream id, 3 zero bytes, big-endian size)."""
    with contextlib.suppress(OSError, ValueError):
        while True:
            header = _read_exact(sock, 8)
            if len(header) < 8:
                break
            size = int.from_bytes(header[4:8], "big")
            payload = _read_exact(sock, size)
            if header[0] == 2:
                channel.feed_stderr(payload)
            else:
                channel.feed_stdout(payload)
            if len(payload) < size:
                break
    channel.eof()


def _close_docker_worker(container: Any, sock: Any, channel: FramedChannel) -> None:
    channel.closed.set()
    with contextlib.suppress(Exception):
        _raw(sock).close()
    with contextlib.suppress(Exception):
        sock.close()
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
