"""One answer to "which step?" on every CLI surface (issue 33 item 7 and its "two answers" bullet; issue 32 item 7).

The flagship AutoGen team (the demo's, on the reactive scripted models) fails; ``run --repair`` proves its decisive
step by replay. Afterwards ``diagnose`` stores a new ranking but prints the run's verdict (``Store.verdict``) with its
source, and ONE line when its own ranking puts another step first; ``show``, ``runs`` and ``report`` name the same
step; ``run --repair`` never prints a replay-verified step above a table ranked otherwise without saying so.
"""

from __future__ import annotations

import json
import re

import pytest

from causaltrace.cli import main
from causaltrace.collector.fleet_stats import is_replay_name
from causaltrace.collector.store import Store
from causaltrace.demo import autogen_team
from causaltrace.instrumentation import uninstrument
from causaltrace.instrumentation.tracing import reset_tracing

pytest.importorskip("autogen_agentchat")

FACTORY = "causaltrace.demo.autogen_team:build"
VERIFY = "causaltrace.demo.autogen_team:verify"


@pytest.fixture(autouse=True)
def _clean():
    yield
    uninstrument()
    reset_tracing()


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_surface_names_the_replay_verified_step(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    code, out, err = cli(capsys, "run", FACTORY, "--task", autogen_team.TASK, "--verify", VERIFY, "--repair")
    assert code == 3, err
    with Store() as db:
        (row,) = [r for r in db.list_runs() if not is_replay_name(r["name"])]
        run_id = row["run_id"]
        verdict = db.verdict(run_id)
    assert verdict.verified_by == "replay" and verdict.decisive_step_index == 6
    # run --repair: the verdict, its source, and a table that says when its ranking is not what replay proved
    assert "decisive error: step 6 (tool_call) by solver" in out
    assert "the run's verdict: replay-verified" in out, out
    table = re.search(r"(top candidates|candidates as ranked before replay \(#(\d+) first; replay proved #6\))", out)
    assert table, out
    first_row = re.search(r"│ 1\s+│ (\d+)\s+│", out).group(1)
    assert (table.group(2) or "6") == first_row  # the title tells the truth about the table below it

    # diagnose: stores its own ranking, prints the run's verdict, and one line when its ranking differs
    code, out, err = cli(capsys, "diagnose", run_id)
    assert code == 0, err
    with Store() as db:
        own = db.diagnoses(run_id)[-1]
        assert db.verdict(run_id) == verdict  # the replay-verified verdict stays
    assert own.verified_by != "replay"
    assert "decisive error: step 6 (tool_call) by solver" in out and "verified by replay" in out
    ranked_first = own.decisive_step_index if own.decisive_step_index is not None else own.candidates[0].index
    differs = [line for line in out.splitlines() if line.startswith("this diagnosis ranks")]
    if ranked_first == 6:
        assert differs == []
    else:
        assert differs == [f"this diagnosis ranks #{ranked_first} first; the run's verdict stays #6, verified by "
                           "replay"]
    code, out, _ = cli(capsys, "diagnose", run_id, "--json")
    summary = json.loads(out)["verdict"]
    assert summary["decisive_step_index"] == 6 and summary["verified_by"] == "replay"
    assert summary["is_this_diagnosis"] is False

    # show, runs, report: the same step, with its source
    code, out, _ = cli(capsys, "show", run_id)
    line = next(x for x in out.splitlines() if x.startswith("verdict ("))
    assert "replay-verified" in line and "verified by replay" in line and "decisive error at #6" in line
    code, out, _ = cli(capsys, "runs")
    assert re.search(r"#6 solver · \w+", out), out
    code, out, _ = cli(capsys, "runs", "--json")
    (listed,) = json.loads(out)
    assert listed["verdict"]["decisive_step_index"] == 6 and listed["verdict"]["verified_by"] == "replay"
    code, _, err = cli(capsys, "report", run_id, "--html", str(tmp_path / "r.html"))
    card = re.search(r'<section id="verdict".*?</section>', (tmp_path / "r.html").read_text(), re.S).group(0)
    assert "decisive error: #6 tool_call by solver" in card and "verified by replay" in card


def test_runs_without_a_diagnosis_show_an_empty_verdict_and_fit_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, _, err = cli(capsys, "run", "causaltrace.demo.autogen_team:build_fixed", "--task", autogen_team.TASK,
                       "--verify", VERIFY)
    assert code == 0, err
    code, out, _ = cli(capsys, "runs")
    assert code == 0 and "verdict" in out and all(len(line) <= 80 for line in out.splitlines())
    code, out, _ = cli(capsys, "runs", "--json")
    assert json.loads(out)[0]["verdict"] is None


def test_diagnose_adds_one_line_when_its_ranking_differs_from_the_verdict(capsys, monkeypatch):
    """A stored replay-verified correction at #7 stays the verdict; diagnose ranks another step first and says so in
    one line, under the verdict it prints."""
    from pathlib import Path

    from causaltrace.schema import Diagnosis

    monkeypatch.setenv("COLUMNS", "160")
    sample = Path(__file__).resolve().parents[1] / "examples" / "sample_run.otlp.jsonl"
    code, out, _ = cli(capsys, "import", str(sample), "--format", "otlp-json")
    run_id = out.strip()
    with Store() as db:
        step = db.get_run(run_id).step_at(7)
        db.save_diagnosis(Diagnosis(run_id=run_id, method="graph", decisive_step_id=step.step_id,
                                    decisive_step_index=7, agent=step.agent, confidence=1.0, verified_by="replay",
                                    basis="correction"))
    code, out, err = cli(capsys, "diagnose", run_id)
    assert code == 0, err
    with Store() as db:
        own = db.diagnoses(run_id)[-1]
    first = own.decisive_step_index if own.decisive_step_index is not None else own.candidates[0].index
    assert first != 7
    assert f"decisive error: step 7 ({step.kind}) by {step.agent}" in out
    assert "the run's verdict: replay-verified correction · method graph · verified by replay · basis correction" in out
    lines = [x for x in out.splitlines() if x.startswith("this diagnosis ranks")]
    assert lines == [f"this diagnosis ranks #{first} first; the run's verdict stays #7, verified by replay"]


def test_show_never_calls_an_uncertain_verdicts_step_decisive(capsys, monkeypatch):
    from pathlib import Path

    from causaltrace.schema import Candidate, Diagnosis

    monkeypatch.setenv("COLUMNS", "160")
    sample = Path(__file__).resolve().parents[1] / "examples" / "sample_run.otlp.jsonl"
    code, out, _ = cli(capsys, "import", str(sample), "--format", "otlp-json")
    run_id = out.strip()
    with Store() as db:
        run = db.get_run(run_id)
        top = [run.step_at(i) for i in (9, 6, 3)]
        db.save_diagnosis(Diagnosis(
            run_id=run_id, method="graph", decisive_step_id=top[0].step_id, decisive_step_index=9, agent=top[0].agent,
            confidence=0.2, basis="none",
            candidates=tuple(Candidate(step_id=s.step_id, index=s.index, agent=s.agent, score=0.3) for s in top)))
    code, out, _ = cli(capsys, "show", run_id)
    verdict = next(x for x in out.splitlines() if x.startswith("verdict ("))
    assert "uncertain" in verdict and "top 3: #9" in verdict and "decisive" not in verdict
    assert "◀ top candidate (uncertain)" in out and "◀ decisive" not in out
