"""The `causaltrace` command: runs / show / import / export / pull, JSON output, and one-line user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from causaltrace.cli import main
from causaltrace.collector.otlp import load_otlp_json
from causaltrace.collector.store import Store

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "sample_run.otlp.jsonl"
FIXTURES = ROOT / "tests" / "fixtures" / "whowhen"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_runs_show_of_the_bundled_sample(capsys):
    code, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    assert code == 0
    run_id = out.strip()
    assert len(out.splitlines()) == 1
    code, out, _ = run_cli(capsys, "runs", "--json")
    rows = json.loads(out)
    assert code == 0 and rows[0]["run_id"] == run_id
    assert rows[0]["status"] == "failure" and rows[0]["steps"] == 16 and rows[0]["framework"] == "synthetic"
    assert rows[0]["started_at"]
    code, out, _ = run_cli(capsys, "show", run_id[:8], "--json")
    shown = json.loads(out)
    assert shown["run_id"] == run_id and len(shown["steps"]) == 16
    first = shown["steps"][6]
    assert {"step_id", "index", "kind", "agent", "status", "depends_on"} <= set(first)
    assert first["kind"] == "tool_call" and first["depends_on"][0]["kind"] == "produced_by"
    code, out, _ = run_cli(capsys, "show", run_id)
    assert code == 0
    assert "#9 tool_response solver lookup error" in out and "tool_result_of←#7" in out
    assert "final answer does not contain '55'" in out


def test_runs_failed_filter(capsys):
    run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    run_cli(capsys, "import", str(FIXTURES), "--format", "whowhen")
    code, out, _ = run_cli(capsys, "runs", "--json")
    everything = json.loads(out)
    code, out, _ = run_cli(capsys, "runs", "--failed", "--json")
    failed = json.loads(out)
    assert {r["status"] for r in failed} == {"failure"}
    assert len(everything) >= len(failed) >= 2


def test_export_then_import_gives_an_identical_run(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    run_id = out.strip()
    target = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "export", run_id, "--format", "otlp-json", "-o", str(target))
    assert code == 0 and "wrote" in err
    with Store() as store:
        original = store.get_run(run_id)
    assert load_otlp_json(target) == [original]
    code, out, _ = run_cli(capsys, "export", run_id)
    assert load_otlp_json(out) == [original]


def test_export_redact_applies_the_payload_policy(capsys, monkeypatch):
    _, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    monkeypatch.setenv("CAUSALTRACE_HIDE_OUTPUTS", "true")
    code, out, _ = run_cli(capsys, "export", out.strip(), "--redact")
    assert code == 0
    assert "causaltrace.step.content" not in out and "causaltrace.step.kind" in out


def test_whowhen_import_keeps_labels(capsys):
    code, out, _ = run_cli(capsys, "import", str(next(FIXTURES.rglob("*.json"))), "--format", "whowhen")
    assert code == 0
    with Store() as store:
        run = store.get_run(out.strip())
    assert run.framework == "whowhen" and run.annotations is not None and run.annotations.mistake_step is not None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "does-not-exist"], "no run with id or prefix"),
        (["import", "/no/such/file", "--format", "otlp-json"], "no such file"),
        (["export", "nope"], "no run with id or prefix"),
        (["pull", "0123", "--jaeger", "http://127.0.0.1:9"], "cannot reach Jaeger"),
    ],
)
def test_user_errors_are_one_line_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_malformed_trace_file_is_a_clear_error_and_loses_nothing(capsys, tmp_path):
    _, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SAMPLE.read_text() + "{not json\n")
    code, _, err = run_cli(capsys, "import", str(bad), "--format", "otlp-json")
    assert code == 2 and "line 2" in err
    code, out2, _ = run_cli(capsys, "runs", "--json")
    assert [r["run_id"] for r in json.loads(out2)] == [out.strip()]


def test_console_script_entry_point(tmp_path):
    env_home = tmp_path / "home"
    proc = subprocess.run(
        [sys.executable, "-m", "causaltrace.cli", "--db", str(env_home / "x.db"), "runs", "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout) == []


# ------------------------------------------------------------------------------------- readable at real sizes


def _parsers(parser, name="causaltrace"):
    """Every (command name, parser) of the command, sub-commands included."""
    import argparse

    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_argument_of_every_command_has_help():
    import argparse

    from causaltrace.cli import build_parser

    missing = [f"{name} {action.option_strings or action.dest}" for name, parser in _parsers(build_parser())
               for action in parser._actions
               if not action.help and not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))]
    assert missing == []


def test_repair_help_names_the_run_and_the_text_verifier(capsys):
    with pytest.raises(SystemExit):
        main(["repair", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "RUN_ID a failed run" in out and "text:ANSWER" in out


def _store_runs(*runs):
    with Store() as store:
        for run in runs:
            store.import_run(run)


def _long_runs():
    from _builders import RunBuilder

    task = "Find the opening hours of the invented museum on Mondays, then compare them with the library's " * 2
    return [
        RunBuilder("whowhen-algo-1-aaaa1111").task(task).llm("a", "x").build(framework="whowhen", task=task),
        RunBuilder("whowhen-algo-10-bbbb2222").task(task).llm("a", "x").build(framework="whowhen", task=task),
        RunBuilder("0123456789abcdef0123456789abcdef").task(task).llm("a", "x").build(framework="smolagents", task=task),
        RunBuilder("0123456789abffff0123456789abcdef").task(task).llm("a", "x").build(
            framework="openinference-langgraph", task=task),
    ]


def test_runs_fits_80_columns_with_unique_id_prefixes_and_whole_statuses(capsys, monkeypatch):
    runs = _long_runs()
    _store_runs(*runs)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "runs")
    assert code == 0
    lines = out.splitlines()
    assert lines and max(len(line) for line in lines) <= 80
    body = [line.split() for line in lines[3:]]
    shown = {cols[0] for cols in body}
    assert shown == {"whowhen-algo-1-", "whowhen-algo-10", "0123456789abc", "0123456789abf"}
    assert all(cols[1] == "unknown" for cols in body)  # never "unkn…"
    assert all("…" in line for line in lines[3:])  # the task is cut to what is left, on one line
    for prefix in shown:  # every shown prefix names its run
        code, out, _ = run_cli(capsys, "show", prefix, "--json")
        assert code == 0 and json.loads(out)["run_id"].startswith(prefix)


def test_runs_wide_shows_everything_and_narrow_terminals_drop_columns_not_ids(capsys, monkeypatch):
    runs = _long_runs()
    _store_runs(*runs)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "runs", "--wide")
    flat = " ".join(out.replace("│", " ").split())
    assert code == 0 and all(run.run_id in out for run in runs) and "openinference-langgraph" in out
    assert "compare them with the library's Find the" in flat  # the whole task, folded over lines
    monkeypatch.setenv("COLUMNS", "44")
    code, out, _ = run_cli(capsys, "runs")
    assert max(len(line) for line in out.splitlines()) <= 44
    assert "whowhen-algo-10 " in out and "unknown" in out and "framework" not in out


def test_runs_limit_counts_after_the_replays_are_left_out(capsys):
    from _builders import RunBuilder

    _store_runs(*(RunBuilder(f"run-{i}", t0=None).task("t").build(name=f"team{' (replay)' if i % 2 else ''}")
                  for i in range(6)))
    _, out, _ = run_cli(capsys, "runs", "--limit", "2", "--json")
    assert [r["name"] for r in json.loads(out)] == ["team", "team"]
    _, out, _ = run_cli(capsys, "runs", "--limit", "2", "--replays", "--json")
    assert len(json.loads(out)) == 2


def test_unique_prefixes():
    from causaltrace.cli.inspection import unique_prefixes

    ids = ["whowhen-hand-2-33672f", "whowhen-hand-20-ab12", "a39f2a2657f04da1", "a39f2a2657f0ffff", "b" * 32, "short"]
    assert unique_prefixes(ids) == {
        "whowhen-hand-2-33672f": "whowhen-hand-2-", "whowhen-hand-20-ab12": "whowhen-hand-20",
        "a39f2a2657f04da1": "a39f2a2657f04", "a39f2a2657f0ffff": "a39f2a2657f0f", "b" * 32: "b" * 8,
        "short": "short",
    }


def test_show_cuts_step_text_to_the_line_of_an_80_column_terminal(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "show", out.strip())
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80
    assert "Plan: add the integers 1..10 with add_range(start=1, stop=10), then r…" in out


def test_show_names_the_strongest_diagnosis_and_marks_its_step(capsys, monkeypatch):
    """``show`` says what the run's verdict found (a replay-verified correction over a finding-backed ranking,
    issue 32 item 7) and marks its decisive step in the tree; ``--json`` carries it; a run without one says how to
    get it."""
    from causaltrace.schema import Diagnosis

    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = run_cli(capsys, "import", str(SAMPLE), "--format", "otlp-json")
    run_id = out.strip()
    code, out, _ = run_cli(capsys, "show", run_id)
    assert code == 0 and f"diagnosis: none yet — causaltrace diagnose {run_id[:8]}" in out
    db = Store()
    run = db.get_run(run_id)
    step7, step9 = run.step_at(7), run.step_at(9)
    db.save_diagnosis(Diagnosis(run_id=run_id, method="graph", decisive_step_id=step9.step_id,
                                decisive_step_index=9, agent=step9.agent, confidence=0.9, basis="finding"))
    db.save_diagnosis(Diagnosis(run_id=run_id, method="graph", decisive_step_id=step7.step_id,
                                decisive_step_index=7, agent=step7.agent, confidence=1.0, verified_by="replay",
                                basis="correction"))
    db.save_diagnosis(Diagnosis(run_id=run_id, method="graph", decisive_step_id=step9.step_id,
                                decisive_step_index=9, agent=step9.agent, confidence=0.8,
                                basis="finding"))  # newer, weaker
    code, out, _ = run_cli(capsys, "show", run_id)
    assert ("verdict (replay-verified correction · method graph · verified by replay · basis correction): "
            "decisive error at #7 by") in out
    marked = [line for line in out.splitlines() if "◀ decisive" in line]
    assert len(marked) == 1 and "#7 " in marked[0]
    code, out, _ = run_cli(capsys, "show", run_id, "--json")
    shown = json.loads(out)
    assert shown["diagnosis"]["decisive_step_index"] == 7 and shown["diagnosis"]["verified_by"] == "replay"
