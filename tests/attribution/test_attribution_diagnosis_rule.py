"""One rule for diagnoses (issue 19 item 5): a successful run is not diagnosed unless forced; an unknown /
incomplete outcome is diagnosed and says which failure anchor it assumed; Python ``diagnose`` stores its Diagnosis
like the CLI (``store=False`` opts out); the diagnosis a run shows is its strongest one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from causaltrace.attribution.engine import diagnose_sync
from causaltrace.cli import main
from causaltrace.collector.store import Store
from causaltrace.schema import Diagnosis, Outcome, Run, Step


def make_run(status: str, run_id: str = "rule-run") -> Run:
    steps = (
        Step(step_id=f"{run_id}-0", run_id=run_id, index=0, kind="task", agent="user", content="What is 17 + 25?"),
        Step(step_id=f"{run_id}-1", run_id=run_id, index=1, kind="message", agent="solver",
             content="17 + 25 is 41."),
        Step(step_id=f"{run_id}-2", run_id=run_id, index=2, kind="final_answer", agent="solver", content="41"),
    )
    return Run(run_id=run_id, framework="test", task="What is 17 + 25?", steps=steps,
               outcome=Outcome(status=status, final_answer="41"))  # type: ignore[arg-type]


def test_a_successful_run_is_not_diagnosed_unless_forced():
    d = diagnose_sync(make_run("success"), "graph", store=False)
    assert d.failed and "succeeded" in (d.failure_reason or "") and d.decisive_step_index is None
    forced = diagnose_sync(make_run("success"), "graph", force=True, store=False)
    assert not forced.failed and forced.decisive_step_index is not None


def test_an_unknown_outcome_is_diagnosed_and_says_what_it_assumed():
    d = diagnose_sync(make_run("unknown"), "graph", store=False)
    assert not d.failed and d.decisive_step_index is not None
    assert "outcome is unknown" in d.explanation and d.artifacts["assumed_failure"]["outcome"] == "unknown"
    assert "assumed_failure" not in diagnose_sync(make_run("failure"), "graph", store=False).artifacts


def test_python_diagnose_stores_like_the_cli_unless_told_not_to(capsys):
    run = make_run("failure")
    with Store() as store:
        store.save_run(run)
    diagnose_sync(run, "graph")
    diagnose_sync(run, "graph", store=False)
    with Store() as store:
        assert len(store.diagnoses(run.run_id)) == 1
    diagnose_sync(make_run("failure", "not-stored"), "graph")  # a run the store does not hold: nothing saved
    with Store() as store:
        assert store.diagnoses("not-stored") == []


def test_the_cli_refuses_a_successful_run_in_one_line(capsys):
    with Store() as store:
        store.save_run(make_run("success", "ok-run"))
    assert main(["diagnose", "ok-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "succeeded" in err and "--force" in err
    assert main(["diagnose", "ok-run", "--force", "--json"]) == 0


def test_the_strongest_diagnosis_is_the_one_a_run_shows():
    run = make_run("failure", "strong-run")
    now = datetime.now(UTC)

    def d(verified_by: str, minutes: int, failed: bool = False, step: int = 1) -> Diagnosis:
        return Diagnosis(run_id=run.run_id, method="graph", verified_by=verified_by, failed=failed,  # type: ignore[arg-type]
                         decisive_step_index=None if failed else step, created_at=now + timedelta(minutes=minutes))

    with Store() as store:
        store.save_run(run)
        assert store.strongest_diagnosis(run.run_id) is None
        store.save_diagnosis(d("heuristic", 0))
        store.save_diagnosis(d("replay", 1, step=2))
        store.save_diagnosis(d("prediction", 2))
        store.save_diagnosis(d("heuristic", 3))  # a newer but weaker answer does not win
        store.save_diagnosis(d("replay", 4, failed=True))
        best = store.strongest_diagnosis(run.run_id)
        assert best is not None and best.verified_by == "replay" and best.decisive_step_index == 2
        store.save_diagnosis(d("replay", 5, step=1))  # newest within the level
        assert store.strongest_diagnosis(run.run_id).decisive_step_index == 1  # type: ignore[union-attr]
        assert len(store.diagnoses(run.run_id)) == 6  # all are kept
