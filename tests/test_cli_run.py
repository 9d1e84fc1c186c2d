"""`causaltrace run FACTORY --task T --verify V [--repair]` (issue 24 item 2): one run of a real team traced from
the command line, stored, and diagnosed — proven by replay with --repair — when it fails. Offline: the demo
teams on the reactive scripted models."""

from __future__ import annotations

import json

import pytest

from causaltrace.cli import main
from causaltrace.cli.run_team import EXIT_RUN_FAILED
from causaltrace.collector.store import Store
from causaltrace.demo import autogen_team, smolagents_team
from causaltrace.instrumentation import uninstrument
from causaltrace.instrumentation.tracing import reset_tracing

pytest.importorskip("smolagents")


@pytest.fixture(autouse=True)
def _clean():
    yield
    uninstrument()
    reset_tracing()


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_failing_smolagents_team_is_traced_stored_and_repaired(capsys):
    code, out, err = _run(capsys, "causaltrace.demo.smolagents_team:build", "--task", smolagents_team.TASK,
                          "--verify", "text:91", "--repair", "--json")
    assert code == EXIT_RUN_FAILED, err
    answer = json.loads(out)
    assert answer["outcome"]["status"] == "failure" and answer["outcome"]["final_answer"] == "55"
    diagnosis = answer["diagnosis"]
    assert diagnosis["verified_by"] == "replay" and diagnosis["agent"] == "manager"
    with Store() as store:
        run = store.get_run(answer["run_id"])
        assert run.framework == "smolagents" and run.task == smolagents_team.TASK and run.recording is not None
        assert run.step_at(diagnosis["decisive_step_index"]).kind == "tool_call"  # the manager's range(1, 6) code
        assert store.strongest_diagnosis(run.run_id).verified_by == "replay"
        assert len(store.repair_pairs(run_id=run.run_id)) == 1


def test_a_passing_team_exits_0_with_no_diagnosis(capsys):
    code, out, _ = _run(capsys, "causaltrace.demo.smolagents_team:build_fixed", "--task", smolagents_team.TASK,
                        "--verify", "causaltrace.demo.smolagents_team:verify")
    assert code == 0
    assert "smolagents · success" in out and "final answer: 91" in out and "diagnosis" not in out
    with Store() as store:
        (row,) = store.list_runs()
        assert row["status"] == "success" and store.diagnoses(row["run_id"]) == []


def test_an_async_autogen_team_is_awaited_and_diagnosed(capsys):
    pytest.importorskip("autogen_agentchat")
    code, out, err = _run(capsys, "causaltrace.demo.autogen_team:build", "--task", autogen_team.TASK,
                          "--verify", "causaltrace.demo.autogen_team:verify", "--name", "cli team")
    assert code == EXIT_RUN_FAILED, err
    assert "autogen · failure" in out and "diagnosis of run" in out
    with Store() as store:
        (row,) = store.list_runs()
        assert row["name"] == "cli team" and row["framework"] == "autogen"
        assert store.strongest_diagnosis(row["run_id"]) is not None


def test_a_team_that_raises_is_a_failed_run_and_a_bad_factory_one_line(capsys, tmp_path, monkeypatch):
    (tmp_path / "teams.py").write_text(
        "class Boom:\n    def run(self, task):\n        raise RuntimeError('the team fell over')\n\n"
        "def boom():\n    return Boom()\n\ndef number():\n    return 42\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "teams.py:boom", "--task", "t", "--verify", "text:x")
    assert code == EXIT_RUN_FAILED and "the team raised: RuntimeError: the team fell over" in out
    assert "Traceback" not in out + err
    for factory, message in (("teams.py:number", "FACTORY returned 'int', which has no run(task) method"),
                             ("no_such_module:build", "FACTORY: cannot import 'no_such_module'")):
        code, out, err = _run(capsys, factory, "--task", "t", "--verify", "text:x")
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1
