"""`causaltrace` under a real terminal (issue 33 item 1) and on output it cannot write (issue 33, "Bad input").

Every command here runs as a separate process, as a person runs it: under a pseudo-terminal (pexpect) at 80 and
120 columns, with and without ``NO_COLOR``; stopped by Ctrl-C in the middle of a repair — also one whose replay
hangs in a tool that never returns; and with ``TERM=dumb``, no terminal, a stdout closed before the first write
and a real ``| head -1``, 40 columns, an ASCII-only and a Latin-1 stdout, and ``> /dev/full``. The demo froze in a
terminal (the live status and the replay output router wrote into each other) while every piped run passed: only a
pseudo-terminal shows it.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

from causaltrace.demo import autogen_team, smolagents_team
from conftest import require

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-B]")
COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-79]|38;[25]|9[0-7])(?:;\d+)*m")
EXIT_SIGINT = 130

pytestmark = pytest.mark.slow


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a command run here: this checkout's sources, ``home`` as CAUSALTRACE_HOME, a colour
    terminal type, and no inherited size or colour settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TERM")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    env.update(CAUSALTRACE_HOME=str(home), TERM="xterm-256color")
    env.update(extra)
    return env


def plain(text: str) -> str:
    """What was written, without terminal control sequences and carriage returns."""
    return ANSI.sub("", text).replace("\r", "")


@dataclass
class Done:
    code: int | None
    out: str  # a terminal: everything it showed (stdout and stderr), raw
    err: str = ""
    seconds: float = 0.0

    @property
    def text(self) -> str:
        return plain(self.out + self.err)


def spawn(argv: list[str], env: dict[str, str], *, cols: int = 80, rows: int = 40) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "causaltrace.cli", *argv], env=env, cwd=str(ROOT),
                         dimensions=(rows, cols), encoding="utf-8", codec_errors="replace", timeout=240)


def in_pty(argv: list[str], env: dict[str, str], *, cols: int = 80) -> Done:
    started = time.monotonic()
    child = spawn(argv, env, cols=cols)
    child.expect(pexpect.EOF)
    child.close()
    return Done(child.exitstatus if child.signalstatus is None else -child.signalstatus, child.before,
                seconds=time.monotonic() - started)


def piped(argv: list[str], env: dict[str, str], *, stdout: int | object = subprocess.PIPE) -> Done:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "causaltrace.cli", *argv], env=env, cwd=str(ROOT),
                          stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, timeout=240)
    out = proc.stdout.decode(errors="replace") if isinstance(proc.stdout, bytes) else ""
    return Done(proc.returncode, out, proc.stderr.decode(errors="replace"), time.monotonic() - started)


def descendants(pid: int) -> list[int]:
    from causaltrace.cli.interrupt import descendants as found

    return found(pid)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_consistent(db: Path) -> None:
    """The store opens, passes SQLite's integrity check and lists its runs."""
    from causaltrace.collector.store import Store

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Store(str(db)) as store:
        assert store.list_runs()


def no_traceback(done: Done) -> None:
    for bad in ("Traceback", "Exception ignored", "Error in sys.excepthook"):
        assert bad not in done.out + done.err, (done.out + done.err)[-3000:]


# ------------------------------------------------------------------------------------------- the demo in a terminal


@pytest.mark.parametrize(("cols", "no_color"), [(80, False), (80, True), (120, False), (120, True)])
def test_the_demo_finishes_in_a_terminal(tmp_path, cols, no_color):
    env = cli_env(tmp_path / "home", **({"NO_COLOR": "1"} if no_color else {}))
    done = in_pty(["demo", "--out", str(tmp_path / "out")], env, cols=cols)
    assert done.code == 0, done.text[-3000:]
    no_traceback(done)
    text = done.text
    assert "autogen fix (verified by replay)" in " ".join(text.split())
    assert "smolagents fix (verified by replay)" in " ".join(text.split())
    assert "stuck" not in text and "thinking" not in text  # no replay's output reached the terminal
    table = [line for line in text.splitlines() if line[:1] in "┃│┏┡└┗╇━┌├" and line.strip()]
    assert table and max(len(line) for line in table) <= cols
    assert "\x1b[1m" in done.out  # styled for a terminal (bold)
    if no_color:
        assert not COLOUR.search(done.out)


