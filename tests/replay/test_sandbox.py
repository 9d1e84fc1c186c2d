"""Functional tests of the subprocess sandbox, its workers and the Python worker session (issue 7 "Sandbox").

Everything here runs for real: bubblewrap (or the unshare fallback), rlimits, cgroups. Each test checks that it
left no sandboxed process and no cgroup behind.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from _sandbox_host import our_cgroups, sandbox_processes
from causaltrace.exceptions import InvalidInputError, SandboxError, SandboxTimeout, UserError
from causaltrace.protocols import Sandbox, Worker
from causaltrace.replay.sandbox import PythonWorkerSession, SubprocessSandbox, SubprocessWorker
from causaltrace.replay.sandbox import subprocess_sandbox as subprocess_sandbox_module
from causaltrace.replay.sandbox._cgroup import cgroups_available
from causaltrace.schema import CodeResult

pytestmark = pytest.mark.timeout(120)

MODES = ["bwrap", "unshare"]


@pytest.fixture(autouse=True)
def no_leftovers():
    """After every test: no sandboxed process and no per-run cgroup of this process is left."""
    yield
    deadline = time.monotonic() + 5
    while (sandbox_processes() or our_cgroups()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes() == {}
    assert our_cgroups() == []


@pytest.fixture(scope="module")
def sandbox() -> SubprocessSandbox:
    return SubprocessSandbox()


@pytest.fixture(scope="module", params=MODES)
def any_sandbox(request: pytest.FixtureRequest) -> SubprocessSandbox:
    """The sandbox in both modes: bubblewrap and the unshare fallback."""
    return SubprocessSandbox(use_bwrap=request.param == "bwrap")


def test_machine_has_the_isolation_primitives() -> None:
    # The sandbox's guarantees rest on these (FACTS.md): fail loudly rather than silently degrade in CI.
    assert SubprocessSandbox().mode == "bwrap"
    assert cgroups_available() == {"pids": True, "memory": True, "cpu": True}


def test_implements_the_protocols(sandbox: SubprocessSandbox) -> None:
    assert isinstance(sandbox, Sandbox)
    worker = sandbox.open_worker(sandbox.python_worker_argv(), timeout_s=30, memory_mb=256)
    try:
        assert isinstance(worker, Worker)
        assert isinstance(worker, SubprocessWorker)
    finally:
        worker.close()


# ------------------------------------------------------------------------------------------ run()


def test_stdout_stderr_and_exit_code(any_sandbox: SubprocessSandbox) -> None:
    result = any_sandbox.run(
        "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)", timeout_s=20, memory_mb=256
    )
    assert isinstance(result, CodeResult)
    assert (result.exit_code, result.stdout, result.stderr, result.timed_out) == (3, "out\n", "err\n", False)
    assert 0 < result.duration_s < 20


def test_exception_gives_exit_1_and_a_traceback_with_the_source_line(sandbox: SubprocessSandbox) -> None:
    result = sandbox.run("x = 1\nraise ValueError(f'bad {x}')", timeout_s=20, memory_mb=256)
    assert result.exit_code == 1
    assert "raise ValueError(f'bad {x}')" in result.stderr
    assert result.stderr.rstrip().endswith("ValueError: bad 1")


def test_files_are_written_into_the_work_dir_first(any_sandbox: SubprocessSandbox) -> None:
    files = {"data/input.txt": b"41", "helper.py": "def inc(x):\n    return x + 1\n"}
    code = (
        "import os, helper\n"
        "print(os.getcwd(), helper.inc(int(open('data/input.txt').read())))\n"
        "open('out.txt', 'w').write('written')\n"
        "print(open('/work/out.txt').read())\n"
    )
    result = any_sandbox.run(code.replace("/work", any_sandbox.work_dir), files=files, timeout_s=20, memory_mb=256)
    assert result.stdout == f"{any_sandbox.work_dir} 42\nwritten\n", result.stderr


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape.txt", "a/../../b", "", "."])
def test_file_names_must_stay_inside_the_work_dir(sandbox: SubprocessSandbox, name: str) -> None:
    with pytest.raises(InvalidInputError):
        sandbox.run("pass", files={name: b"x"}, timeout_s=5, memory_mb=256)


def test_each_run_gets_a_fresh_work_dir(sandbox: SubprocessSandbox) -> None:
    sandbox.run("open('left.txt', 'w').write('x')", timeout_s=20, memory_mb=256)
    result = sandbox.run("import os; print(sorted(os.listdir('.')))", timeout_s=20, memory_mb=256)
    assert result.stdout == "[]\n"


def test_output_is_capped() -> None:
    small = SubprocessSandbox(max_output_bytes=1000)
    result = small.run("print('x' * 5000)", timeout_s=20, memory_mb=256)
    assert result.stdout.startswith("x" * 1000)
    assert "4001 more bytes of output dropped" in result.stdout


def test_timeout_kills_and_reports(any_sandbox: SubprocessSandbox) -> None:
    started = time.monotonic()
    result = any_sandbox.run("import time\nprint('started', flush=True)\ntime.sleep(60)", timeout_s=1, memory_mb=256)
    assert result.timed_out is True
    assert result.exit_code == -9
    assert result.stdout == "started\n"  # output produced before the kill is kept
    assert time.monotonic() - started < 5


def test_background_children_do_not_outlive_the_run(sandbox: SubprocessSandbox) -> None:
    code = "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)\nprint('detached')"
    result = sandbox.run(code, timeout_s=20, memory_mb=256)
    assert result.stdout == "detached\n"
    # no_leftovers checks that no `sleep 60` survived in the run's cgroup / pid namespace


@pytest.mark.parametrize(("timeout_s", "memory_mb"), [(0, 256), (-1, 256), (5, 8)])
def test_invalid_limits_are_rejected(sandbox: SubprocessSandbox, timeout_s: float, memory_mb: int) -> None:
    with pytest.raises(InvalidInputError):
        sandbox.run("pass", timeout_s=timeout_s, memory_mb=memory_mb)


def test_sandbox_error_only_when_the_sandbox_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = SubprocessSandbox()
    monkeypatch.setattr(broken, "_tool", "/nonexistent/bwrap")
    with pytest.raises(SandboxError, match="cannot start the sandbox"):
        broken.run("print(1)", timeout_s=5, memory_mb=256)
    # a bind source that vanished: bubblewrap itself refuses to start
    monkeypatch.setattr(subprocess_sandbox_module, "_PYWORKER_SOURCE", Path("/nonexistent/_pyworker.py"))
    with pytest.raises(SandboxError, match="could not start"):
        SubprocessSandbox().run("print(1)", timeout_s=5, memory_mb=256)


def test_missing_interpreter_and_allow_paths_are_reported() -> None:
    with pytest.raises(SandboxError, match="not an executable"):
        SubprocessSandbox(python="/nonexistent/python3").run("pass", timeout_s=5, memory_mb=256)
    with pytest.raises(UserError, match="does not exist"):
        SubprocessSandbox(allow_paths=["/nonexistent/data"])


def test_allow_paths_are_readable_but_not_writable(tmp_path: Path) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "rows.csv").write_text("a,b\n1,2\n")
    code = (
        f"print(open({str(data / 'rows.csv')!r}).read().splitlines()[1])\n"
        f"try:\n    open({str(data / 'new.txt')!r}, 'w')\nexcept OSError as e:\n    print('read-only', e.errno)\n"
    )
    result = SubprocessSandbox(allow_paths=[data]).run(code, timeout_s=20, memory_mb=256)
    assert result.stdout == "1,2\nread-only 30\n", result.stderr
    assert not (data / "new.txt").exists()


def test_the_sandbox_runs_as_nobody_with_a_clean_environment(any_sandbox: SubprocessSandbox) -> None:
    code = "import os, json; print(json.dumps([os.getuid(), os.getgid(), os.environ['HOME'], sorted(os.environ)]))"
    result = any_sandbox.run(code, timeout_s=20, memory_mb=256)
    uid, gid, home, keys = __import__("json").loads(result.stdout)
    assert (uid, gid, home) == (65534, 65534, any_sandbox.work_dir)
    assert set(keys) <= {
        "PATH", "HOME", "LANG", "LC_ALL", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONPATH", "TMPDIR",
        "USER", "LOGNAME", "MALLOC_ARENA_MAX", "PWD", "LC_CTYPE",
    }  # fmt: skip


def test_cgroup_limits_are_applied_while_running(sandbox: SubprocessSandbox) -> None:
    worker = sandbox.open_worker(sandbox.python_worker_argv(), timeout_s=30, memory_mb=200)
    try:
        assert worker.recv(timeout_s=30)["type"] == "ready"
        groups = {path.parent.name: path for path in our_cgroups()}
        assert set(groups) == {"pids", "memory", "cpu"}
        assert (groups["pids"] / "pids.max").read_text().strip() == "64"
        assert int((groups["memory"] / "memory.limit_in_bytes").read_text()) == 200 << 20
        assert (groups["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "100000"
        assert worker.pid in {int(p) for p in (groups["pids"] / "cgroup.procs").read_text().split()}
    finally:
        worker.close()
    assert our_cgroups() == []  # removed on close


def test_runs_in_parallel_threads_do_not_interfere(sandbox: SubprocessSandbox) -> None:
    results: dict[int, CodeResult] = {}

    def one(i: int) -> None:
        results[i] = sandbox.run(f"import time; time.sleep(0.2); print({i})", timeout_s=20, memory_mb=256)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: r.stdout for i, r in results.items()} == {i: f"{i}\n" for i in range(4)}


# ------------------------------------------------------------------------------------------ raw workers

ECHO_WORKER = """
import json, sys
print(json.dumps({"type": "ready"}), flush=True)
for line in sys.stdin:
    message = json.loads(line)
    if message.get("type") == "sleep":
        import time; time.sleep(message["seconds"])
    if message.get("type") == "exit":
        sys.exit(message["code"])
    print(json.dumps({"type": "echo", "got": message}), flush=True)
