"""Test helper: a live Docker engine with the sandbox image (see scripts/install_docker.sh).

    from _docker import SANDBOX_IMAGE, docker_engine

    with docker_engine(require) as client:   # a docker.DockerClient; skips (fails under strict) without an engine
        DockerSandbox(SANDBOX_IMAGE, client=client).run(...)

If a daemon already answers (``$DOCKER_HOST`` or the default socket) it is used and never stopped. Otherwise a
private one is started — ``dockerd --bridge=none --iptables=false`` with its own ``--exec-root``, pid file and
``-H unix://`` socket in a fresh temp dir, so it clashes with nothing (another test session's daemon included) —
and, at the end, stopped by its pid (SIGTERM, then SIGKILL) and that dir removed. It also gets SIGTERM should this
process die (``PR_SET_PDEATHSIG``). Its ``--data-root`` is ``~/.cache/causaltrace/docker/engine-data`` (images kept
between sessions; a lock file keeps it to one daemon at a time — a concurrent session gets a temp data root). The
image is imported from the cached tarball when the daemon lacks it. Measured here: the private daemon answers in
~1 s; the import takes ~5 s (once per data root); removing a temp data root ~15 s.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SANDBOX_IMAGE = "causaltrace/sandbox-python:bookworm"
CACHE = Path.home() / ".cache/causaltrace/docker"
TARBALL = CACHE / "sandbox-python-bookworm.tar"
_INSTALL = "run scripts/install_docker.sh"
_START_S = 60.0


def _connect(docker: Any, base_url: str | None = None) -> Any:
    """A client for the daemon at ``base_url`` (default: the environment's) if it answers, else None."""
    client = None
    try:  # (the SDK asks the daemon for its API version as it makes the client)
        client = docker.from_env(timeout=120) if base_url is None else docker.DockerClient(base_url, timeout=120)
        if client.ping():
            return client
    except Exception:
        pass
    if client is not None:
        client.close()
    return None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def _data_root(scratch: Path) -> Iterator[Path]:
    """The daemon's --data-root: the cached one (images kept between sessions) when no other session holds it,
    else one in ``scratch`` (removed afterwards — slowly: ~15 s for the image's files on this disk)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "engine.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield scratch / "data"
            return
        yield CACHE / "engine-data"


@contextlib.contextmanager
def _private_daemon(docker: Any, require: Callable[[bool, str], None]) -> Iterator[Any]:
    """Start our own dockerd; yield a client for it; stop it by pid and remove its run-time dir."""
    dockerd = shutil.which("dockerd")
    require(dockerd is not None, f"no Docker engine answers and dockerd is not installed ({_INSTALL})")
    require(os.geteuid() == 0, "no Docker engine answers and starting dockerd needs root")
    root = Path(tempfile.mkdtemp(prefix="ct-dockerd-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    socket_url = f"unix://{root}/docker.sock"
    with _data_root(root) as data_root, (root / "dockerd.log").open("wb") as log:
        command = [
            str(dockerd), "--bridge=none", "--iptables=false", "--ip6tables=false", "--data-root", str(data_root),
            "--exec-root", str(root / "exec"), "--pidfile", str(root / "docker.pid"), "-H", socket_url,
        ]  # fmt: skip
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
        client = None
        try:
            deadline = time.monotonic() + _START_S
            while (client := _connect(docker, socket_url)) is None:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (root / "dockerd.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"dockerd did not start (exit {proc.poll()}):\n{tail}")
                time.sleep(0.1)
            # containers a killed session left in the cached data root
            client.containers.prune(filters={"label": "causaltrace.sandbox"})
            yield client
        finally:
            if client is not None:
                client.close()
            _stop(proc)
            _unmount_under(root)
            shutil.rmtree(root, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the daemon we started (it stops its containerd and containers), SIGKILL if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _unmount_under(root: Path) -> None:
    """Lazily unmount anything a killed daemon left mounted under ``root`` (so the dir can be removed)."""
    with contextlib.suppress(OSError):
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for target in sorted((m for m in mounts if m.startswith(f"{root}/")), key=len, reverse=True):
            subprocess.run(["umount", "-l", target], check=False, capture_output=True)


def ensure_image(client: Any, require: Callable[[bool, str], None], image: str = SANDBOX_IMAGE) -> None:
    """Import ``image`` from the cached tarball unless the engine has it."""
    try:
        client.images.get(image)
        return
    except Exception as exc:
        if type(exc).__name__ != "ImageNotFound":
            raise
    require(TARBALL.is_file(), f"the engine lacks {image} and {TARBALL} is missing ({_INSTALL})")
    repository, tag = image.rsplit(":", 1)
    client.api.import_image_from_file(str(TARBALL), repository=repository, tag=tag)
    client.images.get(image)


@contextlib.contextmanager
def docker_engine(require: Callable[[bool, str], None]) -> Iterator[Any]:
    """A docker client for a live engine holding SANDBOX_IMAGE (the running daemon, else a private one)."""
    try:
        import docker
    except ImportError:
        docker = None
    require(docker is not None, "the docker SDK is not installed (causaltrace[docker])")
    existing = _connect(docker)
    if existing is not None:
        try:
            ensure_image(existing, require)
            yield existing
        finally:
            existing.close()
        return
    with _private_daemon(docker, require) as client:
        ensure_image(client, require)
        yield client