def test_the_demo_takes_as_long_in_a_terminal_as_piped(tmp_path):
    terminal = in_pty(["demo"], cli_env(tmp_path / "a"))
    pipe = piped(["demo"], cli_env(tmp_path / "b"))
    assert terminal.code == pipe.code == 0, terminal.text[-2000:] + pipe.text[-2000:]
    print(f"demo: {terminal.seconds:.1f} s in a pseudo-terminal, {pipe.seconds:.1f} s piped")
    assert terminal.seconds <= 1.5 * pipe.seconds + 2.0  # the target is ±20 %; the margin is for a loaded machine


def _interrupt(child: pexpect.spawn, settle_s: float) -> tuple[float, list[int]]:
    """Let the command go on for ``settle_s``, press Ctrl-C; returns the seconds until the command ended and the
    processes it had started."""
    time.sleep(settle_s)
    children = descendants(child.pid)
    sent = time.monotonic()
    child.sendintr()
    child.expect(pexpect.EOF, timeout=15)
    stopped = time.monotonic() - sent
    child.close()
    return stopped, children


def test_ctrl_c_mid_repair_stops_the_demo_within_2_s(tmp_path):
    home = tmp_path / "home"
    child = spawn(["demo", "--out", str(tmp_path / "out")], cli_env(home))
    child.expect("repairing by replay", timeout=120)
    stopped, children = _interrupt(child, 0.3)
    print(f"demo stopped {stopped:.2f} s after Ctrl-C; {len(children)} child processes")
    assert child.exitstatus == EXIT_SIGINT, plain(child.before)[-2000:]
    assert stopped < 2.0
    assert "causaltrace: interrupted" in plain(child.before)
    assert not [pid for pid in children if alive(pid)]
    assert_consistent(home / "causaltrace.db")


def _recorded_failure(home: Path, framework: str) -> str:
    """A failed, recorded, diagnosed run of the demo team of ``framework`` in ``home``'s store; its id."""
    module = smolagents_team if framework == "smolagents" else autogen_team
    done = piped(["run", f"{module.__name__}:build", "--task", module.TASK, "--verify", f"{module.__name__}:verify",
                  "--json"], cli_env(home))
    assert done.code == 3, done.text[-2000:]
    return str(json.loads(done.out)["run_id"])


