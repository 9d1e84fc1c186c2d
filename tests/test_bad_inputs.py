"""Every bad input a line (issue 36 item 6): hostile files, hostile answers of a trace server and arguments out of
range are each ONE line on stderr and exit 2 — no traceback, no internal error, no hang — and the store keeps what it
held before. The CLI runs as a user runs it (a subprocess); the servers are real HTTP servers on loopback ports that
answer the way a broken or hostile Jaeger / Phoenix would (a 5,000-digit integer, an endless body, a gzip bomb, a
redirect loop, one byte a second, nesting deeper than the stack). A fleet command meets a damaged stored step as a
run skipped in one line, never the end of the batch.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from _http import serving

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SAMPLE = ROOT / "examples" / "sample_run.otlp.jsonl"
WHOWHEN = ROOT / "tests" / "fixtures" / "whowhen"
BIG = "1" * 5000
TRACE = "0af7651916cd43dd8448eb211c80319c"


# ------------------------------------------------------------------------------------------ a hostile server


def _answer(handler: BaseHTTPRequestHandler, body: bytes, *, headers: dict[str, str] | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _endless(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    handler.wfile.write(b'{"data": [' + b"1," * 100)
    chunk = b"1," * 32768
    while True:
        handler.wfile.write(chunk)


def _slow(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    for byte in b'{"data": [], "result": {"resourceSpans": []}}' * 100:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(1.0)


def _loop(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(302)
    handler.send_header("Location", handler.path)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


_BOMB = gzip.compress(b"[" + b" " * (64 << 20) + b"]")
_DEEP = b'{"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"

#: what the server does for a Jaeger trace id / a Phoenix project of each name
BEHAVIOUR: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {
    "bigint": lambda h: _answer(h, b'{"data": [], "result": {"resourceSpans": [{"n": ' + BIG.encode() + b"}]}}"),
    "deep": lambda h: _answer(h, _DEEP),
    "endless": _endless,
    "bomb": lambda h: _answer(h, _BOMB, headers={"Content-Encoding": "gzip"}),
    "loop": _loop,
    "slow": _slow,
}
#: Jaeger asks for traces by hex id: each behaviour has one
JAEGER_IDS = {"bigint": "b16", "deep": "dee9", "endless": "e0d1e55", "bomb": "b0b", "loop": "100b", "slow": "510e"}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        name = next((n for n, tid in JAEGER_IDS.items() if self.path.rstrip("/").endswith(f"/traces/{tid}")), None)
        if name is None:
            match = re.match(r"/v1/projects/([^/]+)/", self.path)
            name = match.group(1) if match else None
        try:
            BEHAVIOUR.get(name or "", lambda h: h.send_error(404))(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what it should do

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    """A hostile trace server on a free loopback port (Jaeger's and Phoenix's paths), stopped at the end."""
    with serving(_Handler) as url:
        yield url


# ------------------------------------------------------------------------------------------ hostile files


def _files(folder: Path) -> None:
    """The hostile input files (built from the bundled sample run, so everything else in them is valid)."""
    line = SAMPLE.read_text().splitlines()[0]
    text = json.dumps(json.loads(line))
    (folder / "bigint.otlp.json").write_text(re.sub(r'"startTimeUnixNano": "\d+"', '"startTimeUnixNano": ' + BIG,
                                                    text, count=1))
    (folder / "surrogate.otlp.json").write_text(text.replace('"stringValue": "', '"stringValue": "\\ud800', 3))
    run_id = re.compile(r'("key": "causaltrace.run.id", "value": \{"stringValue": ")[^"]*"')
    (folder / "empty-id.otlp.json").write_text(run_id.sub(r'\1"', text))
    (folder / "huge-id.otlp.json").write_text(run_id.sub(lambda m: m.group(1) + "x" * 1_000_000 + '"', text))
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    (folder / "bigint.chat.json").write_text(json.dumps(chat)[:-1] + ', {"role": "user", "content": "x", "n": '
                                              + BIG + "}]")
    (folder / "surrogate.chat.json").write_text(json.dumps(chat).replace('"hi"', '"hi \\ud800"'))
    (folder / "deep.chat.json").write_text("[" * 200_000 + "]" * 200_000)
    whowhen = json.loads(next(WHOWHEN.rglob("*.json")).read_text())
    (folder / "bigint.whowhen.json").write_text(json.dumps(whowhen)[:-1] + ', "n": ' + BIG + "}")
    os.mkfifo(folder / "fifo")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-inputs")
    _files(folder)
    return folder


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding the sample run (and its id): each case works on a copy and must leave it as it was."""
    db = tmp_path_factory.mktemp("base") / "store.db"
    proc = _cli(db, "import", str(SAMPLE), "--format", "otlp-json")
    assert proc.returncode == 0, proc.stderr
    return db, proc.stdout.split()[0]


