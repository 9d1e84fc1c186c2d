"""Nothing injected (issue 36 item 4): a stored run whose texts carry terminal control sequences — OSC 52 (write the
clipboard), OSC 8 (a disguised link), OSC 0 (the window title), CSI 2J (clear the screen), an 8-bit CSI (U+009B),
a BEL and a right-to-left override — prints none of them through any CLI surface: ``runs`` (table, wide, JSON),
``show`` (tree, JSON), ``diagnose`` (text, JSON, ``--all``), ``stats`` (tables, JSON), ``pairs export`` (JSON
Lines), ``run`` (a team's exception, text and JSON), an error line quoting a user module's exception or an argument,
and ``report``'s terminal lines. The CLI runs as a user runs it (a subprocess on pipes; with ``FORCE_COLOR`` rich writes its own colour codes,
which are the only escapes allowed). The HTML report escapes the same run's markup.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _builders import RunBuilder
from causaltrace.collector.store import Store
from causaltrace.report.terminal import guarded, safe_json, safe_text
from causaltrace.schema import Candidate, Diagnosis, Outcome, RepairPair, StepError

SRC = Path(__file__).resolve().parents[1] / "src"
EVIL = ("\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ \x1b]0;pwned\x07"
        " \x1b[2J\x1b[H \x9b31m \u202etxt.exe\u202c \x07 <script>alert(1)</script>")
RUN_ID = "evil-run-0001"
#: Any control character but newline and tab, besides the sequences rich writes itself under FORCE_COLOR (colours,
#: and the progress bar's cursor hide / show, line erase and cursor up) — never J (clear), H, ] (OSC) or ``\x9b``.
UNSAFE = re.compile(r"(?!\x1b\[\??[0-9;]*[mlhAK])[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _hostile_store(db: Path) -> None:
    run = (RunBuilder(RUN_ID).task("do it " + EVIL)
           .turn("agent" + EVIL).llm("agent" + EVIL, "I fetched " + EVIL).end_turn()
           .tool_call("agent" + EVIL, "fetch" + EVIL, {"url": EVIL},
                      status="error", error=StepError(type="Err" + EVIL, message="failed " + EVIL))
           .build(name="name " + EVIL, framework="autogen",
                  outcome=Outcome(status="failure", final_answer="answer " + EVIL, reason="reason " + EVIL)))
    with Store(db) as store:
        store.save_run(run)
        store.save_diagnosis(Diagnosis(
            run_id=RUN_ID, method="graph" + EVIL, verified_by="heuristic", decisive_step_index=2,
            decisive_step_id=run.steps[2].step_id, agent="agent" + EVIL, confidence=0.9,
            explanation="because " + EVIL,
            candidates=(Candidate(step_id=run.steps[2].step_id, index=2, agent="agent" + EVIL, score=0.9,
                                  reasons=("r " + EVIL,)),)))
        store.save_repair_pair(RepairPair(
            pair_id="evil-pair", run_id=RUN_ID, step_id=run.steps[2].step_id, step_index=2, step_kind=run.steps[2].kind,
            agent="agent" + EVIL, prompt=[{"role": "user", "content": "do it " + EVIL}],
            chosen=[{"role": "assistant", "content": "right " + EVIL}],
            rejected=[{"role": "assistant", "content": "wrong " + EVIL}]))


def _cli(db: Path, *argv: str, color: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TERM")}
    env.update(PYTHONPATH=str(SRC), CAUSALTRACE_DB=str(db), COLUMNS="200")
    if color:
        env["FORCE_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "causaltrace.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=120, encoding="utf-8", errors="surrogateescape")


def _strings(value: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


COMMANDS = [
    ("runs",), ("runs", "--wide"), ("runs", "--json"),
    ("show", RUN_ID), ("show", RUN_ID, "--json"), ("show", RUN_ID, "--width", "400"),
    ("diagnose", RUN_ID), ("diagnose", RUN_ID, "--json"), ("diagnose", "--all", "--redo"),
    ("stats",), ("stats", "--json"), ("pairs", "export"), ("pairs", "export", "--format", "openai-dpo"),
]


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("hostile") / "store.db"
    _hostile_store(db)
    return db


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("color", [False, True], ids=["pipe", "color"])
def test_no_control_sequence_of_a_stored_run_reaches_the_terminal(hostile_db: Path, argv: tuple[str, ...],
                                                                  color: bool) -> None:
    proc = _cli(hostile_db, *argv, color=color)
    assert proc.returncode == 0, proc.stderr
    if argv[0] == "pairs":  # JSON Lines: the same data, its C1 and direction marks written as \uXXXX
        (row,) = [json.loads(line) for line in proc.stdout.splitlines()]
        assert "wrong " + EVIL in _strings(row)
    assert "pwned" in proc.stdout or "--json" in argv or argv[:2] == ("diagnose", "--all") or argv[0] == "stats" \
        or argv[0] in ("runs", "pairs"), proc.stdout  # the text itself is shown, only its control characters are not
    for stream in (proc.stdout, proc.stderr):
        assert not UNSAFE.findall(stream), [m for m in UNSAFE.findall(stream)]


TEAMS = f"""
EVIL = {EVIL!r}