def test_ctrl_c_stops_a_repair_whose_replay_hangs_and_stores_what_it_tried(tmp_path):
    home = tmp_path / "home"
    run_id = _recorded_failure(home, "smolagents")
    child = spawn(["repair", run_id, "--factory", "tests/_terminal_teams.py:build_stuck", "--verify", "text:91",
                   "--concurrency", "1"], cli_env(home))
    child.expect("repair budget", timeout=120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not descendants(child.pid):  # the sandboxed code of the stuck replay
        time.sleep(0.1)
    stopped, children = _interrupt(child, 1.0)
    print(f"stuck repair stopped {stopped:.2f} s after Ctrl-C; {len(children)} child processes")
    assert child.exitstatus == EXIT_SIGINT
    assert stopped < 2.0
    assert "stuck tool" not in plain(child.before)  # the replay's output stays with the replay
    assert not [pid for pid in children if alive(pid)]
    assert_consistent(home / "causaltrace.db")
    from causaltrace.collector.store import Store

    with Store(str(home / "causaltrace.db")) as store:
        last = store.diagnoses(run_id)[-1]
    assert "interrupted" in last.artifacts and "interrupted" in last.explanation


def test_ctrl_c_removes_the_docker_sandbox_container_of_a_stuck_verifier(tmp_path):
    from _docker import SANDBOX_IMAGE, docker_engine

    home = tmp_path / "home"
    run_id = _recorded_failure(home, "smolagents")
    with docker_engine(require) as client:
        label = {"label": "causaltrace.sandbox=1"}
        before = {c.id for c in client.containers.list(all=True, filters=label)}
        socket = getattr(getattr(client.api, "_custom_adapter", None), "socket_path", None)  # a private daemon's
        env = cli_env(home, DOCKER_HOST=f"unix://{socket}" if socket else os.environ.get("DOCKER_HOST", ""),
                      CAUSALTRACE_DOCKER_IMAGE=SANDBOX_IMAGE)
        child = spawn(["repair", run_id, "--factory", f"{smolagents_team.__name__}:build", "--verify",
                       "tests/_terminal_teams.py:verify_in_docker", "--concurrency", "1"], env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not [
                c for c in client.containers.list(filters=label) if c.id not in before]:
            time.sleep(0.2)
        ours = [c.id for c in client.containers.list(filters=label) if c.id not in before]
        assert ours, plain(child.before or "")[-2000:]
        stopped, _ = _interrupt(child, 0.5)
        print(f"repair with a Docker verifier stopped {stopped:.2f} s after Ctrl-C")
        assert child.exitstatus == EXIT_SIGINT and stopped < 2.0
        assert not [c for c in client.containers.list(all=True, filters=label) if c.id in ours]
        assert "docker verifier" not in plain(child.before)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.local_model
@pytest.mark.parametrize("keep", [False, True])
def test_ctrl_c_stops_the_local_model_server_the_command_started_unless_kept(tmp_path, monkeypatch, keep):
    """Ctrl-C once the server answers (recorded for ``local status`` / ``local stop``): it is killed by pid, or kept
    with ``--keep-server``."""
    from causaltrace.attribution.local_model import local_model_available, server_info

    require(local_model_available(), "the local model is not installed (bash scripts/install_local_model.sh)")
    home = tmp_path / "home"
    env = cli_env(home)
    run_id = _recorded_failure(home, "autogen")
    monkeypatch.setenv("CAUSALTRACE_HOME", str(home))  # server_info() reads the command's home
    child = spawn(["diagnose", run_id, "--model", "local", *(["--keep-server"] if keep else [])], env)
    deadline = time.monotonic() + 120
    server: list[int] = []
    while time.monotonic() < deadline and not server:
        recorded = server_info()
        server = [recorded.pid] if recorded is not None and recorded.pid in descendants(child.pid) else []
        time.sleep(0.1)
    assert server, plain(child.before or "")[-2000:]
    try:
        stopped, _ = _interrupt(child, 0.2)
        print(f"diagnose --model local{' --keep-server' if keep else ''} stopped {stopped:.2f} s after Ctrl-C")
        assert child.exitstatus == EXIT_SIGINT and stopped < 2.0
        assert alive(server[0]) is keep
    finally:
        if alive(server[0]):  # the kept server: stopped by its pid
            assert piped(["local", "stop"], env).code == 0
    assert not alive(server[0])


# ------------------------------------------------------------------------------- the other commands in a terminal


def test_run_repair_and_diagnose_all_in_a_terminal(tmp_path):
    home = tmp_path / "home"
    env = cli_env(home)
    team = autogen_team.__name__
    run = in_pty(["run", f"{team}:build", "--task", autogen_team.TASK, "--verify", f"{team}:verify"], env)
    assert run.code == 3 and "diagnosis of run" in run.text, run.text[-2000:]
    no_traceback(run)
    run_id = re.search(r"run ([0-9a-f]{32})", run.text).group(1)
    repaired = in_pty(["repair", run_id, "--factory", f"{team}:build", "--verify", f"{team}:verify"], env)
    assert repaired.code == 0 and "decisive step #" in repaired.text, repaired.text[-2000:]
    # a verifier no answer passes: nothing can flip (with the team's own, the correction flips at the first replay)
    none = in_pty(["repair", run_id, "--factory", f"{team}:build", "--verify", "text:no such answer",
                   "--max-replays", "3", "--no-prune", "--no-environment"], env)
    assert none.code == 1 and "no repair found" in none.text, none.text[-2000:]
    batch = in_pty(["diagnose", "--all"], env)
    assert batch.code == 0, batch.text[-2000:]
    for done in (repaired, none, batch):
        no_traceback(done)


def test_pull_in_a_terminal(tmp_path):
    from _jaeger import running_jaeger
    from _otlp_send import post_otlp, request_of
    from causaltrace.collector.otlp import load_otlp_json, run_to_otlp

    run = load_otlp_json(ROOT / "examples" / "sample_run.otlp.jsonl")[0]
    with running_jaeger(tmp_path) as jaeger:
        post_otlp(jaeger.otlp_http_traces_url, request_of(run_to_otlp(run)), {"service.name": "terminal-test"})
        trace_id = run.trace_id
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = in_pty(["pull", trace_id, "--jaeger", jaeger.query_url], cli_env(tmp_path / "home"))
            if done.code == 0:
                break
            time.sleep(0.5)  # Jaeger indexes what it receives in the background
    assert done.code == 0 and run.run_id in done.text, done.text[-2000:]
    no_traceback(done)


# ------------------------------------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, str]:
    """A store holding a failed, diagnosed AutoGen demo run: (CAUSALTRACE_HOME, run id)."""
    home = tmp_path_factory.mktemp("bad-output") / "home"
    return home, _recorded_failure(home, "autogen")


def _conditions(home: Path, argv: list[str]) -> dict[str, Done]:
    """``argv`` run under each bad condition of the issue."""
    env = cli_env(home)
    ascii_only = cli_env(home, LC_ALL="C", PYTHONCOERCECLOCALE="0", PYTHONUTF8="0")
    ascii_only.pop("LANG", None)
    runs: dict[str, Done] = {
        "TERM=dumb": in_pty(argv, cli_env(home, TERM="dumb")),
        "40 columns": in_pty(argv, env, cols=40),
        "ASCII terminal": in_pty(argv, ascii_only),
        "ASCII pipe": piped(argv, ascii_only),
        "PYTHONIOENCODING=latin-1": piped(argv, cli_env(home, PYTHONIOENCODING="latin-1")),
    }
    with open("/dev/full", "w") as full:
        runs["> /dev/full"] = piped(argv, env, stdout=full)
    proc = subprocess.Popen([sys.executable, "-m", "causaltrace.cli", *argv], env=env, cwd=str(ROOT),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # closed before the command writes anything
    err = proc.stderr.read().decode(errors="replace")
    runs["stdout closed"] = Done(proc.wait(timeout=240), "", err)
    shell = subprocess.run(["bash", "-c", '"$@" | head -1; echo "exit=${PIPESTATUS[0]}" >&2', "-",
                            sys.executable, "-m", "causaltrace.cli", *argv],
                           env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL, capture_output=True, timeout=240)
    stderr = shell.stderr.decode(errors="replace")
    code = int(re.findall(r"exit=(\d+)", stderr)[-1])
    runs["| head -1"] = Done(code, shell.stdout.decode(errors="replace"), stderr)
    return runs


EXIT_CODES = {"runs": 0, "show": 0, "diagnose": 0, "export": 0, "unknown run": 2, "demo": 0, "run": 3, "repair": 0}


@pytest.mark.parametrize("command", list(EXIT_CODES))
def test_every_command_finishes_with_its_exit_code_on_bad_output(stored, tmp_path, command):
    home, run_id = stored
    team = autogen_team.__name__
    argv = {"runs": ["runs"], "show": ["show", run_id], "diagnose": ["diagnose", run_id],
            "export": ["export", run_id], "unknown run": ["show", "ffffffff"],
            "demo": ["demo", "--framework", "autogen", "--out", str(tmp_path / "out")],
            "run": ["run", f"{team}:build", "--task", autogen_team.TASK, "--verify", f"{team}:verify"],
            "repair": ["repair", run_id, "--factory", f"{team}:build", "--verify", f"{team}:verify"]}[command]
    normal = piped(argv, cli_env(home))
    no_traceback(normal)
    assert normal.code == EXIT_CODES[command], normal.text[-2000:]
    for condition, done in _conditions(home, argv).items():
        no_traceback(done)
        expected = normal.code
        if condition == "> /dev/full" and normal.out and normal.code == 0:
            expected = 2  # the output was lost: a user error, said in one line
            assert "cannot write the output: No space left on device" in done.err
        assert done.code == expected, (condition, done.code, done.text[-2000:])