"""


def test_worker_framed_json_round_trip(any_sandbox: SubprocessSandbox) -> None:
    with any_sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=30, memory_mb=256) as worker:
        assert worker.recv(timeout_s=30) == {"type": "ready"}
        for payload in ({"type": "x", "n": 1}, {"type": "y", "text": "line\nbreak ünïcode"}):
            worker.send(payload)
            assert worker.recv(timeout_s=10) == {"type": "echo", "got": payload}


def test_worker_recv_timeout_raises_sandbox_timeout(sandbox: SubprocessSandbox) -> None:
    with sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=30, memory_mb=256) as worker:
        worker.recv(timeout_s=30)
        worker.send({"type": "sleep", "seconds": 5})
        started = time.monotonic()
        with pytest.raises(SandboxTimeout):
            worker.recv(timeout_s=0.3)
        assert time.monotonic() - started < 2
        assert isinstance(SandboxTimeout("x"), TimeoutError)


def test_worker_exit_is_a_sandbox_error_with_the_exit_code(sandbox: SubprocessSandbox) -> None:
    with sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=30, memory_mb=256) as worker:
        worker.recv(timeout_s=30)
        worker.send({"type": "exit", "code": 7})
        with pytest.raises(SandboxError, match="exited with code 7"):
            worker.recv(timeout_s=10)
        with pytest.raises(SandboxError):
            worker.send({"type": "x"})


def test_worker_is_killed_after_the_idle_timeout(sandbox: SubprocessSandbox) -> None:
    worker = sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=0.5, memory_mb=256)
    try:
        assert worker.recv(timeout_s=30) == {"type": "ready"}
        time.sleep(2)  # no traffic
        assert not worker.alive
        with pytest.raises(SandboxError, match="idle timeout"):
            worker.recv(timeout_s=1)
    finally:
        worker.close()


def test_waiting_in_recv_is_not_idle(sandbox: SubprocessSandbox) -> None:
    with sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=0.5, memory_mb=256) as worker:
        worker.recv(timeout_s=30)
        worker.send({"type": "sleep", "seconds": 1.5})
        assert worker.recv(timeout_s=10)["type"] == "echo"  # a 1.5 s wait inside recv did not kill it
        assert worker.alive


def test_worker_close_is_idempotent_and_cleans_up(sandbox: SubprocessSandbox) -> None:
    worker = sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=30, memory_mb=256)
    worker.recv(timeout_s=30)
    pid = worker.pid
    worker.close()
    worker.close()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    with pytest.raises(SandboxError, match="closed"):
        worker.recv(timeout_s=1)


def test_worker_garbage_collected_without_close_is_cleaned_up(sandbox: SubprocessSandbox) -> None:
    import gc

    worker = sandbox.open_worker([sys.executable, "-c", ECHO_WORKER], timeout_s=30, memory_mb=256)
    worker.recv(timeout_s=30)
    del worker
    gc.collect()
    # no_leftovers asserts the process and its cgroups are gone


# ------------------------------------------------------------------------------------------ PythonWorkerSession


@pytest.fixture
def tool_log() -> list[tuple[str, tuple, dict]]:
    return []


@pytest.fixture
def session(any_sandbox: SubprocessSandbox, tool_log: list) -> PythonWorkerSession:
    def search(query: str, limit: int = 2) -> list[str]:
        tool_log.append(("search", (query,), {"limit": limit}))
        return [f"{query}-{i}" for i in range(limit)]

    def failing_tool(x: int) -> int:
        raise KeyError(f"no row {x}")

    def custom_failure() -> None:
        class QuotaExceeded(Exception):
            pass

        raise QuotaExceeded("quota")

    def researcher(task: str) -> str:  # a managed agent, as smolagents exposes it
        return f"report on {task}"

    with PythonWorkerSession(
        any_sandbox,
        {"search": search, "failing_tool": failing_tool, "custom_failure": custom_failure, "researcher": researcher},
        timeout_s=10,
        memory_mb=256,
    ) as worker_session:
        yield worker_session


def test_session_keeps_globals_between_executions(session: PythonWorkerSession) -> None:
    first = session.execute("import math\ncounter = 1\ndef bump():\n    global counter\n    counter += 1\n")
    assert first["exit_code"] == 0 and first["error"] is None
    session.execute("bump(); bump()")
    result = session.execute("print('counter is', counter)\nmath.sqrt(counter + 6)")
    assert result["stdout"] == "counter is 3\n"
    assert result["output"] == 3.0
    assert result["output_repr"] == "3.0"


def test_session_call_backs_reach_the_parent(session: PythonWorkerSession, tool_log: list) -> None:
    result = session.execute("hits = search('cats', limit=3)\nprint(hits)\nresearcher(task='dogs')")
    assert result["stdout"] == "['cats-0', 'cats-1', 'cats-2']\n"
    assert result["output"] == "report on dogs"
    assert result["calls"] == 2
    assert tool_log == [("search", ("cats",), {"limit": 3})]


def test_session_call_back_errors_raise_inside_the_worker(session: PythonWorkerSession) -> None:
    caught = session.execute("try:\n    failing_tool(7)\nexcept KeyError as e:\n    print('caught', e)")
    assert caught["stdout"] == "caught 'no row 7'\n"
    uncaught = session.execute("x = 1\ncustom_failure()")
    assert uncaught["exit_code"] == 1
    assert uncaught["error_type"] == "CallbackError"
    assert "QuotaExceeded: quota" in uncaught["error"]
    assert 'File "<cell' in uncaught["error"] and "_pyworker" not in uncaught["error"]
    unknown = session.execute("undefined_tool()")
    assert unknown["error_type"] == "NameError"


def test_session_final_answer_stops_the_snippet(session: PythonWorkerSession) -> None:
    result = session.execute("answer = 6 * 7\nfinal_answer(answer)\nprint('not reached')")
    assert result["is_final_answer"] is True
    assert result["final_answer"] == 42
    assert result["stdout"] == ""
    caught = session.execute("try:\n    final_answer('x')\nexcept Exception:\n    print('swallowed')")
    assert caught["is_final_answer"] is True  # `except Exception` cannot swallow it
    assert "final_answer" not in session.execute("1 + 1")


def test_session_final_answer_registered_in_the_parent(any_sandbox: SubprocessSandbox) -> None:
    seen = []

    def final_answer(answer: object) -> str:
        seen.append(answer)
        return f"checked:{answer}"

    with PythonWorkerSession(any_sandbox, {"final_answer": final_answer}, timeout_s=10, memory_mb=256) as session:
        result = session.execute("final_answer({'total': 3})")
    assert seen == [{"total": 3}]
    assert result["final_answer"] == "checked:{'total': 3}"


def test_session_captures_fd_level_output_and_errors(session: PythonWorkerSession) -> None:
    code = "import os, sys, subprocess\nprint('py')\nos.system('echo from-shell')\nsys.stderr.write('warn\\n')\n1/0"
    result = session.execute(code)
    assert result["stdout"] == "py\nfrom-shell\n"
    assert result["stderr"] == "warn\n"
    assert result["exit_code"] == 1 and result["error_type"] == "ZeroDivisionError"
    assert "1/0" in result["error"]  # source line of the cell in the traceback


def test_session_code_cannot_read_or_corrupt_the_channel(session: PythonWorkerSession) -> None:
    result = session.execute("import sys\nprint(repr(sys.stdin.read()))\nsys.__stdout__.write('noise\\n')\n'ok'")
    assert result["output"] == "ok"
    assert result["stdout"] == "''\nnoise\n"
    assert session.execute("2 + 2")["output"] == 4


def test_session_system_exit_is_reported_and_the_worker_survives(session: PythonWorkerSession) -> None:
    session.execute("kept = 'yes'")
    assert session.execute("import sys; sys.exit(4)")["exit_code"] == 4
    assert session.execute("kept")["output"] == "yes"


def test_session_set_variables(session: PythonWorkerSession) -> None:
    session.set_variables({"config": {"rows": [1, 2, 3]}, "name": "run-1"})
    assert session.execute("sum(config['rows']), name")["output"] == [6, "run-1"]


def test_session_timeout_kills_and_the_next_execute_restarts(session: PythonWorkerSession) -> None:
    session.execute("state = 'before'")
    started = time.monotonic()
    result = session.execute("while True:\n    pass", timeout_s=1)
    assert result["timed_out"] is True and result["exit_code"] == -9
    assert time.monotonic() - started < 4
    assert not session.alive
    after = session.execute("'state' in globals()")
    assert after["restarted"] is True
    assert after["output"] is False  # a fresh worker: variables are gone, and the result says so


def test_session_worker_crash_is_a_result(session: PythonWorkerSession) -> None:
    result = session.execute("import os\nos._exit(9)")
    assert result["error_type"] == "SandboxError"
    assert "exited with code 9" in result["error"]
    assert session.execute("1")["restarted"] is True


def test_session_call_back_time_is_not_counted(any_sandbox: SubprocessSandbox) -> None:
    def slow_agent() -> str:
        time.sleep(1.5)
        return "done"

    with PythonWorkerSession(
        any_sandbox, {"slow_agent": slow_agent}, timeout_s=1, memory_mb=256, idle_timeout_s=0.5
    ) as session:
        result = session.execute("slow_agent()")
    assert result["output"] == "done" and result["timed_out"] is False


def test_session_over_memory_limit_reports_memory_error(session: PythonWorkerSession) -> None:
    result = session.execute("blob = bytearray(2 * 1024**3)")
    assert result["error_type"] == "MemoryError"
    assert session.execute("'alive'")["output"] == "alive"


def test_session_start_failure_is_a_sandbox_error(sandbox: SubprocessSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "python_worker_argv", lambda: [sys.executable, "-c", "import sys; sys.exit(5)"])
    with pytest.raises(SandboxError, match="did not start"):
        PythonWorkerSession(sandbox, {}, timeout_s=5, memory_mb=256)


def test_session_works_with_any_sandbox_through_python_c(any_sandbox: SubprocessSandbox) -> None:
    class Plain:  # only the protocol: no python_worker_argv, so the session falls back to `python3 -c SOURCE`
        def run(self, code, *, files=None, timeout_s, memory_mb):
            return any_sandbox.run(code, files=files, timeout_s=timeout_s, memory_mb=memory_mb)

        def open_worker(self, argv, *, timeout_s, memory_mb):
            return any_sandbox.open_worker(argv, timeout_s=timeout_s, memory_mb=memory_mb)

    with PythonWorkerSession(Plain(), {"double": lambda x: 2 * x}, timeout_s=10, memory_mb=256) as session:
        assert session.execute("double(21)")["output"] == 42


def test_session_closed_refuses(sandbox: SubprocessSandbox) -> None:
    session = PythonWorkerSession(sandbox, {}, timeout_s=5, memory_mb=256)
    session.close()
    session.close()
    with pytest.raises(SandboxError, match="closed"):
        session.execute("1")


def test_work_dir_moves_when_a_bind_lives_under_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # e.g. CI's virtualenv inside a repository checked out under /work: /work cannot be both
    data = tmp_path / "venv-like"
    data.mkdir()
    (data / "marker").write_text("bound")
    monkeypatch.setattr(subprocess_sandbox_module, "WORK_DIR", str(tmp_path))
    sandbox = SubprocessSandbox(allow_paths=[data])
    assert sandbox.work_dir == "/sandbox"
    code = f"import os\nprint(os.getcwd(), os.environ['HOME'], open({str(data / 'marker')!r}).read())\nopen('w', 'w')"
    result = sandbox.run(code, timeout_s=20, memory_mb=256)
    assert result.stdout == "/sandbox /sandbox bound\n", result.stderr
    assert SubprocessSandbox().work_dir == str(tmp_path)  # no bind under it: the default place


def test_worker_framing_violation(sandbox: SubprocessSandbox) -> None:
    from causaltrace.exceptions import SandboxViolation

    code = "import json\nprint(json.dumps({'type': 'ready'}), flush=True)\nprint('not json', flush=True)\ninput()"
    with sandbox.open_worker([sys.executable, "-c", code], timeout_s=30, memory_mb=256) as worker:
        assert worker.recv(timeout_s=30) == {"type": "ready"}
        with pytest.raises(SandboxViolation, match="not JSON"):
            worker.recv(timeout_s=10)


@pytest.mark.parametrize("mode", MODES)
def test_without_cgroups_the_run_degrades_with_a_warning(
    mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from causaltrace.replay.sandbox import _cgroup

    monkeypatch.setattr(_cgroup, "_available", {"pids": False, "memory": False, "cpu": False})
    monkeypatch.setattr(_cgroup, "_warned", False)
    sandbox = SubprocessSandbox(use_bwrap=mode == "bwrap")
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_NPROC)[0])"
    with caplog.at_level("WARNING", logger="causaltrace"):
        result = sandbox.run(code, timeout_s=20, memory_mb=256)
    assert "no writable cgroup v1 pids controller" in caplog.text
    # RLIMIT_NPROC bounds the process count only for a non-root host uid — the unshare fallback's 65534 gets its
    # current process count + pids_max; under bubblewrap-as-root the parent's limit is left alone (not enforced)
    import resource

    nproc = int(result.stdout)
    if mode == "unshare":
        assert nproc <= sandbox.pids_max + sum(1 for p in os.listdir("/proc") if p.isdigit())
    else:
        assert nproc == resource.getrlimit(resource.RLIMIT_NPROC)[0]
    assert our_cgroups() == []


def test_session_call_back_result_nested_too_deeply_is_an_error_in_the_code(sandbox: SubprocessSandbox) -> None:
    def deep() -> list:
        value: list = []
        for _ in range(100_000):
            value = [value]
        return value

    with PythonWorkerSession(sandbox, {"deep": deep}, timeout_s=20, memory_mb=256) as session:
        result = session.execute("try:\n    deep()\nexcept TypeError as e:\n    print('caught', e)\nkept = 1")
        assert result["stdout"].startswith("caught the result of 'deep' cannot be sent to the sandbox"), result
        assert session.execute("kept + 1")["output"] == 2


def test_a_repair_search_starts_the_next_python_worker_ahead_and_leaves_none(sandbox: SubprocessSandbox,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32 (repair cost): within ``spare_workers()`` (the repair search) a session's worker is one started in
    the background that only said "ready" — a fresh process, as a start of its own would give — and the next is
    started ahead; when the search ends no spare is left (this module's fixture checks that no sandboxed process or
    cgroup remains). Outside it, nothing is started ahead."""
    from causaltrace.replay.sandbox import session as session_module
    from causaltrace.replay.sandbox.spares import _pending, spare_workers

    taken: list[bool] = []
    real = session_module.take_spare

    def counted(*args: object, **kwargs: object) -> object:
        got = real(*args, **kwargs)  # type: ignore[arg-type]
        taken.append(got is not None)
        return got

    monkeypatch.setattr(session_module, "take_spare", counted)
    with spare_workers():
        with PythonWorkerSession(sandbox, timeout_s=30, memory_mb=256) as first:
            assert first.execute("x = 41\nprint(x + 1)")["stdout"] == "42\n"
        deadline = time.monotonic() + 30
        while _pending()["ready"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        with PythonWorkerSession(sandbox, {"add": lambda a, b: a + b}, timeout_s=30, memory_mb=256) as second:
            out = second.execute("print(add(1, 2))\nprint('x' in globals())")["stdout"]
        assert out == "3\nFalse\n"  # the spare ran nothing before: no variable of the first session
        assert taken == [False, True]
    assert _pending() == {"depth": 0, "ready": 0, "in_flight": 0}
    with PythonWorkerSession(sandbox, timeout_s=30, memory_mb=256) as third:
        assert third.execute("print(1)")["stdout"] == "1\n"
    assert taken == [False, True, False] and _pending() == {"depth": 0, "ready": 0, "in_flight": 0}