class Fetcher:
    def run(self, task):
        raise RuntimeError("the page said " + EVIL)


def fetcher():
    return Fetcher()
"""


@pytest.mark.parametrize("argv", [("run", "teams.py:fetcher", "--task", "fetch it", "--verify", "text:x"),
                                  ("run", "teams.py:fetcher", "--task", "fetch it", "--verify", "text:x", "--json"),
                                  ("run", "broken.py:team", "--task", "t", "--verify", "text:x")], ids=" ".join)
@pytest.mark.parametrize("color", [False, True], ids=["pipe", "color"])
def test_run_and_an_error_line_print_no_control_sequence(argv: tuple[str, ...], color: bool, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` prints the team's failure (here a fetched page's text in its exception) before the diagnosis, and an
    error line may quote a user module's exception: both escaped."""
    (tmp_path / "teams.py").write_text(TEAMS)
    (tmp_path / "broken.py").write_text(f"raise ValueError({EVIL!r})\n")
    monkeypatch.chdir(tmp_path)
    proc = _cli(tmp_path / "store.db", *argv, color=color)
    assert proc.returncode == (3 if "teams.py:fetcher" in argv else 1), proc.stderr
    assert "pwned" in proc.stdout + proc.stderr
    for stream in (proc.stdout, proc.stderr):
        assert not UNSAFE.findall(stream), [m for m in UNSAFE.findall(stream)]


def test_an_argument_error_quoting_the_argument_prints_no_control_sequence(hostile_db: Path) -> None:
    proc = _cli(hostile_db, "runs", "--limit", "1", EVIL.replace("\x00", ""))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "pwned" in proc.stderr and not UNSAFE.findall(proc.stderr), proc.stderr


def test_report_prints_no_control_sequence_and_its_html_escapes(hostile_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    proc = _cli(hostile_db, "report", RUN_ID, "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert not UNSAFE.findall(proc.stdout + proc.stderr)
    page = out.read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_shared_helper() -> None:
    """Plain output shows each control character as a visible escape; JSON stays the same data."""
    import io

    from rich.console import Console

    assert safe_text("a\x1b]0;t\x07b\u202e\n\t") == "a\\x1b]0;t\\x07b\\u202e\n\t"
    assert json.loads(safe_json({"k": EVIL})) == {"k": EVIL} and not UNSAFE.findall(safe_json({"k": EVIL}))
    buf = io.StringIO()
    console = guarded(guarded(Console(file=buf, width=80)))  # guarding twice adds one hook
    console.print("[bold]x[/] " + EVIL.replace("[", "\\["))
    assert len(console._render_hooks) == 1 and not UNSAFE.findall(buf.getvalue()) and "pwned" in buf.getvalue()
