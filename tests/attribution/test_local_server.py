"""The local model server's lifetime (issue 21, "--model local leaves a 3 GB server behind").

A command that starts the llama.cpp server stops it when it ends; ``--keep-server`` leaves it running with one line
naming its pid, and ``causaltrace local status`` / ``local stop`` see and stop it by that pid. The CLI runs as a real
process against the real local model (scripts/install_local_model.sh); every server a test starts is found by its
``CAUSALTRACE_HOME`` (the test's own temporary home) and stopped by pid at the end. The lease rule (the last user
stops the server) is checked with real processes standing in for the server and for a second command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import require

SRC = Path(__file__).resolve().parents[2] / "src"
CHAT = [{"role": "user", "content": "What is 17+25?"}, {"role": "assistant", "content": "17+25 = 43."}]


def _servers_of(home: Path) -> list[int]:
    """The pids of llama.cpp servers started for ``home`` (read from /proc: cmdline and environment)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        server = b"llama_cpp.server" in cmdline or b"causaltrace.attribution.local_server" in cmdline
        if server and f"CAUSALTRACE_HOME={home}".encode() in environ:
            pids.append(int(proc.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill(pid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        for _ in range(50):
            if not _alive(pid):
                return
            time.sleep(0.1)


@pytest.fixture
def home(tmp_path):
    """A fresh ``CAUSALTRACE_HOME`` holding one tiny imported run; stops (by pid) any server left for it."""
    path = tmp_path / "home"
    yield path
    for pid in _servers_of(path):
        _kill(pid)


def _cli(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CAUSALTRACE_HOME": str(home), "PYTHONPATH": f"{SRC}{os.pathsep}"
           f"{os.environ.get('PYTHONPATH', '')}", "CAUSALTRACE_ALLOW_MODEL_REQUESTS": "0"}
    return subprocess.run([sys.executable, "-m", "causaltrace.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _tiny_run(home: Path, tmp_path: Path) -> str:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT))
    done = _cli(home, "import", "--format", "chat", str(chat))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _require_local_model() -> None:
    from causaltrace.attribution.local_model import local_model_available

    require(local_model_available(), "the local model is not installed (bash scripts/install_local_model.sh)")


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_command_that_starts_the_server_leaves_none_behind(home, tmp_path):
    _require_local_model()
    run_id = _tiny_run(home, tmp_path)
    done = _cli(home, "diagnose", run_id, "--method", "all-at-once", "--model", "local")
    assert done.returncode == 0, done.stderr
    assert "model local" in done.stdout
    assert (home / "local_model" / "server.log").stat().st_size > 0  # a server did start for this home
    assert _servers_of(home) == []
    assert not (home / "local_model" / "server.json").exists()
    assert "still running" not in done.stderr
    status = _cli(home, "local", "status")
    assert status.returncode == 0 and "no local model server is running" in status.stdout


@pytest.mark.local_model
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_keep_server_leaves_one_that_local_status_and_stop_see_and_stop(home, tmp_path):
    _require_local_model()
    run_id = _tiny_run(home, tmp_path)
    done = _cli(home, "diagnose", run_id, "--method", "all-at-once", "--model", "local", "--keep-server")
    assert done.returncode == 0, done.stderr
    (pid,) = _servers_of(home)
    line = [ln for ln in done.stderr.splitlines() if "still running" in ln]
    assert line == [f"causaltrace: the local model server is still running (pid {pid}, kept by --keep-server); "
                    "stop it with: causaltrace local stop"]

    status = _cli(home, "local", "status", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["pid"] == pid and info["kept"] is True and info["in_use"] is False
    assert info["api_base"].startswith("http://127.0.0.1:") and info["rss_mb"] > 50
    text = _cli(home, "local", "status").stdout
    assert f"pid {pid}" in text and "causaltrace local stop" in text

    stop = _cli(home, "local", "stop")
    assert stop.returncode == 0 and stop.stdout.strip() == f"stopped the local model server (pid {pid})"
    assert not _alive(pid) and _servers_of(home) == []
    again = _cli(home, "local", "stop")
    assert again.returncode == 0 and "no local model server is running" in again.stdout


# ---------------------------------------------------------------- the lease rule, with stand-in processes


def _stand_in_server(home: Path, monkeypatch) -> int:
    """A real process recorded as this home's server (a sleeping Python: no model is needed for the lease rule)."""
    from causaltrace.attribution import local_model

    monkeypatch.setenv("CAUSALTRACE_HOME", str(home))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    for _ in range(50):
        if local_model._proc_start(proc.pid):
            break
        time.sleep(0.05)
    state = home / "local_model"
    state.mkdir(parents=True, exist_ok=True)
    (state / "server.json").write_text(json.dumps({"pid": proc.pid, "port": 1, "gguf": "g", "n_ctx": 8192,
                                                   "proc_start": local_model._proc_start(proc.pid)}))
    return proc.pid


def _hold_lease(home: Path) -> subprocess.Popen[str]:
    """Another command using the server: a process holding a shared lease until its stdin closes."""
    code = ("import fcntl, sys; fh = open(sys.argv[1], 'a'); fcntl.flock(fh, fcntl.LOCK_SH); print('held', "
            "flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(home / "local_model" / "server.lease")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_the_last_command_using_the_server_stops_it(tmp_path, monkeypatch):
    from causaltrace.attribution import local_model

    home = tmp_path / "home"
    pid = _stand_in_server(home, monkeypatch)
    try:
        assert local_model.release_server() == (None, "")  # this process never used it: nothing changes
        assert local_model.server_info() is not None
        with local_model._lock():
            local_model._take_lease()
        other = _hold_lease(home)
        server, why = local_model.release_server()
        assert why == "in use" and server is not None and server.pid == pid and _alive(pid)
        assert local_model.server_status()["in_use"] is True
        other.stdin.close()  # type: ignore[union-attr]
        other.wait(10)
        with local_model._lock():
            local_model._take_lease()
        assert local_model.release_server() == (None, "")
        assert not _alive(pid) and local_model.server_info() is None
    finally:
        _kill(pid)


def test_a_kept_server_stays_for_later_commands_until_local_stop(tmp_path, monkeypatch, capsys):
    from causaltrace.attribution import local_model
    from causaltrace.cli import main

    home = tmp_path / "home"
    pid = _stand_in_server(home, monkeypatch)
    try:
        with local_model._lock():
            local_model._take_lease()
        server, why = local_model.release_server(keep=True)
        assert why == "kept" and server is not None and server.kept
        with local_model._lock():  # a later command reuses it and ends without --keep-server
            local_model._take_lease()
        assert local_model.release_server()[1] == "kept" and _alive(pid)
        assert main(["local", "status"]) == 0
        assert f"pid {pid}" in capsys.readouterr().out
        assert main(["local", "stop"]) == 0
        assert capsys.readouterr().out.strip() == f"stopped the local model server (pid {pid})"
        assert not _alive(pid) and local_model.server_status() is None
    finally:
        _kill(pid)


# ---------------------------------------------------------------- a killed command: the server's watchdog


def _lease_holder(lease: Path) -> subprocess.Popen:
    """A real process holding a shared lease on ``lease`` (as a command using the server does) until it is killed."""
    code = ("import fcntl, sys, time; fh = open(sys.argv[1], 'a'); fcntl.flock(fh, fcntl.LOCK_SH); "
            "print('held', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(lease)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_watchdog_waits_while_a_lease_is_held_and_stops_once_its_holder_is_killed(tmp_path):
    from causaltrace.attribution.local_server import lease_held, watch

    lease = tmp_path / "server.lease"
    holder = _lease_holder(lease)
    try:
        assert lease_held(lease)
        stop = threading.Event()
        threading.Timer(1.5, stop.set).start()
        assert watch(tmp_path, idle_s=0.5, startup_grace_s=0, stop=stop, poll_s=0.1) is False  # held: never idle
    finally:
        holder.kill()
        holder.wait()
    assert not lease_held(lease)  # the kernel dropped the killed holder's lease
    started = time.monotonic()
    assert watch(tmp_path, idle_s=0.5, startup_grace_s=0, poll_s=0.1) is True
    assert time.monotonic() - started < 5


def test_the_watchdog_never_stops_a_kept_server_nor_one_still_starting(tmp_path):
    from causaltrace.attribution.local_server import watch

    (tmp_path / "server.json").write_text(json.dumps({"pid": 1, "kept": True}))
    stop = threading.Event()
    threading.Timer(1.5, stop.set).start()
    assert watch(tmp_path, idle_s=0.3, startup_grace_s=0, stop=stop, poll_s=0.1) is False
    (tmp_path / "server.json").unlink()
    stop = threading.Event()
    threading.Timer(1.5, stop.set).start()
    assert watch(tmp_path, idle_s=0.3, startup_grace_s=60, stop=stop, poll_s=0.1) is False  # no lease seen yet


@pytest.mark.local_model
@pytest.mark.slow
def test_a_server_whose_command_was_killed_stops_itself(tmp_path):
    """The real server: the command that started it is SIGKILLed (it never releases); the server notices that no
    lease is held and stops within its idle time (2 s here), removing its server.json."""
    from causaltrace.attribution.local_model import local_model_available

    require(local_model_available(), "the local model is not installed (bash scripts/install_local_model.sh)")
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "CAUSALTRACE_HOME": str(home), "CAUSALTRACE_LOCAL_IDLE_S": "2",
           "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    code = ("import time; from causaltrace.attribution.local_model import ensure_server; "
            "print(ensure_server().pid, flush=True); time.sleep(600)")
    command = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(command.stdout.readline())
        assert _alive(pid) and _servers_of(home) == [pid]
        command.kill()
        command.wait()
        deadline = time.monotonic() + 60
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _alive(pid), "the server outlived the killed command"
        assert not (home / "local_model" / "server.json").exists()
        assert "stopping the server" in (home / "local_model" / "server.log").read_text()
    finally:
        command.kill()
        for server in _servers_of(home):
            _kill(server)
