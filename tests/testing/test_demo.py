"""`causaltrace demo`: both frameworks' demo teams are traced, diagnosed, repaired by replay, exported, reported —
offline, into the test's own CAUSALTRACE_HOME."""

from __future__ import annotations

import json

import pytest

from causaltrace.cli import main
from causaltrace.collector.store import Store
from causaltrace.instrumentation import uninstrument
from causaltrace.instrumentation.tracing import reset_tracing


@pytest.fixture(autouse=True)
def _clean():
    yield
    uninstrument()
    reset_tracing()


def test_demo_both_frameworks(capsys, causaltrace_home):
    code = main(["demo", "--framework", "both"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    flat = " ".join((out + err).split())
    assert "argument b: 26 → 25 → flipped to success" in flat  # AutoGen: the solver's off-by-one tool argument
    # smolagents: the manager's range boundary, corrected as the span the finding names (range(1, 6) covers 1..5)
    assert "operator 1..5 → 1..6 (line 1) → flipped to success" in flat
    assert "autogen fix (verified by replay): argument b: 26 → 25 → answer" in flat
    assert "smolagents fix (verified by replay): operator 1..5 → 1..6 (line 1) → answer 91" in flat
    demo_dir = causaltrace_home / "demo"
    lines = [line.strip() for line in out.splitlines()]
    for framework in ("autogen", "smolagents"):
        report = demo_dir / f"{framework}-report.html"
        assert report.exists() and "step-node" in report.read_text()
        # the paths are printed whole on their own lines (never hard-wrapped, so they can be copied)
        assert f"report:       {report}" in lines
        assert f"repair pairs: {demo_dir / f'{framework}-repair-pairs.jsonl'}" in lines
        rows = [json.loads(line) for line in (demo_dir / f"{framework}-repair-pairs.jsonl").read_text().splitlines()]
        assert len(rows) == 1 and rows[0]["metadata"]["verified_by"] == "replay"
    with Store() as store:
        runs = store.list_runs()
        failed = [r for r in runs if r["status"] == "failure" and r["name"] in ("demo (autogen)", "demo (smolagents)")]
        assert len(failed) == 2
        for row in failed:
            diagnosis = store.diagnoses(row["run_id"])[-1]
            run = store.get_run(row["run_id"])
            step = run.step(diagnosis.decisive_step_id)
            assert diagnosis.verified_by == "replay"
            if run.framework == "autogen":
                assert (step.kind, step.agent, step.arguments) == ("tool_call", "solver", {"a": 17, "b": 26})
            else:
                assert step.agent == "manager" and "range(1, 6)" in str(step.arguments or step.inputs)
        # the replays are stored runs too, linked to the original
        replays = [store.get_run(r["run_id"]) for r in runs if r["name"] and "replay" in r["name"]]
        assert replays and all(r.metadata["replay"]["of"] in {f["run_id"] for f in failed} for r in replays)