def _cli(db: Path, *argv: str, timeout: float = 60, stdout: str = "pipe") -> subprocess.CompletedProcess[str]:
    """The command on ``db``; ``stdout``: ``pipe`` (captured), ``closed`` (``>&-``) or a file to write to."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CAUSALTRACE_"))}
    env.update(PYTHONPATH=str(SRC), CAUSALTRACE_DB=str(db), CAUSALTRACE_HOME=str(db.parent / "home"),
               CAUSALTRACE_MAX_ANSWER_MB="4")
    command = [sys.executable, "-m", "causaltrace.cli", *argv]
    if stdout == "closed":
        command = ["bash", "-c", 'exec "$@" >&-', "-", *command]
    with contextlib.ExitStack() as files:
        out = subprocess.PIPE if stdout in ("pipe", "closed") else files.enter_context(open(stdout, "w"))
        return subprocess.run(command, env=env, stdout=out, stderr=subprocess.PIPE, text=True, timeout=timeout)


def _stored(db: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT run_id, written_at FROM runs ORDER BY run_id").fetchall()
    finally:
        conn.close()


REPAIR = ["repair", "RUN", "--factory", "causaltrace.demo.autogen_team:build", "--verify", "text:42"]
WHOWHEN_BENCH = ["bench", "whowhen", "--method", "graph", "--data", str(WHOWHEN)]
#: (id, argv with INPUTS / SERVER / RUN placeholders, seconds it may take at most[, what the line names])
CASES = [
    # files: Python's own parsers on hostile input
    ("import-5000-digit-integer-otlp", ["import", "INPUTS/bigint.otlp.json", "--format", "otlp-json"], 20),
    ("import-5000-digit-integer-spans", ["import", "INPUTS/bigint.otlp.json", "--format", "spans"], 20),
    ("import-5000-digit-integer-auto", ["import", "INPUTS/bigint.otlp.json", "--format", "auto"], 20),
    ("import-5000-digit-integer-chat", ["import", "INPUTS/bigint.chat.json", "--format", "chat"], 20),
    ("import-5000-digit-integer-whowhen", ["import", "INPUTS/bigint.whowhen.json", "--format", "whowhen"], 20),
    ("import-lone-surrogate-otlp", ["import", "INPUTS/surrogate.otlp.json", "--format", "otlp-json"], 20),
    ("import-lone-surrogate-chat", ["import", "INPUTS/surrogate.chat.json", "--format", "chat"], 20),
    ("import-nested-too-deeply", ["import", "INPUTS/deep.chat.json", "--format", "chat"], 20),
    ("import-empty-run-id", ["import", "INPUTS/empty-id.otlp.json", "--format", "otlp-json"], 20),
    ("import-1MB-run-id", ["import", "INPUTS/huge-id.otlp.json", "--format", "otlp-json"], 20),
    # files that never end or never open
    ("import-dev-zero", ["import", "/dev/zero", "--format", "otlp-json"], 20),
    ("import-a-fifo", ["import", "INPUTS/fifo", "--format", "otlp-json"], 20),
    ("db-a-fifo", ["--db", "INPUTS/fifo", "runs"], 20),
    ("db-dev-zero", ["--db", "/dev/zero", "show", "abcd"], 20),
    # a hostile Jaeger
    ("pull-jaeger-5000-digit-integer", ["pull", "b16", "--jaeger", "SERVER"], 20),
    ("pull-jaeger-nested-too-deeply", ["pull", "dee9", "--jaeger", "SERVER"], 20),
    ("pull-jaeger-endless-answer", ["pull", "e0d1e55", "--jaeger", "SERVER"], 20),
    ("pull-jaeger-gzip-bomb", ["pull", "b0b", "--jaeger", "SERVER"], 20),
    ("pull-jaeger-redirect-loop", ["pull", "100b", "--jaeger", "SERVER"], 20),
    ("pull-jaeger-one-byte-a-second", ["pull", "510e", "--jaeger", "SERVER", "--timeout", "2"], 8),
    # a hostile Phoenix
    ("pull-phoenix-5000-digit-integer", ["pull", "--phoenix", "SERVER", "--project", "bigint"], 20),
    ("pull-phoenix-nested-too-deeply", ["pull", "--phoenix", "SERVER", "--project", "deep"], 20),
    ("pull-phoenix-endless-answer", ["pull", "--phoenix", "SERVER", "--project", "endless"], 20),
    ("pull-phoenix-redirect-loop", ["pull", "--phoenix", "SERVER", "--project", "loop"], 20),
    ("pull-phoenix-one-byte-a-second", ["pull", "--phoenix", "SERVER", "--project", "slow", "--timeout", "2"], 8),
    # arguments out of range
    ("runs-limit-negative", ["runs", "--limit", "-1"], 20, "argument --limit"),
    ("show-width-negative", ["show", "RUN", "--width", "-5"], 20, "argument --width"),
    ("show-width-zero", ["show", "RUN", "--width", "0"], 20, "argument --width"),
    ("pull-timeout-negative", ["pull", "b16", "--jaeger", "SERVER", "--timeout", "-1"], 20, "argument --timeout"),
    ("pull-timeout-nan", ["pull", "b16", "--jaeger", "SERVER", "--timeout", "nan"], 20, "argument --timeout"),
    ("pull-limit-zero", ["pull", "--phoenix", "SERVER", "--project", "p", "--limit", "0"], 20, "argument --limit"),
    ("diagnose-min-confidence-above-1", ["diagnose", "RUN", "--min-confidence", "2"], 20, "argument --min-confidence"),
    ("diagnose-min-confidence-negative", ["diagnose", "RUN", "--min-confidence", "-0.5"], 20, "argument --min-confidence"),
    ("diagnose-all-jobs-zero", ["diagnose", "--all", "--jobs", "0"], 20, "argument --jobs"),
    ("repair-k-negative", [*REPAIR, "-k", "-1"], 20, "argument -k"),
    ("repair-budget-negative", [*REPAIR, "--budget", "-1"], 20, "argument --budget"),
    ("repair-max-replays-negative", [*REPAIR, "--max-replays", "-5"], 20, "argument --max-replays"),
    ("repair-max-seconds-negative", [*REPAIR, "--max-seconds", "-1"], 20, "argument --max-seconds"),
    ("repair-max-seconds-nan", [*REPAIR, "--max-seconds", "nan"], 20, "argument --max-seconds"),
    ("repair-max-seconds-infinite", [*REPAIR, "--max-seconds", "inf"], 20, "argument --max-seconds"),
    ("repair-concurrency-zero", [*REPAIR, "--concurrency", "0"], 20, "argument --concurrency"),
    ("repair-concurrency-not-a-number", [*REPAIR, "--concurrency", "two"], 20, "argument --concurrency"),
    ("bench-whowhen-limit-negative", [*WHOWHEN_BENCH, "--limit", "-3"], 20, "argument --limit"),
    ("bench-whowhen-limit-zero", [*WHOWHEN_BENCH, "--limit", "0"], 20, "argument --limit"),
    ("bench-whowhen-concurrency-zero", [*WHOWHEN_BENCH, "--concurrency", "0"], 20, "argument --concurrency"),
    ("bench-faults-jobs-zero", ["bench", "faults", "--jobs", "0"], 20, "argument --jobs"),
    ("bench-faults-jobs-negative", ["bench", "faults", "--jobs", "-2"], 20, "argument --jobs"),
]


@pytest.mark.parametrize(("argv", "bound", "names"), [pytest.param(*c[1:3], c[3] if len(c) > 3 else "", id=c[0])
                                                    for c in CASES])
def test_a_bad_input_is_one_line_and_exit_2(argv: list[str], bound: float, names: str, base_store: tuple[Path, str],
                                            inputs: Path, hostile: str, tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    shutil.copy(base_store[0], db)
    before = _stored(db)
    filled = [a.replace("INPUTS", str(inputs)).replace("SERVER", hostile).replace("RUN", base_store[1]) for a in argv]
    started = time.monotonic()
    proc = _cli(db, *filled, timeout=bound + 30)
    took = time.monotonic() - started
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert took < bound, f"took {took:.1f} s: {lines}"
    assert names in lines[0], lines[0]
    assert _stored(db) == before  # nothing stored before is lost or changed, nothing half-stored


# ------------------------------------------------------------------------------------------ a damaged stored step


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, str]:
    """A store of the Who&When fixtures, every run diagnosed but one whose stored step holds garbage JSON."""
    db = tmp_path / "store.db"
    assert _cli(db, "import", str(WHOWHEN), "--format", "whowhen").returncode == 0
    assert _cli(db, "diagnose", "--all").returncode == 0
    conn = sqlite3.connect(db)
    with conn:
        victim = conn.execute("SELECT run_id FROM runs ORDER BY run_id LIMIT 1 OFFSET 1").fetchone()[0]
        conn.execute("UPDATE steps SET data = '{garbage' WHERE run_id = ? AND idx = 1", (victim,))
    conn.close()
    return db, victim


@pytest.mark.parametrize("argv", [["diagnose", "--all", "--redo"], ["stats"], ["stats", "--json"],
                                  ["report", "--fleet", "--html", "OUT"]], ids=" ".join)
def test_a_damaged_step_row_is_one_line_in_a_fleet_command_and_the_rest_goes_on(
    damaged: tuple[Path, str], argv: list[str], tmp_path: Path
) -> None:
    db, victim = damaged
    total = len(_stored(db))
    proc = _cli(db, *[a.replace("OUT", str(tmp_path / "fleet.html")) for a in argv])
    assert proc.returncode == 0, proc.stderr
    about = [line for line in proc.stderr.splitlines() if victim in line]
    assert len(about) == 1 and "corrupt" in about[0] and "Traceback" not in proc.stderr, proc.stderr
    if argv[0] == "diagnose":
        assert len(proc.stdout.split()) == total - 1  # every other run diagnosed
    elif argv == ["stats", "--json"]:
        stats = json.loads(proc.stdout)
        assert stats["runs"] == total - 1 and [u["run_id"] for u in stats["unreadable"]] == [victim]


# ------------------------------------------------------------------------------------------ output that cannot be written

#: commands that write to stdout: (id, argv with RUN / INPUTS placeholders, exit code)
WRITERS = [
    ("runs", ["runs"], 0), ("runs-json", ["runs", "--json"], 0), ("show", ["show", "RUN"], 0),
    ("show-json", ["show", "RUN", "--json"], 0), ("export", ["export", "RUN"], 0), ("stats", ["stats"], 0),
    ("stats-json", ["stats", "--json"], 0), ("pairs-export", ["pairs", "export"], 0), ("help", ["--help"], 0),
    ("runs-help", ["runs", "--help"], 0), ("import", ["import", "SAMPLE", "--format", "otlp-json"], 0),
    ("unknown-run", ["show", "ffffffff"], 2), ("bad-argument", ["runs", "--limit", "-1"], 2),
]


@pytest.mark.parametrize(("argv", "code"), [pytest.param(c[1], c[2], id=c[0]) for c in WRITERS])
def test_a_closed_stdout_drops_the_output_and_keeps_the_exit_code(argv: list[str], code: int,
                                                                  base_store: tuple[Path, str], tmp_path: Path) -> None:
    """``>&-``: the command finishes with its own exit code, no traceback, and its output reaches nothing — not the
    store, which a closed descriptor 1 would otherwise hand to the database file (``import`` writes its ids)."""
    db = tmp_path / "store.db"
    shutil.copy(base_store[0], db)
    before = _stored(db)
    proc = _cli(db, *[a.replace("RUN", base_store[1]).replace("SAMPLE", str(SAMPLE)) for a in argv], stdout="closed")
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == (code != 0), proc.stderr
    assert _stored(db) == before  # the sample is in the store already: importing it again changes nothing
    check = _cli(db, "show", base_store[1], "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["run_id"] == base_store[1], check.stderr


@pytest.mark.parametrize(("argv", "code"), [pytest.param(c[1], c[2], id=c[0]) for c in WRITERS])
def test_a_full_device_is_one_line_and_exit_2(argv: list[str], code: int, base_store: tuple[Path, str],
                                             tmp_path: Path) -> None:
    """``> /dev/full``: the output the user asked for was not delivered — a user error like ``export -o FILE`` on
    a full disk: one line and exit 2 (a command that failed already keeps its own code and line)."""
    db = tmp_path / "store.db"
    shutil.copy(base_store[0], db)
    proc = _cli(db, *[a.replace("RUN", base_store[1]).replace("SAMPLE", str(SAMPLE)) for a in argv],
                stdout="/dev/full")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    if code == 0:
        assert lines[0] == "causaltrace: error: cannot write the output: No space left on device"
